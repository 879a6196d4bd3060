/*
 * create.c - creating a replica set (its container is made by
 * container.c, shared with the operations that make new versions).
 *
 * Order, so that a failure at any step gives everything back:
 *   1. checks that change nothing: name, existing record, image (pulled
 *      first as the request's pull policy says: images/images.h), binds;
 *   1b. the owner's quota reserved for what the spec asks, in the owner's
 *      ledger in the store (users_ledger_reserve, users/users.h): a create past
 *      the quota is refused here (1115), before it holds anything another
 *      user could use, however many creates arrive at once on however
 *      many nodes (the ledger's revision is compared, so only the creates
 *      the quota allows get a reservation);
 *   2. GPUs and ports from the pools (all or nothing);
 *   3. one store transaction: the record (state "creating") and the history
 *      entry, only if the name is still free; from here the store says who
 *      holds what, before any container exists;
 *   4. Docker: create and start <name>-<version>;
 *   5. the record says "running".
 * If 4 fails, the container is removed, the record goes back to what it was
 * and the pools get their GPUs and ports back. The record's transaction in
 * 3 turns the reservation of 1b into the ledger entry of what the record
 * holds (the usage changes in the same transaction as the allocation is
 * recorded); a failure before 3 lands gives the reservation back, and one
 * a crash left is removed at the next start (users_ledger_sync).
 *
 * The operation journal (journal.h) follows it: the operation is written
 * with the record in step 3 (step "record"), then "container-created", then
 * "started" with the record saying running. A crash in between leaves a
 * "creating" record and an unfinished operation; at the next start the
 * create is finished if its container exists (started, running) and undone
 * otherwise (replicaset_create_resume).
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/ops_timer.h"
#include "service/namelock.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/time.h"

/* What one create works with (engine.h). */
typedef struct replicaset_cr {
    app *a;
    replicaset_record *r;
} replicaset_cr;

/* container-created, forward. */
static int replicaset_create_make(void *ctx, gb_err *err)
{
    replicaset_cr *c = ctx;
    _cleanup_free_ char *id = NULL;
    if (replicaset_container_create(c->a, c->r, &id, err) < 0)
        return -1;
    snprintf(c->r->container_id, sizeof(c->r->container_id), "%s", id);
    return 0;
}

/* container-created, back. */
static int replicaset_create_make_back(void *ctx, gb_err *err)
{
    replicaset_cr *c = ctx;
    if (docker_container_remove(c->a->docker, c->r->container_name, true, err) < 0)
        return -1;
    replicaset_container_forget(c->a, c->r->container_name);
    return 0;
}

/* started, forward: the work before the last transaction (replicaset_create_finish). */
static int replicaset_create_start(void *ctx, gb_err *err)
{
    replicaset_cr *c = ctx;
    return replicaset_container_start(c->a, c->r, err);
}

/* The first step's back is replicaset_create_undo: the record as it was. */
static const op_step_def replicaset_create_steps[] = {
    {OP_STEP_RECORD, NULL, NULL},
    {OP_STEP_CONTAINER_CREATED, replicaset_create_make, replicaset_create_make_back},
    {OP_STEP_STARTED, replicaset_create_start, NULL},
};

/* Put the store back as it was before step 3: the deleted record of an
 * earlier life (previous_json) or no record; the new history entry goes,
 * and op (may be NULL) is written undone with why. Then the pools get r's
 * GPUs and ports back. */
static int replicaset_create_undo(app *a, const replicaset_record *r, const char *previous_json,
                                  journal_op *op, const char *why, gb_err *err)
{
    char key[STORE_KEY_MAX], hkey[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    keys_replicaset_history(hkey, sizeof(hkey), r->name, r->version);
    store_op ops[3] = {{.kind = STORE_OP_DELETE, .key = hkey}};
    ops[1] = previous_json ? (store_op){.kind = STORE_OP_PUT, .key = key, .value = previous_json}
                           : (store_op){.kind = STORE_OP_DELETE, .key = key};
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    int landed = op_close_txn(a, op, JOURNAL_UNDONE, why, r, &cmp, ops, 2, err);
    if (landed < 0) {
        /* The record still lists the GPUs until the undo is known to have
         * landed: they stay held meanwhile (replicaset/doubt.c). */
        if (err && err->code == ERR_STORE_UNAVAILABLE)
            replicaset_doubt_hold(a, RS_DOUBT_CREATE_UNDO, r, previous_json);
        return -1;
    }
    if (!landed)
        return err_set(err, ERR_CONFLICT, "replica set %s changed meanwhile", r->name);
    replicaset_alloc_give_back(a, r);
    return 0;
}

/* The record says running, and the operation (may be NULL) is done. */
static int replicaset_create_finish(app *a, replicaset_record *r, journal_op *op, gb_err *err)
{
    r->state = RS_STATE_RUNNING;
    if (op)
        journal_mark(op, OP_STEP_CONTAINER_CREATED);
    return op_close(a, op, JOURNAL_DONE, NULL, r, NULL, 0, err);
}

static json_t *replicaset_create_answer(const replicaset_record *r, const char *op_id)
{
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:s}", "name", r->container_name,
                  "replicaSetName", r->name, "containerName", r->container_name, "containerId",
                  r->container_id, "version", r->version, "gpus", replicaset_record_gpus_json(r),
                  "gpuShares", replicaset_record_gpu_shares_json(r), "ports",
                  replicaset_record_ports_json(r), "operationId", op_id);
    if (j) {
        json_object_set_new(j, "cpuset", replicaset_record_cpuset_json(r)); /* docs/cpus.md */
        json_object_set_new(j, "gpuCores", replicaset_record_gpu_cores_json(r));
    }
    return j;
}

