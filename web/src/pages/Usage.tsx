// Usage: what each user held over a period (card-hours, share GB-hours),
// with each user's sets; and for admins every user's quota against what they
// hold now. The API restricts a `user` token to themself. Accounting moves
// slowly, so these poll every 5 s rather than every second.
import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNote } from '../components/ui';
import { bytes, mib } from '../format';
import { usePoll } from '../hooks';
import { useSession } from '../session';
import type { Quota, Usage, UsageSet, User } from '../types';
import './resources.css';

const USAGE_POLL_MS = 5000;
const DAY_MS = 86_400_000;

/** Hours with one decimal, two for a sliver, so a short use does not read as 0. */
function inHours(seconds: number): string {
  const h = seconds / 3600;
  return h.toFixed(h > 0 && h < 0.1 ? 2 : 1);
}
const cardHours = (u: { cardSeconds: number }) => inHours(u.cardSeconds);
const shareGiBHours = (u: { shareMiBSeconds: number }) => inHours(u.shareMiBSeconds / 1024);

/**
 * The query for two <input type="date"> values (UTC days, "" for open): from
 * the start of the first day to the end of the last, as RFC 3339 the API takes.
 */
export function usageQuery(from: string, to: string): string {
  const q = new URLSearchParams();
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
  if (from) q.set('from', iso(Date.parse(`${from}T00:00:00Z`)));
  if (to) q.set('to', iso(Date.parse(`${to}T00:00:00Z`) + DAY_MS));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The answer's `from`: the epoch when none was asked for. */
const since = (from: string) => (from.startsWith('1970-01-01T00:00:00') ? 'the beginning' : from);

export function UsagePage() {
  const { isAdmin, me } = useSession();
  return (
    <>
      <h1>Usage</h1>
      <UsageByUser />
      {isAdmin && (me.source === 'none' ? <NoUsers /> : <Quotas />)}
    </>
  );
}

/**
 * gpuboxd without --token-file (the default loopback set-up) has no users,
 * so no quotas: say so calmly instead of asking /api/v1/users for the 1107
 * that would show as an error.
 */
function NoUsers() {
  return (
    <section aria-labelledby="quotas">
      <h2 id="quotas">Quotas</h2>
      <p class="hint no-users">
        No users and no quotas: gpuboxd runs without a token file, so everyone who reaches it is the admin. Start
        it with <code>--token-file</code> to have users with quotas (docs/users.md).
      </p>
    </section>
  );
}

function UsageByUser() {
  const { fleet } = useSession();
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const query = usageQuery(from, to);
  const usage = usePoll(() => api<Usage>('GET', `/api/v1/usage${query}`), query, USAGE_POLL_MS);
  const users = usage.data?.users ?? [];
  const total = users.reduce(
    (a, u) => ({ cardSeconds: a.cardSeconds + u.cardSeconds, shareMiBSeconds: a.shareMiBSeconds + u.shareMiBSeconds }),
    { cardSeconds: 0, shareMiBSeconds: 0 },
  );
  const toggle = (user: string) => {
    const next = new Set(open);
    if (!next.delete(user)) next.add(user);
    setOpen(next);
  };

  return (
    <section aria-labelledby="usage-by-user">
      <h2 id="usage-by-user">Usage by user</h2>
      <div class="inline-form">
        <label for="usage-from">From</label>
        <input id="usage-from" type="date" value={from} max={to || undefined}
          onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
        <label for="usage-to">To</label>
        <input id="usage-to" type="date" value={to} min={from || undefined}
          onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
        <button type="button" disabled={!from && !to} onClick={() => { setFrom(''); setTo(''); }}>
          All time
        </button>
      </div>
      <p class="hint">
        Days in UTC, both included; empty is from the beginning, or until now.
        {usage.data && ` Showing ${since(usage.data.from)} to ${usage.data.to}.`}
      </p>
      <ErrorNote error={usage.error} />
      {!usage.data ? (
        !usage.error && <p class="loading">Loading…</p>
      ) : (
        <table aria-label="Usage by user">
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Card-hours</th>
              <th scope="col">Share GB-hours</th>
              <th scope="col">Sets</th>
            </tr>
          </thead>
          <tbody>
            {users.length === 0 && (
              <tr>
                <td colSpan={4}>Nothing used in this period.</td>
              </tr>
            )}
            {users.map((u) => [
              <tr key={u.user}>
                <td>{u.user}</td>
                <td>{cardHours(u)}</td>
                <td>{shareGiBHours(u)}</td>
                <td>
                  {u.sets.length === 0 ? (
                    '-'
                  ) : (
                    <button type="button" class="link" aria-expanded={open.has(u.user)}
                      aria-label={`${open.has(u.user) ? 'Hide' : 'Show'} sets of ${u.user}`}
                      onClick={() => toggle(u.user)}>
                      {open.has(u.user) ? 'Hide' : 'Show'} sets ({u.sets.length})
                    </button>
                  )}
                </td>
              </tr>,
              open.has(u.user) && u.sets.length > 0 && (
                <tr key={`${u.user} sets`} class="breakdown">
                  <td colSpan={4}>
                    <SetsTable user={u.user} sets={u.sets} fleet={fleet} />
                  </td>
                </tr>
              ),
            ])}
          </tbody>
          {users.length > 1 && (
            <tfoot>
              <tr>
                <th scope="row">All users</th>
                <td>{cardHours(total)}</td>
                <td>{shareGiBHours(total)}</td>
                <td />
              </tr>
            </tfoot>
          )}
        </table>
      )}
    </section>
  );
}

function SetsTable({ user, sets, fleet }: { user: string; sets: UsageSet[]; fleet: boolean }) {
  return (
    <table aria-label={`Sets of ${user}`}>
      <thead>
        <tr>
          <th scope="col">Set</th>
          {fleet && <th scope="col">Node</th>}
          <th scope="col">Card-hours</th>
          <th scope="col">Share GB-hours</th>
        </tr>
      </thead>
      <tbody>
        {sets.map((s) => (
          <tr key={`${s.node ?? ''}/${s.name}`}>
            <td>{s.name}</td>
            {fleet && <td>{s.node || '-'}</td>}
            <td>{cardHours(s)}</td>
            <td>{shareGiBHours(s)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The quota columns: what each counts, and how a number of it reads. */
const QUOTA_COLUMNS: { key: keyof Quota; title: string; fmt: (n: number) => string }[] = [
  { key: 'cards', title: 'Cards', fmt: String },
  { key: 'shareMiB', title: 'Share memory', fmt: mib },
  { key: 'instances', title: 'Instances', fmt: String },
  { key: 'volumeBytes', title: 'Volume space', fmt: bytes },
];

/** From this share of a quota on, the user is shown as near it. */
const NEAR_QUOTA = 0.8;

function Quotas() {
  const users = usePoll(() => api<{ users: User[] }>('GET', '/api/v1/users'), 'users', USAGE_POLL_MS);
  return (
    <section aria-labelledby="quotas">
      <h2 id="quotas">Quotas</h2>
      <p class="hint">
        What each user holds now against their quota. Quotas bind the user role; admins are counted only.
      </p>
      <ErrorNote error={users.error} />
      {users.data && (
        <table aria-label="Quotas">
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Role</th>
              {QUOTA_COLUMNS.map((c) => (
                <th key={c.key} scope="col">
                  {c.title}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {users.data.users.map((u) => (
              <tr key={u.name}>
                <td>{u.name}</td>
                <td>{u.role}</td>
                {QUOTA_COLUMNS.map((c) => (
                  <td key={c.key}>
                    <QuotaCell used={u.usage[c.key] ?? 0} quota={u.quota[c.key]} fmt={c.fmt} />
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** "1 of 2", "1 (unlimited)"; flagged in words (not colour alone) at 80% and at the quota. */
function QuotaCell({ used, quota, fmt }: { used: number; quota: number | null; fmt: (n: number) => string }) {
  if (quota === null) return <>{fmt(used)} (unlimited)</>;
  const share = quota > 0 ? used / quota : 1;
  return (
    <>
      {fmt(used)} of {fmt(quota)}{' '}
      {share >= 1 ? (
        <span class="badge bad">at quota</span>
      ) : (
        share >= NEAR_QUOTA && <span class="badge warn">near quota</span>
      )}
    </>
  );
}
