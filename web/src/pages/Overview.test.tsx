import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { mockApi, renderAs, routes, seriousViolations, sentTo, type Answer } from '../testing';
import type { GpuDevice } from '../types';
import { Overview } from './Overview';

const card = (index: number, more: Partial<GpuDevice> = {}): GpuDevice => ({
  uuid: `GPU-${String(index).repeat(8)}-aaaa-bbbb`,
  index,
  model: 'Tesla T4',
  memoryMiB: 16384,
  allocatedMemoryMiB: 0,
  tenants: [],
  mode: 'free',
  healthy: true,
  capacityMiB: 16384,
  freeMemoryMiB: 16384,
  allocations: [],
  replicas: { total: 4, used: 0 },
  excluded: false,
  shareable: true,
  enforced: true,
  ...more,
});

const shared = (index: number, node?: string) =>
  card(index, {
    node,
    mode: 'memory',
    allocatedMemoryMiB: 12288,
    tenants: ['foo', '(other)'],
    allocations: [
      { name: 'foo', memoryMiB: 8192 },
      { name: '(other)', memoryMiB: 4096 },
    ],
    enforced: false,
  });

afterEach(() => vi.unstubAllGlobals());

describe('Overview on a single server', () => {
  it('counts free cards and splits a card by tenant', async () => {
    const unhealthy = card(2, { healthy: false });
    mockApi(
      routes({
        'GET /api/v1/resources/gpus': () => ({
          data: { devices: [card(0), shared(1), unhealthy], simulated: false, source: 'nvml' },
        }),
      }),
    );
    renderAs('user', <Overview />);

    expect(await screen.findByText('1 of 3 cards free')).toBeTruthy();
    expect(screen.getByText('12 GB of 48 GB GPU memory allocated')).toBeTruthy();
    expect(screen.getByText('Source: nvml')).toBeTruthy();
    expect(screen.getByRole('heading', { level: 2, name: 'Cards of this server' })).toBeTruthy();

    const bar = screen.getByRole('meter', { name: 'GPU 1 memory' });
    const tenants = [...bar.querySelectorAll('[data-tenant]')].map((s) => s.getAttribute('data-tenant'));
    expect(tenants).toEqual(['foo', '(other)']);
    expect(screen.getByText('12 GB of 16 GB allocated')).toBeTruthy();
    expect(screen.getByText('foo: 8 GB')).toBeTruthy();
    expect(screen.getByText('shares not enforced')).toBeTruthy();
    expect(screen.getByText('unhealthy')).toBeTruthy();
    expect(screen.getByRole('meter', { name: 'GPU 0 memory' }).querySelectorAll('[data-tenant]')).toHaveLength(0);
    // No fleet: no nodes asked for, no cordon.
    expect(screen.queryByRole('button')).toBeNull();
  });

  it('shows the API message when the cards cannot be read', async () => {
    mockApi(routes({ 'GET /api/v1/resources/gpus': () => ({ code: 1109, msg: 'token has role nobody' }) }));
    renderAs('viewer', <Overview />);
    expect((await screen.findByRole('alert')).textContent).toBe('token has role nobody');
  });
});

