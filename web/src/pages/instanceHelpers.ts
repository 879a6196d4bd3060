// What the instance pages share: the replica-set paths, how a set's GPUs and
// ports read, and how the form's text fields become the API's fields.
import { seg } from '../api';
import { isoUtc, mib } from '../format';
import type { GpuShare, PortMapping, Spec } from '../types';

/** "/api/v1/replicaSet/foo" or, with an action, "/api/v1/replicaSet/foo/stop". */
export function setPath(name: string, action?: string): string {
  return `/api/v1/replicaSet/${seg(name)}${action ? `/${action}` : ''}`;
}

export const operationPath = (id: string): string => `/api/v1/operations/${seg(id)}`;

/** What the long calls (create, patch, rollback, restart, stop, delete) may answer. */
export interface LongAnswer {
  version?: number;
  changed?: boolean;
  operationId?: string;
  /** A change of a stopped set: it waits for its next start (no version made yet). */
  pending?: boolean;
}

/**
 * The spec a change starts from: a stopped set's pending spec (what its next
 * start applies) when it has one, else the spec it runs.
 */
export function nextSpec(info: { spec: Spec; pendingSpec?: Spec }): Spec {
  return info.pendingSpec ?? info.spec;
}

/** What a pending spec changes, in words: ["GPUs 1 → 2", "image a → b", "environment"]. */
export function pendingChanges(spec: Spec, next: Spec): string[] {
  const out: string[] = [];
  const gpus = specGpusText(spec), nextGpus = specGpusText(next);
  if (gpus !== nextGpus) out.push(`GPUs ${gpus} → ${nextGpus}`);
  if (spec.imageName !== next.imageName) out.push(`image ${spec.imageName} → ${next.imageName}`);
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (!same(spec.env, next.env)) out.push('environment');
  if (!same(spec.binds, next.binds)) out.push('binds');
  if (!same(spec.containerPorts, next.containerPorts) || !same(spec.ports, next.ports)) out.push('ports');
  if ((spec.gpuCores ?? null) !== (next.gpuCores ?? null))
    out.push(`compute ${spec.gpuCores ? `${spec.gpuCores}%` : 'unlimited'} → ${next.gpuCores ? `${next.gpuCores}%` : 'unlimited'}`);
  const rest = (s: Spec) => [s.cpus, s.memory, s.shmSize, s.restartPolicy, s.gpuPolicy, s.gpuModel, s.gpuUUIDs];
  if (out.length === 0 || !same(rest(spec), rest(next))) {
    const known = new Set(['imageName', 'gpuCount', 'gpuMemory', 'gpuCores', 'gpuShared', 'env', 'binds', 'containerPorts', 'ports']);
    const other = (Object.keys(next) as (keyof Spec)[]).filter((k) => !known.has(k) && !same(spec[k], next[k]));
    out.push(...other);
  }
  return out;
}

/** "40001→22/tcp, 40002→8888/tcp" */
export function portsText(ports: PortMapping[] | undefined): string {
  if (!ports || ports.length === 0) return '-';
  return ports.map((p) => `${p.hostPort}→${p.containerPort}/${p.protocol}`).join(', ');
}

/** One share's kind: "8 GB share" or "time-slice". */
function shareKind(s: GpuShare): string {
  return s.mode === 'timeslice' ? 'time-slice' : `${mib(s.memoryMiB)} share`;
}

/**
 * What a set holds: whole cards as their count ("2"), shares grouped by kind
 * ("8 GB share ×2", "time-slice ×1"), "-" for nothing (stopped, or no GPUs).
 */
export function gpusText(gpus: string[], shares: GpuShare[]): string {
  if (shares.length === 0) return gpus.length ? String(gpus.length) : '-';
  const counts = new Map<string, number>();
  for (const s of shares) counts.set(shareKind(s), (counts.get(shareKind(s)) ?? 0) + 1);
  return [...counts].map(([kind, n]) => `${kind} ×${n}`).join(', ');
}

/** What a spec asks for, in the same words as gpusText. */
export function specGpusText(spec: Spec): string {
  if (spec.gpuMemory > 0) return `${mib(spec.gpuMemory)} share ×${spec.gpuCount}`;
  if (spec.gpuShared) return `time-slice ×${spec.gpuCount}`;
  return spec.gpuCount ? String(spec.gpuCount) : '-';
}

/** MiB as the API's size text, exact: 8192 -> "8GB", 1536 -> "1536MB". */
export function memoryText(miB: number): string {
  return miB % 1024 === 0 ? `${miB / 1024}GB` : `${miB}MB`;
}

/** The memory field as the API takes it: a bare number is MiB (an integer), else the size text ("8GB"). */
export function memoryValue(text: string): string | number {
  const t = text.trim();
  return /^\d+$/.test(t) ? Number(t) : t;
}

/** Characters that only mean something to a shell (quotes, pipes, variables, globs...). */
const SHELL_SYNTAX = /["'`\\$|&;<>(){}[\]*?~#\n]/;

/**
 * The command field as `cmd`: split on whitespace, or ["sh", "-c", text]
 * when it needs a shell (shell syntax, or a leading VAR=value). Empty:
 * undefined, the image's own command.
 */
export function commandArgv(text: string): string[] | undefined {
  const t = text.trim();
  if (!t) return undefined;
  if (SHELL_SYNTAX.test(t) || /^\w+=/.test(t)) return ['sh', '-c', t];
  return t.split(/\s+/);
}

/** A comma (or space) list of ports: "22, 8888/udp" -> ["22", "8888/udp"]. */
export function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** CPU ids as a cpulist, as `gpubox cpus` writes it: [2, 3, 18, 19] -> "2-3,18-19". */
export function cpuList(ids: number[]): string {
  const sorted = [...ids].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j === i ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** One entry a line, blank lines dropped. */
export function splitLines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

/** An RFC 3339 time in UTC, as the CLI prints it (format.ts isoUtc). */
export function timeText(time: string | null | undefined): string {
  if (!time) return '-';
  const t = new Date(time);
  return Number.isNaN(t.getTime()) ? time : isoUtc(t);
}

/** One path component of an image name, by Docker's grammar (lower case). */
const IMAGE_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

/**
 * Where a user's commits go, as gpuboxd decides it (service/images/owners.c,
 * image_user_namespace): "u/<name>/" with the name in lower case when it is
 * one path component, else "u/<its UTF-8 bytes in hex>/".
 */
export function userImageNamespace(user: string): string {
  const lower = asciiLower(user);
  if (IMAGE_COMPONENT.test(lower)) return `u/${lower}/`;
  const hex = Array.from(new TextEncoder().encode(user), (b) => b.toString(16).padStart(2, '0')).join('');
  return `u/${hex}/`;
}

/**
 * A name a commit of set `name` at `version` may take: a user's under their
 * own namespace (the only one gpuboxd lets them commit to), an admin's
 * "<set>:v<version>" (everyone's).
 */
export function commitImageSuggestion(name: string, version: number, user: string | null): string {
  const repo = IMAGE_COMPONENT.test(asciiLower(name)) ? asciiLower(name) : 'image';
  return `${user === null ? '' : userImageNamespace(user)}${repo}:v${version}`;
}
