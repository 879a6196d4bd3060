// One instance: GET /api/v1/replicaSet/{name}, asked again every second, and
// the actions its state allows (none for a viewer). Each action's error shows
// beside its button or in its dialog; after any action the detail is asked
// again at once. Its live use of each card, when it went idle, when it will
// be stopped, and why it stopped show beside its facts.
import { useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNote, Meter } from '../components/ui';
import { age, mib, percent, shortUuid, until } from '../format';
import { useAction, usePoll } from '../hooks';
import { href } from '../router';
import { useSession } from '../session';
import type { GpusAside, ReplicaSet, ReplicaSetInfo, SetState, SetUsage, SshInfo, StopReason } from '../types';
import {
  AutoStopDialog,
  ChangeImageDialog,
  CommitDialog,
  DeleteDialog,
  ExecDialog,
  MoveDialog,
  RollbackDialog,
  ScaleDialog,
  StartWithoutGpusDialog,
  type Act,
} from './InstanceDialogs';
import { ConfigureDialog } from './ConfigureDialog';
import { LogsPanel } from './LogsPanel';
import { TerminalPanel } from './TerminalPanel';
import { cpuList, pendingChanges, portsText, setPath, specGpusText, timeText } from './instanceHelpers';
import { StateBadge } from './Instances';
import { OperationSteps, useTracker } from './OperationSteps';
import { ServicesList } from './Services';
import './instances.css';

/** data.info's fields this page reads beyond ReplicaSetInfo. */
interface Info extends ReplicaSetInfo {
  /** cores: the compute share its limits file holds each card to (gpuCores); absent: none. */
  gpuLimits?: { mode: string; enforced: boolean; enforcedBy: string | null; cores?: number };
}

/** The live fields, which gpuboxd may send in info or beside it in data. */
type Live = Pick<ReplicaSet, 'usage' | 'runningSince' | 'stopAt' | 'stopped'>;

/** data of GET /api/v1/replicaSet/{name} as one Info, the live fields taken from info first. */
function infoOf(d: { info: Info } & Live): Info {
  const i = d.info;
  return {
    ...i,
    usage: i.usage !== undefined ? i.usage : d.usage,
    runningSince: i.runningSince ?? d.runningSince,
    stopAt: i.stopAt ?? d.stopAt,
    stopped: i.stopped ?? d.stopped,
  };
}

type DialogKind =
  | 'scale'
  | 'autostop'
  | 'rollback'
  | 'commit'
  | 'exec'
  | 'delete'
  | 'nogpu'
  | 'image'
  | 'configure'
  | 'move';

/** "2 GPUs", "1 GPU": what a set started without cards keeps aside. */
export function asideText(a: GpusAside): string {
  const n = a.gpuCount;
  const what = n === 1 ? 'GPU' : 'GPUs';
  if (a.gpuMemory && a.gpuMemory > 0) return `${n} ${what} (${mib(a.gpuMemory)} share each)`;
  if (a.gpuShared) return `${n} ${what} (time-slice)`;
  return `${n} ${what}`;
}

/** A button that runs a call and shows that call's error right beside it. */
function ActionButton({ label, run, primary }: { label: string; run: () => Promise<unknown>; primary?: boolean }) {
  const a = useAction();
  return (
    <div class="action">
      <button type="button" class={primary ? 'primary' : undefined} disabled={a.busy} onClick={() => a.run(run)}>
        {label}
      </button>
      <ErrorNote error={a.error} />
    </div>
  );
}

