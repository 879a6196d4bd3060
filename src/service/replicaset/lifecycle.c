/*
 * lifecycle.c - stop, pause, continue and delete.
 *
 * Each runs under the set's name lock, checks the lifecycle table
 * (replicaset/record.h), does the Docker step, then commits the new record. What
 * the set gives back goes to the pools only after the store says it no
 * longer holds it, so a card is never free in memory while the store still
 * gives it to someone, and is given back exactly once: the record that
 * listed it is replaced by one that does not.
 *
 * Stop and delete go through the operation journal (journal.h), steps:
 *   stop:   begin (the record names the operation), container-stopped,
 *           committed (record stopped, holdings moved to lastGpus/lastPorts)
 *   delete: begin, container-removed, committed (record deleted or purged)
 * A crash part way is finished at the next start (replicaset_stop_resume,
 * replicaset_delete_resume): the user asked for the set to stop or go, and both
 * Docker steps are safe to repeat. A Docker failure at the first step
 * undoes the operation (nothing changed) and is answered as before.
 */
#include "service/replicaset/replicaset.h"

#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/ops_timer.h"
#include "service/namelock.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"

/* What one stop or delete works with: the steps' context (engine.h). */
typedef struct replicaset_lc {
    app *a;
    replicaset_record *r; /* the record naming the operation */
} replicaset_lc;

static int replicaset_stop_container(void *ctx, gb_err *err)
{
    replicaset_lc *c = ctx;
    if (replicaset_container_stop(c->a, c->r->container_name, err) < 0 &&
        err->code != ERR_NOT_FOUND) {
        err->code = ERR_STOP_FAILED;
        return err_prefix(err, "stopping %s", c->r->container_name);
    }
    return 0;
}

static int replicaset_delete_container(void *ctx, gb_err *err)
{
    replicaset_lc *c = ctx;
    replicaset_logs_keep(c->a, c->r->name, c->r->version, c->r->container_name);
    if (docker_container_remove(c->a->docker, c->r->container_name, true, err) < 0) {
        err->code = ERR_DELETE_FAILED;
        return err_prefix(err, "removing container %s", c->r->container_name);
    }
    replicaset_container_forget(c->a, c->r->container_name);
    return 0;
}

/* Neither goes back: a container that could not be stopped or removed is
 * left as it was, and the operation undone (replicaset_op_abandon). */
static const op_step_def replicaset_stop_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},
    {OP_STEP_CONTAINER_STOPPED, replicaset_stop_container, NULL},
    {OP_STEP_COMMITTED, NULL, NULL},
};
static const op_step_def replicaset_delete_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},
    {OP_STEP_CONTAINER_REMOVED, replicaset_delete_container, NULL},
    {OP_STEP_COMMITTED, NULL, NULL},
};

static json_t *replicaset_state_answer(const replicaset_record *r)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:o, s:o}", "name", r->name, "state",
                     replicaset_state_name(r->state), "containerName", r->container_name, "version",
                     r->version, "gpus", replicaset_record_gpus_json(r), "ports",
                     replicaset_record_ports_json(r));
}

/* The record that gives back held's GPUs and ports was not written. When
 * the store did not answer, it may have been all the same: the pools keep
 * them until replicaset/doubt.c knows (held names the operation, so if it had not
 * landed the operation is finished later). Either way the caller gets an
 * error. */
static int replicaset_release_failed(app *a, const replicaset_record *held, gb_err *err,
                                     const char *doing)
{
    if (err && err->code == ERR_STORE_UNAVAILABLE) {
        replicaset_doubt_hold(a, RS_DOUBT_RELEASE, held, NULL);
        return err_prefix(err,
                          "%s replica set '%s': its container is %s, but the store did not "
                          "confirm the record; gpuboxd settles it once the store answers (try "
                          "again then)",
                          doing, held->name,
                          strcmp(doing, "stopping") == 0 ? "stopped" : "removed");
    }
    return err_prefix(err, "%s %s", doing, held->name);
}

/* The first Docker step failed: the record names no operation again, and
 * the operation is undone; nothing else changed. */
static void replicaset_op_abandon(app *a, replicaset_record *r, journal_op *op, const char *why)
{
    gb_err e = GB_ERR_INIT;
    if (op_close(a, op, JOURNAL_UNDONE, why, r, NULL, 0, &e) < 0)
        log_warn("replica set %s: could not record that %s was undone: %s", r->name,
                 journal_kind_name(op->kind), e.msg);
}

/* begin, with r as it is now (before naming op). */
static int replicaset_op_begin(app *a, replicaset_record *r, journal_op *op, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record before = {0};
    replicaset_record_copy(r, &before);
    return op_begin(a, op, r, &before, NULL, 0, err);
}

/* Stop's or delete's Docker step, from wherever op got to (k: its kind);
 * held gets r as it is then, to give back what it holds once the last
 * transaction lands. A Docker failure undoes the operation. */
