/*
 * test_store_sqlite.c - what only the SQLite backend does: its URL form, the
 * file it leaves (WAL mode, schema version, meta revision), refusing files
 * that are not its own, and giving up with ERR_STORE_UNAVAILABLE when
 * another process holds the write lock past the busy timeout. The tests look
 * at the file with SQLite directly, as an operator or migration tool would.
 * Behaviour every backend shares is tested in test_store.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store/store.h"
#include "util/cleanup.h"

#include "store_test_util.h"

struct fixture {
    char *dir;
    char *path; /* dir/state.db */
    char *url;  /* sqlite://<path> */
};

static int fixture_setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->dir = store_test_mkdtemp();
    if (!f->dir || asprintf(&f->path, "%s/state.db", f->dir) < 0 ||
        asprintf(&f->url, "sqlite://%s", f->path) < 0) {
        store_test_rmdir(f->dir);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;
    free(f->url);
    free(f->path);
    store_test_rmdir(f->dir);
    free(f);
    return 0;
}

static store *open_ok(const char *url)
{
    store *s = NULL;
    gb_err e = GB_ERR_INIT;
    if (store_open(url, &s, &e) < 0)
        fail_msg("opening %s: %s", url, e.msg);
    return s;
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        fail_msg("sqlite3_open %s: %s", path, sqlite3_errmsg(db));
    return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        char copy[256];
        snprintf(copy, sizeof(copy), "%s", msg ? msg : "?");
        sqlite3_free(msg);
        fail_msg("%s: %s", sql, copy);
    }
}

/* The single text (or integer, as text) a query returns; caller frees. */
static char *raw_query(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("%s: no row (%s)", sql, sqlite3_errmsg(db));
    char *v = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

static void expect_open_error(const char *url, int code, const char *needle1, const char *needle2)
{
    store *s = NULL;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_open(url, &s, &e), -1);
    if (e.code != code)
        fail_msg("%s: code %d, expected %d (%s)", url, e.code, code, e.msg);
    if (needle1 && !strstr(e.msg, needle1))
        fail_msg("%s: message '%s' does not mention '%s'", url, e.msg, needle1);
    if (needle2 && !strstr(e.msg, needle2))
        fail_msg("%s: message '%s' does not mention '%s'", url, e.msg, needle2);
}

static void test_url_forms(void **state)
{
    struct fixture *f = *state;
    expect_open_error("sqlite://", ERR_INVALID_PARAMS, "absolute", "sqlite:///");
    expect_open_error("sqlite://state.db", ERR_INVALID_PARAMS, "absolute", "sqlite:///");
    expect_open_error("sqlite://var/lib/gpubox/state.db", ERR_INVALID_PARAMS, "absolute", NULL);
    expect_open_error("sqlite:///", ERR_INVALID_PARAMS, "directory", NULL);
    expect_open_error("sqlite:///var/lib/gpubox/", ERR_INVALID_PARAMS, "directory", NULL);

    _cleanup_free_ char *opt = NULL;
    assert_true(asprintf(&opt, "%s?journal=off", f->url) > 0);
    expect_open_error(opt, ERR_INVALID_PARAMS, "busy_timeout_ms", NULL);
    free(opt);
    assert_true(asprintf(&opt, "%s?busy_timeout_ms=soon", f->url) > 0);
    expect_open_error(opt, ERR_INVALID_PARAMS, "busy_timeout_ms", NULL);
    free(opt);
    assert_true(asprintf(&opt, "%s?busy_timeout_ms=-1", f->url) > 0);
    expect_open_error(opt, ERR_INVALID_PARAMS, "busy_timeout_ms", NULL);
    free(opt);

    /* The daemon creates its data dir; a missing one is named in the error. */
    _cleanup_free_ char *missing = NULL;
    assert_true(asprintf(&missing, "sqlite://%s/no/such/dir/state.db", f->dir) > 0);
    expect_open_error(missing, ERR_STORE_UNAVAILABLE, "/no/such/dir/state.db", "unable to open");

    /* A valid option, and the path is used as given. */
    assert_true(asprintf(&opt, "%s?busy_timeout_ms=250", f->url) > 0);
    store *s = open_ok(opt);
    assert_string_equal(store_backend_name(s), "sqlite");
    store_close(s);
    FILE *exists = fopen(f->path, "r");
    assert_non_null(exists);
    fclose(exists);
}

