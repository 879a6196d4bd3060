/*
 * test_store_claim.c - one daemon per store (store_claim and store_owner),
 * against a real SQLite file and a real etcd.
 *
 * The tests every backend shares run once per entry of claim_backends, as
 * test_store.c does: a claim refuses a second claimer (another handle, or
 * another process) naming the holder's pid, is free again after release,
 * close, or kill -9 of the holding process (at once: SQLite's lock goes
 * with the process, and an etcd holder of this host that no longer runs is
 * replaced). Then what only etcd does: the lease kept alive past its TTL,
 * a holder elsewhere that is waited for, the fence refusing the writes of a
 * daemon whose owner key was taken, an outage longer than the TTL (claim
 * lost, writes refused, taken back once etcd answers), and store_copy
 * leaving the owner key alone. Last, the owner identity itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "store/store.h"
#include "util/base64.h"
#include "util/cleanup.h"

#include "etcd_test_util.h"
#include "store_test_util.h"

/* Short, so the etcd tests that wait for expiry are quick. etcd raises a
 * TTL below its minimum (about 2 s with default settings). */
#define TEST_TTL_S 2

/* ---- helpers --------------------------------------------------------------- */

static store *open_ok(const char *url)
{
    store *s = NULL;
    gb_err e = GB_ERR_INIT;
    if (store_open(url, &s, &e) < 0)
        fail_msg("opening %s: %s", url, e.msg);
    return s;
}

static store_owner self_owner(void)
{
    store_owner me;
    gb_err e = GB_ERR_INIT;
    if (store_owner_self("gpuboxd", &me, &e) < 0)
        fail_msg("store_owner_self: %s", e.msg);
    return me;
}

static void claim_ok(store *s, int ttl_s)
{
    store_owner me = self_owner();
    gb_err e = GB_ERR_INIT;
    if (store_claim(s, &me, ttl_s, NULL, &e) < 0)
        fail_msg("claim: %s", e.msg);
    assert_int_equal(store_claim_state(s), STORE_CLAIM_HELD);
}

/* The claim must be refused as taken by pid; the message names it. */
static void claim_refused(store *s, long pid)
{
    store_owner me = self_owner(), holder;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_claim(s, &me, TEST_TTL_S, &holder, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_int_equal(holder.pid, pid);
    char needle[64];
    snprintf(needle, sizeof(needle), "in use by gpuboxd pid %ld on host ", pid);
    if (!strstr(e.msg, needle))
        fail_msg("message '%s' does not name '%s'", e.msg, needle);
    if (!strstr(e.msg, "the same GPUs and ports"))
        fail_msg("message '%s' does not say why it matters", e.msg);
    assert_int_equal(store_claim_state(s), STORE_CLAIM_NONE);
}

static int put(store *s, const char *key, const char *value, gb_err *e)
{
    return store_put(s, key, value, NULL, e);
}

static void put_ok(store *s, const char *key, const char *value)
{
    gb_err e = GB_ERR_INIT;
    if (put(s, key, value, &e) < 0)
        fail_msg("put '%s': %s", key, e.msg);
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

static bool wait_state(store *s, enum store_claim_state want, double timeout_ms)
{
    double deadline = etcd_test_now_ms() + timeout_ms;
    while (store_claim_state(s) != want) {
        if (etcd_test_now_ms() > deadline)
            return false;
        usleep(50 * 1000);
    }
    return true;
}

/* A child process that opens url and claims it as a gpuboxd would, then
 * waits to be killed. Its pid, once it holds the claim. */
static pid_t spawn_holder(const char *url)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        store *s = NULL;
        store_owner me;
        gb_err e = GB_ERR_INIT;
        char r = 'K';
        if (store_open(url, &s, &e) < 0 || store_owner_self("gpuboxd", &me, &e) < 0 ||
            store_claim(s, &me, TEST_TTL_S, NULL, &e) < 0) {
            fprintf(stderr, "holder: %s\n", e.msg);
            r = 'E';
        }
        if (write(p[1], &r, 1) != 1 || r == 'E')
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char r = 0;
    assert_int_equal(read(p[0], &r, 1), 1);
    close(p[0]);
    if (r != 'K') {
        waitpid(pid, NULL, 0);
        fail_msg("the child could not claim %s", url);
    }
    return pid;
}

/* kill -9, and wait until the child is dead but not reaped (a zombie),
 * as a daemon's parent that has not waited yet would leave it. */
static void kill_to_zombie(pid_t pid)
{
    kill(pid, SIGKILL);
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
        if (f)
            fclose(f);
        text[n] = '\0';
        const char *paren = strrchr(text, ')');
        if (paren && paren[1] == ' ' && paren[2] == 'Z')
            return;
        usleep(5000);
    }
    fail_msg("child %d did not die", (int)pid);
}