describe('Overview of live use and health', () => {
  const sampledAt = new Date().toISOString();
  const busy = card(0, {
    mode: 'memory',
    allocatedMemoryMiB: 8192,
    tenants: ['foo'],
    allocations: [{ name: 'foo', memoryMiB: 8192, memoryUsedMiB: 3072, utilization: 37 }],
    usage: { memoryUsedMiB: 4301, utilization: 37, foreignMemoryMiB: 1229, processes: 2, sampledAt },
  });
  const quiet = card(1, { usage: { memoryUsedMiB: 0, utilization: -1, foreignMemoryMiB: 0, processes: 0, sampledAt } });
  const broken = card(2, {
    healthy: false,
    unhealthy: {
      reason: 'xid',
      xid: 79,
      since: new Date(Date.now() - 5 * 60_000).toISOString(),
      detail: 'XID 79 (GPU has fallen off the bus)',
    },
    usage: null,
  });
  const UUID2 = broken.uuid;
  const gpus = (devices: GpuDevice[]) => () => ({ data: { devices, simulated: true, source: 'simulated' } });

  it('shows each card\'s used memory, utilization, foreign memory and an unhealthy card\'s reason', async () => {
    mockApi(routes({ 'GET /api/v1/resources/gpus': gpus([busy, quiet, broken]) }));
    renderAs('user', <Overview />);

    const used = await screen.findByRole('meter', { name: 'GPU 0 memory used' });
    expect(used.getAttribute('aria-valuenow')).toBe('4301');
    expect(used.getAttribute('aria-valuemax')).toBe('16384');
    expect(used.getAttribute('aria-valuetext')).toBe('4.2 GB of 16 GB used');
    expect((used.firstElementChild as HTMLElement).style.width).toBe(`${(4301 / 16384) * 100}%`);
    // The held bar keeps its tenants; the used meter is apart from it.
    expect(screen.getByRole('meter', { name: 'GPU 0 memory' }).querySelector('[data-tenant="foo"]')).toBeTruthy();
    expect(screen.getByText('4.2 GB used, utilization 37 %')).toBeTruthy();
    expect(screen.getByText('1.2 GB used outside gpubox')).toBeTruthy();
    expect(screen.getByText('foo: 8 GB, uses 3 GB at 37 %')).toBeTruthy();

    // Unknown utilization, no foreign memory: nothing made up.
    expect(screen.getByText('0 B used, utilization unknown')).toBeTruthy();
    expect(screen.getAllByText(/used outside gpubox/)).toHaveLength(1);

    // Unhealthy: said in words, not only by colour; no reading, no used meter.
    expect(screen.getByText('Unhealthy: XID 79 (GPU has fallen off the bus), marked 5m ago')).toBeTruthy();
    expect(screen.queryByRole('meter', { name: 'GPU 2 memory used' })).toBeNull();
    expect(screen.getByText('1 of 3 cards free')).toBeTruthy();
    // Not an admin: no way to mark it healthy.
    expect(screen.queryByRole('button')).toBeNull();
  });

  it('shows a viewer no Mark healthy button', async () => {
    mockApi(routes({ 'GET /api/v1/resources/gpus': gpus([broken]) }));
    renderAs('viewer', <Overview />);
    await screen.findByText(/Unhealthy: XID 79/);
    expect(screen.queryByRole('button', { name: /Mark healthy/ })).toBeNull();
  });

  it('lets an admin mark a card healthy, and reloads', async () => {
    let healthy = false;
    const sent = mockApi(
      routes({
        'GET /api/v1/resources/gpus': () =>
          gpus([busy, healthy ? { ...broken, healthy: true, unhealthy: undefined } : broken])(),
        [`PATCH /api/v1/resources/gpus/${UUID2}/healthy`]: () => {
          healthy = true;
          return { data: { ...broken, healthy: true } };
        },
      }),
    );
    renderAs('admin', <Overview />);
    // Only the unhealthy card has the button.
    expect(await screen.findAllByRole('button', { name: /Mark healthy/ })).toHaveLength(1);
    fireEvent.click(screen.getByRole('button', { name: 'Mark healthy: GPU 2' }));
    await waitFor(() => expect(screen.queryByText(/Unhealthy:/)).toBeNull());
    expect(screen.queryByRole('button', { name: /Mark healthy/ })).toBeNull();
    expect(sentTo(sent, `PATCH /api/v1/resources/gpus/${UUID2}/healthy`)).toEqual([
      { method: 'PATCH', url: `/api/v1/resources/gpus/${UUID2}/healthy`, body: undefined },
    ]);
  });

  it("shows the API's message beside Mark healthy when it fails", async () => {
    const sent = mockApi(
      routes({
        'GET /api/v1/resources/gpus': gpus([busy, broken]),
        [`PATCH /api/v1/resources/gpus/${UUID2}/healthy`]: () => ({ status: 404, code: 1004, msg: `no GPU ${UUID2}` }),
      }),
    );
    renderAs('admin', <Overview />);
    const button = await screen.findByRole('button', { name: 'Mark healthy: GPU 2' });
    fireEvent.click(button);
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toBe(`no GPU ${UUID2}`);
    // In the unhealthy card's row, where the admin acted.
    expect(alert.closest('tr')?.contains(button)).toBe(true);
    expect(sent.filter((r) => r.method === 'PATCH').map((r) => r.url)).toEqual([
      `/api/v1/resources/gpus/${UUID2}/healthy`,
    ]);
    expect(screen.getByText(/Unhealthy: XID 79/)).toBeTruthy();
  });

  it('passes axe with usage and an unhealthy card', async () => {
    mockApi(routes({ 'GET /api/v1/resources/gpus': gpus([busy, quiet, broken]) }));
    renderAs('admin', <Overview />);
    await screen.findByRole('button', { name: 'Mark healthy: GPU 2' });
    expect(await seriousViolations()).toEqual([]);
  });
});

