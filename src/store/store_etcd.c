/*
 * store_etcd.c - the etcd store backend: gpubox's keys in an etcd v3
 * cluster, reached over its JSON gateway (store_etcd_client.c sends the
 * requests; this file maps the store model onto them).
 *
 * Layout: gpubox's key K is etcd's key <prefix>K, where the prefix comes
 * from the URL path ("" by default, "/gpubox/" for etcd://h:p/gpubox), so
 * several gpubox servers - or other programs - can share one etcd. Values
 * are stored as they are. The gateway carries keys and values as base64
 * and int64 numbers as JSON strings.
 *
 * The store model is etcd's own, so the mapping is direct:
 *   get       range of one key
 *   range     range [prefix, successor(prefix)), read in pages of
 *             ETCD_RANGE_PAGE keys, every page at the revision of the first
 *             so the result is one consistent snapshot
 *   txn       txn: ABSENT is create_revision == 0, EXISTS create_revision
 *             > 0, MOD_REVISION mod_revision == n, VALUE value == v (etcd
 *             compares an absent key as all-zero, and never equal in value)
 *   revision  header.revision of a one-key range
 * Revisions are etcd's: one counter for the whole cluster, raised by any
 * client's write, including writes outside the prefix.
 *
 * Relative keys (store.h): a key's leading "../" each drop one trailing
 * segment of the prefix, so on "/gpubox/nodes/a/" the key
 * "../../users/bob" is etcd's "/gpubox/users/bob". store.c has checked
 * them against the prefix's depth; here they are only mapped, and a range
 * of a relative prefix gives its keys back in that relative form.
 *
 * Once the store is claimed (store_etcd_claim.c), every transaction that
 * writes carries a fence: one more comparison, that the owner key is still
 * attached to this handle's lease. A daemon whose claim has passed to
 * another can then write nothing, however late its request arrives.
 */
#include "util/xalloc.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_etcd_internal.h"
#include "store/store_internal.h"
#include "util/base64.h"
#include "util/cleanup.h"

/* Keys per range request. Several pages are read when a range is larger. */
#define ETCD_RANGE_PAGE 128
/* A page read at a pinned revision fails once etcd compacts past it; the
 * range then starts again at the new revision, this many times at most. */
#define ETCD_RANGE_RESTARTS 3

/* ---- JSON pieces ----------------------------------------------------------- */

/* Bytes as a base64 JSON string. */
json_t *etcd_json_bytes(const char *data, size_t n)
{
    _cleanup_free_ char *b64 = base64_encode(data, n);
    return json_string(b64);
}

json_t *etcd_json_int64(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    return json_string(buf);
}

/* An int64 field of an answer: a JSON string of digits, or absent (zero),
 * as protobuf's JSON mapping writes them. */
int64_t etcd_json_get_int64(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    return s ? strtoll(s, NULL, 10) : 0;
}

/* Where a gpubox key (or prefix) lives in etcd: under the first len bytes
 * of the handle's prefix, which it reached by climbing up segments (0 for
 * a key that is not relative: the whole prefix). */
struct etcd_key_base {
    size_t len;
    size_t up;
};

/* key's base, and in *rest what follows its leading "../". */
static struct etcd_key_base etcd_store_key_base(const struct etcd_store *es, const char *key,
                                                const char **rest)
{
    struct etcd_key_base base = {.len = es->prefix_len, .up = 0};
    *rest = key;
    /* store.c let only keys through whose "../" the prefix has room for. */
    if (store_key_split(key, &base.up, rest) < 0 ||
        store_prefix_up(es->prefix, es->prefix_len, base.up, &base.len) < 0) {
        base = (struct etcd_key_base){.len = es->prefix_len, .up = 0};
        *rest = key;
    }
    return base;
}

/* prefix + key, the prefix climbed by key's "../": the etcd key of a gpubox
 * key. */
static char *etcd_store_full_key(const struct etcd_store *es, const char *key, size_t *len)
{
    const char *rest = NULL;
    struct etcd_key_base base = etcd_store_key_base(es, key, &rest);
    size_t rlen = strlen(rest);
    char *full = xmalloc(base.len + rlen + 1);
    memcpy(full, es->prefix, base.len);
    memcpy(full + base.len, rest, rlen + 1);
    *len = base.len + rlen;
    return full;
}

json_t *etcd_store_json_key(const struct etcd_store *es, const char *key)
{
    size_t len = 0;
    _cleanup_free_ char *full = etcd_store_full_key(es, key, &len);
    return etcd_json_bytes(full, len);
}

