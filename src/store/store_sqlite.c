/*
 * store_sqlite.c - the embedded store backend: one SQLite file in WAL mode,
 * named by a URL sqlite:///abs/path/state.db[?busy_timeout_ms=N].
 *
 * Layout (schema version 1):
 *   meta(name TEXT PRIMARY KEY, value INTEGER)
 *       'schema_version' -> 1; 'revision' -> the store's revision. It starts
 *       at 1, as a new etcd's does, so 0 can mean "absent" in comparisons.
 *   kv(key TEXT PRIMARY KEY, value TEXT, create_revision INTEGER,
 *      mod_revision INTEGER) WITHOUT ROWID
 * TEXT compares with the BINARY collation, i.e. memcmp, so "sorted by key"
 * is bytewise and a prefix range is the half-open interval
 * [prefix, successor(prefix)) read straight off the primary key - no LIKE,
 * so '%' and '_' in keys are ordinary bytes.
 *
 * Revisions mirror etcd: a transaction that writes raises the revision by
 * exactly one and stamps every key it puts with the new revision; deleting
 * keys that do not exist writes nothing and raises nothing.
 *
 * Concurrency. A handle owns one writer connection, used under write_lock for
 * a whole transaction, and a small pool of reader connections. WAL lets
 * readers run beside the writer (and beside its fsync), so listing state
 * never waits for a commit, and the in-process mutex queues this process's
 * writers instead of letting them poll SQLite's busy handler. Across handles
 * and processes (a migration tool may open the file too), every transaction
 * starts with BEGIN IMMEDIATE: it takes the file's write lock before the
 * comparisons are read, so comparisons and writes see one state and writers
 * are serialized. Waiting for someone else's lock is bounded by the busy
 * timeout; past it the call fails with ERR_STORE_UNAVAILABLE.
 *
 * Durability: synchronous=FULL in WAL mode syncs the WAL at every commit, so
 * a transaction that has returned survives kill -9 and power loss.
 *
 * One daemon per store: a claim is an exclusive flock on <file>.lock, held
 * through lock_fd until released or the handle closed. flock belongs to the
 * open file, not to the process, so a second open of the lock file - in
 * another process or in this one - cannot take it, and the kernel frees it
 * however the holder ends: no expiry is needed, and a holder that is in the
 * way is alive. The holder writes who it is into the file (store_owner.c)
 * for the message the next one gives.
 */
#include "util/xalloc.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <sqlite3.h>

#include "util/cleanup.h"

#define SQLITE_STORE_SCHEMA_VERSION 1
#define SQLITE_STORE_BUSY_TIMEOUT_MS 5000
/* Idle reader connections kept open; more are opened when threads need them
 * and closed again on release. */
#define SQLITE_STORE_POOL_MAX 8

struct sqlite_store {
    store base;
    char *path;
    int busy_timeout_ms;
    pthread_mutex_t write_lock; /* held for a whole transaction on writer */
    sqlite3 *writer;
    pthread_mutex_t pool_lock; /* guards idle and nidle */
    sqlite3 *idle[SQLITE_STORE_POOL_MAX];
    size_t nidle;
    pthread_mutex_t claim_lock; /* guards lock_fd and lock_path */
    int lock_fd;                /* holds the claim's flock; -1 when not claimed */
    char *lock_path;
};

static inline void sqlite3_finalizep(sqlite3_stmt **st)
{
    if (*st)
        sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

static const char sqlite_store_schema_v1[] =
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
    "                 create_revision INTEGER NOT NULL, mod_revision INTEGER NOT NULL)"
    "                 WITHOUT ROWID;"
    "INSERT INTO meta (name, value) VALUES ('schema_version', 1), ('revision', 1);";

/* A locked, unopenable, unwritable or full database is "unavailable" (the
 * operator can act on it, or it passes); anything else is a bug or damage. */
static int sqlite_store_err_code(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
        return ERR_STORE_UNAVAILABLE;
    default:
        return ERR_INTERNAL;
    }
}

/* Fill err with what we were doing, SQLite's own words and the file. Call it
 * before anything else runs on db, which would replace sqlite3_errmsg. */
