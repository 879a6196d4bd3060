/*
 * record.h - a replica set's record in the store, and its lifecycle.
 *
 * The record (key: keys_replicaset) is the one source of truth for the set:
 *   {"name": "foo", "version": 3, "state": "running",
 *    "spec": {...replicaset_spec...},
 *    "containerName": "foo-3", "containerId": "ab12...",
 *    "gpus": ["GPU-..."],                                 every card held
 *    "gpuShares": [{"uuid", "memoryMiB", "mode", "replica"}], shares only
 *    "ports": [{"hostPort": 40001, "containerPort": 22, "protocol": "tcp"}],
 *    "cpuset": [2, 3, 34, 35],                          cores held (cpuCount), when any
 *    "createTime": "...Z", "updateTime": "...Z",
 *    "operation": "2026...-a1b2c3d4",                   only while one is in flight
 *    "lastGpus": [...], "lastPorts": [...],             only when stopped
 *    "lastCpuset": [...],                               only when stopped, when any
 *    "idleStopSeconds": 1800, "maxDurationSeconds": 28800,  run limits, when set
 *    "runningSince": "...Z",                            while running or paused
 *    "stopped": {"reason", "at", "detail"},             while stopped
 *    "gpusAside": {"gpuCount": 2, "gpuMemory": 0, ...}, while a version runs
 *                                                       without its cards
 *    "pendingSpec": {...replicaset_spec...},                    only when stopped: a change
 *                                                       made while stopped
 *    "queue": {"priority", "submitTime", ...}           only while queued, or dropped
 *                                                       from the queue (service/queue/queue.h)
 *    "services": [{"name", "port", "public"?, "linkToken"?}]}  web services, when any
 *                                                       (replicaset/services.h)
 * A start without cards (PATCH .../restart {"gpuCount": 0}) makes a version
 * whose spec asks for none and keeps the set's GPU fields in gpusAside; the
 * next normal start puts them back (a new version with cards), and a
 * version that asks for cards itself (a gpuPatch, a rollback) has nothing
 * aside (replicaset_version_next).
 * A patch or rollback of a stopped set changes nothing in Docker and takes
 * nothing from the pools: it records the spec its next version will have
 * in pendingSpec (a later one changes that spec further; one that brings
 * it back to the current spec drops it). The next start makes version
 * N+1 from it, taking what it asks for then (restart.c); a start that
 * cannot (no cards free) leaves the set stopped with pendingSpec kept. The
 * version number moves only when that version runs, so history lists only
 * versions that ran.
 * The run limits (docs/usage.md) belong to the set, not to a version: a
 * patch of them alone changes the record in place and a rollback keeps
 * them. So do its web services (docs/services.md): the proxy reaches them
 * on the container's own address, so they need no host port and no new
 * container. runningSince and stopped are kept by replicaset_record_save from the state
 * (a run begins when the set leaves "stopped"; a stop's reason goes when it
 * runs again), so every path that starts or stops a set keeps them right.
 * `gpus`, `gpuShares` and `ports` list exactly what the set holds now:
 * empty once it is stopped or deleted; while an operation that makes a new
 * version runs, what the old and the new version hold together. `gpus` +
 * `gpuShares` are sched/'s grant JSON (gpus_grant_to_json; a record with
 * `gpus` only holds whole cards, the form records had before sharing). The
 * pools are rebuilt from them at start-up (allocations.c). A stopped set
 * remembers in lastGpus and lastPorts which cards and ports it gave back,
 * so a restart can take the same ones again if they are still free.
 *
 * Each version's spec is also kept under keys_replicaset_history as
 * {"version", "createTime", "containerName", "spec", "reason"}.
 *
 * States and what each operation may do from them (replicaset_lifecycle_check):
 *
 *              creating  running  paused  stopped  deleted
 *   stop          -        yes     yes      -        -
 *   pause         -        yes      -       -        -
 *   continue      -         -      yes      -        -
 *   execute       -        yes      -       -        -
 *   commit        -        yes     yes     yes       -
 *   delete       yes       yes     yes     yes       -
 *   patch         -        yes     yes   pending     -
 *   rollback      -        yes     yes   pending     -
 *   restart       -        yes     yes     yes       -
 * A queued set (service/queue/queue.h) allows delete alone: it cancels the
 * wait. It holds nothing and has no container; the queue's dispatcher
 * turns it into a create (state creating) when it fits.
 *
 * "creating" is only seen between the allocation's commit and the
 * container's start, or after a crash there (replicaset_reconcile settles it).
 */
#ifndef GPUBOX_SERVICE_REPLICASET_RECORD_H
#define GPUBOX_SERVICE_REPLICASET_RECORD_H

struct app;

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gpu/gpu.h"
#include "sched/gpus.h"
#include "service/replicaset/spec.h"
#include "store/store.h"
#include "util/err.h"
#include "util/names.h"

