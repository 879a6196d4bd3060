/*
 * internal.h - the monitor's state, shared by its files (monitor.c: the
 * thread and the readings; answers.c: JSON and metrics; health.c: marks;
 * limits.c: idle and time limits; events.c). Nothing outside
 * src/service/monitor/ includes it.
 *
 * One mutex guards everything the answers read (the last reading, the
 * tracked sets, the marks). The thread does its slow work - the sampler,
 * /proc, the store, stopping a set - without it, and swaps results in.
 */
#ifndef GPUBOX_SERVICE_MONITOR_INTERNAL_H
#define GPUBOX_SERVICE_MONITOR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "gpu/gpu_usage.h"
#include "service/monitor/monitor.h"
#include "util/names.h"
#include "util/time.h"

/* What one device did in the last reading. */
struct monitor_card {
    bool sampled;
    bool present;
    uint64_t used_mib, foreign_mib;
    int util; /* percent; -1 unknown */
    unsigned nprocs;
};

/* A card's unhealthy mark (health.c). */
struct monitor_mark {
    bool marked;
    char reason[8]; /* "xid" | "lost" */
    unsigned long long xid;
    char since[TIME_ISO_MAX];
    char detail[128];
};

/* What a set does on one of its cards. */
struct monitor_use {
    char uuid[GPU_UUID_MAX];
    size_t dev;         /* index into the inventory */
    uint64_t share_mib; /* what it holds there */
    uint64_t used_mib;  /* its processes' memory there */
    int util;           /* percent; -1 unknown */
    bool share;         /* a memory share or time-slice replica, not a whole card */
    int top_pid;        /* its process using the most memory there; 0: none */
    uint64_t top_mib;
    bool over;      /* over its share in the last reading (overrun.c: one event a time) */
    int killed_pid; /* the last process --share-overrun kill killed there; 0: none */
};

/* A process of a set on one of its shared cards: its PID on the host (as
 * NVML lists it) and in the container (the last NSpid entry). */
struct monitor_gpu_pid {
    int host;
    long own;
};

/* A running (or paused) set of this server, as the monitor tracks it. */
struct monitor_set {
    char name[NAME_MAX_LEN + 1];
    char owner[NAME_MAX_LEN + 1];
    char container_id[80];
    char container_name[NAME_MAX_LEN + 16]; /* RS_CONTAINER_NAME_MAX */
    bool paused;
    int64_t idle_stop_s, max_duration_s;
    time_t running_since;
    time_t idle_since;     /* 0: active in the last reading */
    time_t idle_persisted; /* what the store holds (0: no key) */
    time_t last_exec;
    time_t stop_tried; /* a stop that failed, not retried for a minute */
    struct monitor_use *uses;
    size_t nuses;
    bool any_share;                   /* some use is a share (the CUDA limiter may be there) */
    struct monitor_gpu_pid *gpu_pids; /* in the last reading, on its shared cards */
    size_t ngpu_pids;
    char *pids_written; /* the pids file's text as last written; NULL: not yet */
};

struct monitor {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, stopping;
    app *a;
    const monitor_actions *act; /* what it does to sets (monitor_start) */
    gpu_sampler *sampler;       /* NULL: sampling off */
    int64_t interval_ms;
    uint8_t xids[MONITOR_XID_LIMIT / 8];
    unsigned idle_threshold;
    uint64_t generation;
    /* the last reading, parallel to a->gpus.devices */
    struct monitor_card *cards;
    struct monitor_mark *marks;
    size_t ncards;
    char sampled_at[TIME_ISO_MAX]; /* "" before the first reading */
    double sample_seconds;
    uint64_t samples;
    struct monitor_set *sets;
    size_t nsets;
    uint64_t records_seen; /* app's records generation at the last load */
    int64_t sets_loaded_ms;
    /* counters for the metrics */
    struct prom_family *xid_events, *autostops, *overruns;
    unsigned event_seq;
    bool warned_no_idle;
};

/* The inventory index of uuid, or -1. */
long monitor_device_index(const app *a, const char *uuid);
void monitor_sets_free(struct monitor_set *sets, size_t n);

/* health.c */
int monitor_health_load(app *a, gb_err *err);
/* Mark device i unhealthy (reason "xid" with xid, or "lost"); with the
 * monitor's lock NOT held. Stores the mark, logs, makes an event. */
void monitor_health_mark(app *a, size_t i, const char *reason, unsigned long long xid,
                         const char *detail);

/* limits.c: after a reading, with the lock not held: idle clocks kept in
 * the store, and the sets past a limit stopped. */
void monitor_limits_apply(app *a, time_t now, bool sampling);
/* overrun.c: after a reading, with the lock not held: a set's processes
 * over its memory share on a card are reported (an event, a metric) and,
 * with --share-overrun kill, the largest of them there is killed. */
void monitor_overrun_apply(app *a);

/* hostpids.c: after a reading, with the lock not held: each set's pids
 * file (src/cuda/pids.h) rewritten when its GPU processes changed. */
void monitor_hostpids_apply(app *a);

/* Whether set s is busy on its cards in the last reading. */
bool monitor_set_busy(const struct monitor *m, const struct monitor_set *s);

#endif