/* ---- every backend --------------------------------------------------------- */

struct claim_backend {
    const char *name;
    char *(*make_url)(const char *tmpdir);
    int (*group_setup)(void **state);
    int (*group_teardown)(void **state);
};

static char *sqlite_url(const char *tmpdir)
{
    char *url = NULL;
    return asprintf(&url, "sqlite://%s/state.db", tmpdir) < 0 ? NULL : url;
}

static char *etcd_url(const char *tmpdir)
{
    static int tests;
    (void)tmpdir;
    char *url = NULL;
    return asprintf(&url, "etcd://%s/claim-%d", etcd_test_shared.endpoint, ++tests) < 0 ? NULL
                                                                                        : url;
}

static const struct claim_backend claim_backends[] = {
    {"sqlite", sqlite_url, NULL, NULL},
    {"etcd", etcd_url, etcd_test_group_setup, etcd_test_group_teardown},
};

struct fixture {
    const struct claim_backend *backend;
    char *dir;
    char *url;
};

static int fixture_setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->backend = *state;
    f->dir = store_test_mkdtemp();
    f->url = f->dir ? f->backend->make_url(f->dir) : NULL;
    *state = f;
    return f->url ? 0 : -1;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;
    free(f->url);
    store_test_rmdir(f->dir);
    free(f);
    return 0;
}

static void test_claim_refuses_second_handle(void **state)
{
    struct fixture *f = *state;
    store *a = open_ok(f->url), *b = open_ok(f->url);
    assert_int_equal(store_claim_state(a), STORE_CLAIM_NONE);
    claim_ok(a, TEST_TTL_S);
    char where[512];
    store_claim_describe(a, where, sizeof(where));
    assert_non_null(
        strstr(where, strcmp(f->backend->name, "sqlite") == 0 ? "state.db.lock" : "daemon/owner"));
    claim_refused(b, (long)getpid());
    /* The holder writes; the other handle still reads. */
    put_ok(a, "k", "1");
    assert_true(exists(b, "k"));

    /* A handle claims once. */
    store_owner me = self_owner();
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_claim(a, &me, TEST_TTL_S, NULL, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);

    /* Released, it is free for the next; closing releases too. */
    store_release(a);
    assert_int_equal(store_claim_state(a), STORE_CLAIM_NONE);
    claim_ok(b, TEST_TTL_S);
    claim_refused(a, (long)getpid());
    store_close(b);
    claim_ok(a, TEST_TTL_S);
    put_ok(a, "k", "2");
    store_close(a);
}

static void test_claim_refuses_another_process(void **state)
{
    struct fixture *f = *state;
    pid_t holder = spawn_holder(f->url);
    store *s = open_ok(f->url);
    claim_refused(s, (long)holder);
    claim_refused(s, (long)holder); /* a failed claim leaves nothing behind */

    /* kill -9: free at once, even before the dead holder is reaped. */
    double t0 = etcd_test_now_ms();
    kill_to_zombie(holder);
    claim_ok(s, TEST_TTL_S);
    assert_true(etcd_test_now_ms() - t0 < 1000);
    waitpid(holder, NULL, 0);
    put_ok(s, "after", "1");
    store_close(s);
}