static int sqlite_store_fail(const struct sqlite_store *ss, sqlite3 *db, int rc, gb_err *err,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int sqlite_store_fail(const struct sqlite_store *ss, sqlite3 *db, int rc, gb_err *err,
                             const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const char *detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_BUSY)
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "SQLite store %s: %s: %s (another connection or process held it past "
                       "the %d ms busy timeout)",
                       ss->path, what, detail, ss->busy_timeout_ms);
    const char *hint = (rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT
                           ? " (the file is not an intact SQLite database; restore it from a "
                             "backup or point --store elsewhere)"
                           : "";
    return err_set(err, sqlite_store_err_code(rc), "SQLite store %s: %s: %s%s", ss->path, what,
                   detail, hint);
}

static int sqlite_store_prepare(const struct sqlite_store *ss, sqlite3 *db, const char *sql,
                                sqlite3_stmt **st, gb_err *err)
{
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
    if (rc != SQLITE_OK)
        return sqlite_store_fail(ss, db, rc, err, "preparing '%s'", sql);
    return 0;
}

static int sqlite_store_oom(gb_err *err)
{
    return err_set(err, ERR_INTERNAL, "SQLite store: out of memory");
}

/* ---- URL and connections ---------------------------------------------- */

/* "busy_timeout_ms=N" with N a whole number of milliseconds. */
static int sqlite_store_parse_timeout(const char *query, int *ms)
{
    static const char name[] = "busy_timeout_ms=";
    if (strncmp(query, name, strlen(name)) != 0)
        return -1;
    const char *digits = query + strlen(name);
    char *end = NULL;
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (end == digits || *end || errno || v < 0 || v > INT_MAX)
        return -1;
    *ms = (int)v;
    return 0;
}

/* "sqlite:///abs/path[?busy_timeout_ms=N]" -> path and timeout. The path is
 * taken literally (no %-decoding): it is a file name an operator typed. */
static int sqlite_store_parse_url(const char *url, char **path, int *busy_timeout_ms, gb_err *err)
{
    static const char scheme[] = "sqlite://";
    const char *example = "sqlite:///var/lib/gpubox/state.db";
    if (!url || strncmp(url, scheme, strlen(scheme)) != 0)
        return err_set(err, ERR_INVALID_PARAMS, "store URL '%s' is not a sqlite:// URL, as in %s",
                       url ? url : "", example);
    const char *p = url + strlen(scheme);
    if (*p != '/')
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s': the SQLite backend needs an absolute file path after "
                       "sqlite:// (three slashes in all), as in %s",
                       url, example);
    const char *query = strchr(p, '?');
    size_t len = query ? (size_t)(query - p) : strlen(p);
    if (p[len - 1] == '/')
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s' names a directory; name the database file, as in %s", url,
                       example);

    *busy_timeout_ms = SQLITE_STORE_BUSY_TIMEOUT_MS;
    if (query && sqlite_store_parse_timeout(query + 1, busy_timeout_ms) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s': the only option is busy_timeout_ms=<milliseconds>, "
                       "as in %s?busy_timeout_ms=5000",
                       url, example);
    *path = xstrndup(p, len);
    return 0;
}

