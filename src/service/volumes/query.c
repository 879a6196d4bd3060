/*
 * query.c - list, info and history of volumes. Read-only and
 * without the name lock: an answer given while a resize runs may show the
 * volume detached for a moment, and says "resizing".
 */
#include "service/volumes/volumes.h"

#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "service/volumes/internal.h"
#include "util/cleanup.h"
#include "util/size.h"

/* What the list and the info share: the record as a user sees it. */
static json_t *volumes_summary(const volumes_record *r)
{
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:b, s:i, s:s, s:s, s:s, s:s}", "name", r->name,
                          "size", (json_int_t)r->size, "sizeText", r->size_text, "backend",
                          r->backend, "enforced", r->enforced, "version", r->version, "state",
                          volumes_state_name(r->state), "dockerVolume", r->docker_volume,
                          "createTime", r->create_time, "updateTime", r->update_time);
    if (j)
        json_object_set_new(j, "owner", json_string(r->owner));
    if (j && volumes_record_fs(r))
        json_object_set_new(j, "filesystem", json_string(volumes_record_fs(r)));
    if (j && r->resizing_to)
        json_object_set_new(j, "resizingTo", json_string(r->resizing_text));
    return j;
}

int volumes_list(app *a, json_t **out, gb_err *err)
{
    volumes_record *recs = NULL;
    size_t n = 0;
    if (volumes_records_load_all(a->store, &recs, &n, err) < 0)
        return -1;
    _cleanup_json_ json_t *list = json_array();
    _cleanup_json_ json_t *leaving = NULL;
    if (a->volumes) {
        pthread_mutex_lock(&a->volumes->mutex);
        leaving = json_copy(a->volumes->leaving);
        pthread_mutex_unlock(&a->volumes->mutex);
    }
    for (size_t i = 0; list && i < n; i++)
        if (users_caller_sees(recs[i].owner) && !json_object_get(leaving, recs[i].name))
            json_array_append_new(list, volumes_summary(&recs[i]));
    volumes_records_free(recs, n);
    if (!list || !(*out = json_pack("{s:O}", "volumes", list)))
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}

/* used, usedText, filesystemSize, attached (and problem when it is not). */
static void volumes_info_usage(app *a, const volumes_record *r, json_t *info)
{
    uint64_t used = 0, fs_size = 0;
    char why[256], used_text[VOL_SIZE_TEXT_MAX];
    gb_err e = GB_ERR_INIT;
    bool unavailable = volumes_unavailable(a, r->name, why, sizeof(why));
    if (r->state != VOL_STATE_READY || volumes_check_backend(a, r, &e) < 0 ||
        volume_usage(&a->volumes->env, r->name, r->docker_mountpoint, &used, &fs_size, &e) < 0) {
        json_object_set_new(info, "attached", json_false());
        json_object_set_new(info, "used", json_null());
        json_object_set_new(info, "problem",
                            json_string(unavailable ? why
                                        : e.msg[0]  ? e.msg
                                                    : "not ready"));
        return;
    }
    size_format(used, used_text, sizeof(used_text));
    json_object_set_new(info, "attached", json_true());
    json_object_set_new(info, "used", json_integer((json_int_t)used));
    json_object_set_new(info, "usedText", json_string(used_text));
    /* What df shows: a little under the size (the filesystem's own
     * overhead); 0 when the backend does not enforce a size. */
    json_object_set_new(info, "filesystemSize", json_integer((json_int_t)fs_size));
}

int volumes_usage_all(app *a, json_t **out, gb_err *err)
{
    volumes_record *recs = NULL;
    size_t n = 0;
    if (volumes_records_load_all(a->store, &recs, &n, err) < 0)
        return -1;
    _cleanup_json_ json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (!users_caller_sees(recs[i].owner))
            continue;
        json_t *u =
            json_pack("{s:s, s:s, s:s, s:I}", "name", recs[i].name, "backend", recs[i].backend,
                      "state", volumes_state_name(recs[i].state), "size", (json_int_t)recs[i].size);
        json_t *usage = json_object();
        volumes_info_usage(a, &recs[i], usage);
        json_object_set(u, "used", json_object_get(usage, "used"));
        json_decref(usage);
        json_array_append_new(list, u);
    }
    volumes_records_free(recs, n);
    *out = steal_ptr(&list);
    return 0;
}

