/*
 * spec.h - a replica set's spec: what the user asked for (image, GPUs,
 * binds, env, cmd, ports, limits), as one validated C value.
 *
 * The same JSON shape serves three purposes, so there is one parser and one
 * printer: the body of POST /replicaSet (plus replicaSetName), the spec kept
 * in the store for each version (history, rollback), and the spec shown by
 * GET /replicaSet/{name}. Printing then parsing gives the same spec.
 *
 * Ports come in two forms: `containerPorts` ["22", "8888/udp"] asks gpubox
 * to allocate a host port for each; `ports` [{hostPort, containerPort,
 * protocol}] names the host port. Both end up in `ports` with host_port 0
 * meaning "allocate". Which host ports a version actually holds is not part
 * of the spec; it lives in the replica-set record.
 *
 * sshKeys: OpenSSH public key lines for /root/.ssh/authorized_keys
 * (replicaset/ssh.c writes them at each start); a spec with keys always
 * has 22/tcp among its ports (added when the user did not list it).
 *
 * GPUs: gpuCount whole cards, or with gpuMemory a memory share of that much
 * on each of gpuCount cards, or with gpuShared one time-slice replica on
 * each; gpuPolicy, gpuUUIDs and gpuModel steer which cards (docs/gpus.md).
 * Their rules live in replicaset/spec_gpu.c, which a patch reuses.
 *
 * Limits (DESIGN.md section 4, docs/api.md) are checked here, so a spec that
 * exists is always within them.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_SPEC_H
#define GPUBOX_SERVICE_REPLICASET_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sched/gpus.h"
#include "util/err.h"

#define RS_MAX_GPUS 1024
#define RS_MAX_LIST 256 /* env entries, cmd args */
#define RS_MAX_BINDS 64
#define RS_MAX_PORTS 64
#define RS_MAX_LABELS 64
#define RS_MAX_STRING 4096 /* one env entry, arg, path, label */
#define RS_MAX_IMAGE 255
#define RS_MAX_GPU_MEMORY_MIB (16ULL * 1024 * 1024) /* 16 TiB: beyond any card, a typo */
#define RS_MAX_GPU_MODEL 128
#define RS_MAX_SSH_KEYS 32
#define RS_MAX_SSH_KEY_LEN 8192 /* an RSA key of 16384 bits is about 2800 characters */
/* The container port sshKeys publishes (replicaset/ssh.c). */
#define RS_SSH_PORT 22

/* Where gpubox mounts its own files in a container: the GPU limits
 * (GPUS_ENV_FILE_PATH), HAMi-core, and gpubox's CUDA limiter with its
 * preload file, limits and budget (docs/gpus.md). No bind may mount there. */
#define RS_GPUBOX_ETC_DIR "/etc/gpubox"
#define RS_GPUBOX_LIB_DIR "/usr/local/gpubox"
#define RS_GPUBOX_RUN_DIR "/run/gpubox"
#define RS_HAMI_CORE_PATH RS_GPUBOX_LIB_DIR "/libvgpu.so"
#define RS_CUDA_LIMITER_PATH RS_GPUBOX_LIB_DIR "/libgpubox-cuda.so"
#define RS_LD_SO_PRELOAD_PATH "/etc/ld.so.preload"
#define RS_CUDA_LIMITS_DIR RS_GPUBOX_RUN_DIR "/limits" /* read-only: the file "limits" */
#define RS_CUDA_BUDGET_DIR RS_GPUBOX_RUN_DIR "/budget" /* a tmpfs: the shared budget */

typedef struct replicaset_bind {
    char *src; /* absolute host path, or a gpubox volume name */
    char *dest;
    bool read_only;
} replicaset_bind;

typedef struct replicaset_port {
    uint16_t container_port;
    uint16_t host_port; /* 0: allocate one from the range */
    char protocol[4];   /* "tcp" | "udp" */
} replicaset_port;

#define RS_CPU_COUNT_MAX 4096 /* CPUS_MAX; the host's own number is checked at allocation */