/* Step 1: what must hold before anything is taken. *previous gets the JSON
 * of a deleted earlier life (NULL if none), whose versions r continues. */
static int replicaset_create_check(app *a, replicaset_record *r, const replicaset_spec *spec,
                                   const replicaset_create_image *image, int64_t queued_rev,
                                   char **previous, gb_err *err)
{
    if (replicaset_doubt_resolve(a, r->name, err) < 0)
        return -1;
    replicaset_record old = {0};
    int found = replicaset_record_load(a->store, r->name, &old, err);
    if (found < 0)
        return -1;
    if (found && !users_caller_sees(old.owner)) {
        /* Someone else's, live or deleted and not purged: the name is
         * taken, and that is all this caller learns. */
        replicaset_record_free(&old);
        return err_set(err, ERR_EXISTS, "replica set '%s' already exists; pick another name",
                       r->name);
    }
    bool queued = found && old.state == RS_STATE_QUEUED;
    if (queued_rev && (!queued || old.mod_revision != queued_rev)) {
        /* The dispatcher's view is stale: cancelled, or started already. */
        replicaset_record_free(&old);
        return err_set(err, ERR_CONFLICT, "queued replica set '%s' changed meanwhile", r->name);
    }
    if (found && old.state != RS_STATE_DELETED && !(queued && queued_rev)) {
        err_set(err, ERR_EXISTS,
                "replica set '%s' already exists (%s, container %s); pick another name or "
                "delete it first",
                r->name, replicaset_state_name(old.state), old.container_name);
        replicaset_record_free(&old);
        return -1;
    }
    if (found) {
        /* A queued record comes back if the create is undone (queue/queue.h). */
        json_t *j = replicaset_record_to_json(&old);
        *previous = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        r->version = old.version + 1;
        r->mod_revision = old.mod_revision;
        replicaset_record_free(&old);
    } else {
        r->version = 1;
    }
    /* Last: a pull may take long, and a name already taken needs none. */
    return images_ensure(a, spec->image, image ? image->pull : IMAGE_PULL_MISSING,
                         image ? &image->auth : NULL, err);
}

/* Step 1b, before anything is taken from the pools: the owner's quota
 * reserved for what the spec asks (users_ledger_reserve). The record's
 * transaction checks again for anything the reservation did not count.
 * *reserved: whether there is a reservation to give back on failure. */
static int replicaset_create_quota_reserve(app *a, const replicaset_record *r, bool *reserved,
                                           gb_err *err)
{
    const replicaset_spec *s = &r->spec;
    int cards = s->gpu_count ? s->gpu_count : (int)s->ngpu_uuids;
    users_ledger_hold h = {.exists = true};
    snprintf(h.owner, sizeof(h.owner), "%s", r->owner);
    snprintf(h.name, sizeof(h.name), "%s", r->name);
    if (s->gpu_memory_mib)
        h.share_mib = (int64_t)s->gpu_memory_mib * (cards ? cards : 1);
    else if (!s->gpu_shared)
        h.cards = cards;
    h.cores = s->cpu_count > 0 ? s->cpu_count : 0;
    return users_ledger_reserve(a, &h, reserved, err);
}

void replicaset_create_quota_release(app *a, const replicaset_record *r)
{
    users_ledger_hold h = {.exists = false};
    snprintf(h.owner, sizeof(h.owner), "%s", r->owner);
    snprintf(h.name, sizeof(h.name), "%s", r->name);
    gb_err e = GB_ERR_INIT;
    if (users_ledger_release(a, &h, &e) < 0)
        log_warn("replica set %s: giving back %s's quota reservation: %s (the next start "
                 "removes it)",
                 r->name, r->owner, e.msg);
}

