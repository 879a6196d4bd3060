/*
 * store.c - the backend-independent face of the store: picks a backend by
 * URL scheme and forwards each call through its function table.
 */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

static const struct store_backend *const store_backends[] = {
    &store_backend_sqlite,
};

int store_open(const char *url, store **out, gb_err *err)
{
    const char *sep = url ? strstr(url, "://") : NULL;
    if (!sep)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s' has no scheme; use sqlite:///path/state.db", url ? url : "");
    size_t scheme_len = (size_t)(sep - url);
    for (size_t i = 0; i < sizeof(store_backends) / sizeof(store_backends[0]); i++) {
        const struct store_backend *b = store_backends[i];
        if (strlen(b->scheme) == scheme_len && strncmp(url, b->scheme, scheme_len) == 0)
            return b->open(url, out, err);
    }
    return err_set(err, ERR_INVALID_PARAMS,
                   "store URL '%s': unknown scheme '%.*s'; known: sqlite:///path/state.db", url,
                   (int)scheme_len, url);
}

void store_close(store *s)
{
    if (s)
        s->backend->close(s);
}

const char *store_backend_name(const store *s)
{
    return s->backend->name;
}

int store_get(store *s, const char *key, store_kv *out, gb_err *err)
{
    return s->backend->get(s, key, out, err);
}

int store_put(store *s, const char *key, const char *value, int64_t *revision, gb_err *err)
{
    store_op op = {.kind = STORE_OP_PUT, .key = key, .value = value};
    bool ok = false;
    return s->backend->txn(s, NULL, 0, &op, 1, &ok, revision, err);
}

int store_delete(store *s, const char *key, gb_err *err)
{
    store_op op = {.kind = STORE_OP_DELETE, .key = key};
    bool ok = false;
    return s->backend->txn(s, NULL, 0, &op, 1, &ok, NULL, err);
}

int store_range(store *s, const char *prefix, store_kvs *out, gb_err *err)
{
    return s->backend->range(s, prefix, out, err);
}

int store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
              bool *succeeded, int64_t *revision, gb_err *err)
{
    return s->backend->txn(s, cmps, ncmps, ops, nops, succeeded, revision, err);
}

int store_revision(store *s, int64_t *revision, gb_err *err)
{
    return s->backend->revision(s, revision, err);
}

void store_kv_free(store_kv *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    kv->key = kv->value = NULL;
}

void store_kvs_free(store_kvs *kvs)
{
    if (!kvs)
        return;
    for (size_t i = 0; i < kvs->n; i++)
        store_kv_free(&kvs->items[i]);
    free(kvs->items);
    kvs->items = NULL;
    kvs->n = 0;
}
