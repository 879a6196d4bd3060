/*
 * queued.c - a replica set that waits in the queue (service/queue/queue.h
 * decides when it starts; this file owns its record).
 *
 * A queued set is a record in state "queued" (record.h): its spec, owner
 * and run limits, no holdings, no container, and a "queue" object
 * {priority, submitTime, submitMs, timeoutSeconds}. Its version is its
 * earlier life's (0 for a new name), so the create that starts it makes
 * the next one. Every change is one compare-and-swap on the record:
 *   enqueue  absent or deleted -> queued
 *   start    queued -> creating, through replicaset_create with the
 *            queued record's revision (create.c): of two dispatchers, or a
 *            dispatcher and a cancel, one wins; an undone create (a failed
 *            start, or a crash before its container ran) puts the queued
 *            record back, so the request is never lost
 *   cancel   queued -> gone (DELETE): deleted as its earlier life was, or
 *            no record when it had none
 *   drop     queued -> deleted with queue.dropped {reason, at, detail}
 *            (queueTimeout, or a start that failed for a reason waiting
 *            does not cure): GET still answers it, saying why; a queued
 *            restart goes back to stopped, its container kept.
 * A queued restart (PATCH .../restart with queue) is a stopped set whose
 * state says queued: it keeps its container, and its start is the
 * stopped set's restart (restart.c: replicaset_restart_queued).
 *
 * A waiting move (POST .../move with queue, in a fleet) is not a state:
 * the set stays running, paused or stopped where it is, its queue object
 * saying move: true. The fleet's dispatcher writes queue.assigned (the
 * node it goes to, compared against the record's revision), this node
 * moves it there (replicaset_move, journalled), and the node it lands on
 * ends the wait (its record there says assigned is itself). A restart of
 * the set (restart.c) ends the wait too; a delete takes it with the set.
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "service/namelock.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

int replicaset_enqueue(app *a, const replicaset_create_request *req, json_t *queue, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", req->name);
    _cleanup_(replicaset_record_free) replicaset_record old = {0};
    int found = replicaset_record_load(a->store, req->name, &old, err);
    if (found < 0)
        return err_prefix(err, "queueing replica set '%s'", req->name);
    if (found && (!users_caller_sees(old.owner) ||
                  (old.state != RS_STATE_DELETED && !replicaset_record_is_tombstone(&old))))
        return err_set(err, ERR_EXISTS, "replica set '%s' already exists; pick another name",
                       req->name);
    /* What a create checks before it takes anything: the image (pulled
     * now, with the request's credentials, so the start needs none) and
     * the binds. */
    if (images_ensure(a, req->spec.image, req->image.pull, &req->image.auth, err) < 0 ||
        binds_check(a, &req->spec, err) < 0)
        return -1;
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    snprintf(r.name, sizeof(r.name), "%s", req->name);
    snprintf(r.owner, sizeof(r.owner), "%s", users_caller_owner());
    replicaset_spec_copy(&req->spec, &r.spec);
    r.idle_stop_s = req->idle_stop_s;
    r.max_duration_s = req->max_duration_s;
    r.state = RS_STATE_QUEUED;
    r.version = found ? old.version : 0;
    r.mod_revision = found ? old.mod_revision : 0;
    r.queue = json_incref(queue);
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0) {
        if (err && err->code == ERR_CONFLICT)
            err_set(err, ERR_EXISTS, "replica set '%s' was just created by another request",
                    req->name);
        return -1;
    }
    log_info("replica set %s: queued for %s", r.name, r.owner);
    return 0;
}

int replicaset_start_queued(app *a, const replicaset_record *q, json_t **out, gb_err *err)
{
    replicaset_create_request req = {
        .name = q->name,
        .spec = q->spec, /* borrowed: replicaset_create copies it */
        .idle_stop_s = q->idle_stop_s,
        .max_duration_s = q->max_duration_s,
        .image = {.pull = IMAGE_PULL_MISSING},
        .owner = q->owner,
        .queued_rev = q->mod_revision,
    };
    return replicaset_create(a, &req, out, err);
}

/* Load name under its lock, as the caller saw it (rev 0: any revision). */
static int replicaset_queued_load(app *a, const char *name, int64_t rev, replicaset_record *r,
                                  gb_err *err)
{
    int found = replicaset_record_load(a->store, name, r, err);
    if (found < 0)
        return -1;
    if (!found || r->state != RS_STATE_QUEUED || (rev && r->mod_revision != rev))
        return err_set(err, ERR_CONFLICT, "queued replica set '%s' changed meanwhile", name);
    return 0;
}

