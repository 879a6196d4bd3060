// Web services: the create form's presets and rows, and the instance page's
// Open link, which gets a ticket and opens the service's URL with it.
import { fireEvent, screen, waitFor } from '@testing-library/preact';
import { changes, mockApi, renderAs, sentTo, type Sent } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { CreateInstance } from './CreateInstance';
import { InstanceDetail } from './InstanceDetail';
import { info } from './instancesTestUtil';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const type = (label: string, value: string) => fireEvent.input(screen.getByLabelText(label), { target: { value } });

describe('the create form', () => {
  it('adds JupyterLab and TensorBoard with their ports, says which option sets the base path, and sends them', async () => {
    const sent = mockApi((req) => {
      if (req.url === '/api/v1/volumes') return { data: { volumes: [] } };
      if (req.url === '/api/v1/replicaSet' && req.method === 'POST') return { data: { replicaSetName: 'lab' } };
      return undefined;
    });
    renderAs('user', <CreateInstance onCreated={() => {}} onCancel={() => {}} />);
    type('Name', 'lab');
    type('Image', 'jupyter/base-notebook');
    fireEvent.click(screen.getByRole('button', { name: 'Add JupyterLab' }));
    fireEvent.click(screen.getByRole('button', { name: 'Add TensorBoard' }));
    expect((screen.getByLabelText('Service 1 name') as HTMLInputElement).value).toBe('jupyter');
    expect((screen.getByLabelText('Service 1 port') as HTMLInputElement).value).toBe('8888');
    expect((screen.getByLabelText('Service 2 port') as HTMLInputElement).value).toBe('6006');
    expect(screen.getByText(/--ServerApp\.base_url=\/s\/lab\/jupyter\//)).toBeTruthy();
    expect(screen.getByText(/--path_prefix=\/s\/lab\/tensorboard/)).toBeTruthy();
    // a row of one's own, and a preset row renamed: the hint follows the name
    type('Service 1 name', 'nb');
    expect(screen.getByText(/--ServerApp\.base_url=\/s\/lab\/nb\//)).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Add service' }));
    type('Service 3 name', 'demo');
    type('Service 3 port', '8000');
    fireEvent.click(screen.getByRole('button', { name: 'Create' }));
    await waitFor(() => expect(changes(sent)).toHaveLength(1));
    expect((changes(sent)[0].body as Record<string, unknown>).services).toEqual([
      { name: 'nb', port: 8888 },
      { name: 'tensorboard', port: 6006 },
      { name: 'demo', port: 8000 },
    ]);
  });

  it('sends no services when none were added', async () => {
    const sent = mockApi((req) => (req.method === 'POST' ? { data: {} } : { data: { volumes: [] } }));
    renderAs('user', <CreateInstance onCreated={() => {}} onCancel={() => {}} />);
    type('Name', 'plain');
    type('Image', 'ubuntu:22.04');
    fireEvent.click(screen.getByRole('button', { name: 'Create' }));
    await waitFor(() => expect(changes(sent)).toHaveLength(1));
    expect(changes(sent)[0].body).not.toHaveProperty('services');
  });
});

describe('the instance page', () => {
  const BASE = '/api/v1/replicaSet/foo';
  const URL = 'http://gpu1:2380/s/foo/jupyter/';

  function api(set: Partial<ReplicaSetInfo>, ticket: (req: Sent) => ReturnType<Parameters<typeof mockApi>[0]>) {
    return mockApi((req) => {
      if (req.method === 'GET' && req.url === BASE) return { data: { info: info(set) } };
      if (req.method === 'POST' && req.url === `${BASE}/services/jupyter/ticket`) return ticket(req);
      return undefined;
    });
  }

  it('opens a service with a ticket in a tab that cannot reach back to the console', async () => {
    const sent = api(
      { services: [{ name: 'jupyter', port: 8888, public: false, link: false, url: URL }] },
      () => ({ data: { ticket: 't1', url: `${URL}?gpubox-ticket=t1`, expiresIn: 30 } }),
    );
    const tab = { opener: {} as unknown, location: { href: '' }, close: vi.fn() };
    const open = vi.fn(() => tab);
    vi.stubGlobal('open', open);
    renderAs('user', <InstanceDetail name="foo" />);
    fireEvent.click(await screen.findByRole('button', { name: 'Open jupyter' }));
    await waitFor(() => expect(tab.location.href).toBe(`${URL}?gpubox-ticket=t1`));
    expect(open).toHaveBeenCalledWith('about:blank', '_blank');
    expect(tab.opener).toBeNull();
    expect(sentTo(sent, `POST ${BASE}/services/jupyter/ticket`)).toHaveLength(1);
  });

  it("shows the API's refusal and closes the tab; a viewer sees the URL and no button", async () => {
    api({ services: [{ name: 'jupyter', port: 8888, public: false, link: false, url: URL }] }, () => ({
      status: 409,
      code: 1165,
      msg: 'the service proxy is off; start gpuboxd with --proxy-listen ADDR:PORT',
    }));
    const tab = { opener: {}, location: { href: '' }, close: vi.fn() };
    vi.stubGlobal('open', vi.fn(() => tab));
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    fireEvent.click(await screen.findByRole('button', { name: 'Open jupyter' }));
    expect(await screen.findByText(/the service proxy is off/)).toBeTruthy();
    expect(tab.close).toHaveBeenCalled();
    unmount();
    renderAs('viewer', <InstanceDetail name="foo" />);
    expect(await screen.findByText(URL)).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Open jupyter' })).toBeNull();
  });

  it('says when the proxy is off, and shows a link to share', async () => {
    api(
      {
        services: [
          { name: 'jupyter', port: 8888, public: false, link: true, url: URL, linkUrl: `${URL}?gpubox-link=gpbx_x` },
          { name: 'tb', port: 6006, public: true, link: false, url: null },
        ],
      },
      () => undefined,
    );
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText(`${URL}?gpubox-link=gpbx_x`)).toBeTruthy();
    expect(screen.getByText(/the service proxy is off/)).toBeTruthy();
  });
});
