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
 *
 * One daemon per store: a gpuboxd claims its store at start-up
 * (store_claim) and holds it until it stops, so that a second daemon - or
 * gpubox-store-migrate - on the same store is refused instead of handing
 * out the same GPUs and ports. SQLite holds an exclusive flock on a lock
 * file beside the database, which the kernel frees however the process
 * ends; etcd holds the key STORE_OWNER_KEY under a lease kept alive from a
 * thread, which etcd deletes TTL seconds after the last keepalive. An etcd
 * claim can be lost (keepalives unanswered for longer than the TTL, the
 * lease revoked): from then on every write of that handle fails with
 * ERR_STORE_UNAVAILABLE until the claim is taken again, which the
 * keepalive thread keeps trying (docs/store.md, "One daemon per store").
 *
 * Relative keys. A handle may keep its keys under a key prefix, a path
 * ending in '/' (an etcd URL's path: a fleet node's own records live under
 * "/gpubox/nodes/a/"). A key may then begin with "../" segments, each of
 * which drops one trailing segment of that prefix: on "/gpubox/nodes/a/",
 * "../x" is the key "/gpubox/nodes/x" and "../../users/bob" the key
 * "/gpubox/users/bob", which a handle on "/gpubox/" calls "users/bob". So
 * a fleet node writes the fleet's shared keys in the same transaction as
 * its own. Every call takes them: store_get, store_range (a relative
 * prefix; the keys come back in the same relative form, "../../users/bob",
 * sorted as usual), and a transaction's comparisons of every kind and its
 * ops (put, with or without a lease, delete, delete-prefix). Refused with
 * ERR_INVALID_PARAMS naming the key, the whole call doing nothing:
 *   - more "../" than the prefix has segments (store_key_depth), and any
 *     "../" on a handle without a prefix (SQLite, an etcd URL without a
 *     path);
 *   - ".." as a segment anywhere but in the leading run ("a/../b",
 *     "../.."), on every store;
 *   - a key of nothing but "../" segments, and a delete-prefix of nothing
 *     but them (it would wipe the parent's whole tree); a range of "../"
 *     is fine.
 * A transaction's rule that it writes a key once holds for the keys they
 * name, however spelled: on "/gpubox/nodes/a/", "x" and "../a/x" are one
 * key. A range of a prefix without "../" (including "") never returns a
 * relative key: ranges stay under the handle's prefix.
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
/* Comparisons a caller may give: one of etcd's 128 is kept for the owner's
 * fence, which the etcd backend adds to every write of a claimed store. */
#define STORE_TXN_CMPS_MAX (STORE_TXN_OPS_MAX - 1)

/* The key an etcd claim lives in (under the URL's key prefix). It is no
 * gpubox state: store_copy neither copies nor deletes it. */
#define STORE_OWNER_KEY "daemon/owner"
/* The lease of an etcd claim: a daemon that is gone without releasing it
 * (kill -9, host down, network cut) holds the store this long at most. */
#define STORE_CLAIM_TTL_S 10

typedef struct store store;
struct store_owner;

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
    /* PUT only: attach the key to this lease (etcd: the key goes when the
     * lease expires; store_claim_lease gives a claim's). 0: none. A backend
     * without leases (SQLite) refuses a put with one. */
    int64_t lease;
} store_op;

/* Who holds a store: the process that claimed it, as written into the
 * lock file (SQLite) or the owner key (etcd), as JSON (store_owner.c). The
 * host name, boot id and pid namespace tell whether pid can be looked up
 * here; proc_start (the process's start time in clock ticks after boot,
 * /proc/PID/stat) tells the process from a later one that got its pid. */
typedef struct store_owner {
    char program[32]; /* "gpuboxd", "gpubox-store-migrate"; "" when unknown */
    char host[256];
    long pid;
    int64_t started; /* Unix time it started */
    char boot_id[64];
    char pid_ns[64]; /* "pid:[4026531836]" */
    unsigned long long proc_start;
} store_owner;

