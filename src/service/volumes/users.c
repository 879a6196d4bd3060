/*
 * users.c - who uses a volume, and the locks that keep them still:
 * the replica sets that bind it (their specs, in the store), the
 * containers that mount it (Docker's live view), and the Docker volume
 * itself (see volume/internal.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"
#include "service/replicaset/record.h"
#include "service/volumes/internal.h"
#include "util/cleanup.h"
#include "util/log.h"

int volumes_load_existing(app *a, const char *name, volumes_record *r, gb_err *err)
{
    if (name_check_volume(name, err) < 0)
        return -1;
    int found = volumes_record_load(a->store, name, r, err);
    if (found < 0)
        return -1;
    if (!found || !users_caller_sees(r->owner))
        return err_set(err, ERR_NOT_FOUND, "no volume named '%s'", name);
    return 0;
}

/* Where spec binds volume name (its first bind of it); NULL: nowhere. */
static const char *volumes_spec_bind_dest(const replicaset_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->nbinds; i++)
        if (strcmp(spec->binds[i].src, name) == 0)
            return spec->binds[i].dest;
    return NULL;
}

/* A stopped set's change waiting for its next start (record.h,
 * pendingSpec) binds what its next version will bind: that volume is in
 * use too, or the start would find it gone. */
static const char *volumes_pending_bind_dest(const json_t *pending, const char *name)
{
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(pending, "binds"), i, b)
    {
        const char *src = json_string_value(json_object_get(b, "src"));
        const char *dest = json_string_value(json_object_get(b, "dest"));
        if (src && strcmp(src, name) == 0)
            return dest ? dest : "";
    }
    return NULL;
}

struct volumes_bound_ctx {
    const char *name;
    json_t *found;
};

static int volumes_bound_one(void *ctx, replicaset_record *r, gb_err *err)
{
    struct volumes_bound_ctx *b = ctx;
    (void)err;
    const char *dest = volumes_spec_bind_dest(&r->spec, b->name);
    if (!dest)
        dest = volumes_pending_bind_dest(r->pending_spec, b->name);
    if (r->state != RS_STATE_DELETED && dest)
        json_array_append_new(b->found, json_pack("{s:s, s:s, s:s}", "name", r->name, "state",
                                                  replicaset_state_name(r->state), "dest", dest));
    return 0;
}

int volumes_bound_by(app *a, const char *name, json_t **sets, gb_err *err)
{
    *sets = NULL;
    _cleanup_json_ json_t *found = json_array();
    struct volumes_bound_ctx b = {.name = name, .found = found};
    if (replicaset_records_each(a->store, volumes_bound_one, &b, err) < 0)
        return err_prefix(err, "finding the replica sets that use volume %s", name);
    *sets = steal_ptr(&found);
    return 0;
}

int volumes_mounted_by(app *a, const char *docker_volume, json_t **containers, gb_err *err)
{
    *containers = NULL;
    _cleanup_(docker_container_briefs_free) docker_container_briefs list = {0};
    if (docker_container_list_briefs(a->docker, NULL, docker_volume, &list, err) < 0)
        return err_prefix(err, "finding the containers that use Docker volume %s", docker_volume);
    _cleanup_json_ json_t *found = json_array();
    for (size_t i = 0; i < list.n; i++) {
        /* Docker mounts a volume when a container starts and unmounts it
         * when the last running user stops; a frozen (docker-paused) or
         * restarting container still holds it. */
        const docker_container_brief *c = &list.items[i];
        if (!c->status || (strcmp(c->status, "running") != 0 && strcmp(c->status, "paused") != 0 &&
                           strcmp(c->status, "restarting") != 0))
            continue;
        json_array_append_new(found,
                              json_pack("{s:s, s:s?, s:s}", "container", c->name ? c->name : "?",
                                        "replicaSet", c->replicaset, "state", c->status));
    }
    *containers = steal_ptr(&found);
    return 0;
}

