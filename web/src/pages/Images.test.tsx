import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { changes, mockApi, renderAs, seriousViolations, type Sent } from '../testing';
import { Images } from './Images';

afterEach(() => vi.unstubAllGlobals());

const IMAGES = [
  {
    id: 'sha256:0123456789abcdef0123',
    repoTags: ['127.0.0.1:5000/team/app:v1'],
    repoDigests: ['127.0.0.1:5000/team/app@sha256:feed'],
    size: 3145800,
    created: new Date(Date.now() - 2 * 3600_000).toISOString(),
    gpuboxCreated: false,
  },
  { id: 'sha256:fedcba9876543210', repoTags: ['mine:v1'], size: 1024, created: new Date().toISOString(), gpuboxCreated: true },
];

const op = (state: string, current: number) => ({
  id: 'op-pull',
  kind: 'pull',
  target: 'team/app:v2',
  state,
  steps: [
    { name: 'a1b2c3d4e5f6', done: current === 2097152, status: current === 2097152 ? 'Pull complete' : 'Downloading', current, total: 2097152 },
    { name: 'b2c3d4e5f6a1', done: false, status: 'Waiting', current: 0, total: 0 },
  ],
  progress: { current, total: 2097152, layers: 2, layersDone: current === 2097152 ? 1 : 0 },
  imageId: state === 'done' ? 'sha256:abcdef0123456789' : undefined,
  error: '',
});

function api(pull: (req: Sent) => { status?: number; code?: number; msg?: string; data?: unknown } = () => ({
  data: { operationId: 'op-pull', operation: op('running', 0) },
})) {
  let reads = 0;
  const sent = mockApi((req) => {
    if (req.url === '/api/v1/images') return { data: { images: IMAGES } };
    if (req.url === '/api/v1/images/pull') return pull(req);
    if (req.url === '/api/v1/operations/op-pull') {
      reads++;
      return { data: reads < 2 ? op('running', 1048576) : op('done', 2097152) };
    }
    return undefined;
  });
  return sent;
}

