/*
 * startup.c - the volume service at start-up: open the storage
 * layer, settle what a crash left half done, and attach every volume
 * before any replica set's container is started (after a host reboot
 * nothing is mounted; after a daemon restart attach finds everything in
 * place and does nothing).
 *
 * For each volume record, in name order:
 *   creating  a create that never answered: undone (nothing was handed out)
 *   deleting  a delete that passed its checks: finished
 *   ready     attached (volume_attach, idempotent); its Docker volume made
 *             again if someone removed it; a resize in flight ("resizing")
 *             run again with the same size, which completes it, and
 *             recorded. A volume that was not attached before and that a
 *             running container already mounts (Docker started it at boot,
 *             from a restart policy, before gpuboxd) gets that container
 *             restarted: it was bound to the bare mountpoint, not to the
 *             volume.
 * A volume that cannot be attached, or that another backend made, is
 * logged as an error and marked unavailable: replica sets binding it are
 * neither created nor started (volumes_bind_source) until a later start
 * attaches it. The daemon still starts, so everything else keeps working.
 */
#include "util/xalloc.h"
#include "service/volumes/volumes.h"

#include <stdlib.h>
#include <string.h>

#include "service/volumes/internal.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/size.h"

/* Restart the containers that mount r's Docker volume: they started
 * before the volume was attached and see the bare mountpoint. */
static void volumes_restart_early_users(app *a, const volumes_record *r)
{
    _cleanup_json_ json_t *mounted = NULL;
    gb_err e = GB_ERR_INIT;
    if (volumes_mounted_by(a, r->docker_volume, &mounted, &e) < 0) {
        log_warn("volume %s: cannot ask Docker who uses it: %s", r->name, e.msg);
        return;
    }
    size_t i;
    json_t *c;
    json_array_foreach(mounted, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "container"));
        log_warn("volume %s: container %s started before the volume was attached and sees the "
                 "bare mountpoint; restarting it",
                 r->name, name);
        if (docker_container_stop(a->docker, name, 10, &e) < 0 ||
            docker_container_start(a->docker, name, &e) < 0)
            log_error("volume %s: restarting container %s: %s", r->name, name, e.msg);
    }
}

/* A resize that a crash interrupted: run it again, then record it. */
static void volumes_finish_resize(app *a, volumes_record *r)
{
    _cleanup_json_ json_t *mounted = NULL;
    gb_err e = GB_ERR_INIT;
    uint64_t to = r->resizing_to;
    char to_text[VOL_SIZE_TEXT_MAX];
    snprintf(to_text, sizeof(to_text), "%s", r->resizing_text);
    if (volumes_mounted_by(a, r->docker_volume, &mounted, &e) == 0 &&
        volume_resize(&a->volumes->env, r->name, r->docker_mountpoint, to,
                      json_array_size(mounted) > 0, &e) == 0 &&
        volumes_commit_resize(a, r, to, &e) == 0) {
        log_info("volume %s: finished a resize to %s that was interrupted", r->name, to_text);
        return;
    }
    /* The layer left the volume consistent at one of the two sizes; the
     * record keeps the old one, and the next PATCH settles it. */
    log_error("volume %s: could not finish the interrupted resize to %s: %s; it stays usable, "
              "resize it again",
              r->name, to_text, e.msg);
    r->resizing_to = 0;
    r->resizing_text[0] = '\0';
    err_clear(&e);
    if (volumes_record_save(a->store, a, r, NULL, 0, &e) < 0)
        log_error("volume %s: clearing the resize mark: %s", r->name, e.msg);
}

/* Make the Docker volume again if it is gone. */
static int volumes_ensure_docker(app *a, volumes_record *r, gb_err *err)
{
    char before[sizeof(r->docker_mountpoint)];
    memcpy(before, r->docker_mountpoint, sizeof(before));
    bool created = false;
    if (volumes_docker_create(a, r, &created, err) < 0)
        return -1;
    if (created)
        log_warn("volume %s: Docker volume %s was missing (removed by hand?); made it again",
                 r->name, r->docker_volume);
    if (strcmp(before, r->docker_mountpoint) != 0 &&
        volumes_record_save(a->store, a, r, NULL, 0, err) < 0)
        return -1;
    return 0;
}

