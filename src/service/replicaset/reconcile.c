/*
 * reconcile.c - start-up: make the store and Docker agree after
 * whatever happened while gpuboxd was down (a crash, a host reboot, someone
 * removing a container by hand).
 *
 * Runs after the pools were derived from the store, before the API serves:
 *   - first, every operation the journal holds unfinished is finished or
 *     undone (replicaset/recover.c); a set whose operation could not be
 *     settled is left alone below;
 *   - "creating" records left by a gpuboxd from before the journal: if the
 *     container exists, the create finishes; if not, it is undone;
 *   - running records whose container is not running (a host reboot) get
 *     their container started again: they still hold their GPUs and ports;
 *     but not while a volume they bind is unavailable (volumes_open runs
 *     first and attaches every volume it can; a container started on an
 *     unattached volume would see its bare mountpoint), nor while an
 *     unfinished move of sets sharing a volume holds it (it starts on the
 *     node it goes to: move_group_settle.c);
 *   - records whose container Docker no longer has are logged; the API
 *     reports their status as "missing" and they keep what they hold until
 *     the operator deletes or stops them;
 *   - every owner with sets has their network (replicaset/network.c), made
 *     again if someone removed it (a container is moved onto it before it
 *     is started again), and gpubox's networks of anyone else go;
 *   - containers labelled as gpubox's that no record owns are logged;
 *   - a running container whose host binds lost their staging mounts (a
 *     host reboot: Docker's restart policy started it on the bare mount
 *     points) gets them pinned again (binds_ensure, by the same rules as at
 *     creation) and is restarted to see them; a start gpuboxd makes does
 *     the same before it starts (replicaset_container_start); a container made by
 *     a gpuboxd from before the staging is left as it is, with a warning;
 *   - GPU env files (replicaset/gpu_env.h) of containers no record names
 *     go, and the staged binds (binds.h) of containers Docker no longer has.
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/replicaset/gpu_env.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"

/* r's container runs: its host binds must be the pinned ones. One whose
 * staging mount was made again started on the bare mount point: restart
 * it. One that can no longer be pinned (its path changed into a symlink,
 * say) is stopped rather than left on the bare mount point. */
static void replicaset_reconcile_binds(app *a, const replicaset_record *r)
{
    gb_err err = GB_ERR_INIT;
    int remade = binds_ensure(a, r->container_name, &r->spec, &err);
    if (remade == 0)
        return;
    if (remade < 0)
        log_error("reconcile: %s: stopping %s: %s", r->name, r->container_name, err.msg);
    else
        log_warn("reconcile: %s: %s started before its host binds were pinned again; "
                 "restarting it",
                 r->name, r->container_name);
    gb_err e = GB_ERR_INIT;
    if (replicaset_container_stop(a, r->container_name, &e) < 0 ||
        (remade > 0 && docker_container_start(a->docker, r->container_name, &e) < 0))
        log_error("reconcile: %s: restarting %s: %s", r->name, r->container_name, e.msg);
}

