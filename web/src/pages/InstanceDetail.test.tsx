import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { asRole, changes, mockApi, renderAs, type Handler, type Sent } from '../testing';
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

  it('shows a user the buttons the state allows', async () => {
    api({ state: 'running' });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Stop' });
    expect(buttons()).toEqual(['Scale', 'Pause', 'Stop', 'Run command', 'Commit', 'Roll back', 'Delete']);
    unmount();

    api({ state: 'paused' });
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Continue' });
    expect(buttons()).toEqual(['Continue', 'Scale', 'Stop', 'Commit', 'Roll back', 'Delete']);
  });

  it('offers Start to a stopped set and only a purge to a deleted one', async () => {
    api({ state: 'stopped', status: 'exited' });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Start' });
    expect(buttons()).toEqual(['Start', 'Commit', 'Delete']);
    unmount();

    api({ state: 'deleted', status: 'deleted' });
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByText(/Its history is kept/);
    expect(buttons()).toEqual(['Purge history']);
  });

  it('shows a viewer no buttons', async () => {
    api({ state: 'running' });
    await shown('viewer');
    expect(buttons()).toEqual([]);
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
    expect(alert.textContent).toBe("cannot stop replica set 'foo': it is stopped");
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
    expect(within(dialog).getByText(/Cut at 1 MiB/)).toBeTruthy();
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
