/*
 * app.h - the application context: everything a service function needs,
 * created once at start-up and handed to every handler (req->ctx).
 *
 * It holds the store, the Docker client, the GPU inventory read at start-up,
 * and the in-memory allocation pools (GPUs, host ports). The pools are
 * derived from the store's replica-set records when the app opens (the store
 * is the one source of truth; see keys.h for where those records live) and
 * change only through the sched/ functions afterwards.
 */
#ifndef GPUBOX_SERVICE_APP_H
#define GPUBOX_SERVICE_APP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "docker/docker.h"
#include "gpu/gpu.h"
#include "sched/ports.h"
#include "store/store.h"
#include "util/err.h"

#define APP_API_VERSION "v1"

/* The settings the services use; strings are borrowed from whoever built
 * the config (the daemon's config) and must outlive the app. */
typedef struct app_config {
    const char *data_dir;  /* absolute */
    const char *store_url; /* "sqlite:///var/lib/gpubox/state.db" */
    const char *docker_host;
    uint16_t port_start, port_end;
    enum gpu_source_kind gpu_source;
    const char *simulate_gpus; /* spec, for GPU_SOURCE_SIMULATED */
    const char *simulate_cpus; /* "2x16x2": a made-up CPU topology (docs/cpus.md); NULL: sysfs */
    const char *reserved_cpus; /* cpulist never handed out; NULL: none */
    const char *nvml_library;  /* NULL: libnvidia-ml.so.1 */
    const char *nvidia_smi;    /* NULL: nvidia-smi on PATH */
    const char *gpu_attach;    /* "nvidia" | "cdi" | "runtime" */
    const char *carry_method;  /* "auto" | "overlay" | "portable" (carry/carry.h) */
    const char *move_compress; /* a move's data sent: "auto" | "zstd" | "none" (NULL: auto) */
    uint64_t
        move_disk_reserve; /* bytes a move here leaves free on each disk (--move-disk-reserve) */
    const char *volume_backend; /* "loop" | "xfsquota" | "plain" (volumes.h) */
    const char *volume_fs;      /* loop: "ext4" | "xfs" for new volumes; NULL: ext4 */
    unsigned docker_wait_s;     /* how long start-up waits for Docker to answer */
    unsigned store_wait_s;      /* how long start-up waits for a remote store (etcd) */
    /* Signals that end a start-up wait (SIGTERM, SIGINT): the daemon keeps
     * them blocked, and the waits look for them pending. NULL: none. */
    const sigset_t *stop_signals;
    const char *bind_prefixes; /* comma-separated host dirs binds may use; NULL: none */
    /* GPU sharing (docs/gpus.md, "Host settings"); 0 / NULL: the defaults. */
    unsigned timeslice_replicas; /* replicas each card offers; 0: 4 */
    unsigned gpu_max_tenants;    /* shares or replicas per card; 0: no limit */
    /* Each time-slice replica's limits line carries cores=100/replicas
     * (docs/gpus.md, "Compute shares"). */
    bool timeslice_equal_compute;
    double gpu_memory_oversubscription; /* 1.0..4.0; 0: 1.0 */
    const char *gpu_exclude_sharing;    /* "GPU-a,3": whole cards only */
    const char *gpu_exclude;            /* "GPU-a,3": never scheduled */
    const char *hami_core;              /* absolute path of libvgpu.so; NULL: none */
    const char *cuda_limiter; /* absolute path of libgpubox-cuda.so; NULL: none (src/cuda/) */
    /* The fleet (docs/fleet.md): NULL node = a single server. store_url is
     * then this node's own prefix, fleet_url the fleet's (--store). */
    const char *node, *advertise, *node_labels, *fleet_url;
    /* The file holding the fleet's secret (--fleet-secret-file); NULL: the
     * one in etcd (fleet_secret.c). */
    const char *fleet_secret_file;
    /* The host a replica set's ssh command names (--public-host). */
    const char *public_host;
    /* The service proxy (docs/services.md): the URL its users reach it at
     * ("http://host:2380", no '/' at the end; NULL: the proxy is off), and
     * the domain of its host names per service (NULL: path URLs only). */
    const char *proxy_url, *proxy_domain;
    /* In a fleet: where the other nodes' proxies reach this one's
     * ("10.0.0.5:2380"), published in its capacity record; NULL: no proxy. */
    const char *proxy_address;
    /* Users (docs/users.md): auth_on when a token file is given; its users'
     * names and roles (enum users_role); who owns records made before users
     * (NULL: the first admin of the file, or "anonymous"). */
    bool auth_on;
    const struct app_file_user *file_users;
    size_t nfile_users;
    const char *owner_of_unowned;
    /* Live usage (service/monitor/monitor.h): seconds between readings, 0
     * = none; the XIDs that mark a card unhealthy (NULL: the default
     * list); utilization in percent under which a card counts idle. */
    double usage_interval_s;
    const char *xid_critical;
    unsigned idle_threshold;
    /* --share-overrun kill: a container over its memory share on a card
     * loses its largest process there (monitor/overrun.c); false: reported
     * only. */
    bool share_overrun_kill;
    /* MiB of kept logs per replica set, a quarter of it per version
     * (service/replicaset/logs.c); 0: RS_LOGS_KEEP_SET_MIB_DEFAULT. */
    unsigned kept_logs_mib;
    /* Closed accounting intervals older than this are deleted, their usage
     * kept in the rollup (users/rollup.c); 0: 400 days. */
    int64_t accounting_retention_s;
    /* Terminals (replicaset/terminal.c): seconds without input or output
     * after which one is closed (0: never), and how many one user may have
     * open at once (0: TERMINAL_MAX_PER_USER_DEFAULT). */
    unsigned terminal_idle_s;
    unsigned terminal_max_per_user;
    /* Registry credentials for pulls (service/images/images.h); NULL: none. */
    const char *registry_auth_file;
    /* The queue (service/queue/queue.h): the fair-share half-life in
     * seconds (0: 7 days) and the URL told of starts (NULL: none). */
    double fairshare_half_life_s;
    const char *queue_webhook;
} app_config;

