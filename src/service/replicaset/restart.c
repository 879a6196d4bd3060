/*
 * restart.c - restarting a replica set: a running one in place, a paused
 * one as continue, a stopped one on its last cards and ports when they
 * are still free, else as a new version on other cards (the version
 * change, version.c, kind replicaset_op_restart_new). A stopped set changed while
 * it was stopped (pendingSpec, record.h) always starts as a new version
 * with that spec.
 *
 * A restart on the same cards is its own short operation, steps:
 *   begin      the record holds lastGpus/lastPorts again and names the
 *              operation (taken from the pools just before)
 *   started    the same container started
 *   committed  the record says running, no lastGpus/lastPorts
 * A crash part way is finished at the next start (the set was asked to
 * run); a failed start undoes it (the record stopped again, holding
 * nothing, the cards back in the pools).
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <string.h>

#include "service/images/images.h"
#include "service/ops_timer.h"
#include "service/namelock.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"

/* What one restart on the same cards works with (engine.h). */
typedef struct replicaset_rs {
    app *a;
    replicaset_record *r; /* the record naming the operation, holding the cards */
} replicaset_rs;

static int replicaset_restart_start(void *ctx, gb_err *err)
{
    replicaset_rs *c = ctx;
    return replicaset_container_start(c->a, c->r, err);
}

/* A container that does not start has nothing to undo: the operation is
 * undone and the cards go back (replicaset_restart_same_run). */
static const op_step_def replicaset_restart_same_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},
    {OP_STEP_STARTED, replicaset_restart_start, NULL},
    {OP_STEP_COMMITTED, NULL, NULL},
};

static json_t *replicaset_restart_answer(const replicaset_record *r, bool same, const char *op_id)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:b, s:s?}", "name",
                     r->container_name, "replicaSetName", r->name, "containerName",
                     r->container_name, "containerId", r->container_id, "version", r->version,
                     "state", replicaset_state_name(r->state), "gpus",
                     replicaset_record_gpus_json(r), "ports", replicaset_record_ports_json(r),
                     "sameContainer", same, "operationId", op_id);
}

/* Same cards, from wherever op got to; r names op and holds the cards. */
static int replicaset_restart_same_run(app *a, journal_op *op, replicaset_record *r, gb_err *err)
{
    replicaset_rs c = {.a = a, .r = r};
    int fwd = op_forward(a, &replicaset_op_restart_same, op, &c, err);
    if (fwd == OP_FORWARD_RECORD_FAILED)
        return -1;
    if (fwd == OP_FORWARD_WORK_FAILED) {
        gb_err e = *err;
        _cleanup_(replicaset_record_free) replicaset_record held = {0};
        replicaset_record_copy(r, &held);
        replicaset_record_clear_holdings(r);
        if (op_close(a, op, JOURNAL_UNDONE, e.msg, r, NULL, 0, err) < 0)
            return -1;
        replicaset_alloc_give_back(a, &held);
        *err = e;
        err->code = ERR_RESTART_FAILED;
        return err_prefix(err, "starting %s", r->container_name);
    }
    r->state = RS_STATE_RUNNING;
    replicaset_record_forget_last(r);
    if (op_close(a, op, JOURNAL_DONE, NULL, r, NULL, 0, err) < 0)
        return -1;
    log_info("replica set %s: restarted %s on the same %zu GPU(s) and %zu port(s)", r->name,
             r->container_name, r->ngpus, r->nports);
    return 0;
}

int replicaset_restart_same_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record cur = {0};
    replicaset_record_copy(r, &cur);
    return replicaset_restart_same_run(a, op, &cur, err);
}

/* r (stopped) now holds its last cards and ports: run the same container.
 * before is r as it was loaded. */
static int replicaset_restart_same(app *a, replicaset_record *r, const replicaset_record *before,
                                   json_t **out, gb_err *err)
{
    journal_op op = {0};
    if (op_init(&op, &replicaset_op_restart_same, r->name, json_pack("{s:s}", "mode", "same"),
                err) < 0) {
        replicaset_alloc_give_back(a, r);
        return -1;
    }
    int rc = -1;
    if (op_begin(a, &op, r, before, NULL, 0, err) < 0) {
        /* Not in doubt: nothing was recorded, the cards go straight back. */
        if (err->code != ERR_STORE_UNAVAILABLE)
            replicaset_alloc_give_back(a, r);
    } else {
        rc = replicaset_restart_same_run(a, &op, r, err);
    }
    if (rc == 0) {
        *out = replicaset_restart_answer(r, true, op.id);
        replicaset_ssh_after_start(a, r, NULL, *out);
    }
    journal_op_free(&op);
    return rc;
}

