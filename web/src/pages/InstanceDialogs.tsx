// The instance page's dialogs: scale, auto-stop (idle stop, maximum
// duration), roll back, commit, run a command, delete. Each shows the API's
// message inside itself (where the user acted) and keeps what was typed when
// a call fails.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, call } from '../api';
import { Confirm, Dialog, ErrorNote } from '../components/ui';
import { useAction, usePoll } from '../hooks';
import { navigate } from '../router';
import { useSession } from '../session';
import type { ExecResult, FleetNode, HistoryEntry, ReplicaSetInfo } from '../types';
import {
  commitImageSuggestion,
  gpusText,
  memoryText,
  memoryValue,
  nextSpec,
  portsText,
  setPath,
  specGpusText,
  timeText,
  userImageNamespace,
  type LongAnswer,
} from './instanceHelpers';

/** How the page runs a call: `long` follows its steps; both ask for the detail again afterwards. */
export interface Act {
  long: <R>(fn: () => Promise<R>) => Promise<R>;
  quick: <R>(fn: () => Promise<R>) => Promise<R>;
}

export interface DialogProps {
  info: ReplicaSetInfo;
  act: Act;
  onClose: () => void;
  /** The live steps of the long call running, if any. */
  steps?: ComponentChildren;
}

const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

export function ScaleDialog({ info, act, onClose, steps }: DialogProps) {
  // A stopped set's scale changes what its next start applies.
  const stopped = info.state === 'stopped';
  const base = nextSpec(info);
  const share = base.gpuMemory > 0;
  const initialMemory = share ? memoryText(base.gpuMemory) : '';
  // A compute share goes with a memory share or a time-slice replica.
  const compute = share || base.gpuShared;
  const initialCores = base.gpuCores ? String(base.gpuCores) : '';
  const [count, setCount] = useState(String(base.gpuCount));
  const [memory, setMemory] = useState(initialMemory);
  const [cores, setCores] = useState(initialCores);
  const [note, setNote] = useState<string | null>(null);
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    setNote(null);
    const gpuPatch: Record<string, unknown> = { gpuCount: Number(count) };
    if (share && memory.trim() !== initialMemory) gpuPatch.gpuMemory = memoryValue(memory);
    // Emptied: null removes the compute share.
    if (compute && cores.trim() !== initialCores) gpuPatch.gpuCores = cores.trim() ? Number(cores) : null;
    // The whole envelope: a patch that changes nothing says so in msg alone.
    let msg = '';
    const answer = await a.run(() =>
      act.long(async () => {
        const env = await call<LongAnswer>('PATCH', setPath(info.name), { gpuPatch });
        msg = env.msg;
        return env.data;
      }),
    );
    if (!answer) return;
    if (answer.changed === false) setNote(msg);
    else onClose();
  };

  return (
    <Dialog title={`Scale ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        {stopped ? (
          <p class="hint">
            {info.pendingSpec ? 'At its next start' : 'Now'} {specGpusText(base)}. It is stopped: the change applies when it
            next starts (a new version, its disk carried over); no GPUs are taken until then.
          </p>
        ) : (
          <p class="hint">
            Now {specGpusText(info.spec)}. A new version is made in a new container; its disk is carried over.
          </p>
        )}
        <div class="field">
          <label for="sc-count">GPUs</label>
          <input id="sc-count" type="number" min={0} value={count} onInput={(e) => setCount(value(e))} />
        </div>
        {share && (
          <div class="field">
            <label for="sc-memory">Memory per card</label>
            <input id="sc-memory" value={memory} onInput={(e) => setMemory(value(e))} />
          </div>
        )}
        {compute && (
          <div class="field">
            <label for="sc-cores">Compute per card (%)</label>
            <input
              id="sc-cores"
              type="number"
              min={1}
              max={100}
              value={cores}
              onInput={(e) => setCores(value(e))}
            />
            <p class="hint">Percent of each card's compute time (1-100); empty: no limit. Changed in place.</p>
          </div>
        )}
        {note && (
          <p class="notice" role="status">
            {note}
          </p>
        )}
        <ErrorNote error={a.error} />
        {steps}
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={a.busy}>
            Apply
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** The two stop rules' fields, shared by the create form and the auto-stop dialog. */
export function StopRuleFields({
  prefix,
  idleStop,
  maxDuration,
  onIdleStop,
  onMaxDuration,
}: {
  prefix: string;
  idleStop: string;
  maxDuration: string;
  onIdleStop: (v: string) => void;
  onMaxDuration: (v: string) => void;
}) {
  return (
    <fieldset class="field">
      <legend>Stop automatically</legend>
      <div class="field">
        <label for={`${prefix}-idle-stop`}>Stop when idle for</label>
        <input
          id={`${prefix}-idle-stop`}
          placeholder="never"
          aria-describedby={`${prefix}-stop-hint`}
          value={idleStop}
          onInput={(e) => onIdleStop(value(e))}
        />
      </div>
      <div class="field">
        <label for={`${prefix}-max-duration`}>Maximum duration</label>
        <input
          id={`${prefix}-max-duration`}
          placeholder="none"
          aria-describedby={`${prefix}-stop-hint`}
          value={maxDuration}
          onInput={(e) => onMaxDuration(value(e))}
        />
      </div>
      <p class="hint" id={`${prefix}-stop-hint`}>
        "90s", "30m", "2h", "1h30m" (10s to 365 days); empty: never. Idle: its cards' utilization stays under the
        server's threshold.
      </p>
    </fieldset>
  );
}

/**
 * The stop rules alone: PATCH with only idleStop and maxDuration changes the
 * record in place (no new version, no operation), in any state but deleted.
 * Only the fields changed are sent; "" takes a rule away.
 */
export function AutoStopDialog({ info, act, onClose }: DialogProps) {
  const initialIdle = info.idleStop ?? info.spec.idleStop ?? '';
  const initialMax = info.maxDuration ?? info.spec.maxDuration ?? '';
  const [idleStop, setIdleStop] = useState(initialIdle);
  const [maxDuration, setMaxDuration] = useState(initialMax);
  const [note, setNote] = useState<string | null>(null);
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    setNote(null);
    const body: Record<string, string> = {};
    if (idleStop.trim() !== initialIdle) body.idleStop = idleStop.trim();
    if (maxDuration.trim() !== initialMax) body.maxDuration = maxDuration.trim();
    if (Object.keys(body).length === 0) return onClose();
    const answer = await a.run(() => act.quick(() => api<LongAnswer>('PATCH', setPath(info.name), body)));
    if (!answer) return;
    if (answer.changed === false) setNote('Nothing changed: it already has these rules.');
    else onClose();
  };

  return (
    <Dialog title={`Auto-stop ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <p class="hint">
          gpubox stops the instance (its GPUs are released, its disk kept) when a rule is met; Start brings it back.
          The rules change in place: no new version.
        </p>
        <StopRuleFields
          prefix="as"
          idleStop={idleStop}
          maxDuration={maxDuration}
          onIdleStop={setIdleStop}
          onMaxDuration={setMaxDuration}
        />
        {note && (
          <p class="notice" role="status">
            {note}
          </p>
        )}
        <ErrorNote error={a.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={a.busy}>
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}

export function RollbackDialog({ info, act, onClose, steps }: DialogProps) {
  const history = usePoll(
    () => api<{ history: HistoryEntry[] }>('GET', setPath(info.name, 'history')).then((d) => d.history),
    info.name,
  );
  const a = useAction();

  const rollback = async (version: number) => {
    const ok = await a.run(async () => {
      await act.long(() => api<LongAnswer>('PATCH', setPath(info.name, 'rollback'), { version }));
      return true;
    });
    if (ok) onClose();
  };

  return (
    <Dialog title={`Roll back ${info.name}`} wide onClose={onClose}>
      {info.state === 'stopped' ? (
        <p class="hint">
          It is stopped: the chosen version's spec applies when it next starts (a new version, the current disk carried
          over).
          {info.pending && ' Choosing the current version drops the change made while it was stopped.'}
        </p>
      ) : (
        <p class="hint">
          Rolling back makes a new version with the chosen version's spec; the current disk is carried over.
        </p>
      )}
      <ErrorNote error={history.error} />
      {!history.data && !history.error && <p class="loading">Loading…</p>}
      {history.data && (
        <table class="history">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Reason</th>
              <th scope="col">Made</th>
              <th scope="col">Image</th>
              <th scope="col">GPUs</th>
              <th scope="col">Roll back</th>
            </tr>
          </thead>
          <tbody>
            {history.data.map((h) => (
              <tr key={h.version}>
                <td>{h.version}</td>
                <td class="wrap">{h.reason}</td>
                <td>{timeText(h.createTime)}</td>
                <td class="wrap">
                  <code>{h.spec.imageName}</code>
                </td>
                <td>{specGpusText(h.spec)}</td>
                <td>
                  {h.version === info.version && !info.pending ? (
                    'current'
                  ) : (
                    <button type="button" disabled={a.busy} onClick={() => rollback(h.version)}>
                      {h.version === info.version ? `Keep version ${h.version}` : `Roll back to version ${h.version}`}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={a.error} />
      {steps}
      <div class="actions">
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}

export function CommitDialog({ info, act, onClose }: DialogProps) {
  // A user commits only under their own namespace (gpuboxd refuses any
  // other name, and its message says so below); an admin's commit is
  // everyone's.
  const { me, isAdmin } = useSession();
  const user = isAdmin ? null : me.name;
  const suggested = commitImageSuggestion(info.name, info.version, user);
  const [image, setImage] = useState(suggested);
  const [overwrite, setOverwrite] = useState(false);
  const [made, setMade] = useState<{ imageName: string; imageId: string } | null>(null);
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    setMade(null);
    const r = await a.run(() =>
      act.quick(() =>
        api<{ imageName: string; imageId: string }>('POST', setPath(info.name, 'commit'), {
          newImageName: image.trim(),
          overwrite,
        }),
      ),
    );
    if (r) setMade(r);
  };

  return (
    <Dialog title={`Commit ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <p class="hint">
          Saves the container's filesystem as a new image
          {user === null ? (
            ', which every user may start from.'
          ) : (
            <>
              {' '}
              under <code>{userImageNamespace(user)}</code>: only you may start from it.
            </>
          )}
        </p>
        <div class="field">
          <label for="cm-image">Image name</label>
          <input
            id="cm-image"
            required
            placeholder={suggested}
            value={image}
            onInput={(e) => setImage(value(e))}
          />
        </div>
        <div class="field check">
          <input
            id="cm-overwrite"
            type="checkbox"
            checked={overwrite}
            onChange={(e) => setOverwrite((e.currentTarget as HTMLInputElement).checked)}
          />
          <label for="cm-overwrite">Overwrite</label>
          <span class="hint"> a tag that exists (only one gpubox made)</span>
        </div>
        <ErrorNote error={a.error} />
        {made && (
          <p class="ok" role="status">
            Committed <code>{made.imageName}</code> as <code>{made.imageId}</code>
          </p>
        )}
        <div class="actions">
          <button type="button" onClick={onClose}>
            Close
          </button>
          <button type="submit" class="primary" disabled={a.busy}>
            Commit image
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** One output stream, with a word when it was cut. */
function Stream({ title, text, truncated }: { title: string; text: string; truncated: boolean }) {
  return (
    <>
      <h3>{title}</h3>
      <pre class="output">{text || '(empty)'}</pre>
      {truncated && <p class="hint">Cut at 1 MB: the rest was dropped.</p>}
    </>
  );
}

export function ExecDialog({ info, act, onClose }: DialogProps) {
  const [cmd, setCmd] = useState('');
  const [result, setResult] = useState<ExecResult | null>(null);
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    // A string runs as ["sh", "-c", cmd] (docs/api.md), so pipes and quotes work.
    const r = await a.run(() => act.quick(() => api<ExecResult>('POST', setPath(info.name, 'execute'), { cmd })));
    if (r) setResult(r);
  };

  return (
    <Dialog title={`Execute in ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <div class="field">
          <label for="ex-cmd">Command</label>
          <input
            id="ex-cmd"
            class="mono"
            required
            placeholder="nvidia-smi"
            value={cmd}
            onInput={(e) => setCmd(value(e))}
          />
          <p class="hint">Runs under sh -c in the running container; killed after 60 s.</p>
        </div>
        <ErrorNote error={a.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Close
          </button>
          <button type="submit" class="primary" disabled={a.busy}>
            {a.busy ? 'Running…' : 'Run'}
          </button>
        </div>
      </form>
      {result && (
        <div class="exec-result">
          <p role="status" class={result.exitCode === 0 ? 'ok' : 'exit-failed'}>
            Exit code {result.exitCode}
          </p>
          {result.timedOut && <p class="notice">Timed out: the command was killed.</p>}
          <Stream title="stdout" text={result.stdout} truncated={result.stdoutTruncated} />
          <Stream title="stderr" text={result.stderr} truncated={result.stderrTruncated} />
        </div>
      )}
    </Dialog>
  );
}

/** Delete (history kept, or purged), or purge a deleted set's history. */
export function DeleteDialog({ info, act, onClose, steps }: DialogProps) {
  const deleted = info.state === 'deleted';
  const [purge, setPurge] = useState(deleted);
  const a = useAction();

  const confirm = async () => {
    const ok = await a.run(async () => {
      await act.long(() => api('DELETE', setPath(info.name) + (purge ? '?purge=true' : '')));
      return true;
    });
    if (ok) navigate('instances');
  };

  const message = deleted ? (
    <p>
      The record of <strong>{info.name}</strong> and every version in its history are removed; the name starts
      afresh at version 1.
    </p>
  ) : (
    <>
      <p>
        The container <code>{info.containerName}</code> is removed and its GPUs ({gpusText(info.gpus, info.gpuShares)})
        and ports ({portsText(info.ports)}) are released. Its history is kept: creating <strong>{info.name}</strong>{' '}
        again continues its versions.
      </p>
      <div class="field check">
        <input
          id="del-purge"
          type="checkbox"
          checked={purge}
          onChange={(e) => setPurge((e.currentTarget as HTMLInputElement).checked)}
        />
        <label for="del-purge">Also purge history</label>
      </div>
    </>
  );

  return (
    <Confirm
      title={deleted ? `Purge ${info.name}?` : `Delete ${info.name}?`}
      message={
        <>
          {message}
          {steps}
        </>
      }
      action={deleted ? 'Purge' : 'Delete'}
      busy={a.busy}
      error={a.error}
      onConfirm={confirm}
      onCancel={onClose}
    />
  );
}

/** Runs the next version without any card (restart {gpuCount: 0}); its GPU fields are kept aside. */
export function StartWithoutGpusDialog({ info, act, onClose, steps }: DialogProps) {
  const a = useAction();
  const stopped = info.state === 'stopped';
  const n = info.spec.gpuCount;
  const confirm = async () => {
    const ok = await a.run(async () => {
      await act.long(() => api<LongAnswer>('PATCH', setPath(info.name, 'restart'), { gpuCount: 0 }));
      return true;
    });
    if (ok) onClose();
  };
  return (
    <Confirm
      title={`${stopped ? 'Start' : 'Restart'} ${info.name} without GPUs?`}
      message={
        <>
          <p>
            A new version of <strong>{info.name}</strong> runs without its {n} {n === 1 ? 'GPU' : 'GPUs'} (
            {specGpusText(info.spec)}), keeping its binds, volumes, environment, ports and system disk: to copy data
            out or install packages without holding a card.
            {!stopped && ' Its container is stopped first: what runs in it now ends.'}
          </p>
          <p>Start (or Restart) later takes cards again, as many as now, when enough are free.</p>
          {steps}
        </>
      }
      action={stopped ? 'Start without GPUs' : 'Restart without GPUs'}
      busy={a.busy}
      error={a.error}
      onConfirm={confirm}
      onCancel={onClose}
    />
  );
}

/** What a patch of imageName answers beyond LongAnswer. */
interface ImageAnswer extends LongAnswer {
  imageName?: string;
  systemDiskCarried?: boolean;
  carry?: { method?: string; note?: string };
}

/** Another image, same data: PATCH the set with imageName; the system disk is not carried. */
export function ChangeImageDialog({ info, act, onClose, steps }: DialogProps) {
  const [image, setImage] = useState('');
  const [done, setDone] = useState<{ answer: ImageAnswer; msg: string } | null>(null);
  // What it ran before: the page's info moves on once the patch is done.
  const [before] = useState({ version: info.version, imageName: info.spec.imageName });
  const stopped = info.state === 'stopped';
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    setDone(null);
    let msg = '';
    const answer = await a.run(() =>
      act.long(async () => {
        const env = await call<ImageAnswer>('PATCH', setPath(info.name), { imageName: image.trim() });
        msg = env.msg;
        return env.data;
      }),
    );
    if (answer) setDone({ answer, msg });
  };

  const r = done?.answer;
  return (
    <Dialog title={`Change the image of ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <p>
          Now <code>{before.imageName}</code>. A new version runs the other image (pulled first when it is not on
          the node) with the same binds, volumes, environment, ports and GPUs.
          {stopped && ' It is stopped: the new image applies when it next starts.'}
        </p>
        <p class="notice image-warning">
          <strong>The system disk is not carried:</strong> whatever was installed or written in the container outside
          its binds and volumes is not in the new one. Only binds and volumes keep their data. Rolling back to the
          current version returns to the old image (again without the system disk).
        </p>
        <div class="field">
          <label for="im-image">New image</label>
          <input
            id="im-image"
            required
            placeholder="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
            value={image}
            onInput={(e) => setImage(value(e))}
          />
        </div>
        <ErrorNote error={a.error} />
        {r && r.changed === false && (
          <p class="notice" role="status">
            {done.msg}
          </p>
        )}
        {r && r.pending !== undefined && (
          <p class="notice" role="status">
            {r.pending
              ? `Kept for its next start: version ${before.version + 1} will run ${image.trim()}, without the system disk.`
              : 'Nothing waits for its next start: it starts as it was.'}
          </p>
        )}
        {r && r.changed !== false && r.pending === undefined && (
          <div role="status" class="image-result">
            <p class="ok">
              Version {r.version} runs <code>{r.imageName ?? image.trim()}</code>.
            </p>
            {r.systemDiskCarried === false ? (
              <p class="notice">
                The system disk was not carried: binds and volumes were
                {r.carry?.note ? ` (${r.carry.note})` : ''}. Roll back to version {before.version} to return to{' '}
                <code>{before.imageName}</code>.
              </p>
            ) : (
              r.systemDiskCarried && <p class="hint">Same image: the system disk was carried.</p>
            )}
          </div>
        )}
        {steps}
        <div class="actions">
          <button type="button" onClick={onClose}>
            Close
          </button>
          <button type="submit" class="primary" disabled={a.busy || !image.trim()}>
            Change image
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/**
 * Move: the set becomes a new version on another node of the fleet, with
 * its system disk and volumes (docs/fleet.md); the node it is on is not
 * offered, nor a node that takes no new sets.
 */
export function MoveDialog({ info, act, onClose, steps, here }: DialogProps & { here?: string }) {
  const nodes = usePoll(
    () => api<{ nodes: FleetNode[] }>('GET', '/api/v1/nodes').then((d) => d.nodes),
    info.name,
  );
  const [node, setNode] = useState('');
  const a = useAction();
  const others = (nodes.data ?? []).filter((n) => n.name !== here && n.state === 'ready');

  const submit = async (e: Event) => {
    e.preventDefault();
    const ok = await a.run(async () => {
      await act.long(() => api<LongAnswer>('POST', setPath(info.name, 'move'), node ? { node } : {}));
      return true;
    });
    if (ok) onClose();
  };

  return (
    <Dialog title={`Move ${info.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <p class="hint">
          It becomes a new version on the other node, with its disk and volumes.{' '}
          {info.state === 'running'
            ? 'It stops while its data is copied, then runs there.'
            : `It stays ${info.state} there.`}{' '}
          Its host ports change.
        </p>
        <ErrorNote error={nodes.error} />
        <div class="field">
          <label for="mv-node">Node</label>
          <select id="mv-node" value={node} onChange={(e) => setNode((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">Where it fits best</option>
            {others.map((n) => (
              <option key={n.name} value={n.name}>
                {n.name} ({n.gpus.free}/{n.gpus.total} GPUs free)
              </option>
            ))}
          </select>
        </div>
        {steps}
        <ErrorNote error={a.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={a.busy}>
            Move
          </button>
        </div>
      </form>
    </Dialog>
  );
}
