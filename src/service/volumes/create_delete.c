/*
 * create_delete.c - creating and deleting volumes (see volumes.h), all or
 * nothing.
 *
 * Create, so that a failure (or a crash) at any step leaves nothing:
 *   1. checks that change nothing: name (1024/1031/1032), size (1029),
 *      no volume of that name (1026);
 *   2. the record, state "creating", only if the name is still free: from
 *      here a crash is undone at start-up, and no replica set can bind it;
 *   3. the storage (volume_create), which says which Docker options to use;
 *   4. the Docker volume gpubox_<name>, labelled gpubox.volume=<name>;
 *   5. one transaction: the record "ready" and history entry 1.
 * If 3-5 fail, what was made is removed in reverse order.
 *
 * Delete, refused while a replica set binds the volume:
 *   1. the record says "deleting" (no set can bind it from here);
 *   2. the Docker volume goes (Docker refuses while any container, gpubox's
 *      or not, running or not, still references it: then nothing changed);
 *   3. the storage and its data go;
 *   4. the record and the whole size history go.
 * A failure at 3 makes the Docker volume again and puts the record back to
 * "ready"; a crash after 1 is finished at start-up.
 *
 * Fault points (GPUBOX_FAULT, util/fault.h): volume.create.recorded,
 * volume.create.storage, volume.create.docker, volume.delete.marked,
 * volume.delete.docker; their steps are listed once, in volumes_op_create and
 * volumes_op_delete (the operation engine's table, engine.h).
 */
#include "service/volumes/volumes.h"

#include <stdio.h>
#include <sys/stat.h>
#include <string.h>

#include "service/engine.h"
#include "service/keys.h"
#include "service/namelock.h"
#include "service/ops_timer.h"
#include "service/volumes/internal.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/size.h"
#include "util/time.h"

static json_t *volumes_answer(const volumes_record *r)
{
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:b, s:i, s:s, s:s}", "name", r->name, "size",
                          (json_int_t)r->size, "sizeText", r->size_text, "backend", r->backend,
                          "enforced", r->enforced, "version", r->version, "dockerVolume",
                          r->docker_volume, "createTime", r->create_time);
    if (j && volumes_record_fs(r))
        json_object_set_new(j, "filesystem", json_string(volumes_record_fs(r)));
    return j;
}

/* Lower layers' generic failures become "volume create failed"; precise
 * codes (exists, bad size, Docker unreachable, ...) stay. */
static int volumes_create_code(gb_err *err)
{
    if (err && (err->code == ERR_INTERNAL || err->code == ERR_CONFLICT))
        err->code = ERR_VOLUME_CREATE_FAILED;
    return -1;
}

static int volumes_delete_run(app *a, volumes_record *r, size_t from, gb_err *err);

/* What one create or delete works with (engine.h). */
typedef struct volumes_cd {
    app *a;
    volumes_record *r;
    bool created_docker; /* the Docker volume was made by this create */
} volumes_cd;

/* recorded, forward: the record (creating). */
static int volumes_create_record(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    return volumes_record_save(c->a->store, c->a, c->r, NULL, 0, err);
}

/* recorded, back: the record goes. */
static int volumes_create_record_back(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (volumes_record_delete(c->a->store, c->a, c->r, err) < 0) {
        log_error("volume %s: removing the record of a failed create: %s; start-up will try again",
                  c->r->name, err->msg);
        return -1;
    }
    return 0;
}

/* storage, forward: the layer makes it (and cleans up after itself when it
 * cannot); what Docker needs to mount it goes into the record. */
static int volumes_create_storage(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    volume_docker_opts opts;
    if (volume_create(&c->a->volumes->env, c->r->name, c->r->size, &opts, err) < 0)
        return -1;
    for (size_t i = 0; i < opts.n; i++)
        json_object_set_new(c->r->docker_options, opts.items[i].key,
                            json_string(opts.items[i].value));
    return 0;
}

/* storage, back. A failure keeps the record: it says what is left, and
 * start-up tries again. */
static int volumes_create_storage_back(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (volume_destroy(&c->a->volumes->env, c->r->name, err) < 0) {
        log_error("volume %s: removing the storage of a failed create: %s; start-up will try "
                  "again",
                  c->r->name, err->msg);
        return -1;
    }
    return 0;
}

/* docker, forward. */
static int volumes_create_docker(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    return volumes_docker_create(c->a, c->r, &c->created_docker, err);
}

/* docker, back: the Docker volume, if this create made it. */
static int volumes_create_docker_back(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (c->created_docker && volumes_docker_remove(c->a, c->r, err) < 0)
        log_error("volume %s: removing Docker volume %s after a failed create: %s", c->r->name,
                  c->r->docker_volume, err->msg);
    return 0;
}

