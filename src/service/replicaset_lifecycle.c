/*
 * replicaset_lifecycle.c - stop, pause, continue and delete.
 *
 * Each runs under the set's name lock, checks the lifecycle table
 * (rs_record.h), does the Docker step, then commits the new record. What
 * the set gives back goes to the pools only after the store says it no
 * longer holds it, so a card is never free in memory while the store still
 * gives it to someone, and is given back exactly once: the record that
 * listed it is replaced by one that does not.
 */
#include "service/replicaset.h"

#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/metrics.h"
#include "service/namelock.h"
#include "service/rs_gpu_env.h"
#include "service/rs_internal.h"
#include "util/cleanup.h"
#include "util/log.h"

static int rs_load_existing(app *a, const char *name, rs_record *r, gb_err *err)
{
    if (name_check_replicaset(name, err) < 0 || rs_settle_name(a, name, err) < 0)
        return -1;
    int found = rs_record_load(a->store, name, r, err);
    if (found < 0) {
        if (err && err->code == ERR_STORE_UNAVAILABLE)
            err_prefix(err, "replica set '%s': nothing was changed", name);
        return -1;
    }
    if (!found || rs_record_is_tombstone(r)) {
        rs_record_free(r);
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    }
    return 0;
}

static json_t *rs_state_answer(const rs_record *r)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:o, s:o}", "name", r->name, "state",
                     rs_state_name(r->state), "containerName", r->container_name, "version",
                     r->version, "gpus", rs_record_gpus_json(r), "ports", rs_record_ports_json(r));
}

/* The record that gives back held's GPUs and ports was not written. When
 * the store did not answer, it may have been all the same: the pools keep
 * them until rs_settle.c knows. Either way the caller gets an error. */
static int rs_release_failed(app *a, const rs_record *held, gb_err *err, const char *doing)
{
    if (err && err->code == ERR_STORE_UNAVAILABLE) {
        rs_settle_hold(a, RS_DOUBT_RELEASE, held, NULL);
        return err_prefix(err,
                          "%s replica set '%s': its container is %s, but the store did not "
                          "confirm the record; gpuboxd settles it once the store answers (try "
                          "again then)",
                          doing, held->name,
                          strcmp(doing, "stopping") == 0 ? "stopped" : "removed");
    }
    return err_prefix(err, "%s %s", doing, held->name);
}

int replicaset_stop(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "stop", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_load_existing(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_STOP, &r, err) < 0)
        return -1;
    if (docker_container_stop(a->docker, r.container_name, RS_STOP_TIMEOUT_S, err) < 0 &&
        err->code != ERR_NOT_FOUND) {
        err->code = ERR_STOP_FAILED;
        return err_prefix(err, "stopping %s", r.container_name);
    }
    /* The record to save holds nothing; `held` keeps the list to give back. */
    rs_record held = r;
    _cleanup_json_ json_t *released_gpus = rs_record_gpus_json(&r);
    _cleanup_json_ json_t *released_ports = rs_record_ports_json(&r);
    r.state = RS_STATE_STOPPED;
    rs_record_clear_holdings(&r);
    if (rs_record_save(a->store, &r, NULL, 0, err) < 0)
        return rs_release_failed(a, &held, err, "stopping");
    rs_alloc_give_back(a, &held);
    log_info("replica set %s: stopped; gave back %zu GPU(s) and %zu port(s)", name, held.ngpus,
             held.nports);
    *out = rs_state_answer(&r);
    json_object_set_new(*out, "released",
                        json_pack("{s:O, s:O}", "gpus", released_gpus, "ports", released_ports));
    return 0;
}

int replicaset_pause(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "pause", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_load_existing(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_PAUSE, &r, err) < 0)
        return -1;
    if (docker_container_stop(a->docker, r.container_name, RS_STOP_TIMEOUT_S, err) < 0) {
        err->code = ERR_PAUSE_FAILED;
        return err_prefix(err, "pausing %s", r.container_name);
    }
    r.state = RS_STATE_PAUSED;
    if (rs_record_save(a->store, &r, NULL, 0, err) < 0)
        return err_prefix(err, "pausing %s", name);
    log_info("replica set %s: paused, keeping its GPUs and ports", name);
    *out = rs_state_answer(&r);
    return 0;
}

int replicaset_continue(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "continue", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_load_existing(a, name, &r, err) < 0 || rs_lifecycle_check(RS_OP_CONTINUE, &r, err) < 0)
        return -1;
    if (docker_container_start(a->docker, r.container_name, err) < 0) {
        if (err->code == ERR_NOT_FOUND)
            err_set(err, ERR_CONTINUE_FAILED,
                    "container %s is missing from Docker (removed by hand?); delete the set or "
                    "stop and restart it",
                    r.container_name);
        else
            err->code = ERR_CONTINUE_FAILED;
        return err_prefix(err, "continuing %s", name);
    }
    r.state = RS_STATE_RUNNING;
    if (rs_record_save(a->store, &r, NULL, 0, err) < 0)
        return err_prefix(err, "continuing %s", name);
    log_info("replica set %s: continued", name);
    *out = rs_state_answer(&r);
    return 0;
}

/* Purge: the record and every history entry go, so the name starts afresh. */
static int rs_purge(app *a, rs_record *r, gb_err *err)
{
    char key[STORE_KEY_MAX], prefix[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    keys_replicaset_history_prefix(prefix, sizeof(prefix), r->name);
    store_op ops[] = {{.kind = STORE_OP_DELETE, .key = key},
                      {.kind = STORE_OP_DELETE_PREFIX, .key = prefix}};
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    bool ok = false;
    if (store_txn(a->store, &cmp, 1, ops, ARRAY_SIZE(ops), &ok, NULL, err) < 0)
        return -1;
    if (!ok)
        return err_set(err, ERR_CONFLICT, "replica set %s changed meanwhile; try again", r->name);
    return 0;
}

int replicaset_delete(app *a, const char *name, bool purge, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "delete", out, err);
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_load_existing(a, name, &r, err) < 0)
        return -1;
    /* A deleted set can still be purged; deleting it again is "not found". */
    if (!(purge && r.state == RS_STATE_DELETED) && rs_lifecycle_check(RS_OP_DELETE, &r, err) < 0)
        return -1;
    if (r.state != RS_STATE_DELETED &&
        docker_container_remove(a->docker, r.container_name, true, err) < 0) {
        err->code = ERR_DELETE_FAILED;
        return err_prefix(err, "removing container %s", r.container_name);
    }
    if (r.state != RS_STATE_DELETED)
        rs_gpu_env_remove(a, r.container_name);
    rs_record held = r;
    _cleanup_json_ json_t *released_gpus = rs_record_gpus_json(&r);
    _cleanup_json_ json_t *released_ports = rs_record_ports_json(&r);
    if (purge) {
        if (rs_purge(a, &r, err) < 0)
            return rs_release_failed(a, &held, err, "deleting");
    } else {
        r.state = RS_STATE_DELETED;
        rs_record_clear_holdings(&r);
        if (rs_record_save(a->store, &r, NULL, 0, err) < 0)
            return rs_release_failed(a, &held, err, "deleting");
    }
    rs_alloc_give_back(a, &held);
    log_info("replica set %s: deleted%s; gave back %zu GPU(s) and %zu port(s)", name,
             purge ? " and purged its history" : "", held.ngpus, held.nports);
    *out = json_pack("{s:s, s:b, s:{s:O, s:O}}", "name", name, "purged", purge, "released", "gpus",
                     released_gpus, "ports", released_ports);
    return 0;
}
