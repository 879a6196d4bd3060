/*
 * replicaset.h - the replica-set service: what each replica-set operation
 * does, in which order, against the store, the pools and Docker.
 *
 * A replica set `foo` is one user instance: a spec plus, at any time, one
 * container `foo-N` (N = version). Its record in the store (replicaset/record.h)
 * holds its state and every GPU and host port it holds; the pools in memory
 * follow the store, never the other way round.
 *
 * Lifecycle (replicaset/record.h has the table):
 *   create   -> running
 *   pause    running -> paused     container stopped, GPUs and ports kept
 *   continue paused  -> running    same container started again
 *   stop     running|paused -> stopped   container stopped, GPUs and ports released
 *   delete   any -> deleted        container removed, everything released;
 *                                  history kept unless purge, and a later
 *                                  create of the same name continues the
 *                                  version numbers (after purge: from 1)
 *   patch    running|paused        new version N+1 with the patched spec,
 *                                  the system disk carried into it
 *   rollback running|paused        new version whose spec is version k's
 *   restart  stopped -> running    the same container on the same cards if
 *                                  they are free, else a new version
 * Create, patch, rollback, restart, stop and delete go through the
 * operation journal (journal.h), so a crash at any step is finished or
 * undone at the next start (replicaset_recover).
 * Operations on one name run one at a time (namelock.h); on different names
 * in parallel.
 *
 * Every function returns 0 and sets *out to the `data` of the answer, or -1
 * with *err saying what went wrong in words a user can act on.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_H
#define GPUBOX_SERVICE_REPLICASET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "service/app.h"
#include "service/tickets/tickets.h"
#include "service/replicaset/patch_request.h"
#include "service/replicaset/request.h"
#include "service/replicaset/spec.h"
#include "service/images/images.h"
#include "util/err.h"

/* Create `name` from spec: allocate GPUs and ports all-or-nothing, commit
 * the record (one transaction), then create and start `name-1` (or the next
 * version after a delete that kept history). On any failure everything taken
 * is given back. data: {name, replicaSetName, containerName, containerId,
 * version, gpus:[uuid], gpuShares:[{uuid, memoryMiB, mode, replica?}] (shares
 * only; [] for whole cards), ports:[{hostPort, containerPort, protocol}]}. */
/* req: the parsed create body (replicaset/request.h): name, spec, run
 * limits (replicaset/record.h) and how the image is pulled; its placement
 * fields were for the fleet and are not looked at here. */
int replicaset_create(app *a, const replicaset_create_request *req, json_t **out, gb_err *err);

/* data: {replicaSets:[{name, version, state, status, containerName, gpus,
 * gpuShares, ports, createTime, updateTime}]}; deleted sets only with include_deleted.
 * status is Docker's live view: "running", "exited", ..., or "missing" when
 * the container is gone from Docker. */
int replicaset_list(app *a, bool include_deleted, json_t **out, gb_err *err);
/* The items of replicaset_list read from another node's store s, without
 * Docker: every status "unknown" (a fleet node that does not answer). */
int replicaset_list_offline(store *s, bool include_deleted, json_t **out, gb_err *err);
/* data: {info:{name, version, state, status, createTime, updateTime, spec,
 * containerName, containerId, gpus, gpuShares, ports, gpuLimits:{mode, enforced,
 * enforcedBy}}}: gpuLimits says whether the container's GPU limits are
 * enforced (a share only with HAMi-core). ERR_NOT_FOUND when unknown. */
int replicaset_info(app *a, const char *name, json_t **out, gb_err *err);
/* data: {history:[{version, createTime, containerName, spec}]}, newest first. */
int replicaset_history(app *a, const char *name, json_t **out, gb_err *err);

/* data: {name, state, containerName, gpus, ports} after the change; for
 * stop also released:{gpus, ports}. */
int replicaset_stop(app *a, const char *name, json_t **out, gb_err *err);
/* replicaset_stop with the reason kept in the record's "stopped" ("idle",
 * "maxDuration"; replicaset_stop's is "request") and a detail for people. */
