// The overview: every card of the server (or of every node of a fleet),
// its memory as a bar split by tenant (what `kubectl inspect gpushare`
// shows), and how many whole cards are free. Polled every second, so a set
// started from the CLI or another browser shows on its card at once. Under
// each bar, what the card's processes use now (a thinner meter), its
// utilization and memory used outside gpubox; an unhealthy card says why, and
// an admin may mark it healthy again.
import { api, seg } from '../api';
import { Bar, ErrorNote, Meter } from '../components/ui';
import { age, mib, percent, shortUuid } from '../format';
import { useAction, usePoll } from '../hooks';
import { useSession } from '../session';
import type { FleetNode, GpuDevice, GpuResources } from '../types';
import './resources.css';

/** A card a whole tenant could take now (GET /api/v1/nodes counts them the same way). */
const isFree = (d: GpuDevice): boolean => d.mode === 'free' && d.healthy && !d.excluded;

interface Snapshot {
  gpus: GpuResources;
  /** GET /api/v1/nodes; empty on a single server. */
  nodes: FleetNode[];
}

/** The cards of one node ("this server" on a single server), with the node's record in a fleet. */
interface Group {
  name: string;
  node?: FleetNode;
  devices: GpuDevice[];
}

const SINGLE = 'this server';

/**
 * Groups the cards by node. Nodes come in the order GET /api/v1/nodes gives
 * (by name), an unreachable node included although it reports no cards.
 */
function groupByNode(snap: Snapshot, fleet: boolean): Group[] {
  if (!fleet) return [{ name: SINGLE, devices: snap.gpus.devices }];
  const groups = new Map<string, Group>();
  for (const n of snap.nodes) groups.set(n.name, { name: n.name, node: n, devices: [] });
  for (const d of snap.gpus.devices) {
    const name = d.node ?? '?';
    if (!groups.has(name)) groups.set(name, { name, devices: [] });
    groups.get(name)!.devices.push(d);
  }
  return [...groups.values()];
}

export function Overview() {
  const { fleet } = useSession();
  const poll = usePoll<Snapshot>(async () => {
    const [gpus, nodes] = await Promise.all([
      api<GpuResources>('GET', '/api/v1/resources/gpus'),
      fleet ? api<{ nodes: FleetNode[] }>('GET', '/api/v1/nodes') : Promise.resolve({ nodes: [] }),
    ]);
    return { gpus, nodes: nodes.nodes };
  }, String(fleet));

  const snap = poll.data;
  return (
    <>
      <h1>Overview</h1>
      <ErrorNote error={poll.error} />
      {!snap ? (
        !poll.error && <p class="loading">Loading…</p>
      ) : (
        <>
          <Summary gpus={snap.gpus} />
          {groupByNode(snap, fleet).map((g) => (
            <NodeSection key={g.name} group={g} fleet={fleet} reload={poll.reload} />
          ))}
        </>
      )}
    </>
  );
}

function Summary({ gpus }: { gpus: GpuResources }) {
  const devices = gpus.devices;
  const free = devices.filter(isFree).length;
  const total = devices.reduce((a, d) => a + d.memoryMiB, 0);
  const allocated = devices.reduce((a, d) => a + d.allocatedMemoryMiB, 0);
  return (
    <p class="summary">
      <strong class="free-count">
        {free} of {devices.length} cards free
      </strong>
      <span>
        {mib(allocated)} of {mib(total)} GPU memory allocated
      </span>
      <span>Source: {gpus.source}</span>
    </p>
  );
}

