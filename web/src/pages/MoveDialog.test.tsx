import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { mockApi, renderAs, sentTo, type Answer } from '../testing';
import type { FleetNode, ReplicaSetInfo } from '../types';
import { InstanceDetail } from './InstanceDetail';
import { info } from './instancesTestUtil';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const BASE = '/api/v1/replicaSet/foo';

function node(name: string, state: FleetNode['state'] = 'ready'): FleetNode {
  return {
    name,
    state,
    advertise: `http://${name}:2378`,
    labels: {},
    version: '0.1.0',
    lastHeartbeat: null,
    cordoned: state === 'cordoned',
    gpus: { total: 4, free: 2, models: ['T4'] },
    freePorts: 100,
    volumeFreeBytes: 1e12,
  };
}

function serve(set: Partial<ReplicaSetInfo>, move: () => Answer | undefined) {
  return mockApi((req) => {
    if (req.method === 'GET' && req.url === BASE) return { data: { info: info(set) } };
    if (req.method === 'GET' && req.url === '/api/v1/nodes')
      return { data: { nodes: [node('a'), node('b'), node('c', 'cordoned')] } };
    if (req.method === 'POST' && req.url === `${BASE}/move`) return move();
    return undefined;
  });
}

describe('Move', () => {
  it('is offered only in a fleet', async () => {
    serve({ state: 'running' }, () => undefined);
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByRole('button', { name: 'Stop' });
    expect(screen.queryByRole('button', { name: 'Move' })).toBeNull();
  });

  it('moves the set to the node chosen, offering neither its own node nor a cordoned one', async () => {
    const sent = serve({ state: 'stopped', node: 'a' }, () => ({
      data: { name: 'foo', from: 'a', to: 'b', node: 'b', state: 'stopped', operationId: 'op1' },
    }));
    renderAs('user', <InstanceDetail name="foo" />, true);
    fireEvent.click(await screen.findByRole('button', { name: 'Move' }));
    const dialog = screen.getByRole('dialog', { name: 'Move foo' });
    expect(within(dialog).getByText(/stays stopped there/)).toBeTruthy();
    const select = within(dialog).getByLabelText('Node') as HTMLSelectElement;
    await within(dialog).findByText(/^b \(/);
    const offered = Array.from(select.options).map((o) => o.value);
    expect(offered).toEqual(['', 'b']);
    fireEvent.change(select, { target: { value: 'b' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Move' }));
    await waitFor(() => expect(sentTo(sent, `POST ${BASE}/move`)).toHaveLength(1));
    expect(sentTo(sent, `POST ${BASE}/move`)[0].body).toEqual({ node: 'b' });
    await waitFor(() => expect(screen.queryByRole('dialog', { name: 'Move foo' })).toBeNull());
  });

  it('shows why a move was refused and stays open', async () => {
    serve({ state: 'running', node: 'a' }, () => ({
      status: 409,
      code: 1013,
      msg: 'no other node can take it',
    }));
    renderAs('user', <InstanceDetail name="foo" />, true);
    fireEvent.click(await screen.findByRole('button', { name: 'Move' }));
    const dialog = screen.getByRole('dialog', { name: 'Move foo' });
    expect(within(dialog).getByText(/stops while its data is copied/)).toBeTruthy();
    fireEvent.click(within(dialog).getByRole('button', { name: 'Move' }));
    expect(await within(dialog).findByText(/no other node can take it/)).toBeTruthy();
  });
});
