// The steps of a long call (create, patch, rollback, restart, stop, delete),
// live. The call's own answer comes only at its end, so while it runs the set's
// info is asked for its `operation` id, and that operation's journal record
// for its steps. When the call returns, its operationId (or, on failure, the
// last id seen) is read once more for the final state.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, userMessage } from '../api';
import type { Operation, ReplicaSetInfo } from '../types';
import { operationPath, setPath } from './instanceHelpers';
import './instances.css';

/** Fast enough to see steps of a few hundred ms go by. */
export const STEP_POLL_MS = 300;

/** A long call being (or just) followed: the props of <OperationSteps>. */
export interface Tracked {
  name: string;
  active: boolean;
  operationId: string | null;
}

/**
 * Runs long calls, remembering which set they are on, whether one runs and
 * the operationId it answered with, for <OperationSteps {...state}/>.
 */
export function useTracker(): {
  state: Tracked | null;
  track: <R>(name: string, fn: () => Promise<R>) => Promise<R>;
} {
  const [state, setState] = useState<Tracked | null>(null);
  const track = useCallback(async <R,>(name: string, fn: () => Promise<R>): Promise<R> => {
    setState({ name, active: true, operationId: null });
    try {
      const r = await fn();
      const id = (r as { operationId?: string } | null)?.operationId ?? null;
      setState({ name, active: false, operationId: id });
      return r;
    } catch (e) {
      setState({ name, active: false, operationId: null });
      throw e;
    }
  }, []);
  return { state, track };
}

function msText(ms: number | null): string {
  if (ms === null) return '';
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

export function OperationSteps({ name, active, operationId }: Tracked) {
  const [op, setOp] = useState<Operation | null>(null);
  const seen = useRef<string | null>(null);

  // While the call runs: ask again every STEP_POLL_MS, one request at a time.
  useEffect(() => {
    if (!active) return;
    setOp(null);
    seen.current = null;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try {
        const { info } = await api<{ info: ReplicaSetInfo }>('GET', setPath(name));
        if (info.operation && !stopped) {
          seen.current = info.operation;
          const o = await api<Operation>('GET', operationPath(info.operation));
          if (!stopped) setOp(o);
        }
      } catch {
        /* no record yet (a create before its allocation) or a blip: ask again */
      }
      if (!stopped) timer = setTimeout(tick, STEP_POLL_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [active, name]);

  // Once it returned: the final record, once.
  useEffect(() => {
    const id = active ? null : (operationId ?? seen.current);
    if (!id) return;
    let stopped = false;
    api<Operation>('GET', operationPath(id))
      .then((o) => !stopped && setOp(o))
      .catch(() => {
        /* the answer the call gave is already shown; the steps are extra */
      });
    return () => {
      stopped = true;
    };
  }, [active, operationId]);

  if (!active && !op) return null;
  return (
    <section class="steps" role="status" aria-live="polite" aria-label="Steps">
      <h2>Steps</h2>
      {op ? (
        <p class="steps-state">
          {op.kind} {op.target}: <span class={`op-state op-${op.state}`}>{op.state}</span>
          {op.error && <span class="op-error"> ({userMessage(op.error)})</span>}
        </p>
      ) : (
        <p class="hint">Waiting for the operation to start…</p>
      )}
      {op && (
        <ol class="steps-list">
          {op.steps.map((s) => (
            <li key={s.name} class={s.done ? 'step-done' : 'step-pending'}>
              <span class="step-mark" aria-hidden="true">
                {s.done ? '✓' : '○'}
              </span>
              <span class="step-name">{s.name}</span>
              <span class="step-ms">{s.done ? msText(s.ms) || 'done' : 'pending'}</span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