int replicaset_stop_because(app *a, const char *name, const char *reason, const char *detail,
                            json_t **out, gb_err *err);
int replicaset_pause(app *a, const char *name, json_t **out, gb_err *err);
int replicaset_continue(app *a, const char *name, json_t **out, gb_err *err);

/* data: {name, purged, released:{gpus, ports}}. */
int replicaset_delete(app *a, const char *name, bool purge, json_t **out, gb_err *err);

/* Patch (a request parsed by replicaset_patch_request_parse; replicaset_spec_patch
 * applies it): a new version with the
 * new spec and the system disk carried, or, when the patch changes
 * nothing, no new version. data: {name, replicaSetName, containerName,
 * containerId, version, state, gpus, ports, changed, operationId (when
 * changed), carry}. */
int replicaset_patch(app *a, const char *name, const replicaset_patch_request *patch, json_t **out,
                     gb_err *err);
/* A new version whose spec is version `version`'s, carrying the current
 * system disk. ERR_VERSION_NEGATIVE below 0, ERR_INVALID_PARAMS for 0,
 * ERR_NO_NEED_ROLLBACK for the current version, ERR_NOT_FOUND for one the
 * history lacks. data as patch's. */
int replicaset_rollback(app *a, const char *name, long long version, json_t **out, gb_err *err);
/* Stopped: the same container again when the cards and ports it gave back
 * are all free (data: {..., version unchanged, sameContainer: true}), else
 * a new version on other cards with the system disk carried. Paused: as
 * continue. Running: the container is restarted.
 * no_gpu: a set that has cards starts as a new version without them, its
 * GPU fields set aside (record.h, gpusAside); a set whose cards are aside
 * takes them again on a restart without no_gpu (a new version too). */
int replicaset_restart(app *a, const char *name, bool no_gpu, json_t **out, gb_err *err);

/* ---- The queue's side of a set (replicaset/queued.c; service/queue/queue.h) ---- */

/* A queued record for req (state queued, holding nothing), owned by the
 * caller, its queue object `queue` {priority, submitTime, submitMs,
 * timeoutSeconds}: ERR_EXISTS when the name is taken. */
int replicaset_enqueue(app *a, const replicaset_create_request *req, json_t *queue, gb_err *err);
/* Start queued set q (as loaded: its revision is compared) through the
 * journalled create, with its owner's quota checked now. data as create's.
 * ERR_CONFLICT when q changed meanwhile (cancelled, started elsewhere). */
int replicaset_start_queued(app *a, const struct replicaset_record *q, json_t **out, gb_err *err);
/* Take queued set name (at revision rev; 0: any) out of the queue, keeping
 * its record as deleted with queue.dropped {reason, at, detail}. */
int replicaset_drop_queued(app *a, const char *name, int64_t rev, const char *reason,
                           const char *detail, gb_err *err);
/* r (a queued set, or a set whose move waits) as replicaset_drop_queued
 * and replicaset_move_wait_end leave it, unsaved: the dispatcher writes
 * another node's record so (service/queue/dispatch.c). */
void replicaset_queued_mark_dropped(struct replicaset_record *r, const char *reason,
                                    const char *detail);
/* PATCH .../restart with queue of a stopped set that cannot start now: it
 * waits in the queue as state queued, keeping its container and system
 * disk (queue gets restart: true, noGpu). ERR_STATE_CONFLICT unless stopped. */
int replicaset_enqueue_restart(app *a, const char *name, bool no_gpu, json_t *queue, gb_err *err);
/* Start a queued restart q (as loaded: its revision is compared) as the
 * restart of a stopped set. data as restart's. */
int replicaset_restart_queued(app *a, const struct replicaset_record *q, json_t **out, gb_err *err);
/* DELETE of a queued create (name locked, r loaded): it goes. data as delete's
 * plus cancelled: true. */
int replicaset_cancel_queued(app *a, struct replicaset_record *r, bool purge, json_t **out,
                             gb_err *err);
