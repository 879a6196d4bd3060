/*
 * test_store_copy.c - moving gpubox's state between backends: store_copy
 * from SQLite to etcd and on to a new SQLite file keeps every key and
 * value; a target that holds keys is refused unless overwrite, which then
 * makes it an exact copy; and the gpubox-store-migrate program does the
 * same from the command line. Real SQLite files and a real etcd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "store/store.h"
#include "util/cleanup.h"

#include "etcd_test_util.h"
#include "store_test_util.h"

struct fixture {
    char *dir;
    char *sqlite_a, *sqlite_b; /* sqlite:// URLs of two files in dir */
    char *etcd_url;            /* a key prefix of its own on the shared etcd */
};

static int fixture_setup(void **state)
{
    static int tests;
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f || !(f->dir = store_test_mkdtemp()))
        return -1;
    if (asprintf(&f->sqlite_a, "sqlite://%s/a.db", f->dir) < 0 ||
        asprintf(&f->sqlite_b, "sqlite://%s/b.db", f->dir) < 0 ||
        asprintf(&f->etcd_url, "etcd://%s/copy-%d", etcd_test_shared.endpoint, ++tests) < 0)
        return -1;
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;
    free(f->sqlite_a);
    free(f->sqlite_b);
    free(f->etcd_url);
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

static void put_ok(store *s, const char *key, const char *value)
{
    gb_err e = GB_ERR_INIT;
    if (store_put(s, key, value, NULL, &e) < 0)
        fail_msg("put '%s': %s", key, e.msg);
}

static void range_ok(store *s, store_kvs *kvs)
{
    gb_err e = GB_ERR_INIT;
    if (store_range(s, "", kvs, &e) < 0)
        fail_msg("range: %s", e.msg);
}

/* a and b hold the same keys with the same values. */
static void assert_same_contents(store *a, store *b)
{
    store_kvs ka = {0}, kb = {0};
    range_ok(a, &ka);
    range_ok(b, &kb);
    if (ka.n != kb.n)
        fail_msg("%zu keys in %s, %zu in %s", ka.n, store_backend_name(a), kb.n,
                 store_backend_name(b));
    for (size_t i = 0; i < ka.n; i++) {
        assert_string_equal(ka.items[i].key, kb.items[i].key);
        if (strcmp(ka.items[i].value, kb.items[i].value) != 0)
            fail_msg("key '%s' differs after the copy", ka.items[i].key);
    }
    store_kvs_free(&ka);
    store_kvs_free(&kb);
}

/* State shaped like gpubox's: records, history keys, odd bytes, an empty
 * value, a value at the size limit, and more keys than one etcd page or
 * one copy batch. */
static void fill_like_gpubox(store *s)
{
    put_ok(s, "rs/foo", "{\"version\":3,\"gpus\":[\"GPU-1\"],\"ports\":[40001]}");
    for (int v = 1; v <= 3; v++) {
        char key[64], value[64];
        snprintf(key, sizeof(key), "rs/foo/history/%d", v);
        snprintf(value, sizeof(value), "{\"version\":%d}", v);
        put_ok(s, key, value);
    }
    put_ok(s, "vol/bar", "{\"size\":\"20GB\"}");
    put_ok(s, "ops/%_\x7f\x80\xff", "odd bytes");
    put_ok(s, "empty", "");
    _cleanup_free_ char *big = malloc(STORE_VALUE_MAX + 1);
    assert_non_null(big);
    for (size_t i = 0; i < STORE_VALUE_MAX; i++)
        big[i] = (char)('a' + i % 26);
    big[STORE_VALUE_MAX] = '\0';
    put_ok(s, "big", big);
    for (int i = 0; i < 450; i++) {
        char key[32];
        snprintf(key, sizeof(key), "n/%d", i);
        put_ok(s, key, key);
    }
}

static void copy_ok(store *from, store *to, bool overwrite, size_t want)
{
    gb_err e = GB_ERR_INIT;
    size_t copied = 0;
    if (store_copy(from, to, overwrite, &copied, &e) < 0)
        fail_msg("copy %s -> %s: %s", store_backend_name(from), store_backend_name(to), e.msg);
    assert_int_equal(copied, want);
}

static void test_sqlite_to_etcd_to_sqlite(void **state)
{
    struct fixture *f = *state;
    store *a = open_ok(f->sqlite_a), *mid = open_ok(f->etcd_url), *b = open_ok(f->sqlite_b);
    fill_like_gpubox(a);
    size_t n = 8 + 450;
    copy_ok(a, mid, false, n);
    assert_same_contents(a, mid);
    copy_ok(mid, b, false, n);
    assert_same_contents(a, b);
    /* The copies are stores like any other: they take writes. */
    put_ok(b, "rs/new", "{}");
    put_ok(mid, "rs/new", "{}");
    store_close(a);
    store_close(mid);
    store_close(b);
}

