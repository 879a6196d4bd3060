/*
 * store_json.c - the service's records in the store, as JSON (see
 * store_json.h).
 */
#include "service/records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/time.h"
#include "util/xalloc.h"

/* kv's value as JSON; NULL when it is not, with the error naming it what. */
static json_t *store_record_value(const store_kv *kv, const char *what, gb_err *err)
{
    json_error_t jerr;
    json_t *value = json_loads(kv->value, 0, &jerr);
    if (!value)
        err_set(err, ERR_INTERNAL, "reading %s from the store: not JSON: %s", what, jerr.text);
    return value;
}

int records_get_json(store *s, const char *key, const char *what, json_t **out,
                     int64_t *mod_revision, gb_err *err)
{
    *out = NULL;
    _cleanup_(store_kv_free) store_kv kv = {0};
    int found = store_get(s, key, &kv, err);
    if (found <= 0)
        return found;
    if (!(*out = store_record_value(&kv, what, err)))
        return -1;
    if (mod_revision)
        *mod_revision = kv.mod_revision;
    return 1;
}

int records_scan(store *s, const char *prefix, bool (*is_record)(const char *key), records_fn each,
                 void *ctx, gb_err *err)
{
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(s, prefix, &kvs, err) < 0)
        return -1;
    for (size_t i = 0; i < kvs.n; i++) {
        const store_kv *kv = &kvs.items[i];
        if (is_record && !is_record(kv->key))
            continue;
        _cleanup_json_ json_t *value = store_record_value(kv, kv->key, err);
        if (!value)
            return -1;
        if (each(ctx, kv->key, value, kv->mod_revision, err) < 0)
            return err_prefix(err, "reading %s from the store", kv->key);
    }
    return 0;
}

struct store_records_array {
    char *items;
    size_t n, cap, size;
    records_fn take;
};

/* Take one record into the next element (records_fn). */
static int store_records_append(void *ctx, const char *key, json_t *value, int64_t mod_revision,
                                gb_err *err)
{
    struct store_records_array *a = ctx;
    if (a->n == a->cap) {
        a->cap *= 2;
        a->items = xreallocarray(a->items, a->cap, a->size);
    }
    void *elem = a->items + a->n * a->size;
    memset(elem, 0, a->size);
    int kept = a->take(elem, key, value, mod_revision, err);
    if (kept > 0)
        a->n++;
    return kept < 0 ? -1 : 0;
}

void *records_load_all(store *s, const char *prefix, bool (*is_record)(const char *key),
                       size_t size, records_fn take, void (*drop)(void *elem), size_t *n,
                       gb_err *err)
{
    struct store_records_array a = {
        .items = xcalloc(8, size), .cap = 8, .size = size, .take = take};
    *n = 0;
    if (records_scan(s, prefix, is_record, store_records_append, &a, err) < 0) {
        for (size_t i = 0; i < a.n; i++)
            drop(a.items + i * size);
        free(a.items);
        return NULL;
    }
    *n = a.n;
    return a.items;
}

int records_load(store *s, const records_kind *k, const char *name, void *out, gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (!k->key(key, sizeof(key), name))
        return err_set(err, ERR_INVALID_NAME, "%s name is too long", k->noun);
    char what[STORE_KEY_MAX];
    snprintf(what, sizeof(what), "%s %s", k->noun, name);
    _cleanup_json_ json_t *value = NULL;
    int64_t rev = 0;
    int found = records_get_json(s, key, what, &value, &rev, err);
    if (found <= 0)
        return found;
    if (k->parse(out, value, rev, err) < 0)
        return err_prefix(err, "reading %s from the store", what);
    return 1;
}

void records_stamp(char *create_time, char *update_time, size_t size)
{
    time_iso_now(update_time, size);
    if (!create_time[0])
        memcpy(create_time, update_time, size);
}

/* The record's transaction: on s alone (txn NULL), or through txn. */
static int store_record_txn(store *s, const records_kind *k, const char *name, const json_t *value,
                            int64_t *mod_revision, const store_op *extra, size_t nextra,
                            records_txn_fn txn, void *ctx, gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (!k->key(key, sizeof(key), name))
        return err_set(err, ERR_INVALID_NAME, "%s name is too long", k->noun);
    if (!value)
        return err_set(err, ERR_INTERNAL, "%s %s cannot be written as JSON", k->noun, name);
    _cleanup_free_ char *text = json_dumps(value, JSON_COMPACT);
    _cleanup_free_ store_op *ops = xcalloc(nextra + 1, sizeof(*ops));
    ops[0] = (store_op){.kind = STORE_OP_PUT, .key = key, .value = text};
    for (size_t i = 0; i < nextra; i++)
        ops[i + 1] = extra[i];
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = *mod_revision};
    bool landed = false;
    int64_t rev = 0;
    int rc = txn ? txn(ctx, &cmp, 1, ops, nextra + 1, &landed, &rev, err)
                 : store_txn(s, &cmp, 1, ops, nextra + 1, &landed, &rev, err);
    if (rc < 0)
        return err && err->code == ERR_QUOTA_EXCEEDED
                   ? -1
                   : err_prefix(err, "saving %s %s", k->noun, name);
    if (!landed && !*mod_revision && k->exists)
        return err_set(err, k->exists_code, "%s %s %s", k->noun, name, k->exists);
    if (!landed)
        return err_set(err, ERR_CONFLICT, "%s %s was changed by someone else meanwhile; try again",
                       k->noun, name);
    *mod_revision = rev;
    return 0;
}

int records_save_plain(store *s, const records_kind *k, const char *name, const json_t *value,
                       int64_t *mod_revision, const store_op *extra, size_t nextra, gb_err *err)
{
    return store_record_txn(s, k, name, value, mod_revision, extra, nextra, NULL, NULL, err);
}

int records_save_via(store *s, const records_kind *k, const char *name, const json_t *value,
                     int64_t *mod_revision, const store_op *extra, size_t nextra,
                     records_txn_fn txn, void *ctx, gb_err *err)
{
    return store_record_txn(s, k, name, value, mod_revision, extra, nextra, txn, ctx, err);
}