static void replicaset_reconcile_one(app *a, replicaset_record *r, const json_t *held)
{
    if (r->operation[0]) {
        /* Recovery could not settle it: leave the containers as they are
         * until it can (the next call on the set tries again). */
        log_warn("reconcile: %s: operation %s is still unfinished; see GET /api/v1/operations/%s",
                 r->name, r->operation, r->operation);
        return;
    }
    if (r->state == RS_STATE_CREATING) {
        replicaset_create_conclude_legacy(a, r);
        return;
    }
    if (r->state == RS_STATE_DELETED || r->state == RS_STATE_QUEUED)
        return; /* no container: a queued set waits for the dispatcher (service/queue) */
    gb_err err = GB_ERR_INIT;
    docker_container_state st;
    if (docker_container_state_get(a->docker, r->container_name, &st, &err) < 0 &&
        err.code != ERR_NOT_FOUND) {
        log_warn("reconcile: %s: cannot ask Docker about %s: %s", r->name, r->container_name,
                 err.msg);
        return;
    }
    if (!st.exists) {
        log_warn("reconcile: %s: container %s is missing from Docker (removed by hand?); it "
                 "still holds %zu GPU(s) and %zu port(s) until stopped or deleted",
                 r->name, r->container_name, r->ngpus, r->nports);
        return;
    }
    bool pinned = binds_pinned(a, r->container_name, &r->spec);
    if (st.running) {
        if (pinned)
            replicaset_reconcile_binds(a, r);
    } else if (r->state == RS_STATE_RUNNING && json_object_get(held, r->name)) {
        log_info("reconcile: %s: not started here: it follows the sets it shares a volume with "
                 "to node %s (operation %s), and starts there",
                 r->name,
                 json_string_value(json_object_get(json_object_get(held, r->name), "node")),
                 json_string_value(json_object_get(json_object_get(held, r->name), "id")));
    } else if (r->state == RS_STATE_RUNNING && replicaset_volumes_ready(a, r)) {
        if (replicaset_container_start(a, r, &err) == 0) {
            log_info("reconcile: %s: started %s again (it was running before gpuboxd stopped)",
                     r->name, r->container_name);
            replicaset_ssh_after_start(a, r, NULL, NULL);
        } else
            log_warn("reconcile: %s: cannot start %s again: %s", r->name, r->container_name,
                     err.msg);
    }
}

/* Containers carrying gpubox's label that no record names. */
static void replicaset_report_orphans(app *a, json_t *known)
{
    _cleanup_(docker_container_briefs_free) docker_container_briefs list = {0};
    gb_err err = GB_ERR_INIT;
    if (docker_container_list_briefs(a->docker, DOCKER_LABEL_REPLICASET, NULL, &list, &err) < 0)
        return;
    for (size_t i = 0; i < list.n; i++) {
        const char *n = list.items[i].name;
        if (n && !json_object_get(known, n))
            log_warn("reconcile: container %s carries gpubox's label but no replica set owns it; "
                     "leaving it alone",
                     n);
    }
}

struct replicaset_reconcile_ctx {
    app *a;
    json_t *known;  /* container names of the sets not deleted */
    json_t *owners; /* the owners of those sets */
    json_t *held;   /* the sets an unfinished group move holds here: name -> {id, node} */
};

/* One record at start-up (replicaset_record_fn). */
static int replicaset_reconcile_each(void *ctx, replicaset_record *r, gb_err *err)
{
    struct replicaset_reconcile_ctx *rc = ctx;
    (void)err;
    replicaset_reconcile_one(rc->a, r, rc->held);
    /* A share changed in place is recorded before its limits file is
     * rewritten (resize.c): the file follows the record. */
    gb_err e = GB_ERR_INIT;
    if ((r->state == RS_STATE_RUNNING || r->state == RS_STATE_PAUSED) &&
        replicaset_cuda_limits_rewrite(rc->a, r, &e) < 0)
        log_warn("reconcile: replica set %s: %s", r->name, e.msg);
    if (r->state != RS_STATE_DELETED && r->container_name[0] &&
        !replicaset_record_is_tombstone(r)) {
        json_object_set_new(rc->known, r->container_name, json_true());
        json_object_set_new(rc->owners, r->owner[0] ? r->owner : USER_ANONYMOUS, json_true());
    }
    return 0;
}

int replicaset_reconcile(app *a, gb_err *err)
{
    if (replicaset_recover(a, err) < 0)
        return err_prefix(err, "recovering unfinished operations");
    _cleanup_json_ json_t *known = json_object();
    _cleanup_json_ json_t *owners = json_object();
    _cleanup_json_ json_t *held = json_object();
    move_group_held(a, held);
    struct replicaset_reconcile_ctx rc = {.a = a, .known = known, .owners = owners, .held = held};
    if (replicaset_records_each(a->store, replicaset_reconcile_each, &rc, err) < 0)
        return err_prefix(err, "reconciling replica sets");
    replicaset_move_in_known(a, known, owners);
    replicaset_network_reconcile(a, owners);
    replicaset_report_orphans(a, known);
    replicaset_gpu_env_sweep(a, known);
    binds_sweep(a);
    return 0;
}