static const op_step_def volumes_create_steps[] = {
    {OP_STEP_RECORDED, volumes_create_record, volumes_create_record_back},
    {OP_STEP_STORAGE, volumes_create_storage, volumes_create_storage_back},
    {OP_STEP_DOCKER, volumes_create_docker, volumes_create_docker_back},
};

void volumes_undo_create(app *a, volumes_record *r, bool created_docker)
{
    volumes_cd c = {.a = a, .r = r, .created_docker = created_docker};
    op_steps_back(&volumes_op_create, volumes_op_create.nsteps, &c);
}

/* The steps, then the record ready with history entry 1. */
static int volumes_make(app *a, volumes_record *r, gb_err *err)
{
    volumes_cd c = {.a = a, .r = r};
    if (op_steps_run(&volumes_op_create, 0, &c, err) < 0)
        return -1;
    char hkey[STORE_KEY_MAX];
    keys_volume_history(hkey, sizeof(hkey), r->name, r->version);
    r->state = VOL_STATE_READY;
    time_iso_now(r->update_time, sizeof(r->update_time));
    _cleanup_json_ json_t *hist = volumes_history_entry(r);
    _cleanup_free_ char *hist_text = json_dumps(hist, JSON_COMPACT);
    store_op hist_op = {.kind = STORE_OP_PUT, .key = hkey, .value = hist_text};
    if (volumes_record_save(a->store, a, r, &hist_op, 1, err) < 0) {
        op_steps_back(&volumes_op_create, volumes_op_create.nsteps, &c);
        return -1;
    }
    return 0;
}

static int volumes_create_as(app *a, const char *name, const char *size_text, const char *owner,
                             json_t **out, gb_err *err);

int volumes_create(app *a, const char *name, const char *size_text, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "volume_create", out, err);
    return volumes_create_as(a, name, size_text, users_caller_owner(), out, err);
}

int volumes_move_in(app *a, const char *name, const char *size_text, const char *owner, gb_err *err)
{
    _cleanup_json_ json_t *out = NULL;
    return volumes_create_as(a, name, size_text, owner, &out, err);
}

int volumes_move_remove(app *a, const char *name, gb_err *err)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "vol", name);
    _cleanup_(volumes_record_free) volumes_record r = {0};
    int found = volumes_record_load(a->store, name, &r, err);
    if (found <= 0)
        return found;
    /* Not marked "deleting" first: that save would write this node's
     * ledger entry over the one of the node the volume lives on now; a
     * crash part way is finished by the move, which runs this again. */
    if (volumes_delete_run(a, &r, 1, err) < 0)
        return -1;
    pthread_mutex_lock(&a->volumes->mutex);
    json_object_del(a->volumes->leaving, name);
    pthread_mutex_unlock(&a->volumes->mutex);
    log_info("volume %s: removed from this node (moved away)", name);
    return 0;
}

void volumes_move_leaving(app *a, const char *name)
{
    pthread_mutex_lock(&a->volumes->mutex);
    json_object_set_new(a->volumes->leaving, name, json_true());
    pthread_mutex_unlock(&a->volumes->mutex);
}

int volumes_move_check(app *a, const char *name, const char *set, const json_t *with,
                       json_t **record, gb_err *err)
{
    _cleanup_(volumes_record_free) volumes_record r = {0};
    _cleanup_json_ json_t *sets = NULL;
    if (volumes_load_existing(a, name, &r, err) < 0 || volumes_bound_by(a, name, &sets, err) < 0)
        return -1;
    if (r.state != VOL_STATE_READY || r.resizing_to)
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is %s; a move takes only a ready volume: try again when it "
                       "is done",
                       name, r.resizing_to ? "being resized" : volumes_state_name(r.state));
    size_t i;
    json_t *s;
    char others[300] = "";
    json_array_foreach(sets, i, s)
    {
        const char *n = json_string_value(json_object_get(s, "name"));
        bool along = false; /* moving with it */
        size_t k;
        json_t *w;
        json_array_foreach(with, k, w)
        {
            along = along || (json_is_string(w) && n && strcmp(json_string_value(w), n) == 0);
        }
        if (n && strcmp(n, set) != 0 && !along) {
            size_t len = strlen(others);
            snprintf(others + len, sizeof(others) - len, "%s%s", len ? ", " : "", n);
        }
    }
    if (others[0])
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is also bound by replica set(s) %s: a move takes a volume only "
                       "with every set that binds it; move them together (\"withSharers\": true, "
                       "gpubox move --with-sharers) or take the volume out of them (gpubox update "
                       "NAME --volume-rm DEST)",
                       name, others);
    *record = volumes_record_to_json(&r);
    /* What the data takes, for the target's check of its disk (0 when it
     * cannot be measured now: the copy then finds out). */
    uint64_t used = 0, fs_size = 0;
    gb_err e = GB_ERR_INIT;
    if (volume_usage(&a->volumes->env, r.name, r.docker_mountpoint, &used, &fs_size, &e) < 0)
        used = 0;
    json_object_set_new(*record, "used", json_integer((json_int_t)used));
    return 0;
}