/* A running set: its container restarted in place. */
static int replicaset_restart_running(app *a, replicaset_record *r, json_t **out, gb_err *err)
{
    if (replicaset_container_stop(a, r->container_name, err) < 0 ||
        replicaset_container_start(a, r, err) < 0) {
        err->code = err->code == ERR_NOT_FOUND ? ERR_NOT_FOUND : ERR_RESTART_FAILED;
        return err_prefix(err, "restarting %s", r->container_name);
    }
    log_info("replica set %s: restarted %s", r->name, r->container_name);
    *out = replicaset_restart_answer(r, true, NULL);
    replicaset_ssh_after_start(a, r, NULL, *out);
    return 0;
}

/* A start as a new version of spec (changed here), keeping the ports it
 * still holds or held last. no_gpu sets spec's cards aside (record.h,
 * gpusAside); a plain start puts back the cards set aside before, unless
 * spec asks for cards itself. */
static int replicaset_restart_new_spec(app *a, replicaset_record *r, replicaset_spec *spec,
                                       bool no_gpu, const char *reason, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *aside = NULL;
    if (no_gpu && replicaset_spec_gpu_asks(spec) && !(aside = replicaset_spec_gpu_set_aside(spec)))
        return err_set(err, ERR_INTERNAL, "out of memory");
    if (!no_gpu && r->gpus_aside && !replicaset_spec_gpu_asks(spec) &&
        replicaset_spec_gpu_put_back(spec, r->gpus_aside, err) < 0) {
        err->code = ERR_INTERNAL;
        return err_prefix(err, "the cards %s set aside", r->name);
    }
    _cleanup_(replicaset_record_free) replicaset_record to = {0};
    bool swapped = false;
    if (replicaset_version_check_container(a, r, ERR_RESTART_FAILED, err) < 0 ||
        binds_check(a, spec, err) < 0)
        return -1;
    /* A change made while stopped may name another image (patch.c). */
    if (strcmp(spec->image, r->spec.image) != 0 &&
        images_ensure(a, spec->image, IMAGE_PULL_MISSING, NULL, err) < 0)
        return -1;
    replicaset_version_next(r, spec, &to);
    if (aside) {
        json_decref(to.gpus_aside);
        to.gpus_aside = steal_ptr(&aside);
    }
    int taken = r->state == RS_STATE_STOPPED ? replicaset_alloc_take_preferring_last(a, &to, err)
                                             : replicaset_alloc_next(a, r, &to, &swapped, err);
    if (taken < 0)
        return -1;
    if (replicaset_version_change(a, &replicaset_op_restart_new, r, &to, swapped, reason, out,
                                  err) < 0)
        return -1;
    json_object_set_new(*out, "sameContainer", json_false());
    return 0;
}

/* A start that sets the cards aside or puts them back (record.h,
 * gpusAside): a new version whose spec asks for no cards, or for the ones
 * set aside. */
static int replicaset_restart_cards(app *a, replicaset_record *r, bool no_gpu, json_t **out,
                                    gb_err *err)
{
    _cleanup_(replicaset_spec_free) replicaset_spec spec = {0};
    replicaset_spec_copy(&r->spec, &spec);
    return replicaset_restart_new_spec(
        a, r, &spec, no_gpu, no_gpu ? "restart without cards" : "restart with cards", out, err);
}

/* A stopped set changed while it was stopped (record.h, pendingSpec): its
 * next version has the pending spec and takes what that asks for now. Not
 * enough free leaves it stopped, the change kept. */
static int replicaset_restart_pending(app *a, replicaset_record *r, bool no_gpu, json_t **out,
                                      gb_err *err)
{
    _cleanup_(replicaset_spec_free) replicaset_spec spec = {0};
    if (replicaset_record_next_spec(r, &spec, err) < 0 ||
        replicaset_restart_new_spec(a, r, &spec, no_gpu, "changed while stopped", out, err) < 0)
        return -1;
    json_object_set_new(*out, "pendingApplied", json_true());
    return 0;
}

int replicaset_restart(app *a, const char *name, bool no_gpu, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "restart", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    if (a->fleet && move_group_check_free(a, name, err) < 0) /* its group moves it */
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 ||
        replicaset_lifecycle_check(RS_OP_RESTART, &r, err) < 0)
        return -1;
    return replicaset_restart_locked(a, &r, no_gpu, out, err);
}