static void test_refuses_non_empty_target_unless_overwrite(void **state)
{
    struct fixture *f = *state;
    store *a = open_ok(f->sqlite_a), *t = open_ok(f->etcd_url);
    put_ok(a, "rs/foo", "from source");
    put_ok(a, "rs/bar", "from source");
    put_ok(t, "rs/foo", "old target");
    put_ok(t, "rs/stale", "only in target");

    gb_err e = GB_ERR_INIT;
    size_t copied = 99;
    assert_int_equal(store_copy(a, t, false, &copied, &e), -1);
    assert_int_equal(e.code, ERR_EXISTS);
    assert_non_null(strstr(e.msg, "already holds 2 keys"));
    assert_non_null(strstr(e.msg, "overwrite"));
    assert_int_equal(copied, 0);
    store_kvs kvs = {0};
    range_ok(t, &kvs);
    assert_int_equal(kvs.n, 2); /* untouched */
    assert_string_equal(kvs.items[0].value, "old target");
    store_kvs_free(&kvs);

    copy_ok(a, t, true, 2);
    assert_same_contents(a, t); /* rs/stale is gone */

    /* An empty source empties the target, with overwrite only. */
    store *empty = open_ok(f->sqlite_b);
    copy_ok(empty, t, true, 0);
    range_ok(t, &kvs);
    assert_int_equal(kvs.n, 0);
    store_kvs_free(&kvs);
    store_close(empty);
    store_close(a);
    store_close(t);
}

/* Run the program with args; its stdout+stderr in *out. Returns the exit
 * status. */
static int run_migrate(const char *args, char **out)
{
    const char *build = getenv("GPUBOX_BUILD_DIR");
    assert_non_null(build);
    _cleanup_free_ char *cmd = NULL;
    assert_true(asprintf(&cmd, "'%s/gpubox-store-migrate' %s 2>&1", build, args) > 0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *text = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&text, &cap, '\0', p);
    int status = pclose(p);
    if (n < 0) {
        free(text);
        text = strdup("");
    }
    *out = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_migrate_program(void **state)
{
    struct fixture *f = *state;
    store *a = open_ok(f->sqlite_a);
    fill_like_gpubox(a);

    _cleanup_free_ char *args = NULL, *out = NULL;
    assert_true(asprintf(&args, "--from '%s' --to '%s'", f->sqlite_a, f->etcd_url) > 0);
    assert_int_equal(run_migrate(args, &out), 0);
    char want[512];
    snprintf(want, sizeof(want), "copied 458 keys from %s (sqlite) to %s (etcd)", f->sqlite_a,
             f->etcd_url);
    if (!strstr(out, want))
        fail_msg("output '%s' does not say '%s'", out, want);
    store *t = open_ok(f->etcd_url);
    assert_same_contents(a, t);

    /* Again: the target holds keys now. */
    free(steal_ptr(&out));
    assert_int_equal(run_migrate(args, &out), 1);
    assert_non_null(strstr(out, "already holds 458 keys"));
    free(steal_ptr(&out));
    free(steal_ptr(&args));
    put_ok(a, "rs/foo", "changed");
    assert_true(asprintf(&args, "--from '%s' --to '%s' --overwrite", f->sqlite_a, f->etcd_url) > 0);
    assert_int_equal(run_migrate(args, &out), 0);
    assert_same_contents(a, t);

    /* And back into a new SQLite file. */
    free(steal_ptr(&out));
    free(steal_ptr(&args));
    assert_true(asprintf(&args, "--from '%s' --to '%s'", f->etcd_url, f->sqlite_b) > 0);
    assert_int_equal(run_migrate(args, &out), 0);
    store *b = open_ok(f->sqlite_b);
    assert_same_contents(a, b);

    /* Usage errors, an unreachable source, and passwords kept out of sight. */
    free(steal_ptr(&out));
    assert_int_equal(run_migrate("--from x", &out), 2);
    assert_non_null(strstr(out, "usage:"));
    free(steal_ptr(&out));
    free(steal_ptr(&args));
    assert_true(asprintf(&args, "--from 'etcd://127.0.0.1:%d?user=u&password=hunter2' --to '%s'",
                         etcd_test_free_port(), f->sqlite_b) > 0);
    assert_int_equal(run_migrate(args, &out), 1);
    assert_non_null(strstr(out, "is unreachable"));
    assert_non_null(strstr(out, "password=***"));
    assert_null(strstr(out, "hunter2"));
    store_close(a);
    store_close(t);
    store_close(b);
}

int main(void)
{
#define COPY_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        COPY_TEST(test_sqlite_to_etcd_to_sqlite),
        COPY_TEST(test_refuses_non_empty_target_unless_overwrite),
        COPY_TEST(test_migrate_program),
    };
#undef COPY_TEST
    return cmocka_run_group_tests_name("store_copy", tests, etcd_test_group_setup,
                                       etcd_test_group_teardown);
}