describe('Overview in a fleet', () => {
  const nodes = [
    { name: 'n1', state: 'ready', labels: { zone: 'a' }, lastHeartbeat: new Date().toISOString(), cordoned: false },
    { name: 'n2', state: 'unreachable', labels: {}, lastHeartbeat: null, cordoned: false },
  ];
  const fleetRoutes = (cordon: () => Answer) => ({
    'GET /api/v1/resources/gpus': () => ({
      data: { devices: [card(0, { node: 'n1' }), shared(1, 'n1')], simulated: true, source: 'simulated' },
    }),
    'GET /api/v1/nodes': () => ({ data: { nodes } }),
    'PATCH /api/v1/nodes/n1/cordon': cordon,
  });

  it('groups the cards by node and names bars by node', async () => {
    mockApi(routes(fleetRoutes(() => ({}))));
    renderAs('viewer', <Overview />, true);
    const n1 = await screen.findByRole('region', { name: 'Node n1' });
    expect(within(n1).getByText('zone=a')).toBeTruthy();
    expect(within(n1).getByRole('meter', { name: 'n1 GPU 1 memory' }).querySelector('[data-tenant="foo"]')).toBeTruthy();
    const n2 = screen.getByRole('region', { name: 'Node n2' });
    expect(within(n2).getByText('unreachable')).toBeTruthy();
    expect(within(n2).queryByRole('meter')).toBeNull();
    expect(screen.getByText('1 of 2 cards free')).toBeTruthy();
    // Not an admin: no cordon buttons.
    expect(screen.queryByRole('button', { name: /cordon/i })).toBeNull();
  });

  it('lets an admin cordon a node and shows a failure beside the button', async () => {
    const sent = mockApi(routes(fleetRoutes(() => ({ code: 1100, msg: "no node named 'n1'" }))));
    renderAs('admin', <Overview />, true);
    const n1 = await screen.findByRole('region', { name: 'Node n1' });
    fireEvent.click(within(n1).getByRole('button', { name: 'Cordon n1' }));
    expect((await within(n1).findByRole('alert')).textContent).toBe("no node named 'n1'");
    expect(sentTo(sent, 'PATCH /api/v1/nodes/n1/cordon')).not.toHaveLength(0);
    expect(within(screen.getByRole('region', { name: 'Node n2' })).queryByRole('alert')).toBeNull();
  });

  it('reloads after a cordon', async () => {
    let cordoned = false;
    mockApi(
      routes({
        ...fleetRoutes(() => {
          cordoned = true;
          return { data: { node: {} } };
        }),
        'GET /api/v1/nodes': () => ({
          data: { nodes: [{ ...nodes[0], cordoned, state: cordoned ? 'cordoned' : 'ready' }] },
        }),
      }),
    );
    renderAs('admin', <Overview />, true);
    fireEvent.click(await screen.findByRole('button', { name: 'Cordon n1' }));
    await waitFor(() => expect(screen.getByRole('button', { name: 'Uncordon n1' })).toBeTruthy());
    expect(screen.getByText('cordoned')).toBeTruthy();
  });

  it('passes axe', async () => {
    mockApi(routes(fleetRoutes(() => ({}))));
    renderAs('admin', <Overview />, true);
    await screen.findByRole('region', { name: 'Node n1' });
    expect(await seriousViolations()).toEqual([]);
  });
});
