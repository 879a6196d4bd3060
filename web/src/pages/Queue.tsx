// The queue (docs/queue.md): the instances waiting for cards, in the order
// they will start, each with why it waits now; the first in line holds a
// reservation. A user sees the others' rows without their names, and may
// cancel their own; an admin any. A move that waits (a fleet) is a row too:
// cancelling it ends the wait and leaves the instance as and where it is.
import { useState } from 'preact/hooks';
import { api, seg } from '../api';
import { Confirm, ErrorNote } from '../components/ui';
import { useAction, usePoll } from '../hooks';
import { useSession } from '../session';
import './resources.css';

export interface QueueEntry {
  position: number;
  priority: number;
  head: boolean;
  name?: string;
  owner?: string;
  asks?: { gpuCount: number; gpuMemoryMiB: number; gpuShared: boolean; cpuCount: number };
  fairShareUsage?: number;
  submitTime?: string;
  waitedSeconds?: number;
  why?: string;
  /** a move that waits: the instance runs on (or stays stopped) on node, in state */
  move?: boolean;
  state?: string;
  node?: string;
  reservation?: { node: string; cards: number; dueInSeconds?: number };
}

export interface QueueAnswer {
  queue: QueueEntry[];
  length: number;
}

/** "2 cards", "1 × 8192 MiB", "1 × time-slice"; "—" when the entry is not ours to see. */
export function asksText(e: QueueEntry): string {
  const a = e.asks;
  if (!a) return '—';
  if (a.gpuMemoryMiB) return `${a.gpuCount} × ${a.gpuMemoryMiB} MiB`;
  if (a.gpuShared) return `${a.gpuCount} × time-slice`;
  return `${a.gpuCount} card${a.gpuCount === 1 ? '' : 's'}`;
}

/** "42s", "5m", "3h 10m". */
export function waitedText(s: number | undefined): string {
  if (s === undefined) return '—';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export function QueuePage() {
  const { canWrite, isAdmin, me } = useSession();
  const q = usePoll(() => api<QueueAnswer>('GET', '/api/v1/queue'));
  const [cancel, setCancel] = useState<QueueEntry | null>(null);
  const action = useAction();
  const entries = q.data?.queue ?? [];
  const mayCancel = (e: QueueEntry) => canWrite && !!e.name && (isAdmin || e.owner === me.name);

  const confirm = async () => {
    if (!cancel) return;
    const name = seg(cancel.name ?? '');
    // A queued instance goes; a waiting move only stops waiting.
    const done = await action.run(() =>
      api('DELETE', cancel.move ? `/api/v1/queue/${name}` : `/api/v1/replicaSet/${name}`),
    );
    if (done !== undefined) {
      setCancel(null);
      await q.reload();
    }
  };

  return (
    <>
      <h1>Queue</h1>
      <ErrorNote error={q.error} />
      {q.data && entries.length === 0 && <p class="hint">Nothing waits: every instance asked for has started.</p>}
      {entries.length > 0 && (
        <table aria-label="Queue">
          <thead>
            <tr>
              <th>Position</th>
              <th>Instance</th>
              <th>Owner</th>
              <th>Priority</th>
              <th>Asks</th>
              <th>Waited</th>
              <th>Why it waits</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.position}>
                <td>
                  {e.position}
                  {e.head && <span title="first in line: holds a reservation"> ★</span>}
                </td>
                <td>
                  {e.name ? <a href={`#/instances/${seg(e.name)}`}>{e.name}</a> : <i>another user's</i>}
                  {e.move && (
                    <span class="hint">
                      {' '}
                      (move from {e.node ?? 'its node'}, {e.state ?? 'as it is'} meanwhile)
                    </span>
                  )}
                </td>
                <td>{e.owner ?? '—'}</td>
                <td>{e.priority}</td>
                <td>{asksText(e)}</td>
                <td>{waitedText(e.waitedSeconds)}</td>
                <td class="why">{e.why ?? '—'}</td>
                <td>
                  {mayCancel(e) && (
                    <button type="button" onClick={() => setCancel(e)}>
                      Cancel
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {cancel && (
        <Confirm
          title={cancel.move ? `Cancel the move of ${cancel.name}?` : `Cancel ${cancel.name}?`}
          message={
            cancel.move ? (
              <p>It stops waiting to move; the instance stays where it is, as it is.</p>
            ) : (
              <p>It leaves the queue and will not start; it holds nothing, so nothing else changes.</p>
            )
          }
          action={cancel.move ? 'Cancel the move' : 'Cancel the request'}
          busy={action.busy}
          error={action.error}
          onConfirm={() => void confirm()}
          onCancel={() => {
            action.clear();
            setCancel(null);
          }}
        />
      )}
    </>
  );
}