/* Open one connection with the settings every connection needs. */
static int sqlite_store_connect(const struct sqlite_store *ss, bool reader, sqlite3 **out,
                                gb_err *err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (reader ? 0 : SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(ss->path, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        err_set(err, ERR_STORE_UNAVAILABLE,
                "cannot open SQLite store '%s': %s (does its directory exist, and may gpuboxd "
                "write there?)",
                ss->path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return -1;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, ss->busy_timeout_ms);
    /* query_only keeps a reader from ever writing by mistake. */
    const char *pragmas =
        reader ? "PRAGMA synchronous=FULL; PRAGMA query_only=1;" : "PRAGMA synchronous=FULL;";
    rc = sqlite3_exec(db, pragmas, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sqlite_store_fail(ss, db, rc, err, "configuring connection");
        sqlite3_close(db);
        return -1;
    }
    *out = db;
    return 0;
}

/* Take an idle reader, or open a new one when every reader is busy. */
static int sqlite_store_reader_get(struct sqlite_store *ss, sqlite3 **db, gb_err *err)
{
    pthread_mutex_lock(&ss->pool_lock);
    *db = ss->nidle ? ss->idle[--ss->nidle] : NULL;
    pthread_mutex_unlock(&ss->pool_lock);
    return *db ? 0 : sqlite_store_connect(ss, true, db, err);
}

/* Close a reader with the statements it keeps (sqlite_store_kept). */
static void sqlite_store_reader_close(sqlite3 *db)
{
    sqlite3_stmt *st;
    while (db && (st = sqlite3_next_stmt(db, NULL)) != NULL)
        sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Give a reader back. After a failure it is closed instead: whatever went
 * wrong should not be handed to the next caller. */
static void sqlite_store_reader_put(struct sqlite_store *ss, sqlite3 *db, bool healthy)
{
    if (healthy) {
        pthread_mutex_lock(&ss->pool_lock);
        if (ss->nidle < SQLITE_STORE_POOL_MAX) {
            ss->idle[ss->nidle++] = db;
            db = NULL;
        }
        pthread_mutex_unlock(&ss->pool_lock);
    }
    sqlite_store_reader_close(db);
}

/* A statement a reader keeps prepared between calls, for a query asked so
 * often that preparing it each time would be most of its cost (the
 * service proxy's store_get_revision, every request): found among the
 * reader's statements by its text, else prepared (persistent) and left
 * there. The caller resets it after use; sqlite_store_reader_close
 * finalizes it. */
static int sqlite_store_kept(const struct sqlite_store *ss, sqlite3 *db, const char *sql,
                             sqlite3_stmt **st, gb_err *err)
{
    for (*st = sqlite3_next_stmt(db, NULL); *st; *st = sqlite3_next_stmt(db, *st))
        if (strcmp(sqlite3_sql(*st), sql) == 0)
            return 0;
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    if (rc != SQLITE_OK)
        return sqlite_store_fail(ss, db, rc, err, "preparing '%s'", sql);
    return 0;
}

/* ---- schema -------------------------------------------------------------- */

/* In a write transaction: create the schema in an empty file, accept our own
 * version, refuse anything else. Later versions add their migrations here. */
static int sqlite_store_schema_locked(struct sqlite_store *ss, gb_err *err)
{
    sqlite3 *db = ss->writer;
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, db,
                             "SELECT (SELECT count(*) FROM sqlite_master),"
                             "       (SELECT count(*) FROM sqlite_master"
                             "         WHERE type = 'table' AND name = 'meta')",
                             &st, err) < 0)
        return -1;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return sqlite_store_fail(ss, db, rc, err, "reading the schema");
    int64_t objects = sqlite3_column_int64(st, 0), has_meta = sqlite3_column_int64(st, 1);

    if (objects == 0) {
        rc = sqlite3_exec(db, sqlite_store_schema_v1, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : sqlite_store_fail(ss, db, rc, err, "creating the schema");
    }
    if (!has_meta)
        return err_set(err, ERR_INTERNAL,
                       "'%s' is a SQLite database but not a gpubox store (it has no meta "
                       "table); point --store at another file",
                       ss->path);

    sqlite3_finalize(steal_ptr(&st));
    if (sqlite_store_prepare(ss, db, "SELECT value FROM meta WHERE name = 'schema_version'", &st,
                             err) < 0)
        return -1;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sqlite_store_fail(ss, db, rc, err, "reading the schema version");
    int64_t version = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (version != SQLITE_STORE_SCHEMA_VERSION)
        return err_set(err, ERR_INTERNAL,
                       "SQLite store %s has schema version %lld; this gpuboxd reads version %d "
                       "only (was the file written by a newer gpubox?)",
                       ss->path, (long long)version, SQLITE_STORE_SCHEMA_VERSION);
    return 0;
}

/* WAL is a property of the file; asking for it again is a no-op. */
static int sqlite_store_enable_wal(struct sqlite_store *ss, gb_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, ss->writer, "PRAGMA journal_mode=WAL", &st, err) < 0)
        return -1;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return sqlite_store_fail(ss, ss->writer, rc, err, "switching to WAL journal mode");
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    if (!mode || strcmp(mode, "wal") != 0)
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "SQLite store %s: WAL journal mode refused (still '%s'); keep the data "
                       "dir on a local filesystem",
                       ss->path, mode ? mode : "?");
    return 0;
}

