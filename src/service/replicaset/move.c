/*
 * move.c - moving a replica set to another node of the fleet: the side of
 * the node it leaves (docs/fleet.md, "Moving a replica set"; move.h has the
 * conversation). A move is a new version on the other node: the same name,
 * owner, history, spec, env, SSH keys and every other field of the record,
 * the system disk carried (the portable carry's stream) and every gpubox
 * volume it binds moved with its data.
 *
 * Steps (journalled as operation "move", the set's record naming it):
 *   begin         the record names the operation; nothing else changed
 *   prepared      the target took the room (cards, ports, cores, disk),
 *                 made the volumes and the container: a target without
 *                 room refused here, before anything was copied
 *   pre-copied    a running set's system disk and volumes copied while it
 *                 runs (the tree way only; others pass this step at once)
 *   old-stopped   a running set's container stopped here (a paused or
 *                 stopped one is stopped already)
 *   copied        the target pulled the system disk and the volumes' data
 *                 from this node (GET .../data) into its container: all of
 *                 it, or after a pre-copy only what changed since
 *   switched      the fleet's name index says the target owns the set and
 *                 its volumes: the point of no return
 *   committed     the target wrote the records and started the set
 *   old-removed   this node's container, volumes, record and history gone,
 *                 with the operation done, in one transaction; a set
 *                 moved alone answers before this step, which the
 *                 settle thread runs then (move_leave.c)
 * Before `switched` a failure undoes: the target is told to give back what
 * it made, and a set that ran runs here again. From `switched` on it only
 * goes forward: the target commits by itself if it never hears the commit
 * (move_settle.c), and this node removes its copy.
 *
 * Two ways for the data. The tree way, when both nodes keep containers on
 * overlay2 and reach the directories (carry_tree.c): the system disk is
 * the container's upper directory and each volume its host directory,
 * one stream (a "part") each, read and written by GNU tar past Docker;
 * a running set is copied while it runs and then, stopped, only what
 * changed since (tar's listed-incremental snapshots, kept under
 * <data-dir>/moves/ until the move ends), so its downtime is that
 * difference plus a start. Otherwise the portable way: the carry's
 * stream through Docker's archive API (carry_export), all of it with the
 * set stopped. Either way a stream cut off resumes where the target's
 * extraction stopped taking whole entries (carry_tar_relay): the target
 * asks for it again from that offset (a pre-copy's snapshot is then dated
 * back to its first try, so the final stream covers the bytes kept).
 *
 * A paused set moves paused (its container stopped, its cards held on
 * the target) and a stopped set stopped.
 */
#include "util/xalloc.h"
#include "service/replicaset/replicaset.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "carry/carry.h"
#include "service/keys.h"
#include "service/namelock.h"
#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

static const op_step_def move_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},      {OP_STEP_PREPARED, NULL, NULL},
    {OP_STEP_PRE_COPIED, NULL, NULL}, {OP_STEP_OLD_STOPPED, NULL, NULL},
    {OP_STEP_COPIED, NULL, NULL},     {OP_STEP_SWITCHED, NULL, NULL},
    {OP_STEP_COMMITTED, NULL, NULL},  {OP_STEP_OLD_REMOVED, NULL, NULL},
};

/* Before `switched`: the target gives back what it made and a set that ran
 * runs here again (undone). From `switched` on: the target commits, this
 * node's copy goes (done). */
const op_kind replicaset_op_move = {
    .name = "move",
    .journalled = true,
    .kind = JOURNAL_MOVE,
    OP_STEPS(move_steps),
    .resume = move_out_resume,
};

/* ---- talking to the other node -------------------------------------------------- */

int move_call(app *a, const char *advertise, const char *method, const char *path,
              const char *authorization, const json_t *body, long timeout_ms, json_t **data,
              gb_err *err)
{
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    nodes_request rq = {.method = method,
                        .path_query = path,
                        .authorization = authorization,
                        .body = text,
                        .body_len = text ? strlen(text) : 0,
                        .timeout_ms = timeout_ms};
    nodes_answer ans = {0};
    if (data)
        *data = NULL;
    if (nodes_send(a, advertise, &rq, &ans, err) < 0) {
        nodes_answer_clear(&ans);
        return -1;
    }
    _cleanup_json_ json_t *env = ans.body ? json_loads(ans.body, 0, NULL) : NULL;
    int status = ans.status;
    nodes_answer_clear(&ans);
    json_t *code = json_object_get(env, "code");
    const char *msg = json_string_value(json_object_get(env, "msg"));
    if (status / 100 != 2 || (json_is_integer(code) && json_integer_value(code) != ERR_OK)) {
        err_set(err, json_is_integer(code) ? (int)json_integer_value(code) : ERR_INTERNAL, "%s",
                msg && msg[0] ? msg : "the other node refused without saying why");
        /* The particulars of its refusal (a 1185's bytes) go on to the caller. */
        json_t *d = json_object_get(env, "data");
        _cleanup_free_ char *dtext = json_is_object(d) ? json_dumps(d, JSON_COMPACT) : NULL;
        if (dtext && strlen(dtext) < sizeof(err->data))
            snprintf(err->data, sizeof(err->data), "%s", dtext);
        return -1;
    }
    if (data) {
        json_t *d = json_object_get(env, "data");
        *data = d ? json_incref(d) : NULL;
    }
    return 0;
}

