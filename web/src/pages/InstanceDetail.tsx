// One instance: GET /api/v1/replicaSet/{name}, asked again every second, and
// the actions its state allows (none for a viewer). Each action's error shows
// beside its button or in its dialog; after any action the detail is asked
// again at once.
import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNote } from '../components/ui';
import { age, mib } from '../format';
import { useAction, usePoll } from '../hooks';
import { href } from '../router';
import { useSession } from '../session';
import type { ReplicaSetInfo, SetState } from '../types';
import { CommitDialog, DeleteDialog, ExecDialog, RollbackDialog, ScaleDialog, type Act } from './InstanceDialogs';
import { portsText, setPath, specGpusText, timeText } from './instanceHelpers';
import { StateBadge } from './Instances';
import { OperationSteps, useTracker } from './OperationSteps';
import './instances.css';

/** data.info's fields this page reads beyond ReplicaSetInfo. */
interface Info extends ReplicaSetInfo {
  gpuLimits?: { mode: string; enforced: boolean; enforcedBy: string | null };
}

type DialogKind = 'scale' | 'rollback' | 'commit' | 'exec' | 'delete';

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
function Actions({ info, act, open }: { info: Info; act: Act; open: (d: DialogKind) => void }) {
  const s: SetState = info.state;
  const live = s === 'running' || s === 'paused';
  const patch = (action: string) => () => api('PATCH', setPath(info.name, action));
  const opener = (label: string, d: DialogKind, cls?: string) => (
    <button type="button" class={cls} onClick={() => open(d)}>
      {label}
    </button>
  );
  return (
    <div class="detail-actions">
      {s === 'stopped' && <ActionButton label="Start" primary run={() => act.long(patch('restart'))} />}
      {s === 'paused' && <ActionButton label="Continue" primary run={() => act.quick(patch('continue'))} />}
      {live && opener('Scale', 'scale')}
      {s === 'running' && <ActionButton label="Pause" run={() => act.quick(patch('pause'))} />}
      {live && <ActionButton label="Stop" run={() => act.long(patch('stop'))} />}
      {s === 'running' && opener('Run command', 'exec')}
      {(live || s === 'stopped') && opener('Commit', 'commit')}
      {live && opener('Roll back', 'rollback')}
      {(live || s === 'stopped') && opener('Delete', 'delete', 'danger')}
      {s === 'deleted' && opener('Purge history', 'delete', 'danger')}
    </div>
  );
}

function gpuLimitText(limits: Info['gpuLimits']): string | null {
  if (!limits || limits.mode === 'none') return null;
  if (limits.enforced) return `enforced by ${limits.enforcedBy}`;
  return 'scheduled but not enforced: a process can use the whole card';
}

function Details({ info, fleet }: { info: Info; fleet: boolean }) {
  const shares = new Map(info.gpuShares.map((s) => [s.uuid, s]));
  const limit = gpuLimitText(info.gpuLimits);
  const spec = info.spec;
  return (
    <>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <StateBadge state={info.state} status={info.status} />
        </dd>
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
        <dt>Ports</dt>
        <dd>{portsText(info.ports)}</dd>
        <dt>Created</dt>
        <dd>
          {timeText(info.createTime)} ({age(info.createTime)} ago)
        </dd>
        <dt>Updated</dt>
        <dd>{timeText(info.updateTime)}</dd>
      </dl>
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
      </dl>
    </>
  );
}

export function InstanceDetail({ name }: { name: string }) {
  const { canWrite, fleet } = useSession();
  const poll = usePoll(() => api<{ info: Info }>('GET', setPath(name)).then((d) => d.info), name);
  const tracker = useTracker();
  const [dialog, setDialog] = useState<DialogKind | null>(null);
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
        {info && canWrite && <Actions info={info} act={act} open={setDialog} />}
        {/* In the dialog while one is open, here otherwise. */}
        {!dialog && steps}
        {info && <Details info={info} fleet={fleet} />}
      </div>
      {info && dialog === 'scale' && <ScaleDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'rollback' && <RollbackDialog info={info} act={act} onClose={close} steps={steps} />}
      {info && dialog === 'commit' && <CommitDialog info={info} act={act} onClose={close} />}
      {info && dialog === 'exec' && <ExecDialog info={info} act={act} onClose={close} />}
      {info && dialog === 'delete' && <DeleteDialog info={info} act={act} onClose={close} steps={steps} />}
    </>
  );
}