enum store_claim_state {
    STORE_CLAIM_NONE, /* never claimed through this handle, or released */
    STORE_CLAIM_HELD,
    STORE_CLAIM_LOST, /* etcd: writes fail until the keepalive thread claims it again */
};

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
    /* key's mod_revision without its value (1 found, 0 absent); NULL: get
     * serves it. */
    int (*get_revision)(store *s, const char *key, int64_t *mod_revision, gb_err *err);
    /* Keys under prefix, from start (NULL: the first) up to end (NULL:
     * past the last); start and end begin with prefix (store.c checks). */
    int (*range)(store *s, const char *prefix, const char *start, const char *end, store_kvs *out,
                 gb_err *err);
    int (*txn)(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
               bool *succeeded, int64_t *revision, gb_err *err);
    int (*revision)(store *s, int64_t *revision, gb_err *err);
    /* One daemon per store (store_claim below). */
    int (*claim)(store *s, const struct store_owner *me, int ttl_s, struct store_owner *holder,
                 gb_err *err);
    void (*release)(store *s);
    enum store_claim_state (*claim_state)(store *s);
    void (*claim_describe)(store *s, char *buf, size_t size);
    /* The lease a held claim lives on; 0 when none (not held, or no leases). */
    int64_t (*claim_lease)(store *s);
    /* The key prefix the handle's keys live under, a path ending in '/'
     * ("/gpubox/nodes/a/"), whose trailing segments a relative key's "../"
     * drop; the backend maps such keys (store.c has checked them against
     * it). NULL, "" or no function: no prefix, relative keys are refused. */
    const char *(*key_prefix)(store *s);
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
 * it. */
char *store_url_redact(const char *url);
const char *store_backend_name(const store *s);
/* url with child appended to its key prefix: "etcd://h:p/gpubox?x=y" and
 * "nodes/a" give "etcd://h:p/gpubox/nodes/a?x=y" (a fleet node's own
 * records, docs/fleet.md). NULL when url has no key prefix to extend (not
 * an etcd:// URL); free it. */
char *store_url_child(const char *url, const char *child);
/* True when url names a backend reached over the network (etcd), which may
 * come up after gpuboxd: start-up waits for such a store rather than fail
 * (--store-wait). False for embedded files and for URLs no backend serves. */
bool store_url_is_remote(const char *url);

/* 1 found (out filled, free with store_kv_free), 0 absent, -1 error. */
int store_get(store *s, const char *key, store_kv *out, gb_err *err);
/* key's mod_revision alone, without reading or copying its value: 1 found
 * (*mod_revision filled), 0 absent, -1 error. For a caller that keeps what
 * it parsed from a value and asks, before using it again, whether the key
 * has been written since (the service proxy, every request). */
int store_get_revision(store *s, const char *key, int64_t *mod_revision, gb_err *err);
/* Put one key unconditionally; *revision (may be NULL) gets the new revision. */
int store_put(store *s, const char *key, const char *value, int64_t *revision, gb_err *err);
/* Delete one key (absent is fine). */
int store_delete(store *s, const char *key, gb_err *err);
/* Every key beginning with prefix ("" = all), sorted by key. A relative
 * prefix ("../../users/") gives the keys in that relative form. */
int store_range(store *s, const char *prefix, store_kvs *out, gb_err *err);
/* The part of prefix's range from start (inclusive; NULL: from the first
 * key) to end (exclusive; NULL: through the last), in one read: what a
 * caller whose keys sort by time reads to get one stretch of time without
 * the rest. start and end, when given, are keys beginning with prefix
 * (ERR_INVALID_PARAMS otherwise); start >= end gives nothing. */
int store_range_between(store *s, const char *prefix, const char *start, const char *end,
                        store_kvs *out, gb_err *err);
/* How many "../" a key of this handle may begin with (relative keys,
 * above): the number of segments of its key prefix, 3 for
 * "/gpubox/nodes/a/". 0 when it has none (SQLite, etcd without a path):
 * relative keys are then refused. */