int replicaset_restart_queued(app *a, const replicaset_record *q, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "restart", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", q->name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, q->name, &r, err) < 0)
        return -1;
    if (r.state != RS_STATE_QUEUED || r.mod_revision != q->mod_revision || !r.container_name[0])
        return err_set(err, ERR_CONFLICT, "queued replica set '%s' changed meanwhile", q->name);
    /* A stopped set that waited: it starts as a stopped set does, and the
     * first write (compared against the revision just read) takes it out
     * of the queue. */
    bool no_gpu = json_is_true(json_object_get(r.queue, "noGpu"));
    r.state = RS_STATE_STOPPED;
    json_decref(r.queue);
    r.queue = NULL;
    return replicaset_restart_locked(a, &r, no_gpu, out, err);
}

int replicaset_enqueue_restart(app *a, const char *name, bool no_gpu, json_t *queue, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0)
        return -1;
    if (r.state != RS_STATE_STOPPED)
        return err_set(err, ERR_STATE_CONFLICT,
                       "cannot queue the restart of replica set '%s': it is %s; only a stopped "
                       "set waits in the queue for its cards",
                       name, replicaset_state_name(r.state));
    r.state = RS_STATE_QUEUED;
    json_decref(r.queue);
    r.queue = json_copy(queue);
    json_object_set_new(r.queue, "restart", json_true());
    json_object_set_new(r.queue, "noGpu", json_boolean(no_gpu));
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0)
        return err_prefix(err, "queueing the restart of %s", name);
    log_info("replica set %s: its restart waits in the queue", name);
    return 0;
}

int replicaset_restart_locked(app *a, replicaset_record *rp, bool no_gpu, json_t **out, gb_err *err)
{
    replicaset_record *r = rp;
    const char *name = rp->name;
    json_decref(r->queue); /* what the queue said of an earlier wait */
    r->queue = NULL;
    if (r->state == RS_STATE_STOPPED && r->pending_spec)
        return replicaset_restart_pending(a, r, no_gpu, out, err);
    /* Without cards when it has some; with them again when they are aside. */
    if (no_gpu ? replicaset_spec_gpu_asks(&r->spec) : r->gpus_aside != NULL)
        return replicaset_restart_cards(a, r, no_gpu, out, err);
    if (r->state == RS_STATE_PAUSED) {
        /* As continue, answered as every restart is. */
        json_t *state = NULL;
        if (replicaset_continue_locked(a, r, &state, err) < 0)
            return -1;
        *out = replicaset_restart_answer(r, true, NULL);
        json_t *ssh = json_object_get(state, "ssh"); /* continue started the server */
        if (ssh)
            json_object_set(*out, "ssh", ssh);
        json_decref(state);
        return 0;
    }
    if (r->state == RS_STATE_RUNNING)
        return replicaset_restart_running(a, r, out, err);
    if (replicaset_version_check_container(a, r, ERR_RESTART_FAILED, err) < 0)
        return -1;
    gb_err busy = GB_ERR_INIT;
    _cleanup_(replicaset_record_free) replicaset_record before = {0};
    replicaset_record_copy(r, &before);
    if (replicaset_alloc_retake_last(a, r, &busy) == 0)
        return replicaset_restart_same(a, r, &before, out, err);
    log_info("replica set %s: its cards or ports were taken meanwhile (%s); restarting as a new "
             "version",
             name, busy.msg);
    _cleanup_(replicaset_record_free) replicaset_record to = {0};
    if (binds_check(a, &r->spec, err) < 0)
        return -1;
    replicaset_version_next(r, &r->spec, &to);
    if (replicaset_alloc_take_preferring_last(a, &to, err) < 0)
        return -1;
    if (replicaset_version_change(a, &replicaset_op_restart_new, r, &to, false, "restart", out,
                                  err) < 0)
        return -1;
    json_object_set_new(*out, "sameContainer", json_false());
    return 0;
}

/* Forward: a stopped set's last cards and ports taken again: the record holds them and names the
 * operation; its container is started; the record says running. Back: only when the container
 * cannot start: the record holds nothing again and the pools get the cards back. */
const op_kind replicaset_op_restart_same = {
    .name = "restart-same",
    .journalled = true,
    .kind = JOURNAL_RESTART,
    .mode = "same",
    OP_STEPS(replicaset_restart_same_steps),
    .resume = replicaset_restart_same_resume,
};
