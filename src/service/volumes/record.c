/*
 * record.c - volume records: JSON form, store load/save/delete, and the
 * history entries (see volume/record.h).
 */
#include "service/volumes/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/records.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/json.h"

static const char *const volumes_state_names[] = {
    [VOL_STATE_CREATING] = "creating",
    [VOL_STATE_READY] = "ready",
    [VOL_STATE_DELETING] = "deleting",
};

const char *volumes_state_name(enum volumes_state s)
{
    return s <= VOL_STATE_DELETING ? volumes_state_names[s] : "unknown";
}

static int volumes_state_parse(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(volumes_state_names); i++)
        if (strcmp(s, volumes_state_names[i]) == 0)
            return (int)i;
    return -1;
}

json_t *volumes_record_to_json(const volumes_record *r)
{
    json_t *j = json_pack(
        "{s:s, s:s, s:i, s:I, s:s, s:s, s:b, s:s, s:O, s:s, s:s, s:s}", "name", r->name, "state",
        volumes_state_name(r->state), "version", r->version, "size", (json_int_t)r->size,
        "sizeText", r->size_text, "backend", r->backend, "enforced", r->enforced, "dockerVolume",
        r->docker_volume, "dockerOptions", r->docker_options, "dockerMountpoint",
        r->docker_mountpoint, "createTime", r->create_time, "updateTime", r->update_time);
    if (j && r->filesystem[0] &&
        json_object_set_new(j, "filesystem", json_string(r->filesystem)) < 0) {
        json_decref(j);
        return NULL;
    }
    if (j && r->owner[0] && json_object_set_new(j, "owner", json_string(r->owner)) < 0) {
        json_decref(j);
        return NULL;
    }
    if (j && r->resizing_to &&
        json_object_set_new(j, "resizing",
                            json_pack("{s:I, s:s}", "size", (json_int_t)r->resizing_to, "sizeText",
                                      r->resizing_text)) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

const char *volumes_record_fs(const volumes_record *r)
{
    if (r->filesystem[0])
        return r->filesystem;
    return strcmp(r->backend, "loop") == 0 ? "ext4" : NULL;
}

json_t *volumes_history_entry(const volumes_record *r)
{
    return json_pack("{s:i, s:I, s:s, s:s}", "version", r->version, "size", (json_int_t)r->size,
                     "sizeText", r->size_text, "time", r->update_time);
}

static int copy_field(const json_t *j, const char *field, char *dst, size_t size, gb_err *err)
{
    const char *v = "";
    if (json_field_string(j, "volume record", field, &v, false, err) < 0)
        return -1;
    if (strlen(v) >= size)
        return err_set(err, ERR_INTERNAL, "volume record field %s is too long", field);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int volumes_size_field(const json_t *j, const char *field, uint64_t *out, gb_err *err)
{
    long long v = 0;
    if (json_field_int(j, "volume record", field, &v, true, err) < 0)
        return -1;
    if (v < 0)
        return err_set(err, ERR_INTERNAL, "volume record field %s is negative", field);
    *out = (uint64_t)v;
    return 0;
}

static int volumes_resizing_from_json(const json_t *j, volumes_record *out, gb_err *err)
{
    json_t *resizing = NULL;
    int present = json_field_object(j, "volume record", "resizing", &resizing, false, err);
    if (present <= 0)
        return present;
    return volumes_size_field(resizing, "size", &out->resizing_to, err) < 0 ||
                   copy_field(resizing, "sizeText", out->resizing_text, sizeof(out->resizing_text),
                              err) < 0
               ? -1
               : 0;
}

int volumes_record_from_json(const json_t *j, volumes_record *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *state = NULL;
    long long version = 0;
    json_t *opts = NULL;
    if (!json_is_object(j) || copy_field(j, "name", out->name, sizeof(out->name), err) < 0 ||
        json_field_string(j, "volume record", "state", &state, true, err) < 0 ||
        json_field_int(j, "volume record", "version", &version, true, err) < 0 ||
        volumes_size_field(j, "size", &out->size, err) < 0 ||
        copy_field(j, "sizeText", out->size_text, sizeof(out->size_text), err) < 0 ||
        copy_field(j, "backend", out->backend, sizeof(out->backend), err) < 0 ||
        json_field_bool(j, "volume record", "enforced", &out->enforced, false, err) < 0 ||
        copy_field(j, "filesystem", out->filesystem, sizeof(out->filesystem), err) < 0 ||
        copy_field(j, "dockerVolume", out->docker_volume, sizeof(out->docker_volume), err) < 0 ||
        json_field_object(j, "volume record", "dockerOptions", &opts, false, err) < 0 ||
        copy_field(j, "dockerMountpoint", out->docker_mountpoint, sizeof(out->docker_mountpoint),
                   err) < 0 ||
        copy_field(j, "createTime", out->create_time, sizeof(out->create_time), err) < 0 ||
        copy_field(j, "updateTime", out->update_time, sizeof(out->update_time), err) < 0 ||
        copy_field(j, "owner", out->owner, sizeof(out->owner), err) < 0 ||
        volumes_resizing_from_json(j, out, err) < 0)
        goto fail;
    int s = volumes_state_parse(state);
    if (s < 0 || version < 0 || version > 1000000000) {
        err_set(err, ERR_INTERNAL, "volume record of %s has state '%s', version %lld", out->name,
                state, version);
        goto fail;
    }
    out->state = (enum volumes_state)s;
    out->version = (int)version;
    out->docker_options = opts ? json_deep_copy(opts) : json_object();
    return 0;
fail:
    if (err)
        err->code = ERR_INTERNAL;
    volumes_record_free(out);
    return -1;
}

/* Two requests creating one name: the second is told it exists. */
STORE_RECORD_KIND(volumes_record, volumes_record_from_json, .noun = "volume", .key = keys_volume,
                  .exists = "was just created by another request",
                  .exists_code = ERR_VOLUME_EXISTS);

int volumes_record_load(store *s, const char *name, volumes_record *out, gb_err *err)
{
    return records_load(s, &volumes_record_kind, name, out, err);
}

void volumes_record_free(volumes_record *r)
{
    if (!r)
        return;
    json_decref(r->docker_options);
    r->docker_options = NULL;
}

void volumes_record_hold(const volumes_record *r, users_ledger_hold *h)
{
    /* What it holds is the larger of its size and a resize in flight. */
    *h = (users_ledger_hold){.volume = true, .exists = true};
    snprintf(h->owner, sizeof(h->owner), "%s", r->owner);
    snprintf(h->name, sizeof(h->name), "%s", r->name);
    h->volume_bytes = (int64_t)(r->resizing_to > r->size ? r->resizing_to : r->size);
}

int volumes_record_save(store *s, app *a, volumes_record *r, const store_op *extra, size_t nextra,
                        gb_err *err)
{
    records_stamp(r->create_time, r->update_time, sizeof(r->update_time));
    _cleanup_json_ json_t *j = volumes_record_to_json(r);
    users_ledger_hold h;
    volumes_record_hold(r, &h);
    if (!a)
        return records_save_plain(s, &volumes_record_kind, r->name, j, &r->mod_revision, extra,
                                  nextra, err);
    return users_ledger_record_save(a, &volumes_record_kind, r->name, j, &r->mod_revision, extra,
                                    nextra, &h, NULL, err);
}

int volumes_record_delete(store *s, app *a, const volumes_record *r, gb_err *err)
{
    char key[STORE_KEY_MAX], prefix[STORE_KEY_MAX];
    keys_volume(key, sizeof(key), r->name);
    keys_volume_history_prefix(prefix, sizeof(prefix), r->name);
    store_op ops[] = {{.kind = STORE_OP_DELETE, .key = key},
                      {.kind = STORE_OP_DELETE_PREFIX, .key = prefix}};
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = r->mod_revision};
    bool ok = false;
    users_ledger_hold gone;
    volumes_record_hold(r, &gone);
    gone.exists = false;
    int rc = a ? users_ledger_txn(a, &gone, NULL, &cmp, 1, ops, ARRAY_SIZE(ops), &ok, NULL, err)
               : store_txn(s, &cmp, 1, ops, ARRAY_SIZE(ops), &ok, NULL, err);
    if (rc < 0)
        return err_prefix(err, "deleting the record of volume %s", r->name);
    if (!ok)
        return err_set(err, ERR_CONFLICT, "volume %s changed meanwhile; try again", r->name);
    return 0;
}

/* Keys right under KEYS_VOLUMES; a deeper one is not a record of this layout. */
static bool volumes_key_is_record(const char *key)
{
    return !strchr(key + strlen(KEYS_VOLUMES), '/');
}

/* Take one record into the array (records_fn): always kept. */
static int volumes_records_keep(void *elem, const char *key, json_t *value, int64_t mod_revision,
                                gb_err *err)
{
    (void)key;
    return volumes_record_parse(elem, value, mod_revision, err) < 0 ? -1 : 1;
}

static void volumes_record_drop(void *r)
{
    volumes_record_free(r);
}

int volumes_records_load_all(store *s, volumes_record **out, size_t *n, gb_err *err)
{
    *out = records_load_all(s, KEYS_VOLUMES, volumes_key_is_record, sizeof(**out),
                            volumes_records_keep, volumes_record_drop, n, err);
    return *out ? 0 : err_prefix(err, "listing volumes");
}

void volumes_records_free(volumes_record *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        volumes_record_free(&v[i]);
    free(v);
}