/* A move that waits in the queue (POST .../move with queue; queue.h): the
 * set stays as it is, its queue object {move: true, priority, submitTime,
 * submitMs, timeoutSeconds, firstWhy, node?}. ERR_STATE_CONFLICT unless it
 * is running, paused or stopped, ERR_EXISTS when it waits already. */
int replicaset_enqueue_move(app *a, const char *name, json_t *queue, gb_err *err);
/* Whether r is a set whose move waits in the queue. */
bool replicaset_move_waits(const struct replicaset_record *r);
/* The wait of name's move ends (at revision rev; 0: any): reason NULL
 * (done or cancelled) takes the queue object away; otherwise it stays as
 * queue.dropped {reason, at, detail}. The set is as it was. ERR_CONFLICT
 * when it does not wait (any longer) or changed meanwhile. */
int replicaset_move_wait_end(app *a, const char *name, int64_t rev, const char *reason,
                             const char *detail, gb_err *err);
/* ---- Moving to another node of a fleet (move.c, move_in.c, move_settle.c) ---- */

typedef struct replicaset_move_request {
    const char *node;          /* the node it goes to; NULL: placement picks one */
    const char *authorization; /* the caller's Authorization, for the other node */
    bool wait;                 /* answer when it is over; false: once the target took the
                                  room (refusals still come first), the rest running on */
    bool with_sharers;         /* every set that binds one of its volumes (transitively)
                                  moves with it, to the same node (move_group.c) */
    /* Set by move_group.c for each set of such a group; NULL otherwise. */
    const json_t *group; /* {"sets": [names], "sharedVolumes": [names already on the
                            target], "keepVolumes": [names a later set still binds here],
                            "groupBytes": what the later sets need on the target's disk} */
} replicaset_move_request;

/* POST /replicaSet/{name}/move on the node that holds it: a new version on
 * the other node with the system disk and the volumes' data (move.c says
 * how, docs/fleet.md what users see). Refused before anything is copied
 * when the target lacks room (1013/1014/1118 naming it), a volume is
 * bound by another set too (1107; with_sharers moves those sets too, one
 * after another, the room for all of them checked first), or the set is
 * not running, paused or stopped. data: {name, from, to, node,
 * operationId, containerName, version, state, gpus, gpuShares, ports,
 * bytes, seconds, bytesPerSecond}, with_sharers adding sharers: [the same
 * for each other set]. */
int replicaset_move(app *a, const char *name, const replicaset_move_request *rq, json_t **out,
                    gb_err *err);
/* GET .../moves/{id}/data on the source: the set's stream, encoded, into
 * sink(ctx, data, n) on the calling thread (< 0 stops it).
 * tree: part of the tree way (0 the system disk, 1.. each volume), else
 * the portable stream (the carry's, Docker's archive API) of it all.
 * phase "pre" (tree way, a running set: the copy while it runs) or
 * "final" (the set stopped: everything, or after a pre-copy only what
 * changed). offset: bytes of the stream not sent again (a resumed pull;
 * ERR_CONFLICT when the stream no longer has an entry there). */
typedef struct replicaset_move_part {
    bool tree;
    unsigned part;
    bool pre;
    uint64_t offset;
    /* A resumed pre-copy: the length and sum of the headers of the entry
     * that begins at offset on the receiving side (carry_relay_head). */
    uint64_t head_len, head_hash;
} replicaset_move_part;
int replicaset_move_export(app *a, const char *id, const replicaset_move_part *p,
                           int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                           gb_err *err);
/* PATCH .../restart {"move": true}: replicaset_restart, and when this
 * node lacks the room (1013, 1014, 1118) in a fleet, a move (stopped) to
 * the node placement picks and the restart there; data: the restart's
 * answer from that node, with node, movedFrom and move (the move's). */
int replicaset_restart_or_move(app *a, const char *name, bool no_gpu, const char *authorization,
                               json_t **out, gb_err *err);
/* Bytes of move id's streams sent (the source's side of GET .../data):
 * added to its operation's progress, every stream and every resumed
 * pull counted; done once a stream ended. */
void replicaset_move_progress_add(const char *id, uint64_t bytes, bool done);
/* The target's side (move_in.c): prepare (body as move.c sends it), pull
 * the data, commit, abort. */