/* ---- what moves -------------------------------------------------------------------- */

/* The gpubox volumes r binds, each once, less those listed in skip (a
 * JSON array of names; NULL: none): names (borrowed from r's spec). */
static size_t move_volume_names(const replicaset_record *r, const json_t *skip, const char **names,
                                size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < r->spec.nbinds && n < max; i++) {
        const char *src = r->spec.binds[i].src;
        bool seen = src[0] == '/' || json_array_has_string(skip, src);
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(names[k], src) == 0;
        if (!seen)
            names[n++] = src;
    }
    return n;
}

#define MOVE_VOLUMES_MAX 32

/* The tree way on this side: the container's upper directory and every
 * volume's directory reachable here. */
static bool move_tree_ok(app *a, const replicaset_record *r, const char *const *vols, size_t n)
{
    char path[MOVE_DIR_MAX];
    gb_err e = GB_ERR_INIT;
    /* Test hook: the portable way where the tree way would do. */
    const char *way = getenv("GPUBOX_MOVE_WAY");
    if (way && strcmp(way, "portable") == 0) {
        log_info("move: %s goes the portable way: GPUBOX_MOVE_WAY=portable (test hook)", r->name);
        return false;
    }
    if (carry_tree_upper(a->docker, r->container_name, path, sizeof(path), &e) < 0) {
        log_info("move: %s goes the portable way: %s", r->name, e.msg);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (volumes_host_dir(a, vols[i], path, sizeof(path), &e) < 0) {
            log_info("move: %s goes the portable way: %s", r->name, e.msg);
            return false;
        }
    return true;
}

/* <data-dir>/moves/<id>.<part>.snar: the tree way's snapshot of what the
 * pre-copy sent; with suffix, a working copy. */
static void move_snapshot_path(app *a, const char *id, unsigned part, const char *suffix,
                               char *path, size_t size)
{
    snprintf(path, size, "%s/moves/%s.%u.snar%s", a->cfg.data_dir, id, part, suffix);
}

/* The snapshots of move id go (it ended, either way), with the times
 * their pre-copies began. */
static void move_snapshots_remove(app *a, const char *id, size_t parts)
{
    char path[MOVE_DIR_MAX + 128];
    for (unsigned i = 0; i < parts; i++) {
        move_snapshot_path(a, id, i, "", path, sizeof(path));
        unlink(path);
        move_snapshot_path(a, id, i, ".began", path, sizeof(path));
        unlink(path);
    }
}

/* <snapshot>.began: when the first try of a pre-copy began. A resumed try
 * keeps the bytes an earlier one sent, read from that time on, so its
 * snapshot is dated back to it (carry_tree_snapshot_backdate): the final
 * stream then sends everything that changed since. */
static int move_precopy_began(const char *snap, bool first, struct timespec *t, gb_err *err)
{
    char path[MOVE_DIR_MAX + 192];
    snprintf(path, sizeof(path), "%s.began", snap);
    if (first) {
        /* A second early: file times come from the kernel's coarse clock,
         * which may lag behind this one. */
        clock_gettime(CLOCK_REALTIME, t);
        t->tv_sec -= 1;
        _cleanup_fclose_ FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "%lld %ld\n", (long long)t->tv_sec, (long)t->tv_nsec) < 0 ||
            fflush(f) != 0)
            return err_set(err, ERR_INTERNAL, "writing %s: %s", path, strerror(errno));
        return 0;
    }
    _cleanup_fclose_ FILE *f = fopen(path, "r");
    long long sec = 0;
    long nsec = 0;
    if (!f || fscanf(f, "%lld %ld", &sec, &nsec) != 2)
        return err_set(err, ERR_CONFLICT,
                       "this pre-copy's first try left no time here: it is pulled again from its "
                       "start");
    t->tv_sec = (time_t)sec;
    t->tv_nsec = nsec;
    return 0;
}

/* The prepare request's body: the record whole, its history, its volumes.
 * g: a group's member (rq->group: the volumes already on the target are
 * left out, the group's other sets may bind its volumes, and the disk
 * the later sets need counts too); NULL: a set alone. */
