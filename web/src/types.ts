// The shapes of the API's answers the console reads (docs/api.md). Only the
// fields the console uses are listed; the API may send more.

export type Role = 'admin' | 'user' | 'viewer';

export interface Quota {
  cards: number | null;
  shareMiB: number | null;
  instances: number | null;
  volumeBytes: number | null;
}

export interface WhoAmI {
  name: string;
  role: Role;
  source: 'api' | 'file' | 'none';
  quota: Quota;
  usage: Quota;
  quotaApplies: boolean;
  /** This gpuboxd is a fleet's node (absent from older servers: not a fleet). */
  fleet?: boolean;
}

export interface User {
  name: string;
  role: Role;
  source: 'api' | 'file';
  quota: Quota;
  usage: Quota;
  createTime: string;
  hasToken?: boolean;
}

export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol: string;
}

export interface GpuShare {
  uuid: string;
  memoryMiB: number;
  mode: 'memory' | 'timeslice';
  replica?: number;
}

export interface Bind {
  src: string;
  dest: string;
  readOnly?: boolean;
}

export interface Spec {
  imageName: string;
  gpuCount: number;
  gpuMemory: number;
  /** The compute share of each card, percent (1-100), held by gpubox's CUDA limiter; absent or null: none. */
  gpuCores?: number | null;
  gpuShared: boolean;
  gpuPolicy: string;
  gpuUUIDs: string[];
  gpuModel: string;
  binds: Bind[];
  env: string[];
  cmd: string[];
  containerPorts: string[];
  ports: PortMapping[];
  cpus: number;
  memory: number;
  shmSize: number;
  restartPolicy: string;
  /** Stop after this long idle ("30m", "90s", "1h30m"); "" or absent: never. */
  idleStop?: string;
  /** Stop after this long running ("8h"); "" or absent: no limit. */
  maxDuration?: string;
}

export type SetState = 'running' | 'paused' | 'stopped' | 'deleted' | 'creating' | 'queued';

/** A queued set's place in the queue (docs/queue.md); dropped: why it left without starting. */
export interface SetQueue {
  priority: number;
  submitTime?: string;
  position?: number;
  why?: string;
  head?: boolean;
  dropped?: { reason: string; at: string; detail: string };
}

/** One card a set holds, as last sampled. */
export interface SetUsageCard {
  uuid: string;
  index: number;
  memoryUsedMiB: number;
  /** Percent 0..100; -1 when unknown. */
  utilization: number;
  /** What it holds on the card: its share, or the card's memory when whole. */
  shareMiB: number;
  overShare: boolean;
  healthy: boolean;
}

/** A set's live use: null when sampling is off, it holds no card, or it is not running. */
export interface SetUsage {
  sampledAt: string;
  /** When its cards went idle; null while it works. */
  idleSince: string | null;
  cards: SetUsageCard[];
  /** Its busiest card's utilization, percent; -1 when unknown (newer servers). */
  utilization?: number;
  /** What its processes use on all its cards (newer servers). */
  memoryUsedMiB?: number;
}

/** Why a stopped set stopped. */
export interface StopReason {
  reason: 'idle' | 'maxDuration' | 'request';
  at: string;
  detail?: string;
}

/** One of a set's web services, reached through gpuboxd's service proxy (docs/services.md). */
export interface ServiceInfo {
  name: string;
  port: number;
  public: boolean;
  link: boolean;
  /** Where it is ("http://host:2380/s/box1/jupyter/"); null while the proxy is off. */
  url: string | null;
  /** The URL with its link's token, for the owner and admins. */
  linkUrl?: string;
}

/** An item of GET /api/v1/replicaSet. */
export interface ReplicaSet {
  name: string;
  version: number;
  state: SetState;
  status: string;
  containerName: string;
  gpus: string[];
  gpuShares: GpuShare[];
  ports: PortMapping[];
  createTime: string;
  updateTime: string;
  owner: string;
  node?: string;
  usage?: SetUsage | null;
  /** The image its current version runs (newer servers). */
  image?: string;
  /** Its cards' model ("NVIDIA A100-SXM4-80GB"); null without cards. */
  cardModel?: string | null;
  /** How to reach it over SSH ("ssh -p 40012 root@host"); null without SSH keys. */
  sshCommand?: string | null;
  /** While running or paused: when its current run began. */
  runningSince?: string;
  /** The set's run limits (beside the spec: not part of a version); "" for none. */
  idleStop?: string;
  maxDuration?: string;
  /** When maxDuration is set and it runs: when it will be stopped. */
  stopAt?: string;
  /** While stopped: why. */
  stopped?: StopReason;
  /** While queued (or dropped from the queue): its place and why it waits. */
  queue?: SetQueue;
  /** Its web services (newer servers). */
  services?: ServiceInfo[];
}

/** data.info of GET /api/v1/replicaSet/{name}. */
export interface ReplicaSetInfo extends ReplicaSet {
  spec: Spec;
  containerId: string;
  operation?: string;
  /** While it runs without its cards (restart {gpuCount: 0}): the GPU fields kept aside. */
  gpusAside?: GpusAside | null;
  /** How to reach it by SSH, when gpuboxd runs an SSH server for it. */
  ssh?: SshInfo | null;
  /** Stopped and changed meanwhile (scale, image, roll back...): the change waits for its next start. */
  pending?: boolean;
  /** While pending: the spec its next start applies (and takes the cards of). */
  pendingSpec?: Spec;
  /** The logical CPUs it holds (cpuCount, docs/cpus.md); absent: none. */
  cpuset?: number[];
}

/** The GPU fields a set started without cards keeps aside. */
export interface GpusAside {
  gpuCount: number;
  gpuMemory?: number;
  gpuCores?: number | null;
  gpuShared?: boolean;
  gpuPolicy?: string;
  gpuUUIDs?: string[];
  gpuModel?: string;
}