static int sqlite_store_init_schema(struct sqlite_store *ss, gb_err *err)
{
    int rc = sqlite3_exec(ss->writer, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return sqlite_store_fail(ss, ss->writer, rc, err, "locking to check the schema");
    if (sqlite_store_schema_locked(ss, err) < 0) {
        sqlite3_exec(ss->writer, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    rc = sqlite3_exec(ss->writer, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sqlite_store_fail(ss, ss->writer, rc, err, "committing the schema");
        sqlite3_exec(ss->writer, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

static void sqlite_store_release(store *s);

static void sqlite_store_close(store *s)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    if (!ss)
        return;
    sqlite_store_release(s);
    pthread_mutex_destroy(&ss->claim_lock);
    for (size_t i = 0; i < ss->nidle; i++)
        sqlite_store_reader_close(ss->idle[i]);
    sqlite3_close(ss->writer);
    pthread_mutex_destroy(&ss->write_lock);
    pthread_mutex_destroy(&ss->pool_lock);
    free(ss->path);
    free(ss);
}

static int sqlite_store_open(const char *url, store **out, gb_err *err)
{
    /* Connections are handed between threads (never shared at once), which
     * needs a SQLite built thread-safe. */
    if (!sqlite3_threadsafe())
        return err_set(err, ERR_INTERNAL,
                       "the SQLite library was built without thread support; gpuboxd needs it");
    struct sqlite_store *ss = xcalloc(1, sizeof(*ss));
    ss->base.backend = &store_backend_sqlite;
    pthread_mutex_init(&ss->write_lock, NULL);
    pthread_mutex_init(&ss->pool_lock, NULL);
    pthread_mutex_init(&ss->claim_lock, NULL);
    ss->lock_fd = -1;
    if (sqlite_store_parse_url(url, &ss->path, &ss->busy_timeout_ms, err) < 0 ||
        sqlite_store_connect(ss, false, &ss->writer, err) < 0 ||
        sqlite_store_enable_wal(ss, err) < 0 || sqlite_store_init_schema(ss, err) < 0) {
        sqlite_store_close(&ss->base);
        return -1;
    }
    *out = &ss->base;
    return 0;
}

/* ---- reads ----------------------------------------------------------------- */

static int sqlite_store_dup_column(sqlite3_stmt *st, int col, char **out, gb_err *err)
{
    const unsigned char *text = sqlite3_column_text(st, col);
    if (!text)
        return sqlite_store_oom(err); /* columns are NOT NULL: only OOM gets here */
    *out = xstrndup((const char *)text, (size_t)sqlite3_column_bytes(st, col));
    return 0;
}

/* A row of (key, value, create_revision, mod_revision) into kv. */
static int sqlite_store_row_to_kv(sqlite3_stmt *st, store_kv *kv, gb_err *err)
{
    *kv = (store_kv){0};
    if (sqlite_store_dup_column(st, 0, &kv->key, err) < 0 ||
        sqlite_store_dup_column(st, 1, &kv->value, err) < 0) {
        store_kv_free(kv);
        return -1;
    }
    kv->create_revision = sqlite3_column_int64(st, 2);
    kv->mod_revision = sqlite3_column_int64(st, 3);
    return 0;
}

static int sqlite_store_get_on(struct sqlite_store *ss, sqlite3 *db, const char *key, store_kv *out,
                               gb_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, db,
                             "SELECT key, value, create_revision, mod_revision FROM kv"
                             " WHERE key = ?1",
                             &st, err) < 0)
        return -1;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return sqlite_store_fail(ss, db, rc, err, "reading key '%s'", key);
    return sqlite_store_row_to_kv(st, out, err) < 0 ? -1 : 1;
}

static int sqlite_store_get(store *s, const char *key, store_kv *out, gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    sqlite3 *db = NULL;
    if (sqlite_store_reader_get(ss, &db, err) < 0)
        return -1;
    int r = sqlite_store_get_on(ss, db, key, out, err);
    sqlite_store_reader_put(ss, db, r >= 0);
    return r;
}

static int sqlite_store_get_revision(store *s, const char *key, int64_t *mod_revision, gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    sqlite3 *db = NULL;
    if (sqlite_store_reader_get(ss, &db, err) < 0)
        return -1;
    int r = -1;
    sqlite3_stmt *st = NULL;
    if (sqlite_store_kept(ss, db, "SELECT mod_revision FROM kv WHERE key = ?1", &st, err) == 0) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *mod_revision = sqlite3_column_int64(st, 0);
        r = rc == SQLITE_ROW    ? 1
            : rc == SQLITE_DONE ? 0
                                : sqlite_store_fail(ss, db, rc, err, "reading key '%s'", key);
        sqlite3_reset(st); /* ends the read; the binding of key goes with the next */
        sqlite3_clear_bindings(st);
    }
    sqlite_store_reader_put(ss, db, r >= 0);
    return r;
}

/* The least string above every string that starts with prefix: drop trailing
 * 0xff bytes, then add one to the last byte. NULL when there is none -
 * prefix "" or all 0xff - and the range has no upper bound. */
static char *sqlite_store_prefix_end(const char *prefix)
{
    size_t len = strlen(prefix);
    while (len > 0 && (unsigned char)prefix[len - 1] == 0xff)
        len--;
    if (len == 0)
        return NULL;
    char *e = xstrndup(prefix, len);
    e[len - 1] = (char)((unsigned char)e[len - 1] + 1);
    return e;
}

static int sqlite_store_range_on(struct sqlite_store *ss, sqlite3 *db, const char *prefix,
                                 const char *start, const char *stop, store_kvs *out, gb_err *err)
{
    _cleanup_free_ char *end = stop ? xstrdup(stop) : sqlite_store_prefix_end(prefix);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, db,
                             end ? "SELECT key, value, create_revision, mod_revision FROM kv"
                                   " WHERE key >= ?1 AND key < ?2 ORDER BY key"
                                 : "SELECT key, value, create_revision, mod_revision FROM kv"
                                   " WHERE key >= ?1 ORDER BY key",
                             &st, err) < 0)
        return -1;
    sqlite3_bind_text(st, 1, start ? start : prefix, -1, SQLITE_STATIC);
    if (end)
        sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);

    store_kvs kvs = {0};
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (kvs.n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            store_kv *items = xrealloc(kvs.items, ncap * sizeof(*items));
            kvs.items = items;
            cap = ncap;
        }
        if (sqlite_store_row_to_kv(st, &kvs.items[kvs.n], err) < 0) {
            store_kvs_free(&kvs);
            return -1;
        }
        kvs.n++;
    }
    if (rc != SQLITE_DONE) {
        sqlite_store_fail(ss, db, rc, err, "listing keys under '%s'", prefix);
        store_kvs_free(&kvs);
        return -1;
    }
    *out = kvs;
    return 0;
}