function NodeSection({ group, fleet, reload }: { group: Group; fleet: boolean; reload: () => Promise<void> }) {
  const { name, node, devices } = group;
  const barPrefix = fleet ? `${name} ` : '';
  return (
    <section class="node" aria-label={fleet ? `Node ${name}` : 'Cards of this server'}>
      <header class="node-head">
        <h2>{fleet ? name : 'Cards of this server'}</h2>
        {node && <NodeFacts node={node} reload={reload} />}
      </header>
      {devices.length === 0 ? (
        <p class="hint">
          {node?.state === 'unreachable' ? 'Unreachable: its cards are unknown.' : 'No GPU found.'}
        </p>
      ) : (
        <table class="cards" aria-label={fleet ? `Cards of ${name}` : 'Cards'}>
          <thead>
            <tr>
              <th scope="col">GPU</th>
              <th scope="col">Model</th>
              <th scope="col">UUID</th>
              <th scope="col">Mode</th>
              <th scope="col">Memory</th>
              <th scope="col">Time-slice replicas</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {devices.map((d) => (
              <CardRow key={d.uuid} d={d} cardName={`${barPrefix}GPU ${d.index}`} reload={reload} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** A fleet node's state, labels and heartbeat; an admin may cordon or uncordon it. */
function NodeFacts({ node, reload }: { node: FleetNode; reload: () => Promise<void> }) {
  const { isAdmin } = useSession();
  const action = useAction();
  const verb = node.cordoned ? 'Uncordon' : 'Cordon';
  const toggle = () =>
    action.run(async () => {
      await api('PATCH', `/api/v1/nodes/${seg(node.name)}/${verb.toLowerCase()}`);
      await reload();
    });
  const labels = Object.entries(node.labels ?? {});
  return (
    <>
      <span class={`badge node-${node.state}`}>{node.state}</span>
      {labels.length > 0 && (
        <span class="labels">{labels.map(([k, v]) => `${k}=${v}`).join(', ')}</span>
      )}
      <span class="hint">
        {node.lastHeartbeat ? `heartbeat ${age(node.lastHeartbeat)} ago` : 'no heartbeat'}
      </span>
      {isAdmin && (
        <button type="button" aria-label={`${verb} ${node.name}`} disabled={action.busy} onClick={toggle}>
          {verb}
        </button>
      )}
      <ErrorNote error={action.error} />
    </>
  );
}

/** Why a card is unhealthy, in words: "Unhealthy: XID 79 (GPU has fallen off the bus), marked 5m ago". */
function unhealthyText(d: GpuDevice): string | null {
  const m = d.unhealthy;
  if (!m) return null;
  const why = m.detail || (m.reason === 'lost' ? 'the card was lost' : `XID ${m.xid ?? '?'}`);
  return `Unhealthy: ${why}${m.since ? `, marked ${age(m.since)} ago` : ''}`;
}

/** What the card's processes use now, its utilization and the memory used outside gpubox. */
function LiveUse({ d, cardName }: { d: GpuDevice; cardName: string }) {
  const u = d.usage;
  if (!u) return null;
  const used = `${mib(u.memoryUsedMiB)} of ${mib(d.memoryMiB)}`;
  return (
    <>
      <Meter title={`${cardName} memory used`} value={u.memoryUsedMiB} max={d.memoryMiB} text={`${used} used`} />
      <span class="hint">
        {mib(u.memoryUsedMiB)} used, utilization {percent(u.utilization)}
      </span>
      {u.foreignMemoryMiB > 0 && (
        <span class="hint foreign">{mib(u.foreignMemoryMiB)} used outside gpubox</span>
      )}
    </>
  );
}

/** A tenant's line of the legend: what it holds and, when sampled, what it uses. */
function allocationText(a: GpuDevice['allocations'][number]): string {
  let t = `${a.name}: ${mib(a.memoryMiB)}`;
  if (a.replica !== undefined) t += ` (replica ${a.replica})`;
  if (a.memoryUsedMiB !== undefined) {
    t += `, uses ${mib(a.memoryUsedMiB)}`;
    if (a.utilization !== undefined && a.utilization >= 0) t += ` at ${a.utilization} %`;
  }
  return t;
}

/** An admin's way to clear an unhealthy mark (the card was reset or replaced). */
function MarkHealthy({ d, cardName, reload }: { d: GpuDevice; cardName: string; reload: () => Promise<void> }) {
  const action = useAction();
  const mark = () =>
    action.run(async () => {
      await api('PATCH', `/api/v1/resources/gpus/${seg(d.uuid)}/healthy`);
      await reload();
    });
  return (
    <>
      <button type="button" aria-label={`Mark healthy: ${cardName}`} disabled={action.busy} onClick={mark}>
        Mark healthy
      </button>
      <ErrorNote error={action.error} />
    </>
  );
}

function CardRow({ d, cardName, reload }: { d: GpuDevice; cardName: string; reload: () => Promise<void> }) {
  const { isAdmin } = useSession();
  return (
    <tr class={d.healthy ? undefined : 'card-unhealthy'}>
      <td>{d.index}</td>
      <td>{d.model}</td>
      <td class="mono" title={d.uuid}>
        {shortUuid(d.uuid)}
      </td>
      <td>{d.mode}</td>
      <td class="memory">
        <Bar
          title={`${cardName} memory`}
          total={d.memoryMiB}
          segments={d.allocations.map((a) => ({ label: a.name, value: a.memoryMiB }))}
        />
        <span class="hint">
          {mib(d.allocatedMemoryMiB)} of {mib(d.memoryMiB)} allocated
        </span>
        <LiveUse d={d} cardName={cardName} />
        {d.allocations.length > 0 && (
          <ul class="legend">
            {d.allocations.map((a, i) => (
              <li key={a.name + i}>{allocationText(a)}</li>
            ))}
          </ul>
        )}
      </td>
      <td>{d.replicas.total > 0 ? `${d.replicas.used} of ${d.replicas.total}` : '-'}</td>
      <td class="badges">
        <span class={`badge ${d.healthy ? 'ok' : 'bad'}`}>{d.healthy ? 'healthy' : 'unhealthy'}</span>
        {d.excluded && <span class="badge">excluded</span>}
        {!d.enforced && (
          <span class="badge warn" title="Scheduled, but not enforced inside the containers (no HAMi-core)">
            shares not enforced
          </span>
        )}
        {!d.healthy && (
          <>
            {d.unhealthy && <p class="unhealthy-note">{unhealthyText(d)}</p>}
            {isAdmin && <MarkHealthy d={d} cardName={cardName} reload={reload} />}
          </>
        )}
      </td>
    </tr>
  );
}
