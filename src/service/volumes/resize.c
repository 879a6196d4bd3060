/*
 * resize.c - growing and shrinking a volume without losing a byte.
 *
 * Under the locks of the replica sets that bind the volume and the
 * volume's own (volumes.h), so no set starts or continues its container
 * half-way:
 *   1. checks that change nothing: the size (1029, 1028 when unchanged),
 *      the volume ready and of this backend;
 *   2. who mounts it now (Docker's live view: running, frozen or
 *      restarting containers): the storage layer's in_use;
 *   3. the record is marked "resizing" (no set can bind it meanwhile, and
 *      a crash from here is finished at start-up: the storage layer's
 *      resize can be run again with the same size and completes whatever
 *      the crashed one left);
 *   4. volume_resize: offline (unmount, e2fsck, resize2fs, mount; an XFS
 *      shrink copies into a smaller image) when nothing mounts the volume;
 *      while mounted, whatever the backend can do in use (loop: grow, on
 *      ext4 given CAP_SYS_RESOURCE, on XFS always). The layer refuses
 *      the rest (1107) after checking the data, so a shrink below the data
 *      answers 1030 whatever the use, and changes nothing; the refusal is
 *      reworded to name the replica sets to stop or pause first;
 *   5. one transaction: the new size, version + 1, the history entry, the
 *      mark cleared. On a failure at 4 the mark is cleared and the volume
 *      keeps its size (the layer guarantees it).
 *
 * Fault points (GPUBOX_FAULT): volume.resize.marked, volume.resize.storage
 * (volumes_op_resize, in the operation engine's table, engine.h).
 */
#include "service/volumes/volumes.h"

#include <stdio.h>
#include <string.h>

#include "service/engine.h"
#include "service/keys.h"
#include "service/ops_timer.h"
#include "service/volumes/internal.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/size.h"
#include "util/time.h"

int volumes_commit_resize(app *a, volumes_record *r, uint64_t new_size, gb_err *err)
{
    r->size = new_size;
    size_format(new_size, r->size_text, sizeof(r->size_text));
    r->version++;
    r->resizing_to = 0;
    r->resizing_text[0] = '\0';
    time_iso_now(r->update_time, sizeof(r->update_time));
    char hkey[STORE_KEY_MAX];
    keys_volume_history(hkey, sizeof(hkey), r->name, r->version);
    _cleanup_json_ json_t *hist = volumes_history_entry(r);
    _cleanup_free_ char *hist_text = json_dumps(hist, JSON_COMPACT);
    store_op hist_op = {.kind = STORE_OP_PUT, .key = hkey, .value = hist_text};
    return volumes_record_save(a->store, a, r, &hist_op, 1, err);
}

/* The layer's in-use refusal of step 4 (a shrink, or a grow where the
 * backend cannot grow a mounted volume), saying who mounts it and what to
 * do. */
static int volumes_refuse_in_use(const volumes_record *r, uint64_t new_size, bool grow,
                                 const json_t *mounted, gb_err *err)
{
    char who[300], asked[VOL_SIZE_TEXT_MAX], first[NAME_MAX_LEN + 1] = "{name}";
    volumes_describe_mounts(mounted, who, sizeof(who));
    size_format(new_size, asked, sizeof(asked));
    size_t i;
    json_t *c;
    json_array_foreach(mounted, i, c)
    {
        const char *set = json_string_value(json_object_get(c, "replicaSet"));
        if (set && strlen(set) <= NAME_MAX_LEN) {
            snprintf(first, sizeof(first), "%s", set);
            break;
        }
    }
    const char *why = grow ? "growing a mounted ext4 volume needs CAP_SYS_RESOURCE, which "
                             "gpuboxd does not have on this host"
                           : "a volume shrinks only while nothing has it mounted";
    const char *or_else = grow ? "; or run gpuboxd with CAP_SYS_RESOURCE (XFS volumes, "
                                 "--volume-fs xfs, grow in use without it)"
                               : "";
    return err_set(err, ERR_STATE_CONFLICT,
                   "volume '%s' cannot be resized from %s to %s while it is in use by %s: %s. "
                   "Stop or pause replica set '%s' first (continue a paused one after the "
                   "resize), then resize again%s",
                   r->name, r->size_text, asked, who, why, first, or_else);
}

static int volumes_resize_code(gb_err *err)
{
    if (err && (err->code == ERR_INTERNAL || err->code == ERR_CONFLICT))
        err->code = ERR_VOLUME_PATCH_FAILED;
    return -1;
}