static int sqlite_store_range(store *s, const char *prefix, const char *start, const char *end,
                              store_kvs *out, gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    sqlite3 *db = NULL;
    if (sqlite_store_reader_get(ss, &db, err) < 0)
        return -1;
    int r = sqlite_store_range_on(ss, db, prefix, start, end, out, err);
    sqlite_store_reader_put(ss, db, r >= 0);
    return r;
}

static int sqlite_store_revision_on(struct sqlite_store *ss, sqlite3 *db, int64_t *revision,
                                    gb_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, db, "SELECT value FROM meta WHERE name = 'revision'", &st, err) <
        0)
        return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return err_set(err, ERR_INTERNAL,
                       "SQLite store %s: the meta table has no revision row; the file is damaged",
                       ss->path);
    if (rc != SQLITE_ROW)
        return sqlite_store_fail(ss, db, rc, err, "reading the revision");
    *revision = sqlite3_column_int64(st, 0);
    return 0;
}

static int sqlite_store_revision(store *s, int64_t *revision, gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    sqlite3 *db = NULL;
    if (sqlite_store_reader_get(ss, &db, err) < 0)
        return -1;
    int r = sqlite_store_revision_on(ss, db, revision, err);
    sqlite_store_reader_put(ss, db, r >= 0);
    return r;
}

/* ---- transactions ---------------------------------------------------------- */

static bool sqlite_store_cmp_holds(const store_cmp *c, bool exists, int64_t mod_revision,
                                   const char *value, size_t value_len)
{
    switch (c->kind) {
    case STORE_CMP_ABSENT:
        return !exists;
    case STORE_CMP_EXISTS:
        return exists;
    case STORE_CMP_MOD_REVISION:
        return (exists ? mod_revision : 0) == c->mod_revision;
    case STORE_CMP_VALUE:
        return exists && strlen(c->value) == value_len && memcmp(c->value, value, value_len) == 0;
    }
    return false;
}

/* *holds = whether every comparison is true, checked under the write lock. */
static int sqlite_store_compare(struct sqlite_store *ss, const store_cmp *cmps, size_t ncmps,
                                bool *holds, gb_err *err)
{
    *holds = true;
    if (ncmps == 0)
        return 0;
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, ss->writer, "SELECT mod_revision, value FROM kv WHERE key = ?1",
                             &st, err) < 0)
        return -1;
    for (size_t i = 0; i < ncmps && *holds; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, cmps[i].key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return sqlite_store_fail(ss, ss->writer, rc, err, "comparing key '%s'", cmps[i].key);
        bool exists = rc == SQLITE_ROW;
        const char *value = exists ? (const char *)sqlite3_column_text(st, 1) : NULL;
        if (exists && !value)
            return sqlite_store_oom(err);
        *holds = sqlite_store_cmp_holds(&cmps[i], exists, exists ? sqlite3_column_int64(st, 0) : 0,
                                        value, exists ? (size_t)sqlite3_column_bytes(st, 1) : 0);
    }
    return 0;
}

