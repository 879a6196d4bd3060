// Test helpers for the instance pages: a fetch that answers envelopes from a
// handler and records every call, sessions of each role, and sample sets.
import { render } from '@testing-library/preact';
import type { ComponentChildren } from 'preact';
import { SessionContext, sessionFor } from '../session';
import type { ReplicaSet, ReplicaSetInfo, Role, Spec, WhoAmI } from '../types';

export interface Sent {
  method: string;
  url: string;
  body: unknown;
}

export interface Answer {
  status?: number;
  code?: number;
  msg?: string;
  data?: unknown;
}

/** Answers a request; undefined is a 404 (code 1100). May wait (a long call). */
export type Handler = (req: Sent) => Answer | undefined | Promise<Answer | undefined>;

/** Stubs fetch with `handler`; returns the list every request is pushed to. */
export function mockApi(handler: Handler): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal('fetch', async (url: string, init?: RequestInit) => {
    const req = {
      method: init?.method ?? 'GET',
      url,
      body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
    };
    sent.push(req);
    const a = (await handler(req)) ?? { status: 404, code: 1100, msg: `no such route ${req.method} ${url}` };
    const envelope = { code: a.code ?? 200, msg: a.msg ?? 'success', data: a.data ?? null };
    return { status: a.status ?? 200, json: async () => envelope } as Response;
  });
  return sent;
}

/** The requests other than GETs: what the page changed. */
export const changes = (sent: Sent[]) => sent.filter((r) => r.method !== 'GET');

export function whoami(role: Role): WhoAmI {
  const none = { cards: null, shareMiB: null, instances: null, volumeBytes: null };
  return { name: role === 'viewer' ? 'val' : 'alice', role, source: 'api', quota: none, usage: none, quotaApplies: false };
}

/** `ui` as someone of `role` sees it (also for a rerender, which must keep the same tree). */
export function asRole(role: Role, ui: ComponentChildren, fleet = false) {
  return <SessionContext.Provider value={sessionFor(whoami(role), fleet, () => {})}>{ui}</SessionContext.Provider>;
}

export const renderAs = (role: Role, ui: ComponentChildren, fleet = false) => render(asRole(role, ui, fleet));

export function spec(over: Partial<Spec> = {}): Spec {
  return {
    imageName: 'ubuntu:22.04',
    gpuCount: 1,
    gpuMemory: 0,
    gpuShared: false,
    gpuPolicy: 'binpack',
    gpuUUIDs: [],
    gpuModel: '',
    binds: [],
    env: [],
    cmd: [],
    containerPorts: ['22/tcp'],
    ports: [],
    cpus: 0,
    memory: 0,
    shmSize: 0,
    restartPolicy: 'no',
    ...over,
  };
}

export function replicaSet(over: Partial<ReplicaSet> = {}): ReplicaSet {
  return {
    name: 'foo',
    version: 1,
    state: 'running',
    status: 'running',
    containerName: `${over.name ?? 'foo'}-${over.version ?? 1}`,
    gpus: ['GPU-11111111-aaaa'],
    gpuShares: [],
    ports: [{ hostPort: 40001, containerPort: 22, protocol: 'tcp' }],
    createTime: new Date(Date.now() - 3 * 3600 * 1000).toISOString(),
    updateTime: new Date().toISOString(),
    owner: 'alice',
    ...over,
  };
}

export function info(over: Partial<ReplicaSetInfo> = {}): ReplicaSetInfo {
  return { ...replicaSet(over), spec: spec(), containerId: '4f1c', ...over };
}