/* range_end for "every key starting with key[0..len)": drop trailing 0xff
 * bytes and add one to the last byte. With nothing left (all 0xff, or no
 * bytes at all) it is "\0", etcd's "to the end of the keyspace". */
static json_t *etcd_json_range_end(const char *key, size_t len)
{
    while (len > 0 && (unsigned char)key[len - 1] == 0xff)
        len--;
    if (len == 0)
        return etcd_json_bytes("", 1);
    _cleanup_free_ char *end = xmalloc(len);
    memcpy(end, key, len);
    end[len - 1] = (char)((unsigned char)end[len - 1] + 1);
    return etcd_json_bytes(end, len);
}

/* Decode a base64 field that holds text gpubox wrote: no NUL bytes inside. */
static int etcd_store_decode(json_t *obj, const char *name, const char *key_for_msg, char **out,
                             size_t *len, gb_err *err)
{
    const char *b64 = json_string_value(json_object_get(obj, name));
    if (!b64)
        b64 = ""; /* protobuf's JSON leaves out empty fields */
    if (base64_decode(b64, strlen(b64), out, len) < 0)
        return err_set(err, ERR_INTERNAL, "etcd store: etcd sent a %s that is not base64%s%s", name,
                       key_for_msg ? " for key " : "", key_for_msg ? key_for_msg : "");
    if (memchr(*out, '\0', *len)) {
        err_set(err, ERR_INTERNAL,
                "etcd store: the %s%s%s holds a NUL byte; gpubox never writes those - "
                "does another program write under the same key prefix?",
                name, key_for_msg ? " of key " : "", key_for_msg ? key_for_msg : "");
        free(steal_ptr(out));
        return -1;
    }
    return 0;
}

/* One entry of a range answer's "kvs" as a store_kv, its key as the call
 * named it: without the prefix part of base, with base.up "../" in front;
 * *full gets the etcd key (for paging). */
static int etcd_store_kv_from_json(const struct etcd_store *es, struct etcd_key_base base,
                                   json_t *j, store_kv *kv, char **full, size_t *full_len,
                                   gb_err *err)
{
    *kv = (store_kv){0};
    size_t value_len = 0;
    if (etcd_store_decode(j, "key", NULL, full, full_len, err) < 0)
        return -1;
    if (*full_len <= base.len || memcmp(*full, es->prefix, base.len) != 0) {
        err_set(err, ERR_INTERNAL,
                "etcd store: etcd returned key '%s', which is not under the prefix '%.*s'", *full,
                (int)base.len, es->prefix);
        free(steal_ptr(full));
        return -1;
    }
    /* gpubox never writes a key with a ".." segment (store.c refuses them);
     * one from elsewhere that begins with "../" would read as a relative
     * key, naming another. */
    if (strncmp(*full + base.len, STORE_KEY_UP, STORE_KEY_UP_LEN) == 0) {
        err_set(err, ERR_INTERNAL,
                "etcd store: etcd holds key '%s', whose '..' segment would read as a relative "
                "key; gpubox never writes those - does another program write under the same key "
                "prefix?",
                *full);
        free(steal_ptr(full));
        return -1;
    }
    kv->key = xmalloc(base.up * STORE_KEY_UP_LEN + *full_len - base.len + 1);
    for (size_t i = 0; i < base.up; i++)
        memcpy(kv->key + i * STORE_KEY_UP_LEN, STORE_KEY_UP, STORE_KEY_UP_LEN);
    memcpy(kv->key + base.up * STORE_KEY_UP_LEN, *full + base.len, *full_len - base.len + 1);
    if (etcd_store_decode(j, "value", kv->key, &kv->value, &value_len, err) < 0) {
        store_kv_free(kv);
        free(steal_ptr(full));
        return -1;
    }
    kv->create_revision = etcd_json_get_int64(j, "create_revision");
    kv->mod_revision = etcd_json_get_int64(j, "mod_revision");
    return 0;
}

/* ---- reads ------------------------------------------------------------------ */

