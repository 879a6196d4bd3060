// The instance page's Configure dialog: its environment, binds (volumes and
// host paths) and published ports, edited in place and applied as one PATCH
// (envPatch, volumePatch, containerPorts/ports): one new version that keeps
// the system disk and the cards. The same as `gpubox update NAME`.
import { useState } from 'preact/hooks';
import { call } from '../api';
import { Dialog, ErrorNote } from '../components/ui';
import { useAction } from '../hooks';
import type { Bind, PortMapping, Spec } from '../types';
import type { DialogProps } from './InstanceDialogs';
import { setPath, type LongAnswer } from './instanceHelpers';

/** One bind row; `was` is the spec's bind it started as (none for a new row). */
export interface BindRow {
  src: string;
  dest: string;
  readOnly: boolean;
  was?: Bind;
}

export interface ConfigForm {
  env: string[];
  binds: BindRow[];
  /** Container ports published with a host port allocated ("8888", "53/udp"). */
  containerPorts: string[];
  /** Ports published on a host port of their own, kept as they are unless removed. */
  ports: PortMapping[];
}

export function configForm(spec: Spec): ConfigForm {
  return {
    env: [...spec.env],
    binds: spec.binds.map((b) => ({ src: b.src, dest: b.dest, readOnly: !!b.readOnly, was: b })),
    containerPorts: [...spec.containerPorts],
    ports: [...spec.ports],
  };
}

const sameList = (a: unknown[], b: unknown[]) => JSON.stringify(a) === JSON.stringify(b);
const bindOf = (r: BindRow): Bind => ({ src: r.src.trim(), dest: r.dest.trim(), readOnly: r.readOnly });
const sameBind = (a: Bind, b: Bind) => a.src === b.src && a.dest === b.dest && !!a.readOnly === !!b.readOnly;

/**
 * The patch that turns spec into the form: only the parts that changed. Binds
 * are removed first, then replaced, then added, so a destination moved from
 * one bind to another is free when the new one takes it.
 */
export function configPatch(spec: Spec, form: ConfigForm): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const env = form.env.map((e) => e.trim()).filter((e) => e !== '');
  if (!sameList(env, spec.env)) patch.envPatch = env;

  const kept = new Set(form.binds.map((r) => r.was).filter((b): b is Bind => !!b));
  const removed = spec.binds.filter((b) => !kept.has(b)).map((b) => ({ oldBind: { src: b.src, dest: b.dest } }));
  const replaced = form.binds
    .filter((r) => r.was && !sameBind(r.was, bindOf(r)))
    .map((r) => ({ oldBind: { src: r.was!.src, dest: r.was!.dest }, newBind: bindOf(r) }));
  const added = form.binds.filter((r) => !r.was && (r.src.trim() || r.dest.trim())).map((r) => ({ newBind: bindOf(r) }));
  const volumePatch = [...removed, ...replaced, ...added];
  if (volumePatch.length) patch.volumePatch = volumePatch;

  const cports = form.containerPorts.map((p) => p.trim()).filter((p) => p !== '');
  if (!sameList(cports, spec.containerPorts) || !sameList(form.ports, spec.ports)) {
    patch.containerPorts = cports;
    patch.ports = form.ports;
  }
  return patch;
}

const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