static int move_prepare_body(app *a, const replicaset_record *r, const char *id, const json_t *g,
                             json_t **body, gb_err *err)
{
    const char *vols[MOVE_VOLUMES_MAX];
    size_t nvols =
        move_volume_names(r, json_object_get(g, "sharedVolumes"), vols, MOVE_VOLUMES_MAX);
    json_t *volumes = json_array();
    *body =
        json_pack("{s:s, s:s, s:s, s:o, s:o, s:[]}", "id", id, "source", nodes_self(a), "name",
                  r->name, "record", replicaset_record_to_json(r), "volumes", volumes, "history");
    for (size_t i = 0; i < nvols; i++) {
        json_t *vr = NULL;
        if (volumes_move_check(a, vols[i], r->name, json_object_get(g, "sets"), &vr, err) < 0)
            return -1;
        json_array_append_new(volumes, vr);
    }
    char prefix[STORE_KEY_MAX];
    keys_replicaset_history_prefix(prefix, sizeof(prefix), r->name);
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0)
        return err_prefix(err, "reading the history of %s", r->name);
    json_t *history = json_object_get(*body, "history");
    for (size_t i = 0; i < kvs.n; i++) {
        json_t *entry = json_loads(kvs.items[i].value, 0, NULL);
        if (entry)
            json_array_append_new(history, entry);
    }
    /* Whether this side can take the tree way, and what the target's disk
     * must hold. */
    json_object_set_new(*body, "tree", json_boolean(move_tree_ok(a, r, vols, nvols)));
    uint64_t system_disk = 0;
    gb_err e = GB_ERR_INIT;
    if (r->container_name[0] &&
        docker_container_size_rw(a->docker, r->container_name, &system_disk, &e) < 0)
        log_warn("move %s: cannot measure the system disk of %s: %s", id, r->name, e.msg);
    /* The first set of a group asks for the room of them all. */
    json_int_t later = json_integer_value(json_object_get(g, "groupBytes"));
    system_disk += later > 0 ? (uint64_t)later : 0;
    json_object_set_new(*body, "systemDiskBytes", json_integer((json_int_t)system_disk));
    return 0;
}