/* ---- SQLite ------------------------------------------------------------------ */

static void test_sqlite_lock_file_names_holder(void **state)
{
    (void)state;
    char *dir = store_test_mkdtemp();
    _cleanup_free_ char *url = NULL, *lock = NULL;
    assert_true(asprintf(&url, "sqlite://%s/state.db", dir) > 0);
    assert_true(asprintf(&lock, "%s/state.db.lock", dir) > 0);
    store *s = open_ok(url);
    claim_ok(s, TEST_TTL_S);
    char text[2048] = "";
    FILE *fp = fopen(lock, "r");
    assert_non_null(fp);
    size_t n = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[n] = '\0';
    store_owner o;
    assert_int_equal(store_owner_from_json(text, &o), 0);
    assert_int_equal(o.pid, (long)getpid());
    assert_string_equal(o.program, "gpuboxd");
    /* Released, the file stays (removing a lock file races with its next
     * user) but names nobody. */
    store_release(s);
    fp = fopen(lock, "r");
    assert_non_null(fp);
    assert_int_equal(fread(text, 1, sizeof(text), fp), 0);
    fclose(fp);
    store_close(s);
    store_test_rmdir(dir);
}

/* ---- etcd ------------------------------------------------------------------- */

/* The owner key of prefix as etcd holds it: its value (NULL: absent) and
 * lease. */
static char *owner_raw(const struct etcd_test *etcd, const char *prefix, int64_t *lease)
{
    _cleanup_free_ char *key = NULL, *body = NULL, *reply = NULL, *k64 = NULL;
    assert_true(asprintf(&key, "%s/%s", prefix, STORE_OWNER_KEY) > 0);
    k64 = base64_encode(key, strlen(key));
    assert_true(asprintf(&body, "{\"key\":\"%s\"}", k64) > 0);
    assert_int_equal(etcd_test_post(etcd, "/v3/kv/range", body, &reply), 200);
    _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
    json_t *kv = json_array_get(json_object_get(j, "kvs"), 0);
    const char *l = json_string_value(json_object_get(kv, "lease"));
    if (lease)
        *lease = l ? strtoll(l, NULL, 10) : 0;
    const char *v64 = json_string_value(json_object_get(kv, "value"));
    if (!kv)
        return NULL;
    char *value = NULL;
    size_t len = 0;
    assert_int_equal(base64_decode(v64 ? v64 : "", v64 ? strlen(v64) : 0, &value, &len), 0);
    return value;
}

/* Put an owner key for prefix as another program would: the identity of a
 * gpuboxd on another host, with lease (0: none). */
static void owner_put_foreign(const struct etcd_test *etcd, const char *prefix, int64_t lease)
{
    store_owner other = {.program = "gpuboxd",
                         .host = "gpu-elsewhere",
                         .pid = 4242,
                         .started = 1700000000,
                         .boot_id = "b",
                         .pid_ns = "pid:[1]",
                         .proc_start = 7};
    _cleanup_free_ char *value = store_owner_to_json(&other), *key = NULL, *body = NULL;
    assert_true(asprintf(&key, "%s/%s", prefix, STORE_OWNER_KEY) > 0);
    _cleanup_free_ char *k64 = base64_encode(key, strlen(key));
    _cleanup_free_ char *v64 = base64_encode(value, strlen(value));
    assert_true(asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k64, v64,
                         (long long)lease) > 0);
    assert_int_equal(etcd_test_post(etcd, "/v3/kv/put", body, NULL), 200);
}

static void owner_delete(const struct etcd_test *etcd, const char *prefix)
{
    _cleanup_free_ char *key = NULL, *body = NULL;
    assert_true(asprintf(&key, "%s/%s", prefix, STORE_OWNER_KEY) > 0);
    _cleanup_free_ char *k64 = base64_encode(key, strlen(key));
    assert_true(asprintf(&body, "{\"key\":\"%s\"}", k64) > 0);
    assert_int_equal(etcd_test_post(etcd, "/v3/kv/deleterange", body, NULL), 200);
}

