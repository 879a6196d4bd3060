// Images: the node's images (GET /api/v1/images), and for users and admins a
// pull (POST /api/v1/images/pull with wait: false) followed layer by layer
// through its operation record. Registry credentials are sent with that one
// request only: the password lives in the form's state until the request
// leaves, then is cleared; it is never written to any storage. A tag can be
// removed (DELETE /api/v1/images?name=, gpubox images rm) after a confirmation.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { Confirm, ErrorNote, Meter } from '../components/ui';
import { age, bytes } from '../format';
import { useAction, usePoll } from '../hooks';
import { useSession } from '../session';
import type { Image, PullOperation } from '../types';
import { operationPath, timeText } from './instanceHelpers';
import './instances.css';
import './resources.css';

/** The list asks Docker: every few seconds is enough. */
const IMAGES_POLL_MS = 5000;
/** A pull's record, while it runs. */
export const PULL_POLL_MS = 500;

const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

function shortId(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}

/** Follows a pull's record until it ends; `onEnd` once it has. */
function PullProgress({ id, first, onEnd }: { id: string; first: PullOperation | null; onEnd: () => void }) {
  const [op, setOp] = useState<PullOperation | null>(first);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try {
        const o = await api<PullOperation>('GET', operationPath(id));
        if (stopped) return;
        setOp(o);
        setError(null);
        if (o.state !== 'running') {
          onEnd();
          return;
        }
      } catch (e) {
        if (!stopped) setError((e as Error).message);
      }
      if (!stopped) timer = setTimeout(tick, PULL_POLL_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [id]);

  const p = op?.progress;
  return (
    <section class="steps pull-progress" role="status" aria-live="polite" aria-label="Pull">
      <h2>Pull</h2>
      {op ? (
        <p class="steps-state">
          pull <code>{op.target}</code>: <span class={`op-state op-${op.state}`}>{op.state}</span>
          {op.error && <span class="op-error"> ({op.error})</span>}
        </p>
      ) : (
        <p class="hint">Waiting for the pull to start…</p>
      )}
      {p && (
        <>
          <Meter
            title="Pull progress"
            value={p.current}
            max={p.total}
            text={`${bytes(p.current)} of ${bytes(p.total)}`}
          />
          <p class="hint">
            {bytes(p.current)} of {bytes(p.total)}; {p.layersDone} of {p.layers} layers done
          </p>
        </>
      )}
      {op?.state === 'done' && op.imageId && (
        <p class="ok">
          Pulled as <code>{shortId(op.imageId)}</code>
        </p>
      )}
      {op && op.steps.length > 0 && (
        <table class="pull-layers" aria-label="Layers">
          <thead>
            <tr>
              <th scope="col">Layer</th>
              <th scope="col">Status</th>
              <th scope="col">Downloaded</th>
            </tr>
          </thead>
          <tbody>
            {op.steps.map((s) => (
              <tr key={s.name} class={s.done ? 'step-done' : 'step-pending'}>
                <td class="mono">{s.name}</td>
                <td>{s.status ?? (s.done ? 'done' : 'waiting')}</td>
                <td>{s.total ? `${bytes(s.current ?? 0)} of ${bytes(s.total)}` : '-'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={error} />
    </section>
  );
}

function PullForm({ onPulled }: { onPulled: () => void }) {
  const [image, setImage] = useState('');
  const [username, setUsername] = useState('');
  // Only in this state, only until the request leaves: never stored.
  const [password, setPassword] = useState('');
  const [pull, setPull] = useState<{ id: string; op: PullOperation | null } | null>(null);
  const a = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { image: image.trim(), wait: false };
    if (username.trim() || password) body.registryAuth = { username: username.trim(), password };
    setPassword('');
    const r = await a.run(() => api<{ operationId: string; operation?: PullOperation }>('POST', '/api/v1/images/pull', body));
    if (r) setPull({ id: r.operationId, op: r.operation ?? null });
  };

  return (
    <form class="create-form pull-form" onSubmit={submit} aria-label="Pull image">
      <h2>Pull image</h2>
      <div class="field">
        <label for="pl-image">Image</label>
        <input
          id="pl-image"
          required
          placeholder="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
          value={image}
          onInput={(e) => setImage(value(e))}
        />
        <p class="hint">repo[:tag]; latest when no tag.</p>
      </div>
      <fieldset class="field">
        <legend>Registry credentials (optional)</legend>
        <div class="field">
          <label for="pl-user">Registry username</label>
          <input id="pl-user" autocomplete="off" value={username} onInput={(e) => setUsername(value(e))} />
        </div>
        <div class="field">
          <label for="pl-password">Registry password</label>
          <input
            id="pl-password"
            type="password"
            autocomplete="new-password"
            value={password}
            onInput={(e) => setPassword(value(e))}
          />
        </div>
        <p class="hint">
          For this pull only: sent once, never kept (the console stores none; gpuboxd logs none). Without them,
          gpuboxd's registry-auth file applies.
        </p>
      </fieldset>
      <ErrorNote error={a.error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={a.busy}>
          Pull
        </button>
      </div>
      {pull && <PullProgress key={pull.id} id={pull.id} first={pull.op} onEnd={onPulled} />}
    </form>
  );
}

/** "Remove ubuntu:22.04?": the name goes, and the image with its last one. */
function RemoveImage({ name, onDone, onCancel }: { name: string; onDone: () => void; onCancel: () => void }) {
  const a = useAction();
  const remove = async () => {
    const done = await a.run(() => api('DELETE', `/api/v1/images?name=${encodeURIComponent(name)}`));
    if (done !== undefined) onDone();
  };
  return (
    <Confirm
      title={`Remove ${name}?`}
      message={
        <p>
          The name <code>{name}</code> is removed from this node, and the image with it when it is its last name.
          An image an instance runs stays until that instance is deleted or moved to another image.
        </p>
      }
      action="Remove"
      busy={a.busy}
      error={a.error}
      onConfirm={remove}
      onCancel={onCancel}
    />
  );
}

export function Images() {
  const { canWrite, fleet } = useSession();
  const [removing, setRemoving] = useState<string | null>(null);
  const poll = usePoll(
    () => api<{ images: Image[] }>('GET', '/api/v1/images').then((d) => d.images ?? []),
    '',
    IMAGES_POLL_MS,
  );
  const images = poll.data;
  return (
    <>
      <div class="page-head">
        <h1>Images</h1>
      </div>
      <ErrorNote error={poll.error} />
      {!images && !poll.error && <p class="loading">Loading…</p>}
      {images && images.length === 0 && <p class="hint">No images on this node.</p>}
      {images && images.length > 0 && (
        <table aria-label="Images">
          <thead>
            <tr>
              <th scope="col">Tags</th>
              <th scope="col">ID</th>
              <th scope="col">Size</th>
              <th scope="col">Created</th>
              {fleet && <th scope="col">Node</th>}
            </tr>
          </thead>
          <tbody>
            {images.map((im) => (
              <tr key={`${im.node ?? ''}/${im.id}`}>
                <td>
                  {im.repoTags.length === 0 ? (
                    <span class="hint">(untagged)</span>
                  ) : (
                    im.repoTags.map((t) => (
                      <div key={t}>
                        <code>{t}</code>
                        {canWrite && !fleet && (
                          <button type="button" class="link" aria-label={`Remove ${t}`} onClick={() => setRemoving(t)}>
                            Remove
                          </button>
                        )}
                      </div>
                    ))
                  )}
                  {im.gpuboxCreated && <span class="badge"> committed by gpubox</span>}
                </td>
                <td class="mono" title={[im.id, ...(im.repoDigests ?? [])].join('\n')}>
                  {shortId(im.id)}
                </td>
                <td>{bytes(im.size)}</td>
                <td title={timeText(im.created)}>{im.created ? `${age(im.created)} ago` : '-'}</td>
                {fleet && <td>{im.node ?? '-'}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {canWrite && <PullForm onPulled={() => void poll.reload()} />}
      {removing && (
        <RemoveImage
          name={removing}
          onCancel={() => setRemoving(null)}
          onDone={() => {
            setRemoving(null);
            void poll.reload();
          }}
        />
      )}
    </>
  );
}
