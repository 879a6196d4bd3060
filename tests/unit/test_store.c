/*
 * test_store.c - the store as its callers see it, through the store_*
 * functions only, run once per backend in store_test_backends.
 *
 * A backend supplies make_url(tmpdir): the URL of an empty store that lives
 * as long as tmpdir does (sqlite: a file in it; etcd: a key prefix of its
 * own on the one etcd server its group setup started for this binary).
 * Adding a backend is one line in that table; every test in
 * store_backend_tests then runs against it as a cmocka group of its own.
 * What only one backend does (SQLite's file, schema and lock timeout) is
 * tested in test_store_sqlite.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "util/cleanup.h"

#include "etcd_test_util.h"
#include "store_test_util.h"

struct store_test_backend {
    const char *name;
    char *(*make_url)(const char *tmpdir);
    /* Around the backend's whole group (may be NULL). */
    int (*group_setup)(void **state);
    int (*group_teardown)(void **state);
};

static char *sqlite_url(const char *tmpdir)
{
    char *url = NULL;
    return asprintf(&url, "sqlite://%s/state.db", tmpdir) < 0 ? NULL : url;
}

/* One etcd for the whole etcd group (etcd_test_shared); each test gets a
 * key prefix of its own, so it starts from an empty store as the sqlite
 * tests do. */
static char *etcd_url(const char *tmpdir)
{
    static int tests;
    (void)tmpdir;
    char *url = NULL;
    return asprintf(&url, "etcd://%s/test-%d", etcd_test_shared.endpoint, ++tests) < 0 ? NULL : url;
}

static const struct store_test_backend store_test_backends[] = {
    {"sqlite", sqlite_url, NULL, NULL},
    {"etcd", etcd_url, etcd_test_group_setup, etcd_test_group_teardown},
};

/* ---- fixture and helpers ------------------------------------------------- */

struct fixture {
    char *dir;
    char *url;
    store *s;
};

static void fixture_free(struct fixture *f)
{
    store_close(f->s);
    free(f->url);
    store_test_rmdir(f->dir);
    free(f);
}