static int replicaset_lc_forward(app *a, const op_kind *k, journal_op *op, replicaset_record *r,
                                 replicaset_record *held, gb_err *err)
{
    replicaset_lc c = {.a = a, .r = r};
    int fwd = op_forward(a, k, op, &c, err);
    if (fwd == OP_FORWARD_WORK_FAILED)
        replicaset_op_abandon(a, r, op, err->msg);
    if (fwd < 0)
        return -1;
    replicaset_record_copy(r, held);
    return 0;
}

/* Stop from wherever op got to; r is the record naming op. */
static int replicaset_stop_run(app *a, journal_op *op, replicaset_record *r, json_t **out,
                               gb_err *err)
{
    /* The record to save holds nothing and remembers what it held, for a
     * restart on the same cards; `held` keeps the list to give back. */
    _cleanup_(replicaset_record_free) replicaset_record held = {0};
    if (replicaset_lc_forward(a, &replicaset_op_stop, op, r, &held, err) < 0)
        return -1;
    r->state = RS_STATE_STOPPED;
    const char *reason = json_string_value(json_object_get(op->data, "reason"));
    const char *detail = json_string_value(json_object_get(op->data, "detail"));
    snprintf(r->stop_reason, sizeof(r->stop_reason), "%s", reason ? reason : "request");
    snprintf(r->stop_detail, sizeof(r->stop_detail), "%s", detail ? detail : "");
    r->stopped_at[0] = '\0'; /* replicaset_record_save stamps it */
    replicaset_record_remember_holdings(r);
    if (op_close(a, op, JOURNAL_DONE, NULL, r, NULL, 0, err) < 0)
        return replicaset_release_failed(a, &held, err, "stopping");
    replicaset_alloc_give_back(a, &held);
    log_info("replica set %s: stopped; gave back %zu GPU(s) and %zu port(s)", r->name, held.ngpus,
             held.nports);
    if (out) {
        *out = replicaset_state_answer(r);
        json_object_set_new(*out, "released",
                            json_pack("{s:o, s:o}", "gpus", replicaset_record_gpus_json(&held),
                                      "ports", replicaset_record_ports_json(&held)));
    }
    return 0;
}

int replicaset_stop(app *a, const char *name, json_t **out, gb_err *err)
{
    return replicaset_stop_because(a, name, "request", "stopped on request", out, err);
}

int replicaset_stop_because(app *a, const char *name, const char *reason, const char *detail,
                            json_t **out, gb_err *err)
{
    OPS_TIMED(a, "stop", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 ||
        replicaset_lifecycle_check(RS_OP_STOP, &r, err) < 0)
        return -1;
    journal_op op = {0};
    if (op_init(&op, &replicaset_op_stop, name,
                json_pack("{s:s, s:s}", "reason", reason, "detail", detail ? detail : ""), err) < 0)
        return -1;
    int rc =
        replicaset_op_begin(a, &r, &op, err) < 0 ? -1 : replicaset_stop_run(a, &op, &r, out, err);
    journal_op_free(&op);
    return rc;
}

typedef int (*replicaset_run_fn)(app *a, journal_op *op, replicaset_record *r, json_t **out,
                                 gb_err *err);

/* Resume with run on a copy of r (the record naming op); nobody waits for
 * an answer. */
static int replicaset_resume_with(app *a, journal_op *op, const replicaset_record *r,
                                  replicaset_run_fn run, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record cur = {0};
    replicaset_record_copy(r, &cur);
    return run(a, op, &cur, NULL, err);
}

int replicaset_stop_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err)
{
    return replicaset_resume_with(a, op, r, replicaset_stop_run, err);
}

int replicaset_pause(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "pause", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 ||
        replicaset_lifecycle_check(RS_OP_PAUSE, &r, err) < 0)
        return -1;
    if (replicaset_container_stop(a, r.container_name, err) < 0) {
        err->code = ERR_PAUSE_FAILED;
        return err_prefix(err, "pausing %s", r.container_name);
    }
    r.state = RS_STATE_PAUSED;
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0)
        return err_prefix(err, "pausing %s", name);
    log_info("replica set %s: paused, keeping its GPUs and ports", name);
    *out = replicaset_state_answer(&r);
    return 0;
}

int replicaset_continue_locked(app *a, replicaset_record *r, json_t **out, gb_err *err)
{
    if (replicaset_container_start(a, r, err) < 0) {
        if (err->code == ERR_NOT_FOUND)
            err_set(err, ERR_CONTINUE_FAILED,
                    "container %s is missing from Docker (removed by hand?); delete the set or "
                    "stop and restart it",
                    r->container_name);
        else
            err->code = ERR_CONTINUE_FAILED;
        return err_prefix(err, "continuing %s", r->name);
    }
    r->state = RS_STATE_RUNNING;
    if (replicaset_record_save(a, r, NULL, 0, err) < 0)
        return err_prefix(err, "continuing %s", r->name);
    log_info("replica set %s: continued", r->name);
    *out = replicaset_state_answer(r);
    replicaset_ssh_after_start(a, r, NULL, *out);
    return 0;
}