static int64_t lease_grant(const struct etcd_test *etcd, int ttl_s)
{
    char body[64];
    _cleanup_free_ char *reply = NULL;
    snprintf(body, sizeof(body), "{\"TTL\":\"%d\"}", ttl_s);
    assert_int_equal(etcd_test_post(etcd, "/v3/lease/grant", body, &reply), 200);
    _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
    return strtoll(json_string_value(json_object_get(j, "ID")), NULL, 10);
}

/* The seconds the lease has left; -1 when etcd no longer has it. */
static long lease_ttl(const struct etcd_test *etcd, int64_t lease)
{
    char body[64];
    _cleanup_free_ char *reply = NULL;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    assert_int_equal(etcd_test_post(etcd, "/v3/lease/timetolive", body, &reply), 200);
    _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
    const char *ttl = json_string_value(json_object_get(j, "TTL"));
    return ttl ? strtol(ttl, NULL, 10) : 0;
}

static void test_etcd_claim_kept_alive_then_revoked(void **state)
{
    (void)state;
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s/alive", etcd_test_shared.endpoint) > 0);
    store *s = open_ok(url);
    claim_ok(s, TEST_TTL_S);
    int64_t lease = 0;
    _cleanup_free_ char *value = owner_raw(&etcd_test_shared, "/alive", &lease);
    assert_non_null(value);
    store_owner o;
    assert_int_equal(store_owner_from_json(value, &o), 0);
    assert_int_equal(o.pid, (long)getpid());
    assert_true(lease != 0);
    /* The key is no gpubox state, but a get sees it. */
    assert_true(exists(s, STORE_OWNER_KEY));

    /* Three TTLs later it is still held: the thread keeps the lease alive. */
    sleep(3 * TEST_TTL_S);
    assert_int_equal(store_claim_state(s), STORE_CLAIM_HELD);
    assert_true(lease_ttl(&etcd_test_shared, lease) > 0);
    put_ok(s, "k", "v");
    /* A fenced write may use the most comparisons a caller may give. */
    store_cmp cmps[STORE_TXN_CMPS_MAX];
    store_op ops[STORE_TXN_OPS_MAX];
    char keys[STORE_TXN_OPS_MAX][16];
    for (size_t i = 0; i < STORE_TXN_OPS_MAX; i++) {
        snprintf(keys[i], sizeof(keys[i]), "m/%zu", i);
        ops[i] = (store_op){.kind = STORE_OP_PUT, .key = keys[i], .value = "v"};
        if (i < STORE_TXN_CMPS_MAX)
            cmps[i] = (store_cmp){.kind = STORE_CMP_ABSENT, .key = keys[i]};
    }
    bool ok = false;
    gb_err e = GB_ERR_INIT;
    if (store_txn(s, cmps, STORE_TXN_CMPS_MAX, ops, STORE_TXN_OPS_MAX, &ok, NULL, &e) < 0)
        fail_msg("largest fenced txn: %s", e.msg);
    assert_true(ok);
    /* A failed comparison is still just that, not a lost claim. */
    assert_int_equal(store_txn(s, cmps, 1, ops, 1, &ok, NULL, &e), 0);
    assert_false(ok);
    assert_int_equal(store_claim_state(s), STORE_CLAIM_HELD);

    /* Closing revokes the lease, and etcd deletes the key with it. */
    store_close(s);
    assert_int_equal(lease_ttl(&etcd_test_shared, lease), -1);
    assert_null(owner_raw(&etcd_test_shared, "/alive", NULL));
}