/* Run one op at revision rev; *changed is set when it touched a row. */
static int sqlite_store_apply_op(struct sqlite_store *ss, const store_op *op, int64_t rev,
                                 bool *changed, gb_err *err)
{
    static const char *const verbs[] = {"putting", "deleting", "deleting keys under"};
    sqlite3 *db = ss->writer;
    _cleanup_free_ char *end = NULL;
    const char *sql;
    switch (op->kind) {
    case STORE_OP_PUT:
        sql = "INSERT INTO kv (key, value, create_revision, mod_revision) VALUES (?1, ?2, ?3, ?3)"
              " ON CONFLICT (key) DO UPDATE"
              " SET value = excluded.value, mod_revision = excluded.mod_revision";
        break;
    case STORE_OP_DELETE:
        sql = "DELETE FROM kv WHERE key = ?1";
        break;
    case STORE_OP_DELETE_PREFIX:
        end = sqlite_store_prefix_end(op->key);
        sql =
            end ? "DELETE FROM kv WHERE key >= ?1 AND key < ?2" : "DELETE FROM kv WHERE key >= ?1";
        break;
    default:
        return err_set(err, ERR_INTERNAL, "unknown store op kind %d", (int)op->kind);
    }
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, db, sql, &st, err) < 0)
        return -1;
    sqlite3_bind_text(st, 1, op->key, -1, SQLITE_STATIC);
    if (op->kind == STORE_OP_PUT) {
        sqlite3_bind_text(st, 2, op->value, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, rev);
    } else if (end) {
        sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);
    }
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return sqlite_store_fail(ss, db, rc, err, "%s key '%s'", verbs[op->kind], op->key);
    if (sqlite3_changes(db) > 0)
        *changed = true;
    return 0;
}

static int sqlite_store_set_revision(struct sqlite_store *ss, int64_t rev, gb_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    if (sqlite_store_prepare(ss, ss->writer, "UPDATE meta SET value = ?1 WHERE name = 'revision'",
                             &st, err) < 0)
        return -1;
    sqlite3_bind_int64(st, 1, rev);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0
                             : sqlite_store_fail(ss, ss->writer, rc, err, "raising the revision");
}

/* The body of a transaction, between BEGIN IMMEDIATE and COMMIT/ROLLBACK. */
static int sqlite_store_txn_body(struct sqlite_store *ss, const store_cmp *cmps, size_t ncmps,
                                 const store_op *ops, size_t nops, bool *holds, bool *changed,
                                 int64_t *rev, gb_err *err)
{
    if (sqlite_store_revision_on(ss, ss->writer, rev, err) < 0 ||
        sqlite_store_compare(ss, cmps, ncmps, holds, err) < 0)
        return -1;
    for (size_t i = 0; *holds && i < nops; i++)
        if (sqlite_store_apply_op(ss, &ops[i], *rev + 1, changed, err) < 0)
            return -1;
    if (*changed) {
        if (sqlite_store_set_revision(ss, *rev + 1, err) < 0)
            return -1;
        ++*rev;
    }
    return 0;
}