/* *state comes in as the backend and goes out as the fixture. */
static int fixture_setup(void **state)
{
    const struct store_test_backend *b = *state;
    struct fixture *f = calloc(1, sizeof(*f));
    gb_err e = GB_ERR_INIT;
    if (!f)
        return -1;
    f->dir = store_test_mkdtemp();
    f->url = f->dir ? b->make_url(f->dir) : NULL;
    if (!f->url || store_open(f->url, &f->s, &e) < 0) {
        print_error("cannot open a %s store at %s: %s\n", b->name, f->url ? f->url : "?", e.msg);
        fixture_free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    fixture_free(*state);
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

static int64_t put_ok(store *s, const char *key, const char *value)
{
    gb_err e = GB_ERR_INIT;
    int64_t rev = -1;
    if (store_put(s, key, value, &rev, &e) < 0)
        fail_msg("put '%s': %s", key, e.msg);
    return rev;
}

static void delete_ok(store *s, const char *key)
{
    gb_err e = GB_ERR_INIT;
    if (store_delete(s, key, &e) < 0)
        fail_msg("delete '%s': %s", key, e.msg);
}

static int64_t revision_ok(store *s)
{
    gb_err e = GB_ERR_INIT;
    int64_t rev = -1;
    if (store_revision(s, &rev, &e) < 0)
        fail_msg("revision: %s", e.msg);
    return rev;
}

/* Fill kv with key, which must exist. */
static void get_ok(store *s, const char *key, store_kv *kv)
{
    gb_err e = GB_ERR_INIT;
    int r = store_get(s, key, kv, &e);
    if (r < 0)
        fail_msg("get '%s': %s", key, e.msg);
    if (r == 0)
        fail_msg("get '%s': absent, expected present", key);
}

static bool exists(store *s, const char *key)
{
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    int r = store_get(s, key, &kv, &e);
    if (r < 0)
        fail_msg("get '%s': %s", key, e.msg);
    store_kv_free(&kv);
    return r == 1;
}

static void assert_value(store *s, const char *key, const char *value)
{
    store_kv kv = {0};
    get_ok(s, key, &kv);
    assert_string_equal(kv.value, value);
    store_kv_free(&kv);
}

static size_t count_all(store *s)
{
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    if (store_range(s, "", &kvs, &e) < 0)
        fail_msg("range: %s", e.msg);
    size_t n = kvs.n;
    store_kvs_free(&kvs);
    return n;
}

/* Run a txn that must not fail; returns *succeeded. */
static bool txn_ok(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
                   int64_t *revision)
{
    gb_err e = GB_ERR_INIT;
    bool ok = true;
    if (store_txn(s, cmps, ncmps, ops, nops, &ok, revision, &e) < 0)
        fail_msg("txn: %s", e.msg);
    return ok;
}

/* ---- opening ------------------------------------------------------------- */

static void test_open_rejects_bad_urls(void **state)
{
    (void)state;
    const char *bad[] = {"", "state.db", "/var/lib/gpubox/state.db", "nosuch://x", "sqlite:/x"};
    store *s = NULL;
    gb_err e = GB_ERR_INIT;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err_clear(&e);
        assert_int_equal(store_open(bad[i], &s, &e), -1);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(e.msg, "sqlite:///")); /* says what would work */
    }
    assert_int_equal(store_open(NULL, &s, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(store_open("nosuch://x", &s, &e), -1);
    assert_non_null(strstr(e.msg, "nosuch"));
}

/* ---- single keys --------------------------------------------------------- */

static void test_get_absent_and_present(void **state)
{
    struct fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    assert_int_equal(store_get(f->s, "rs/foo", &kv, &e), 0);

    int64_t rev = put_ok(f->s, "rs/foo", "{\"image\":\"x\"}");
    assert_int_equal(store_get(f->s, "rs/foo", &kv, &e), 1);
    assert_string_equal(kv.key, "rs/foo");
    assert_string_equal(kv.value, "{\"image\":\"x\"}");
    assert_int_equal(kv.create_revision, rev);
    assert_int_equal(kv.mod_revision, rev);
    store_kv_free(&kv);

    /* Neighbours of a present key are still absent. */
    assert_false(exists(f->s, "rs/fo"));
    assert_false(exists(f->s, "rs/foo/"));
    assert_false(exists(f->s, "rs/foo1"));
}

/* store_get_revision: the key's mod_revision without its value, absent
 * as 0, a write or a delete seen at once. */
static void test_get_revision(void **state)
{
    struct fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    int64_t rev = -1;
    assert_int_equal(store_get_revision(f->s, "rs/foo", &rev, &e), 0);
    assert_int_equal(rev, 0);
    int64_t first = put_ok(f->s, "rs/foo", "{\"image\":\"x\"}");
    put_ok(f->s, "rs/other", "x");
    assert_int_equal(store_get_revision(f->s, "rs/foo", &rev, &e), 1);
    assert_int_equal(rev, first);
    int64_t second = put_ok(f->s, "rs/foo", "{\"image\":\"y\"}");
    assert_int_equal(store_get_revision(f->s, "rs/foo", &rev, &e), 1);
    assert_int_equal(rev, second);
    assert_int_equal(store_delete(f->s, "rs/foo", &e), 0);
    assert_int_equal(store_get_revision(f->s, "rs/foo", &rev, &e), 0);
    assert_int_equal(store_get_revision(f->s, "rs/fo", &rev, &e), 0);
    /* keys are checked as for store_get */
    assert_int_equal(store_get_revision(f->s, "a/../b", &rev, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

static void test_put_overwrite_keeps_create_revision(void **state)
{
    struct fixture *f = *state;
    int64_t first = put_ok(f->s, "k", "one");
    int64_t second = put_ok(f->s, "k", "two");
    assert_int_equal(second, first + 1);
    /* Writing the same value again is still a write, as in etcd. */
    int64_t third = put_ok(f->s, "k", "two");
    assert_int_equal(third, second + 1);

    store_kv kv = {0};
    get_ok(f->s, "k", &kv);
    assert_string_equal(kv.value, "two");
    assert_int_equal(kv.create_revision, first);
    assert_int_equal(kv.mod_revision, third);
    store_kv_free(&kv);

    /* Empty values are values. */
    put_ok(f->s, "empty", "");
    assert_value(f->s, "empty", "");
}

static void test_delete(void **state)
{
    struct fixture *f = *state;
    int64_t created = put_ok(f->s, "k", "v");
    put_ok(f->s, "other", "v");
    delete_ok(f->s, "k");
    assert_false(exists(f->s, "k"));
    assert_true(exists(f->s, "other"));
    assert_int_equal(revision_ok(f->s), created + 2);

    /* Deleting what is not there changes nothing, not even the revision. */
    delete_ok(f->s, "k");
    delete_ok(f->s, "never");
    assert_int_equal(revision_ok(f->s), created + 2);

    /* A key put again after a delete is a new key. */
    int64_t again = put_ok(f->s, "k", "w");
    store_kv kv = {0};
    get_ok(f->s, "k", &kv);
    assert_int_equal(kv.create_revision, again);
    assert_int_equal(kv.mod_revision, again);
    store_kv_free(&kv);
}

/* ---- ranges -------------------------------------------------------------- */

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* range(prefix) must give exactly the keys of want (sorted), with values. */
static void assert_range(store *s, const char *prefix, const char *const *want, size_t nwant)
{
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    if (store_range(s, prefix, &kvs, &e) < 0)
        fail_msg("range '%s': %s", prefix, e.msg);
    if (kvs.n != nwant)
        fail_msg("range '%s': %zu keys, expected %zu", prefix, kvs.n, nwant);
    for (size_t i = 0; i < nwant; i++) {
        assert_string_equal(kvs.items[i].key, want[i]);
        /* Every test key's value is the key with "=" in front. */
        assert_string_equal(kvs.items[i].value + 1, want[i]);
        assert_true(kvs.items[i].mod_revision > 0);
    }
    store_kvs_free(&kvs);
}

static void test_range_by_prefix(void **state)
{
    struct fixture *f = *state;
    /* Keys that trap LIKE ('%' and '_' are wildcards there), a naive
     * successor (trailing 0xff bytes) and signed-char comparisons. */
    const char *keys[] = {
        "a",     "a%",       "a%b",    "a_",         "a_b",       "ab",    "aXb",
        "a\x7f", "a\x80",    "a\xff",  "a\xff\x01",  "a\xff\xff", "b",     "b\x80",
        "\xff",  "\xff\xfe", "rs/foo", "rs/foo/v/1", "rs/foobar", "rs/fo",
    };
    size_t n = ARRAY_SIZE(keys);
    /* Put in reverse order so insertion order cannot pass for sorting. */
    for (size_t i = n; i-- > 0;) {
        char value[32];
        snprintf(value, sizeof(value), "=%s", keys[i]);
        put_ok(f->s, keys[i], value);
    }

    const char *sorted[ARRAY_SIZE(keys)];
    memcpy(sorted, keys, sizeof(keys));
    qsort(sorted, n, sizeof(sorted[0]), cmp_strp);
    assert_range(f->s, "", sorted, n);

    const char *pct[] = {"a%", "a%b"};
    assert_range(f->s, "a%", pct, ARRAY_SIZE(pct));
    const char *under[] = {"a_", "a_b"};
    assert_range(f->s, "a_", under, ARRAY_SIZE(under));
    const char *ff[] = {"a\xff", "a\xff\x01", "a\xff\xff"};
    assert_range(f->s, "a\xff", ff, ARRAY_SIZE(ff));
    const char *ffff[] = {"a\xff\xff"};
    assert_range(f->s, "a\xff\xff", ffff, ARRAY_SIZE(ffff));
    const char *top[] = {"\xff", "\xff\xfe"};
    assert_range(f->s, "\xff", top, ARRAY_SIZE(top));
    const char *b[] = {"b", "b\x80"};
    assert_range(f->s, "b", b, ARRAY_SIZE(b));
    const char *foo[] = {"rs/foo", "rs/foo/v/1", "rs/foobar"};
    assert_range(f->s, "rs/foo", foo, ARRAY_SIZE(foo));
    const char *foo_slash[] = {"rs/foo/v/1"};
    assert_range(f->s, "rs/foo/", foo_slash, ARRAY_SIZE(foo_slash));
    assert_range(f->s, "rs/foo/v/1/", NULL, 0);
    assert_range(f->s, "zzz", NULL, 0);
}

/* store_range_between's keys, as the list want (n of them). */
static void assert_between(store *s, const char *prefix, const char *start, const char *end,
                           const char *const *want, size_t nwant)
{
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    if (store_range_between(s, prefix, start, end, &kvs, &e) < 0)
        fail_msg("range '%s' [%s, %s): %s", prefix, start ? start : "-", end ? end : "-", e.msg);
    if (kvs.n != nwant)
        fail_msg("range '%s' [%s, %s): %zu keys, expected %zu", prefix, start ? start : "-",
                 end ? end : "-", kvs.n, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_string_equal(kvs.items[i].key, want[i]);
    store_kvs_free(&kvs);
}

/* A stretch of a prefix's keys: keys that sort by time give a stretch of
 * time, none of the prefix's neighbours leaking in. */
static void test_range_between(void **state)
{
    struct fixture *f = *state;
    const char *keys[] = {"t/0001-a", "t/0002-a", "t/0002-b", "t/0003-a",
                          "t/0009-z", "t0",       "s/0002-a", "u"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        put_ok(f->s, keys[i], "=");
    const char *from2[] = {"t/0002-a", "t/0002-b", "t/0003-a", "t/0009-z"};
    assert_between(f->s, "t/", "t/0002-", NULL, from2, ARRAY_SIZE(from2));
    const char *to3[] = {"t/0001-a", "t/0002-a", "t/0002-b"};
    assert_between(f->s, "t/", NULL, "t/0003-", to3, ARRAY_SIZE(to3));
    const char *mid[] = {"t/0002-a", "t/0002-b", "t/0003-a"};
    assert_between(f->s, "t/", "t/0002-", "t/0004-", mid, ARRAY_SIZE(mid));
    assert_between(f->s, "t/", "t/0004-", "t/0002-", NULL, 0);
    assert_between(f->s, "t/", "t/9", NULL, NULL, 0);
    const char *all[] = {"t/0001-a", "t/0002-a", "t/0002-b", "t/0003-a", "t/0009-z"};
    assert_between(f->s, "t/", NULL, NULL, all, ARRAY_SIZE(all));
    /* Bounds outside the prefix are refused. */
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    assert_int_equal(store_range_between(f->s, "t/", "s/0002", NULL, &kvs, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(store_range_between(f->s, "t/", NULL, "u", &kvs, &e), -1);
    assert_int_equal(kvs.n, 0);
}

static void test_range_many_sorted(void **state)
{
    struct fixture *f = *state;
    enum { N = 300 };
    /* Numbers without padding: bytewise order is not numeric order. */
    for (int i = N - 1; i >= 0; i--) {
        char key[32];
        snprintf(key, sizeof(key), "n/%d", (i * 7919) % N);
        put_ok(f->s, key, "x");
    }
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    assert_int_equal(store_range(f->s, "n/", &kvs, &e), 0);
    assert_int_equal(kvs.n, N);
    for (size_t i = 1; i < kvs.n; i++)
        assert_true(strcmp(kvs.items[i - 1].key, kvs.items[i].key) < 0);
    assert_string_equal(kvs.items[0].key, "n/0");
    assert_string_equal(kvs.items[1].key, "n/1");
    assert_string_equal(kvs.items[2].key, "n/10");
    store_kvs_free(&kvs);
}

/* ---- transactions -------------------------------------------------------- */

static void test_txn_each_comparison(void **state)
{
    struct fixture *f = *state;
    int64_t r = put_ok(f->s, "t/k", "v1");
    put_ok(f->s, "t/empty", "");
    const struct {
        store_cmp cmp;
        bool holds;
    } cases[] = {
        {{.kind = STORE_CMP_ABSENT, .key = "t/none"}, true},
        {{.kind = STORE_CMP_ABSENT, .key = "t/k"}, false},
        {{.kind = STORE_CMP_EXISTS, .key = "t/k"}, true},
        {{.kind = STORE_CMP_EXISTS, .key = "t/empty"}, true},
        {{.kind = STORE_CMP_EXISTS, .key = "t/none"}, false},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/k", .mod_revision = r}, true},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/k", .mod_revision = r - 1}, false},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/k", .mod_revision = r + 1}, false},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/k", .mod_revision = 0}, false},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/none", .mod_revision = 0}, true},
        {{.kind = STORE_CMP_MOD_REVISION, .key = "t/none", .mod_revision = r}, false},
        {{.kind = STORE_CMP_VALUE, .key = "t/k", .value = "v1"}, true},
        {{.kind = STORE_CMP_VALUE, .key = "t/k", .value = "v2"}, false},
        {{.kind = STORE_CMP_VALUE, .key = "t/k", .value = "v"}, false},
        {{.kind = STORE_CMP_VALUE, .key = "t/k", .value = "v1 "}, false},
        {{.kind = STORE_CMP_VALUE, .key = "t/empty", .value = ""}, true},
        {{.kind = STORE_CMP_VALUE, .key = "t/none", .value = ""}, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int64_t before = revision_ok(f->s), after = -1;
        store_op op = {.kind = STORE_OP_PUT, .key = "t/out", .value = "written"};
        bool ok = txn_ok(f->s, &cases[i].cmp, 1, &op, 1, &after);
        if (ok != cases[i].holds)
            fail_msg("case %zu (kind %d on %s): succeeded=%d, expected %d", i,
                     (int)cases[i].cmp.kind, cases[i].cmp.key, ok, cases[i].holds);
        assert_int_equal(exists(f->s, "t/out"), cases[i].holds);
        assert_int_equal(after, before + (cases[i].holds ? 1 : 0));
        assert_int_equal(revision_ok(f->s), after);
        delete_ok(f->s, "t/out");
    }
    /* Failed comparisons left the compared keys alone too. */
    assert_value(f->s, "t/k", "v1");
}

static void test_txn_multi_key_atomic(void **state)
{
    struct fixture *f = *state;
    put_ok(f->s, "a", "1");
    put_ok(f->s, "b", "2");
    int64_t before = revision_ok(f->s);
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = "a", .value = "10"},
        {.kind = STORE_OP_PUT, .key = "c", .value = "3"},
        {.kind = STORE_OP_DELETE, .key = "b"},
    };

    /* The first comparison holds, the second does not: nothing happens. */
    store_cmp half[] = {
        {.kind = STORE_CMP_VALUE, .key = "a", .value = "1"},
        {.kind = STORE_CMP_VALUE, .key = "b", .value = "999"},
    };
    int64_t rev = -1;
    assert_false(txn_ok(f->s, half, ARRAY_SIZE(half), ops, ARRAY_SIZE(ops), &rev));
    assert_int_equal(rev, before);
    assert_value(f->s, "a", "1");
    assert_value(f->s, "b", "2");
    assert_false(exists(f->s, "c"));

    /* Both hold: everything happens, at one new revision. */
    store_cmp all[] = {
        {.kind = STORE_CMP_VALUE, .key = "a", .value = "1"},
        {.kind = STORE_CMP_ABSENT, .key = "c"},
    };
    assert_true(txn_ok(f->s, all, ARRAY_SIZE(all), ops, ARRAY_SIZE(ops), &rev));
    assert_int_equal(rev, before + 1);
    assert_false(exists(f->s, "b"));
    store_kv a = {0}, c = {0};
    get_ok(f->s, "a", &a);
    get_ok(f->s, "c", &c);
    assert_string_equal(a.value, "10");
    assert_int_equal(a.mod_revision, rev);
    assert_true(a.create_revision < rev);
    assert_string_equal(c.value, "3");
    assert_int_equal(c.create_revision, rev);
    assert_int_equal(c.mod_revision, rev);
    store_kv_free(&a);
    store_kv_free(&c);

    /* Comparisons see the state before the ops: running the same txn again
     * fails because a is now "10". */
    assert_false(txn_ok(f->s, all, ARRAY_SIZE(all), ops, ARRAY_SIZE(ops), &rev));
    assert_int_equal(rev, before + 1);
}

static void test_txn_delete_prefix(void **state)
{
    struct fixture *f = *state;
    const char *keys[] = {"p", "p/1", "p/2", "p/sub/3", "p%x", "p_", "p0", "q/1"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        put_ok(f->s, keys[i], "x");
    int64_t before = revision_ok(f->s), rev = -1;

    store_op del = {.kind = STORE_OP_DELETE_PREFIX, .key = "p/"};
    assert_true(txn_ok(f->s, NULL, 0, &del, 1, &rev));
    assert_int_equal(rev, before + 1);
    assert_false(exists(f->s, "p/1"));
    assert_false(exists(f->s, "p/2"));
    assert_false(exists(f->s, "p/sub/3"));
    const char *left[] = {"p", "p%x", "p0", "p_", "q/1"};
    for (size_t i = 0; i < ARRAY_SIZE(left); i++)
        assert_true(exists(f->s, left[i]));

    /* Nothing under the prefix: succeeds, writes nothing. */
    assert_true(txn_ok(f->s, NULL, 0, &del, 1, &rev));
    assert_int_equal(rev, before + 1);

    /* '%' and '_' in a prefix are literal. */
    store_op del_pct = {.kind = STORE_OP_DELETE_PREFIX, .key = "p%"};
    assert_true(txn_ok(f->s, NULL, 0, &del_pct, 1, &rev));
    assert_false(exists(f->s, "p%x"));
    assert_true(exists(f->s, "p0"));
    assert_true(exists(f->s, "p_"));

    /* With a put of another key, in one revision. */
    store_op ops[] = {
        {.kind = STORE_OP_DELETE_PREFIX, .key = "p"},
        {.kind = STORE_OP_PUT, .key = "q/2", .value = "y"},
    };
    int64_t mid = revision_ok(f->s);
    assert_true(txn_ok(f->s, NULL, 0, ops, ARRAY_SIZE(ops), &rev));
    assert_int_equal(rev, mid + 1);
    assert_int_equal(count_all(f->s), 2); /* q/1, q/2 */
}

static void test_revision_semantics(void **state)
{
    struct fixture *f = *state;
    int64_t r0 = revision_ok(f->s), rev = -1;
    assert_true(r0 >= 1);

    assert_int_equal(put_ok(f->s, "x", "1"), r0 + 1);
    assert_int_equal(revision_ok(f->s), r0 + 1);

    /* One transaction, one revision, shared by every key it writes. */
    store_op three[] = {
        {.kind = STORE_OP_PUT, .key = "x", .value = "2"},
        {.kind = STORE_OP_PUT, .key = "y", .value = "2"},
        {.kind = STORE_OP_PUT, .key = "z", .value = "2"},
    };
    assert_true(txn_ok(f->s, NULL, 0, three, ARRAY_SIZE(three), &rev));
    assert_int_equal(rev, r0 + 2);
    for (size_t i = 0; i < ARRAY_SIZE(three); i++) {
        store_kv kv = {0};
        get_ok(f->s, three[i].key, &kv);
        assert_int_equal(kv.mod_revision, r0 + 2);
        store_kv_free(&kv);
    }

    /* A failed transaction reports the current revision and keeps it. */
    store_cmp no = {.kind = STORE_CMP_ABSENT, .key = "x"};
    assert_false(txn_ok(f->s, &no, 1, three, ARRAY_SIZE(three), &rev));
    assert_int_equal(rev, r0 + 2);

    /* No ops, or ops that change nothing: no new revision. */
    store_cmp yes = {.kind = STORE_CMP_EXISTS, .key = "x"};
    assert_true(txn_ok(f->s, &yes, 1, NULL, 0, &rev));
    assert_int_equal(rev, r0 + 2);
    assert_true(txn_ok(f->s, NULL, 0, NULL, 0, &rev));
    assert_int_equal(rev, r0 + 2);
    store_op del_absent = {.kind = STORE_OP_DELETE, .key = "never"};
    assert_true(txn_ok(f->s, NULL, 0, &del_absent, 1, &rev));
    assert_int_equal(rev, r0 + 2);

    /* A no-op delete beside a real write: still exactly one. */
    store_op mixed[] = {del_absent, {.kind = STORE_OP_PUT, .key = "w", .value = "1"}};
    assert_true(txn_ok(f->s, NULL, 0, mixed, ARRAY_SIZE(mixed), &rev));
    assert_int_equal(rev, r0 + 3);

    delete_ok(f->s, "w");
    assert_int_equal(revision_ok(f->s), r0 + 4);
    /* The revision never goes back, even when the newest key is deleted. */
    assert_int_equal(put_ok(f->s, "w", "again"), r0 + 5);
}

/* ---- limits -------------------------------------------------------------- */

static char *filled(size_t len, char c)
{
    char *s = malloc(len + 1);
    assert_non_null(s);
    memset(s, c, len);
    s[len] = '\0';
    return s;
}

static void expect_invalid(int r, const gb_err *e, const char *needle)
{
    assert_int_equal(r, -1);
    assert_int_equal(e->code, ERR_INVALID_PARAMS);
    if (needle && !strstr(e->msg, needle))
        fail_msg("message '%s' does not mention '%s'", e->msg, needle);
}

static void test_key_and_value_limits(void **state)
{
    struct fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    store_kvs kvs = {0};
    bool ok = true;
    _cleanup_free_ char *key_max = filled(STORE_KEY_MAX, 'k');
    _cleanup_free_ char *key_over = filled(STORE_KEY_MAX + 1, 'k');
    _cleanup_free_ char *value_max = filled(STORE_VALUE_MAX, 'v');
    _cleanup_free_ char *value_over = filled(STORE_VALUE_MAX + 1, 'v');
    int64_t before = revision_ok(f->s);

    expect_invalid(store_get(f->s, "", &kv, &e), &e, "empty");
    expect_invalid(store_get(f->s, NULL, &kv, &e), &e, "empty");
    expect_invalid(store_put(f->s, "", "v", NULL, &e), &e, "empty");
    expect_invalid(store_put(f->s, key_over, "v", NULL, &e), &e, "1024");
    expect_invalid(store_get(f->s, key_over, &kv, &e), &e, "1024");
    expect_invalid(store_put(f->s, "k", value_over, NULL, &e), &e, "1048576");
    expect_invalid(store_put(f->s, "k", NULL, NULL, &e), &e, "missing");
    expect_invalid(store_range(f->s, key_over, &kvs, &e), &e, NULL);
    expect_invalid(store_range(f->s, NULL, &kvs, &e), &e, NULL);

    /* One bad op spoils the whole transaction: the good put is not applied. */
    store_op bad_op[] = {
        {.kind = STORE_OP_PUT, .key = "good", .value = "v"},
        {.kind = STORE_OP_DELETE, .key = key_over},
    };
    expect_invalid(store_txn(f->s, NULL, 0, bad_op, 2, &ok, NULL, &e), &e, NULL);
    store_cmp bad_cmp = {.kind = STORE_CMP_EXISTS, .key = ""};
    expect_invalid(store_txn(f->s, &bad_cmp, 1, bad_op, 1, &ok, NULL, &e), &e, NULL);
    store_op wipe = {.kind = STORE_OP_DELETE_PREFIX, .key = ""};
    expect_invalid(store_txn(f->s, NULL, 0, &wipe, 1, &ok, NULL, &e), &e, "every key");
    /* Writing one key twice in a transaction is refused (as etcd does). */
    store_op twice[] = {
        {.kind = STORE_OP_PUT, .key = "dup", .value = "1"},
        {.kind = STORE_OP_PUT, .key = "dup", .value = "2"},
    };
    expect_invalid(store_txn(f->s, NULL, 0, twice, 2, &ok, NULL, &e), &e, "dup");
    store_op put_and_delete[] = {
        {.kind = STORE_OP_PUT, .key = "dup", .value = "1"},
        {.kind = STORE_OP_DELETE, .key = "dup"},
    };
    expect_invalid(store_txn(f->s, NULL, 0, put_and_delete, 2, &ok, NULL, &e), &e, "dup");
    store_op put_under_prefix[] = {
        {.kind = STORE_OP_DELETE_PREFIX, .key = "d"},
        {.kind = STORE_OP_PUT, .key = "dup", .value = "1"},
    };
    expect_invalid(store_txn(f->s, NULL, 0, put_under_prefix, 2, &ok, NULL, &e), &e, "dup");
    /* Transactions larger than a default etcd takes, on every backend. */
    store_op many[STORE_TXN_OPS_MAX + 1];
    store_cmp many_cmps[STORE_TXN_OPS_MAX + 1];
    char many_keys[STORE_TXN_OPS_MAX + 1][16];
    for (size_t i = 0; i < ARRAY_SIZE(many); i++) {
        snprintf(many_keys[i], sizeof(many_keys[i]), "many/%zu", i);
        many[i] = (store_op){.kind = STORE_OP_PUT, .key = many_keys[i], .value = "v"};
        many_cmps[i] = (store_cmp){.kind = STORE_CMP_ABSENT, .key = many_keys[i]};
    }
    expect_invalid(store_txn(f->s, NULL, 0, many, ARRAY_SIZE(many), &ok, NULL, &e), &e, "128");
    /* One of etcd's 128 comparisons is the owner's fence (store.h). */
    expect_invalid(store_txn(f->s, many_cmps, STORE_TXN_CMPS_MAX + 1, NULL, 0, &ok, NULL, &e), &e,
                   "at most 127");
    _cleanup_free_ char *value_big = filled(STORE_TXN_BYTES_MAX / 2, 'b');
    store_op too_big[] = {
        {.kind = STORE_OP_PUT, .key = "big/1", .value = value_big},
        {.kind = STORE_OP_PUT, .key = "big/2", .value = value_big},
    };
    expect_invalid(store_txn(f->s, NULL, 0, too_big, 2, &ok, NULL, &e), &e, "bytes");
    assert_int_equal(count_all(f->s), 0);
    assert_int_equal(revision_ok(f->s), before);

    /* Exactly at the limits is fine, and comes back whole. */
    put_ok(f->s, key_max, value_max);
    get_ok(f->s, key_max, &kv);
    assert_int_equal(strlen(kv.key), STORE_KEY_MAX);
    assert_int_equal(strlen(kv.value), STORE_VALUE_MAX);
    assert_memory_equal(kv.value, value_max, STORE_VALUE_MAX);
    store_kv_free(&kv);
    store_cmp same = {.kind = STORE_CMP_VALUE, .key = key_max, .value = value_max};
    assert_true(txn_ok(f->s, &same, 1, NULL, 0, NULL));
    /* As are the most comparisons and ops a transaction may have. */
    assert_true(txn_ok(f->s, many_cmps, STORE_TXN_CMPS_MAX, many, STORE_TXN_OPS_MAX, NULL));
    assert_int_equal(count_all(f->s), 1 + STORE_TXN_OPS_MAX);
    /* And a transaction of exactly STORE_TXN_BYTES_MAX bytes (the keys
     * big/1 and big/2 are 5 bytes each). */
    _cleanup_free_ char *value_half = filled((STORE_TXN_BYTES_MAX - 10) / 2, 'h');
    store_op at_limit[] = {
        {.kind = STORE_OP_PUT, .key = "big/1", .value = value_half},
        {.kind = STORE_OP_PUT, .key = "big/2", .value = value_half},
    };
    assert_true(txn_ok(f->s, NULL, 0, at_limit, 2, NULL));
    assert_value(f->s, "big/2", value_half);
}

/* ---- persistence and several handles -------------------------------------- */

static void test_reopen_finds_data_and_revision(void **state)
{
    struct fixture *f = *state;
    int64_t created = put_ok(f->s, "rs/foo", "{\"v\":1}");
    put_ok(f->s, "rs/bar", "{}");
    int64_t modified = put_ok(f->s, "rs/foo", "{\"v\":2}");
    delete_ok(f->s, "rs/bar");
    int64_t rev = revision_ok(f->s);
    store_close(f->s);

    f->s = open_ok(f->url);
    assert_int_equal(revision_ok(f->s), rev);
    store_kv kv = {0};
    get_ok(f->s, "rs/foo", &kv);
    assert_string_equal(kv.value, "{\"v\":2}");
    assert_int_equal(kv.create_revision, created);
    assert_int_equal(kv.mod_revision, modified);
    store_kv_free(&kv);
    assert_false(exists(f->s, "rs/bar"));
    assert_int_equal(put_ok(f->s, "rs/baz", "{}"), rev + 1);
}

/* A writer killed with SIGKILL right after store_put returned: the write is
 * there when the store is opened again. */
static void test_write_survives_kill9(void **state)
{
    struct fixture *f = *state;
    store_close(f->s);
    f->s = NULL;
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        store *s = NULL;
        gb_err e = GB_ERR_INIT;
        int64_t rev = -1;
        if (store_open(f->url, &s, &e) < 0 || store_put(s, "durable", "yes", &rev, &e) < 0)
            _exit(2);
        if (write(pipefd[1], &rev, sizeof(rev)) != sizeof(rev))
            _exit(3);
        raise(SIGKILL);
        _exit(4);
    }
    close(pipefd[1]);
    int64_t rev = -1;
    ssize_t got = read(pipefd[0], &rev, sizeof(rev));
    close(pipefd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(got, sizeof(rev));
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    f->s = open_ok(f->url);
    store_kv kv = {0};
    get_ok(f->s, "durable", &kv);
    assert_string_equal(kv.value, "yes");
    assert_int_equal(kv.mod_revision, rev);
    store_kv_free(&kv);
    assert_int_equal(revision_ok(f->s), rev);
}

static void test_two_handles_share_state(void **state)
{
    struct fixture *f = *state;
    store *other = open_ok(f->url);

    put_ok(f->s, "from/one", "1");
    assert_value(other, "from/one", "1");
    int64_t rev = put_ok(other, "from/two", "2");
    assert_value(f->s, "from/two", "2");
    assert_int_equal(revision_ok(f->s), rev);
    assert_int_equal(revision_ok(other), rev);

    /* A compare-and-swap based on what `other` read loses once f->s wrote. */
    store_kv seen = {0};
    get_ok(other, "from/one", &seen);
    put_ok(f->s, "from/one", "changed");
    store_cmp cmp = {
        .kind = STORE_CMP_MOD_REVISION, .key = "from/one", .mod_revision = seen.mod_revision};
    store_op op = {.kind = STORE_OP_PUT, .key = "from/one", .value = "stale"};
    assert_false(txn_ok(other, &cmp, 1, &op, 1, NULL));
    assert_value(f->s, "from/one", "changed");
    store_kv_free(&seen);

    /* With a fresh read it wins, and f->s sees the result. */
    get_ok(other, "from/one", &seen);
    cmp.mod_revision = seen.mod_revision;
    op.value = "fresh";
    assert_true(txn_ok(other, &cmp, 1, &op, 1, NULL));
    assert_value(f->s, "from/one", "fresh");
    store_kv_free(&seen);
    store_close(other);
}

/* ---- concurrent compare-and-swap ------------------------------------------ */

#define RACE_THREADS 8
#define RACE_ROUNDS 60
#define RACE_INCREMENTS 25 /* per thread, in the counter race */
#define RACE_KEY "race/key"

/* What the racing threads share. cmocka's asserts must stay on the main
 * thread, so threads count what went wrong and the main thread checks. */
struct race {
    store *handles[2];
    size_t nhandles;
    pthread_barrier_t barrier;
    atomic_int wins[RACE_ROUNDS];
    atomic_int winner[RACE_ROUNDS];
    atomic_int wrong_value; /* rounds whose stored value was not the winner's */
    atomic_int retries;
    atomic_int errors;
    pthread_mutex_t lock;
    char first_error[600];
};

struct racer {
    struct race *race;
    int id;
};

static void race_error(struct race *race, const char *what, const gb_err *e)
{
    atomic_fetch_add(&race->errors, 1);
    pthread_mutex_lock(&race->lock);
    if (!race->first_error[0])
        snprintf(race->first_error, sizeof(race->first_error), "%s: %s", what, e->msg);
    pthread_mutex_unlock(&race->lock);
}

/* Every thread reads the key, waits until all have read, then tries a
 * compare-and-swap on the revision it read: exactly one may win. */
static void *race_cas_rounds(void *arg)
{
    struct racer *me = arg;
    struct race *race = me->race;
    store *s = race->handles[(size_t)me->id % race->nhandles];
    for (int r = 0; r < RACE_ROUNDS; r++) {
        gb_err e = GB_ERR_INIT;
        store_kv kv = {0};
        pthread_barrier_wait(&race->barrier);
        int found = store_get(s, RACE_KEY, &kv, &e);
        if (found < 0)
            race_error(race, "get", &e);
        int64_t seen = found == 1 ? kv.mod_revision : 0; /* round 0: absent */
        store_kv_free(&kv);
        pthread_barrier_wait(&race->barrier);

        char value[64];
        snprintf(value, sizeof(value), "round %d thread %d", r, me->id);
        store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = RACE_KEY, .mod_revision = seen};
        store_op op = {.kind = STORE_OP_PUT, .key = RACE_KEY, .value = value};
        bool ok = false;
        if (store_txn(s, &cmp, 1, &op, 1, &ok, NULL, &e) < 0)
            race_error(race, "txn", &e);
        else if (ok) {
            atomic_fetch_add(&race->wins[r], 1);
            atomic_store(&race->winner[r], me->id);
        }

        if (pthread_barrier_wait(&race->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            snprintf(value, sizeof(value), "round %d thread %d", r, atomic_load(&race->winner[r]));
            if (store_get(s, RACE_KEY, &kv, &e) != 1)
                race_error(race, "get after round", &e);
            else if (strcmp(kv.value, value) != 0)
                atomic_fetch_add(&race->wrong_value, 1);
            store_kv_free(&kv);
        }
    }
    return NULL;
}

/* Read the counter, write counter+1 if nobody wrote in between, else retry. */
static void *race_increment(void *arg)
{
    struct racer *me = arg;
    struct race *race = me->race;
    store *s = race->handles[(size_t)me->id % race->nhandles];
    pthread_barrier_wait(&race->barrier);
    for (int i = 0; i < RACE_INCREMENTS; i++) {
        for (;;) {
            gb_err e = GB_ERR_INIT;
            store_kv kv = {0};
            int found = store_get(s, RACE_KEY, &kv, &e);
            if (found < 0) {
                race_error(race, "get", &e);
                return NULL;
            }
            long n = found ? strtol(kv.value, NULL, 10) : 0;
            int64_t seen = found ? kv.mod_revision : 0;
            store_kv_free(&kv);

            char value[32];
            snprintf(value, sizeof(value), "%ld", n + 1);
            store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = RACE_KEY, .mod_revision = seen};
            store_op op = {.kind = STORE_OP_PUT, .key = RACE_KEY, .value = value};
            bool ok = false;
            if (store_txn(s, &cmp, 1, &op, 1, &ok, NULL, &e) < 0) {
                race_error(race, "txn", &e);
                return NULL;
            }
            if (ok)
                break;
            atomic_fetch_add(&race->retries, 1);
        }
    }
    return NULL;
}

/* Run RACE_THREADS threads of fn, spread over nhandles handles on f's store. */
static void race_run(struct fixture *f, struct race *race, size_t nhandles, void *(*fn)(void *))
{
    race->handles[0] = f->s;
    race->handles[1] = nhandles > 1 ? open_ok(f->url) : NULL;
    race->nhandles = nhandles;
    pthread_mutex_init(&race->lock, NULL);
    pthread_barrier_init(&race->barrier, NULL, RACE_THREADS);
    pthread_t threads[RACE_THREADS];
    struct racer racers[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        racers[i] = (struct racer){.race = race, .id = i};
        assert_int_equal(pthread_create(&threads[i], NULL, fn, &racers[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&race->barrier);
    pthread_mutex_destroy(&race->lock);
    store_close(race->handles[1]);
    if (atomic_load(&race->errors))
        fail_msg("%d store calls failed during the race; first: %s", atomic_load(&race->errors),
                 race->first_error);
}

static void check_cas_rounds(struct fixture *f, size_t nhandles)
{
    static struct race race; /* large-ish, and the test runs one at a time */
    memset(&race, 0, sizeof(race));
    int64_t before = revision_ok(f->s);
    race_run(f, &race, nhandles, race_cas_rounds);
    for (int r = 0; r < RACE_ROUNDS; r++)
        if (atomic_load(&race.wins[r]) != 1)
            fail_msg("round %d: %d winners, expected exactly 1", r, atomic_load(&race.wins[r]));
    assert_int_equal(atomic_load(&race.wrong_value), 0);
    assert_int_equal(revision_ok(f->s), before + RACE_ROUNDS);
}

static void check_counter(struct fixture *f, size_t nhandles)
{
    static struct race race;
    memset(&race, 0, sizeof(race));
    int64_t before = revision_ok(f->s);
    race_run(f, &race, nhandles, race_increment);
    char want[32];
    snprintf(want, sizeof(want), "%d", RACE_THREADS * RACE_INCREMENTS);
    assert_value(f->s, RACE_KEY, want);
    /* Only the successful swaps wrote. */
    assert_int_equal(revision_ok(f->s), before + RACE_THREADS * RACE_INCREMENTS);
    print_message("      %d lost compare-and-swaps retried\n", atomic_load(&race.retries));
}

static void test_cas_exactly_one_winner(void **state)
{
    check_cas_rounds(*state, 1);
}

static void test_cas_exactly_one_winner_two_handles(void **state)
{
    check_cas_rounds(*state, 2);
}

static void test_counter_no_lost_updates(void **state)
{
    check_counter(*state, 1);
}

static void test_counter_no_lost_updates_two_handles(void **state)
{
    check_counter(*state, 2);
}

int main(void)
{
    const struct CMUnitTest open_tests[] = {
        cmocka_unit_test(test_open_rejects_bad_urls),
    };
#define BACKEND_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
    const struct CMUnitTest store_backend_tests[] = {
        BACKEND_TEST(test_get_absent_and_present),
        BACKEND_TEST(test_get_revision),
        BACKEND_TEST(test_put_overwrite_keeps_create_revision),
        BACKEND_TEST(test_delete),
        BACKEND_TEST(test_range_by_prefix),
        BACKEND_TEST(test_range_between),
        BACKEND_TEST(test_range_many_sorted),
        BACKEND_TEST(test_txn_each_comparison),
        BACKEND_TEST(test_txn_multi_key_atomic),
        BACKEND_TEST(test_txn_delete_prefix),
        BACKEND_TEST(test_revision_semantics),
        BACKEND_TEST(test_key_and_value_limits),
        BACKEND_TEST(test_reopen_finds_data_and_revision),
        BACKEND_TEST(test_write_survives_kill9),
        BACKEND_TEST(test_two_handles_share_state),
        BACKEND_TEST(test_cas_exactly_one_winner),
        BACKEND_TEST(test_cas_exactly_one_winner_two_handles),
        BACKEND_TEST(test_counter_no_lost_updates),
        BACKEND_TEST(test_counter_no_lost_updates_two_handles),
    };
#undef BACKEND_TEST

    int failed = cmocka_run_group_tests_name("store_open", open_tests, NULL, NULL);
    for (size_t b = 0; b < ARRAY_SIZE(store_test_backends); b++) {
        struct CMUnitTest tests[ARRAY_SIZE(store_backend_tests)];
        memcpy(tests, store_backend_tests, sizeof(tests));
        for (size_t i = 0; i < ARRAY_SIZE(tests); i++)
            tests[i].initial_state = (void *)&store_test_backends[b];
        failed += _cmocka_run_group_tests(store_test_backends[b].name, tests, ARRAY_SIZE(tests),
                                          store_test_backends[b].group_setup,
                                          store_test_backends[b].group_teardown);
    }
    return failed;
}