static void test_etcd_holder_elsewhere_waited_for(void **state)
{
    (void)state;
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s/elsewhere", etcd_test_shared.endpoint) > 0);
    store *s = open_ok(url);
    store_owner me = self_owner(), holder;
    gb_err e = GB_ERR_INIT;

    /* No lease: it never expires, and the message says so. */
    owner_put_foreign(&etcd_test_shared, "/elsewhere", 0);
    assert_int_equal(store_claim(s, &me, TEST_TTL_S, &holder, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_string_equal(holder.host, "gpu-elsewhere");
    assert_non_null(strstr(e.msg, "gpuboxd pid 4242 on host gpu-elsewhere, started 2023-11-14"));
    assert_non_null(strstr(e.msg, "never expires"));

    /* With a lease nobody keeps alive: refused until it expires, and the
     * message says when. A pid that is free here means nothing: the
     * holder is on another host. */
    int64_t lease = lease_grant(&etcd_test_shared, TEST_TTL_S);
    owner_put_foreign(&etcd_test_shared, "/elsewhere", lease);
    assert_int_equal(store_claim(s, &me, TEST_TTL_S, &holder, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "its lease expires in "));
    double t0 = etcd_test_now_ms();
    while (store_claim(s, &me, TEST_TTL_S, &holder, &e) < 0) {
        assert_int_equal(e.code, ERR_CONFLICT);
        assert_true(etcd_test_now_ms() - t0 < 4000 * TEST_TTL_S);
        usleep(200 * 1000);
    }
    assert_int_equal(store_claim_state(s), STORE_CLAIM_HELD);
    store_close(s);
}

static void test_etcd_fence_refuses_writes_after_takeover(void **state)
{
    (void)state;
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s/fence", etcd_test_shared.endpoint) > 0);
    store *s = open_ok(url);
    claim_ok(s, TEST_TTL_S);
    put_ok(s, "before", "1");

    /* Another daemon's identity replaces ours in one put (which also takes
     * the key off our lease), as if it had taken the store over while this
     * one could not reach etcd. */
    owner_put_foreign(&etcd_test_shared, "/fence", 0);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(put(s, "after", "1", &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "lost its claim"));
    assert_non_null(strstr(e.msg, "gpu-elsewhere"));
    assert_false(exists(s, "after"));
    assert_int_equal(store_claim_state(s), STORE_CLAIM_LOST);
    /* Refused from now on without asking etcd; reads still work. */
    assert_int_equal(store_delete(s, "before", &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_true(exists(s, "before"));
    /* It cannot take the store back while the other holds it. */
    sleep(2);
    assert_int_equal(store_claim_state(s), STORE_CLAIM_LOST);

    /* The other is gone: the thread claims it again by itself. */
    owner_delete(&etcd_test_shared, "/fence");
    assert_true(wait_state(s, STORE_CLAIM_HELD, 5000));
    put_ok(s, "after", "2");
    _cleanup_free_ char *value = owner_raw(&etcd_test_shared, "/fence", NULL);
    store_owner o;
    assert_int_equal(store_owner_from_json(value, &o), 0);
    assert_int_equal(o.pid, (long)getpid());
    store_close(s);
}

static void test_etcd_revoked_lease_claimed_again(void **state)
{
    (void)state;
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s/revoked", etcd_test_shared.endpoint) > 0);
    store *s = open_ok(url);
    claim_ok(s, TEST_TTL_S);
    int64_t lease = 0;
    free(owner_raw(&etcd_test_shared, "/revoked", &lease));
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    assert_int_equal(etcd_test_post(&etcd_test_shared, "/v3/lease/revoke", body, NULL), 200);
    /* The next keepalive finds the lease gone; a new one is taken. */
    double t0 = etcd_test_now_ms();
    int64_t now = 0;
    for (;;) {
        free(owner_raw(&etcd_test_shared, "/revoked", &now));
        if (now != 0 && now != lease)
            break;
        assert_true(etcd_test_now_ms() - t0 < 5000);
        usleep(100 * 1000);
    }
    assert_true(wait_state(s, STORE_CLAIM_HELD, 2000));
    put_ok(s, "k", "1");
    store_close(s);
}

static void test_etcd_outage_longer_than_ttl(void **state)
{
    (void)state;
    struct etcd_test etcd;
    if (etcd_test_start(&etcd) < 0) {
        etcd_test_stop(&etcd);
        fail_msg("etcd did not start");
    }
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s/outage?timeout_ms=1000&connect_timeout_ms=300",
                         etcd.endpoint) > 0);
    store *s = open_ok(url);
    claim_ok(s, TEST_TTL_S);
    put_ok(s, "k", "1");

    etcd_test_signal(&etcd, SIGKILL);
    /* Within the TTL the claim holds; the write fails only for want of etcd. */
    gb_err e = GB_ERR_INIT;
    assert_int_equal(put(s, "k", "2", &e), -1);
    assert_null(strstr(e.msg, "lost its claim"));
    assert_true(wait_state(s, STORE_CLAIM_LOST, 1000 * (TEST_TTL_S + 3)));
    double t0 = etcd_test_now_ms();
    assert_int_equal(put(s, "k", "2", &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "lost its claim"));
    assert_non_null(strstr(e.msg, "no keepalive was answered"));
    assert_true(etcd_test_now_ms() - t0 < 100); /* refused here, not by etcd */

    /* etcd back: the claim is taken again (etcd renews leases when it
     * restarts, so possibly the same one) and writes work. */
    assert_int_equal(etcd_test_restart(&etcd), 0);
    assert_true(wait_state(s, STORE_CLAIM_HELD, 10000));
    put_ok(s, "k", "3");
    int64_t lease = 0;
    _cleanup_free_ char *value = owner_raw(&etcd, "/outage", &lease);
    assert_non_null(value);
    assert_true(lease != 0);
    store_close(s);
    etcd_test_stop(&etcd);
}

/* store_copy neither copies nor deletes the owner key, in either direction. */
static void test_etcd_copy_leaves_owner_key(void **state)
{
    (void)state;
    char *dir = store_test_mkdtemp();
    _cleanup_free_ char *etcd_url_a = NULL, *sqlite = NULL;
    assert_true(asprintf(&etcd_url_a, "etcd://%s/copy-a", etcd_test_shared.endpoint) > 0);
    assert_true(asprintf(&sqlite, "sqlite://%s/state.db", dir) > 0);
    store *a = open_ok(etcd_url_a), *b = open_ok(sqlite);
    claim_ok(a, TEST_TTL_S);
    claim_ok(b, TEST_TTL_S);
    put_ok(a, "/gpubox/x", "1");
    gb_err e = GB_ERR_INIT;
    size_t copied = 0;
    if (store_copy(a, b, false, &copied, &e) < 0)
        fail_msg("copy: %s", e.msg);
    assert_int_equal(copied, 1);
    assert_false(exists(b, STORE_OWNER_KEY));
    /* Back into the claimed etcd store, overwriting: the owner key stays. */
    put_ok(b, "/gpubox/y", "2");
    if (store_copy(b, a, true, &copied, &e) < 0)
        fail_msg("copy back: %s", e.msg);
    assert_int_equal(copied, 2);
    assert_true(exists(a, STORE_OWNER_KEY));
    assert_int_equal(store_claim_state(a), STORE_CLAIM_HELD);
    put_ok(a, "/gpubox/z", "3");
    store_close(a);
    store_close(b);
    store_test_rmdir(dir);
}

/* ---- the owner identity ------------------------------------------------------ */

static void test_owner_json_and_describe(void **state)
{
    (void)state;
    store_owner me = self_owner(), back;
    assert_int_equal(me.pid, (long)getpid());
    assert_true(me.proc_start > 0 && me.started > 1600000000);
    assert_true(me.host[0] && me.boot_id[0] && me.pid_ns[0]);
    _cleanup_free_ char *json = store_owner_to_json(&me);
    assert_int_equal(store_owner_from_json(json, &back), 0);
    assert_memory_equal(&me, &back, sizeof(me));
    char text[512];
    store_owner_describe(&me, text, sizeof(text));
    char want[300];
    snprintf(want, sizeof(want), "gpuboxd pid %ld on host %s, started ", me.pid, me.host);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, " UTC"));
    assert_int_equal(store_owner_from_json("not json", &back), -1);
    assert_int_equal(store_owner_from_json("{\"pid\":0}", &back), -1);
    assert_int_equal(store_owner_from_json(NULL, &back), -1);
    store_owner nobody = {0};
    store_owner_describe(&nobody, text, sizeof(text));
    assert_non_null(strstr(text, "did not say"));
}