typedef struct app_file_user {
    const char *name;
    int role; /* enum users_role */
} app_file_user;

typedef struct resources_cache resources_cache;
struct replicaset_doubts;
struct op_kind;
struct op_target;
struct replicaset_record;
struct app;

/* Hooks, set by app_open: how the code below hears from the code above
 * without naming it, so each concern calls in one direction (see
 * docs/architecture.md). Each may be NULL (nothing listens). */
typedef struct app_hooks {
    /* A set's live usage for GET /replicaSet/{name} ({sampledAt, idleSince,
     * cards}), or NULL: the monitor reports it (monitor_set_json); the
     * replica-set code asks here. */
    json_t *(*set_usage)(struct app *a, const struct replicaset_record *r);
    /* Someone ran an exec in set name's container: it is not idle (the
     * monitor's run limits listen: monitor_note_exec). */
    void (*set_exec)(struct app *a, const char *name);
    /* An operation ended (ops_timer.h): its kind, its result ("ok" or the
     * error's name) and how long it took; the metrics observe it. */
    void (*op_done)(struct app *a, const char *kind, const char *result, double seconds);
    /* A queued set's {position, why} now, or NULL (service/queue/queue.h). */
    json_t *(*queue_status)(struct app *a, const char *name);
    /* Cards, ports or cores went back to the pools: the queue's dispatcher
     * looks again at once (service/queue/queue.h). */
    void (*capacity_freed)(struct app *a);
} app_hooks;

typedef struct app {
    app_config cfg;
    store *store;
    docker_client *docker;
    gpu_inventory gpus;
    struct gpus_pool *gpu_pool;
    ports_pool *ports;
    struct cpus_pool *cpus;       /* exclusive cores (sched/cpus.h) */
    resources_cache *gpus_cache;  /* serialized GET /resources/gpus (resources.c) */
    struct namelock_table *locks; /* per-name serialization (namelock.h) */
    struct ops_metrics *ops;      /* operations by kind and result (metrics.h) */
    app_hooks hooks;              /* the layers above, reached from below (set by app_open) */
    struct replicaset_doubts
        *doubts; /* writes the store did not confirm: in doubt (replicaset/doubt.c) */
    const struct op_kind *const *op_kinds; /* the operation engine's table (engine.h) */
    const struct op_target *op_target;     /* what its journalled kinds act on (engine.h) */
    struct volumes_ctx *volumes;           /* the volume service's state (volumes.h) */
    struct fleet *fleet;                   /* with --node: the fleet (fleet/fleet.h); else NULL */
    struct users *users;                   /* users, quotas, ledgers (users/users.h) */
    struct monitor *monitor;               /* live usage, health, run limits (monitor/monitor.h) */
    struct images *images;                 /* pulls and registry credentials (images/images.h) */
    struct container_watch *containers;    /* Docker's container states (container_watch.h) */
    struct queue *queue;                   /* queued creates and their dispatcher (queue/queue.h) */
    uint64_t records_generation;           /* bumped by every replica-set record save */
    int data_dir_lock;                     /* flock on <data_dir>/gpuboxd.lock; -1 when none */
    /* What Docker said at start-up, for /version and the start-up log. */
    char docker_version[64];
    char docker_api_version[16];
    char docker_storage_driver[32];
    char docker_root_dir[512]; /* where Docker keeps its volumes (xfsquota) */
} app;

/* Start-up, in order, logging a line for each: create the data dir, open the
 * store (retrying a remote one up to store_wait_s), claim it for this
 * daemon (store_claim: another daemon holding it fails start-up; an etcd
 * holder is waited for up to store_wait_s, as its claim may expire), lock
 * the data dir (two daemons on different stores must not share volume
 * images and mounts either), connect to Docker
 * (retrying up to docker_wait_s), load the GPU inventory, build the pools,
 * open the volume backend and attach every volume, derive the pools from
 * the store, and reconcile the replica sets with Docker (which may start
 * their containers: volumes come first). A stop signal pending during a
 * wait ends start-up with an error; app_stop_requested then says so. */
int app_open(const app_config *cfg, app **out, gb_err *err);
void app_close(app *a);
/* True when one of cfg->stop_signals is pending. */
bool app_stop_requested(const app_config *cfg);

#endif
