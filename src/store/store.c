/*
 * store.c - the backend-independent face of the store: picks a backend by
 * URL scheme, checks every argument once for all backends (key and value
 * limits, transactions etcd would refuse), then forwards each call through
 * the backend's function table. Backends may therefore assume valid input.
 *
 * Relative keys (store.h) are checked here too, against the depth of the
 * handle's key prefix (the backend's key_prefix), so that SQLite and etcd
 * refuse the same ones; the backend with a prefix only maps them.
 */
#include "util/xalloc.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

static const struct store_backend *const store_backends[] = {
    &store_backend_sqlite,
    &store_backend_etcd,
};

#define STORE_URL_FORMS "sqlite:///path/state.db or etcd://host:port[,host:port...][/key/prefix]"

/* ---- relative keys ---------------------------------------------------------- */

int store_key_split(const char *key, size_t *up, const char **rest)
{
    size_t n = 0;
    while (strncmp(key, STORE_KEY_UP, STORE_KEY_UP_LEN) == 0) {
        key += STORE_KEY_UP_LEN;
        n++;
    }
    *up = n;
    *rest = key;
    /* No ".." segment may follow: "..", "x/..", "x/../y". */
    for (const char *seg = key;; seg++) {
        size_t len = strcspn(seg, "/");
        if (len == 2 && seg[0] == '.' && seg[1] == '.')
            return -1;
        seg += len;
        if (!*seg)
            return 0;
    }
}

int store_prefix_up(const char *prefix, size_t prefix_len, size_t up, size_t *base_len)
{
    size_t p = prefix_len;
    for (size_t i = 0; i < up; i++) {
        if (p == 0 || (p == 1 && prefix[0] == '/'))
            return -1; /* at the root: nothing left to drop */
        p--;           /* the '/' that ends the last segment */
        while (p > 0 && prefix[p - 1] != '/')
            p--;
    }
    *base_len = p;
    return 0;
}

size_t store_prefix_depth(const char *prefix)
{
    size_t len = prefix ? strlen(prefix) : 0;
    if (len == 0 || prefix[len - 1] != '/')
        return 0;
    size_t slashes = 0;
    for (size_t i = 0; i < len; i++)
        slashes += prefix[i] == '/';
    return prefix[0] == '/' ? slashes - 1 : slashes;
}

/* The handle's key prefix, or NULL when it has none. */
static const char *store_key_prefix(store *s)
{
    const char *prefix = s->backend->key_prefix ? s->backend->key_prefix(s) : NULL;
    return store_prefix_depth(prefix) > 0 ? prefix : NULL;
}

size_t store_key_depth(store *s)
{
    return store_prefix_depth(store_key_prefix(s));
}

/* key's leading "../" against s's key prefix. A key must name something
 * below the prefix it climbs to; a prefix (of a range or a delete-prefix,
 * is_prefix) may stop right there. */
static int store_check_relative(store *s, const char *what, const char *key, bool is_prefix,
                                gb_err *err)
{
    size_t up = 0;
    const char *rest = NULL;
    if (store_key_split(key, &up, &rest) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%s' has a '..' segment after other segments; \"" STORE_KEY_UP
                       "\" may only begin a key",
                       what, key);
    if (up == 0)
        return 0;
    const char *prefix = store_key_prefix(s);
    size_t depth = store_prefix_depth(prefix);
    if (depth == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%s' begins with \"" STORE_KEY_UP "\": relative keys need a store "
                       "with a key prefix (an etcd store of a fleet node); this %s store has none",
                       what, key, s->backend->name);
    if (up > depth)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%s' climbs %zu segments up from the store's key prefix '%s', which "
                       "has only %zu: it would go above the root",
                       what, key, up, prefix, depth);
    if (!*rest && !is_prefix)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%s' is nothing but \"" STORE_KEY_UP "\" segments; it names no key",
                       what, key);
    return 0;
}

/* key as the store knows it, its relative start resolved against prefix
 * (NULL: none): "/gpubox/nodes/a/" and "../../users/bob" give
 * "/gpubox/users/bob". Only for keys store_check_relative passed. */