int move_need_bytes(app *a, const replicaset_record *r, const json_t *group, uint64_t *bytes,
                    gb_err *err)
{
    _cleanup_json_ json_t *body = NULL;
    if (move_prepare_body(a, r, "check", group, &body, err) < 0)
        return -1;
    *bytes = (uint64_t)json_integer_value(json_object_get(body, "systemDiskBytes"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(body, "volumes"), i, v)
    {
        json_int_t used = json_integer_value(json_object_get(v, "used"));
        *bytes += used > 0 ? (uint64_t)used : 0;
    }
    return 0;
}

/* ---- the steps ----------------------------------------------------------------------- */

typedef struct move_out {
    app *a;
    journal_op *op;
    replicaset_record *r;
    const char *auth;
    char target[NODES_NAME_MAX];
    char advertise[NODES_URL_MAX];
    json_t *prepared; /* the target's answer to prepare */
    json_t *pulled;   /* ... and to pull */
    int64_t start_ns;
    /* Called once the target took the room (the answer of a move that does
     * not wait), with the answer so far; NULL: none. */
    void (*on_prepared)(void *ctx, const json_t *answer);
    void *ctx;
} move_out;

static json_t *move_answer(const move_out *m);

static const char *op_str(const journal_op *op, const char *key)
{
    const char *s = json_string_value(json_object_get(op->data, key));
    return s ? s : "";
}

/* Where the target is reached now (its advertise URL may have changed). */
static int move_reach_target(move_out *m, gb_err *err)
{
    snprintf(m->target, sizeof(m->target), "%s", op_str(m->op, "target"));
    return nodes_reach(m->a, m->target, m->advertise, sizeof(m->advertise), err);
}

/* The target undoes what it made (best effort: it settles by itself from
 * this node's journal when it does not hear it). */
static void move_tell_abort(move_out *m, const char *why)
{
    gb_err e = GB_ERR_INIT;
    if (!m->advertise[0] && move_reach_target(m, &e) < 0)
        return;
    char path[128];
    snprintf(path, sizeof(path), MOVE_PATH "/%s/abort", m->op->id);
    _cleanup_json_ json_t *body = json_pack("{s:s}", "reason", why);
    if (move_call(m->a, m->advertise, "POST", path, m->auth, body, 30000, NULL, &e) < 0)
        log_warn("move %s: node %s did not confirm the undo (%s); it undoes by itself", m->op->id,
                 m->target, e.msg);
}

/* Undo before the point of no return: the target told, a set that ran
 * started again here, the operation undone. */
static int move_undo(move_out *m, const char *why, gb_err *err)
{
    move_tell_abort(m, why);
    replicaset_record *r = m->r;
    move_snapshots_remove(m->a, m->op->id, 1 + MOVE_VOLUMES_MAX);
    gb_err e = GB_ERR_INIT;
    /* A later set of a group binds a volume whose name is the target's
     * now: it waits here, stopped, for its group (move_group_settle.c). */
    bool waits = json_array_size(json_object_get(m->op->data, "sharedVolumes")) > 0;
    if (r->state == RS_STATE_RUNNING && !waits && replicaset_container_start(m->a, r, &e) < 0)
        log_error("move %s: starting %s again after the move failed: %s", m->op->id,
                  r->container_name, e.msg);
    if (op_close(m->a, m->op, JOURNAL_UNDONE, why, r, NULL, 0, &e) < 0) {
        log_error("move %s: recording the undo: %s (settled at the next call or start)", m->op->id,
                  e.msg);
        return err ? err_set(err, e.code, "%s", e.msg) : -1;
    }
    log_info("move %s: %s stays on this node: %s", m->op->id, r->name, why);
    return 0;
}

/* After `switched`: the target told to commit (it commits by itself when
 * it does not hear it), step `committed`. */
static int move_commit_target(move_out *m, gb_err *err)
{
    app *a = m->a;
    journal_op *op = m->op;
    if (!journal_step_done(op, OP_STEP_COMMITTED)) {
        char path[128];
        snprintf(path, sizeof(path), MOVE_PATH "/%s/commit", op->id);
        gb_err e = GB_ERR_INIT;
        json_t *ans = NULL;
        int rc = m->advertise[0] || move_reach_target(m, &e) == 0
                     ? move_call(a, m->advertise, "POST", path, m->auth, NULL, 0, &ans, &e)
                     : -1;
        if (rc < 0) /* it commits by itself once it sees the name is its own */
            log_warn("move %s: node %s did not confirm the commit (%s); it commits by itself",
                     op->id, m->target, e.msg);
        else
            json_object_set_new(op->data, "committed", ans ? ans : json_object());
        if (op_step(a, op, OP_STEP_COMMITTED, err) < 0)
            return -1;
    }
    return 0;
}

/* After `switched`: commit on the target, then this node's copy goes. */
static int move_finish(move_out *m, gb_err *err)
{
    app *a = m->a;
    replicaset_record *r = m->r;
    journal_op *op = m->op;
    if (move_commit_target(m, err) < 0)
        return -1;
    /* This node's copy: container, volumes (Docker refuses to remove a
     * volume a container still names), then record, history and operation. */
    replicaset_logs_keep(a, r->name, r->version, r->container_name);
    if (docker_container_remove(a->docker, r->container_name, true, err) < 0)
        return err_prefix(err, "move %s: removing container %s", op->id, r->container_name);
    replicaset_container_forget(a, r->container_name);
    journal_fault("move", "old-container-removed");
    /* A group's volume stays while a later set of the group binds it here;
     * the last one takes it (docs/fleet.md, "Sets that share a volume"). */
    const char *vols[MOVE_VOLUMES_MAX];
    size_t nvols =
        move_volume_names(r, json_object_get(op->data, "keepVolumes"), vols, MOVE_VOLUMES_MAX);
    for (size_t i = 0; i < nvols; i++)
        if (volumes_move_remove(a, vols[i], err) < 0)
            return err_prefix(err, "move %s: removing volume %s", op->id, vols[i]);
    char key[STORE_KEY_MAX], prefix[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    keys_replicaset_history_prefix(prefix, sizeof(prefix), r->name);
    store_op ops[3] = {{.kind = STORE_OP_DELETE, .key = key},
                       {.kind = STORE_OP_DELETE_PREFIX, .key = prefix}};
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    int landed = op_close_txn(a, op, JOURNAL_DONE, NULL, r, &cmp, ops, 2, err);
    if (landed <= 0)
        return landed < 0 ? -1
                          : err_set(err, ERR_CONFLICT,
                                    "move %s: the record of %s changed meanwhile", op->id, r->name);
    replicaset_logs_forget(a, r->name);
    move_snapshots_remove(a, op->id, 1 + MOVE_VOLUMES_MAX);
    replicaset_alloc_give_back(a, r);
    replicaset_network_release(a, r->owner);
    nodes_poke(a);
    log_info("move %s: %s left this node for %s", op->id, r->name, op_str(op, "target"));
    return 0;
}

/* After `switched`, a set alone: the answer does not wait for this node's
 * copy to go (move_leave.c). The target commits; the cards, ports and
 * cores, free since the container stopped, go back to the pools; the
 * settle thread, woken now, removes the rest (move_finish through
 * move_out_resume, as after a crash: the journal stays at `committed`). */
static int move_hand_over(move_out *m, gb_err *err)
{
    if (move_commit_target(m, err) < 0)
        return -1;
    move_out_release_early(m->a, m->op, m->r);
    const char *vols[MOVE_VOLUMES_MAX];
    size_t nvols = move_volume_names(m->r, json_object_get(m->op->data, "keepVolumes"), vols,
                                     MOVE_VOLUMES_MAX);
    for (size_t i = 0; i < nvols; i++)
        volumes_move_leaving(m->a, vols[i]);
    move_out_cleanup_soon(m->op->id);
    log_info("move %s: %s handed over to node %s; its old copy here goes next", m->op->id,
             m->r->name, m->target);
    return 0;
}

/* The names that go to the target: the set's and its volumes'. */
static int move_switch(move_out *m, gb_err *err)
{
    const char *names[MOVE_VOLUMES_MAX + 1];
    enum nodes_kind kinds[MOVE_VOLUMES_MAX + 1];
    names[0] = m->r->name;
    kinds[0] = NODES_REPLICASET;
    size_t n = 1 + move_volume_names(m->r, json_object_get(m->op->data, "sharedVolumes"), names + 1,
                                     MOVE_VOLUMES_MAX);
    for (size_t i = 1; i < n; i++)
        kinds[i] = NODES_VOLUME;
    int moved = nodes_names_move(m->a, kinds, names, n, nodes_self(m->a), m->target, err);
    if (moved == 0)
        return err_set(err, ERR_CONFLICT,
                       "the fleet's name index no longer says this node owns %s or one of its "
                       "volumes",
                       m->r->name);
    return moved < 0 ? -1 : 0;
}

/* From wherever op got to, before the point of no return. */
static int move_forward(move_out *m, gb_err *err)
{
    app *a = m->a;
    journal_op *op = m->op;
    replicaset_record *r = m->r;
    char path[128];
    if (!journal_step_done(op, OP_STEP_PREPARED)) {
        _cleanup_json_ json_t *body = NULL;
        if (move_prepare_body(a, r, op->id, op->data, &body, err) < 0 ||
            move_call(a, m->advertise, "POST", MOVE_PATH, m->auth, body, 120000, &m->prepared,
                      err) < 0)
            return -1;
        if (op_step(a, op, OP_STEP_PREPARED, err) < 0)
            return -1;
        if (m->on_prepared) {
            _cleanup_json_ json_t *early = move_answer(m);
            json_object_set_new(early, "state", json_string("moving"));
            m->on_prepared(m->ctx, early);
        }
    }
    if (!journal_step_done(op, OP_STEP_PRE_COPIED)) {
        /* A running set on the tree way: copied while it runs; the stop
         * below then waits only for what changed meanwhile. */
        bool tree = json_is_true(json_object_get(m->prepared, "tree"));
        if (tree && r->state == RS_STATE_RUNNING) {
            snprintf(path, sizeof(path), MOVE_PATH "/%s/pull", op->id);
            _cleanup_json_ json_t *body = json_pack("{s:s}", "phase", "pre");
            _cleanup_json_ json_t *pre = NULL;
            if (move_call(a, m->advertise, "POST", path, m->auth, body, 0, &pre, err) < 0)
                return err_prefix(err, "copying to node %s while %s runs", m->target, r->name);
            if (pre)
                json_object_set(op->data, "preCopied", pre);
        }
        if (op_step(a, op, OP_STEP_PRE_COPIED, err) < 0)
            return -1;
    }
    if (!journal_step_done(op, OP_STEP_OLD_STOPPED)) {
        if (r->state == RS_STATE_RUNNING &&
            replicaset_container_stop(a, r->container_name, err) < 0)
            return err_prefix(err, "stopping %s for the move", r->container_name);
        if (op_step(a, op, OP_STEP_OLD_STOPPED, err) < 0)
            return -1;
    }
    if (!journal_step_done(op, OP_STEP_COPIED)) {
        snprintf(path, sizeof(path), MOVE_PATH "/%s/pull", op->id);
        _cleanup_json_ json_t *body = json_pack("{s:s}", "phase", "final");
        if (move_call(a, m->advertise, "POST", path, m->auth, body, 0, &m->pulled, err) < 0)
            return err_prefix(err, "copying to node %s", m->target);
        if (m->pulled)
            json_object_set(op->data, "copied", m->pulled);
        if (op_step(a, op, OP_STEP_COPIED, err) < 0)
            return -1;
    }
    if (move_switch(m, err) < 0)
        return -1;
    return op_step(a, op, OP_STEP_SWITCHED, err) < 0 ? 1 : 0; /* 1: switched, not recorded */
}

/* The answer: where it went, and what it holds there. */
static json_t *move_answer(const move_out *m)
{
    const json_t *p = m->prepared;
    const json_t *copied = json_object_get(m->op->data, "copied");
    /* What went over the wire: the pre-copy's and the final stream's. */
    json_int_t bytes =
        json_integer_value(json_object_get(copied, "bytes")) +
        json_integer_value(json_object_get(json_object_get(copied, "preCopied"), "bytes"));
    double seconds = time_since_s(m->start_ns);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:f, s:f}", "name", m->r->name, "from",
                          nodes_self(m->a), "to", m->target, "node", m->target, "operationId",
                          m->op->id, "bytes", bytes, "seconds", seconds, "bytesPerSecond",
                          seconds > 0 ? (double)bytes / seconds : 0.0);
    /* The copy alone, as the receiving node timed it: {bytes, seconds, bytesPerSecond}. */
    if (j && copied)
        json_object_set(j, "copy", (json_t *)copied);
    const char *fields[] = {"containerName", "version", "state", "gpus", "gpuShares", "ports"};
    for (size_t i = 0; j && p && i < ARRAY_SIZE(fields); i++) {
        json_t *v = json_object_get(p, fields[i]);
        if (v)
            json_object_set(j, fields[i], v);
    }
    return j;
}