int replicaset_move_in_prepare(app *a, const json_t *body, json_t **out, gb_err *err);
int replicaset_move_in_pull(app *a, const char *id, const char *authorization, bool pre,
                            json_t **out, gb_err *err);
int replicaset_move_in_commit(app *a, const char *id, json_t **out, gb_err *err);
int replicaset_move_in_abort(app *a, const char *id, const char *why, json_t **out, gb_err *err);
/* POST /operations/{id}/abandon (admin): give up this node's half of a
 * move coming here (move-in) whose source is lost for good before the
 * set's name moved; data: the operation, undone. */
int replicaset_move_abandon(app *a, const char *id, json_t **out, gb_err *err);
/* Settle every unfinished move of this node (move_settle.c), now; and the
 * thread that does it every few seconds once the node joined. */
size_t replicaset_moves_settle(app *a); /* how many unfinished moves it saw */
/* A move began here: the thread reads the journal again. */
void replicaset_moves_poke(void);
void replicaset_moves_start(app *a);
void replicaset_moves_stop(app *a);
/* Wait for the moves that answered early to end (before the app goes). */
void replicaset_moves_wait(void);

/* GET /api/v1/operations/{id}: the operation record (journal.h). */
int replicaset_operation(app *a, const char *id, json_t **out, gb_err *err);

#define RS_EXEC_DEFAULT_TIMEOUT_S 60
#define RS_EXEC_MAX_TIMEOUT_S 3600
#define RS_EXEC_OUTPUT_CAP (1024 * 1024) /* bytes kept per stream */

typedef struct replicaset_exec_request {
    const char *const *cmd; /* argv; at least one */
    size_t ncmd;
    const char *workdir; /* NULL: the image's */
    int timeout_s;       /* 0: RS_EXEC_DEFAULT_TIMEOUT_S */
} replicaset_exec_request;

/* Run a command in the running container. data: {stdout, stderr, exitCode,
 * stdoutTruncated, stderrTruncated, timedOut}. */
int replicaset_execute(app *a, const char *name, const replicaset_exec_request *req, json_t **out,
                       gb_err *err);

/* Commit the container to image `image` ("repo[:tag]"). An existing tag is
 * refused unless overwrite, and never overwritten if gpubox did not create
 * it. A user commits only under their own namespace, u/<user>/
 * (images.h: images_commit_check). The image keeps the instance's
 * environment only when keep_env; else it has its base image's, each
 * variable the instance added unset. data: {imageName, imageId, keptEnv}. */
int replicaset_commit(app *a, const char *name, const char *image, bool overwrite, bool keep_env,
                      json_t **out, gb_err *err);

/* ---- Terminals (replicaset/terminal.c, docs/access.md) ---- */

#define TERMINAL_MAX_PER_USER_DEFAULT 8
#define TERMINAL_IDLE_S_DEFAULT (30 * 60)
#define RS_TERMINAL_SIZE_MAX 1000 /* columns or rows */

typedef struct replicaset_terminal replicaset_terminal;
typedef struct replicaset_terminal_request {
    const char *const *cmd; /* argv; none: bash if the image has it, else sh */
    size_t ncmd;
    bool tty;            /* a TTY (a shell); else stdin and piped output (exec -i) */
    unsigned cols, rows; /* the TTY's size; 0 and 0: Docker's default */
} replicaset_terminal_request;

/* A single-use ticket (tickets.h) that opens a terminal in set name for the
 * caller: for browsers, which cannot send the Authorization header with a
 * WebSocket. The set must exist for the caller and run. */
int replicaset_terminal_ticket(app *a, const char *name, char out[TICKET_SIZE], gb_err *err);
/* Start req's process in set name's container with its stream. The set
 * must exist for the caller and run; ERR_TERMINAL_LIMIT when the caller
 * has terminal_max_per_user open. */
int replicaset_terminal_open(app *a, const char *name, const replicaset_terminal_request *req,
                             replicaset_terminal **out, gb_err *err);
