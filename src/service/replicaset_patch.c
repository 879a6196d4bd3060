/*
 * replicaset_patch.c - the operations that give a replica set a new
 * version, keeping its system disk: patch, rollback, and restart of a
 * stopped set (which needs a new version only when its cards or ports were
 * taken meanwhile).
 *
 * Each checks what it can before anything is taken (the state, the new
 * spec, the binds, that the old container exists to carry from), lets
 * rs_alloc_next take only the difference from the pools, and hands the rest
 * to rs_version_change (replicaset_version.c), which runs it through the
 * journal.
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
#include "service/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/store_json.h"
#include "service/metrics.h"
#include "service/namelock.h"
#include "service/rs_internal.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

static const char *const rs_restart_same_steps[] = {OP_STEP_BEGIN, OP_STEP_STARTED,
                                                    OP_STEP_COMMITTED};

/* The old container must exist: its system disk is what a new version
 * carries. code is the kind's envelope code. */
static int rs_check_container(app *a, const rs_record *r, int code, gb_err *err)
{
    docker_container_state st;
    gb_err e = GB_ERR_INIT;
    if (docker_container_state_get(a->docker, r->container_name, &st, &e) == 0)
        return 0;
    if (e.code != ERR_NOT_FOUND) {
        *err = e;
        return -1;
    }
    return err_set(err, code,
                   "container %s of replica set '%s' is missing from Docker (removed by hand?), "
                   "so there is no system disk to carry; delete the set and create it again",
                   r->container_name, r->name);
}

/* Version N+1 of from, with spec (copied), in the state from's is heading
 * for: a paused set stays paused, anything else runs. */
static int rs_next_version(const rs_record *from, const rs_spec *spec, rs_record *to, gb_err *err)
{
    if (rs_record_copy(from, to) < 0)
        return err_set(err, ERR_INTERNAL, "out of memory");
    rs_spec_free(&to->spec);
    if (rs_spec_copy(spec, &to->spec) < 0)
        return err_set(err, ERR_INTERNAL, "out of memory");
    to->version = from->version + 1;
    snprintf(to->container_name, sizeof(to->container_name), "%s-%d", from->name, to->version);
    to->container_id[0] = '\0';
    to->operation[0] = '\0';
    to->state = from->state == RS_STATE_PAUSED ? RS_STATE_PAUSED : RS_STATE_RUNNING;
    return 0;
}

/* The common tail of patch and rollback: binds checked, the difference
 * taken, the change run. */
static int rs_change_to_spec(app *a, const op_kind *kind, const rs_record *r, const rs_spec *spec,
                             const char *reason, json_t **out, gb_err *err)
{
    int code = kind == &rs_op_rollback ? ERR_ROLLBACK_FAILED : ERR_PATCH_FAILED;
    _cleanup_(binds_resolved_free) binds_resolved binds = {0};
    _cleanup_(rs_record_free) rs_record to = {0};
    bool swapped = false;
    if (rs_check_container(a, r, code, err) < 0 || binds_resolve(a, spec, &binds, err) < 0 ||
        rs_next_version(r, spec, &to, err) < 0 || rs_alloc_next(a, r, &to, &swapped, err) < 0)
        return -1;
    return rs_version_change(a, kind, r, &to, swapped, reason, out, err);
}

int replicaset_patch(app *a, const char *name, const json_t *patch, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "patch", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    _cleanup_(rs_spec_free) rs_spec spec = {0};
    bool changed = false;
    if (rs_load_settled(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_PATCH, &r, err) < 0 ||
        rs_spec_patch(&r.spec, patch, &spec, &changed, err) < 0)
        return -1;
    if (!changed) {
        *out =
            json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:b}", "name", r.container_name,
                      "replicaSetName", name, "containerName", r.container_name, "containerId",
                      r.container_id, "version", r.version, "state", rs_state_name(r.state), "gpus",
                      rs_record_gpus_json(&r), "ports", rs_record_ports_json(&r), "changed", 0);
        return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
    }
    return rs_change_to_spec(a, &rs_op_patch, &r, &spec, "patch", out, err);
}

