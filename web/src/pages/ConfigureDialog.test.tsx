// The instance page's Configure dialog: environment, binds and ports changed
// in one PATCH, only what changed sent, "nothing changed" and errors shown.
import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { changes, mockApi, renderAs, seriousViolations, type Handler, type Sent } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { configForm, configPatch } from './ConfigureDialog';
import { InstanceDetail } from './InstanceDetail';
import { info, spec } from './instancesTestUtil';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const BASE = '/api/v1/replicaSet/foo';

const SPEC = spec({
  env: ['A=1', 'B=2'],
  binds: [
    { src: 'data', dest: '/data', readOnly: false },
    { src: 'cache', dest: '/cache', readOnly: false },
  ],
  containerPorts: ['22/tcp', '8888/tcp'],
});

function api(set: Partial<ReplicaSetInfo>, other: Handler = () => undefined): Sent[] {
  return mockApi((req) =>
    req.method === 'GET' && req.url === BASE ? { data: { info: { ...info(set), spec: SPEC } } } : other(req),
  );
}

async function openConfigure() {
  renderAs('user', <InstanceDetail name="foo" />);
  await screen.findByText('ubuntu:22.04');
  fireEvent.click(screen.getByRole('button', { name: 'Configure' }));
  return screen.getByRole('dialog', { name: 'Configure foo' });
}

describe('configPatch', () => {
  it('sends nothing for an unchanged form', () => {
    expect(configPatch(SPEC, configForm(SPEC))).toEqual({});
  });

  it('removes, replaces and adds binds in that order, and sends the whole env and port lists', () => {
    const f = configForm(SPEC);
    f.env = ['A=9', '', 'C=3'];
    f.binds = [{ ...f.binds[0], src: 'other' }, { src: 'new', dest: '/new', readOnly: true }];
    f.containerPorts = ['22/tcp', '9999'];
    expect(configPatch(SPEC, f)).toEqual({
      envPatch: ['A=9', 'C=3'],
      volumePatch: [
        { oldBind: { src: 'cache', dest: '/cache' } },
        { oldBind: { src: 'data', dest: '/data' }, newBind: { src: 'other', dest: '/data', readOnly: false } },
        { newBind: { src: 'new', dest: '/new', readOnly: true } },
      ],
      containerPorts: ['22/tcp', '9999'],
      ports: [],
    });
  });
});

describe('InstanceDetail: Configure', () => {
  it('changes env, a volume and a port in one PATCH and closes', async () => {
    const sent = api({}, (req) =>
      req.method === 'PATCH' && req.url === BASE ? { data: { version: 2, changed: true } } : undefined,
    );
    const dialog = await openConfigure();
    const apply = within(dialog).getByRole('button', { name: 'Apply' }) as HTMLButtonElement;
    expect(apply.disabled).toBe(true); // nothing changed yet

    fireEvent.input(within(dialog).getByLabelText('Variable 1'), { target: { value: 'A=9' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Remove B' }));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Remove /cache' }));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Remove 8888/tcp' }));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Add port' }));
    fireEvent.input(within(dialog).getByLabelText('Container port 2'), { target: { value: '9999' } });
    expect(apply.disabled).toBe(false);
    fireEvent.click(apply);

    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)).toEqual([
      {
        method: 'PATCH',
        url: BASE,
        body: {
          envPatch: ['A=9'],
          volumePatch: [{ oldBind: { src: 'cache', dest: '/cache' } }],
          containerPorts: ['22/tcp', '9999'],
          ports: [],
        },
      },
    ]);
  });

  it("keeps the dialog open with the server's message when the change is refused", async () => {
    api({}, (req) =>
      req.method === 'PATCH'
        ? { status: 400, code: 1000, msg: "volumePatch.newBind: volume 'nope' does not exist" }
        : undefined,
    );
    const dialog = await openConfigure();
    fireEvent.click(within(dialog).getByRole('button', { name: 'Add bind' }));
    fireEvent.input(within(dialog).getByLabelText('Bind 3 source'), { target: { value: 'nope' } });
    fireEvent.input(within(dialog).getByLabelText('Bind 3 destination'), { target: { value: '/nope' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Apply' }));
    expect(await within(dialog).findByText(/volume 'nope' does not exist/)).toBeTruthy();
    expect((within(dialog).getByLabelText('Bind 3 source') as HTMLInputElement).value).toBe('nope');
  });

  it('is not offered to a viewer', async () => {
    api({});
    renderAs('viewer', <InstanceDetail name="foo" />);
    await screen.findByText('ubuntu:22.04');
    expect(screen.queryByRole('button', { name: 'Configure' })).toBeNull();
  });

  it('has no serious accessibility findings', async () => {
    api({});
    await openConfigure();
    expect(await seriousViolations()).toEqual([]);
  });
});