static char *store_key_resolve(const char *prefix, const char *key)
{
    size_t prefix_len = prefix ? strlen(prefix) : 0, base_len = prefix_len, up = 0;
    const char *rest = key;
    if (store_key_split(key, &up, &rest) < 0 ||
        store_prefix_up(prefix, prefix_len, up, &base_len) < 0) {
        rest = key; /* not reached: checked before */
        base_len = prefix_len;
    }
    return xasprintf("%.*s%s", (int)base_len, prefix ? prefix : "", rest);
}

/* ---- checks ------------------------------------------------------------------ */

/* Keys are non-empty NUL-terminated strings of at most STORE_KEY_MAX bytes,
 * relative only as deep as the store's key prefix. */
static int store_check_key(store *s, const char *key, bool is_prefix, gb_err *err)
{
    if (!key || !*key)
        return err_set(err, ERR_INVALID_PARAMS, "store key is empty");
    size_t len = strlen(key);
    if (len > STORE_KEY_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store key '%.64s...' is %zu bytes long; keys may be at most %d bytes", key,
                       len, STORE_KEY_MAX);
    return store_check_relative(s, "store key", key, is_prefix, err);
}

static int store_check_value(const char *key, const char *value, gb_err *err)
{
    if (!value)
        return err_set(err, ERR_INVALID_PARAMS, "store value for key '%s' is missing", key);
    size_t len = strlen(value);
    if (len > STORE_VALUE_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store value for key '%s' is %zu bytes long; values may be at most %d bytes",
                       key, len, STORE_VALUE_MAX);
    return 0;
}

static int store_check_cmp(store *s, const store_cmp *c, gb_err *err)
{
    if (store_check_key(s, c->key, false, err) < 0)
        return err_prefix(err, "comparison");
    switch (c->kind) {
    case STORE_CMP_ABSENT:
    case STORE_CMP_EXISTS:
        return 0;
    case STORE_CMP_MOD_REVISION:
        if (c->mod_revision < 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "comparison on key '%s': mod_revision %lld is negative", c->key,
                           (long long)c->mod_revision);
        return 0;
    case STORE_CMP_VALUE:
        return store_check_value(c->key, c->value, err);
    }
    return err_set(err, ERR_INVALID_PARAMS, "comparison on key '%s': unknown kind %d", c->key,
                   (int)c->kind);
}

static int store_check_op(store *s, const store_op *op, gb_err *err)
{
    switch (op->kind) {
    case STORE_OP_PUT:
        if (store_check_key(s, op->key, false, err) < 0)
            return err_prefix(err, "put");
        return store_check_value(op->key, op->value, err);
    case STORE_OP_DELETE:
        if (store_check_key(s, op->key, false, err) < 0)
            return err_prefix(err, "delete");
        return 0;
    case STORE_OP_DELETE_PREFIX: {
        /* An empty prefix would wipe the whole store, and one of nothing but
         * "../" a parent's whole tree; no caller means that. */
        if (op->key && !*op->key)
            return err_set(err, ERR_INVALID_PARAMS,
                           "delete-prefix with an empty prefix would delete every key; refused");
        if (store_check_key(s, op->key, true, err) < 0)
            return err_prefix(err, "delete-prefix");
        size_t up = 0;
        const char *rest = NULL;
        if (store_key_split(op->key, &up, &rest) == 0 && !*rest)
            return err_set(err, ERR_INVALID_PARAMS,
                           "delete-prefix '%s' would delete every key under the prefix it "
                           "climbs to; refused",
                           op->key);
        return 0;
    }
    }
    return err_set(err, ERR_INVALID_PARAMS, "transaction op on key '%s': unknown kind %d",
                   op->key ? op->key : "", (int)op->kind);
}

/* etcd refuses a transaction that puts one key twice, or puts a key that one
 * of its deletes also covers (the outcome would depend on op order). The
 * SQLite backend refuses the same, so callers cannot come to rely on
 * something only one backend accepts. Keys are compared as the store knows
 * them: with relative keys among them, resolved against the key prefix, so
 * that "x" and "../a/x" on "/gpubox/nodes/a/" are one key. */
