import axe from 'axe-core';
import { fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { SessionContext, sessionFor } from '../session';
import type { GpuDevice, Role, WhoAmI } from '../types';
import { Overview } from './Overview';

const me = (role: Role): WhoAmI => ({
  name: role === 'admin' ? 'root' : 'alice',
  role,
  source: 'api',
  quota: { cards: null, shareMiB: null, instances: null, volumeBytes: null },
  usage: { cards: 0, shareMiB: 0, instances: 0, volumeBytes: 0 },
  quotaApplies: role === 'user',
});

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

type Answer = { code?: number; msg?: string; data?: unknown };

/** Answers fetch from `routes` ("METHOD path"), recording every request. */
function stubApi(routes: Record<string, () => Answer>) {
  const calls: string[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      const key = `${init.method} ${url}`;
      calls.push(key);
      const a = routes[key]?.() ?? { code: 1101, msg: `no route ${key}` };
      return { status: 200, json: async () => ({ code: a.code ?? 200, msg: a.msg ?? 'success', data: a.data ?? null }) };
    }),
  );
  return calls;
}

function show(role: Role, fleet: boolean) {
  return render(
    <SessionContext.Provider value={sessionFor(me(role), fleet, () => {})}>
      <Overview />
    </SessionContext.Provider>,
  );
}

/** axe's serious and critical findings on the page (contrast needs a real browser: not here). */
async function seriousViolations(): Promise<string[]> {
  const r = await axe.run(document.body, { rules: { 'color-contrast': { enabled: false } } });
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`);
}

afterEach(() => vi.unstubAllGlobals());

describe('Overview on a single server', () => {
  it('counts free cards and splits a card by tenant', async () => {
    const unhealthy = card(2, { healthy: false });
    stubApi({
      'GET /api/v1/resources/gpus': () => ({
        data: { devices: [card(0), shared(1), unhealthy], simulated: false, source: 'nvml' },
      }),
    });
    show('user', false);

    expect(await screen.findByText('1 of 3 cards free')).toBeTruthy();
    expect(screen.getByText('12 GB of 48 GB GPU memory allocated')).toBeTruthy();
    expect(screen.getByText('Source: nvml')).toBeTruthy();
    expect(screen.getByRole('heading', { level: 2, name: 'Cards of this server' })).toBeTruthy();

    const bar = screen.getByRole('meter', { name: 'GPU 1 memory' });
    const tenants = [...bar.querySelectorAll('[data-tenant]')].map((s) => s.getAttribute('data-tenant'));
    expect(tenants).toEqual(['foo', '(other)']);
    expect(screen.getByText('12 GB of 16 GB allocated')).toBeTruthy();
    expect(screen.getByText('foo: 8192 MiB')).toBeTruthy();
    expect(screen.getByText('shares not enforced')).toBeTruthy();
    expect(screen.getByText('unhealthy')).toBeTruthy();
    expect(screen.getByRole('meter', { name: 'GPU 0 memory' }).querySelectorAll('[data-tenant]')).toHaveLength(0);
    // No fleet: no nodes asked for, no cordon.
    expect(screen.queryByRole('button')).toBeNull();
  });

  it('shows the API message when the cards cannot be read', async () => {
    stubApi({ 'GET /api/v1/resources/gpus': () => ({ code: 1109, msg: 'token has role nobody' }) });
    show('viewer', false);
    expect((await screen.findByRole('alert')).textContent).toBe('token has role nobody');
  });
});

describe('Overview in a fleet', () => {
  const nodes = [
    { name: 'n1', state: 'ready', labels: { zone: 'a' }, lastHeartbeat: new Date().toISOString(), cordoned: false },
    { name: 'n2', state: 'unreachable', labels: {}, lastHeartbeat: null, cordoned: false },
  ];
  const routes = (cordon: () => Answer) => ({
    'GET /api/v1/resources/gpus': () => ({
      data: { devices: [card(0, { node: 'n1' }), shared(1, 'n1')], simulated: true, source: 'simulated' },
    }),
    'GET /api/v1/nodes': () => ({ data: { nodes } }),
    'PATCH /api/v1/nodes/n1/cordon': cordon,
  });

  it('groups the cards by node and names bars by node', async () => {
    stubApi(routes(() => ({})));
    show('viewer', true);
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
    const calls = stubApi(routes(() => ({ code: 1100, msg: "no node named 'n1'" })));
    show('admin', true);
    const n1 = await screen.findByRole('region', { name: 'Node n1' });
    fireEvent.click(within(n1).getByRole('button', { name: 'Cordon n1' }));
    expect((await within(n1).findByRole('alert')).textContent).toBe("no node named 'n1'");
    expect(calls).toContain('PATCH /api/v1/nodes/n1/cordon');
    expect(within(screen.getByRole('region', { name: 'Node n2' })).queryByRole('alert')).toBeNull();
  });

  it('reloads after a cordon', async () => {
    let cordoned = false;
    stubApi({
      ...routes(() => {
        cordoned = true;
        return { data: { node: {} } };
      }),
      'GET /api/v1/nodes': () => ({
        data: { nodes: [{ ...nodes[0], cordoned, state: cordoned ? 'cordoned' : 'ready' }] },
      }),
    });
    show('admin', true);
    fireEvent.click(await screen.findByRole('button', { name: 'Cordon n1' }));
    await waitFor(() => expect(screen.getByRole('button', { name: 'Uncordon n1' })).toBeTruthy());
    expect(screen.getByText('cordoned')).toBeTruthy();
  });

  it('passes axe', async () => {
    stubApi(routes(() => ({})));
    show('admin', true);
    await screen.findByRole('region', { name: 'Node n1' });
    expect(await seriousViolations()).toEqual([]);
  });
});
