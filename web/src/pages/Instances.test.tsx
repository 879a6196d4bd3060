import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { changes, mockApi, renderAs } from '../testing';
import { Instances } from './Instances';
import { replicaSet } from './instancesTestUtil';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const SETS = [
  replicaSet({
    name: 'whole',
    gpus: ['GPU-1', 'GPU-2'],
    ports: [
      { hostPort: 40001, containerPort: 22, protocol: 'tcp' },
      { hostPort: 40002, containerPort: 8888, protocol: 'tcp' },
    ],
  }),
  replicaSet({
    name: 'shared',
    gpus: ['GPU-3'],
    gpuShares: [{ uuid: 'GPU-3', memoryMiB: 8192, mode: 'memory' }],
    owner: 'bob',
    status: 'exited',
  }),
  replicaSet({
    name: 'sliced',
    gpus: ['GPU-4'],
    gpuShares: [{ uuid: 'GPU-4', memoryMiB: 4096, mode: 'timeslice', replica: 0 }],
    ports: [],
    node: 'n2',
  }),
];

const listing = () => mockApi(({ url }) => (url === '/api/v1/replicaSet' ? { data: { replicaSets: SETS } } : undefined));

const row = (name: string) => screen.getByRole('link', { name }).closest('tr') as HTMLElement;