/* Step 3: record (state creating), history entry and operation, in one
 * transaction, only if the name is still as step 1 saw it. */
static int replicaset_create_record(app *a, replicaset_record *r, journal_op *op, gb_err *err)
{
    r->state = RS_STATE_CREATING;
    time_iso_now(r->update_time, sizeof(r->update_time));
    memcpy(r->create_time, r->update_time, sizeof(r->create_time));
    char hkey[STORE_KEY_MAX];
    keys_replicaset_history(hkey, sizeof(hkey), r->name, r->version);
    _cleanup_json_ json_t *hist = replicaset_record_history_entry(r, "create");
    _cleanup_free_ char *hist_text = json_dumps(hist, JSON_COMPACT);
    store_op put = {.kind = STORE_OP_PUT, .key = hkey, .value = hist_text};
    /* No `before`: a create in doubt is settled as a create (the caller). */
    if (op_begin(a, op, r, NULL, &put, 1, err) < 0) {
        if (err && err->code == ERR_CONFLICT)
            err_set(err, ERR_EXISTS, "replica set '%s' was just created by another request",
                    r->name);
        return -1;
    }
    return 0;
}

/* Step 4: create, record, start. On failure the container is removed. */
static int replicaset_create_container(app *a, replicaset_record *r, journal_op *op, gb_err *err)
{
    replicaset_cr c = {.a = a, .r = r};
    if (op_forward(a, &replicaset_op_create, op, &c, err) == 0)
        return 0;
    if (!journal_step_done(op, OP_STEP_CONTAINER_CREATED) && !r->container_id[0])
        return -1; /* not made */
    gb_err rm = GB_ERR_INIT;
    if (op_back(&replicaset_op_create, op, &c, &rm) < 0)
        log_warn("replica set %s: removing container %s after a failed start: %s", r->name,
                 r->container_name, rm.msg);
    return err_prefix(err, "starting container %s", r->container_name);
}

