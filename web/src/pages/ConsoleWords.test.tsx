// Issue 27, items 5 and 8: the console in a user's words (instance, its own
// pages, never an API path), and its details: the create form's CPU and
// memory fields, pinned CPUs, dates in UTC as the CLI prints them, a paused
// instance that says so, no /api/v1/nodes on a single server, a calm Usage
// page without users, and the SSH notice shown once.
import { fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { api, ApiError, userMessage } from '../api';
import { whoAmI } from '../app';
import { isoUtc } from '../format';
import { SessionContext, sessionFor } from '../session';
import { mockApi, renderAs, routes, sentTo, whoami } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { CreateInstance } from './CreateInstance';
import { InstanceDetail } from './InstanceDetail';
import { info } from './instancesTestUtil';
import { UsagePage } from './Usage';

afterEach(() => {
  vi.unstubAllGlobals();
  sessionStorage.clear();
});

const BASE = '/api/v1/replicaSet/foo';
const showSet = (set: Partial<ReplicaSetInfo>) =>
  mockApi((req) => (req.method === 'GET' && req.url === BASE ? { data: { info: info(set) } } : undefined));

describe('messages in the console', () => {
  it('says instance, never replica set, and names no API path', () => {
    expect(userMessage("volume 'data' is used by replica set(s) train (running); delete them first")).toBe(
      "volume 'data' is used by instance(s) train (running); delete them first",
    );
    expect(userMessage("token 'bob' has role viewer; POST /api/v1/replicaSet needs role user")).toBe(
      "token 'bob' has role viewer; this request needs role user",
    );
    expect(userMessage("image 'x:1' is not on this server; pull it first")).toBe(
      "image 'x:1' is not on this server; pull it on the Images page first",
    );
    expect(userMessage("bind source 'data' is not a gpubox volume; create the volume first, or give an absolute host path")).toContain(
      'create it on the Volumes page first',
    );
  });

  it('puts the API error in those words', async () => {
    mockApi(() => ({ status: 409, code: 1107, msg: "cannot stop replica set 'foo': it is stopped" }));
    const e = (await api('PATCH', `${BASE}/stop`).catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.message).toBe("cannot stop instance 'foo': it is stopped");
  });
});

describe('a single server', () => {
  it('is told apart from a fleet without asking /api/v1/nodes', async () => {
    const sent = mockApi(routes({ 'GET /api/v1/whoami': () => ({ data: whoami('admin') }) }));
    expect((await whoAmI()).fleet).toBe(false);
    expect(sent.map((r) => r.url)).toEqual(['/api/v1/whoami']);
    mockApi(routes({ 'GET /api/v1/whoami': () => ({ data: { ...whoami('admin'), fleet: true } }) }));
    expect((await whoAmI()).fleet).toBe(true);
  });
});

describe('the create form', () => {
  it('asks for CPU cores, memory and shm size', async () => {
    const sent = mockApi(
      routes({
        'GET /api/v1/volumes': () => ({ data: { volumes: [] } }),
        'POST /api/v1/replicaSet': () => ({ data: { name: 'foo' } }),
      }),
    );
    renderAs('user', <CreateInstance onCreated={() => {}} onCancel={() => {}} />);
    const type = (label: string, v: string) => fireEvent.input(screen.getByLabelText(label), { target: { value: v } });
    type('Name', 'foo');
    type('Image', 'ubuntu:22.04');
    type('CPU cores', '4');
    type('Memory', '16GB');
    type('Shm size', '2GB');
    fireEvent.click(screen.getByRole('button', { name: 'Create' }));
    await waitFor(() => expect(sentTo(sent, 'POST /api/v1/replicaSet')).toHaveLength(1));
    expect(sentTo(sent, 'POST /api/v1/replicaSet')[0].body).toMatchObject({
      cpuCount: 4,
      memory: '16GB',
      shmSize: '2GB',
    });
  });
});

describe('the instance page', () => {
  it('shows the CPUs it holds, as a cpulist', async () => {
    showSet({ cpuset: [18, 2, 3, 19] });
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText('2-3,18-19')).toBeTruthy();
    expect(screen.getByText('CPU cores')).toBeTruthy();
  });

  it('writes dates in UTC as the CLI does', async () => {
    const created = '2026-11-20T08:15:00Z';
    showSet({ createTime: created, updateTime: created });
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText(new RegExp(`^${created} \\(`))).toBeTruthy();
    expect(isoUtc(new Date('2026-11-22T01:28:28.123Z'))).toBe('2026-11-22T01:28:28Z');
  });

  it('says a paused instance is paused, not running since', async () => {
    showSet({ state: 'paused', status: 'paused', runningSince: new Date(Date.now() - 60_000).toISOString() });
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText('Paused')).toBeTruthy();
    expect(screen.queryByText('Running since')).toBeNull();
  });

  it('shows the SSH notice once: dismissed, it stays a quiet hint', async () => {
    const message = 'openssh is installed but not running; restart the set to have gpubox start it';
    const ssh = { command: 'ssh -p 40001 root@localhost', port: 40001, server: 'openssh', running: false, message };
    showSet({ ssh });
    const first = renderAs('user', <InstanceDetail name="foo" />);
    const notice = await screen.findByText(/not running; restart/);
    expect(notice.classList.contains('notice')).toBe(true);
    fireEvent.click(screen.getByRole('button', { name: 'Dismiss' }));
    await waitFor(() => expect(screen.getByText(/not running; restart/).classList.contains('hint')).toBe(true));
    first.unmount();
    // a later start shows the same words: a hint, not the notice again
    renderAs('user', <InstanceDetail name="foo" />);
    const again = await screen.findByText(/not running; restart/);
    expect(again.classList.contains('hint')).toBe(true);
    expect(screen.queryByRole('button', { name: 'Dismiss' })).toBeNull();
  });
});

describe('the Usage page without users', () => {
  it('explains calmly, with no error and no request for users', async () => {
    const sent = mockApi(
      routes({
        'GET /api/v1/usage': () => ({ data: { from: '1970-01-01T00:00:00Z', to: '2026-11-27T00:00:00Z', users: [] } }),
        'GET /api/v1/users': () => ({ status: 409, code: 1107, msg: 'authentication is off' }),
      }),
    );
    const me = { ...whoami('admin'), source: 'none' as const };
    render(
      <SessionContext.Provider value={sessionFor(me, false, () => {})}>
        <UsagePage />
      </SessionContext.Provider>,
    );
    expect(await screen.findByText(/runs without a token file/)).toBeTruthy();
    await screen.findByRole('table', { name: 'Usage by user' });
    expect(screen.queryByRole('alert')).toBeNull();
    expect(sent.filter((r) => r.url.startsWith('/api/v1/users'))).toHaveLength(0);
  });
});
