/*
 * replicaset_reconcile.c - start-up: make the store and Docker agree after
 * whatever happened while gpuboxd was down (a crash, a host reboot, someone
 * removing a container by hand).
 *
 * Runs after the pools were derived from the store, before the API serves:
 *   - "creating" records (a crash mid-create): if the container exists, the
 *     create finishes (started, recorded running); if not, it is undone
 *     (allocations given back, the record back to before the create);
 *   - running records whose container is not running (a host reboot) get
 *     their container started again: they still hold their GPUs and ports;
 *     but not while a volume they bind is unavailable (volumes_open runs
 *     first and attaches every volume it can; a container started on an
 *     unattached volume would see its bare mountpoint);
 *   - records whose container Docker no longer has are logged; the API
 *     reports their status as "missing" and they keep what they hold until
 *     the operator deletes or stops them;
 *   - containers labelled as gpubox's that no record owns are logged;
 *   - GPU env files (rs_gpu_env.h) of containers no record names go.
 */
#include "service/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/rs_gpu_env.h"
#include "service/rs_internal.h"
#include "service/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"

/* Docker's view of one container: 1 exists (running set), 0 absent, -1 error. */
static int rs_docker_state(app *a, const char *name, bool *running, gb_err *err)
{
    _cleanup_json_ json_t *info = NULL;
    if (docker_container_inspect(a->docker, name, &info, err) < 0)
        return err->code == ERR_NOT_FOUND ? 0 : -1;
    *running = json_is_true(json_object_get(json_object_get(info, "State"), "Running"));
    return 1;
}

/* Are all the volumes r binds ready to be mounted? Logs why not. */
static bool rs_volumes_ready(app *a, const rs_record *r)
{
    for (size_t i = 0; i < r->spec.nbinds; i++) {
        if (r->spec.binds[i].src[0] == '/')
            continue;
        char *docker_name = NULL;
        gb_err err = GB_ERR_INIT;
        int rc = volumes_bind_source(a, r->spec.binds[i].src, &docker_name, &err);
        free(docker_name);
        if (rc < 0) {
            log_error("reconcile: %s: not starting %s: %s", r->name, r->container_name, err.msg);
            return false;
        }
    }
    return true;
}

static void rs_finish_or_undo_create(app *a, rs_record *r)
{
    gb_err err = GB_ERR_INIT;
    bool running = false;
    int exists = rs_docker_state(a, r->container_name, &running, &err);
    if (exists < 0) {
        log_warn("reconcile: %s: cannot ask Docker about %s: %s", r->name, r->container_name,
                 err.msg);
        return;
    }
    if (exists && (running || (rs_volumes_ready(a, r) &&
                               docker_container_start(a->docker, r->container_name, &err) == 0))) {
        r->state = RS_STATE_RUNNING;
        if (rs_record_save(a->store, r, NULL, 0, &err) == 0)
            log_info("reconcile: %s: finished the create interrupted at start-up of %s", r->name,
                     r->container_name);
        return;
    }
    if (exists)
        docker_container_remove(a->docker, r->container_name, true, &err);
    rs_gpu_env_remove(a, r->container_name);
    /* Undo: the versions before this one, if any, stay as a deleted set. */
    char key[STORE_KEY_MAX], hkey[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), r->name);
    keys_replicaset_history(hkey, sizeof(hkey), r->name, r->version);
    rs_record held = *r;
    store_op hist_del = {.kind = STORE_OP_DELETE, .key = hkey};
    int rc;
    if (r->version > 1) {
        r->state = RS_STATE_DELETED;
        r->version--;
        snprintf(r->container_name, sizeof(r->container_name), "%s-%d", r->name, r->version);
        rs_record_clear_holdings(r);
        rc = rs_record_save(a->store, r, &hist_del, 1, &err);
    } else {
        store_op ops[] = {{.kind = STORE_OP_DELETE, .key = key}, hist_del};
        bool ok = false;
        rc = store_txn(a->store, NULL, 0, ops, 2, &ok, NULL, &err);
    }
    if (rc < 0) {
        log_warn("reconcile: %s: could not undo an interrupted create: %s", r->name, err.msg);
        return;
    }
    rs_alloc_give_back(a, &held);
    log_info("reconcile: %s: undid a create interrupted before its container started", r->name);
}

static void rs_reconcile_one(app *a, rs_record *r)
{
    if (r->state == RS_STATE_CREATING) {
        rs_finish_or_undo_create(a, r);
        return;
    }
    if (r->state == RS_STATE_DELETED)
        return;
    gb_err err = GB_ERR_INIT;
    bool running = false;
    int exists = rs_docker_state(a, r->container_name, &running, &err);
    if (exists < 0) {
        log_warn("reconcile: %s: cannot ask Docker about %s: %s", r->name, r->container_name,
                 err.msg);
    } else if (!exists) {
        log_warn("reconcile: %s: container %s is missing from Docker (removed by hand?); it "
                 "still holds %zu GPU(s) and %zu port(s) until stopped or deleted",
                 r->name, r->container_name, r->ngpus, r->nports);
    } else if (r->state == RS_STATE_RUNNING && !running && rs_volumes_ready(a, r)) {
        if (docker_container_start(a->docker, r->container_name, &err) == 0)
            log_info("reconcile: %s: started %s again (it was running before gpuboxd stopped)",
                     r->name, r->container_name);
        else
            log_warn("reconcile: %s: cannot start %s again: %s", r->name, r->container_name,
                     err.msg);
    }
}

/* Containers carrying gpubox's label that no record names. */
static void rs_report_orphans(app *a, json_t *known)
{
    _cleanup_json_ json_t *list = NULL;
    gb_err err = GB_ERR_INIT;
    if (docker_container_list(a->docker, RS_LABEL_NAME, &list, &err) < 0)
        return;
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *n = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
        if (n && n[0] == '/')
            n++;
        if (n && !json_object_get(known, n))
            log_warn("reconcile: container %s carries gpubox's label but no replica set owns it; "
                     "leaving it alone",
                     n);
    }
}

int replicaset_reconcile(app *a, gb_err *err)
{
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, KEYS_REPLICASETS, &kvs, err) < 0)
        return err_prefix(err, "reconciling replica sets");
    _cleanup_json_ json_t *known = json_object();
    for (size_t i = 0; i < kvs.n; i++) {
        if (!keys_is_replicaset_record(kvs.items[i].key))
            continue;
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        _cleanup_(rs_record_free) rs_record r = {0};
        if (rs_record_from_json(j, &r, err) < 0)
            return err_prefix(err, "reconciling replica sets");
        r.mod_revision = kvs.items[i].mod_revision;
        rs_reconcile_one(a, &r);
        if (r.state != RS_STATE_DELETED)
            json_object_set_new(known, r.container_name, json_true());
    }
    rs_report_orphans(a, known);
    rs_gpu_env_sweep(a, known);
    return 0;
}
