// The create form: POST /api/v1/replicaSet (docs/api.md). A failed create
// leaves every field as typed, with the API's message in the form; while the
// create runs its steps show live.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNote } from '../components/ui';
import { useAction } from '../hooks';
import { dashNote } from '../names';
import { useSession } from '../session';
import type { Bind, Volume } from '../types';
import { StopRuleFields } from './InstanceDialogs';
import { commandArgv, memoryValue, splitLines, splitList } from './instanceHelpers';
import { OperationSteps, useTracker } from './OperationSteps';
import { ServiceFields, servicesBody, type ServiceRow } from './Services';
import './instances.css';

export type GpuMode = 'none' | 'whole' | 'memory' | 'timeslice';

export interface BindRow {
  /** Only a key for the row's inputs. */
  id: number;
  src: string;
  dest: string;
  readOnly: boolean;
}

/** The form's fields, as typed. */
export interface CreateForm {
  name: string;
  image: string;
  mode: GpuMode;
  count: string;
  memory: string;
  /** The compute share of each card, percent (gpuCores); empty: none. */
  cores: string;
  policy: 'binpack' | 'spread';
  binds: BindRow[];
  ports: string;
  env: string;
  command: string;
  node: string;
  /** Stop when idle this long ("30m"); empty: never. */
  idleStop: string;
  /** Stop after running this long ("8h"); empty: no limit. */
  maxDuration: string;
  /** When the image is pulled; sent only when not the default. */
  pull: 'missing' | 'always' | 'never';
  /** SSH public keys, one a line. */
  sshKeys: string;
  /** Logical CPUs of its own (cpuCount); empty: none. */
  cpuCount: string;
  /** Memory limit ("16GB"); empty: none. */
  memoryLimit: string;
  /** /dev/shm size ("1GB"); empty: Docker's default. */
  shmSize: string;
  /** Web services behind gpuboxd's proxy (docs/services.md). */
  services: ServiceRow[];
}

export const EMPTY_FORM: CreateForm = {
  name: '',
  image: '',
  mode: 'none',
  count: '1',
  memory: '8GB',
  cores: '',
  policy: 'binpack',
  binds: [],
  ports: '',
  env: '',
  command: '',
  node: '',
  idleStop: '',
  maxDuration: '',
  pull: 'missing',
  sshKeys: '',
  cpuCount: '',
  memoryLimit: '',
  shmSize: '',
  services: [],
};

/** The body of POST /api/v1/replicaSet; empty fields are left out (the API's defaults). */
export function createBody(f: CreateForm, fleet: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { replicaSetName: f.name.trim(), imageName: f.image.trim() };
  if (f.mode !== 'none') body.gpuCount = Number(f.count);
  if (f.mode === 'memory') body.gpuMemory = memoryValue(f.memory);
  if (f.mode === 'timeslice') body.gpuShared = true;
  // A compute share goes with a share; a whole card is the set's alone.
  if ((f.mode === 'memory' || f.mode === 'timeslice') && f.cores.trim()) body.gpuCores = Number(f.cores);
  // The policy picks among cards for a share; whole cards ignore it.
  if (f.mode === 'memory' || f.mode === 'timeslice') body.gpuPolicy = f.policy;
  const binds: Bind[] = f.binds
    .filter((b) => b.src.trim() || b.dest.trim())
    .map((b) => ({ src: b.src.trim(), dest: b.dest.trim(), ...(b.readOnly ? { readOnly: true } : {}) }));
  if (binds.length) body.binds = binds;
  const ports = splitList(f.ports);
  if (ports.length) body.containerPorts = ports;
  const env = splitLines(f.env);
  if (env.length) body.env = env;
  const cmd = commandArgv(f.command);
  if (cmd) body.cmd = cmd;
  if (f.cpuCount.trim()) body.cpuCount = Number(f.cpuCount);
  if (f.memoryLimit.trim()) body.memory = memoryBytes(f.memoryLimit);
  if (f.shmSize.trim()) body.shmSize = memoryBytes(f.shmSize);
  if (f.idleStop.trim()) body.idleStop = f.idleStop.trim();
  if (f.maxDuration.trim()) body.maxDuration = f.maxDuration.trim();
  if (fleet && f.node.trim()) body.node = f.node.trim();
  if (f.pull !== 'missing') body.pull = f.pull;
  const keys = splitLines(f.sshKeys);
  if (keys.length) body.sshKeys = keys;
  const services = servicesBody(f.services);
  if (services.length) body.services = services;
  return body;
}

/** A size as the API takes it: "16GB" as typed, a bare number as bytes. */
function memoryBytes(text: string): string | number {
  const t = text.trim();
  return /^\d+$/.test(t) ? Number(t) : t;
}

const MODES: { mode: GpuMode; label: string }[] = [
  { mode: 'none', label: 'None' },
  { mode: 'whole', label: 'Whole cards' },
  { mode: 'memory', label: 'Memory share' },
  { mode: 'timeslice', label: 'Time-slice' },
];