static int etcd_store_get(store *s, const char *key, store_kv *out, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    _cleanup_json_ json_t *body = json_object();
    _cleanup_json_ json_t *reply = NULL;
    json_object_set_new(body, "key", etcd_store_json_key(es, key));
    if (etcd_client_call(es->client, "/v3/kv/range", body, false, &reply, NULL, err) < 0)
        return err_prefix(err, "reading key '%s'", key);
    json_t *kvs = json_object_get(reply, "kvs");
    if (json_array_size(kvs) == 0)
        return 0;
    _cleanup_free_ char *full = NULL;
    size_t full_len = 0;
    const char *rest = NULL;
    struct etcd_key_base base = etcd_store_key_base(es, key, &rest);
    if (etcd_store_kv_from_json(es, base, json_array_get(kvs, 0), out, &full, &full_len, err) < 0)
        return -1;
    return 1;
}

/* A one-key range with keys_only: the key's revisions without its value. */
static int etcd_store_get_revision(store *s, const char *key, int64_t *mod_revision, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    _cleanup_json_ json_t *body = json_object();
    _cleanup_json_ json_t *reply = NULL;
    json_object_set_new(body, "key", etcd_store_json_key(es, key));
    json_object_set_new(body, "keys_only", json_true());
    if (etcd_client_call(es->client, "/v3/kv/range", body, false, &reply, NULL, err) < 0)
        return err_prefix(err, "reading key '%s'", key);
    json_t *kvs = json_object_get(reply, "kvs");
    if (json_array_size(kvs) == 0)
        return 0;
    *mod_revision = etcd_json_get_int64(json_array_get(kvs, 0), "mod_revision");
    if (*mod_revision <= 0)
        return err_set(err, ERR_INTERNAL, "etcd at %s sent no mod_revision for key '%s'",
                       etcd_client_endpoints(es->client), key);
    return 1;
}

static void etcd_store_kvs_grow(store_kvs *kvs, size_t *cap, size_t more)
{
    if (kvs->n + more <= *cap)
        return;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < kvs->n + more)
        ncap *= 2;
    kvs->items = xrealloc(kvs->items, ncap * sizeof(*kvs->items));
    *cap = ncap;
}

/* One page of a range: keys from start up to range_end, at revision rev
 * (0 = now), named relative to base. Appends to kvs; *last gets the etcd
 * key of the last entry. */
static int etcd_store_range_page(struct etcd_store *es, struct etcd_key_base base, json_t *start,
                                 json_t *range_end, int64_t *rev, store_kvs *kvs, size_t *cap,
                                 char **last, size_t *last_len, bool *more, int *grpc_code,
                                 gb_err *err)
{
    _cleanup_json_ json_t *body = json_pack("{s:O, s:O, s:o}", "key", start, "range_end", range_end,
                                            "limit", etcd_json_int64(ETCD_RANGE_PAGE));
    _cleanup_json_ json_t *reply = NULL;
    if (*rev > 0)
        json_object_set_new(body, "revision", etcd_json_int64(*rev));
    if (etcd_client_call(es->client, "/v3/kv/range", body, false, &reply, grpc_code, err) < 0)
        return -1;
    json_t *page = json_object_get(reply, "kvs");
    etcd_store_kvs_grow(kvs, cap, json_array_size(page));
    for (size_t i = 0; i < json_array_size(page); i++) {
        free(steal_ptr(last));
        if (etcd_store_kv_from_json(es, base, json_array_get(page, i), &kvs->items[kvs->n], last,
                                    last_len, err) < 0)
            return -1;
        kvs->n++;
    }
    *rev = etcd_json_get_int64(json_object_get(reply, "header"), "revision");
    *more = json_is_true(json_object_get(reply, "more")) && *last;
    return 0;
}

/* Every key under prefix, page by page at one revision. */
static int etcd_store_range_once(struct etcd_store *es, const char *prefix, const char *from,
                                 const char *to, store_kvs *out, int *grpc_code, gb_err *err)
{
    size_t full_len = 0;
    _cleanup_free_ char *full = etcd_store_full_key(es, prefix, &full_len);
    const char *rest = NULL;
    struct etcd_key_base base = etcd_store_key_base(es, prefix, &rest);
    /* etcd has no empty key; "\0" is the lowest key there is. */
    _cleanup_json_ json_t *start =
        from ? etcd_store_json_key(es, from) : etcd_json_bytes(full, full_len ? full_len : 1);
    _cleanup_json_ json_t *range_end =
        to ? etcd_store_json_key(es, to) : etcd_json_range_end(full, full_len);

    store_kvs kvs = {0};
    size_t cap = 0;
    int64_t rev = 0;
    bool more = true;
    while (more) {
        _cleanup_free_ char *last = NULL;
        size_t last_len = 0;
        if (etcd_store_range_page(es, base, start, range_end, &rev, &kvs, &cap, &last, &last_len,
                                  &more, grpc_code, err) < 0) {
            store_kvs_free(&kvs);
            return -1;
        }
        if (more) {
            /* The next page starts just after the last key: last + "\0". */
            _cleanup_free_ char *next = xrealloc(steal_ptr(&last), last_len + 1);
            next[last_len] = '\0';
            json_decref(start);
            start = etcd_json_bytes(next, last_len + 1);
        }
    }
    *out = kvs;
    return 0;
}