static void test_file_layout(void **state)
{
    struct fixture *f = *state;
    store *s = open_ok(f->url);
    gb_err e = GB_ERR_INIT;
    int64_t rev = 0;
    /* A new store starts at revision 1, as a new etcd does. */
    assert_int_equal(store_revision(s, &rev, &e), 0);
    assert_int_equal(rev, 1);
    assert_int_equal(store_put(s, "rs/foo", "{}", &rev, &e), 0);
    assert_int_equal(rev, 2);

    sqlite3 *db = raw_open(f->path);
    _cleanup_free_ char *mode = raw_query(db, "PRAGMA journal_mode");
    assert_string_equal(mode, "wal");
    _cleanup_free_ char *version =
        raw_query(db, "SELECT value FROM meta WHERE name = 'schema_version'");
    assert_string_equal(version, "1");
    _cleanup_free_ char *meta_rev = raw_query(db, "SELECT value FROM meta WHERE name = 'revision'");
    assert_string_equal(meta_rev, "2");
    _cleanup_free_ char *row = raw_query(
        db, "SELECT key || ' ' || value || ' ' || create_revision || ' ' || mod_revision FROM kv");
    assert_string_equal(row, "rs/foo {} 2 2");

    /* A write by another program (a migration tool) is seen by the store. */
    raw_exec(db, "BEGIN IMMEDIATE;"
                 "INSERT INTO kv VALUES ('rs/bar', '{\"x\":1}', 3, 3);"
                 "UPDATE meta SET value = 3 WHERE name = 'revision';"
                 "COMMIT");
    store_kv kv = {0};
    assert_int_equal(store_get(s, "rs/bar", &kv, &e), 1);
    assert_string_equal(kv.value, "{\"x\":1}");
    store_kv_free(&kv);
    assert_int_equal(store_put(s, "rs/baz", "{}", &rev, &e), 0);
    assert_int_equal(rev, 4);
    sqlite3_close(db);
    store_close(s);
}

static void test_refuses_files_not_its_own(void **state)
{
    struct fixture *f = *state;
    /* Not a database at all. */
    FILE *fp = fopen(f->path, "w");
    assert_non_null(fp);
    fputs("this is a text file, not a database, and it is long enough to look like a header\n", fp);
    fclose(fp);
    expect_open_error(f->url, ERR_INTERNAL, f->path, "not a database");

    /* Another program's database: refused and left as it was. */
    remove(f->path);
    sqlite3 *db = raw_open(f->path);
    raw_exec(db, "CREATE TABLE users (name TEXT)");
    expect_open_error(f->url, ERR_INTERNAL, f->path, "not a gpubox store");
    _cleanup_free_ char *tables = raw_query(db, "SELECT count(*) FROM sqlite_master");
    assert_string_equal(tables, "1");
    sqlite3_close(db);

    /* A store written by a newer gpubox. */
    remove(f->path);
    store_close(open_ok(f->url));
    db = raw_open(f->path);
    raw_exec(db, "UPDATE meta SET value = 2 WHERE name = 'schema_version'");
    sqlite3_close(db);
    expect_open_error(f->url, ERR_INTERNAL, "schema version 2", "newer");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Another process holds the write lock: writes wait for the busy timeout,
 * then fail with ERR_STORE_UNAVAILABLE; reads go on (WAL); once the lock is
 * released, writes work again and the failed one left no trace. */
static void test_locked_database(void **state)
{
    struct fixture *f = *state;
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "%s?busy_timeout_ms=300", f->url) > 0);
    store *s = open_ok(url);
    gb_err e = GB_ERR_INIT;
    int64_t rev = 0, locked_rev = 0;
    assert_int_equal(store_put(s, "k", "before", &rev, &e), 0);

    sqlite3 *other = raw_open(f->path);
    raw_exec(other, "BEGIN IMMEDIATE");
    double start = now_ms();
    assert_int_equal(store_put(s, "k", "while locked", NULL, &e), -1);
    double waited = now_ms() - start;
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_non_null(strstr(e.msg, f->path));
    assert_non_null(strstr(e.msg, "locked"));
    assert_non_null(strstr(e.msg, "300 ms"));
    if (waited < 250 || waited > 5000)
        fail_msg("waited %.0f ms for a 300 ms busy timeout", waited);

    store_kv kv = {0};
    assert_int_equal(store_get(s, "k", &kv, &e), 1);
    assert_string_equal(kv.value, "before");
    store_kv_free(&kv);
    assert_int_equal(store_revision(s, &locked_rev, &e), 0);
    assert_int_equal(locked_rev, rev);

    raw_exec(other, "COMMIT");
    sqlite3_close(other);
    int64_t after = 0;
    assert_int_equal(store_put(s, "k", "after", &after, &e), 0);
    assert_int_equal(after, rev + 1);
    store_close(s);
}

