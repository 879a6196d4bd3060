// The instances list: GET /api/v1/replicaSet, asked again every second so
// changes made elsewhere show. One request for the whole table, a few string
// joins per row, and rows drawn again only when they change, so hundreds of
// rows stay quick.
import { Component } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorNote } from '../components/ui';
import { age, mib } from '../format';
import { usePoll } from '../hooks';
import { href, navigate } from '../router';
import { useSession } from '../session';
import type { ReplicaSet } from '../types';
import { CreateInstance } from './CreateInstance';
import { gpusText, portsText, timeText } from './instanceHelpers';
import './instances.css';

const loadSets = () => api<{ replicaSets: ReplicaSet[] }>('GET', '/api/v1/replicaSet').then((d) => d.replicaSets);

/** gpubox's state, and Docker's status beside it when they say different things. */
export function StateBadge({ state, status }: { state: string; status?: string }) {
  return (
    <>
      <span class={`state state-${state}`}>{state}</span>
      {status && status !== state && <span class="docker-status"> (Docker: {status})</span>}
    </>
  );
}

/** The busiest of its cards' utilization ("37 %"), null when unsampled or unknown. */
export function maxUtilization(set: ReplicaSet): number | null {
  const known = (set.usage?.cards ?? []).map((c) => c.utilization).filter((u) => u >= 0);
  return known.length ? Math.max(...known) : null;
}

/** The busy figure's tooltip: what it measures and the memory the set's processes use. */
function usedTitle(set: ReplicaSet): string {
  const used = set.usage?.memoryUsedMiB;
  return `Utilization of its busiest card${used !== undefined ? `; ${mib(used)} used` : ''}`;
}

interface RowProps {
  set: ReplicaSet;
  fleet: boolean;
  ageText: string;
  /** The set as JSON: the row is drawn again only when it changes. */
  sig: string;
}

/**
 * One row. The list is asked for every second and arrives as new objects, so
 * without this check every row would be diffed again each time; comparing
 * one string per row keeps a poll of an unchanged list of 500 nearly free.
 */
class Row extends Component<RowProps> {
  shouldComponentUpdate(next: RowProps) {
    return next.sig !== this.props.sig || next.ageText !== this.props.ageText || next.fleet !== this.props.fleet;
  }

  render({ set, fleet, ageText }: RowProps) {
    const util = maxUtilization(set);
    return (
      <tr>
        <td>
          <a href={href('instances', set.name)}>{set.name}</a>
        </td>
        <td>
          <StateBadge state={set.state} status={set.status} />
          {set.usage?.idleSince && (
            <span class="state state-idle" title={`Idle since ${timeText(set.usage.idleSince)}`}>
              idle
            </span>
          )}
        </td>
        <td class="image">{set.image || '-'}</td>
        {fleet && <td>{set.node ?? '-'}</td>}
        <td>
          {gpusText(set.gpus, set.gpuShares)}
          {set.cardModel && <span class="model"> {set.cardModel}</span>}
          {util !== null && (
            <span class="util" title={usedTitle(set)}>
              {util} % busy
            </span>
          )}
        </td>
        <td>{portsText(set.ports)}</td>
        <td>{set.owner || '-'}</td>
        <td>{ageText}</td>
      </tr>
    );
  }
}

/**
 * Rows drawn at first; the rest come a frame later. So the first screenful
 * shows at once however many instances there are (drawing 500 rows takes
 * the browser most of a second), and every row follows in one more render
 * (bench/web.sh measures both; more, smaller steps lay the table out again
 * each time and take longer in all).
 */
export const FIRST_ROWS = 60;

/** How many of `total` rows to draw now: all of them from the second frame on. */
function useRowsShown(total: number): number {
  const [all, setAll] = useState(false);
  useEffect(() => {
    if (all || total <= FIRST_ROWS) return;
    const frame = requestAnimationFrame(() => setAll(true));
    return () => cancelAnimationFrame(frame);
  }, [all, total]);
  return all ? total : Math.min(FIRST_ROWS, total);
}

export function Instances() {
  const { canWrite, fleet } = useSession();
  const poll = usePoll(loadSets);
  const [creating, setCreating] = useState(false);
  const now = Date.now();
  const sets = poll.data;
  const shown = useRowsShown(sets?.length ?? 0);

  return (
    <>
      {/* Out of reach while the create dialog is open (a modal). */}
      <div inert={creating}>
        <div class="page-head">
          <h1>Instances</h1>
          {canWrite && (
            <button type="button" class="primary" onClick={() => setCreating(true)}>
              Create instance
            </button>
          )}
        </div>
        <ErrorNote error={poll.error} />
        {!sets && !poll.error && <p class="loading">Loading…</p>}
        {sets && (
          <table class="instances">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Image</th>
                {fleet && <th scope="col">Node</th>}
                <th scope="col">GPUs</th>
                <th scope="col">Ports</th>
                <th scope="col">Owner</th>
                <th scope="col">Age</th>
              </tr>
            </thead>
            <tbody>
              {sets.slice(0, shown).map((s) => (
                <Row key={s.name} set={s} fleet={fleet} ageText={age(s.createTime, now)} sig={JSON.stringify(s)} />
              ))}
              {sets.length === 0 && (
                <tr>
                  <td colSpan={fleet ? 8 : 7} class="empty">
                    No instances yet.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        )}
      </div>
      {creating && (
        <Dialog title="Create instance" wide onClose={() => setCreating(false)}>
          <CreateInstance
            onCancel={() => setCreating(false)}
            onCreated={(name) => {
              setCreating(false);
              navigate('instances', name);
            }}
          />
        </Dialog>
      )}
    </>
  );
}