static int volumes_resize_checks(app *a, const volumes_record *r, uint64_t new_size, gb_err *err)
{
    if (r->state != VOL_STATE_READY)
        return err_set(err, ERR_STATE_CONFLICT, "volume '%s' is being %s", r->name,
                       r->state == VOL_STATE_CREATING ? "created" : "deleted");
    if (volumes_check_backend(a, r, err) < 0)
        return -1;
    /* After an unfinished resize the storage may be at either size: let
     * any size through so the layer settles it. */
    if (new_size == r->size && !r->resizing_to)
        return err_set(err, ERR_VOLUME_SIZE_UNCHANGED,
                       "volume '%s' is already %s; ask for another size", r->name, r->size_text);
    return 0;
}

/* What one resize works with (engine.h). */
typedef struct volumes_rz {
    app *a;
    volumes_record *r;
    uint64_t new_size;
    bool in_use;
    bool marked; /* the mark was written */
} volumes_rz;

/* marked, forward: the record says which size it is going to. */
static int volumes_resize_mark(void *ctx, gb_err *err)
{
    volumes_rz *c = ctx;
    c->r->resizing_to = c->new_size;
    size_format(c->new_size, c->r->resizing_text, sizeof(c->r->resizing_text));
    if (volumes_record_save(c->a->store, c->a, c->r, NULL, 0, err) < 0)
        return -1;
    c->marked = true;
    return 0;
}

/* marked, back: the mark cleared (the size stays). */
static int volumes_resize_mark_back(void *ctx, gb_err *err)
{
    volumes_rz *c = ctx;
    c->r->resizing_to = 0;
    c->r->resizing_text[0] = '\0';
    if (volumes_record_save(c->a->store, c->a, c->r, NULL, 0, err) < 0)
        log_error("volume %s: clearing the resize mark after a failed resize: %s", c->r->name,
                  err->msg);
    return 0;
}

/* storage, forward: the layer resizes it, or refuses and changes nothing. */
static int volumes_resize_storage(void *ctx, gb_err *err)
{
    volumes_rz *c = ctx;
    return volume_resize(&c->a->volumes->env, c->r->name, c->r->docker_mountpoint, c->new_size,
                         c->in_use, err);
}

static const op_step_def volumes_resize_steps[] = {
    {OP_STEP_MARKED, volumes_resize_mark, volumes_resize_mark_back},
    {OP_STEP_STORAGE, volumes_resize_storage, NULL},
};

int volumes_resize(app *a, const char *name, const char *size_text, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "volume_resize", out, err);
    uint64_t new_size = 0;
    if (name_check_volume(name, err) < 0 || size_parse(size_text, &new_size, err) < 0)
        return -1;
    _cleanup_(volumes_locks_release) volumes_locks locks = {0};
    _cleanup_(volumes_record_free) volumes_record r = {0};
    _cleanup_json_ json_t *mounted = NULL;
    if (volumes_lock_with_users(a, name, &locks, NULL, err) < 0 ||
        volumes_load_existing(a, name, &r, err) < 0 ||
        volumes_resize_checks(a, &r, new_size, err) < 0 ||
        volumes_mounted_by(a, r.docker_volume, &mounted, err) < 0)
        return -1;
    bool in_use = json_array_size(mounted) > 0;
    uint64_t old_size = r.size;
    char old_text[VOL_SIZE_TEXT_MAX];
    snprintf(old_text, sizeof(old_text), "%s", r.size_text);

    volumes_rz c = {.a = a, .r = &r, .new_size = new_size, .in_use = in_use};
    if (op_steps_run(&volumes_op_resize, 0, &c, err) < 0) {
        if (!c.marked)
            return volumes_resize_code(err);
        /* The layer refuses what it cannot do mounted, changing nothing:
         * say who mounts it and what to do. */
        bool grow = new_size > old_size;
        if (in_use && err->code == ERR_STATE_CONFLICT &&
            !(grow && volume_grows_online(&a->volumes->env, name)))
            return volumes_refuse_in_use(&r, new_size, grow, mounted, err);
        return volumes_resize_code(err);
    }
    volumes_set_unavailable(a, name, NULL); /* the layer attached it */
    if (volumes_commit_resize(a, &r, new_size, err) < 0)
        return err_prefix(err,
                          "volume '%s' has its new size, but recording it failed (start-up "
                          "records it)",
                          name);
    log_info("volume %s: resized from %s to %s (%s), version %d", name, old_text, r.size_text,
             in_use ? "online, in use" : "offline", r.version);
    *out =
        json_pack("{s:s, s:I, s:s, s:I, s:s, s:i, s:b}", "name", name, "size", (json_int_t)r.size,
                  "sizeText", r.size_text, "previousSize", (json_int_t)old_size, "previousSizeText",
                  old_text, "version", r.version, "online", in_use);
    if (!*out)
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}

/* Forward: the record resizing; the storage resized; the new size, version + 1 and the history
 * entry in one transaction, the mark cleared. Back: a failure at the storage clears the mark (the
 * size stays); a crash after the mark is finished at start-up. */
const op_kind volumes_op_resize = {
    .name = "volume.resize",
    OP_STEPS(volumes_resize_steps),
};