/* ---- the request --------------------------------------------------------------------- */

static int move_check(app *a, const replicaset_record *r, gb_err *err)
{
    (void)a;
    switch (r->state) {
    case RS_STATE_RUNNING:
    case RS_STATE_PAUSED:
    case RS_STATE_STOPPED:
        return 0;
    case RS_STATE_DELETED:
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", r->name);
    default:
        return err_set(err, ERR_STATE_CONFLICT,
                       "replica set '%s' is %s; a move takes a running, paused or stopped set",
                       r->name, replicaset_state_name(r->state));
    }
}

int move_out_run(app *a, const char *name, const replicaset_move_request *rq,
                 void (*on_prepared)(void *, const json_t *), void *ctx, json_t **out, gb_err *err)
{
    if (!a->fleet)
        return err_set(err, ERR_INVALID_PARAMS,
                       "moving a replica set needs a fleet: this gpuboxd is a single server "
                       "(started without --node)");
    if (rq->with_sharers && !rq->group)
        return move_group_run(a, name, rq, on_prepared, ctx, out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 || move_check(a, &r, err) < 0)
        return -1;
    /* A later set of a group binds volumes that are on the target now. */
    if (!json_array_size(json_object_get(rq->group, "sharedVolumes")) &&
        replicaset_volumes_ready(a, &r) == false && r.state != RS_STATE_STOPPED)
        return err_set(err, ERR_STATE_CONFLICT,
                       "a volume replica set '%s' binds is not available here; see gpubox volume "
                       "ls",
                       name);
    move_out m = {.a = a,
                  .r = &r,
                  .auth = rq->authorization,
                  .start_ns = time_mono_ns(),
                  .on_prepared = on_prepared,
                  .ctx = ctx};
    if (nodes_move_target(a, &r.spec, rq->node, m.target, sizeof(m.target), m.advertise,
                          sizeof(m.advertise), err) < 0)
        return -1;
    /* Every volume checked before anything changes (the body builds again
     * in the step, the same way). */
    _cleanup_json_ json_t *probe = NULL;
    if (move_prepare_body(a, &r, "check", rq->group, &probe, err) < 0)
        return -1;
    json_t *data = json_pack("{s:s, s:s, s:s}", "target", m.target, "source", nodes_self(a),
                             "state", replicaset_state_name(r.state));
    const char *group_keys[] = {"group", "sets", "sharedVolumes", "keepVolumes", "groupBytes"};
    for (size_t i = 0; rq->group && i < ARRAY_SIZE(group_keys); i++) {
        json_t *v = json_object_get(rq->group, group_keys[i]);
        if (v)
            json_object_set_new(data, group_keys[i], json_deep_copy(v));
    }
    journal_op op = {0};
    if (op_init(&op, &replicaset_op_move, name, data, err) < 0)
        return -1;
    m.op = &op;
    replicaset_record before;
    replicaset_record_copy(&r, &before);
    int rc = op_begin(a, &op, &r, &before, NULL, 0, err);
    replicaset_record_free(&before);
    if (rc < 0) {
        journal_op_free(&op);
        return -1;
    }
    log_info("move %s: %s (%s) to node %s", op.id, name, replicaset_state_name(r.state), m.target);
    replicaset_moves_poke();
    int fwd = move_forward(&m, err);
    if (fwd < 0) {
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        gb_err undo = GB_ERR_INIT;
        if (move_undo(&m, why, &undo) < 0)
            log_error("move %s: %s", op.id, undo.msg);
    } else if ((rq->group ? move_finish(&m, err) : move_hand_over(&m, err)) < 0) {
        /* The set is the target's now; this node's copy goes at the next
         * call or start (move_out_resume). */
        log_warn("move %s: %s is on node %s; removing it here: %s", op.id, name, m.target,
                 err->msg);
        err_clear(err);
        rc = 0;
    }
    if (fwd >= 0) {
        *out = move_answer(&m);
        rc = 0;
    } else {
        rc = -1;
    }
    json_decref(m.prepared);
    json_decref(m.pulled);
    journal_op_free(&op);
    return rc;
}