static int sqlite_store_txn_locked(struct sqlite_store *ss, const store_cmp *cmps, size_t ncmps,
                                   const store_op *ops, size_t nops, bool *succeeded,
                                   int64_t *revision, gb_err *err)
{
    sqlite3 *db = ss->writer;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return sqlite_store_fail(ss, db, rc, err, "starting a write transaction");
    bool holds = false, changed = false;
    int64_t rev = 0;
    if (sqlite_store_txn_body(ss, cmps, ncmps, ops, nops, &holds, &changed, &rev, err) < 0) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    /* Nothing written: roll back, which costs no sync. */
    rc = sqlite3_exec(db, changed ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sqlite_store_fail(ss, db, rc, err, "committing a transaction");
        if (!sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    *succeeded = holds;
    if (revision)
        *revision = rev;
    return 0;
}

static int sqlite_store_txn(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops,
                            size_t nops, bool *succeeded, int64_t *revision, gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    *succeeded = false;
    pthread_mutex_lock(&ss->write_lock);
    int r = sqlite_store_txn_locked(ss, cmps, ncmps, ops, nops, succeeded, revision, err);
    pthread_mutex_unlock(&ss->write_lock);
    return r;
}

/* ---- one daemon per store ------------------------------------------------ */

/* The message for a lock file someone else holds, naming whoever wrote
 * into it. The file is O_CLOEXEC everywhere, so its holder is a gpuboxd (or
 * the migration tool), never a program one of them ran. */
static int sqlite_store_claim_refused(const struct sqlite_store *ss, int fd, const char *path,
                                      store_owner *holder, gb_err *err)
{
    char text[2048];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (store_owner_from_json(text, holder) < 0)
        *holder = (store_owner){0}; /* it has not written yet */
    char who[512];
    store_owner_describe(holder, who, sizeof(who));
    return err_set(err, ERR_CONFLICT,
                   "the SQLite store %s is in use by %s, which holds its lock file %s; two "
                   "daemons on one store would hand out the same GPUs and ports: stop that one "
                   "first, or give this one a --data-dir (or --store) of its own",
                   ss->path, who, path);
}

static int sqlite_store_claim(store *s, const store_owner *me, int ttl_s, store_owner *holder,
                              gb_err *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    (void)ttl_s; /* the kernel frees the lock with its holder: nothing expires */
    _cleanup_free_ char *json = store_owner_to_json(me);
    if (!json)
        return err_set(err, ERR_INTERNAL,
                       "SQLite store: who claims it cannot be written as JSON (a name that is "
                       "not UTF-8)");
    _cleanup_free_ char *path = xasprintf("%s.lock", ss->path);
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "cannot open %s, the lock file of the SQLite store: %s", path,
                       strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return sqlite_store_claim_refused(ss, fd, path, holder, err);
        return err_set(err, ERR_STORE_UNAVAILABLE, "cannot lock %s: %s", path, strerror(errno));
    }
    size_t len = strlen(json);
    json[len] = '\n'; /* one line, for cat; the NUL is not written */
    if (ftruncate(fd, 0) < 0 || pwrite(fd, json, len + 1, 0) != (ssize_t)(len + 1))
        return err_set(err, ERR_STORE_UNAVAILABLE, "cannot write who holds the store into %s: %s",
                       path, strerror(errno));
    pthread_mutex_lock(&ss->claim_lock);
    ss->lock_fd = fd;
    fd = -1;
    ss->lock_path = steal_ptr(&path);
    pthread_mutex_unlock(&ss->claim_lock);
    return 0;
}

static void sqlite_store_release(store *s)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    pthread_mutex_lock(&ss->claim_lock);
    if (ss->lock_fd >= 0) {
        /* Emptied first: nobody should read a holder out of a free file. */
        int rc = ftruncate(ss->lock_fd, 0);
        (void)rc; /* the lock goes with the close all the same */
        close(ss->lock_fd);
        ss->lock_fd = -1;
    }
    free(ss->lock_path);
    ss->lock_path = NULL;
    pthread_mutex_unlock(&ss->claim_lock);
}

static enum store_claim_state sqlite_store_claim_state(store *s)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    pthread_mutex_lock(&ss->claim_lock);
    bool held = ss->lock_fd >= 0;
    pthread_mutex_unlock(&ss->claim_lock);
    return held ? STORE_CLAIM_HELD : STORE_CLAIM_NONE;
}

static void sqlite_store_claim_describe(store *s, char *buf, size_t size)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    pthread_mutex_lock(&ss->claim_lock);
    if (ss->lock_path)
        snprintf(buf, size, "lock file %s", ss->lock_path);
    else
        snprintf(buf, size, "not claimed");
    pthread_mutex_unlock(&ss->claim_lock);
}

const struct store_backend store_backend_sqlite = {
    .name = "sqlite",
    .scheme = "sqlite",
    .open = sqlite_store_open,
    .close = sqlite_store_close,
    .get = sqlite_store_get,
    .get_revision = sqlite_store_get_revision,
    .range = sqlite_store_range,
    .txn = sqlite_store_txn,
    .revision = sqlite_store_revision,
    .claim = sqlite_store_claim,
    .release = sqlite_store_release,
    .claim_state = sqlite_store_claim_state,
    .claim_describe = sqlite_store_claim_describe,
};