/* The process's stream: write its input, read its output. */
int replicaset_terminal_fd(const replicaset_terminal *t);
int replicaset_terminal_resize(replicaset_terminal *t, unsigned cols, unsigned rows, gb_err *err);
/* Bytes read from the stream as output pieces (docker_exec_stream_split). */
int replicaset_terminal_output(replicaset_terminal *t, const uint8_t *data, size_t n,
                               docker_exec_emit_fn emit, void *ctx);
/* Once the stream ended: the exit code (-1: not known). */
long replicaset_terminal_exit_code(replicaset_terminal *t);
/* --terminal-idle in seconds (0: never idle). */
unsigned replicaset_terminal_idle_s(const app *a);
/* Close and free; kill: end the process first if it still runs. */
void replicaset_terminal_close(replicaset_terminal *t, bool kill);

/* ---- Logs (replicaset/logs.c) ---- */

/* Lines of a version's container gpubox keeps when it removes it, at
 * most: a version keeps at most a quarter of its set's bytes (after JSON
 * escaping), a set RS_LOGS_KEEP_SET_MIB_DEFAULT MiB unless
 * --kept-logs-mib says otherwise; the oldest lines and versions go first. */
#define RS_LOGS_KEEP_LINES 10000
#define RS_LOGS_KEEP_SET_MIB_DEFAULT 32

typedef struct replicaset_logs_request {
    long tail;                 /* the last this many lines of each version; < 0: all */
    const long *tails;         /* NULL, or per version of the plan (its order): tail for that one */
    int64_t since;             /* unix seconds: only lines written at or after it; 0: all */
    bool follow;               /* the newest version asked for is followed while it runs */
    int versions;              /* the newest this many versions; 0: all; 1: the current */
    const atomic_bool *cancel; /* set to end a follow (the client went away); may be NULL */
} replicaset_logs_request;

typedef struct replicaset_log_line {
    int version;
    int stream;       /* 1 stdout, 2 stderr */
    const char *time; /* RFC 3339 with nanoseconds; "" when unknown */
    const char *text; /* without its line end; any bytes */
    size_t len;
    bool partial; /* a piece of a longer line; more follows */
} replicaset_log_line;

/* false: read no further. */
typedef bool (*replicaset_log_fn)(void *ctx, const replicaset_log_line *line);

/* Check name and that the caller may see the set (ERR_NOT_FOUND when not),
 * and say which versions rq asks for and where each one's lines come from:
 * data {name, version, state, versions:[{version, containerName, current,
 * source: "container"|"kept"|"none", status (a container's), note (none's
 * why)}]}, oldest first. */
int replicaset_logs_plan(app *a, const char *name, const replicaset_logs_request *rq, json_t **out,
                         gb_err *err);
/* Hand every line of plan's versions to fn, oldest version first, following
 * the newest if rq says so (returning when its container stops, fn says
 * stop or rq->cancel is set). */
int replicaset_logs_read(app *a, const json_t *plan, const replicaset_logs_request *rq,
                         replicaset_log_fn fn, void *ctx, gb_err *err);

/* gpu-docker-api's older routes name a set as "foo" or by its container
 * "foo-N": write the replica-set name into base (NAME_MAX_LEN + 1 bytes). */
int replicaset_resolve_name(app *a, const char *name_or_container, char *base, gb_err *err);

/* Start-up, after the pools are derived: finish or undo every operation the
 * journal holds unfinished (replicaset_recover), then settle records caught
 * mid-create by a crash, start containers of running sets that stopped
 * while gpuboxd was down, and log sets whose containers Docker no longer
 * has. */
int replicaset_reconcile(app *a, gb_err *err);
/* The first part alone. */
int replicaset_recover(app *a, gb_err *err);

/* The replica-set kinds of the operation engine's table (engine.h,
 * op_kinds.c), each defined in the file that holds its steps. */
struct op_kind;
extern const struct op_kind replicaset_op_create, replicaset_op_stop, replicaset_op_delete,
    replicaset_op_restart_same, replicaset_op_restart_new, replicaset_op_patch,
    replicaset_op_rollback, replicaset_op_move, replicaset_op_move_group;

#endif
