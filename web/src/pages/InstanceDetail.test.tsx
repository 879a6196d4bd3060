import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { asRole, changes, mockApi, renderAs, seriousViolations, type Handler, type Sent } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { InstanceDetail } from './InstanceDetail';
import { info, spec } from './instancesTestUtil';
import { OperationSteps } from './OperationSteps';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const BASE = '/api/v1/replicaSet/foo';

/** GET of the set answers `set`; `other` answers the rest. */
function api(set: Partial<ReplicaSetInfo>, other: Handler = () => undefined): Sent[] {
  return mockApi((req) => (req.method === 'GET' && req.url === BASE ? { data: { info: info(set) } } : other(req)));
}

const buttons = () => screen.queryAllByRole('button').map((b) => b.textContent);

async function shown(role: 'user' | 'viewer' = 'user') {
  renderAs(role, <InstanceDetail name="foo" />);
  await screen.findByText('ubuntu:22.04');
}

describe('InstanceDetail', () => {
  it('shows the set: state, version, owner, GPUs, ports, spec', async () => {
    api({
      version: 3,
      containerName: 'foo-3',
      gpus: ['GPU-aaaa'],
      gpuShares: [{ uuid: 'GPU-aaaa', memoryMiB: 8192, mode: 'memory' }],
      spec: spec({
        gpuMemory: 8192,
        binds: [{ src: 'data', dest: '/root/data', readOnly: true }],
        env: ['A=1'],
        cmd: ['sleep', 'infinity'],
      }),
    });
    await shown();
    expect(screen.getByText('foo-3')).toBeTruthy();
    expect(screen.getByText('GPU-aaaa')).toBeTruthy();
    expect(screen.getByText(/8 GB share ×1/)).toBeTruthy();
    expect(screen.getByText('40001→22/tcp')).toBeTruthy();
    expect(screen.getByText('data')).toBeTruthy();
    expect(screen.getByText('A=1')).toBeTruthy();
    expect(screen.getByText('["sleep","infinity"]')).toBeTruthy();
  });

  it('shows the compute share (gpuCores) with the memory share and what holds it', async () => {
    api({
      gpus: ['GPU-aaaa'],
      gpuShares: [{ uuid: 'GPU-aaaa', memoryMiB: 8192, mode: 'memory' }],
      spec: spec({ gpuMemory: 8192, gpuCores: 30 }),
      gpuLimits: { mode: 'memory', enforced: true, enforcedBy: 'gpubox', cores: 30 },
    } as Partial<ReplicaSetInfo>);
    await shown();
    const gpus = screen.getByText(/8 GB share ×1/);
    expect(gpus.textContent).toContain('30% compute a card');
    expect(screen.getByText(/enforced by gpubox, compute held at 30%/)).toBeTruthy();
  });

  it('changes the compute share in the scale dialog, and removes it', async () => {
    const sent = api({ spec: spec({ gpuCount: 1, gpuMemory: 8192, gpuCores: 30 }) }, (req) =>
      req.method === 'PATCH' && req.url === BASE ? { data: { version: 1, changed: true } } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    let dialog = screen.getByRole('dialog', { name: 'Scale foo' });
    const cores = within(dialog).getByLabelText('Compute per card (%)') as HTMLInputElement;
    expect(cores.value).toBe('30');
    fireEvent.input(cores, { target: { value: '50' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)[0].body).toEqual({ gpuPatch: { gpuCount: 1, gpuCores: 50 } });

    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    dialog = screen.getByRole('dialog', { name: 'Scale foo' });
    fireEvent.input(within(dialog).getByLabelText('Compute per card (%)'), { target: { value: '' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)[1].body).toEqual({ gpuPatch: { gpuCount: 1, gpuCores: null } });
  });

  it('shows a user the buttons the state allows', async () => {
    api({ state: 'running' });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Stop' });
    expect(buttons()).toEqual([
      'Scale',
      'Configure',
      'Pause',
      'Stop',
      'Run command',
      'Commit',
      'Roll back',
      'Change image',
      'Restart without GPUs',
      'Auto-stop',
      'Delete',
      'Open terminal',
      'Show logs',
    ]);
    unmount();

    api({ state: 'paused' });
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Continue' });
    expect(buttons()).toEqual([
      'Continue',
      'Scale',
      'Configure',
      'Stop',
      'Commit',
      'Roll back',
      'Change image',
      'Restart without GPUs',
      'Auto-stop',
      'Delete',
      'Show logs',
    ]);
  });

  it('offers Start to a stopped set and only a purge to a deleted one', async () => {
    api({ state: 'stopped', status: 'exited' });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Start' });
    // A stopped set may be changed too (the change waits for its next start).
    expect(buttons()).toEqual([
      'Start',
      'Start without GPUs',
      'Scale',
      'Configure',
      'Commit',
      'Roll back',
      'Change image',
      'Auto-stop',
      'Delete',
      'Show logs',
    ]);
    unmount();

    api({ state: 'deleted', status: 'deleted' });
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByText(/Its history is kept/);
    expect(buttons()).toEqual(['Purge history', 'Show logs']);
  });

  it('shows a viewer no buttons but the logs', async () => {
    api({ state: 'running' });
    await shown('viewer');
    expect(buttons()).toEqual(['Show logs']);
  });

  it('stops, following the steps, and shows a refusal beside Stop', async () => {
    let release: () => void = () => {};
    let refuse = false;
    const sent = api({ state: 'running', operation: 'op7' }, (req) => {
      if (req.url === '/api/v1/operations/op7')
        return {
          data: {
            id: 'op7',
            kind: 'stop',
            target: 'foo',
            state: 'running',
            error: '',
            steps: [
              { name: 'begin', done: true, time: null, ms: 0.6 },
              { name: 'container-stopped', done: false, time: null, ms: null },
            ],
          },
        };
      if (req.url === `${BASE}/stop`) {
        if (refuse) return { status: 409, code: 1107, msg: "cannot stop replica set 'foo': it is stopped" };
        return new Promise((ok) => (release = () => ok({ data: { name: 'foo', state: 'stopped' } })));
      }
      return undefined;
    });
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    const steps = await screen.findByRole('status', { name: 'Steps' });
    await within(steps).findByText('container-stopped');
    expect(within(steps).getByText('pending')).toBeTruthy();
    expect(within(steps).getByText('0.6 ms')).toBeTruthy();
    release();
    await waitFor(() => expect(screen.getByRole('button', { name: 'Stop' })).toHaveProperty('disabled', false));
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: `${BASE}/stop`, body: undefined }]);

    refuse = true;
    fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toBe("cannot stop instance 'foo': it is stopped");
    // Beside the button that failed.
    expect(alert.parentElement?.contains(screen.getByRole('button', { name: 'Stop' }))).toBe(true);
  });

  it('scales with a gpuPatch, and says when nothing changed', async () => {
    let changed = true;
    const sent = api({ spec: spec({ gpuCount: 1, gpuMemory: 8192 }) }, (req) => {
      if (req.method === 'PATCH' && req.url === BASE)
        return changed
          ? { data: { version: 2, changed: true, operationId: 'op2' } }
          : { msg: "nothing changed: replica set 'foo' already has what the patch asks for", data: { changed: false } };
      return undefined;
    });
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    let dialog = screen.getByRole('dialog', { name: 'Scale foo' });
    expect((within(dialog).getByLabelText('Memory per card') as HTMLInputElement).value).toBe('8GB');
    fireEvent.input(within(dialog).getByLabelText('GPUs'), { target: { value: '3' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)[0]).toEqual({ method: 'PATCH', url: BASE, body: { gpuPatch: { gpuCount: 3 } } });

    changed = false;
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    dialog = screen.getByRole('dialog', { name: 'Scale foo' });
    fireEvent.input(within(dialog).getByLabelText('Memory per card'), { target: { value: '4096' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    expect((await within(dialog).findByText(/nothing changed/)).textContent).toContain('already has');
    expect(changes(sent)[1].body).toEqual({ gpuPatch: { gpuCount: 1, gpuMemory: 4096 } });
  });

  it('scales a stopped set, saying the change waits for its next start', async () => {
    let pending = false;
    const sent = mockApi((req) => {
      if (req.method === 'GET' && req.url === BASE)
        return {
          data: {
            info: info({
              state: 'stopped',
              status: 'exited',
              gpus: [],
              ports: [],
              spec: spec({ gpuCount: 1 }),
              ...(pending ? { pending: true, pendingSpec: spec({ gpuCount: 2 }) } : { pending: false }),
            }),
          },
        };
      if (req.method === 'PATCH' && req.url === BASE) {
        pending = true;
        return {
          msg: "replica set 'foo' is stopped: the change is kept and applies at its next start",
          data: { version: 1, state: 'stopped', changed: true, pending: true },
        };
      }
      return undefined;
    });
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    const dialog = screen.getByRole('dialog', { name: 'Scale foo' });
    expect(within(dialog).getByText(/applies when it next starts/)).toBeTruthy();
    fireEvent.input(within(dialog).getByLabelText('GPUs'), { target: { value: '2' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)[0]).toEqual({ method: 'PATCH', url: BASE, body: { gpuPatch: { gpuCount: 2 } } });
    const note = await screen.findByText(/Changed while stopped/);
    expect(note.textContent).toContain('GPUs 1 → 2');
    expect(note.textContent).toContain('as version 2');
    // Scaling again starts from what the next start applies.
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    const again = screen.getByRole('dialog', { name: 'Scale foo' });
    expect((within(again).getByLabelText('GPUs') as HTMLInputElement).value).toBe('2');
  });

  it("rolls a stopped set back for its next start, or keeps the version it has", async () => {
    const sent = api({ state: 'stopped', status: 'exited', version: 2, pending: true, pendingSpec: spec({ gpuCount: 3 }) }, (req) => {
      if (req.url === `${BASE}/history`)
        return {
          data: {
            history: [
              { version: 2, reason: 'patch', createTime: '', containerName: 'foo-2', spec: spec(), gpus: [], ports: [] },
              { version: 1, reason: 'create', createTime: '', containerName: 'foo-1', spec: spec({ imageName: 'old:1' }), gpus: [], ports: [] },
            ],
          },
        };
      if (req.url === `${BASE}/rollback`) return { data: { version: 2, state: 'stopped', changed: true, pending: false } };
      return undefined;
    });
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Roll back' }));
    const dialog = screen.getByRole('dialog', { name: 'Roll back foo' });
    await within(dialog).findByText('old:1');
    expect(within(dialog).getByText(/applies when it next starts/)).toBeTruthy();
    expect(within(dialog).getByRole('button', { name: 'Roll back to version 1' })).toBeTruthy();
    fireEvent.click(within(dialog).getByRole('button', { name: 'Keep version 2' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: `${BASE}/rollback`, body: { version: 2 } }]);
  });

  it('deletes only after the confirmation, purging when asked', async () => {
    const sent = api({}, (req) => (req.method === 'DELETE' ? { data: { name: 'foo', purged: true } } : undefined));
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Delete' }));
    const dialog = screen.getByRole('dialog', { name: 'Delete foo?' });
    expect(dialog.textContent).toContain('history is kept');
    expect(changes(sent)).toEqual([]);

    fireEvent.click(within(dialog).getByLabelText('Also purge history'));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Delete' }));
    await waitFor(() => expect(location.hash).toBe('#/instances'));
    expect(changes(sent)).toEqual([{ method: 'DELETE', url: `${BASE}?purge=true`, body: undefined }]);
  });

  it('sends nothing when the delete is cancelled', async () => {
    const sent = api({});
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Delete' }));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(changes(sent)).toEqual([]);
  });

  it('runs a command and shows its exit code and output', async () => {
    const sent = api({}, (req) =>
      req.url === `${BASE}/execute`
        ? {
            data: {
              stdout: 'hello\n',
              stderr: 'warn\n',
              exitCode: 3,
              stdoutTruncated: true,
              stderrTruncated: false,
              timedOut: false,
            },
          }
        : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Run command' }));
    const dialog = screen.getByRole('dialog');
    fireEvent.input(within(dialog).getByLabelText('Command'), { target: { value: 'echo hello | tee /dev/stderr' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Run' }));
    expect(await within(dialog).findByText('Exit code 3')).toBeTruthy();
    expect(within(dialog).getByText('hello')).toBeTruthy();
    expect(within(dialog).getByText('warn')).toBeTruthy();
    expect(within(dialog).getByText(/Cut at 1 MB/)).toBeTruthy();
    expect(changes(sent)[0].body).toEqual({ cmd: 'echo hello | tee /dev/stderr' });
  });

  it('lists the history and rolls back to the version chosen', async () => {
    const sent = api({ version: 2 }, (req) => {
      if (req.url === `${BASE}/history`)
        return {
          data: {
            history: [
              { version: 2, reason: 'patch', createTime: '', containerName: 'foo-2', spec: spec({ gpuCount: 2 }), gpus: [], ports: [] },
              { version: 1, reason: 'create', createTime: '', containerName: 'foo-1', spec: spec({ imageName: 'old:1' }), gpus: [], ports: [] },
            ],
          },
        };
      if (req.url === `${BASE}/rollback`) return { data: { version: 3, changed: true, operationId: 'op3' } };
      return undefined;
    });
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Roll back' }));
    const dialog = screen.getByRole('dialog', { name: 'Roll back foo' });
    await within(dialog).findByText('old:1');
    expect(within(dialog).getByText('patch')).toBeTruthy();
    expect(within(dialog).queryByRole('button', { name: 'Roll back to version 2' })).toBeNull();
    fireEvent.click(within(dialog).getByRole('button', { name: 'Roll back to version 1' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: `${BASE}/rollback`, body: { version: 1 } }]);
  });

  it('commits to an image and shows it', async () => {
    const sent = api({}, (req) =>
      req.url === `${BASE}/commit` ? { data: { imageName: 'mine:v1', imageId: 'sha256:abc' } } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Commit' }));
    const dialog = screen.getByRole('dialog');
    fireEvent.input(within(dialog).getByLabelText('Image name'), { target: { value: 'mine:v1' } });
    fireEvent.click(within(dialog).getByLabelText('Overwrite'));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Commit image' }));
    expect(await within(dialog).findByText('sha256:abc')).toBeTruthy();
    expect(changes(sent)[0].body).toEqual({ newImageName: 'mine:v1', overwrite: true });
  });

  it("suggests a user a name under their own namespace and shows gpuboxd's refusal", async () => {
    const msg = 'a user commits only under their own namespace u/alice/ (...): name it like u/alice/cuda';
    const sent = api({ version: 4 }, (req) =>
      req.url === `${BASE}/commit` ? { status: 403, code: 1109, msg } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Commit' }));
    const dialog = screen.getByRole('dialog');
    const input = within(dialog).getByLabelText('Image name') as HTMLInputElement;
    expect(input.value).toBe('u/alice/foo:v4');
    expect(within(dialog).getByText('u/alice/')).toBeTruthy();
    fireEvent.input(input, { target: { value: 'nvidia/cuda:mine' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Commit image' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(msg);
    expect(changes(sent)[0].body).toEqual({ newImageName: 'nvidia/cuda:mine', overwrite: false });
    expect(input.value).toBe('nvidia/cuda:mine'); // kept for a retry
  });

  it("suggests an admin the set's own name, which everyone may use", async () => {
    api({ version: 2 });
    renderAs('admin', <InstanceDetail name="foo" />);
    await screen.findByText('ubuntu:22.04');
    fireEvent.click(screen.getByRole('button', { name: 'Commit' }));
    const dialog = screen.getByRole('dialog');
    expect((within(dialog).getByLabelText('Image name') as HTMLInputElement).value).toBe('foo:v2');
  });
});

describe('InstanceDetail: usage and stop rules', () => {
  const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();
  const card = (index: number, memoryUsedMiB: number, utilization: number, overShare: boolean, healthy: boolean) => ({
    uuid: `GPU-${String(index + 1).repeat(8)}-aaaa`,
    index,
    memoryUsedMiB,
    utilization,
    shareMiB: 8192,
    overShare,
    healthy,
  });
  const USAGE = {
    sampledAt: new Date().toISOString(),
    idleSince: null,
    cards: [card(0, 1229, 37, false, true), card(1, 9216, -1, true, false)],
  };

  it("shows each card's use of its share, over-share and health", async () => {
    api({
      gpus: ['GPU-11111111-aaaa', 'GPU-22222222-aaaa'],
      usage: USAGE,
      runningSince: minutesAgo(120),
      spec: spec({ gpuCount: 2, gpuMemory: 8192 }),
    });
    await shown();
    const usage = screen.getByRole('region', { name: 'Usage' });
    const m0 = within(usage).getByRole('meter', { name: 'GPU 0 memory used' });
    expect(m0.getAttribute('aria-valuenow')).toBe('1229');
    expect(m0.getAttribute('aria-valuemax')).toBe('8192');
    expect(within(usage).getByText('1.2 GB of 8 GB held')).toBeTruthy();
    expect(within(usage).getByText('37 %')).toBeTruthy();
    expect(within(usage).getByText('unknown')).toBeTruthy();

    // Over its share: said in words, the meter full and marked.
    const m1 = within(usage).getByRole('meter', { name: 'GPU 1 memory used' });
    expect(m1.getAttribute('aria-valuenow')).toBe('8192');
    expect(m1.getAttribute('aria-valuetext')).toBe('9 GB of 8 GB held');
    expect(m1.classList.contains('over')).toBe(true);
    expect(m0.classList.contains('over')).toBe(false);
    const over = within(usage).getAllByText(/Over its share/);
    expect(over).toHaveLength(1);
    expect(over[0].closest('tr')?.contains(m1)).toBe(true);
    expect(within(usage).getByText('healthy')).toBeTruthy();
    expect(within(usage).getByText('unhealthy')).toBeTruthy();

    // Working: not idle; no stop rules set.
    expect(within(usage).queryByText(/Idle since/)).toBeNull();
    expect(screen.getByText('Running since')).toBeTruthy();
    expect(screen.getByText(/\(for 2h\)/)).toBeTruthy();
    expect(screen.queryByText('Stops at')).toBeNull();
    expect(screen.getByText('never')).toBeTruthy();
  });

  it('says since when it is idle and when it will be stopped', async () => {
    api({
      usage: { ...USAGE, idleSince: minutesAgo(12), cards: [USAGE.cards[0]] },
      stopAt: new Date(Date.now() + 3 * 3600_000 + 60_000).toISOString(),
      spec: spec({ idleStop: '30m', maxDuration: '8h' }),
    });
    await shown();
    const idle = within(screen.getByRole('region', { name: 'Usage' })).getByText(/Idle since/);
    expect(idle.textContent).toMatch(/^Idle since .+ \(for 12m\); it stops after 30m idle\.$/);
    expect(screen.getByText('Stops at')).toBeTruthy();
    expect(screen.getByText(/\(in 3h; maximum duration 8h\)/)).toBeTruthy();
    expect(screen.getByText('30m')).toBeTruthy();
    expect(screen.getByText('8h')).toBeTruthy();
  });

  it('shows no usage when there is none (sampling off, or stopped)', async () => {
    api({ usage: null });
    await shown();
    expect(screen.queryByRole('region', { name: 'Usage' })).toBeNull();
    expect(screen.queryByRole('meter')).toBeNull();
  });

  it('says why a stopped set stopped, and when', async () => {
    const at = minutesAgo(5);
    api({
      state: 'stopped',
      status: 'exited',
      gpus: [],
      stopped: { reason: 'idle', at },
      spec: spec({ idleStop: '30m' }),
    });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    const why = await screen.findByText(/Stopped after 30m idle/);
    expect(why.textContent).toBe(`Stopped after 30m idle, at ${new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z')} (5m ago).`);
    unmount();

    api({
      state: 'stopped',
      status: 'exited',
      stopped: { reason: 'maxDuration', at, detail: 'ran 8h' },
      spec: spec({ maxDuration: '8h' }),
    });
    renderAs('user', <InstanceDetail name="foo" />);
    const max = await screen.findByText(/Stopped: maximum duration reached/);
    expect(max.textContent).toContain('Stopped: maximum duration reached (8h), at ');
    expect(max.textContent).toContain('ran 8h');
  });

  it('reads the live fields beside info too', async () => {
    const at = minutesAgo(1);
    mockApi((req) =>
      req.url === BASE
        ? { data: { info: info({ state: 'stopped', spec: spec({ idleStop: '1h' }) }), stopped: { reason: 'idle', at } } }
        : undefined,
    );
    renderAs('viewer', <InstanceDetail name="foo" />);
    expect(await screen.findByText(/Stopped after 1h idle/)).toBeTruthy();
  });

  it('sets and clears the stop rules in the auto-stop dialog, sending only what changed', async () => {
    const sent = api({ state: 'stopped', spec: spec({ gpuCount: 1, maxDuration: '8h' }) }, (req) =>
      req.method === 'PATCH' && req.url === BASE ? { data: { version: 1, changed: true } } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Auto-stop' }));
    let dialog = screen.getByRole('dialog', { name: 'Auto-stop foo' });
    expect((within(dialog).getByLabelText('Stop when idle for') as HTMLInputElement).value).toBe('');
    expect((within(dialog).getByLabelText('Maximum duration') as HTMLInputElement).value).toBe('8h');
    fireEvent.input(within(dialog).getByLabelText('Stop when idle for'), { target: { value: ' 30m ' } });
    fireEvent.input(within(dialog).getByLabelText('Maximum duration'), { target: { value: '' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    // The limits alone ("" takes the maximum away): no gpuPatch, so no new version.
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: BASE, body: { idleStop: '30m', maxDuration: '' } }]);

    fireEvent.click(screen.getByRole('button', { name: 'Auto-stop' }));
    dialog = screen.getByRole('dialog', { name: 'Auto-stop foo' });
    fireEvent.input(within(dialog).getByLabelText('Stop when idle for'), { target: { value: '1h30m' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)[1].body).toEqual({ idleStop: '1h30m' });

    // Nothing changed: nothing sent.
    fireEvent.click(screen.getByRole('button', { name: 'Auto-stop' }));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Save' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(changes(sent)).toHaveLength(2);
  });

  it("shows the API's refusal of a stop rule in the dialog, keeping what was typed", async () => {
    const msg = "invalid idleStop '5s': at least 10s";
    api({}, (req) => (req.method === 'PATCH' ? { status: 400, code: 1001, msg } : undefined));
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Auto-stop' }));
    const dialog = screen.getByRole('dialog', { name: 'Auto-stop foo' });
    fireEvent.input(within(dialog).getByLabelText('Stop when idle for'), { target: { value: '5s' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(msg);
    expect((within(dialog).getByLabelText('Stop when idle for') as HTMLInputElement).value).toBe('5s');
  });

  it('passes axe with usage and the auto-stop dialog open', async () => {
    api({ usage: { ...USAGE, idleSince: minutesAgo(3) }, stopAt: new Date(Date.now() + 3600_000).toISOString() });
    await shown();
    expect(await seriousViolations()).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Auto-stop' }));
    expect(await seriousViolations()).toEqual([]);
  });
});

describe('OperationSteps', () => {
  const op = (state: string, done: boolean) => ({
    id: 'op9',
    kind: 'create',
    target: 'foo',
    state,
    error: '',
    steps: [
      { name: 'begin', done: true, time: null, ms: 0.61 },
      { name: 'container-started', done, time: null, ms: done ? 120 : null },
    ],
  });

  it('follows a running operation, then shows its final steps', async () => {
    let final = false;
    const sent = api({ operation: 'op9' }, (req) =>
      req.url === '/api/v1/operations/op9' ? { data: op(final ? 'done' : 'running', final) } : undefined,
    );
    const { rerender, unmount } = renderAs('user', <OperationSteps name="foo" active operationId={null} />);
    const steps = await screen.findByRole('status');
    expect(within(steps).getByRole('heading', { name: 'Steps' })).toBeTruthy();
    await within(steps).findByText('running');
    expect(within(steps).getByText('begin')).toBeTruthy();
    expect(within(steps).getByText('pending')).toBeTruthy();

    final = true;
    rerender(asRole('user', <OperationSteps name="foo" active={false} operationId="op9" />));
    await within(steps).findByText('done');
    expect(within(steps).getByText('120 ms')).toBeTruthy();

    // Not active: no more polling, and none after unmounting.
    const asked = sent.length;
    unmount();
    await new Promise((r) => setTimeout(r, 700));
    expect(sent.length).toBe(asked);
  });
});