static int etcd_store_range(store *s, const char *prefix, const char *from, const char *to,
                            store_kvs *out, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    for (int restarts = 0;; restarts++) {
        int grpc_code = 0;
        if (etcd_store_range_once(es, prefix, from, to, out, &grpc_code, err) == 0)
            return 0;
        if (grpc_code != ETCD_GRPC_OUT_OF_RANGE || restarts == ETCD_RANGE_RESTARTS)
            return err_prefix(err, "listing keys under '%s'", prefix);
    }
}

/* A one-key range: the cheapest request that carries the revision. */
static int etcd_store_revision(store *s, int64_t *revision, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    _cleanup_json_ json_t *body = json_pack(
        "{s:o, s:b}", "key", etcd_json_bytes(es->prefix_len ? es->prefix : "", es->prefix_len ?: 1),
        "count_only", 1);
    _cleanup_json_ json_t *reply = NULL;
    if (etcd_client_call(es->client, "/v3/kv/range", body, false, &reply, NULL, err) < 0)
        return -1; /* the client's messages name etcd and what failed */
    *revision = etcd_json_get_int64(json_object_get(reply, "header"), "revision");
    if (*revision <= 0)
        return err_set(err, ERR_INTERNAL, "etcd at %s sent no revision in its answer",
                       etcd_client_endpoints(es->client));
    return 0;
}

/* ---- transactions --------------------------------------------------------- */

static json_t *etcd_store_json_cmp(const struct etcd_store *es, const store_cmp *c)
{
    json_t *key = etcd_store_json_key(es, c->key);
    switch (c->kind) {
    case STORE_CMP_ABSENT:
        return json_pack("{s:o, s:s, s:s, s:s}", "key", key, "target", "CREATE", "result", "EQUAL",
                         "create_revision", "0");
    case STORE_CMP_EXISTS:
        return json_pack("{s:o, s:s, s:s, s:s}", "key", key, "target", "CREATE", "result",
                         "GREATER", "create_revision", "0");
    case STORE_CMP_MOD_REVISION:
        return json_pack("{s:o, s:s, s:s, s:o}", "key", key, "target", "MOD", "result", "EQUAL",
                         "mod_revision", etcd_json_int64(c->mod_revision));
    case STORE_CMP_VALUE:
        return json_pack("{s:o, s:s, s:s, s:o}", "key", key, "target", "VALUE", "result", "EQUAL",
                         "value", etcd_json_bytes(c->value, strlen(c->value)));
    }
    json_decref(key);
    return NULL;
}

static json_t *etcd_store_json_op(const struct etcd_store *es, const store_op *op)
{
    switch (op->kind) {
    case STORE_OP_PUT:
        if (op->lease)
            return json_pack("{s:{s:o, s:o, s:o}}", "request_put", "key",
                             etcd_store_json_key(es, op->key), "value",
                             etcd_json_bytes(op->value, strlen(op->value)), "lease",
                             etcd_json_int64(op->lease));
        return json_pack("{s:{s:o, s:o}}", "request_put", "key", etcd_store_json_key(es, op->key),
                         "value", etcd_json_bytes(op->value, strlen(op->value)));
    case STORE_OP_DELETE:
        return json_pack("{s:{s:o}}", "request_delete_range", "key",
                         etcd_store_json_key(es, op->key));
    case STORE_OP_DELETE_PREFIX: {
        size_t len = 0;
        _cleanup_free_ char *full = etcd_store_full_key(es, op->key, &len);
        return json_pack("{s:{s:o, s:o}}", "request_delete_range", "key",
                         etcd_json_bytes(full, len), "range_end", etcd_json_range_end(full, len));
    }
    }
    return NULL;
}

/* The request body: {"compare": [...], "success": [...]}, and with a
 * fence (lease != 0) one more comparison - the owner key is still attached
 * to lease - and a failure branch that reads the owner key, so that a
 * transaction that did not succeed says whether the fence or the caller's
 * comparisons failed. NULL only for a comparison or op of an unknown kind
 * (store_txn refuses those before a backend sees them). */