static int store_check_op_overlap(store *s, const store_op *ops, size_t nops, gb_err *err)
{
    const char *prefix = store_key_prefix(s);
    char **full = NULL;
    for (size_t i = 0; i < nops && !full; i++)
        if (prefix && strncmp(ops[i].key, STORE_KEY_UP, STORE_KEY_UP_LEN) == 0)
            full = xcalloc(nops, sizeof(*full));
    for (size_t i = 0; full && i < nops; i++)
        full[i] = store_key_resolve(prefix, ops[i].key);

    int r = 0;
    for (size_t i = 0; i < nops && r == 0; i++) {
        if (ops[i].kind != STORE_OP_PUT)
            continue;
        const char *key = full ? full[i] : ops[i].key;
        for (size_t j = 0; j < nops; j++) {
            if (j == i)
                continue;
            const store_op *o = &ops[j];
            const char *other = full ? full[j] : o->key;
            bool overlap = (o->kind == STORE_OP_PUT || o->kind == STORE_OP_DELETE)
                               ? strcmp(other, key) == 0
                               : strncmp(other, key, strlen(other)) == 0;
            if (!overlap)
                continue;
            if (!full)
                r = err_set(err, ERR_INVALID_PARAMS,
                            "transaction writes key '%s' in more than one op; "
                            "a key may be put or deleted once per transaction",
                            ops[i].key);
            else /* spelled two ways, maybe: say what both name */
                r = err_set(err, ERR_INVALID_PARAMS,
                            "transaction writes key '%s' (the store's '%s') in more than one op: "
                            "%s '%s' %s it too; a key may be put or deleted once per transaction",
                            ops[i].key, key,
                            o->kind == STORE_OP_PUT      ? "put"
                            : o->kind == STORE_OP_DELETE ? "delete"
                                                         : "delete-prefix",
                            o->key, o->kind == STORE_OP_DELETE_PREFIX ? "covers" : "names");
            break;
        }
    }
    for (size_t i = 0; full && i < nops; i++)
        free(full[i]);
    free(full);
    return r;
}

/* etcd with its default settings refuses larger transactions; SQLite is
 * held to the same limits so that what works on one works on both. Call
 * after the comparisons and ops were checked one by one. */
static int store_check_txn_size(const store_cmp *cmps, size_t ncmps, const store_op *ops,
                                size_t nops, gb_err *err)
{
    if (ncmps > STORE_TXN_CMPS_MAX || nops > STORE_TXN_OPS_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store transaction has %zu comparisons and %zu ops; at most %d and %d "
                       "(split it)",
                       ncmps, nops, STORE_TXN_CMPS_MAX, STORE_TXN_OPS_MAX);
    size_t bytes = 0;
    for (size_t i = 0; i < ncmps; i++)
        bytes +=
            strlen(cmps[i].key) + (cmps[i].kind == STORE_CMP_VALUE ? strlen(cmps[i].value) : 0);
    for (size_t i = 0; i < nops; i++)
        bytes += strlen(ops[i].key) + (ops[i].kind == STORE_OP_PUT ? strlen(ops[i].value) : 0);
    if (bytes > STORE_TXN_BYTES_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store transaction carries %zu bytes of keys and values; at most %d "
                       "(split it)",
                       bytes, STORE_TXN_BYTES_MAX);
    return 0;
}

static int store_check_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops,
                           size_t nops, bool *succeeded, gb_err *err)
{
    if ((ncmps && !cmps) || (nops && !ops) || !succeeded)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store transaction: missing comparison list, op list or result flag");
    for (size_t i = 0; i < ncmps; i++)
        if (store_check_cmp(s, &cmps[i], err) < 0)
            return -1;
    for (size_t i = 0; i < nops; i++)
        if (store_check_op(s, &ops[i], err) < 0)
            return -1;
    if (store_check_txn_size(cmps, ncmps, ops, nops, err) < 0)
        return -1;
    return store_check_op_overlap(s, ops, nops, err);
}