/* Version k's spec from the history: 1 found, 0 absent, -1 error. */
static int rs_history_spec(app *a, const char *name, long long k, rs_spec *out, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset_history(key, sizeof(key), name, (long)k);
    char what[NAME_MAX_LEN + 48];
    snprintf(what, sizeof(what), "history entry %lld of %s", k, name);
    _cleanup_json_ json_t *entry = NULL;
    int found = store_get_json(a->store, key, what, &entry, NULL, err);
    if (found <= 0)
        return found;
    if (rs_spec_from_json(json_object_get(entry, "spec"), NULL, out, err) < 0) {
        err->code = ERR_INTERNAL;
        return err_prefix(err, "history entry %lld of %s", k, name);
    }
    return 1;
}

int replicaset_rollback(app *a, const char *name, long long version, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "rollback", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    if (version < 0)
        return err_set(err, ERR_VERSION_NEGATIVE, "version is %lld; versions start at 1", version);
    if (version == 0)
        return err_set(err, ERR_INVALID_PARAMS, "version is 0; versions start at 1");
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    _cleanup_(rs_spec_free) rs_spec spec = {0};
    if (rs_load_settled(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_ROLLBACK, &r, err) < 0)
        return -1;
    if (version == r.version)
        return err_set(err, ERR_NO_NEED_ROLLBACK,
                       "replica set '%s' already runs version %lld (%s); no need to roll back",
                       name, version, r.container_name);
    int found = version > r.version ? 0 : rs_history_spec(a, name, version, &spec, err);
    if (found < 0)
        return -1;
    if (!found)
        return err_set(err, ERR_NOT_FOUND,
                       "replica set '%s' has no version %lld (its versions are 1 to %d; GET "
                       "its history)",
                       name, version, r.version);
    /* A system disk records changes against one image. */
    if (strcmp(spec.image, r.spec.image) != 0)
        return err_set(err, ERR_ROLLBACK_FAILED,
                       "version %lld ran image %s, version %d runs %s; the system disk can only "
                       "be carried between containers of one image",
                       version, spec.image, r.version, r.spec.image);
    char reason[48];
    snprintf(reason, sizeof(reason), "rollback to %lld", version);
    return rs_change_to_spec(a, &rs_op_rollback, &r, &spec, reason, out, err);
}

static json_t *rs_restart_answer(const rs_record *r, bool same, const char *op_id)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:b, s:s?}", "name",
                     r->container_name, "replicaSetName", r->name, "containerName",
                     r->container_name, "containerId", r->container_id, "version", r->version,
                     "state", rs_state_name(r->state), "gpus", rs_record_gpus_json(r), "ports",
                     rs_record_ports_json(r), "sameContainer", same, "operationId", op_id);
}

/* Same cards, from wherever op got to; r names op and holds the cards. */
static int rs_restart_same_settle(app *a, journal_op *op, rs_record *r, gb_err *err)
{
    if (!journal_step_done(op, OP_STEP_STARTED)) {
        if (docker_container_start(a->docker, r->container_name, err) < 0) {
            gb_err e = *err;
            _cleanup_(rs_record_free) rs_record held = {0};
            if (rs_record_copy(r, &held) < 0)
                return err_set(err, ERR_INTERNAL, "out of memory");
            rs_record_clear_holdings(r);
            if (op_close(a, op, JOURNAL_UNDONE, e.msg, r, NULL, 0, err) < 0)
                return -1;
            rs_alloc_give_back(a, &held);
            *err = e;
            err->code = ERR_RESTART_FAILED;
            return err_prefix(err, "starting %s", r->container_name);
        }
        if (op_step(a, op, OP_STEP_STARTED, err) < 0)
            return -1;
    }
    r->state = RS_STATE_RUNNING;
    rs_record_forget_last(r);
    if (op_close(a, op, JOURNAL_DONE, NULL, r, NULL, 0, err) < 0)
        return -1;
    log_info("replica set %s: restarted %s on the same %zu GPU(s) and %zu port(s)", r->name,
             r->container_name, r->ngpus, r->nports);
    return 0;
}