/* ---- after a crash -------------------------------------------------------------------- */

int move_out_resume(app *a, journal_op *op, const replicaset_record *cur, gb_err *err)
{
    if (!a->fleet)
        return err_set(err, ERR_NODE_UNAVAILABLE,
                       "move %s waits for this node to join the fleet again", op->id);
    replicaset_record r;
    replicaset_record_copy(cur, &r);
    move_out m = {.a = a, .op = op, .r = &r, .start_ns = time_mono_ns()};
    snprintf(m.target, sizeof(m.target), "%s", op_str(op, "target"));
    char owner[NODES_NAME_MAX] = "";
    int found = nodes_name_owner(a, NODES_REPLICASET, r.name, owner, sizeof(owner), err);
    int rc;
    if (found < 0)
        rc = -1;
    else if (found && strcmp(owner, m.target) == 0)
        rc = move_finish(&m, err);
    else
        rc = move_undo(&m, "gpuboxd stopped during the move, before the set changed nodes", err);
    replicaset_record_free(&r);
    return rc;
}

/* What writes the stream into a pipe, on a thread of its own, while the
 * caller encodes it: the carry's tar of the stopped container (portable
 * way), or tar of one directory (tree way). */
struct export_job {
    app *a;
    const char *container;
    const char *const *mounts;
    size_t n;
    /* the tree way */
    bool tree, live;
    const char *dir, *snapshot_in, *snapshot_out, *work;
    uint64_t skip, head_len, head_hash;
    struct timespec began; /* a pre-copy's first try (move_precopy_began) */
    int fd;                /* closed by the thread */
    int rc;
    gb_err err;
    carry_stats st;
};