enum replicaset_state {
    RS_STATE_CREATING,
    RS_STATE_RUNNING,
    RS_STATE_PAUSED,
    RS_STATE_STOPPED,
    RS_STATE_DELETED,
    RS_STATE_QUEUED, /* waits for room (service/queue/queue.h): holds nothing, no container */
};

enum replicaset_op {
    RS_OP_STOP,
    RS_OP_PAUSE,
    RS_OP_CONTINUE,
    RS_OP_EXECUTE,
    RS_OP_COMMIT,
    RS_OP_DELETE,
    RS_OP_PATCH,
    RS_OP_ROLLBACK,
    RS_OP_RESTART,
};

typedef struct replicaset_held_port {
    uint16_t host_port;
    uint16_t container_port;
    char protocol[4];
} replicaset_held_port;

#define RS_CONTAINER_NAME_MAX (NAME_MAX_LEN + 16)
#define RS_TIME_MAX 32
#define RS_OPERATION_MAX 40 /* JOURNAL_ID_MAX */

typedef struct replicaset_record {
    char name[NAME_MAX_LEN + 1];
    int version;
    enum replicaset_state state;
    replicaset_spec spec;
    char container_name[RS_CONTAINER_NAME_MAX];
    char container_id[80];
    char (*gpus)[GPU_UUID_MAX]; /* every card held, in container order: grant's UUIDs */
    size_t ngpus;
    gpus_grant grant; /* how each card is held; grant.n == ngpus (replicaset_record_set_grant) */
    replicaset_held_port *ports;
    size_t nports;
    char create_time[RS_TIME_MAX];
    char update_time[RS_TIME_MAX];
    char operation[RS_OPERATION_MAX]; /* id of the operation in flight; "" when none */
    char (*last_gpus)[GPU_UUID_MAX];  /* stopped: the cards it gave back */
    size_t nlast_gpus;
    replicaset_held_port *last_ports;
    size_t nlast_ports;
    int *cpuset; /* logical CPUs held for spec.cpu_count (sched/cpus.h), ascending */
    size_t ncpuset;
    int *last_cpuset; /* stopped: the CPUs it gave back */
    size_t nlast_cpuset;
    int64_t mod_revision;            /* of the store key when loaded; 0 for a new record */
    char owner[NAME_MAX_LEN + 1];    /* the user that created it (docs/users.md); "" before users */
    int64_t idle_stop_s;             /* stop after this long idle; 0: never */
    int64_t max_duration_s;          /* stop after running this long; 0: never */
    char running_since[RS_TIME_MAX]; /* when the current run began; "" when stopped */
    char stop_reason[16];            /* "request" | "idle" | "maxDuration"; "" unless stopped */
    char stopped_at[RS_TIME_MAX];
    char stop_detail[192];
    json_t *gpus_aside;   /* the GPU fields set aside by a start without cards; NULL: none */
    json_t *pending_spec; /* stopped: the next version's spec (replicaset_spec JSON); NULL: none */
    json_t *queue;        /* queued: {priority, submitTime, timeoutSeconds, why, dropped}
                             (service/queue/queue.h); NULL: none */
    json_t *services;     /* web services behind the proxy (services.h); NULL: none */
    /* Fields of the stored record this gpuboxd does not know (a newer
     * one wrote them): kept as they are and written back, so a record
     * carried whole (a move to another node) loses nothing. NULL: none. */
    json_t *unknown;
    /* Not stored: what a save's quota check counts instead of what the
     * record holds (a version change holds the old and the new cards at
     * once for a moment; its quota is what the new version keeps). */
    const struct replicaset_record *quota_as;
} replicaset_record;

const char *replicaset_state_name(enum replicaset_state s);

/* 0 when op is allowed in r's state; otherwise ERR_STATE_CONFLICT (or
 * ERR_NOT_FOUND for a deleted set) saying why and what to do instead. */
int replicaset_lifecycle_check(enum replicaset_op op, const replicaset_record *r, gb_err *err);

/* Load name's record: 1 found, 0 absent, -1 error (store_json.h: "reading
 * replica set <name> from the store: ..." when it cannot be read). */
int replicaset_record_load(store *s, const char *name, replicaset_record *out, gb_err *err);
/* replicaset_record_load, except that a record the caller may not see
 * (users/caller.h) is absent: 0, as for a name nobody holds. */
int replicaset_record_load_visible(store *s, const char *name, replicaset_record *out, gb_err *err);
/* Takes one record of a scan; r is freed after the call. 0 to go on, -1
 * with *err filled to stop. */
typedef int (*replicaset_record_fn)(void *ctx, replicaset_record *r, gb_err *err);
/* Hand every replica-set record (not the history) to fn, in name order.
 * Errors as records_scan (store_json.h), prefixed by nothing more:
 * the caller says what it was doing. */