/** The buttons a state allows, in the order a user reaches for them. */
function Actions({ info, act, open, fleet }: { info: Info; act: Act; open: (d: DialogKind) => void; fleet?: boolean }) {
  const s: SetState = info.state;
  const live = s === 'running' || s === 'paused';
  const patch = (action: string) => () => api('PATCH', setPath(info.name, action));
  const opener = (label: string, d: DialogKind, cls?: string) => (
    <button type="button" class={cls} onClick={() => open(d)}>
      {label}
    </button>
  );
  // Cards it could run without: its spec asks for some, and none are aside already.
  const hasCards = info.spec.gpuCount > 0 && !info.gpusAside;
  return (
    <div class="detail-actions">
      {s === 'stopped' && <ActionButton label="Start" primary run={() => act.long(patch('restart'))} />}
      {s === 'stopped' && hasCards && opener('Start without GPUs', 'nogpu')}
      {live && info.gpusAside && (
        <ActionButton label="Restart with GPUs" run={() => act.long(patch('restart'))} />
      )}
      {s === 'paused' && <ActionButton label="Continue" primary run={() => act.quick(patch('continue'))} />}
      {/* A stopped set may be changed too: the change waits for its next start. */}
      {(live || s === 'stopped') && opener('Scale', 'scale')}
      {(live || s === 'stopped') && opener('Configure', 'configure')}
      {s === 'running' && <ActionButton label="Pause" run={() => act.quick(patch('pause'))} />}
      {live && <ActionButton label="Stop" run={() => act.long(patch('stop'))} />}
      {s === 'running' && opener('Run command', 'exec')}
      {(live || s === 'stopped') && opener('Commit', 'commit')}
      {(live || s === 'stopped') && opener('Roll back', 'rollback')}
      {(live || s === 'stopped') && opener('Change image', 'image')}
      {live && hasCards && opener('Restart without GPUs', 'nogpu')}
      {(live || s === 'stopped') && opener('Auto-stop', 'autostop')}
      {fleet && (live || s === 'stopped') && opener('Move', 'move')}
      {(live || s === 'stopped') && opener('Delete', 'delete', 'danger')}
      {s === 'queued' && opener('Cancel', 'delete', 'danger')}
      {s === 'deleted' && opener('Purge history', 'delete', 'danger')}
    </div>
  );
}

function gpuLimitText(limits: Info['gpuLimits']): string | null {
  if (!limits || limits.mode === 'none') return null;
  if (limits.enforced)
    return `enforced by ${limits.enforcedBy}${limits.cores ? `, compute held at ${limits.cores}%` : ''}`;
  return 'scheduled but not enforced: a process can use the whole card';
}