const COUNT_HINT: Record<GpuMode, string> = {
  none: '',
  whole: 'Cards held whole, by this instance alone.',
  memory: 'Cards to take a share on; the memory below is taken on each.',
  timeslice: 'Cards to take one time-slice replica on each.',
};

const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

export function CreateInstance({ onCreated, onCancel }: { onCreated: (name: string) => void; onCancel: () => void }) {
  const { fleet } = useSession();
  const [form, setForm] = useState<CreateForm>(EMPTY_FORM);
  const [volumes, setVolumes] = useState<string[]>([]);
  const nextBind = useRef(1);
  const action = useAction();
  const tracker = useTracker();

  // Volume names to suggest as bind sources; without them a name can still be typed.
  useEffect(() => {
    api<{ volumes: Volume[] }>('GET', '/api/v1/volumes')
      .then((d) => setVolumes(d.volumes.map((v) => v.name)))
      .catch(() => {});
  }, []);

  const set = (patch: Partial<CreateForm>) => setForm((f) => ({ ...f, ...patch }));
  const setBind = (id: number, patch: Partial<BindRow>) =>
    setForm((f) => ({ ...f, binds: f.binds.map((b) => (b.id === id ? { ...b, ...patch } : b)) }));

  const submit = async (e: Event) => {
    e.preventDefault();
    const body = createBody(form, fleet);
    const name = body.replicaSetName as string;
    const created = await action.run(() => tracker.track(name, () => api('POST', '/api/v1/replicaSet', body)));
    if (created) onCreated(name);
  };

  const share = form.mode === 'memory' || form.mode === 'timeslice';
  return (
    <form class="create-form" onSubmit={submit} aria-label="Create instance">
      <div class="create-body">
        <div class="create-col">
          <div class="field">
            <label for="ci-name">Name</label>
            <input id="ci-name" required value={form.name} onInput={(e) => set({ name: value(e) })} />
            <p class="hint">Letters, digits, "_" and "."; no "-".</p>
            {dashNote(form.name) && (
              <p class="notice name-dash" role="status">
                {dashNote(form.name)}
              </p>
            )}
          </div>
          <div class="field">
            <label for="ci-image">Image</label>
            <input
              id="ci-image"
              required
              placeholder="ubuntu:22.04"
              value={form.image}
              onInput={(e) => set({ image: value(e) })}
            />
            <p class="hint">Pulled first as "Pull" says (the Images page pulls with credentials).</p>
          </div>
          <div class="field">
            <label for="ci-pull">Pull</label>
            <select id="ci-pull" value={form.pull} onChange={(e) => set({ pull: value(e) as CreateForm['pull'] })}>
              <option value="missing">missing: only when not on the node</option>
              <option value="always">always: pull again first</option>
              <option value="never">never: the image must be on the node</option>
            </select>
          </div>

          <fieldset class="field">
            <legend>GPUs</legend>
            <div class="radios">
              {MODES.map((m) => (
                <span key={m.mode}>
                  <input
                    type="radio"
                    id={`ci-mode-${m.mode}`}
                    name="ci-gpu-mode"
                    checked={form.mode === m.mode}
                    onChange={() => set({ mode: m.mode })}
                  />
                  <label for={`ci-mode-${m.mode}`}>{m.label}</label>
                </span>
              ))}
            </div>
            {form.mode !== 'none' && (
              <div class="field">
                <label for="ci-count">GPU count</label>
                <input
                  id="ci-count"
                  type="number"
                  min={1}
                  value={form.count}
                  onInput={(e) => set({ count: value(e) })}
                />
                <p class="hint">{COUNT_HINT[form.mode]}</p>
              </div>
            )}
            {form.mode === 'memory' && (
              <div class="field">
                <label for="ci-memory">Memory per card</label>
                <input id="ci-memory" value={form.memory} onInput={(e) => set({ memory: value(e) })} />
                <p class="hint">"8GB" or "1536MB".</p>
              </div>
            )}
            {share && (
              <div class="field">
                <label for="ci-cores">Compute per card (%)</label>
                <input
                  id="ci-cores"
                  type="number"
                  min={1}
                  max={100}
                  value={form.cores}
                  onInput={(e) => set({ cores: value(e) })}
                />
                <p class="hint">Percent of each card's compute time (1-100); empty: no limit.</p>
              </div>
            )}
            {share && (
              <div class="field">
                <label for="ci-policy">Policy</label>
                <select
                  id="ci-policy"
                  value={form.policy}
                  onChange={(e) => set({ policy: value(e) as CreateForm['policy'] })}
                >
                  <option value="binpack">binpack: the fullest card that fits</option>
                  <option value="spread">spread: the emptiest card</option>
                </select>
              </div>
            )}
          </fieldset>

          <fieldset class="field">
            <legend>CPU and memory</legend>
            <div class="create-row">
              <div class="field">
                <label for="ci-cpus">CPU cores</label>
                <input
                  id="ci-cpus"
                  type="number"
                  min={0}
                  placeholder="none"
                  value={form.cpuCount}
                  onInput={(e) => set({ cpuCount: value(e) })}
                />
              </div>
              <div class="field">
                <label for="ci-mem">Memory</label>
                <input
                  id="ci-mem"
                  placeholder="no limit"
                  value={form.memoryLimit}
                  onInput={(e) => set({ memoryLimit: value(e) })}
                />
              </div>
              <div class="field">
                <label for="ci-shm">Shm size</label>
                <input
                  id="ci-shm"
                  placeholder="Docker's"
                  value={form.shmSize}
                  onInput={(e) => set({ shmSize: value(e) })}
                />
              </div>
            </div>
            <p class="hint">Cores of its own (on its cards' NUMA node); memory and /dev/shm as "16GB" or "512MB".</p>
          </fieldset>
          {fleet && (
            <div class="field">
              <label for="ci-node">Node</label>
              <input id="ci-node" placeholder="any" value={form.node} onInput={(e) => set({ node: value(e) })} />
              <p class="hint">Optional: create it on this node only.</p>
            </div>
          )}
        </div>

        <div class="create-col">
          <fieldset class="field">
            <legend>Volumes and binds</legend>
            {form.binds.map((b, i) => (
              <div class="bind-row" key={b.id}>
                <input
                  aria-label={`Bind ${i + 1} source`}
                  placeholder="volume or /host/path"
                  list="ci-volumes"
                  value={b.src}
                  onInput={(e) => setBind(b.id, { src: value(e) })}
                />
                <input
                  aria-label={`Bind ${i + 1} destination`}
                  placeholder="/root/data"
                  value={b.dest}
                  onInput={(e) => setBind(b.id, { dest: value(e) })}
                />
                <span>
                  <input
                    type="checkbox"
                    id={`ci-bind-ro-${b.id}`}
                    aria-label={`Bind ${i + 1} read-only`}
                    checked={b.readOnly}
                    onChange={(e) => setBind(b.id, { readOnly: (e.currentTarget as HTMLInputElement).checked })}
                  />
                  <label for={`ci-bind-ro-${b.id}`}>read-only</label>
                </span>
                <button
                  type="button"
                  class="link"
                  aria-label={`Remove bind ${i + 1}`}
                  onClick={() => set({ binds: form.binds.filter((x) => x.id !== b.id) })}
                >
                  Remove
                </button>
              </div>
            ))}
            <datalist id="ci-volumes">
              {volumes.map((v) => (
                <option key={v} value={v} />
              ))}
            </datalist>
            <button
              type="button"
              onClick={() =>
                set({ binds: [...form.binds, { id: nextBind.current++, src: '', dest: '', readOnly: false }] })
              }
            >
              Add bind
            </button>
            <p class="hint">Source: a gpubox volume's name or an absolute host path; destination: an absolute path.</p>
          </fieldset>

          <div class="field">
            <label for="ci-ports">Container ports</label>
            <input
              id="ci-ports"
              placeholder="22, 8888"
              value={form.ports}
              onInput={(e) => set({ ports: value(e) })}
            />
            <p class="hint">Comma list ("22, 53/udp"); each gets a host port.</p>
          </div>
          <div class="field">
            <label for="ci-env">Environment</label>
            <textarea id="ci-env" rows={2} value={form.env} onInput={(e) => set({ env: value(e) })} />
            <p class="hint">One NAME=value a line.</p>
          </div>
          <div class="field">
            <label for="ci-command">Command</label>
            <input
              id="ci-command"
              placeholder="the image's own"
              value={form.command}
              onInput={(e) => set({ command: value(e) })}
            />
            <p class="hint">
              Split on spaces into arguments; with quotes, $, |, &amp;, ;, &lt;, &gt;, globs or a leading VAR=value it runs
              as <code>sh -c "…"</code>. Empty: the image's command.
            </p>
          </div>
          <div class="field">
            <label for="ci-ssh">SSH public keys</label>
            <textarea
              id="ci-ssh"
              class="mono"
              rows={2}
              placeholder="ssh-ed25519 AAAA… me@laptop"
              value={form.sshKeys}
              onInput={(e) => set({ sshKeys: value(e) })}
            />
            <p class="hint">One key a line; the instance page then shows the ssh command.</p>
          </div>
          <ServiceFields rows={form.services} setName={form.name} onChange={(services) => set({ services })} />
          <StopRuleFields
            prefix="ci"
            idleStop={form.idleStop}
            maxDuration={form.maxDuration}
            onIdleStop={(v) => set({ idleStop: v })}
            onMaxDuration={(v) => set({ maxDuration: v })}
          />
        </div>
      </div>

      {/* Outside the scrolling body: the error and Create always in sight. */}
      <div class="create-foot">
        <ErrorNote error={action.error} />
        {tracker.state && <OperationSteps {...tracker.state} />}
        <div class="actions">
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={action.busy}>
            Create
          </button>
        </div>
      </div>
    </form>
  );
}
