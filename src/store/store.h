/*
 * store.h - gpubox's state: a key-value store with prefix ranges,
 * compare-and-swap transactions over several keys, and a revision number.
 *
 * The model is etcd v3's, so both backends implement it faithfully:
 *   - the store has one revision counter; every successful write (put,
 *     delete, or a transaction that wrote) raises it by one;
 *   - every key remembers mod_revision, the revision of its last write, and
 *     create_revision, the revision that created it;
 *   - a transaction checks a list of comparisons and, if all hold, applies a
 *     list of operations atomically ("success"); otherwise it applies nothing
 *     and reports failure.
 *
 * Backends (one file each) fill in a struct store_backend; callers only ever
 * hold a `store *` and call the store_* functions below, never knowing which
 * backend answers (as with SQLite's VFS or curl's TLS backends).
 *
 * Key layouts belong to the service modules' store helpers; this layer treats
 * keys and values as opaque NUL-terminated strings (values are JSON in
 * practice). Values may be at most STORE_VALUE_MAX bytes.
 *
 * All functions are safe to call from several threads on one store.
 */
#ifndef GPUBOX_STORE_STORE_H
#define GPUBOX_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define STORE_KEY_MAX 1024
#define STORE_VALUE_MAX (1024 * 1024)
/* A transaction has at most this many comparisons, and this many ops, and
 * its keys and values together are at most STORE_TXN_BYTES_MAX bytes: the
 * limits of an etcd with default settings (--max-txn-ops 128,
 * --max-request-bytes 1.5 MiB, less room for the request's framing). */
#define STORE_TXN_OPS_MAX 128
#define STORE_TXN_BYTES_MAX (1536 * 1024 - 8 * 1024)

typedef struct store store;

typedef struct store_kv {
    char *key;
    char *value; /* NUL-terminated */
    int64_t create_revision;
    int64_t mod_revision;
} store_kv;

typedef struct store_kvs {
    store_kv *items; /* sorted by key, ascending (bytewise) */
    size_t n;
} store_kvs;

enum store_cmp_kind {
    STORE_CMP_ABSENT,       /* key must not exist */
    STORE_CMP_EXISTS,       /* key must exist */
    STORE_CMP_MOD_REVISION, /* key's mod_revision must equal .mod_revision (0 = absent) */
    STORE_CMP_VALUE,        /* key must exist with exactly .value */
};

typedef struct store_cmp {
    enum store_cmp_kind kind;
    const char *key;
    int64_t mod_revision;
    const char *value;
} store_cmp;

enum store_op_kind {
    STORE_OP_PUT,
    STORE_OP_DELETE,        /* delete one key; no error if absent */
    STORE_OP_DELETE_PREFIX, /* delete every key that starts with .key */
};

typedef struct store_op {
    enum store_op_kind kind;
    const char *key;
    const char *value; /* PUT only */
} store_op;

/* What a backend provides. Return conventions: 0 on success, -1 with *err
 * filled (ERR_STORE_UNAVAILABLE when the backend cannot be reached,
 * ERR_INTERNAL otherwise). get returns 1 when found, 0 when absent. */
struct store_backend {
    const char *name;   /* "sqlite", "etcd" */
    const char *scheme; /* URL scheme it serves: "sqlite", "etcd" */
    bool remote;        /* reached over the network: worth waiting for when it is down */
    int (*open)(const char *url, store **out, gb_err *err);
    void (*close)(store *s);
    int (*get)(store *s, const char *key, store_kv *out, gb_err *err);
    int (*range)(store *s, const char *prefix, store_kvs *out, gb_err *err);
    int (*txn)(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
               bool *succeeded, int64_t *revision, gb_err *err);
    int (*revision)(store *s, int64_t *revision, gb_err *err);
};

/* Every store starts with this header so the generic functions can find
 * the backend. Backends embed it as their first member. */
struct store {
    const struct store_backend *backend;
};

/* Open by URL: "sqlite:///abs/path/state.db" or
 * "etcd://host:port[,host:port...][/key/prefix][?options]" (docs/store.md).
 * Unknown schemes give ERR_INVALID_PARAMS naming the schemes known. */
int store_open(const char *url, store **out, gb_err *err);
void store_close(store *s);
/* url with the value of every password= option, and any user:password@
 * before the host, replaced by "***", to show in messages and logs; free
 * it. NULL only when out of memory. */
char *store_url_redact(const char *url);
const char *store_backend_name(const store *s);
/* True when url names a backend reached over the network (etcd), which may
 * come up after gpuboxd: start-up waits for such a store rather than fail
 * (--store-wait). False for embedded files and for URLs no backend serves. */
bool store_url_is_remote(const char *url);

/* 1 found (out filled, free with store_kv_free), 0 absent, -1 error. */
int store_get(store *s, const char *key, store_kv *out, gb_err *err);
/* Put one key unconditionally; *revision (may be NULL) gets the new revision. */
int store_put(store *s, const char *key, const char *value, int64_t *revision, gb_err *err);
/* Delete one key (absent is fine). */
int store_delete(store *s, const char *key, gb_err *err);
/* Every key beginning with prefix ("" = all), sorted by key. */
int store_range(store *s, const char *prefix, store_kvs *out, gb_err *err);
/* Atomic compare-and-swap; *succeeded says whether the comparisons held and
 * the ops were applied (comparisons failing is not an error: 0 is returned).
 * revision (may be NULL) gets the store's revision after the transaction.
 * As in etcd, one transaction may put or delete a given key only once (a put
 * may not also fall under a delete or delete-prefix), a delete-prefix needs
 * a non-empty prefix, and the sizes stay within STORE_TXN_OPS_MAX and
 * STORE_TXN_BYTES_MAX; otherwise ERR_INVALID_PARAMS and nothing done. */
int store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
              bool *succeeded, int64_t *revision, gb_err *err);
int store_revision(store *s, int64_t *revision, gb_err *err);

/* Copy every key of from into to (store_copy.c), for moving gpubox's state
 * between backends. A target that holds keys is refused with ERR_EXISTS
 * unless overwrite is set; then it is made an exact copy (its keys that
 * from lacks are deleted). Values are copied exactly; revisions are the
 * target's own. Writes go in batches, so a copy that fails half-way leaves
 * the target partly written: run it again with overwrite. *copied (may be
 * NULL) gets the number of keys written. */
int store_copy(store *from, store *to, bool overwrite, size_t *copied, gb_err *err);

void store_kv_free(store_kv *kv);
void store_kvs_free(store_kvs *kvs);

/* Backends, for store.c's table. */
extern const struct store_backend store_backend_sqlite;
extern const struct store_backend store_backend_etcd;

#endif