int replicaset_create(app *a, const replicaset_create_request *req, json_t **out, gb_err *err)
{
    const char *name = req->name;
    const replicaset_spec *spec = &req->spec;
    const replicaset_create_image *image = &req->image;
    OPS_TIMED(a, "create", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    _cleanup_free_ char *previous = NULL;
    snprintf(r.name, sizeof(r.name), "%s", name);
    snprintf(r.owner, sizeof(r.owner), "%s", req->owner ? req->owner : users_caller_owner());
    replicaset_spec_copy(spec, &r.spec);
    r.idle_stop_s = req->idle_stop_s;
    r.max_duration_s = req->max_duration_s;
    r.services = req->services ? json_deep_copy(req->services) : NULL;
    if (replicaset_create_check(a, &r, spec, image, req->queued_rev, &previous, err) < 0) {
        if (err && err->code == ERR_STORE_UNAVAILABLE)
            err_prefix(err, "creating replica set '%s': nothing was changed", name);
        return -1;
    }
    if (binds_check(a, spec, err) < 0)
        return -1;
    /* 1b, 2 and 3: reserve the quota, allocate, then commit record,
     * history and operation. */
    bool reserved = false;
    if (replicaset_create_quota_reserve(a, &r, &reserved, err) < 0)
        return -1;
    fault_point("quota.create.reserved"); /* a crash here: users_ledger_sync at the next start */
    snprintf(r.container_name, sizeof(r.container_name), "%s-%d", name, r.version);
    journal_op op = {0};
    if (op_init(&op, &replicaset_op_create, name, json_pack("{s:s?}", "previous", previous), err) <
        0) {
        if (reserved)
            replicaset_create_quota_release(a, &r);
        return -1;
    }
    if (replicaset_alloc_take(a, &r, err) < 0) {
        journal_op_free(&op);
        if (reserved)
            replicaset_create_quota_release(a, &r);
        return -1;
    }
    if (replicaset_create_record(a, &r, &op, err) < 0) {
        journal_op_free(&op);
        /* Landed or not, the reservation goes only while it is still one:
         * a record that landed has made it its own entry. */
        if (reserved)
            replicaset_create_quota_release(a, &r);
        if (err && err->code == ERR_STORE_UNAVAILABLE) {
            /* The record may have landed, listing these GPUs and ports:
             * they stay held until replicaset/doubt.c knows. */
            replicaset_doubt_hold(a, RS_DOUBT_CREATE, &r, previous);
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            return err_set(err, ERR_STORE_UNAVAILABLE,
                           "creating replica set '%s': the store did not confirm the record (%s); "
                           "no container was made, and gpuboxd undoes the record by itself once "
                           "the store answers (its GPUs and ports stay held until then)",
                           name, why);
        }
        replicaset_alloc_give_back(a, &r);
        return -1;
    }

    /* 4 and 5 */
    int rc = -1;
    if (replicaset_create_container(a, &r, &op, err) < 0) {
        gb_err undo = GB_ERR_INIT;
        if (replicaset_create_undo(a, &r, previous, &op, err->msg, &undo) < 0)
            log_error("replica set %s: could not undo a failed create (%s); it is settled at the "
                      "next start",
                      name, undo.msg);
        if (err && err->code != ERR_IMAGE_NOT_FOUND)
            err->code = ERR_RUN_FAILED;
    } else if (replicaset_create_finish(a, &r, &op, err) < 0) {
        /* The container runs and the store holds its allocations as
         * "creating": the journal finishes it. Say so. */
        err_prefix(err, "container %s runs, but recording it failed", r.container_name);
    } else {
        log_info("replica set %s: created version %d (%s), %zu GPU(s), %zu port(s)", name,
                 r.version, r.container_name, r.ngpus, r.nports);
        *out = replicaset_create_answer(&r, op.id);
        replicaset_ssh_after_start(a, &r, NULL, *out);
        rc = 0;
    }
    journal_op_free(&op);
    return rc;
}

/* Finish the create if its container exists (starting it), else undo it. */
static int replicaset_create_conclude(app *a, replicaset_record *r, journal_op *op,
                                      const char *previous, gb_err *err)
{
    docker_container_state st;
    if (docker_container_state_get(a->docker, r->container_name, &st, err) < 0 &&
        err->code != ERR_NOT_FOUND)
        return err_prefix(err, "asking Docker about %s", r->container_name);
    bool exists = st.exists, running = st.running;
    gb_err start = GB_ERR_INIT;
    if (exists && !running && !replicaset_volumes_ready(a, r))
        snprintf(start.msg, sizeof(start.msg), "a volume it binds is not available");
    else if (exists && (running || replicaset_container_start(a, r, &start) == 0)) {
        if (replicaset_create_finish(a, r, op, err) < 0)
            return -1;
        log_info("recover: %s: finished the create interrupted before %s ran", r->name,
                 r->container_name);
        return 0;
    }
    if (exists && docker_container_remove(a->docker, r->container_name, true, err) < 0)
        return -1;
    replicaset_container_forget(a, r->container_name);
    if (replicaset_create_undo(
            a, r, previous, op,
            exists ? start.msg : "gpuboxd stopped before the container was created", err) < 0)
        return -1;
    log_info("recover: %s: undid a create interrupted before its container ran", r->name);
    return 0;
}

int replicaset_create_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record cur = {0};
    replicaset_record_copy(r, &cur);
    const char *previous = json_string_value(json_object_get(op->data, "previous"));
    return replicaset_create_conclude(a, &cur, op, previous, err);
}

void replicaset_create_conclude_legacy(app *a, replicaset_record *r)
{
    /* No operation to say what was there before: the versions before this
     * one, if any, stay as a deleted set. */
    _cleanup_free_ char *previous = NULL;
    if (r->version > 1) {
        _cleanup_(replicaset_record_free) replicaset_record prev = {0};
        replicaset_record_copy(r, &prev);
        prev.state = RS_STATE_DELETED;
        prev.version--;
        snprintf(prev.container_name, sizeof(prev.container_name), "%s-%d", r->name, prev.version);
        replicaset_record_clear_holdings(&prev);
        _cleanup_json_ json_t *j = replicaset_record_to_json(&prev);
        previous = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (!previous)
            return;
    }
    gb_err err = GB_ERR_INIT;
    if (replicaset_create_conclude(a, r, NULL, previous, &err) < 0)
        log_warn("reconcile: %s: could not settle an interrupted create: %s", r->name, err.msg);
}

/* Forward: GPUs and ports taken; the record (creating), its history entry and the operation in one
 * transaction; the container created; started, the record running. Back: whenever the container
 * does not run: removed, the record back to what it was (the deleted earlier life or none), the
 * history entry gone, the pools get the GPUs and ports back. */
const op_kind replicaset_op_create = {
    .name = "create",
    .journalled = true,
    .kind = JOURNAL_CREATE,
    OP_STEPS(replicaset_create_steps),
    .resume = replicaset_create_resume,
};