export function ConfigureDialog({ info, act, onClose, steps }: DialogProps) {
  const [form, setForm] = useState<ConfigForm>(() => configForm(info.spec));
  const [note, setNote] = useState<string | null>(null);
  const a = useAction();
  const patch = configPatch(info.spec, form);
  const changed = Object.keys(patch).length > 0;

  const set = (f: Partial<ConfigForm>) => setForm((old) => ({ ...old, ...f }));
  const at = <T,>(list: T[], i: number, v: T) => list.map((x, k) => (k === i ? v : x));
  const without = <T,>(list: T[], i: number) => list.filter((_, k) => k !== i);

  const submit = async (e: Event) => {
    e.preventDefault();
    setNote(null);
    let msg = '';
    const answer = await a.run(() =>
      act.long(async () => {
        const env = await call<LongAnswer>('PATCH', setPath(info.name), patch);
        msg = env.msg;
        return env.data;
      }),
    );
    if (!answer) return;
    if (answer.changed === false) setNote(msg);
    else onClose();
  };

  return (
    <Dialog title={`Configure ${info.name}`} onClose={onClose}>
      <form onSubmit={submit} class="configure">
        <p class="hint">
          Applying makes a new version in a new container with these settings; its disk, GPUs and the ports it still
          publishes are kept. A volume taken out keeps its data.
        </p>
        <fieldset class="field">
          <legend>Environment</legend>
          {form.env.map((e, i) => (
            <div class="config-row" key={`env-${i}`}>
              <input
                aria-label={`Variable ${i + 1}`}
                placeholder="NAME=value"
                value={e}
                onInput={(ev) => set({ env: at(form.env, i, value(ev)) })}
              />
              <button type="button" class="link" onClick={() => set({ env: without(form.env, i) })}>
                Remove {e.split('=')[0] || 'variable'}
              </button>
            </div>
          ))}
          <button type="button" onClick={() => set({ env: [...form.env, ''] })}>
            Add variable
          </button>
        </fieldset>
        <fieldset class="field">
          <legend>Volumes and binds</legend>
          {form.binds.map((b, i) => (
            <div class="bind-row" key={`bind-${i}`}>
              <input
                aria-label={`Bind ${i + 1} source`}
                placeholder="volume or /host/path"
                value={b.src}
                onInput={(ev) => set({ binds: at(form.binds, i, { ...b, src: value(ev) }) })}
              />
              <input
                aria-label={`Bind ${i + 1} destination`}
                placeholder="/data"
                value={b.dest}
                onInput={(ev) => set({ binds: at(form.binds, i, { ...b, dest: value(ev) }) })}
              />
              <label>
                <input
                  type="checkbox"
                  checked={b.readOnly}
                  onChange={(ev) =>
                    set({ binds: at(form.binds, i, { ...b, readOnly: (ev.currentTarget as HTMLInputElement).checked }) })
                  }
                />{' '}
                read-only
              </label>
              <button type="button" class="link" onClick={() => set({ binds: without(form.binds, i) })}>
                Remove {b.dest || 'bind'}
              </button>
            </div>
          ))}
          <button type="button" onClick={() => set({ binds: [...form.binds, { src: '', dest: '', readOnly: false }] })}>
            Add bind
          </button>
        </fieldset>
        <fieldset class="field">
          <legend>Published ports</legend>
          {form.ports.map((p, i) => (
            <div class="config-row" key={`port-${p.hostPort}-${p.containerPort}-${p.protocol}`}>
              <code>
                {p.hostPort}→{p.containerPort}/{p.protocol}
              </code>
              <button type="button" class="link" onClick={() => set({ ports: without(form.ports, i) })}>
                Remove {p.containerPort}/{p.protocol}
              </button>
            </div>
          ))}
          {form.containerPorts.map((p, i) => (
            <div class="config-row" key={`cport-${i}`}>
              <input
                aria-label={`Container port ${i + 1}`}
                placeholder="8888 or 53/udp"
                value={p}
                onInput={(ev) => set({ containerPorts: at(form.containerPorts, i, value(ev)) })}
              />
              <button
                type="button"
                class="link"
                onClick={() => set({ containerPorts: without(form.containerPorts, i) })}
              >
                Remove {p || 'port'}
              </button>
            </div>
          ))}
          <button type="button" onClick={() => set({ containerPorts: [...form.containerPorts, ''] })}>
            Add port
          </button>
          <p class="hint">A host port is allocated for each container port added.</p>
        </fieldset>
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
          <button type="submit" class="primary" disabled={a.busy || !changed}>
            Apply
          </button>
        </div>
      </form>
    </Dialog>
  );
}
