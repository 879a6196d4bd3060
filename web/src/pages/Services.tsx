// An instance's web services (docs/services.md): the create form's rows with
// the JupyterLab and TensorBoard presets, and the instance page's list, whose
// Open link gets a single-use ticket first (POST .../services/{s}/ticket) and
// opens the service's URL with it in a new tab, on the proxy's own origin.
import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNote } from '../components/ui';
import { useAction } from '../hooks';
import { useSession } from '../session';
import type { ServiceInfo } from '../types';
import { setPath } from './instanceHelpers';

export interface ServiceRow {
  /** Only a key for the row's inputs. */
  id: number;
  name: string;
  port: string;
  /** The preset it came from, for its hint; '' when typed. */
  preset: string;
}

export interface ServicePreset {
  key: string;
  label: string;
  name: string;
  port: number;
  /** The program's option that tells it its base path, for a set named `set`. */
  option: (set: string, service: string) => string;
}

export const SERVICE_PRESETS: ServicePreset[] = [
  {
    key: 'jupyter',
    label: 'JupyterLab',
    name: 'jupyter',
    port: 8888,
    option: (set, service) =>
      `jupyter lab --ip=0.0.0.0 --port=8888 --ServerApp.base_url=/s/${set}/${service}/ --ServerApp.token= --ServerApp.allow_remote_access=True`,
  },
  {
    key: 'tensorboard',
    label: 'TensorBoard',
    name: 'tensorboard',
    port: 6006,
    option: (set, service) => `tensorboard --logdir /root/logs --host 0.0.0.0 --port 6006 --path_prefix=/s/${set}/${service}`,
  },
];

/** The body's services: rows with a name or a port, ports as numbers. */
export function servicesBody(rows: ServiceRow[]): { name: string; port: number }[] {
  return rows
    .filter((r) => r.name.trim() || r.port.trim())
    .map((r) => ({ name: r.name.trim(), port: Number(r.port.trim()) }));
}

const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

/** The create form's services: a row each, added by hand or from a preset. */
export function ServiceFields({
  rows,
  setName,
  onChange,
}: {
  rows: ServiceRow[];
  setName: string;
  onChange: (rows: ServiceRow[]) => void;
}) {
  const [next, setNext] = useState(1);
  const add = (row: Omit<ServiceRow, 'id'>) => {
    onChange([...rows, { id: next, ...row }]);
    setNext(next + 1);
  };
  const update = (id: number, patch: Partial<ServiceRow>) =>
    onChange(rows.map((r) => (r.id === id ? { ...r, ...patch } : r)));
  const set = setName.trim() || 'NAME';
  return (
    <fieldset class="field">
      <legend>Web services</legend>
      {rows.map((r, i) => {
        const preset = SERVICE_PRESETS.find((p) => p.key === r.preset);
        return (
          <div key={r.id}>
            <div class="bind-row">
              <input
                aria-label={`Service ${i + 1} name`}
                placeholder="jupyter"
                value={r.name}
                onInput={(e) => update(r.id, { name: value(e) })}
              />
              <input
                aria-label={`Service ${i + 1} port`}
                type="number"
                min={1}
                max={65535}
                placeholder="8888"
                value={r.port}
                onInput={(e) => update(r.id, { port: value(e) })}
              />
              <button
                type="button"
                class="link"
                aria-label={`Remove service ${i + 1}`}
                onClick={() => onChange(rows.filter((x) => x.id !== r.id))}
              >
                Remove
              </button>
            </div>
            {preset && (
              <p class="hint service-option">
                {preset.label} must be told its base path: run it as{' '}
                <code>{preset.option(set, r.name.trim() || preset.name)}</code>
              </p>
            )}
          </div>
        );
      })}
      <div class="service-presets">
        {SERVICE_PRESETS.map((p) => (
          <button
            type="button"
            key={p.key}
            onClick={() => add({ name: p.name, port: String(p.port), preset: p.key })}
          >
            Add {p.label}
          </button>
        ))}
        <button type="button" onClick={() => add({ name: '', port: '', preset: '' })}>
          Add service
        </button>
      </div>
      <p class="hint">
        Reached through gpuboxd's service proxy at <code>/s/{set}/SERVICE/</code>, by you and admins only; no host port.
        The program must listen on 0.0.0.0 and serve under that path.
      </p>
    </fieldset>
  );
}

/** Open a service in a new tab: a ticket first, then its URL (the proxy trades it for a cookie). */
async function openService(set: string, service: string): Promise<void> {
  // The tab is opened now, while the click still counts as one (a tab
  // opened after an await is blocked as a pop-up), and sent on once the
  // ticket is here; it must not reach back to the console (opener).
  const tab = window.open('about:blank', '_blank');
  try {
    const t = await api<{ url: string }>('POST', setPath(set, `services/${encodeURIComponent(service)}/ticket`));
    if (tab) {
      tab.opener = null;
      tab.location.href = t.url;
    } else {
      window.location.assign(t.url);
    }
  } catch (e) {
    tab?.close();
    throw e;
  }
}

function ServiceItem({ set, s }: { set: string; s: ServiceInfo }) {
  const { canWrite } = useSession();
  const action = useAction();
  return (
    <li>
      <code>{s.name}</code> (port {s.port}){s.public ? ', public' : ''}{' '}
      {s.url === null ? (
        <span class="hint">the service proxy is off (gpuboxd --proxy-listen)</span>
      ) : canWrite ? (
        <button
          type="button"
          class="link"
          aria-label={`Open ${s.name}`}
          disabled={action.busy}
          onClick={() => action.run(() => openService(set, s.name))}
        >
          Open
        </button>
      ) : (
        <code>{s.url}</code>
      )}
      {s.linkUrl && (
        <>
          {' '}
          <span class="hint">link to share:</span> <code>{s.linkUrl}</code>
        </>
      )}
      <ErrorNote error={action.error} />
    </li>
  );
}

/** The instance page's services. */
export function ServicesList({ set, services }: { set: string; services: ServiceInfo[] }) {
  return (
    <ul class="plain services">
      {services.map((s) => (
        <ServiceItem key={s.name} set={set} s={s} />
      ))}
    </ul>
  );
}