void volumes_describe_sets(const json_t *sets, char *buf, size_t size)
{
    size_t used = 0, i;
    json_t *s;
    buf[0] = '\0';
    json_array_foreach(sets, i, s)
    {
        int n = snprintf(buf + used, size - used, "%s%s (%s)", i ? ", " : "",
                         json_string_value(json_object_get(s, "name")),
                         json_string_value(json_object_get(s, "state")));
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
}

void volumes_describe_mounts(const json_t *containers, char *buf, size_t size)
{
    size_t used = 0, i;
    json_t *c;
    buf[0] = '\0';
    json_array_foreach(containers, i, c)
    {
        const char *set = json_string_value(json_object_get(c, "replicaSet"));
        const char *state = json_string_value(json_object_get(c, "state"));
        const char *container = json_string_value(json_object_get(c, "container"));
        int n = set ? snprintf(buf + used, size - used, "%sreplica set %s (container %s, %s)",
                               i ? ", " : "", set, container, state)
                    : snprintf(buf + used, size - used, "%scontainer %s (%s, not gpubox's)",
                               i ? ", " : "", container, state);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
}

/* The names in sets, all present in before? */
static bool volumes_sets_within(const json_t *sets, const json_t *before)
{
    size_t i, k;
    json_t *s, *b;
    json_array_foreach(sets, i, s)
    {
        bool seen = false;
        json_array_foreach(before, k, b)
        {
            if (json_equal(json_object_get(s, "name"), json_object_get(b, "name")))
                seen = true;
        }
        if (!seen)
            return false;
    }
    return true;
}

void volumes_locks_release(volumes_locks *l)
{
    if (l->vol)
        namelock_release(l->vol);
    for (size_t i = l->nrs; i > 0; i--)
        namelock_release(l->rs[i - 1]);
    free(l->rs);
    memset(l, 0, sizeof(*l));
}

/* Take the sets' locks (they come sorted by name from the store), then
 * the volume's. */
static int volumes_lock_all(app *a, const char *name, const json_t *sets, volumes_locks *l,
                            gb_err *err)
{
    memset(l, 0, sizeof(*l));
    l->rs = xcalloc(json_array_size(sets) + 1, sizeof(*l->rs));
    size_t i;
    json_t *s;
    json_array_foreach(sets, i, s)
    {
        const char *set = json_string_value(json_object_get(s, "name"));
        if (!set) {
            volumes_locks_release(l);
            return err_set(err, ERR_INTERNAL, "a replica set using volume %s has no name", name);
        }
        l->rs[l->nrs++] = namelock_acquire(a->locks, "rs", set);
    }
    l->vol = namelock_acquire(a->locks, "vol", name);
    return 0;
}

int volumes_lock_with_users(app *a, const char *name, volumes_locks *l, json_t **sets, gb_err *err)
{
    /* A set created between reading the list and taking the locks would
     * be missed: read again under the locks, and start over if one
     * appeared (rare, so a few rounds are plenty). */
    for (int attempt = 0; attempt < 5; attempt++) {
        _cleanup_json_ json_t *before = NULL, *now = NULL;
        if (volumes_bound_by(a, name, &before, err) < 0 ||
            volumes_lock_all(a, name, before, l, err) < 0)
            return -1;
        if (volumes_bound_by(a, name, &now, err) < 0) {
            volumes_locks_release(l);
            return -1;
        }
        if (volumes_sets_within(now, before)) {
            if (sets)
                *sets = steal_ptr(&now);
            return 0;
        }
        volumes_locks_release(l);
    }
    return err_set(err, ERR_CONFLICT,
                   "the replica sets using volume %s keep changing; try again in a moment", name);
}

int volumes_check_backend(app *a, const volumes_record *r, gb_err *err)
{
    const char *running = volume_backend_name(&a->volumes->env);
    if (strcmp(r->backend, running) == 0)
        return 0;
    return err_set(err, ERR_STATE_CONFLICT,
                   "volume '%s' was made by the %s backend, but gpuboxd runs with "
                   "--volume-backend %s; restart gpuboxd with --volume-backend %s to use it",
                   r->name, r->backend, running, r->backend);
}

int volumes_docker_create(app *a, volumes_record *r, bool *created, gb_err *err)
{
    *created = false;
    _cleanup_json_ json_t *existing = NULL;
    gb_err probe = GB_ERR_INIT;
    if (docker_volume_inspect(a->docker, r->docker_volume, &existing, &probe) == 0) {
        /* Docker's create would hand back this one whatever its options:
         * take it only if it is exactly what this volume needs. */
        json_t *labels = json_object_get(existing, "Labels");
        const char *owner = json_string_value(json_object_get(labels, DOCKER_LABEL_VOLUME));
        if (!owner || strcmp(owner, r->name) != 0 ||
            !json_equal(json_object_get(existing, "Options"), r->docker_options))
            return err_set(err, ERR_VOLUME_EXISTS,
                           "a Docker volume named %s already exists and was not made for gpubox "
                           "volume '%s'; remove it (docker volume rm %s) or pick another name",
                           r->docker_volume, r->name, r->docker_volume);
    } else if (probe.code != ERR_NOT_FOUND) {
        *err = probe;
        return -1;
    } else {
        _cleanup_json_ json_t *labels = json_pack("{s:s}", DOCKER_LABEL_VOLUME, r->name);
        if (docker_volume_create(a->docker, r->docker_volume, "local", r->docker_options, labels,
                                 &existing, err) < 0)
            return -1;
        *created = true;
    }
    const char *mp = json_string_value(json_object_get(existing, "Mountpoint"));
    snprintf(r->docker_mountpoint, sizeof(r->docker_mountpoint), "%s", mp ? mp : "");
    return 0;
}

int volumes_docker_remove(app *a, const volumes_record *r, gb_err *err)
{
    _cleanup_json_ json_t *existing = NULL;
    gb_err probe = GB_ERR_INIT;
    if (docker_volume_inspect(a->docker, r->docker_volume, &existing, &probe) < 0) {
        if (probe.code == ERR_NOT_FOUND)
            return 0;
        *err = probe;
        return -1;
    }
    const char *owner = json_string_value(
        json_object_get(json_object_get(existing, "Labels"), DOCKER_LABEL_VOLUME));
    if (!owner || strcmp(owner, r->name) != 0) {
        log_warn("volume %s: Docker volume %s was not made for it; leaving it alone", r->name,
                 r->docker_volume);
        return 0;
    }
    return docker_volume_remove(a->docker, r->docker_volume, false, err);
}

void volumes_set_unavailable(app *a, const char *name, const char *why)
{
    volumes_ctx *v = a->volumes;
    pthread_mutex_lock(&v->mutex);
    if (why)
        json_object_set_new(v->unavailable, name, json_string(why));
    else
        json_object_del(v->unavailable, name);
    pthread_mutex_unlock(&v->mutex);
}

bool volumes_unavailable(app *a, const char *name, char *why, size_t size)
{
    volumes_ctx *v = a->volumes;
    pthread_mutex_lock(&v->mutex);
    const char *s = json_string_value(json_object_get(v->unavailable, name));
    if (s && why)
        snprintf(why, size, "%s", s);
    pthread_mutex_unlock(&v->mutex);
    return s != NULL;
}

int volumes_bind_source(app *a, const char *name, char **docker_name, gb_err *err)
{
    *docker_name = NULL;
    _cleanup_(volumes_record_free) volumes_record r = {0};
    int found = volumes_record_load(a->store, name, &r, err);
    if (found < 0)
        return -1;
    if (!found || !users_caller_sees(r.owner))
        return err_set(err, ERR_INVALID_PARAMS,
                       "bind source '%s' is not a gpubox volume; create the volume first, or give "
                       "an absolute host path",
                       name);
    char why[256];
    if (r.state != VOL_STATE_READY)
        return err_set(err, ERR_STATE_CONFLICT, "volume '%s' is being %s; it cannot be bound now",
                       name, r.state == VOL_STATE_CREATING ? "created" : "deleted");
    if (r.resizing_to)
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is being resized to %s; try again when that is done", name,
                       r.resizing_text);
    if (volumes_unavailable(a, name, why, sizeof(why)))
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is not attached (%s); see gpuboxd's log, fix it and restart "
                       "gpuboxd",
                       name, why);
    *docker_name = xstrdup(r.docker_volume[0] ? r.docker_volume : name);
    return 0;
}