static json_t *etcd_store_json_txn(const struct etcd_store *es, const store_cmp *cmps, size_t ncmps,
                                   const store_op *ops, size_t nops, int64_t lease)
{
    _cleanup_json_ json_t *compare = json_array();
    _cleanup_json_ json_t *success = json_array();
    for (size_t i = 0; i < ncmps; i++)
        if (json_array_append_new(compare, etcd_store_json_cmp(es, &cmps[i])) < 0)
            return NULL;
    for (size_t i = 0; i < nops; i++)
        if (json_array_append_new(success, etcd_store_json_op(es, &ops[i])) < 0)
            return NULL;
    if (!lease)
        return json_pack("{s:O, s:O}", "compare", compare, "success", success);
    json_array_append_new(
        compare, json_pack("{s:o, s:s, s:s, s:o}", "key", etcd_store_json_key(es, STORE_OWNER_KEY),
                           "target", "LEASE", "result", "EQUAL", "lease", etcd_json_int64(lease)));
    return json_pack("{s:O, s:O, s:[{s:{s:o}}]}", "compare", compare, "success", success, "failure",
                     "request_range", "key", etcd_store_json_key(es, STORE_OWNER_KEY));
}

static int etcd_store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops,
                          size_t nops, bool *succeeded, int64_t *revision, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    *succeeded = false;
    /* Only writes need the fence: a read-only transaction changes nothing. */
    int64_t lease = 0;
    if (nops > 0 && etcd_claim_fence(es, &lease, err) < 0)
        return err_prefix(err, "store transaction");
    _cleanup_json_ json_t *body = etcd_store_json_txn(es, cmps, ncmps, ops, nops, lease);
    _cleanup_json_ json_t *reply = NULL;
    if (!body)
        return err_set(err, ERR_INTERNAL, "etcd store: a comparison or op of an unknown kind");
    /* With no ops the transaction only reads, and may be sent again. */
    if (etcd_client_call(es->client, "/v3/kv/txn", body, nops > 0, &reply, NULL, err) < 0)
        return err_prefix(err, "store transaction");
    *succeeded = json_is_true(json_object_get(reply, "succeeded"));
    if (!*succeeded && lease && etcd_claim_fence_failed(es, lease, reply, err) < 0)
        return err_prefix(err, "store transaction");
    if (revision)
        *revision = etcd_json_get_int64(json_object_get(reply, "header"), "revision");
    return 0;
}

/* ---- opening --------------------------------------------------------------- */

static const char *etcd_store_key_prefix(store *s)
{
    return ((struct etcd_store *)s)->prefix;
}

static void etcd_store_close(store *s)
{
    struct etcd_store *es = (struct etcd_store *)s;
    if (!es)
        return;
    if (es->claim) {
        etcd_store_release(s);
        etcd_claim_free(es->claim);
    }
    etcd_client_free(es->client);
    free(es);
}

/* Opening asks etcd for the revision once, so that a wrong address, a
 * refused certificate or bad credentials show at start-up, not at the
 * first request. */
static int etcd_store_open(const char *url, store **out, gb_err *err)
{
    struct etcd_store *es = xcalloc(1, sizeof(*es));
    es->base.backend = &store_backend_etcd;
    int64_t rev = 0;
    es->claim = etcd_claim_new();
    if (etcd_client_new(url, &es->client, err) < 0) {
        etcd_claim_free(es->claim);
        free(es);
        return -1;
    }
    es->prefix = etcd_client_prefix(es->client, &es->prefix_len);
    if (etcd_store_revision(&es->base, &rev, err) < 0) {
        etcd_store_close(&es->base);
        return -1;
    }
    *out = &es->base;
    return 0;
}

const struct store_backend store_backend_etcd = {
    .name = "etcd",
    .scheme = "etcd",
    .remote = true,
    .open = etcd_store_open,
    .close = etcd_store_close,
    .get = etcd_store_get,
    .get_revision = etcd_store_get_revision,
    .range = etcd_store_range,
    .txn = etcd_store_txn,
    .revision = etcd_store_revision,
    .claim = etcd_store_claim,
    .release = etcd_store_release,
    .claim_state = etcd_store_claim_state,
    .claim_describe = etcd_store_claim_describe,
    .claim_lease = etcd_store_claim_lease,
    .key_prefix = etcd_store_key_prefix,
};