describe('Instances', () => {
  it('lists each set with state, GPUs, ports, owner and age', async () => {
    listing();
    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'whole' });

    expect(screen.getByRole('link', { name: 'whole' }).getAttribute('href')).toBe('#/instances/whole');
    const whole = within(row('whole'));
    expect(whole.getByText('running')).toHaveProperty('className', 'state state-running');
    expect(whole.getByText('2')).toBeTruthy();
    expect(whole.getByText('40001→22/tcp, 40002→8888/tcp')).toBeTruthy();
    expect(whole.getByText('alice')).toBeTruthy();
    expect(whole.getByText('3h')).toBeTruthy();

    const shared = within(row('shared'));
    expect(shared.getByText('8 GB share ×1')).toBeTruthy();
    expect(shared.getByText('bob')).toBeTruthy();
    // Docker's status shows only where it differs from gpubox's state.
    expect(shared.getByText(/Docker: exited/)).toBeTruthy();
    expect(whole.queryByText(/Docker:/)).toBeNull();

    expect(within(row('sliced')).getByText('time-slice ×1')).toBeTruthy();
    // A single server has no node column.
    expect(screen.queryByRole('columnheader', { name: 'Node' })).toBeNull();
  });

  it("shows the busiest card's utilization and an idle badge when the list carries usage", async () => {
    const card = (index: number, utilization: number) => ({
      uuid: `GPU-${index}`,
      index,
      memoryUsedMiB: 100,
      utilization,
      shareMiB: 8192,
      overShare: false,
      healthy: true,
    });
    const sampledAt = new Date().toISOString();
    mockApi(() => ({
      data: {
        replicaSets: [
          replicaSet({ name: 'busy', usage: { sampledAt, idleSince: null, cards: [card(0, 12), card(1, 37)] } }),
          replicaSet({ name: 'lazy', usage: { sampledAt, idleSince: sampledAt, cards: [card(2, 0)] } }),
          replicaSet({ name: 'unknown', usage: { sampledAt, idleSince: null, cards: [card(3, -1)] } }),
          replicaSet({ name: 'plain' }),
        ],
      },
    }));
    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'busy' });
    expect(within(row('busy')).getByText('37 % busy')).toBeTruthy();
    expect(within(row('busy')).queryByText('idle')).toBeNull();
    expect(within(row('lazy')).getByText('0 % busy')).toBeTruthy();
    expect(within(row('lazy')).getByText('idle')).toBeTruthy();
    expect(within(row('unknown')).queryByText(/busy/)).toBeNull();
    expect(within(row('plain')).queryByText(/busy|idle/)).toBeNull();
  });

  it('shows the image, the cards\' model and the memory used, as the list gives them', async () => {
    const sampledAt = new Date().toISOString();
    const card = { uuid: 'GPU-1', index: 0, memoryUsedMiB: 2048, utilization: 37, shareMiB: 81920, overShare: false, healthy: true };
    mockApi(() => ({
      data: {
        replicaSets: [
          replicaSet({
            name: 'train',
            gpus: ['GPU-1'],
            image: 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime',
            cardModel: 'NVIDIA A100-SXM4-80GB',
            sshCommand: 'ssh -p 40001 root@gpu1',
            usage: { sampledAt, idleSince: sampledAt, cards: [card], utilization: 37, memoryUsedMiB: 2048 },
          }),
          replicaSet({ name: 'cpu', image: 'ubuntu:22.04', cardModel: null }),
        ],
      },
    }));
    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'train' });
    expect(screen.getByRole('columnheader', { name: 'Image' })).toBeTruthy();
    const train = within(row('train'));
    expect(train.getByText('pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime')).toBeTruthy();
    expect(train.getByText(/NVIDIA A100-SXM4-80GB/)).toBeTruthy();
    expect(train.getByText('37 % busy').getAttribute('title')).toContain('2 GB used');
    expect(train.getByText('idle')).toBeTruthy();
    expect(within(row('cpu')).getByText('ubuntu:22.04')).toBeTruthy();
  });

  it('shows the node column in a fleet', async () => {
    listing();
    renderAs('user', <Instances />, true);
    await screen.findByRole('link', { name: 'sliced' });
    expect(screen.getByRole('columnheader', { name: 'Node' })).toBeTruthy();
    expect(within(row('sliced')).getByText('n2')).toBeTruthy();
  });

  it('offers Create instance to a user, not to a viewer', async () => {
    listing();
    const { unmount } = renderAs('viewer', <Instances />);
    await screen.findByRole('link', { name: 'whole' });
    expect(screen.queryAllByRole('button')).toHaveLength(0);
    unmount();

    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'whole' });
    expect(screen.getByRole('button', { name: 'Create instance' })).toBeTruthy();
  });

  it('follows a change made elsewhere at the next poll', async () => {
    let sets = SETS;
    mockApi(() => ({ data: { replicaSets: sets } }));
    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'whole' });
    sets = [{ ...SETS[0], state: 'stopped', status: 'exited', gpus: [], ports: [] }, SETS[1]];
    // the next poll, a second later (the 2 s promise is measured in a real browser: web/e2e)
    await waitFor(() => expect(within(row('whole')).getByText('stopped')).toBeTruthy(), { timeout: 5000 });
    expect(within(row('whole')).getAllByText('-')).toHaveLength(2);
    expect(screen.queryByRole('link', { name: 'sliced' })).toBeNull();
  });

  it('keeps the last list and shows the error when a poll fails', async () => {
    let fail = false;
    mockApi(() => (fail ? { status: 503, code: 1005, msg: 'store unreachable' } : { data: { replicaSets: SETS } }));
    renderAs('user', <Instances />);
    await screen.findByRole('link', { name: 'whole' });
    fail = true;
    expect((await screen.findByRole('alert', {}, { timeout: 5000 })).textContent).toBe('store unreachable');
    expect(screen.getByRole('link', { name: 'whole' })).toBeTruthy();
  });

  it('creates from the dialog and goes to the new instance', async () => {
    const sent = mockApi(({ method, url }) => {
      if (url === '/api/v1/replicaSet' && method === 'GET') return { data: { replicaSets: [] } };
      if (url === '/api/v1/replicaSet') return { data: { replicaSetName: 'fresh', operationId: 'op1' } };
      if (url === '/api/v1/volumes') return { data: { volumes: [] } };
      return undefined;
    });
    renderAs('user', <Instances />);
    fireEvent.click(await screen.findByRole('button', { name: 'Create instance' }));
    const dialog = screen.getByRole('dialog', { name: 'Create instance' });
    fireEvent.input(within(dialog).getByLabelText('Name'), { target: { value: 'fresh' } });
    fireEvent.input(within(dialog).getByLabelText('Image'), { target: { value: 'ubuntu:22.04' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Create' }));
    await waitFor(() => expect(location.hash).toBe('#/instances/fresh'));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(changes(sent)).toEqual([
      { method: 'POST', url: '/api/v1/replicaSet', body: { replicaSetName: 'fresh', imageName: 'ubuntu:22.04' } },
    ]);
  });

  it('draws 500 instances from one request', async () => {
    const many = Array.from({ length: 500 }, (_, i) =>
      replicaSet({ name: `set${i}`, gpus: [`GPU-${i}`], gpuShares: i % 2 ? [] : [{ uuid: `GPU-${i}`, memoryMiB: 8192, mode: 'memory' }] }),
    );
    const sent = mockApi(() => ({ data: { replicaSets: many } }));
    renderAs('user', <Instances />);
    // Not a role query: those walk the accessibility tree of every row and cost more than the page.
    await waitFor(() => expect(document.querySelectorAll('tbody tr')).toHaveLength(500));
    expect(document.querySelectorAll('tbody tr')[499].textContent).toContain('set499');
    // No request per row: the time it takes is bench/web.sh's to measure, in a real browser
    // (a time limit here would fail on a busy machine, not on slow code).
    expect(sent.map((r) => r.url)).toEqual(['/api/v1/replicaSet']);
  });
});
