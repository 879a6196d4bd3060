import axe from 'axe-core';
import { fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { SessionContext, sessionFor } from '../session';
import type { Role, WhoAmI } from '../types';
import { Volumes } from './Volumes';

const me = (role: Role): WhoAmI => ({
  name: 'alice',
  role,
  source: 'api',
  quota: { cards: null, shareMiB: null, instances: null, volumeBytes: null },
  usage: { cards: 0, shareMiB: 0, instances: 0, volumeBytes: 0 },
  quotaApplies: role === 'user',
});

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

type Answer = { code?: number; msg?: string; data?: unknown };
interface Call {
  key: string;
  body: unknown;
}

/** Answers fetch from `routes` ("METHOD path"; "GET /api/v1/volumes/*" for any one volume), recording every request. */
function stubApi(routes: Record<string, (body: unknown) => Answer>) {
  const calls: Call[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      const key = `${init.method} ${url}`;
      const body = init.body ? JSON.parse(init.body as string) : undefined;
      calls.push({ key, body });
      const route = routes[key] ?? routes[key.replace(/^GET \/api\/v1\/volumes\/[^/]+$/, 'GET /api/v1/volumes/*')];
      const a = route?.(body) ?? { code: 1101, msg: `no route ${key}` };
      return { status: 200, json: async () => ({ code: a.code ?? 200, msg: a.msg ?? 'success', data: a.data ?? null }) };
    }),
  );
  return calls;
}

const oneVolume = {
  'GET /api/v1/volumes': () => ({ data: { volumes: [volume('data')] } }),
  'GET /api/v1/volumes/*': () => ({ data: { info: info('data') } }),
};

function show(role: Role, fleet = false) {
  return render(
    <SessionContext.Provider value={sessionFor(me(role), fleet, () => {})}>
      <Volumes />
    </SessionContext.Provider>,
  );
}

const type = (label: string, value: string) => fireEvent.input(screen.getByLabelText(label), { target: { value } });
const input = (label: string) => screen.getByLabelText(label) as HTMLInputElement;

/** axe's serious and critical findings on the page (contrast needs a real browser: not here). */
async function seriousViolations(): Promise<string[]> {
  const r = await axe.run(document.body, { rules: { 'color-contrast': { enabled: false } } });
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`);
}

afterEach(() => vi.unstubAllGlobals());

describe('Volumes', () => {
  it('lists volumes with a used/size bar and who uses them', async () => {
    stubApi(oneVolume);
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
    const calls = stubApi({ ...oneVolume, 'POST /api/v1/volumes': () => answer });
    show('user');
    type('Name', 'scratch');
    type('Size', '20GX');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));

    expect((await screen.findByRole('alert')).textContent).toBe(answer.msg);
    expect(calls.find((c) => c.key === 'POST /api/v1/volumes')?.body).toEqual({ name: 'scratch', size: '20GX' });
    expect(input('Name').value).toBe('scratch');
    expect(input('Size').value).toBe('20GX');

    answer = { data: volume('scratch') };
    type('Size', '20GB');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));
    await waitFor(() => expect(input('Name').value).toBe(''));
    expect(calls.filter((c) => c.key === 'POST /api/v1/volumes').at(-1)?.body).toEqual({ name: 'scratch', size: '20GB' });
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('sends the node in a fleet only when one is given', async () => {
    const calls = stubApi({ ...oneVolume, 'POST /api/v1/volumes': () => ({ data: volume('x') }) });
    show('admin', true);
    type('Name', 'x');
    type('Size', '1GB');
    type('Node', 'n2');
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }));
    await waitFor(() =>
      expect(calls.find((c) => c.key === 'POST /api/v1/volumes')?.body).toEqual({ name: 'x', size: '1GB', node: 'n2' }),
    );
  });

  it('resizes through a dialog that keeps the API message', async () => {
    const inUse = "volume 'data' cannot be resized from 20GB to 40GB while it is in use by replica set train";
    const calls = stubApi({ ...oneVolume, 'PATCH /api/v1/volumes/data/size': () => ({ code: 1107, msg: inUse }) });
    show('user');
    fireEvent.click(await screen.findByRole('button', { name: 'Resize data' }));
    const dialog = screen.getByRole('dialog', { name: 'Resize data' });
    expect(input('New size').value).toBe('20GB');
    type('New size', '40GB');
    fireEvent.click(within(dialog).getByRole('button', { name: 'Resize' }));

    expect((await within(dialog).findByRole('alert')).textContent).toBe(inUse);
    expect(calls.find((c) => c.key === 'PATCH /api/v1/volumes/data/size')?.body).toEqual({ size: '40GB' });
    expect(input('New size').value).toBe('40GB');
  });

  it('deletes only after the confirmation', async () => {
    const calls = stubApi({ ...oneVolume, 'DELETE /api/v1/volumes/data': () => ({ data: { name: 'data', deleted: true } }) });
    show('user');
    fireEvent.click(await screen.findByRole('button', { name: 'Delete data' }));
    const dialog = screen.getByRole('dialog', { name: 'Delete volume data?' });
    expect(dialog.textContent).toContain('destroys');
    expect(calls.some((c) => c.key.startsWith('DELETE'))).toBe(false);

    fireEvent.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(calls.some((c) => c.key.startsWith('DELETE'))).toBe(false);

    fireEvent.click(screen.getByRole('button', { name: 'Delete data' }));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(calls.filter((c) => c.key === 'DELETE /api/v1/volumes/data')).toHaveLength(1);
  });

  it('asks each volume only when opened once there are more than 50', async () => {
    const many = Array.from({ length: 51 }, (_, i) => volume(`v${i}`));
    const calls = stubApi({
      'GET /api/v1/volumes': () => ({ data: { volumes: many } }),
      'GET /api/v1/volumes/*': () => ({ data: { info: info('v7') } }),
    });
    show('viewer');
    fireEvent.click(await screen.findByRole('button', { name: 'Show use of v7' }));
    expect(await screen.findByRole('meter', { name: 'v7 used' })).toBeTruthy();
    const asked = new Set(calls.map((c) => c.key).filter((k) => k.startsWith('GET /api/v1/volumes/')));
    expect([...asked]).toEqual(['GET /api/v1/volumes/v7']);
  });

  it('passes axe, the resize dialog open', async () => {
    stubApi(oneVolume);
    show('admin', true);
    fireEvent.click(await screen.findByRole('button', { name: 'Resize data' }));
    expect(await seriousViolations()).toEqual([]);
  });
});