/* The backend serving url's scheme, or NULL. */
static const struct store_backend *store_backend_for(const char *url)
{
    const char *sep = url ? strstr(url, "://") : NULL;
    size_t scheme_len = sep ? (size_t)(sep - url) : 0;
    for (size_t i = 0; sep && i < sizeof(store_backends) / sizeof(store_backends[0]); i++) {
        const struct store_backend *b = store_backends[i];
        if (strlen(b->scheme) == scheme_len && strncmp(url, b->scheme, scheme_len) == 0)
            return b;
    }
    return NULL;
}

char *store_url_child(const char *url, const char *child)
{
    if (!url || !child || strncmp(url, "etcd://", 7) != 0)
        return NULL;
    const char *hosts = url + 7;
    size_t hosts_len = strcspn(hosts, "/?");
    const char *path = hosts + hosts_len;
    size_t path_len = *path == '/' ? strcspn(path, "?") : 0;
    const char *query = path + path_len;
    /* the prefix without its trailing slashes, then /child */
    while (path_len > 0 && path[path_len - 1] == '/')
        path_len--;
    return xasprintf("etcd://%.*s%.*s/%s%s", (int)hosts_len, hosts, (int)path_len, path, child,
                     query);
}

bool store_url_is_remote(const char *url)
{
    const struct store_backend *b = store_backend_for(url);
    return b && b->remote;
}

int store_open(const char *url, store **out, gb_err *err)
{
    const char *sep = url ? strstr(url, "://") : NULL;
    if (!sep)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s' has no scheme; use " STORE_URL_FORMS, url ? url : "");
    size_t scheme_len = (size_t)(sep - url);
    const struct store_backend *b = store_backend_for(url);
    if (b)
        return b->open(url, out, err);
    return err_set(err, ERR_INVALID_PARAMS,
                   "store URL '%s': unknown scheme '%.*s'; known: " STORE_URL_FORMS, url,
                   (int)scheme_len, url);
}

char *store_url_redact(const char *url)
{
    static const char secret[] = "password=";
    const char *query = strchr(url, '?');
    /* Each password value shrinks to "***"; the result is never longer
     * than the URL plus three bytes per option. */
    char *out = xmalloc(strlen(url) * 2 + 4), *o = out;
    size_t head = query ? (size_t)(query - url) + 1 : strlen(url);
    /* user:password@host, which no backend accepts but a user may type. */
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    const char *at = memchr(auth, '@', strcspn(auth, "/?"));
    if (at) {
        memcpy(o, url, (size_t)(auth - url));
        o += auth - url;
        memcpy(o, "***", 3);
        o += 3;
        memcpy(o, at, head - (size_t)(at - url));
        o += head - (size_t)(at - url);
    } else {
        memcpy(o, url, head);
        o += head;
    }
    for (const char *p = query ? query + 1 : url + head; *p;) {
        size_t len = strcspn(p, "&");
        if (len >= strlen(secret) && strncmp(p, secret, strlen(secret)) == 0) {
            memcpy(o, secret, strlen(secret));
            memcpy(o + strlen(secret), "***", 3);
            o += strlen(secret) + 3;
        } else {
            memcpy(o, p, len);
            o += len;
        }
        p += len;
        if (*p == '&')
            *o++ = *p++;
    }
    *o = '\0';
    return out;
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
    if (store_check_key(s, key, false, err) < 0)
        return -1;
    return s->backend->get(s, key, out, err);
}

int store_get_revision(store *s, const char *key, int64_t *mod_revision, gb_err *err)
{
    *mod_revision = 0;
    if (store_check_key(s, key, false, err) < 0)
        return -1;
    if (s->backend->get_revision)
        return s->backend->get_revision(s, key, mod_revision, err);
    store_kv kv;
    int found = s->backend->get(s, key, &kv, err);
    if (found > 0) {
        *mod_revision = kv.mod_revision;
        store_kv_free(&kv);
    }
    return found;
}