/* r is a call refused with ERR_INVALID_PARAMS whose message contains both
 * needles. */
static void expect_refused(int r, const gb_err *e, const char *needle1, const char *needle2)
{
    assert_int_equal(r, -1);
    if (e->code != ERR_INVALID_PARAMS)
        fail_msg("code %d, expected ERR_INVALID_PARAMS (%s)", e->code, e->msg);
    if (!strstr(e->msg, needle1))
        fail_msg("message '%s' does not mention '%s'", e->msg, needle1);
    if (needle2 && !strstr(e->msg, needle2))
        fail_msg("message '%s' does not mention '%s'", e->msg, needle2);
}

/* Relative keys ("../x") need a key prefix, which a SQLite store has not:
 * every call with one is refused and does nothing. */
static void test_relative_keys_refused(void **state)
{
    struct fixture *f = *state;
    store *s = open_ok(f->url);
    assert_int_equal(store_key_depth(s), 0);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_put(s, "k", "v", NULL, &e), 0);
    int64_t before = 0;
    assert_int_equal(store_revision(s, &before, &e), 0);

    static const char need[] = "relative keys need a store with a key prefix (an etcd store of a "
                               "fleet node)";
    const char *const keys[] = {"../k", "../../users/bob", "../"};
    for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
        const char *key = keys[k];
        store_kv kv = {0};
        store_kvs kvs = {0};
        expect_refused(store_get(s, key, &kv, &e), &e, key, need);
        expect_refused(store_range(s, key, &kvs, &e), &e, key, need);
        expect_refused(store_put(s, key, "v", NULL, &e), &e, key, need);
        expect_refused(store_delete(s, key, &e), &e, key, need);

        /* In a transaction beside a valid put: nothing is written. */
        store_op valid = {.kind = STORE_OP_PUT, .key = "written", .value = "v"};
        store_cmp cmps[] = {
            {.kind = STORE_CMP_ABSENT, .key = key},
            {.kind = STORE_CMP_EXISTS, .key = key},
            {.kind = STORE_CMP_MOD_REVISION, .key = key},
            {.kind = STORE_CMP_VALUE, .key = key, .value = "v"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cmps); i++) {
            bool ok = true;
            expect_refused(store_txn(s, &cmps[i], 1, &valid, 1, &ok, NULL, &e), &e, key, need);
        }
        const store_op ops[] = {
            {.kind = STORE_OP_PUT, .key = key, .value = "v"},
            {.kind = STORE_OP_PUT, .key = key, .value = "v", .lease = 7},
            {.kind = STORE_OP_DELETE, .key = key},
            {.kind = STORE_OP_DELETE_PREFIX, .key = key},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
            store_op two[] = {valid, ops[i]};
            bool ok = true;
            expect_refused(store_txn(s, NULL, 0, two, 2, &ok, NULL, &e), &e, key, need);
        }
    }
    /* ".." anywhere else is refused on every store. */
    expect_refused(store_put(s, "a/../b", "v", NULL, &e), &e, "'a/../b'", "may only begin a key");

    store_kvs all = {0};
    assert_int_equal(store_range(s, "", &all, &e), 0);
    assert_int_equal(all.n, 1);
    assert_string_equal(all.items[0].key, "k");
    store_kvs_free(&all);
    int64_t after = 0;
    assert_int_equal(store_revision(s, &after, &e), 0);
    assert_int_equal(after, before);
    store_close(s);
}

int main(void)
{
#define SQLITE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        SQLITE_TEST(test_url_forms),
        SQLITE_TEST(test_file_layout),
        SQLITE_TEST(test_refuses_files_not_its_own),
        SQLITE_TEST(test_locked_database),
        SQLITE_TEST(test_relative_keys_refused),
    };
#undef SQLITE_TEST
    return cmocka_run_group_tests_name("store_sqlite", tests, NULL, NULL);
}