/** info.ssh: the command to reach the set, and whether that works now. */
export interface SshInfo {
  command?: string;
  port?: number | null;
  server?: string | null;
  running?: boolean;
  message?: string;
}

/** One line of GET /replicaSet/{name}/logs (or of its follow stream). */
export interface LogLine {
  version: number;
  stream: 'stdout' | 'stderr' | string;
  time?: string;
  text: string;
  partial?: boolean;
}

export interface LogVersion {
  version: number;
  containerName: string;
  current: boolean;
  source: 'container' | 'kept' | 'none' | string;
  status?: string;
  note?: string;
}

/** data of GET /replicaSet/{name}/logs (without lines: the follow stream's header). */
export interface LogsAnswer {
  name: string;
  version: number;
  state: SetState;
  versions: LogVersion[];
  lines: LogLine[];
  truncated: boolean;
}

/** An item of GET /api/v1/images. */
export interface Image {
  id: string;
  repoTags: string[];
  repoDigests?: string[];
  size: number;
  created: string;
  gpuboxCreated?: boolean;
  node?: string;
}

/** One layer of a pull. */
export interface PullStep {
  name: string;
  done: boolean;
  status?: string;
  current?: number;
  total?: number;
}

/** GET /api/v1/operations/{id} of a pull. */
export interface PullOperation {
  id: string;
  kind: 'pull';
  target: string;
  state: 'running' | 'done' | 'failed' | string;
  steps: PullStep[];
  progress?: { current: number; total: number; layers: number; layersDone: number };
  imageId?: string;
  error: string;
  errorCode?: number;
}

export interface HistoryEntry {
  version: number;
  createTime: string;
  containerName: string;
  spec: Spec;
  reason: string;
  gpus: string[];
  ports: PortMapping[];
}

export interface OperationStep {
  name: string;
  done: boolean;
  time: string | null;
  ms: number | null;
}

export interface Operation {
  id: string;
  kind: string;
  target: string;
  state: 'running' | 'done' | 'undone' | 'failed';
  steps: OperationStep[];
  error: string;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  timedOut: boolean;
}

export interface Allocation {
  name: string;
  memoryMiB: number;
  replica?: number;
  /** When sampled: what the tenant uses on the card. */
  memoryUsedMiB?: number;
  /** When sampled: percent 0..100, -1 when unknown. */
  utilization?: number;
}

/** A card's last reading; null when sampling is off or nothing was read yet. */
export interface DeviceUsage {
  memoryUsedMiB: number;
  /** Percent 0..100; -1 when unknown. */
  utilization: number;
  /** Memory of processes in no gpubox container. */
  foreignMemoryMiB: number;
  processes: number;
  sampledAt: string;
}

/** Why a card is marked unhealthy (present only while it is). */
export interface UnhealthyMark {
  reason: 'xid' | 'lost';
  xid?: number;
  since: string;
  /** "XID 79 (GPU has fallen off the bus)" */
  detail: string;
}

/** An item of GET /api/v1/resources/gpus's devices. */
export interface GpuDevice {
  uuid: string;
  index: number;
  model: string;
  memoryMiB: number;
  allocatedMemoryMiB: number;
  tenants: string[];
  mode: 'free' | 'whole' | 'memory' | 'timeslice';
  healthy: boolean;
  capacityMiB: number;
  freeMemoryMiB: number;
  allocations: Allocation[];
  replicas: { total: number; used: number };
  excluded: boolean;
  shareable: boolean;
  enforced: boolean;
  node?: string;
  usage?: DeviceUsage | null;
  unhealthy?: UnhealthyMark;
}

export interface GpuResources {
  devices: GpuDevice[];
  simulated: boolean;
  source: string;
}

/** An item of GET /api/v1/nodes (fleet only). */
export interface FleetNode {
  name: string;
  state: 'ready' | 'cordoned' | 'unreachable';
  advertise: string;
  labels: Record<string, string>;
  version: string;
  lastHeartbeat: string | null;
  cordoned: boolean;
  gpus: { total: number; free: number; models: string[] };
  freePorts: number | null;
  volumeFreeBytes: number | null;
}

/** An item of GET /api/v1/volumes. */
export interface Volume {
  name: string;
  size: number;
  sizeText: string;
  backend: string;
  enforced: boolean;
  version: number;
  state: string;
  createTime: string;
  owner: string;
  /** While a resize runs: the new size's text ("40GB"). */
  resizingTo?: string;
  /** Loop volumes: ext4 or xfs. */
  filesystem?: string;
  node?: string;
}

/** data.info of GET /api/v1/volumes/{name}. */
export interface VolumeInfo extends Volume {
  attached: boolean;
  used: number | null;
  usedText?: string;
  filesystemSize: number;
  usedBy: { name: string; state: string }[];
  inUse: boolean;
  problem?: string;
}

export interface UsageSet {
  name: string;
  node?: string;
  cardSeconds: number;
  shareMiBSeconds: number;
}

export interface UsageUser {
  user: string;
  cardSeconds: number;
  shareMiBSeconds: number;
  sets: UsageSet[];
}

export interface Usage {
  from: string;
  to: string;
  users: UsageUser[];
}

/** An item of GET /api/v1/events (newest first). */
export interface GpuboxEvent {
  time: string;
  kind: 'autostop' | 'gpu.unhealthy' | 'gpu.healthy';
  /** autostop: the set stopped. */
  replicaSet?: string;
  /** gpu.*: the card's UUID. */
  gpu?: string;
  reason: 'idle' | 'maxDuration' | 'xid' | 'lost' | 'cleared';
  detail: string;
  /** "gpubox" or the user who acted. */
  by: string;
}