int replicaset_continue(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "continue", out, err);
    if (a->fleet && move_group_check_free(a, name, err) < 0) /* its group moves it */
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 ||
        replicaset_lifecycle_check(RS_OP_CONTINUE, &r, err) < 0)
        return -1;
    return replicaset_continue_locked(a, &r, out, err);
}

/* The record and every history entry go, with op (may be NULL) done, in
 * one transaction, so the name starts afresh. */
static int replicaset_purge(app *a, replicaset_record *r, journal_op *op, gb_err *err)
{
    char key[STORE_KEY_MAX], prefix[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    keys_replicaset_history_prefix(prefix, sizeof(prefix), r->name);
    store_op ops[3] = {{.kind = STORE_OP_DELETE, .key = key},
                       {.kind = STORE_OP_DELETE_PREFIX, .key = prefix}};
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    int landed = op_close_txn(a, op, JOURNAL_DONE, NULL, r, &cmp, ops, 2, err);
    if (landed < 0)
        return -1;
    if (!landed)
        return err_set(err, ERR_CONFLICT, "replica set %s changed meanwhile; try again", r->name);
    replicaset_logs_forget(a, r->name);
    return 0;
}

/* Delete from wherever op got to; r is the record naming op. */
static int replicaset_delete_run(app *a, journal_op *op, replicaset_record *r, json_t **out,
                                 gb_err *err)
{
    bool purge = json_is_true(json_object_get(op->data, "purge"));
    _cleanup_(replicaset_record_free) replicaset_record held = {0};
    if (replicaset_lc_forward(a, &replicaset_op_delete, op, r, &held, err) < 0)
        return -1;
    int rc;
    if (purge) {
        rc = replicaset_purge(a, r, op, err);
    } else {
        r->state = RS_STATE_DELETED;
        json_decref(r->pending_spec); /* a change for a start that will not come */
        r->pending_spec = NULL;
        json_decref(r->queue); /* a queued restart leaves the queue */
        r->queue = NULL;
        replicaset_record_clear_holdings(r);
        replicaset_record_forget_last(r);
        rc = op_close(a, op, JOURNAL_DONE, NULL, r, NULL, 0, err);
    }
    if (rc < 0)
        return replicaset_release_failed(a, &held, err, "deleting");
    replicaset_alloc_give_back(a, &held);
    log_info("replica set %s: deleted%s; gave back %zu GPU(s) and %zu port(s)", r->name,
             purge ? " and purged its history" : "", held.ngpus, held.nports);
    replicaset_network_release(a, r->owner);
    if (out)
        *out = json_pack("{s:s, s:b, s:{s:o, s:o}}", "name", r->name, "purged", purge, "released",
                         "gpus", replicaset_record_gpus_json(&held), "ports",
                         replicaset_record_ports_json(&held));
    return 0;
}

int replicaset_delete(app *a, const char *name, bool purge, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "delete", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0)
        return -1;
    if (purge && r.state == RS_STATE_DELETED) {
        /* A deleted set holds nothing and has no container: one transaction. */
        if (replicaset_purge(a, &r, NULL, err) < 0)
            return err_prefix(err, "deleting %s", name);
        log_info("replica set %s: purged its history", name);
        *out = json_pack("{s:s, s:b, s:{s:[], s:[]}}", "name", name, "purged", true, "released",
                         "gpus", "ports");
        return 0;
    }
    if (r.state == RS_STATE_QUEUED && !r.container_name[0]) /* a queued create: one write */
        return replicaset_cancel_queued(a, &r, purge, out, err);
    /* Deleting a deleted set again is "not found". */
    if (replicaset_lifecycle_check(RS_OP_DELETE, &r, err) < 0)
        return -1;
    journal_op op = {0};
    if (op_init(&op, &replicaset_op_delete, name, json_pack("{s:b}", "purge", purge), err) < 0)
        return -1;
    int rc =
        replicaset_op_begin(a, &r, &op, err) < 0 ? -1 : replicaset_delete_run(a, &op, &r, out, err);
    journal_op_free(&op);
    return rc;
}

int replicaset_delete_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err)
{
    return replicaset_resume_with(a, op, r, replicaset_delete_run, err);
}

/* Forward: the record names the operation; the container is stopped; the record says stopped, its
 * holdings moved to lastGpus/lastPorts, and the pools get them back. Back: only when the container
 * cannot be stopped: the record names no operation again. */
const op_kind replicaset_op_stop = {
    .name = "stop",
    .journalled = true,
    .kind = JOURNAL_STOP,
    OP_STEPS(replicaset_stop_steps),
    .resume = replicaset_stop_resume,
};

/* Forward: the record names the operation; the container is removed; the record says deleted (or
 * it and its history go, purging), and the pools get its holdings back. Back: only when the
 * container cannot be removed: the record names no operation again. */
const op_kind replicaset_op_delete = {
    .name = "delete",
    .journalled = true,
    .kind = JOURNAL_DELETE,
    OP_STEPS(replicaset_delete_steps),
    .resume = replicaset_delete_resume,
};