void replicaset_queued_mark_dropped(replicaset_record *r, const char *reason, const char *detail)
{
    char at[RS_TIME_MAX];
    time_iso_now(at, sizeof(at));
    json_t *dropped =
        json_pack("{s:s, s:s, s:s}", "reason", reason, "at", at, "detail", detail ? detail : "");
    if (replicaset_move_waits(r)) {
        /* A move that waited: the set is as it was; its record says why
         * the move did not happen. */
        json_t *q = r->queue;
        r->queue = json_pack("{s:b, s:O?, s:o}", "moveDropped", true, "submitTime",
                             json_object_get(q, "submitTime"), "dropped", dropped);
        json_decref(q);
        return;
    }
    json_object_set_new(r->queue, "dropped", dropped);
    /* A queued create leaves a deleted record saying why; a queued restart
     * is the stopped set it was, its container kept. */
    r->state = r->container_name[0] ? RS_STATE_STOPPED : RS_STATE_DELETED;
}

int replicaset_drop_queued(app *a, const char *name, int64_t rev, const char *reason,
                           const char *detail, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_queued_load(a, name, rev, &r, err) < 0)
        return -1;
    replicaset_queued_mark_dropped(&r, reason, detail);
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0)
        return -1;
    log_info("replica set %s: dropped from the queue (%s%s%s)", name, reason, detail ? ": " : "",
             detail ? detail : "");
    return 0;
}

int replicaset_cancel_queued(app *a, replicaset_record *r, bool purge, json_t **out, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    int rc;
    if (purge || r->version == 0) {
        /* No earlier life: the name goes (its history, if purging, too). */
        char prefix[STORE_KEY_MAX];
        keys_replicaset_history_prefix(prefix, sizeof(prefix), r->name);
        store_op ops[2] = {{.kind = STORE_OP_DELETE, .key = key},
                           {.kind = STORE_OP_DELETE_PREFIX, .key = prefix}};
        bool landed = false;
        rc = replicaset_record_remove_txn(a, r, &cmp, 1, ops, purge ? 2 : 1, &landed, err);
        if (rc == 0 && !landed)
            rc = err_set(err, ERR_CONFLICT, "replica set %s changed meanwhile; try again", r->name);
    } else {
        r->state = RS_STATE_DELETED;
        json_decref(r->queue);
        r->queue = NULL;
        rc = replicaset_record_save(a, r, NULL, 0, err);
    }
    if (rc < 0)
        return err_prefix(err, "cancelling queued replica set '%s'", r->name);
    log_info("replica set %s: cancelled while queued", r->name);
    *out = json_pack("{s:s, s:b, s:b, s:{s:[], s:[]}}", "name", r->name, "purged", purge,
                     "cancelled", true, "released", "gpus", "ports");
    return 0;
}

/* ---- a waiting move ---- */

bool replicaset_move_waits(const replicaset_record *r)
{
    return r->queue && json_is_true(json_object_get(r->queue, "move")) &&
           (r->state == RS_STATE_RUNNING || r->state == RS_STATE_PAUSED ||
            r->state == RS_STATE_STOPPED);
}

int replicaset_enqueue_move(app *a, const char *name, json_t *queue, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0)
        return -1;
    if (r.state != RS_STATE_RUNNING && r.state != RS_STATE_PAUSED && r.state != RS_STATE_STOPPED)
        return err_set(err, ERR_STATE_CONFLICT,
                       "replica set '%s' is %s; a move waits in the queue for a running, paused "
                       "or stopped set",
                       name, replicaset_state_name(r.state));
    if (replicaset_move_waits(&r))
        return err_set(err, ERR_EXISTS,
                       "the move of replica set '%s' waits in the queue already; cancel it with "
                       "DELETE /api/v1/queue/%s first",
                       name, name);
    json_decref(r.queue);
    r.queue = json_copy(queue);
    json_object_set_new(r.queue, "move", json_true());
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0)
        return err_prefix(err, "queueing the move of %s", name);
    log_info("replica set %s: its move waits in the queue", name);
    return 0;
}

int replicaset_move_wait_end(app *a, const char *name, int64_t rev, const char *reason,
                             const char *detail, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    int found = replicaset_record_load(a->store, name, &r, err);
    if (found < 0)
        return -1;
    if (!found || !replicaset_move_waits(&r) || (rev && r.mod_revision != rev))
        return err_set(err, ERR_CONFLICT, "the move of replica set '%s' does not wait (any longer)",
                       name);
    if (reason) {
        replicaset_queued_mark_dropped(&r, reason, detail);
    } else {
        json_decref(r.queue);
        r.queue = NULL;
    }
    if (replicaset_record_save(a, &r, NULL, 0, err) < 0)
        return err_prefix(err, "ending the wait of %s's move", name);
    log_info("replica set %s: its move waits no longer (%s%s%s)", name, reason ? reason : "done",
             detail ? ": " : "", detail ? detail : "");
    return 0;
}
