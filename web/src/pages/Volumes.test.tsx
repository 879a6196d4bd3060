import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { mockApi, renderAs, routes, seriousViolations, sentTo, type Answer } from '../testing';
import type { Role } from '../types';
import { Volumes } from './Volumes';

const GB = 1024 ** 3;
const volume = (name: string) => ({
  name,
  size: 20 * GB,
  sizeText: '20GB',
  backend: 'loop',
  filesystem: 'ext4',
  enforced: true,
  version: 1,
  state: 'ready',
  createTime: new Date().toISOString(),
  owner: 'alice',
});
const info = (name: string) => ({
  ...volume(name),
  attached: true,
  used: 5 * GB,
  filesystemSize: 19 * GB,
  usedBy: [{ name: 'train', state: 'running' }],
  inUse: true,
});

const oneVolume = {
  'GET /api/v1/volumes': () => ({ data: { volumes: [volume('data')] } }),
  'GET /api/v1/volumes/*': () => ({ data: { info: info('data') } }),
};

const show = (role: Role, fleet = false) => renderAs(role, <Volumes />, fleet);

const type = (label: string, value: string) => fireEvent.input(screen.getByLabelText(label), { target: { value } });
const input = (label: string) => screen.getByLabelText(label) as HTMLInputElement;

afterEach(() => vi.unstubAllGlobals());

describe('Volumes', () => {
  it('lists volumes with a used/size bar and who uses them', async () => {
    mockApi(routes(oneVolume));
    show('viewer');
    const bar = await screen.findByRole('meter', { name: 'data used' });
    expect(bar.getAttribute('aria-valuenow')).toBe(String(5 * GB));
    expect(bar.getAttribute('aria-valuemax')).toBe(String(20 * GB));
    expect(screen.getByText('5 GB of 20 GB')).toBeTruthy();
    expect(screen.getByText('loop (ext4)')).toBeTruthy();
    expect(screen.getByText('train')).toBeTruthy();
    // A viewer is shown nothing that would fail.
    expect(screen.queryByRole('button')).toBeNull();
    expect(screen.queryByLabelText('Name')).toBeNull();
  });

  it('creates a volume, keeping the fields and showing the API message on failure', async () => {
    let answer: Answer = { code: 1029, msg: "size '20GX': the unit must be B, KB, MB, GB or TB" };
    const sent = mockApi(routes({ ...oneVolume, 'POST /api/v1/volumes': () => answer }));
    show('user');
    type('Name', 'scratch');
    type('Size', '20GX');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));

    expect((await screen.findByRole('alert')).textContent).toBe(answer.msg);
    expect(sentTo(sent, 'POST /api/v1/volumes')[0]?.body).toEqual({ name: 'scratch', size: '20GX' });
    expect(input('Name').value).toBe('scratch');
    expect(input('Size').value).toBe('20GX');

    answer = { data: volume('scratch') };
    type('Size', '20GB');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));
    await waitFor(() => expect(input('Name').value).toBe(''));
    expect(sentTo(sent, 'POST /api/v1/volumes').at(-1)?.body).toEqual({ name: 'scratch', size: '20GB' });
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('sends the node in a fleet only when one is given', async () => {
    const sent = mockApi(routes({ ...oneVolume, 'POST /api/v1/volumes': () => ({ data: volume('x') }) }));
    show('admin', true);
    type('Name', 'x');
    type('Size', '1GB');
    type('Node', 'n2');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));
    await waitFor(() =>
      expect(sentTo(sent, 'POST /api/v1/volumes')[0]?.body).toEqual({ name: 'x', size: '1GB', node: 'n2' }),
    );
  });

  it('resizes through a dialog that keeps the API message', async () => {
    const inUse = "volume 'data' cannot be resized from 20GB to 40GB while it is in use by replica set train";
    const refused = { code: 1107, msg: inUse };
    const sent = mockApi(routes({ ...oneVolume, 'PATCH /api/v1/volumes/data/size': () => refused }));
    show('user');
    fireEvent.click(await screen.findByRole('button', { name: 'Resize data' }));
    const dialog = screen.getByRole('dialog', { name: 'Resize data' });
    expect(input('New size').value).toBe('20GB');
    type('New size', '40GB');
    fireEvent.click(within(dialog).getByRole('button', { name: 'Resize' }));

    // in the console's words: an instance, never a replica set
    expect((await within(dialog).findByRole('alert')).textContent).toBe(inUse.replace('replica set', 'instance'));
    expect(sentTo(sent, 'PATCH /api/v1/volumes/data/size')[0]?.body).toEqual({ size: '40GB' });
    expect(input('New size').value).toBe('40GB');
  });

  it('deletes only after the confirmation', async () => {
    const deleted = { data: { name: 'data', deleted: true } };
    const sent = mockApi(routes({ ...oneVolume, 'DELETE /api/v1/volumes/data': () => deleted }));
    show('user');
    fireEvent.click(await screen.findByRole('button', { name: 'Delete data' }));
    const dialog = screen.getByRole('dialog', { name: 'Delete volume data?' });
    expect(dialog.textContent).toContain('destroys');
    expect(sent.some((r) => r.method === 'DELETE')).toBe(false);

    fireEvent.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(sent.some((r) => r.method === 'DELETE')).toBe(false);

    fireEvent.click(screen.getByRole('button', { name: 'Delete data' }));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(sentTo(sent, 'DELETE /api/v1/volumes/data')).toHaveLength(1);
  });

  it('asks each volume only when opened once there are more than 50', async () => {
    const many = Array.from({ length: 51 }, (_, i) => volume(`v${i}`));
    const sent = mockApi(
      routes({
        'GET /api/v1/volumes': () => ({ data: { volumes: many } }),
        'GET /api/v1/volumes/*': () => ({ data: { info: info('v7') } }),
      }),
    );
    show('viewer');
    fireEvent.click(await screen.findByRole('button', { name: 'Show use of v7' }));
    expect(await screen.findByRole('meter', { name: 'v7 used' })).toBeTruthy();
    const gets = sent.filter((r) => r.method === 'GET').map((r) => r.url);
    const asked = new Set(gets.filter((url) => url.startsWith('/api/v1/volumes/')));
    expect([...asked]).toEqual(['/api/v1/volumes/v7']);
  });

  it('passes axe, the resize dialog open', async () => {
    mockApi(routes(oneVolume));
    show('admin', true);
    fireEvent.click(await screen.findByRole('button', { name: 'Resize data' }));
    expect(await seriousViolations()).toEqual([]);
  });
});
