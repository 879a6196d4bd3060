import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { changes, mockApi, renderAs, routes } from '../testing';
import { QueuePage, asksText, waitedText } from './Queue';

const queue = {
  length: 3,
  queue: [
    {
      position: 1,
      priority: 80,
      head: true,
      name: 'train',
      owner: 'alice',
      asks: { gpuCount: 2, gpuMemoryMiB: 0, gpuShared: false, cpuCount: 0 },
      waitedSeconds: 75,
      why: 'no node can take 2 whole cards: too few GPUs: local',
      reservation: { node: 'local', cards: 1, dueInSeconds: 600 },
    },
    { position: 2, priority: 50, head: false },
    {
      position: 3,
      priority: 50,
      head: false,
      name: 'eval',
      owner: 'alice',
      asks: { gpuCount: 1, gpuMemoryMiB: 8192, gpuShared: false, cpuCount: 0 },
      waitedSeconds: 5,
      why: '1 card(s) on node local are reserved for train, first in line (due in 600s)',
    },
  ],
};

afterEach(() => vi.unstubAllGlobals());

describe('Queue', () => {
  it('lists the queue in order with why each waits; others are anonymous', async () => {
    mockApi(routes({ 'GET /api/v1/queue': () => ({ data: queue }) }));
    renderAs('user', <QueuePage />);
    const table = await screen.findByRole('table', { name: 'Queue' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows.map((r) => r.children[1].textContent)).toEqual(['train', "another user's", 'eval']);
    expect(rows[0].textContent).toContain('too few GPUs');
    expect(rows[2].textContent).toContain('reserved for train');
    expect(rows[0].children[0].textContent).toContain('★');
    // only one's own rows can be cancelled
    expect(within(rows[1]).queryByRole('button')).toBeNull();
    expect(within(rows[0]).getByRole('button', { name: 'Cancel' })).toBeTruthy();
  });

  it('cancels a queued instance with DELETE after a confirmation', async () => {
    let left = queue.queue;
    const sent = mockApi(
      routes({
        'GET /api/v1/queue': () => ({ data: { length: left.length, queue: left } }),
        'DELETE /api/v1/replicaSet/*': () => {
          left = left.filter((e) => e.name !== 'eval');
          return { data: { name: 'eval', cancelled: true } };
        },
      }),
    );
    renderAs('user', <QueuePage />);
    const table = await screen.findByRole('table', { name: 'Queue' });
    fireEvent.click(within(within(table).getAllByRole('row')[3]).getByRole('button', { name: 'Cancel' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Cancel the request' }));
    await waitFor(() => expect(changes(sent)).toEqual([{ method: 'DELETE', url: '/api/v1/replicaSet/eval', body: undefined }]));
    await waitFor(() => expect(screen.queryByText('eval')).toBeNull());
  });

  it('cancels a waiting move through the queue, leaving the instance', async () => {
    let left = [
      {
        position: 1,
        priority: 50,
        head: true,
        name: 'mover',
        owner: 'alice',
        move: true,
        state: 'running',
        node: 'a',
        asks: { gpuCount: 1, gpuMemoryMiB: 0, gpuShared: false, cpuCount: 0 },
        why: 'no node can take 1 whole card: too few GPUs: b, c',
      },
    ];
    const sent = mockApi(
      routes({
        'GET /api/v1/queue': () => ({ data: { length: left.length, queue: left } }),
        'DELETE /api/v1/queue/*': () => {
          left = [];
          return { data: { name: 'mover', cancelled: true, move: true, state: 'running' } };
        },
      }),
    );
    renderAs('user', <QueuePage />);
    const table = await screen.findByRole('table', { name: 'Queue' });
    const row = within(table).getAllByRole('row')[1];
    expect(row.textContent).toContain('move from a, running meanwhile');
    fireEvent.click(within(row).getByRole('button', { name: 'Cancel' }));
    expect(await screen.findByText(/stays where it is/)).toBeTruthy();
    fireEvent.click(await screen.findByRole('button', { name: 'Cancel the move' }));
    await waitFor(() => expect(changes(sent)).toEqual([{ method: 'DELETE', url: '/api/v1/queue/mover', body: undefined }]));
    await waitFor(() => expect(screen.queryByText('mover')).toBeNull());
  });

  it('says when nothing waits, and a viewer gets no buttons', async () => {
    mockApi(routes({ 'GET /api/v1/queue': () => ({ data: { length: 0, queue: [] } }) }));
    renderAs('viewer', <QueuePage />);
    expect(await screen.findByText(/Nothing waits/)).toBeTruthy();
  });

  it('formats what an entry asks and how long it waited', () => {
    expect(asksText(queue.queue[0])).toBe('2 cards');
    expect(asksText(queue.queue[2])).toBe('1 × 8192 MiB');
    expect(asksText(queue.queue[1])).toBe('—');
    expect(waitedText(75)).toBe('1m');
    expect(waitedText(3 * 3600 + 600)).toBe('3h 10m');
  });
});