static void *export_thread(void *arg)
{
    struct export_job *j = arg;
    if (j->tree)
        j->rc = carry_tree_export(j->dir, j->snapshot_in, j->snapshot_out, j->work, j->skip,
                                  j->head_len, j->head_hash, j->live, j->fd, &j->err);
    else
        j->rc = carry_export(j->a->docker, j->container, j->mounts, j->n, j->fd, &j->st, &j->err);
    close(j->fd);
    return NULL;
}

/* The directory part p of the tree way reads, and the snapshot files. */
static int move_export_tree_job(app *a, const char *id, const replicaset_record *r,
                                const json_t *shared, const replicaset_move_part *p,
                                struct export_job *job, char dir[MOVE_DIR_MAX],
                                char snap[MOVE_DIR_MAX + 128], char work[MOVE_DIR_MAX + 160],
                                gb_err *err)
{
    const char *vols[MOVE_VOLUMES_MAX];
    size_t nvols = move_volume_names(r, shared, vols, MOVE_VOLUMES_MAX);
    if (p->part > nvols)
        return err_set(err, ERR_NOT_FOUND, "move %s has no part %u", id, p->part);
    if ((p->part == 0 ? carry_tree_upper(a->docker, r->container_name, dir, MOVE_DIR_MAX, err)
                      : volumes_host_dir(a, vols[p->part - 1], dir, MOVE_DIR_MAX, err)) < 0)
        return -1;
    char moves[MOVE_DIR_MAX + 16];
    snprintf(moves, sizeof(moves), "%s/moves", a->cfg.data_dir);
    if (mkdir(moves, 0700) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "making %s: %s", moves, strerror(errno));
    move_snapshot_path(a, id, p->part, "", snap, MOVE_DIR_MAX + 128);
    static _Atomic unsigned seq;
    snprintf(work, MOVE_DIR_MAX + 160, "%s.%u.%u", snap, (unsigned)getpid(), ++seq);
    job->tree = true;
    job->dir = dir;
    job->work = work;
    job->skip = p->offset;
    job->head_len = p->head_len;
    job->head_hash = p->head_hash;
    /* A pre-copy read while the tree changed: resumed only where the same
     * entry begins again (the receiving side's head). */
    if (p->pre && p->offset > 0 && p->head_len == 0)
        return err_set(err, ERR_CONFLICT, "a pre-copy resumes only with the head of its entry");
    job->live = p->pre;
    if (p->pre) { /* everything, while it runs; what it sent kept in snap */
        job->snapshot_out = snap;
        if (move_precopy_began(snap, p->offset == 0, &job->began, err) < 0)
            return -1;
    } else if (access(snap, F_OK) == 0) { /* after a pre-copy: what changed since */
        job->snapshot_in = snap;
    }
    return 0;
}

