// Sample replica sets for the instance pages' tests; the generic helpers
// (mockApi, renderAs, seriousViolations...) are in ../testing.
import type { ReplicaSet, ReplicaSetInfo, Spec } from '../types';

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
    image: 'ubuntu:22.04',
    ...over,
  };
}

export function info(over: Partial<ReplicaSetInfo> = {}): ReplicaSetInfo {
  return { ...replicaSet(over), spec: spec(), containerId: '4f1c', ...over };
}