/* gpu-docker-api's record of one volume version, as its GET /volumes/{name}
 * ("Info") and each history entry's "status" carry it: {version,
 * createTime, opt: {Driver, DriverOpts: {size}, Name}}. Name is the Docker
 * volume's name (gpu-docker-api's was "bar-1"; gpubox's keeps one Docker
 * volume through every size). */
static json_t *volumes_compat_status(int version, const char *create_time, const char *size_text,
                                     const char *docker_volume)
{
    return json_pack("{s:i, s:s, s:{s:s, s:{s:s}, s:s}}", "version", version, "createTime",
                     create_time, "opt", "Driver", "local", "DriverOpts", "size", size_text, "Name",
                     docker_volume);
}

int volumes_info(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_(volumes_record_free) volumes_record r = {0};
    _cleanup_json_ json_t *sets = NULL, *mounted = NULL;
    if (volumes_load_existing(a, name, &r, err) < 0 || volumes_bound_by(a, name, &sets, err) < 0 ||
        volumes_mounted_by(a, r.docker_volume, &mounted, err) < 0) {
        if (err->code == ERR_INTERNAL)
            err->code = ERR_VOLUME_INFO_FAILED;
        return -1;
    }
    _cleanup_json_ json_t *info = volumes_summary(&r);
    if (!info)
        return err_set(err, ERR_INTERNAL, "out of memory");
    volumes_info_usage(a, &r, info);
    /* usedBy keeps the fields gpubox answered before; dest is for messages */
    size_t i;
    json_t *s;
    json_array_foreach(sets, i, s)
    {
        json_object_del(s, "dest");
    }
    json_object_set(info, "usedBy", sets);
    json_object_set(info, "mountedBy", mounted);
    json_object_set_new(info, "inUse", json_boolean(json_array_size(mounted) > 0));
    /* "Info" is gpu-docker-api's answer, beside gpubox's "info". */
    json_t *compat = volumes_compat_status(r.version, r.update_time, r.size_text, r.docker_volume);
    if (!compat || !(*out = json_pack("{s:O, s:o}", "info", info, "Info", compat)))
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}

int volumes_history(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_(volumes_record_free) volumes_record r = {0};
    if (volumes_load_existing(a, name, &r, err) < 0)
        return -1;
    char prefix[STORE_KEY_MAX];
    keys_volume_history_prefix(prefix, sizeof(prefix), name);
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0) {
        err->code = ERR_VOLUME_HISTORY_FAILED;
        return err_prefix(err, "reading the size history of volume %s", name);
    }
    _cleanup_json_ json_t *history = json_array();
    /* Keys sort by version (zero-padded): walk backwards for newest first. */
    for (size_t i = kvs.n; i > 0; i--) {
        json_t *entry = json_loads(kvs.items[i - 1].value, 0, NULL);
        if (!entry)
            return err_set(err, ERR_VOLUME_HISTORY_FAILED,
                           "history entry %s of volume %s is not JSON", kvs.items[i - 1].key, name);
        json_array_append_new(history, entry);
        /* gpu-docker-api's fields beside gpubox's: createTime, and status. */
        const char *time = json_string_value(json_object_get(entry, "time"));
        const char *size = json_string_value(json_object_get(entry, "sizeText"));
        int version = (int)json_integer_value(json_object_get(entry, "version"));
        json_object_set_new(entry, "createTime", json_string(time ? time : ""));
        json_object_set_new(
            entry, "status",
            volumes_compat_status(version, time ? time : "", size ? size : "", r.docker_volume));
    }
    if (!(*out = json_pack("{s:O}", "history", history)))
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}