describe('Images', () => {
  it('lists the images with tags, short id, size and who made them', async () => {
    api();
    renderAs('viewer', <Images />);
    const table = await screen.findByRole('table', { name: 'Images' });
    expect(within(table).getByText('127.0.0.1:5000/team/app:v1')).toBeTruthy();
    expect(within(table).getByText('0123456789ab')).toBeTruthy();
    expect(within(table).getByText('3 MB')).toBeTruthy();
    expect(within(table).getByText('2h ago')).toBeTruthy();
    expect(within(table).getByText(/committed by gpubox/)).toBeTruthy();
    // A viewer cannot pull.
    expect(screen.queryByRole('form', { name: 'Pull image' })).toBeNull();
  });

  it('pulls without waiting and follows the layers until done', async () => {
    const sent = api();
    renderAs('user', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    fireEvent.input(screen.getByLabelText('Image'), { target: { value: ' team/app:v2 ' } });
    fireEvent.click(screen.getByRole('button', { name: 'Pull' }));
    const pull = await screen.findByRole('status', { name: 'Pull' });
    expect(changes(sent)).toEqual([{ method: 'POST', url: '/api/v1/images/pull', body: { image: 'team/app:v2', wait: false } }]);
    await within(pull).findByText('1 MB of 2 MB; 0 of 2 layers done');
    expect(within(pull).getByText('Downloading')).toBeTruthy();
    expect(within(pull).getByRole('meter', { name: 'Pull progress' }).getAttribute('aria-valuenow')).toBe('1048576');
    await within(pull).findByText('done', {}, { timeout: 3000 });
    expect(within(pull).getByText('Pull complete')).toBeTruthy();
    expect(within(pull).getByText('abcdef012345')).toBeTruthy();
    // Done: no more asking.
    const asked = sent.filter((r) => r.url.startsWith('/api/v1/operations')).length;
    await new Promise((r) => setTimeout(r, 1200));
    expect(sent.filter((r) => r.url.startsWith('/api/v1/operations')).length).toBe(asked);
  });

  it('sends the registry credentials once, clears the password and stores it nowhere', async () => {
    const setItem = vi.spyOn(Storage.prototype, 'setItem');
    const sent = api();
    renderAs('user', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    fireEvent.input(screen.getByLabelText('Image'), { target: { value: 'registry.example.com/p/app:1' } });
    fireEvent.input(screen.getByLabelText('Registry username'), { target: { value: 'bob' } });
    fireEvent.input(screen.getByLabelText('Registry password'), { target: { value: 's3cret-pw' } });
    expect((screen.getByLabelText('Registry password') as HTMLInputElement).type).toBe('password');
    fireEvent.click(screen.getByRole('button', { name: 'Pull' }));
    await waitFor(() => expect(changes(sent)).toHaveLength(1));
    expect(changes(sent)[0].body).toEqual({
      image: 'registry.example.com/p/app:1',
      wait: false,
      registryAuth: { username: 'bob', password: 's3cret-pw' },
    });
    await screen.findByRole('status', { name: 'Pull' });
    expect((screen.getByLabelText('Registry password') as HTMLInputElement).value).toBe('');
    expect((screen.getByLabelText('Registry username') as HTMLInputElement).value).toBe('bob');
    const stored = [
      ...Array.from({ length: localStorage.length }, (_, i) => localStorage.getItem(localStorage.key(i)!)),
      ...Array.from({ length: sessionStorage.length }, (_, i) => sessionStorage.getItem(sessionStorage.key(i)!)),
    ];
    expect(stored.join('\n')).not.toContain('s3cret-pw');
    expect(setItem.mock.calls.flat().join('\n')).not.toContain('s3cret-pw');
    expect(document.body.innerHTML).not.toContain('s3cret-pw');
    setItem.mockRestore();
  });

  it("clears the password when the pull is refused too, showing the API's message", async () => {
    const msg = "registry refused the credentials for 'registry.example.com'";
    api(() => ({ status: 403, code: 1130, msg }));
    renderAs('user', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    fireEvent.input(screen.getByLabelText('Image'), { target: { value: 'registry.example.com/p/app:1' } });
    fireEvent.input(screen.getByLabelText('Registry password'), { target: { value: 'wrong' } });
    fireEvent.click(screen.getByRole('button', { name: 'Pull' }));
    expect((await screen.findByRole('alert')).textContent).toBe(msg);
    expect((screen.getByLabelText('Registry password') as HTMLInputElement).value).toBe('');
    expect((screen.getByLabelText('Image') as HTMLInputElement).value).toBe('registry.example.com/p/app:1');
  });

  it('shows a failed pull with its error', async () => {
    mockApi((req) => {
      if (req.url === '/api/v1/images') return { data: { images: [] } };
      if (req.url === '/api/v1/images/pull') return { data: { operationId: 'op-x' } };
      if (req.url === '/api/v1/operations/op-x')
        return { data: { id: 'op-x', kind: 'pull', target: 'nope:1', state: 'failed', steps: [], error: 'manifest unknown', errorCode: 1131 } };
      return undefined;
    });
    renderAs('user', <Images />);
    await screen.findByText('No images on this node.');
    fireEvent.input(screen.getByLabelText('Image'), { target: { value: 'nope:1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Pull' }));
    const pull = await screen.findByRole('status', { name: 'Pull' });
    await within(pull).findByText('failed');
    expect(within(pull).getByText(/manifest unknown/)).toBeTruthy();
  });

  it('passes axe', async () => {
    api();
    renderAs('user', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    expect(await seriousViolations()).toEqual([]);
  });
});

describe('Images: remove', () => {
  it('removes a tag after a confirmation, and shows a refusal in the dialog', async () => {
    let refuse = true;
    const sent = mockApi((req) => {
      if (req.method === 'GET' && req.url === '/api/v1/images') return { data: { images: IMAGES } };
      if (req.method === 'DELETE' && req.url === '/api/v1/images?name=mine%3Av1')
        return refuse
          ? { status: 409, code: 1107, msg: "image 'mine:v1' is run by replica set(s) train; delete them first" }
          : { data: { imageName: 'mine:v1', imageId: 'sha256:fedcba9876543210', deleted: true } };
      return undefined;
    });
    renderAs('user', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    fireEvent.click(screen.getByRole('button', { name: 'Remove mine:v1' }));
    const dialog = screen.getByRole('dialog', { name: 'Remove mine:v1?' });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Remove' }));
    expect(await within(dialog).findByText(/is run by instance\(s\) train/)).toBeTruthy();

    refuse = false;
    fireEvent.click(within(dialog).getByRole('button', { name: 'Remove' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent).map((r) => `${r.method} ${r.url}`)).toEqual([
      'DELETE /api/v1/images?name=mine%3Av1',
      'DELETE /api/v1/images?name=mine%3Av1',
    ]);
  });

  it('offers no removal to a viewer', async () => {
    api();
    renderAs('viewer', <Images />);
    await screen.findByRole('table', { name: 'Images' });
    expect(screen.queryByRole('button', { name: /^Remove / })).toBeNull();
  });
});
