import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { mockApi, renderAs, routes, seriousViolations } from '../testing';
import type { Role, User } from '../types';
import { UsagePage, usageQuery } from './Usage';

const GIB_HOUR = 1024 * 3600; // MiB-seconds in a GiB-hour
const usage = {
  from: '1970-01-01T00:00:00Z',
  to: '2026-11-24T12:00:00Z',
  users: [
    {
      user: 'alice',
      cardSeconds: 9000,
      shareMiBSeconds: 3 * GIB_HOUR,
      sets: [
        { name: 'train', node: 'n1', cardSeconds: 7200, shareMiBSeconds: 0 },
        { name: 'notebook', node: 'n2', cardSeconds: 1800, shareMiBSeconds: 3 * GIB_HOUR },
      ],
    },
    { user: 'bob', cardSeconds: 1800, shareMiBSeconds: GIB_HOUR / 2, sets: [] },
  ],
};

const users: User[] = [
  {
    name: 'alice',
    role: 'user',
    source: 'api',
    createTime: '',
    quota: { cards: 2, shareMiB: null, instances: 4, volumeBytes: 100 * 1024 ** 3 },
    usage: { cards: 2, shareMiB: 8192, instances: 1, volumeBytes: 85 * 1024 ** 3 },
  },
];

const usageAndUsers = {
  'GET /api/v1/usage': () => ({ data: usage }),
  'GET /api/v1/users': () => ({ data: { users } }),
};

const show = (role: Role, fleet = false) => renderAs(role, <UsagePage />, fleet);

/** The cells of the row whose first cell is `name`. */
function rowOf(table: HTMLElement, name: string): string[] {
  const row = within(table)
    .getAllByRole('row')
    .find((r) => r.firstElementChild?.textContent === name);
  return [...(row?.children ?? [])].map((c) => (c.textContent ?? '').trim());
}

afterEach(() => vi.unstubAllGlobals());

describe('Usage', () => {
  it('shows hours per user, their total, and each set on demand', async () => {
    mockApi(routes(usageAndUsers));
    show('admin', true);
    const table = await screen.findByRole('table', { name: 'Usage by user' });
    expect(rowOf(table, 'alice').slice(0, 3)).toEqual(['alice', '2.5', '3.0']);
    expect(rowOf(table, 'bob').slice(0, 3)).toEqual(['bob', '0.5', '0.5']);
    expect(rowOf(table, 'All users').slice(0, 3)).toEqual(['All users', '3.0', '3.5']);
    expect(screen.queryByRole('table', { name: 'Sets of alice' })).toBeNull();

    fireEvent.click(screen.getByRole('button', { name: 'Show sets of alice' }));
    const sets = screen.getByRole('table', { name: 'Sets of alice' });
    expect(rowOf(sets, 'train')).toEqual(['train', 'n1', '2.0', '0.0']);
    expect(rowOf(sets, 'notebook')).toEqual(['notebook', 'n2', '0.5', '3.0']);
    fireEvent.click(screen.getByRole('button', { name: 'Hide sets of alice' }));
    expect(screen.queryByRole('table', { name: 'Sets of alice' })).toBeNull();
  });

  it('asks for the chosen days, the last one included', async () => {
    const sent = mockApi(routes({ 'GET /api/v1/usage': () => ({ data: usage }) }));
    show('user');
    await screen.findByRole('table', { name: 'Usage by user' });
    fireEvent.input(screen.getByLabelText('From'), { target: { value: '2026-11-01' } });
    fireEvent.input(screen.getByLabelText('To'), { target: { value: '2026-11-30' } });
    await waitFor(() =>
      expect(sent.map((r) => r.url)).toContain('/api/v1/usage?from=2026-11-01T00%3A00%3A00Z&to=2026-12-01T00%3A00%3A00Z'),
    );
    expect(usageQuery('', '')).toBe('');
  });

  it('shows the API message about the period beside the dates', async () => {
    mockApi(routes({ 'GET /api/v1/usage': () => ({ code: 1000, msg: 'from must not be after to' }) }));
    show('user');
    expect((await screen.findByRole('alert')).textContent).toBe('from must not be after to');
  });

  it('shows an admin who is near or at their quota', async () => {
    mockApi(routes(usageAndUsers));
    show('admin');
    const table = await screen.findByRole('table', { name: 'Quotas' });
    expect(rowOf(table, 'alice')).toEqual([
      'alice',
      'user',
      '2 of 2 at quota',
      '8 GB (unlimited)',
      '1 of 4',
      '85 GB of 100 GB near quota',
    ]);
  });

  it('does not ask a user for the users list', async () => {
    const sent = mockApi(routes({ 'GET /api/v1/usage': () => ({ data: { ...usage, users: [usage.users[1]] } }) }));
    show('user');
    await screen.findByRole('table', { name: 'Usage by user' });
    expect(screen.queryByRole('table', { name: 'Quotas' })).toBeNull();
    expect(sent.some((r) => r.url.startsWith('/api/v1/users'))).toBe(false);
    // One user: no total row, and no sets to show.
    expect(screen.queryByText('All users')).toBeNull();
    expect(screen.queryByRole('button', { name: /sets of/ })).toBeNull();
  });

  it('passes axe, sets and quotas shown', async () => {
    mockApi(routes(usageAndUsers));
    show('admin', true);
    fireEvent.click(await screen.findByRole('button', { name: 'Show sets of alice' }));
    await screen.findByRole('table', { name: 'Quotas' });
    expect(await seriousViolations()).toEqual([]);
  });
});