function Details({ info, fleet }: { info: Info; fleet: boolean }) {
  const shares = new Map(info.gpuShares.map((s) => [s.uuid, s]));
  const limit = gpuLimitText(info.gpuLimits);
  // The run limits belong to the set, not to a version: the API puts them beside the spec.
  const spec = { ...info.spec, idleStop: info.idleStop ?? info.spec.idleStop, maxDuration: info.maxDuration ?? info.spec.maxDuration };
  return (
    <>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <StateBadge state={info.state} status={info.status} />
        </dd>
        {info.state === 'queued' && info.queue && (
          <>
            <dt>In the queue</dt>
            <dd class="queue-place">
              {info.queue.position ? `position ${info.queue.position}` : 'waiting'}
              {info.queue.head ? ' (first in line)' : ''}: {info.queue.why ?? 'waits for room'}
            </dd>
          </>
        )}
        {info.queue?.dropped && (
          <>
            <dt>Left the queue</dt>
            <dd>
              {info.queue.dropped.reason}: {info.queue.dropped.detail}
            </dd>
          </>
        )}
        <dt>Version</dt>
        <dd>
          {info.version} (<code>{info.containerName}</code>)
        </dd>
        {(fleet || info.node) && (
          <>
            <dt>Node</dt>
            <dd>{info.node ?? '-'}</dd>
          </>
        )}
        <dt>Owner</dt>
        <dd>{info.owner || '-'}</dd>
        <dt>Image</dt>
        <dd>
          <code>{spec.imageName}</code>
        </dd>
        <dt>GPUs</dt>
        <dd>
          {specGpusText(spec)}
          {spec.gpuMemory > 0 || spec.gpuShared ? `, ${spec.gpuPolicy}` : ''}
          {spec.gpuCores ? `, ${spec.gpuCores}% compute a card` : ''}
          {limit && <span class="hint"> ({limit})</span>}
          {info.gpus.length > 0 && (
            <ul class="plain">
              {info.gpus.map((uuid) => {
                const sh = shares.get(uuid);
                return (
                  <li key={uuid}>
                    <code>{uuid}</code>{' '}
                    {sh ? (sh.mode === 'timeslice' ? `time-slice replica ${sh.replica ?? ''}` : `${mib(sh.memoryMiB)} share`) : 'whole'}
                  </li>
                );
              })}
            </ul>
          )}
        </dd>
        {info.cpuset && info.cpuset.length > 0 && (
          <>
            <dt>CPU cores</dt>
            <dd>
              <code>{cpuList(info.cpuset)}</code> ({info.cpuset.length} of its own)
            </dd>
          </>
        )}
        <dt>Ports</dt>
        <dd>{portsText(info.ports)}</dd>
        {info.services && info.services.length > 0 && (
          <>
            <dt>Services</dt>
            <dd>
              <ServicesList set={info.name} services={info.services} />
            </dd>
          </>
        )}
        {info.ssh && (
          <>
            <dt>SSH</dt>
            <dd>
              <SshBox ssh={info.ssh} name={info.name} running={info.state === 'running'} />
            </dd>
          </>
        )}
        {info.runningSince && info.state === 'running' && (
          <>
            <dt>Running since</dt>
            <dd>
              {timeText(info.runningSince)} (for {age(info.runningSince)})
            </dd>
          </>
        )}
        {info.state === 'paused' && (
          <>
            <dt>Paused</dt>
            <dd>
              its processes are frozen until it is continued
              {info.runningSince ? ` (started ${timeText(info.runningSince)}, ${age(info.runningSince)} ago)` : ''}
            </dd>
          </>
        )}
        {info.stopAt && info.state !== 'stopped' && info.state !== 'deleted' && (
          <>
            <dt>Stops at</dt>
            <dd>
              {timeText(info.stopAt)} (in {until(info.stopAt)}
              {spec.maxDuration ? `; maximum duration ${spec.maxDuration}` : ''})
            </dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          {timeText(info.createTime)} ({age(info.createTime)} ago)
        </dd>
        <dt>Updated</dt>
        <dd>{timeText(info.updateTime)}</dd>
      </dl>
      {info.usage && <UsageSection usage={info.usage} idleStop={spec.idleStop} />}
      <h2>Spec</h2>
      <dl class="facts">
        <dt>Binds</dt>
        <dd>
          {spec.binds.length === 0
            ? '-'
            : spec.binds.map((b) => (
                <div key={b.dest}>
                  <code>{b.src}</code> → <code>{b.dest}</code>
                  {b.readOnly ? ' (read-only)' : ''}
                </div>
              ))}
        </dd>
        <dt>Environment</dt>
        <dd>
          {spec.env.length === 0
            ? '-'
            : spec.env.map((e, i) => (
                <div key={i}>
                  <code>{e}</code>
                </div>
              ))}
        </dd>
        <dt>Command</dt>
        <dd>{spec.cmd.length ? <code>{JSON.stringify(spec.cmd)}</code> : "the image's own"}</dd>
        <dt>Container ports</dt>
        <dd>{spec.containerPorts.join(', ') || '-'}</dd>
        <dt>Stop when idle for</dt>
        <dd>{spec.idleStop || 'never'}</dd>
        <dt>Maximum duration</dt>
        <dd>{spec.maxDuration || 'none'}</dd>
      </dl>
    </>
  );
}

const SSH_SEEN = 'gpubox.sshSeen.';

/** The SSH notice this tab was shown for the instance, and dismissed. */
function sshSeen(name: string): string | null {
  try {
    return sessionStorage.getItem(SSH_SEEN + name);
  } catch {
    return null;
  }
}

/**
 * The command to reach the set ("ssh -p 40012 root@host"), to copy; why it
 * does not work now, when it does not. Why is a notice once: dismissed, the
 * same words come back as a quiet hint (not as a notice after every start),
 * and while the set is not running they are only a hint anyway.
 */
function SshBox({ ssh, name, running }: { ssh: SshInfo; name: string; running: boolean }) {
  const [copied, setCopied] = useState<string | null>(null);
  const [seen, setSeen] = useState<string | null>(() => sshSeen(name));
  const dismiss = () => {
    try {
      sessionStorage.setItem(SSH_SEEN + name, ssh.message ?? '');
    } catch {
      /* no storage: dismissed for as long as the page lives */
    }
    setSeen(ssh.message ?? '');
  };
  const code = useRef<HTMLElement>(null);
  const copy = async () => {
    if (!ssh.command) return;
    try {
      await navigator.clipboard.writeText(ssh.command);
      setCopied('Copied');
    } catch {
      // No clipboard (plain HTTP to a remote address): select it for Ctrl+C.
      const sel = getSelection();
      if (code.current && sel) {
        const r = document.createRange();
        r.selectNodeContents(code.current);
        sel.removeAllRanges();
        sel.addRange(r);
      }
      setCopied('Selected: press Ctrl+C to copy');
    }
  };
  const down = ssh.running === false || ssh.server === null;
  return (
    <div class="ssh">
      {ssh.command && (
        <div class="ssh-command">
          <code class="copybox" ref={code}>
            {ssh.command}
          </code>
          <button type="button" onClick={copy} aria-label="Copy the SSH command">
            Copy
          </button>
          {copied && (
            <span class="hint" role="status">
              {copied}
            </span>
          )}
        </div>
      )}
      {down && running && ssh.message && seen !== ssh.message ? (
        <p class="notice ssh-message">
          {ssh.message}{' '}
          <button type="button" class="link" onClick={dismiss}>
            Dismiss
          </button>
        </p>
      ) : (
        ssh.message && <p class="hint">{ssh.message}</p>
      )}
    </div>
  );
}

/** Each card's live use against what the set holds on it, and since when it is idle. */
function UsageSection({ usage, idleStop }: { usage: SetUsage; idleStop?: string }) {
  return (
    <section class="usage" aria-label="Usage">
      <h2>Usage</h2>
      {usage.idleSince ? (
        <p class="idle-since">
          Idle since {timeText(usage.idleSince)} (for {age(usage.idleSince)})
          {idleStop ? `; it stops after ${idleStop} idle.` : '.'}
        </p>
      ) : (
        <p class="hint">Sampled {age(usage.sampledAt)} ago.</p>
      )}
      {usage.cards.length > 0 && (
        <table class="usage-cards" aria-label="Usage by card">
          <thead>
            <tr>
              <th scope="col">GPU</th>
              <th scope="col">Memory used</th>
              <th scope="col">Utilization</th>
              <th scope="col">Card health</th>
            </tr>
          </thead>
          <tbody>
            {usage.cards.map((c) => {
              const used = `${mib(c.memoryUsedMiB)} of ${mib(c.shareMiB)}`;
              return (
                <tr key={c.uuid}>
                  <td title={c.uuid}>
                    GPU {c.index} <span class="hint mono">{shortUuid(c.uuid)}</span>
                  </td>
                  <td class="memory">
                    <Meter
                      title={`GPU ${c.index} memory used`}
                      value={c.memoryUsedMiB}
                      max={c.shareMiB}
                      text={`${used} held`}
                      over={c.overShare}
                    />
                    <span class="hint">{used} held</span>
                    {c.overShare && (
                      <p class="over-share">
                        Over its share: its processes use more than the {mib(c.shareMiB)} it holds.
                      </p>
                    )}
                  </td>
                  <td>{percent(c.utilization)}</td>
                  <td>
                    <span class={`badge ${c.healthy ? 'ok' : 'bad'}`}>{c.healthy ? 'healthy' : 'unhealthy'}</span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** Why it stopped, in words: "Stopped after 30m idle", "Stopped: maximum duration reached". */
function stopText(stopped: StopReason, spec: ReplicaSetInfo['spec']): string {
  if (stopped.reason === 'idle') return spec.idleStop ? `Stopped after ${spec.idleStop} idle` : 'Stopped: idle';
  if (stopped.reason === 'maxDuration')
    return `Stopped: maximum duration reached${spec.maxDuration ? ` (${spec.maxDuration})` : ''}`;
  return 'Stopped on request';
}

export function InstanceDetail({ name }: { name: string }) {
  const { canWrite, fleet } = useSession();
  const poll = usePoll(() => api<{ info: Info } & Live>('GET', setPath(name)).then(infoOf), name);
  const tracker = useTracker();
  const [dialog, setDialog] = useState<DialogKind | null>(null);
  const [logsOpen, setLogsOpen] = useState(false);
  const [termOpen, setTermOpen] = useState(false);
  const info = poll.data;

  // Whatever a call's outcome, the state may have moved: ask again at once.
  const act: Act = {
    long: (fn) => tracker.track(name, fn).finally(poll.reload),
    quick: (fn) => fn().finally(poll.reload),
  };
  const steps = tracker.state && <OperationSteps {...tracker.state} />;
  const close = () => setDialog(null);

  return (
    <>
      <div inert={dialog !== null}>
        <p class="back">
          <a href={href('instances')}>← Instances</a>
        </p>
        <div class="page-head">
          <h1>{name}</h1>
          {info && <StateBadge state={info.state} />}
        </div>
        <ErrorNote error={poll.error} />
        {!info && !poll.error && <p class="loading">Loading…</p>}
        {info?.state === 'deleted' && (
          <p class="notice">
            Deleted: its GPUs and ports are released and its container removed. Its history is kept, so creating{' '}
            {name} again continues its versions.
          </p>
        )}
        {info?.state === 'creating' && <p class="notice">Being created: its container is starting.</p>}
        {info?.gpusAside && info.state !== 'deleted' && (
          <p class="notice gpus-aside">
            Runs without its {asideText(info.gpusAside)}; Start/Restart takes them again.
          </p>
        )}
        {info?.state === 'stopped' && info.pending && info.pendingSpec && (
          <p class="notice pending-change" role="status">
            Changed while stopped ({pendingChanges(info.spec, info.pendingSpec).join(', ')}): the change applies when it
            next starts, as version {info.version + 1}; no GPUs are taken until then.
          </p>
        )}
        {info?.state === 'stopped' && info.stopped && (
          <p class="notice stopped-why">
            {stopText(info.stopped, { ...info.spec, idleStop: info.idleStop ?? info.spec.idleStop, maxDuration: info.maxDuration ?? info.spec.maxDuration })}, at {timeText(info.stopped.at)} ({age(info.stopped.at)} ago).
            {info.stopped.detail && <span class="hint"> {info.stopped.detail}</span>}
          </p>
        )}
        {info && canWrite && <Actions info={info} act={act} open={setDialog} fleet={fleet} />}
        {/* In the dialog while one is open, here otherwise. */}
        {!dialog && steps}
        {info && <Details info={info} fleet={fleet} />}
        {info && canWrite && info.state === 'running' && (
          <section class="terminal-section" aria-label="Terminal">
            <div class="page-head">
              <h2>Terminal</h2>
              <button type="button" aria-expanded={termOpen} onClick={() => setTermOpen((o) => !o)}>
                {termOpen ? 'Close terminal' : 'Open terminal'}
              </button>
            </div>
            {termOpen && <TerminalPanel name={name} />}
          </section>
        )}
        <section class="logs-section" aria-label="Logs">
          <div class="page-head">
            <h2>Logs</h2>
            <button type="button" aria-expanded={logsOpen} onClick={() => setLogsOpen((o) => !o)}>
              {logsOpen ? 'Hide logs' : 'Show logs'}
            </button>
          </div>
          {logsOpen && <LogsPanel name={name} />}
        </section>
      </div>
      {info && dialog === 'scale' && <ScaleDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'configure' && <ConfigureDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'autostop' && <AutoStopDialog info={info} act={act} onClose={close} />}
      {info && dialog === 'rollback' && <RollbackDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'commit' && <CommitDialog info={info} act={act} onClose={close} />}
      {info && dialog === 'exec' && <ExecDialog info={info} act={act} onClose={close} />}
      {info && dialog === 'nogpu' && <StartWithoutGpusDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'image' && <ChangeImageDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'move' && (
        <MoveDialog info={info} act={act} onClose={close} steps={steps} here={info.node} />
      )}
      {info && dialog === 'delete' && <DeleteDialog info={info} act={act} onClose={close} steps={steps} />}
    </>
  );
}