int volumes_host_dir(app *a, const char *name, char *path, size_t size, gb_err *err)
{
    _cleanup_(volumes_record_free) volumes_record r = {0};
    if (volumes_load_existing(a, name, &r, err) < 0)
        return -1;
    _cleanup_json_ json_t *inspect = NULL;
    if (docker_volume_inspect(a->docker, r.docker_volume, &inspect, err) < 0)
        return -1;
    json_t *opts = json_object_get(inspect, "Options");
    const char *o = json_string_value(json_object_get(opts, "o"));
    const char *device = json_string_value(json_object_get(opts, "device"));
    const char *mountpoint = json_string_value(json_object_get(inspect, "Mountpoint"));
    /* A bind volume's data is its device; Docker's own is its mount point. */
    const char *dir = o && strstr(o, "bind") && device ? device : mountpoint;
    struct stat st;
    if (!dir || dir[0] != '/' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_set(err, ERR_INVALID_PARAMS,
                       "volume '%s': its data directory cannot be reached here", name);
    snprintf(path, size, "%s", dir);
    return 0;
}

int volumes_dir_of_data(app *a, char *path, size_t size)
{
    snprintf(path, size, "%s", a->volumes->env.volumes_dir);
    return 0;
}

static int volumes_create_as(app *a, const char *name, const char *size_text, const char *owner,
                             json_t **out, gb_err *err)
{
    uint64_t size = 0;
    if (name_check_volume(name, err) < 0 || size_parse(size_text, &size, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "vol", name);
    _cleanup_(volumes_record_free) volumes_record r = {0};
    int found = volumes_record_load(a->store, name, &r, err);
    if (found < 0)
        return -1;
    if (found && !users_caller_sees(r.owner))
        return err_set(err, ERR_VOLUME_EXISTS, "volume '%s' already exists; pick another name",
                       name);
    if (found)
        return err_set(err, ERR_VOLUME_EXISTS,
                       "volume '%s' already exists (%s, %s); pick another name or delete it first",
                       name, r.size_text, volumes_state_name(r.state));
    const volume_env *env = &a->volumes->env;
    snprintf(r.name, sizeof(r.name), "%s", name);
    snprintf(r.owner, sizeof(r.owner), "%s", owner);
    r.state = VOL_STATE_CREATING;
    r.version = 1;
    r.size = size;
    size_format(size, r.size_text, sizeof(r.size_text));
    snprintf(r.backend, sizeof(r.backend), "%s", volume_backend_name(env));
    r.enforced = volume_enforced(env);
    if (volume_fs(env))
        snprintf(r.filesystem, sizeof(r.filesystem), "%s", volume_fs(env));
    snprintf(r.docker_volume, sizeof(r.docker_volume), VOL_DOCKER_NAME_PREFIX "%s", name);
    r.docker_options = json_object();
    if (volumes_make(a, &r, err) < 0)
        return volumes_create_code(err);
    log_info("volume %s: created, %s (%s backend%s%s%s), Docker volume %s", name, r.size_text,
             r.backend, r.filesystem[0] ? ", " : "", r.filesystem,
             r.enforced ? "" : ", size not enforced", r.docker_volume);
    if (!(*out = volumes_answer(&r)))
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}

/* Lower layers' generic failures become "volume delete failed". */
static int volumes_delete_code(gb_err *err)
{
    if (err->code == ERR_INTERNAL || err->code == ERR_CONFLICT)
        err->code = ERR_VOLUME_DELETE_FAILED;
    return -1;
}

/* marked, forward: a ready volume's record says deleting (a "creating"
 * leftover stays one). */
static int volumes_delete_mark(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (c->r->state != VOL_STATE_READY)
        return 0;
    c->r->state = VOL_STATE_DELETING;
    if (volumes_record_save(c->a->store, c->a, c->r, NULL, 0, err) < 0) {
        c->r->state = VOL_STATE_READY;
        return err_prefix(err, "deleting volume %s", c->r->name);
    }
    return 0;
}

/* marked, back: a volume being deleted is whole again. */
static int volumes_delete_mark_back(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (c->r->state != VOL_STATE_DELETING)
        return 0;
    c->r->state = VOL_STATE_READY;
    if (volumes_record_save(c->a->store, c->a, c->r, NULL, 0, err) < 0)
        log_error("volume %s: putting the record back to ready after a failed delete: %s",
                  c->r->name, err->msg);
    return 0;
}

/* docker, forward: the Docker volume goes (refused while a container has it). */
static int volumes_delete_docker(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    if (volumes_docker_remove(c->a, c->r, err) < 0) {
        if (err->code == ERR_CONFLICT) {
            char docker_says[sizeof(err->msg)];
            memcpy(docker_says, err->msg, sizeof(docker_says));
            err_set(err, ERR_STATE_CONFLICT,
                    "volume '%s' is still used by a container (Docker: %.300s); remove that "
                    "container first",
                    c->r->name, docker_says);
        }
        return volumes_delete_code(err);
    }
    return 0;
}

/* docker, back: made again (the storage could not go). */
static int volumes_delete_docker_back(void *ctx, gb_err *err)
{
    volumes_cd *c = ctx;
    bool created = false;
    if (volumes_docker_create(c->a, c->r, &created, err) < 0)
        log_error("volume %s: making Docker volume %s again after a failed delete: %s", c->r->name,
                  c->r->docker_volume, err->msg);
    return 0;
}

static const op_step_def volumes_delete_steps[] = {
    {OP_STEP_MARKED, volumes_delete_mark, volumes_delete_mark_back},
    {OP_STEP_DOCKER, volumes_delete_docker, volumes_delete_docker_back},
};

/* The delete's steps from steps[from] on, then the storage and the record
 * with its history. */
static int volumes_delete_run(app *a, volumes_record *r, size_t from, gb_err *err)
{
    volumes_cd c = {.a = a, .r = r};
    if (op_steps_run(&volumes_op_delete, from, &c, err) < 0)
        return -1;
    if (volume_destroy(&a->volumes->env, r->name, err) < 0) {
        op_steps_back(&volumes_op_delete, volumes_op_delete.nsteps, &c);
        return volumes_delete_code(err);
    }
    if (volumes_record_delete(a->store, a, r, err) < 0)
        return err_prefix(err, "volume '%s': storage and data are gone, but its record stays",
                          r->name);
    volumes_set_unavailable(a, r->name, NULL);
    return 0;
}

int volumes_finish_delete(app *a, volumes_record *r, gb_err *err)
{
    return volumes_delete_run(a, r, 1, err);
}

int volumes_delete(app *a, const char *name, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "volume_delete", out, err);
    if (name_check_volume(name, err) < 0)
        return -1;
    _cleanup_(volumes_locks_release) volumes_locks locks = {0};
    _cleanup_json_ json_t *sets = NULL;
    _cleanup_(volumes_record_free) volumes_record r = {0};
    if (volumes_lock_with_users(a, name, &locks, &sets, err) < 0 ||
        volumes_load_existing(a, name, &r, err) < 0)
        return -1;
    if (json_array_size(sets) > 0) {
        /* The commands that free it, for the first set: the others' are the
         * same with their names (volume inspect lists where each binds it). */
        char who[300];
        volumes_describe_sets(sets, who, sizeof(who));
        json_t *first = json_array_get(sets, 0);
        const char *set = json_string_value(json_object_get(first, "name"));
        const char *dest = json_string_value(json_object_get(first, "dest"));
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is used by replica set(s) %s; delete %s first (gpubox rm %s), "
                       "or take the volume out (gpubox update %s --volume-rm %s; with --volume "
                       "OTHER:%s instead another volume takes its place)",
                       name, who, json_array_size(sets) > 1 ? "them" : "it", set, set, dest, dest);
    }
    /* Under the lock a "creating" record is what a failed create could not
     * clean up (a create holds the lock to its end): delete finishes it. */
    if (volumes_check_backend(a, &r, err) < 0)
        return -1;
    if (volumes_delete_run(a, &r, 0, err) < 0)
        return -1;
    log_info("volume %s: deleted, with its data and its size history", name);
    *out = json_pack("{s:s, s:b}", "name", name, "deleted", 1);
    return 0;
}

/* Forward: the record (creating); the storage; the Docker volume; the record ready with history
 * entry 1. Back: what was made is removed in reverse order; a crash after the record is undone at
 * start-up (volume/startup.c). */
const op_kind volumes_op_create = {
    .name = "volume.create",
    OP_STEPS(volumes_create_steps),
};

/* Forward: the record deleting; the Docker volume; the storage; the record and its history go.
 * Back: a failure at the storage makes the Docker volume again and the record ready; a crash after
 * the mark is finished at start-up. */
const op_kind volumes_op_delete = {
    .name = "volume.delete",
    OP_STEPS(volumes_delete_steps),
};