static void test_owner_is_gone(void **state)
{
    (void)state;
    store_owner me = self_owner();
    assert_false(store_owner_is_gone(&me, &me));

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        for (;;)
            pause();
    }
    store_owner holder;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_owner_of_pid("gpuboxd", child, &holder, &e), 0);
    assert_false(store_owner_is_gone(&holder, &me));
    /* Its pid given to a later process: the start time differs. */
    store_owner reused = holder;
    reused.proc_start += 1;
    assert_true(store_owner_is_gone(&reused, &me));
    /* What cannot be checked from here is never gone. */
    store_owner other = reused;
    snprintf(other.host, sizeof(other.host), "another-host");
    assert_false(store_owner_is_gone(&other, &me));
    other = reused;
    snprintf(other.boot_id, sizeof(other.boot_id), "another-boot");
    assert_false(store_owner_is_gone(&other, &me));
    other = reused;
    snprintf(other.pid_ns, sizeof(other.pid_ns), "pid:[1]");
    assert_false(store_owner_is_gone(&other, &me));
    other = reused;
    other.proc_start = 0;
    assert_false(store_owner_is_gone(&other, &me));

    kill_to_zombie(child);
    assert_true(store_owner_is_gone(&holder, &me)); /* dead, not yet reaped */
    waitpid(child, NULL, 0);
    assert_true(store_owner_is_gone(&holder, &me));
    assert_int_equal(store_owner_of_pid("x", child, &holder, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

int main(void)
{
#define BACKEND_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
    const struct CMUnitTest backend_tests[] = {
        BACKEND_TEST(test_claim_refuses_second_handle),
        BACKEND_TEST(test_claim_refuses_another_process),
    };
#undef BACKEND_TEST
    const struct CMUnitTest sqlite_tests[] = {
        cmocka_unit_test(test_sqlite_lock_file_names_holder),
    };
    const struct CMUnitTest etcd_tests[] = {
        cmocka_unit_test(test_etcd_claim_kept_alive_then_revoked),
        cmocka_unit_test(test_etcd_holder_elsewhere_waited_for),
        cmocka_unit_test(test_etcd_fence_refuses_writes_after_takeover),
        cmocka_unit_test(test_etcd_revoked_lease_claimed_again),
        cmocka_unit_test(test_etcd_outage_longer_than_ttl),
        cmocka_unit_test(test_etcd_copy_leaves_owner_key),
    };
    const struct CMUnitTest owner_tests[] = {
        cmocka_unit_test(test_owner_json_and_describe),
        cmocka_unit_test(test_owner_is_gone),
    };

    int failed = cmocka_run_group_tests_name("owner", owner_tests, NULL, NULL);
    for (size_t b = 0; b < ARRAY_SIZE(claim_backends); b++) {
        struct CMUnitTest tests[ARRAY_SIZE(backend_tests)];
        memcpy(tests, backend_tests, sizeof(tests));
        for (size_t i = 0; i < ARRAY_SIZE(tests); i++)
            tests[i].initial_state = (void *)&claim_backends[b];
        failed += _cmocka_run_group_tests(claim_backends[b].name, tests, ARRAY_SIZE(tests),
                                          claim_backends[b].group_setup,
                                          claim_backends[b].group_teardown);
    }
    failed += cmocka_run_group_tests_name("sqlite only", sqlite_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("etcd only", etcd_tests, etcd_test_group_setup,
                                          etcd_test_group_teardown);
    return failed;
}