int store_put(store *s, const char *key, const char *value, int64_t *revision, gb_err *err)
{
    store_op op = {.kind = STORE_OP_PUT, .key = key, .value = value};
    bool ok = false;
    return store_txn(s, NULL, 0, &op, 1, &ok, revision, err);
}

int store_delete(store *s, const char *key, gb_err *err)
{
    store_op op = {.kind = STORE_OP_DELETE, .key = key};
    bool ok = false;
    return store_txn(s, NULL, 0, &op, 1, &ok, NULL, err);
}

int store_range(store *s, const char *prefix, store_kvs *out, gb_err *err)
{
    if (!prefix)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store range: prefix is missing (use \"\" for all)");
    if (strlen(prefix) > STORE_KEY_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store range prefix '%.64s...' is longer than the key limit of %d bytes",
                       prefix, STORE_KEY_MAX);
    if (store_check_relative(s, "store range prefix", prefix, true, err) < 0)
        return -1;
    return s->backend->range(s, prefix, NULL, NULL, out, err);
}

int store_range_between(store *s, const char *prefix, const char *start, const char *end,
                        store_kvs *out, gb_err *err)
{
    *out = (store_kvs){0};
    if (!start && !end)
        return store_range(s, prefix, out, err);
    if (!prefix)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store range: prefix is missing (use \"\" for all)");
    const char *bounds[] = {start, end};
    for (int i = 0; i < 2; i++)
        if (bounds[i] &&
            (strncmp(bounds[i], prefix, strlen(prefix)) != 0 || strlen(bounds[i]) > STORE_KEY_MAX))
            return err_set(err, ERR_INVALID_PARAMS,
                           "store range: the %s key '%.64s' is not under the prefix '%.64s'",
                           i ? "end" : "start", bounds[i], prefix);
    if (store_check_relative(s, "store range prefix", prefix, true, err) < 0)
        return -1;
    if (start && end && strcmp(start, end) >= 0)
        return 0;
    return s->backend->range(s, prefix, start, end, out, err);
}

int store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
              bool *succeeded, int64_t *revision, gb_err *err)
{
    if (store_check_txn(s, cmps, ncmps, ops, nops, succeeded, err) < 0)
        return -1;
    for (size_t i = 0; i < nops && !s->backend->claim_lease; i++)
        if (ops[i].kind == STORE_OP_PUT && ops[i].lease)
            return err_set(err, ERR_INVALID_PARAMS,
                           "put of key '%s' with a lease: the %s store has no leases", ops[i].key,
                           s->backend->name);
    return s->backend->txn(s, cmps, ncmps, ops, nops, succeeded, revision, err);
}

int store_revision(store *s, int64_t *revision, gb_err *err)
{
    return s->backend->revision(s, revision, err);
}

int store_claim(store *s, const store_owner *me, int ttl_s, store_owner *holder, gb_err *err)
{
    if (holder)
        *holder = (store_owner){0};
    if (!me || me->pid <= 0 || ttl_s < 1)
        return err_set(err, ERR_INVALID_PARAMS,
                       "claiming the store: the owner (pid %ld) or the TTL (%d s) is missing",
                       me ? me->pid : 0L, ttl_s);
    if (s->backend->claim_state(s) != STORE_CLAIM_NONE)
        return err_set(err, ERR_INVALID_PARAMS,
                       "claiming the store: this handle has claimed it already");
    store_owner unused;
    return s->backend->claim(s, me, ttl_s, holder ? holder : &unused, err);
}

void store_release(store *s)
{
    if (s)
        s->backend->release(s);
}

enum store_claim_state store_claim_state(store *s)
{
    return s->backend->claim_state(s);
}

void store_claim_describe(store *s, char *buf, size_t size)
{
    if (size == 0)
        return;
    buf[0] = '\0';
    s->backend->claim_describe(s, buf, size);
}

int64_t store_claim_lease(store *s)
{
    return s->backend->claim_lease ? s->backend->claim_lease(s) : 0;
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