typedef struct replicaset_spec {
    char *image;
    int gpu_count; /* cards; with gpu_uuids, their number */
    /* How each card is held (docs/gpus.md); 0 / false: whole cards. */
    uint64_t gpu_memory_mib;     /* a memory share of this much on each card */
    bool gpu_shared;             /* a time-slice replica on each card */
    int gpu_cores;               /* compute limit of each card's share, 1-100 %; 0: none */
    enum gpus_policy gpu_policy; /* which fitting card a share takes */
    char **gpu_uuids;            /* exactly these cards; NULL: any */
    size_t ngpu_uuids;
    char *gpu_model; /* model filter (substring, any case); NULL: any */
    char **env;
    size_t nenv;
    char **cmd;
    size_t ncmd;
    replicaset_bind *binds;
    size_t nbinds;
    replicaset_port *ports;
    size_t nports;
    double cpus;          /* 0: no limit */
    int cpu_count;        /* exclusive logical CPUs (docs/cpus.md); 0: none, shared */
    int64_t memory_bytes; /* 0: no limit */
    int64_t shm_bytes;    /* 0: Docker's default */
    char *restart_policy; /* NULL: "no" */
    json_t *labels;       /* object of strings; never NULL after parsing */
    char **ssh_keys;      /* "ssh-ed25519 AAAA... comment" lines */
    size_t nssh_keys;
} replicaset_spec;

/* Parse and validate a spec object. Fields not part of a spec are refused
 * (ERR_INVALID_PARAMS naming them) unless listed in also_allowed (NULL-
 * terminated; e.g. {"replicaSetName", NULL} for a create body). */
int replicaset_spec_from_json(const json_t *obj, const char *const *also_allowed,
                              replicaset_spec *out, gb_err *err);
/* The normalized JSON form (what the store keeps and GET shows). */
json_t *replicaset_spec_to_json(const replicaset_spec *spec);
void replicaset_spec_free(replicaset_spec *spec);
/* Deep copy. */
void replicaset_spec_copy(const replicaset_spec *src, replicaset_spec *dst);
/* The GPU fields of obj - gpuCount, gpuMemory ("8GB" or an integer of
 * MiB), gpuShared, gpuCores (1-100, only with a share), gpuPolicy, gpuUUIDs, gpuModel - into
 * spec's, checked together (replicaset/spec_gpu.c has the rules). Create (as_patch false): spec's
 * GPU fields are replaced; absent fields take their defaults, gpuCount 1
 * when gpuMemory or gpuShared is given, else 0. Patch (as_patch true):
 * absent fields keep spec's values; gpuMemory > 0 turns gpuShared off and
 * gpuShared true turns gpuMemory off; gpuUUIDs [] unpins; a count of 0
 * becomes 1 when a share is asked. Other fields of obj are not looked at.
 * On error spec is unchanged. */
int replicaset_spec_gpu_from_json(const json_t *obj, bool as_patch, replicaset_spec *spec,
                                  gb_err *err);
/* Add the GPU fields to a spec's JSON form (replicaset_spec_to_json uses it). */
int replicaset_spec_gpu_to_json(const replicaset_spec *spec, json_t *obj);
void replicaset_spec_gpu_free(replicaset_spec *spec);
/* The sched/ request for spec's GPUs; it points into spec. */
void replicaset_spec_gpu_request(const replicaset_spec *spec, gpus_request *out);
/* Whether spec asks for a share (memory or time-slice) rather than whole cards. */
bool replicaset_spec_gpu_is_share(const replicaset_spec *spec);
/* Whether spec asks for any card at all. */
bool replicaset_spec_gpu_asks(const replicaset_spec *spec);
/* A start without cards (record.h, gpusAside): replicaset_spec_gpu_set_aside
 * returns spec's GPU fields with gpuCount as JSON (NULL out of memory) and
 * leaves spec asking for none; replicaset_spec_gpu_put_back makes spec's GPU fields
 * those of such JSON again (errors as replicaset_spec_gpu_from_json). */
json_t *replicaset_spec_gpu_set_aside(replicaset_spec *spec);
int replicaset_spec_gpu_put_back(replicaset_spec *spec, const json_t *aside, gb_err *err);

/* Number of ports with host_port 0 (to be allocated). */
size_t replicaset_spec_ports_to_allocate(const replicaset_spec *spec);

/* A patch's spec: replicaset_spec_patch (replicaset/patch_request.h). */

#endif