int rs_restart_same_resume(app *a, journal_op *op, const rs_record *r, gb_err *err)
{
    _cleanup_(rs_record_free) rs_record cur = {0};
    if (rs_record_copy(r, &cur) < 0)
        return err_set(err, ERR_INTERNAL, "out of memory");
    return rs_restart_same_settle(a, op, &cur, err);
}

/* r (stopped) now holds its last cards and ports: run the same container.
 * before is r as it was loaded. */
static int rs_restart_same(app *a, rs_record *r, const rs_record *before, json_t **out, gb_err *err)
{
    journal_op op = {0};
    if (op_init(&op, &rs_op_restart_same, r->name, json_pack("{s:s}", "mode", "same"), err) < 0) {
        rs_alloc_give_back(a, r);
        return -1;
    }
    int rc = -1;
    if (op_begin(a, &op, r, before, NULL, 0, err) < 0) {
        /* Not in doubt: nothing was recorded, the cards go straight back. */
        if (err->code != ERR_STORE_UNAVAILABLE)
            rs_alloc_give_back(a, r);
    } else {
        rc = rs_restart_same_settle(a, &op, r, err);
    }
    if (rc == 0)
        *out = rs_restart_answer(r, true, op.id);
    journal_op_free(&op);
    return rc;
}

/* A running set: its container restarted in place. */
static int rs_restart_running(app *a, rs_record *r, json_t **out, gb_err *err)
{
    if (rs_container_stop(a, r->container_name, err) < 0 ||
        docker_container_start(a->docker, r->container_name, err) < 0) {
        err->code = err->code == ERR_NOT_FOUND ? ERR_NOT_FOUND : ERR_RESTART_FAILED;
        return err_prefix(err, "restarting %s", r->container_name);
    }
    log_info("replica set %s: restarted %s", r->name, r->container_name);
    *out = rs_restart_answer(r, true, NULL);
    return 0;
}

int replicaset_restart(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "restart", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_load_settled(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_RESTART, &r, err) < 0)
        return -1;
    if (r.state == RS_STATE_PAUSED) {
        /* As continue, answered as every restart is. */
        json_t *state = NULL;
        if (rs_continue_locked(a, &r, &state, err) < 0)
            return -1;
        json_decref(state);
        *out = rs_restart_answer(&r, true, NULL);
        return 0;
    }
    if (r.state == RS_STATE_RUNNING)
        return rs_restart_running(a, &r, out, err);
    if (rs_check_container(a, &r, ERR_RESTART_FAILED, err) < 0)
        return -1;
    gb_err busy = GB_ERR_INIT;
    _cleanup_(rs_record_free) rs_record before = {0};
    if (rs_record_copy(&r, &before) < 0)
        return err_set(err, ERR_INTERNAL, "out of memory");
    if (rs_alloc_retake_last(a, &r, &busy) == 0)
        return rs_restart_same(a, &r, &before, out, err);
    log_info("replica set %s: its cards or ports were taken meanwhile (%s); restarting as a new "
             "version",
             name, busy.msg);
    _cleanup_(rs_record_free) rs_record to = {0};
    _cleanup_(binds_resolved_free) binds_resolved binds = {0};
    if (binds_resolve(a, &r.spec, &binds, err) < 0 || rs_next_version(&r, &r.spec, &to, err) < 0 ||
        rs_alloc_take_preferring_last(a, &to, err) < 0)
        return -1;
    if (rs_version_change(a, &rs_op_restart_new, &r, &to, false, "restart", out, err) < 0)
        return -1;
    json_object_set_new(*out, "sameContainer", json_false());
    return 0;
}

const op_kind rs_op_restart_same = {
    .name = "restart-same",
    .journalled = true,
    .kind = JOURNAL_RESTART,
    .mode = "same",
    .steps = rs_restart_same_steps,
    .nsteps = ARRAY_SIZE(rs_restart_same_steps),
    .forward = "a stopped set's last cards and ports taken again: the record holds them and "
               "names the operation; its container is started; the record says running",
    .back = "only when the container cannot start: the record holds nothing again and the "
            "pools get the cards back",
    .resume = rs_restart_same_resume,
};