int replicaset_move_export(app *a, const char *id, const replicaset_move_part *p,
                           int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                           gb_err *err)
{
    if (!journal_id_valid(id))
        return err_set(err, ERR_NOT_FOUND, "no move '%.64s'", id);
    _cleanup_(journal_op_free) journal_op op = {0};
    int found = journal_load(a->store, id, &op, err);
    if (found < 0)
        return -1;
    bool ready = p->pre ? journal_step_done(&op, OP_STEP_PREPARED) &&
                              !journal_step_done(&op, OP_STEP_OLD_STOPPED)
                        : journal_step_done(&op, OP_STEP_OLD_STOPPED);
    if (!found || op.kind != JOURNAL_MOVE || op.state != JOURNAL_RUNNING || !ready ||
        journal_step_done(&op, OP_STEP_SWITCHED))
        return err_set(err, ERR_NOT_FOUND, "no move '%s' waiting for its data here", id);
    if (p->pre && !p->tree)
        return err_set(err, ERR_INVALID_PARAMS, "only the tree way copies while the set runs");
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    found = replicaset_record_load(a->store, op.target, &r, err);
    if (found < 0)
        return -1;
    if (!found || strcmp(r.operation, id) != 0)
        return err_set(err, ERR_NOT_FOUND, "no move '%s' waiting for its data here", id);
    /* Each volume at the first place the set binds it (a group's volume
     * already on the target not: it went with an earlier set). */
    const json_t *shared = json_object_get(op.data, "sharedVolumes");
    const char *mounts[MOVE_VOLUMES_MAX];
    size_t n = 0;
    for (size_t i = 0; i < r.spec.nbinds && n < MOVE_VOLUMES_MAX; i++) {
        const replicaset_bind *b = &r.spec.binds[i];
        bool seen = b->src[0] == '/' || json_array_has_string(shared, b->src);
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(r.spec.binds[k].src, b->src) == 0;
        if (!seen)
            mounts[n++] = b->dest;
    }
    struct export_job job = {.a = a, .container = r.container_name, .mounts = mounts, .n = n};
    job.err = (gb_err)GB_ERR_INIT;
    char dir[MOVE_DIR_MAX], snap[MOVE_DIR_MAX + 128], work[MOVE_DIR_MAX + 160];
    if (p->tree && move_export_tree_job(a, id, &r, shared, p, &job, dir, snap, work, err) < 0)
        return -1;
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "move %s: pipe: %s", id, strerror(errno));
    job.fd = pp[1];
    carry_pipe_widen(pp[1]);
    pthread_t t;
    if (pthread_create(&t, NULL, export_thread, &job) != 0) {
        close(pp[0]);
        close(pp[1]);
        return err_set(err, ERR_INTERNAL, "move %s: starting a thread", id);
    }
    bool compressed = false;
    uint64_t sent = 0;
    gb_err enc = GB_ERR_INIT;
    /* The tree way skips inside tar's stream itself (carry_tree_export). */
    int rc = move_zstd_encode_to(pp[0], sink, ctx, a->cfg.move_compress, p->tree ? 0 : p->offset,
                                 &compressed, &sent, &enc);
    close(pp[0]); /* an export still writing stops with EPIPE */
    pthread_join(t, NULL);
    if (rc < 0 && enc.code == ERR_CONFLICT) {
        *err = enc;
        return -1;
    }
    if (job.rc < 0) {
        *err = job.err;
        return -1;
    }
    if (rc < 0) {
        *err = enc;
        return -1;
    }
    /* A resumed pre-copy: what changed since its first try began goes in
     * the final stream; without a snapshot that says so, all of it does. */
    gb_err back = GB_ERR_INIT;
    if (p->tree && p->pre && p->offset > 0 &&
        carry_tree_snapshot_backdate(snap, &job.began, &back) < 0) {
        log_warn("move %s: part %u goes whole after the stop: %s", id, p->part, back.msg);
        unlink(snap);
    }
    if (p->tree)
        log_info("move %s: sent part %u (%s, %s%s) from byte %llu: %llu bytes (%s)", id, p->part,
                 dir, p->pre ? "pre-copy while it runs" : "final",
                 job.snapshot_in ? ", what changed since the pre-copy" : "",
                 (unsigned long long)p->offset, (unsigned long long)sent,
                 compressed ? "zstd" : "not compressed");
    else
        log_info("move %s: sent %llu bytes from byte %llu (%llu bytes of file data in the tar, "
                 "%s)",
                 id, (unsigned long long)sent, (unsigned long long)p->offset,
                 (unsigned long long)job.st.bytes, compressed ? "zstd" : "not compressed");
    return 0;
}
