// Volumes: the list with each volume's use (a used/size bar), and for users
// and admins create, resize and delete. The list and the uses are polled
// every second; a failed action leaves its form or dialog open with the
// API's message and what the user typed.
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from '../api';
import { Bar, Confirm, Dialog, ErrorNote } from '../components/ui';
import { age, bytes } from '../format';
import { useAction, usePoll } from '../hooks';
import { dashNote } from '../names';
import { useSession } from '../session';
import type { Volume, VolumeInfo } from '../types';
import './resources.css';

/**
 * Up to this many volumes, every poll asks each one's use (one GET per
 * volume); beyond it only for the rows the user opened, to keep a poll cheap.
 */
const INFO_ALL_MAX = 50;

interface Snapshot {
  volumes: Volume[];
  /** Each asked volume's info, or the message its GET failed with. */
  infos: Map<string, VolumeInfo | string>;
}

export function Volumes() {
  const { canWrite, fleet } = useSession();
  // The rows whose use was asked for by hand (more than INFO_ALL_MAX volumes).
  const [opened, setOpened] = useState<ReadonlySet<string>>(new Set());
  const [dialog, setDialog] = useState<{ kind: 'resize' | 'delete'; v: Volume } | null>(null);

  const poll = usePoll<Snapshot>(async () => {
    const { volumes } = await api<{ volumes: Volume[] }>('GET', '/api/v1/volumes');
    const asked = volumes.length <= INFO_ALL_MAX ? volumes : volumes.filter((v) => opened.has(v.name));
    const answers = await Promise.allSettled(
      asked.map((v) => api<{ info: VolumeInfo }>('GET', `/api/v1/volumes/${seg(v.name)}`)),
    );
    const infos = new Map<string, VolumeInfo | string>();
    answers.forEach((a, i) =>
      infos.set(asked[i].name, a.status === 'fulfilled' ? a.value.info : (a.reason as Error).message),
    );
    return { volumes, infos };
  });

  const many = (poll.data?.volumes.length ?? 0) > INFO_ALL_MAX;
  // A row opened: ask now rather than at the next tick (the poll reads `opened`).
  useEffect(() => {
    if (opened.size) void poll.reload();
  }, [opened]);

  const VolumeDialog = dialog?.kind === 'resize' ? ResizeDialog : DeleteDialog;
  const columns = ['Name', 'Size', 'Used', 'Backend', 'Size enforced', 'State', 'Owner'];
  if (fleet) columns.push('Node');
  columns.push('Used by', 'Age');
  if (canWrite) columns.push('Actions');

  return (
    <>
      <h1>Volumes</h1>
      {canWrite && <CreateVolume fleet={fleet} reload={poll.reload} />}
      <section aria-labelledby="volumes-list">
        <h2 id="volumes-list">All volumes</h2>
        <ErrorNote error={poll.error} />
        {!poll.data ? (
          !poll.error && <p class="loading">Loading…</p>
        ) : (
          <table aria-label="Volumes">
            <thead>
              <tr>
                {columns.map((c) => (
                  <th key={c} scope="col">
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {poll.data.volumes.length === 0 && (
                <tr>
                  <td colSpan={columns.length}>No volumes.</td>
                </tr>
              )}
              {poll.data.volumes.map((v) => {
                const info = poll.data!.infos.get(v.name);
                const askable = many && !info && !opened.has(v.name);
                return (
                  <VolumeLine
                    key={v.name}
                    v={v}
                    info={info}
                    open={askable ? () => setOpened(new Set([...opened, v.name])) : undefined}
                    act={canWrite ? (kind) => setDialog({ kind, v }) : undefined}
                  />
                );
              })}
            </tbody>
          </table>
        )}
      </section>
      {dialog && <VolumeDialog v={dialog.v} close={() => setDialog(null)} reload={poll.reload} />}
    </>
  );
}

/**
 * One volume's row. `open` (many volumes) asks for its use on a click; `act`
 * (users and admins only) opens its resize or delete dialog.
 */
function VolumeLine({
  v,
  info,
  open,
  act,
}: {
  v: Volume;
  info: VolumeInfo | string | undefined;
  open?: () => void;
  act?: (kind: 'resize' | 'delete') => void;
}) {
  const { fleet } = useSession();
  const usedBy = typeof info === 'object' ? info.usedBy.map((u) => u.name).join(', ') : '';
  return (
    <tr>
      <td>{v.name}</td>
      <td>
        {v.sizeText}
        {v.resizingTo && <span class="hint"> resizing to {v.resizingTo}</span>}
      </td>
      <td class="memory">
        <UsedCell v={v} info={info} open={open} />
      </td>
      <td>{v.filesystem ? `${v.backend} (${v.filesystem})` : v.backend}</td>
      <td>{v.enforced ? 'yes' : 'no (recorded only)'}</td>
      <td>
        <span class={`state state-${v.state}`}>{v.state}</span>
      </td>
      <td>{v.owner || '-'}</td>
      {fleet && <td>{v.node ?? '-'}</td>}
      <td>{usedBy || '-'}</td>
      <td>{age(v.createTime)}</td>
      {act && (
        <td class="row-actions">
          <button type="button" aria-label={`Resize ${v.name}`} onClick={() => act('resize')}>
            Resize
          </button>
          <button type="button" aria-label={`Delete ${v.name}`} onClick={() => act('delete')}>
            Delete
          </button>
        </td>
      )}
    </tr>
  );
}

/** The used/size bar, why the use is unknown, or (many volumes) a button to ask for it. */
function UsedCell({ v, info, open }: { v: Volume; info: VolumeInfo | string | undefined; open?: () => void }) {
  if (open)
    return (
      <button type="button" class="link" aria-label={`Show use of ${v.name}`} onClick={open}>
        Show use
      </button>
    );
  if (typeof info === 'string') return <span class="hint">{info}</span>;
  if (!info) return <span class="hint">-</span>;
  if (info.used === null) return <span class="hint">{info.problem ?? 'not attached'}</span>;
  return (
    <>
      <Bar title={`${v.name} used`} total={v.size} segments={[{ label: 'used', value: info.used }]} />
      <span class="hint">
        {bytes(info.used)} of {bytes(v.size)}
      </span>
    </>
  );
}

function CreateVolume({ fleet, reload }: { fleet: boolean; reload: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [size, setSize] = useState('');
  const [node, setNode] = useState('');
  const action = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    const body: { name: string; size: string; node?: string } = { name: name.trim(), size: size.trim() };
    if (fleet && node.trim()) body.node = node.trim();
    const done = await action.run(async () => {
      await api('POST', '/api/v1/volumes', body);
      await reload();
      return true;
    });
    // Cleared only once the volume exists: on a failure what was typed stays.
    if (done) {
      setName('');
      setSize('');
      setNode('');
    }
  };

  return (
    <section aria-labelledby="volume-create">
      <h2 id="volume-create">Create volume</h2>
      <form class="inline-form" onSubmit={submit}>
        <label for="volume-name">Name</label>
        <input id="volume-name" required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="volume-size">Size</label>
        <input
          id="volume-size"
          required
          placeholder="20GB"
          aria-describedby="volume-size-hint"
          value={size}
          onInput={(e) => setSize((e.target as HTMLInputElement).value)}
        />
        {fleet && (
          <>
            <label for="volume-node">Node</label>
            <input
              id="volume-node"
              placeholder="any"
              value={node}
              onInput={(e) => setNode((e.target as HTMLInputElement).value)}
            />
          </>
        )}
        <button type="submit" class="primary" disabled={action.busy}>
          Create volume
        </button>
      </form>
      <p class="hint" id="volume-size-hint">
        Sizes in B, KB, MB, GB or TB (powers of 1024), for example 20GB or 1.5TB.
        {fleet && ' Without a node, the volume goes where there is the most free space.'}
      </p>
      {dashNote(name) && (
        <p class="notice name-dash" role="status">
          {dashNote(name)}
        </p>
      )}
      <ErrorNote error={action.error} />
    </section>
  );
}

interface DialogProps {
  v: Volume;
  close: () => void;
  reload: () => Promise<void>;
}

function ResizeDialog({ v, close, reload }: DialogProps) {
  const [size, setSize] = useState(v.sizeText);
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const done = await action.run(async () => {
      await api('PATCH', `/api/v1/volumes/${seg(v.name)}/size`, { size: size.trim() });
      await reload();
      return true;
    });
    if (done) close();
  };
  return (
    <Dialog title={`Resize ${v.name}`} onClose={close}>
      <form onSubmit={submit}>
        <p>
          Now {v.sizeText}. Growing keeps every byte; a shrink must leave room for the data. A volume a running
          instance has mounted may have to be stopped (or paused) first.
        </p>
        <label for="resize-size">New size</label>{' '}
        <input id="resize-size" required value={size} onInput={(e) => setSize((e.target as HTMLInputElement).value)} />
        <ErrorNote error={action.error} />
        <div class="actions">
          <button type="button" onClick={close}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={action.busy}>
            Resize
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteDialog({ v, close, reload }: DialogProps) {
  const action = useAction();
  const confirm = async () => {
    const done = await action.run(async () => {
      await api('DELETE', `/api/v1/volumes/${seg(v.name)}`);
      await reload();
      return true;
    });
    if (done) close();
  };
  return (
    <Confirm
      title={`Delete volume ${v.name}?`}
      message={
        <p>
          This destroys the volume <strong>{v.name}</strong> ({v.sizeText}) with all its data and its size history. It
          cannot be undone.
        </p>
      }
      action="Delete"
      busy={action.busy}
      error={action.error}
      onConfirm={confirm}
      onCancel={close}
    />
  );
}