int replicaset_records_each(store *s, replicaset_record_fn fn, void *ctx, gb_err *err);
int replicaset_record_from_json(const json_t *j, replicaset_record *out, gb_err *err);
json_t *replicaset_record_to_json(const replicaset_record *r);
void replicaset_record_free(replicaset_record *r);

/* A deleted record at version 0: the fence replicaset/doubt.c leaves where a
 * create cut off by a store outage might still land. It holds nothing and
 * has no history; queries treat the name as unknown, and the next create
 * starts at version 1 over it. */
bool replicaset_record_is_tombstone(const replicaset_record *r);

/* Drop what the record holds (gpus, ports). Nothing is freed: a shallow
 * copy made before may still list it, to give back to the pools. */
void replicaset_record_clear_holdings(replicaset_record *r);
/* Make g (moved in: *g is left empty) what r holds, gpus included. */
int replicaset_record_set_grant(replicaset_record *r, gpus_grant *g, gb_err *err);
/* Move the cards and ports it holds into lastGpus/lastPorts (stop),
 * holding nothing. */
void replicaset_record_remember_holdings(replicaset_record *r);
/* Forget lastGpus/lastPorts. */
void replicaset_record_forget_last(replicaset_record *r);
/* Deep copy (spec, grant, holdings, last holdings); 0, or -1 out of memory. */
void replicaset_record_copy(const replicaset_record *src, replicaset_record *dst);
/* The JSON lists of what it holds, for answers. */
json_t *replicaset_record_gpus_json(const replicaset_record *r);
/* [{uuid, memoryMiB, mode, replica?}] for a share grant, [] otherwise. */
json_t *replicaset_record_gpu_shares_json(const replicaset_record *r);
/* The spec's gpuCores (the compute share of each card), null when none. */
json_t *replicaset_record_gpu_cores_json(const replicaset_record *r);
/* "none" | "whole" | "memory" | "timeslice": how r holds its cards. */
const char *replicaset_record_gpu_mode(const replicaset_record *r);
json_t *replicaset_record_ports_json(const replicaset_record *r);
/* [2, 3, 34, 35]: the logical CPUs it holds. */
json_t *replicaset_record_cpuset_json(const replicaset_record *r);

/* The history entry for r's current version; reason says what made it
 * ("create", "patch", "restart", "rollback to 2"). */
json_t *replicaset_record_history_entry(const replicaset_record *r, const char *reason);

/* The run limits as the API shows them: {"idleStop": "30m" or "",
 * "maxDuration", "runningSince"?, "stopAt"?, "stopped"?} merged into obj. */
void replicaset_record_limits_json(const replicaset_record *r, json_t *obj);
/* The run limits of a create or patch body (idleStop, maxDuration: "30m",
 * "" or null for none) into *idle_s and *max_s, kept when absent.
 * ERR_INVALID_PARAMS / ERR_WRONG_TYPE naming the field. *given: whether
 * the body had any of them. */
#define RS_LIMIT_MIN_S 10
#define RS_LIMIT_MAX_S (366LL * 86400)
int replicaset_run_limits_parse(const json_t *body, int64_t *idle_s, int64_t *max_s, bool *given,
                                gb_err *err);

/* Write r back if nobody changed it since it was loaded (compare-and-swap on
 * mod_revision; 0 = must not exist). extra ops (may be NULL/0) go in the
 * same transaction, and so does r's owner's ledger entry (users/users.h),
 * so a quota the change would pass is ERR_QUOTA_EXCEEDED with nothing
 * written. ERR_CONFLICT when the record changed underneath. On success
 * r->mod_revision is the new revision. */
int replicaset_record_save(struct app *a, replicaset_record *r, const store_op *extra,
                           size_t nextra, gb_err *err);
/* The same without the ledger: for a record of a set the ledger counts on
 * another node now (a move's source after the hand-over, move_leave.c). */
int replicaset_record_save_unledgered(struct app *a, replicaset_record *r, gb_err *err);
/* What r holds, as its owner's ledger counts it (users/users.h); inv (may
 * be NULL) gives the memory of the cards its shares are on, to count each
 * share as a part of a card. */
struct users_ledger_hold;
void replicaset_record_hold(const replicaset_record *r, const gpu_inventory *inv,
                            struct users_ledger_hold *h);
/* ops under cmps, with gone's ledger entry removed in the same transaction
 * (users_ledger_txn): a record that goes. *landed false: a compare failed. */
int replicaset_record_remove_txn(struct app *a, const replicaset_record *gone,
                                 const store_cmp *cmps, size_t ncmps, store_op *ops, size_t nops,
                                 bool *landed, gb_err *err);

#endif
