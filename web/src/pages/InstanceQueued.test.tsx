import { fireEvent, screen, waitFor } from '@testing-library/preact';
import { changes, mockApi, renderAs } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { InstanceDetail } from './InstanceDetail';
import { info } from './instancesTestUtil';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const BASE = '/api/v1/replicaSet/foo';

function api(set: Partial<ReplicaSetInfo>) {
  return mockApi((req) => {
    if (req.method === 'GET' && req.url === BASE) return { data: { info: info(set) } };
    if (req.method === 'DELETE' && req.url.startsWith(BASE)) return { data: { name: 'foo', cancelled: true } };
    return undefined;
  });
}

describe('a queued instance', () => {
  it('shows its place in the queue and why it waits, and cancels', async () => {
    const sent = api({
      state: 'queued',
      status: 'queued',
      gpus: [],
      ports: [],
      version: 0,
      containerName: '',
      queue: { priority: 50, position: 2, why: 'no node can take 1 whole card: too few GPUs: local' },
    });
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText(/position 2: no node can take 1 whole card/)).toBeTruthy();
    const cancel = screen.getByRole('button', { name: 'Cancel' });
    expect(screen.queryByRole('button', { name: 'Stop' })).toBeNull();
    fireEvent.click(cancel);
    const dialog = await screen.findByRole('dialog');
    const confirm = [...dialog.querySelectorAll('button')].find((b) => /Delete/.test(b.textContent ?? ''));
    expect(confirm).toBeTruthy();
    fireEvent.click(confirm!);
    await waitFor(() => expect(changes(sent).map((r) => r.method)).toEqual(['DELETE']));
  });

  it('says why it left the queue', async () => {
    api({
      state: 'deleted',
      status: 'deleted',
      gpus: [],
      queue: { priority: 50, dropped: { reason: 'queueTimeout', at: '2026-11-27T08:00:00Z', detail: 'waited 7200s' } },
    });
    renderAs('user', <InstanceDetail name="foo" />);
    expect(await screen.findByText(/queueTimeout: waited 7200s/)).toBeTruthy();
  });
});