size_t store_key_depth(store *s);
/* Atomic compare-and-swap; *succeeded says whether the comparisons held and
 * the ops were applied (comparisons failing is not an error: 0 is returned).
 * revision (may be NULL) gets the store's revision after the transaction.
 * As in etcd, one transaction may put or delete a given key only once (a put
 * may not also fall under a delete or delete-prefix; relative keys count as
 * the key they name), a delete-prefix needs
 * a non-empty prefix, and the sizes stay within STORE_TXN_OPS_MAX and
 * STORE_TXN_BYTES_MAX; otherwise ERR_INVALID_PARAMS and nothing done. */
int store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
              bool *succeeded, int64_t *revision, gb_err *err);
int store_revision(store *s, int64_t *revision, gb_err *err);

/* ---- one daemon per store (store_owner.c and the backends) ---------------- */

/* The calling process as an owner named program. */
int store_owner_self(const char *program, store_owner *out, gb_err *err);
/* Process pid of this host as an owner named program (tests use it for a
 * child); ERR_NOT_FOUND when there is no such process. */
int store_owner_of_pid(const char *program, long pid, store_owner *out, gb_err *err);
/* As JSON for the lock file or the owner key (free it); NULL when a text
 * field (the host name, say) is not UTF-8. */
char *store_owner_to_json(const store_owner *o);
/* Parse what store_owner_to_json wrote; -1 when text is not such JSON. */
int store_owner_from_json(const char *text, store_owner *out);
/* "gpuboxd pid 1234 on host gpu01, started 2024-05-01 10:00:00 UTC". */
void store_owner_describe(const store_owner *o, char *buf, size_t size);
/* True only when holder is a process of the same host, boot and pid
 * namespace as me that no longer runs (its pid is free, or belongs to a
 * process started at another time). Anything that cannot be checked from
 * here - another host, a container's own pid namespace - is not gone. */
bool store_owner_is_gone(const store_owner *holder, const store_owner *me);

/* Claim s for me, once (callers retry; gpuboxd for --store-wait). On
 * success the claim is held until store_release or store_close; on etcd a
 * thread keeps its lease of ttl_s seconds alive. Fails with ERR_CONFLICT
 * when another process holds it - *holder (may be NULL) then says who,
 * pid 0 when unknown - or with ERR_STORE_UNAVAILABLE when the store does
 * not answer. An etcd holder that store_owner_is_gone says is gone (a
 * gpuboxd killed on this host) is replaced at once. Claiming a store this
 * handle holds already is refused (ERR_INVALID_PARAMS). */
int store_claim(store *s, const store_owner *me, int ttl_s, store_owner *holder, gb_err *err);
/* Give the claim up (etcd: revoke the lease, deleting the key). No-op
 * without one. store_close does it too. */
void store_release(store *s);
enum store_claim_state store_claim_state(store *s);
/* Where the claim lives, for the log: "lock file /x/state.db.lock" or
 * "key /p/daemon/owner, lease 7f3a..., TTL 10 s". */
void store_claim_describe(store *s, char *buf, size_t size);
/* The lease a held etcd claim lives on (keys put with it go when the claim
 * does: a fleet node's membership, docs/fleet.md); 0 when the claim is not
 * held or the backend has no leases. */
int64_t store_claim_lease(store *s);

/* Copy every key of from into to (store_copy.c), for moving gpubox's state
 * between backends. A target that holds keys is refused with ERR_EXISTS
 * unless overwrite is set; then it is made an exact copy (its keys that
 * from lacks are deleted). Values are copied exactly; revisions are the
 * target's own; STORE_OWNER_KEY is left out on both sides. Writes go in batches, so a copy that
 * fails half-way leaves the target partly written: run it again with overwrite. *copied (may be
 * NULL) gets the number of keys written. */
int store_copy(store *from, store *to, bool overwrite, size_t *copied, gb_err *err);

void store_kv_free(store_kv *kv);
void store_kvs_free(store_kvs *kvs);

/* Backends, for store.c's table. */
extern const struct store_backend store_backend_sqlite;
extern const struct store_backend store_backend_etcd;

#endif