static void volumes_start_ready(app *a, volumes_record *r, size_t *attached)
{
    const volume_env *env = &a->volumes->env;
    gb_err e = GB_ERR_INIT;
    if (volumes_check_backend(a, r, &e) < 0) {
        log_error("volume %s: NOT ATTACHED: %s", r->name, e.msg);
        volumes_set_unavailable(a, r->name, e.msg);
        return;
    }
    uint64_t used = 0, size = 0;
    bool was_attached = volume_usage(env, r->name, r->docker_mountpoint, &used, &size, &e) == 0;
    err_clear(&e);
    if (volume_attach(env, r->name, &e) < 0 || volumes_ensure_docker(a, r, &e) < 0) {
        log_error("volume %s: NOT ATTACHED: %s. Replica sets that use it will not start until "
                  "it attaches (fix it and restart gpuboxd)",
                  r->name, e.msg);
        volumes_set_unavailable(a, r->name, e.msg);
        return;
    }
    (*attached)++;
    if (!was_attached)
        volumes_restart_early_users(a, r);
    if (r->resizing_to)
        volumes_finish_resize(a, r);
}

static void volumes_start_one(app *a, volumes_record *r, size_t *attached)
{
    gb_err e = GB_ERR_INIT;
    switch (r->state) {
    case VOL_STATE_CREATING:
        log_info("volume %s: undoing a create that was interrupted", r->name);
        volumes_undo_create(a, r, true);
        return;
    case VOL_STATE_DELETING:
        if (volumes_check_backend(a, r, &e) == 0 && volumes_finish_delete(a, r, &e) == 0) {
            log_info("volume %s: finished a delete that was interrupted", r->name);
            return;
        }
        log_error("volume %s: could not finish an interrupted delete: %s", r->name, e.msg);
        /* volumes_finish_delete put it back to ready: attach it as one. */
        volumes_start_ready(a, r, attached);
        return;
    case VOL_STATE_READY:
        volumes_start_ready(a, r, attached);
        return;
    }
}

/* Docker volumes carrying gpubox's label that no record owns. */
static void volumes_report_orphans(app *a)
{
    _cleanup_json_ json_t *list = NULL;
    gb_err e = GB_ERR_INIT;
    if (docker_volume_list(a->docker, DOCKER_LABEL_VOLUME, &list, &e) < 0)
        return;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *owner =
            json_string_value(json_object_get(json_object_get(v, "Labels"), DOCKER_LABEL_VOLUME));
        const char *dname = json_string_value(json_object_get(v, "Name"));
        _cleanup_(volumes_record_free) volumes_record r = {0};
        if (owner && dname && volumes_record_load(a->store, owner, &r, &e) == 0)
            log_warn("volumes: Docker volume %s carries gpubox's label (volume %s) but no volume "
                     "record owns it; leaving it alone",
                     dname, owner);
    }
}

int volumes_open(app *a, gb_err *err)
{
    volumes_ctx *v = xcalloc(1, sizeof(*v));
    v->unavailable = json_object();
    v->leaving = json_object();
    pthread_mutex_init(&v->mutex, NULL);
    a->volumes = v;
    const char *root = a->docker_root_dir[0] ? a->docker_root_dir : NULL;
    const char *backend = a->cfg.volume_backend ? a->cfg.volume_backend : "loop";
    if (volume_env_open(&v->env, backend, a->cfg.data_dir, root, err) < 0)
        return err_prefix(err, "--volume-backend %s", backend);
    if (a->cfg.volume_fs && volume_env_set_fs(&v->env, a->cfg.volume_fs, err) < 0)
        return -1;
    const char *fs = volume_fs(&v->env);
    log_info("volumes: %s backend in %s (sizes %s); %s%s%s%s", volume_backend_name(&v->env),
             v->env.volumes_dir, volume_enforced(&v->env) ? "enforced" : "NOT enforced",
             fs ? "new volumes " : "", fs ? fs : "", fs ? ", " : "",
             volume_grows_online(&v->env, NULL) ? "grow while in use"
                                                : "grow and shrink only while not in use");
    volumes_record *recs = NULL;
    size_t n = 0, attached = 0;
    if (volumes_records_load_all(a->store, &recs, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        volumes_start_one(a, &recs[i], &attached);
    volumes_records_free(recs, n);
    volumes_report_orphans(a);
    size_t unavailable = json_object_size(v->unavailable);
    if (unavailable)
        log_error("volumes: %zu attached, %zu NOT attached (see above)", attached, unavailable);
    else
        log_info("volumes: %zu attached", attached);
    return 0;
}

void volumes_close(volumes_ctx *v)
{
    if (!v)
        return;
    json_decref(v->unavailable);
    json_decref(v->leaving);
    pthread_mutex_destroy(&v->mutex);
    free(v);
}
