/*
 * test_store_etcd.c - what only the etcd backend does, against real etcd
 * servers (Debian's etcd-server): its URL form and key prefix, outages
 * (etcd killed, etcd frozen) failing fast with ERR_STORE_UNAVAILABLE and
 * healing without reopening, failover between endpoints, compaction,
 * username/password authentication and TLS with client certificates.
 * Behaviour every backend shares is tested in test_store.c.
 *
 * One etcd (the group's) serves most tests, each under a key prefix of its
 * own; tests that need a server of their own (outages, auth, TLS) start one
 * and stop it before they end.
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

#include <jansson.h>

#include "store/store.h"
#include "util/base64.h"
#include "util/cleanup.h"

#include "etcd_test_util.h"
#include "store_test_util.h"

/* ---- helpers --------------------------------------------------------------- */

static char *url_for(const struct etcd_test *e, const char *rest)
{
    char *url = NULL;
    assert_true(asprintf(&url, "etcd://%s%s", e->endpoint, rest) > 0);
    return url;
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

static void assert_value(store *s, const char *key, const char *value)
{
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    int r = store_get(s, key, &kv, &e);
    if (r != 1)
        fail_msg("get '%s': %s", key, r < 0 ? e.msg : "absent");
    assert_string_equal(kv.value, value);
    store_kv_free(&kv);
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

static size_t count_prefix(store *s, const char *prefix)
{
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    if (store_range(s, prefix, &kvs, &e) < 0)
        fail_msg("range '%s': %s", prefix, e.msg);
    size_t n = kvs.n;
    store_kvs_free(&kvs);
    return n;
}

/* The value etcd itself holds under the raw key, or NULL; read through the
 * gateway as another program would. */
static char *raw_get(const struct etcd_test *etcd, const char *raw_key)
{
    _cleanup_free_ char *k64 = base64_encode(raw_key, strlen(raw_key));
    _cleanup_free_ char *body = NULL, *reply = NULL;
    assert_true(asprintf(&body, "{\"key\":\"%s\"}", k64) > 0);
    assert_int_equal(etcd_test_post(etcd, "/v3/kv/range", body, &reply), 200);
    _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
    json_t *kv = json_array_get(json_object_get(j, "kvs"), 0);
    if (!kv)
        return NULL;
    const char *v64 = json_string_value(json_object_get(kv, "value"));
    char *value = NULL;
    size_t n = 0;
    assert_int_equal(base64_decode(v64 ? v64 : "", v64 ? strlen(v64) : 0, &value, &n), 0);
    return value;
}

static int64_t current_revision(const struct etcd_test *etcd)
{
    _cleanup_free_ char *reply = NULL;
    assert_int_equal(etcd_test_post(etcd, "/v3/kv/range", "{\"key\":\"AA==\"}", &reply), 200);
    _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
    const char *rev = json_string_value(json_object_get(json_object_get(j, "header"), "revision"));
    assert_non_null(rev);
    return strtoll(rev, NULL, 10);
}

/* Every store call on s fails with ERR_STORE_UNAVAILABLE, each within
 * max_ms, and its message contains needle. */
static void expect_all_unavailable(store *s, double max_ms, const char *needle)
{
    store_cmp cmp = {.kind = STORE_CMP_ABSENT, .key = "o/new"};
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = "o/new", .value = "1"},
        {.kind = STORE_OP_PUT, .key = "o/new2", .value = "2"},
    };
    for (int call = 0; call < 6; call++) {
        gb_err e = GB_ERR_INIT;
        store_kv kv = {0};
        store_kvs kvs = {0};
        int64_t rev = 0;
        bool ok = false;
        double start = etcd_test_now_ms();
        int r = call == 0   ? store_get(s, "o/k", &kv, &e)
                : call == 1 ? store_range(s, "o/", &kvs, &e)
                : call == 2 ? store_put(s, "o/k", "lost", NULL, &e)
                : call == 3 ? store_txn(s, &cmp, 1, ops, ARRAY_SIZE(ops), &ok, &rev, &e)
                : call == 4 ? store_delete(s, "o/k", &e)
                            : store_revision(s, &rev, &e);
        double took = etcd_test_now_ms() - start;
        if (r != -1 || e.code != ERR_STORE_UNAVAILABLE)
            fail_msg("call %d: returned %d, code %d (%s); expected ERR_STORE_UNAVAILABLE", call, r,
                     e.code, e.msg);
        if (took > max_ms)
            fail_msg("call %d took %.0f ms, more than %.0f ms: %s", call, took, max_ms, e.msg);
        if (!strstr(e.msg, needle))
            fail_msg("call %d: message '%s' does not say '%s'", call, e.msg, needle);
        assert_false(ok);
    }
}

/* ---- URL and key prefix ---------------------------------------------------- */

static void expect_open_error(const char *url, int code, const char *needle)
{
    store *s = NULL;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_open(url, &s, &e), -1);
    if (e.code != code)
        fail_msg("%s: code %d, expected %d (%s)", url, e.code, code, e.msg);
    if (needle && !strstr(e.msg, needle))
        fail_msg("%s: message '%s' does not mention '%s'", url, e.msg, needle);
}

static void test_url_forms(void **state)
{
    (void)state;
    expect_open_error("etcd://", ERR_INVALID_PARAMS, "etcd://127.0.0.1:2379");
    expect_open_error("etcd:///prefix", ERR_INVALID_PARAMS, "no etcd endpoint");
    expect_open_error("etcd://a:1,,b:2", ERR_INVALID_PARAMS, "endpoint 2");
    expect_open_error("etcd://a:", ERR_INVALID_PARAMS, "host:port");
    expect_open_error("etcd://u:p@a:1", ERR_INVALID_PARAMS, "?user=NAME&password=SECRET");
    expect_open_error("etcd://a:1?tls=on", ERR_INVALID_PARAMS, "unknown option 'tls'");
    expect_open_error("etcd://a:1?user=x", ERR_INVALID_PARAMS, "both user and password");
    expect_open_error("etcd://a:1?password=x", ERR_INVALID_PARAMS, "both user and password");
    expect_open_error("etcd://a:1?key=/k.pem", ERR_INVALID_PARAMS, "cert");
    expect_open_error("etcd://a:1?timeout_ms=soon", ERR_INVALID_PARAMS, "milliseconds");
    expect_open_error("etcd://a:1?timeout_ms=0", ERR_INVALID_PARAMS, "milliseconds");
    expect_open_error("etcd://a:1?user", ERR_INVALID_PARAMS, "name=value");
    expect_open_error("etcd://a:1?user=x&password=%zz", ERR_INVALID_PARAMS, "%-encoded");
    expect_open_error("etcd://a:1?user=x&password=%00", ERR_INVALID_PARAMS, "%00");

    /* Messages never show a password. */
    expect_open_error("etcd://a:1?password=hunter2&user=x&tls=1", ERR_INVALID_PARAMS,
                      "'etcd://a:1?password=***&user=x&tls=1'");
    expect_open_error("etcd://a:1?user=x&password=hunter2%", ERR_INVALID_PARAMS,
                      "?user=x&password=***'");
    expect_open_error("etcd://x:hunter2@a:1/p?user=x", ERR_INVALID_PARAMS, "'etcd://***@a:1/p?");
    const char *const redacted[][2] = {
        {"etcd://h:1/p?password=s&user=u", "etcd://h:1/p?password=***&user=u"},
        {"etcd://h:1?user=u&password=", "etcd://h:1?user=u&password=***"},
        {"etcd://u:pw@h:1,h:2/p@x?password=a&password=b",
         "etcd://***@h:1,h:2/p@x?password=***&password=***"},
        {"sqlite:///var/lib/gpubox/state.db", "sqlite:///var/lib/gpubox/state.db"},
        {"etcd://h:1?mypassword=x&&password", "etcd://h:1?mypassword=x&&password"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(redacted); i++) {
        _cleanup_free_ char *shown = store_url_redact(redacted[i][0]);
        assert_string_equal(shown, redacted[i][1]);
    }
}

/* Keys live under the URL's path, with a '/' added; other prefixes, and
 * keys outside any prefix, are another store's. */
static void test_key_prefix(void **state)
{
    (void)state;
    struct etcd_test *etcd = &etcd_test_shared;
    _cleanup_free_ char *url_a = url_for(etcd, "/pfx/a");
    _cleanup_free_ char *url_a_slash = url_for(etcd, "/pfx/a/");
    _cleanup_free_ char *url_b = url_for(etcd, "/pfx/b?timeout_ms=3000&connect_timeout_ms=500");
    _cleanup_free_ char *url_root = url_for(etcd, "");
    store *a = open_ok(url_a), *a2 = open_ok(url_a_slash), *b = open_ok(url_b);
    store *root = open_ok(url_root);
    assert_string_equal(store_backend_name(a), "etcd");

    put_ok(a, "rs/foo", "in a");
    put_ok(b, "rs/foo", "in b");
    _cleanup_free_ char *raw_a = raw_get(etcd, "/pfx/a/rs/foo");
    _cleanup_free_ char *raw_b = raw_get(etcd, "/pfx/b/rs/foo");
    assert_non_null(raw_a);
    assert_non_null(raw_b);
    assert_string_equal(raw_a, "in a");
    assert_string_equal(raw_b, "in b");
    assert_null(raw_get(etcd, "/pfx/ars/foo"));

    /* The same prefix with or without the trailing '/'. */
    assert_value(a2, "rs/foo", "in a");
    /* Ranges and delete-prefix stay inside the store's prefix. */
    assert_int_equal(count_prefix(a, ""), 1);
    assert_int_equal(count_prefix(a, "rs/"), 1);
    store_op wipe = {.kind = STORE_OP_DELETE_PREFIX, .key = "rs/"};
    bool ok = false;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_txn(a, NULL, 0, &wipe, 1, &ok, NULL, &e), 0);
    assert_true(ok);
    assert_false(exists(a, "rs/foo"));
    assert_value(b, "rs/foo", "in b");

    /* With no prefix the keys are etcd's own, and the others show in full. */
    put_ok(root, "plain", "no prefix");
    _cleanup_free_ char *raw_plain = raw_get(etcd, "plain");
    assert_non_null(raw_plain);
    assert_string_equal(raw_plain, "no prefix");
    assert_value(root, "/pfx/b/rs/foo", "in b");

    /* A revision is etcd's, shared by every prefix. */
    int64_t rev_a = 0, rev_b = 0;
    assert_int_equal(store_revision(a, &rev_a, &e), 0);
    assert_int_equal(store_revision(b, &rev_b, &e), 0);
    assert_int_equal(rev_a, rev_b);
    assert_int_equal(rev_a, current_revision(etcd));
    store_close(a);
    store_close(a2);
    store_close(b);
    store_close(root);
}

/* ---- relative keys ------------------------------------------------------------- */

static bool txn_ok(store *s, const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops)
{
    gb_err e = GB_ERR_INIT;
    bool ok = false;
    if (store_txn(s, cmps, ncmps, ops, nops, &ok, NULL, &e) < 0)
        fail_msg("transaction: %s", e.msg);
    return ok;
}

/* The keys of a range, joined by ' '. */
static char *range_keys(store *s, const char *prefix)
{
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    if (store_range(s, prefix, &kvs, &e) < 0)
        fail_msg("range '%s': %s", prefix, e.msg);
    char *out = strdup("");
    for (size_t i = 0; i < kvs.n; i++) {
        char *next = NULL;
        assert_true(asprintf(&next, "%s%s%s", out, i ? " " : "", kvs.items[i].key) > 0);
        free(out);
        out = next;
    }
    store_kvs_free(&kvs);
    return out;
}

/* A fleet node's handle (prefix /gpubox/nodes/a/) reaches the fleet's keys
 * with "../../": every call, seen through a handle on /gpubox as the plain
 * key. */
static void test_relative_keys(void **state)
{
    (void)state;
    struct etcd_test *etcd = &etcd_test_shared;
    _cleanup_free_ char *url_node = url_for(etcd, "/gpubox/nodes/a");
    _cleanup_free_ char *url_root = url_for(etcd, "/gpubox");
    _cleanup_free_ char *url_bare = url_for(etcd, "");
    store *node = open_ok(url_node), *root = open_ok(url_root), *bare = open_ok(url_bare);
    assert_int_equal(store_key_depth(node), 3);
    assert_int_equal(store_key_depth(root), 1);
    assert_int_equal(store_key_depth(bare), 0);
    gb_err e = GB_ERR_INIT;

    /* put and get */
    put_ok(node, "own/1", "mine");
    put_ok(node, "../../shared/k", "v1");
    assert_value(root, "shared/k", "v1");
    _cleanup_free_ char *raw = raw_get(etcd, "/gpubox/shared/k");
    assert_non_null(raw);
    assert_string_equal(raw, "v1");
    store_kv kv = {0};
    assert_int_equal(store_get(node, "../../shared/k", &kv, &e), 1);
    assert_string_equal(kv.key, "../../shared/k");
    assert_string_equal(kv.value, "v1");
    store_kv_free(&kv);
    assert_value(node, "../../nodes/a/own/1", "mine");
    assert_value(root, "nodes/a/own/1", "mine");
    put_ok(node, "../b/own/1", "sibling's");
    assert_value(root, "nodes/b/own/1", "sibling's");

    /* range: a relative prefix gives relative keys, sorted; a plain one
     * never does */
    put_ok(root, "shared/j", "v0");
    put_ok(root, "shared/k2", "v2");
    put_ok(root, "sharedness", "not under shared/");
    _cleanup_free_ char *shared = range_keys(node, "../../shared/");
    assert_string_equal(shared, "../../shared/j ../../shared/k ../../shared/k2");
    _cleanup_free_ char *partial = range_keys(node, "../../shared");
    assert_string_equal(partial, "../../shared/j ../../shared/k ../../shared/k2 ../../sharedness");
    _cleanup_free_ char *own = range_keys(node, "");
    assert_string_equal(own, "own/1");
    _cleanup_free_ char *nodes = range_keys(node, "../");
    assert_string_equal(nodes, "../a/own/1 ../b/own/1");
    _cleanup_free_ char *above = range_keys(node, "../../../gpubox/shared/k");
    assert_string_equal(above, "../../../gpubox/shared/k ../../../gpubox/shared/k2");
    /* a stretch of a relative prefix: bounds in the same relative form */
    store_kvs part = {0};
    assert_int_equal(
        store_range_between(node, "../../shared/", "../../shared/k", "../../shared/k2", &part, &e),
        0);
    assert_int_equal(part.n, 1);
    assert_string_equal(part.items[0].key, "../../shared/k");
    store_kvs_free(&part);

    /* comparisons of every kind, true and false */
    kv = (store_kv){0};
    assert_int_equal(store_get(root, "shared/k", &kv, &e), 1);
    int64_t mod = kv.mod_revision;
    store_kv_free(&kv);
    store_op put2 = {.kind = STORE_OP_PUT, .key = "../../shared/k", .value = "v2"};
    store_cmp holds[] = {
        {.kind = STORE_CMP_EXISTS, .key = "../../shared/k"},
        {.kind = STORE_CMP_ABSENT, .key = "../../shared/none"},
        {.kind = STORE_CMP_MOD_REVISION, .key = "../../shared/k", .mod_revision = mod},
        {.kind = STORE_CMP_MOD_REVISION, .key = "../../shared/none", .mod_revision = 0},
        {.kind = STORE_CMP_VALUE, .key = "../../shared/k", .value = "v1"},
    };
    store_cmp fails[] = {
        {.kind = STORE_CMP_EXISTS, .key = "../../shared/none"},
        {.kind = STORE_CMP_ABSENT, .key = "../../shared/k"},
        {.kind = STORE_CMP_MOD_REVISION, .key = "../../shared/k", .mod_revision = mod - 1},
        {.kind = STORE_CMP_VALUE, .key = "../../shared/k", .value = "v0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(fails); i++) {
        if (txn_ok(node, &fails[i], 1, &put2, 1))
            fail_msg("comparison %zu held", i);
        assert_value(root, "shared/k", "v1");
    }
    assert_true(txn_ok(node, holds, ARRAY_SIZE(holds), &put2, 1));
    assert_value(root, "shared/k", "v2");

    /* delete and delete-prefix */
    store_op del = {.kind = STORE_OP_DELETE, .key = "../../shared/k2"};
    assert_true(txn_ok(node, NULL, 0, &del, 1));
    assert_false(exists(root, "shared/k2"));
    assert_true(exists(root, "shared/k"));
    assert_int_equal(store_delete(node, "../../shared/j", &e), 0);
    assert_false(exists(root, "shared/j"));
    store_op wipe = {.kind = STORE_OP_DELETE_PREFIX, .key = "../../shared/"};
    assert_true(txn_ok(node, NULL, 0, &wipe, 1));
    assert_int_equal(count_prefix(root, "shared/"), 0);
    assert_true(exists(root, "sharedness"));
    assert_value(node, "own/1", "mine");

    /* a put with the claim's lease goes with the claim; the claim's fence
     * (the node's own daemon/owner) guards relative writes as any other */
    store_owner me;
    if (store_owner_self("gpuboxd", &me, &e) < 0 || store_claim(node, &me, 10, NULL, &e) < 0)
        fail_msg("claiming the node's store: %s", e.msg);
    _cleanup_free_ char *owner = raw_get(etcd, "/gpubox/nodes/a/" STORE_OWNER_KEY);
    assert_non_null(owner);
    store_op member = {.kind = STORE_OP_PUT,
                       .key = "../../members/a",
                       .value = "up",
                       .lease = store_claim_lease(node)};
    assert_int_not_equal(member.lease, 0);
    assert_true(txn_ok(node, NULL, 0, &member, 1));
    assert_value(root, "members/a", "up");
    store_release(node);
    assert_false(exists(root, "members/a"));

    store_close(node);
    store_close(root);
    store_close(bare);
}

/* One transaction writes the node's own key and a fleet key, or neither. */
static void test_relative_txn_atomic(void **state)
{
    (void)state;
    struct etcd_test *etcd = &etcd_test_shared;
    _cleanup_free_ char *url_node = url_for(etcd, "/atomic/nodes/a");
    _cleanup_free_ char *url_root = url_for(etcd, "/atomic");
    store *node = open_ok(url_node), *root = open_ok(url_root);

    store_cmp absent[] = {
        {.kind = STORE_CMP_ABSENT, .key = "rs/foo"},
        {.kind = STORE_CMP_ABSENT, .key = "../../users/bob/ledger"},
    };
    store_op both[] = {
        {.kind = STORE_OP_PUT, .key = "rs/foo", .value = "record"},
        {.kind = STORE_OP_PUT, .key = "../../users/bob/ledger", .value = "1 gpu"},
    };
    gb_err e = GB_ERR_INIT;
    bool ok = false;
    int64_t rev = 0;
    assert_int_equal(store_txn(node, absent, 2, both, 2, &ok, &rev, &e), 0);
    assert_true(ok);
    store_kv own = {0}, ledger = {0};
    assert_int_equal(store_get(node, "rs/foo", &own, &e), 1);
    assert_int_equal(store_get(root, "users/bob/ledger", &ledger, &e), 1);
    assert_string_equal(own.value, "record");
    assert_string_equal(ledger.value, "1 gpu");
    /* one write: one revision for both */
    assert_int_equal(own.mod_revision, rev);
    assert_int_equal(ledger.mod_revision, rev);
    store_kv_free(&own);

    /* The same again fails on its comparisons and writes neither. */
    store_op next[] = {
        {.kind = STORE_OP_PUT, .key = "rs/bar", .value = "record"},
        {.kind = STORE_OP_PUT, .key = "../../users/bob/ledger", .value = "2 gpus"},
    };
    store_cmp stale[] = {
        {.kind = STORE_CMP_ABSENT, .key = "rs/bar"},
        {.kind = STORE_CMP_MOD_REVISION,
         .key = "../../users/bob/ledger",
         .mod_revision = ledger.mod_revision - 1},
    };
    store_kv_free(&ledger);
    assert_false(txn_ok(node, stale, 2, next, 2));
    assert_false(exists(node, "rs/bar"));
    assert_value(root, "users/bob/ledger", "1 gpu");
    store_cmp wrong_value = {
        .kind = STORE_CMP_VALUE, .key = "../../users/bob/ledger", .value = "0"};
    assert_false(txn_ok(node, &wrong_value, 1, next, 2));
    assert_false(exists(node, "rs/bar"));
    assert_value(root, "users/bob/ledger", "1 gpu");
    store_cmp gone = {.kind = STORE_CMP_ABSENT, .key = "../../users/bob/ledger"};
    assert_false(txn_ok(node, &gone, 1, next, 2));
    assert_false(exists(node, "rs/bar"));
    assert_value(root, "users/bob/ledger", "1 gpu");

    store_close(node);
    store_close(root);
}

/* r is a call refused with ERR_INVALID_PARAMS, its message containing
 * needle and why (either may be NULL). */
static void expect_refused(int r, const gb_err *e, const char *needle, const char *why)
{
    assert_int_equal(r, -1);
    if (e->code != ERR_INVALID_PARAMS)
        fail_msg("code %d, expected ERR_INVALID_PARAMS (%s)", e->code, e->msg);
    if (needle && !strstr(e->msg, needle))
        fail_msg("message '%s' does not mention '%s'", e->msg, needle);
    if (why && !strstr(e->msg, why))
        fail_msg("message '%s' does not mention '%s'", e->msg, why);
}

/* Every call with key - get, range, each kind of comparison and op - is
 * refused with ERR_INVALID_PARAMS, naming the key and why; a transaction
 * with it and a valid put writes nothing. */
static void expect_key_refused(store *s, const char *key, const char *why)
{
    store_cmp cmps[] = {
        {.kind = STORE_CMP_ABSENT, .key = key},
        {.kind = STORE_CMP_EXISTS, .key = key},
        {.kind = STORE_CMP_MOD_REVISION, .key = key},
        {.kind = STORE_CMP_VALUE, .key = key, .value = "v"},
    };
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = key, .value = "v"},
        {.kind = STORE_OP_PUT, .key = key, .value = "v", .lease = 1},
        {.kind = STORE_OP_DELETE, .key = key},
        {.kind = STORE_OP_DELETE_PREFIX, .key = key},
    };
    store_op valid = {.kind = STORE_OP_PUT, .key = "refused/valid", .value = "v"};
    for (size_t i = 0; i < ARRAY_SIZE(cmps); i++) {
        gb_err e = GB_ERR_INIT;
        bool ok = true;
        expect_refused(store_txn(s, &cmps[i], 1, &valid, 1, &ok, NULL, &e), &e, key, why);
    }
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        store_op two[] = {valid, ops[i]};
        gb_err e = GB_ERR_INIT;
        bool ok = true;
        expect_refused(store_txn(s, NULL, 0, two, 2, &ok, NULL, &e), &e, key, why);
    }
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    store_kvs kvs = {0};
    expect_refused(store_get(s, key, &kv, &e), &e, key, why);
    expect_refused(store_put(s, key, "v", NULL, &e), &e, key, why);
    expect_refused(store_delete(s, key, &e), &e, key, why);
    expect_refused(store_range(s, key, &kvs, &e), &e, key, why);
    assert_false(exists(s, "refused/valid"));
}

/* Keys that climb above the prefix's root, or put ".." elsewhere, are
 * refused and the whole call does nothing; so are two ops on one key,
 * however spelled. */
static void test_relative_keys_refused(void **state)
{
    (void)state;
    struct etcd_test *etcd = &etcd_test_shared;
    _cleanup_free_ char *url_node = url_for(etcd, "/refuse/nodes/a");
    _cleanup_free_ char *url_bare = url_for(etcd, "");
    _cleanup_free_ char *url_slash = url_for(etcd, "/");
    store *node = open_ok(url_node), *bare = open_ok(url_bare), *slash = open_ok(url_slash);
    int64_t before = current_revision(etcd);

    expect_key_refused(node, "../../../../x",
                       "climbs 4 segments up from the store's key prefix '/refuse/nodes/a/'");
    expect_key_refused(node, "../../../../../../x", "which has only 3");
    expect_key_refused(bare, "../x", "relative keys need a store with a key prefix");
    expect_key_refused(slash, "../x", "relative keys need a store with a key prefix");
    expect_key_refused(node, "a/../b", "may only begin a key");
    expect_key_refused(node, "../a/../b", "may only begin a key");
    expect_key_refused(node, "../..", "may only begin a key");
    expect_key_refused(node, "x/..", "may only begin a key");
    expect_key_refused(bare, "a/../b", "may only begin a key");

    /* A key of nothing but "../" names none; a delete-prefix of them would
     * wipe the parent's tree; ranging there is fine. */
    gb_err e = GB_ERR_INIT;
    bool ok = true;
    expect_refused(store_put(node, "../../", "v", NULL, &e), &e, "'../../'", "names no key");
    store_kv kv = {0};
    expect_refused(store_get(node, "../", &kv, &e), &e, "'../'", "names no key");
    store_op wipe = {.kind = STORE_OP_DELETE_PREFIX, .key = "../../"};
    expect_refused(store_txn(node, NULL, 0, &wipe, 1, &ok, NULL, &e), &e, "'../../'",
                   "would delete every key");
    assert_int_equal(count_prefix(node, "../../"), 0);
    /* As deep as the prefix goes is fine: the root of etcd's keys. */
    assert_false(exists(node, "../../../no-such-key"));

    /* One key written twice, spelled the same or two ways. */
    const struct {
        store_op a, b;
        const char *needle;
    } twice[] = {
        {{.kind = STORE_OP_PUT, .key = "../../x", .value = "1"},
         {.kind = STORE_OP_PUT, .key = "../../x", .value = "2"},
         "more than one op"},
        {{.kind = STORE_OP_PUT, .key = "own/x", .value = "1"},
         {.kind = STORE_OP_PUT, .key = "../a/own/x", .value = "2"},
         "'/refuse/nodes/a/own/x'"},
        {{.kind = STORE_OP_PUT, .key = "../../x", .value = "1"},
         {.kind = STORE_OP_DELETE, .key = "../../../refuse/x"},
         "'/refuse/x'"},
        {{.kind = STORE_OP_PUT, .key = "own/x", .value = "1"},
         {.kind = STORE_OP_DELETE_PREFIX, .key = "../a/own/"},
         "covers it"},
        {{.kind = STORE_OP_PUT, .key = "../../users/bob", .value = "1"},
         {.kind = STORE_OP_DELETE_PREFIX, .key = "../../users/"},
         "more than one op"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(twice); i++) {
        store_op ops[] = {twice[i].a, twice[i].b};
        expect_refused(store_txn(node, NULL, 0, ops, 2, &ok, NULL, &e), &e, "more than one op",
                       twice[i].needle);
        store_op swapped[] = {twice[i].b, twice[i].a};
        expect_refused(store_txn(node, NULL, 0, swapped, 2, &ok, NULL, &e), &e, "more than one op",
                       NULL);
    }
    /* Two spellings that name two keys are fine. */
    store_op apart[] = {
        {.kind = STORE_OP_PUT, .key = "x", .value = "own"},
        {.kind = STORE_OP_PUT, .key = "../x", .value = "parent's"},
    };
    assert_int_equal(current_revision(etcd), before);
    assert_true(txn_ok(node, NULL, 0, apart, 2));
    assert_value(node, "x", "own");
    assert_value(node, "../x", "parent's");
    _cleanup_free_ char *raw = raw_get(etcd, "/refuse/nodes/x");
    assert_non_null(raw);
    assert_string_equal(raw, "parent's");

    store_close(node);
    store_close(bare);
    store_close(slash);
}

/* A range larger than one page (128 keys) at once, with big values. */
static void test_range_pages(void **state)
{
    (void)state;
    _cleanup_free_ char *url = url_for(&etcd_test_shared, "/pages");
    store *s = open_ok(url);
    enum { N = 1000 };
    char value[2048];
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    for (int batch = 0; batch < N / 100; batch++) {
        store_op ops[100];
        char keys[100][32];
        for (int i = 0; i < 100; i++) {
            snprintf(keys[i], sizeof(keys[i]), "k/%04d", batch * 100 + i);
            ops[i] = (store_op){.kind = STORE_OP_PUT, .key = keys[i], .value = value};
        }
        bool ok = false;
        gb_err e = GB_ERR_INIT;
        if (store_txn(s, NULL, 0, ops, 100, &ok, NULL, &e) < 0)
            fail_msg("batch %d: %s", batch, e.msg);
    }
    gb_err e = GB_ERR_INIT;
    store_kvs kvs = {0};
    assert_int_equal(store_range(s, "k/", &kvs, &e), 0);
    assert_int_equal(kvs.n, N);
    for (size_t i = 0; i < kvs.n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "k/%04zu", i);
        assert_string_equal(kvs.items[i].key, want);
        assert_string_equal(kvs.items[i].value, value);
    }
    store_kvs_free(&kvs);
    store_close(s);
}

/* ---- outages ---------------------------------------------------------------- */

/* etcd killed: every call fails at once, says etcd is unreachable, and
 * writes nothing; restarted on the same data dir, the same handle works. */
static void test_outage_killed(void **state)
{
    (void)state;
    struct etcd_test etcd;
    if (etcd_test_start(&etcd) < 0) {
        etcd_test_stop(&etcd);
        fail_msg("cannot start etcd");
    }
    _cleanup_free_ char *url = url_for(&etcd, "/outage");
    store *s = open_ok(url);
    put_ok(s, "o/k", "before");
    int64_t rev_before = 0;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_revision(s, &rev_before, &e), 0);

    etcd_test_signal(&etcd, SIGKILL);
    char needle[64];
    snprintf(needle, sizeof(needle), "etcd at %s is unreachable", etcd.endpoint);
    expect_all_unavailable(s, 4000, needle); /* "at once": well under the 5 s timeout */
    /* Opening fails the same way, so a daemon can wait and retry. */
    store *other = NULL;
    double start = etcd_test_now_ms();
    assert_int_equal(store_open(url, &other, &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_non_null(strstr(e.msg, needle));
    assert_true(etcd_test_now_ms() - start < 2000);

    if (etcd_test_restart(&etcd) < 0) {
        etcd_test_stop(&etcd);
        store_close(s);
        fail_msg("etcd did not come back");
    }
    /* Nothing the failed calls tried was written. */
    assert_value(s, "o/k", "before");
    assert_false(exists(s, "o/new"));
    assert_false(exists(s, "o/new2"));
    int64_t rev_after = 0;
    assert_int_equal(store_revision(s, &rev_after, &e), 0);
    assert_int_equal(rev_after, rev_before);
    assert_int_equal(put_ok(s, "o/k", "after"), rev_before + 1);
    assert_value(s, "o/k", "after");
    store_close(s);
    etcd_test_stop(&etcd);
}

/* etcd frozen (SIGSTOP: connections are accepted, nothing answers): calls
 * give up after the request timeout; a write that got no answer is said to
 * be uncertain, and is all or nothing once etcd runs again. */
static void test_outage_frozen(void **state)
{
    (void)state;
    struct etcd_test etcd;
    if (etcd_test_start(&etcd) < 0) {
        etcd_test_stop(&etcd);
        fail_msg("cannot start etcd");
    }
    _cleanup_free_ char *url = url_for(&etcd, "/frozen?timeout_ms=700");
    _cleanup_free_ char *url_default = url_for(&etcd, "/frozen");
    store *s = open_ok(url);
    store *s_default = open_ok(url_default);
    put_ok(s, "o/stable", "before");

    etcd_test_signal(&etcd, SIGSTOP);
    /* Bounds with room for a loaded machine, below the 5 s default. */
    expect_all_unavailable(s, 4000, "etcd at");

    /* The default request timeout is 5 s. */
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    double start = etcd_test_now_ms();
    assert_int_equal(store_get(s_default, "o/stable", &kv, &e), -1);
    double took = etcd_test_now_ms() - start;
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    if (took < 4500 || took > 12000)
        fail_msg("a read of a frozen etcd gave up after %.0f ms; expected about 5000", took);

    /* A write that reached etcd is uncertain, and says so. */
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = "o/x", .value = "1"},
        {.kind = STORE_OP_PUT, .key = "o/y", .value = "1"},
        {.kind = STORE_OP_PUT, .key = "o/z", .value = "1"},
    };
    bool ok = false;
    assert_int_equal(store_txn(s, NULL, 0, ops, ARRAY_SIZE(ops), &ok, NULL, &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "may or may not have been applied"));

    /* The same handles work again. Writes that got no answer may land once
     * etcd runs (so o/k is not checked), but each whole or not at all. */
    etcd_test_signal(&etcd, SIGCONT);
    assert_value(s, "o/stable", "before");
    assert_value(s_default, "o/stable", "before");
    bool x = exists(s, "o/x"), y = exists(s, "o/y"), z = exists(s, "o/z");
    assert_true(x == y && y == z);
    bool n1 = exists(s, "o/new"), n2 = exists(s, "o/new2");
    assert_true(n1 == n2);
    put_ok(s, "o/stable", "after");
    assert_value(s_default, "o/stable", "after");
    store_close(s);
    store_close(s_default);
    etcd_test_stop(&etcd);
}

static void start_or_fail(struct etcd_test *etcd, int port)
{
    if (etcd_test_start_args(etcd, port, NULL) < 0) {
        etcd_test_stop(etcd);
        fail_msg("cannot start etcd");
    }
}

/* A dead first endpoint is passed over; the one that answered is kept for
 * the next calls; when it dies too, the client moves on again. The two
 * servers are separate clusters, so which one answers shows in the data. */
static void test_failover(void **state)
{
    (void)state;
    struct etcd_test first, second;
    int first_port = etcd_test_free_port();
    start_or_fail(&second, 0);
    _cleanup_free_ char *url = NULL;
    assert_true(asprintf(&url, "etcd://127.0.0.1:%d,%s/failover", first_port, second.endpoint) > 0);
    store *s = open_ok(url);
    put_ok(s, "where", "second");
    _cleanup_free_ char *raw = raw_get(&second, "/failover/where");
    assert_non_null(raw);
    assert_string_equal(raw, "second");

    /* Something answers at the first endpoint now; a client that went back
     * to it would find an empty store there. */
    start_or_fail(&first, first_port);
    for (int i = 0; i < 5; i++)
        assert_value(s, "where", "second");

    /* The second dies: the client moves on to the first, and stays. */
    etcd_test_signal(&second, SIGKILL);
    assert_false(exists(s, "where"));
    put_ok(s, "where", "first");
    assert_value(s, "where", "first");
    _cleanup_free_ char *raw_first = raw_get(&first, "/failover/where");
    assert_non_null(raw_first);
    assert_string_equal(raw_first, "first");

    /* Both down: one message names every endpoint and why it failed. */
    etcd_test_signal(&first, SIGKILL);
    gb_err e = GB_ERR_INIT;
    store_kv kv = {0};
    assert_int_equal(store_get(s, "where", &kv, &e), -1);
    assert_int_equal(e.code, ERR_STORE_UNAVAILABLE);
    char both[160];
    snprintf(both, sizeof(both), "etcd at %s,%s is unreachable: %s: ", first.endpoint,
             second.endpoint, first.endpoint);
    if (!strstr(e.msg, both) || !strstr(e.msg, "; 127.0.0.1:"))
        fail_msg("message '%s' does not name both endpoints", e.msg);
    store_close(s);
    etcd_test_stop(&first);
    etcd_test_stop(&second);
}

/* ---- compaction ------------------------------------------------------------- */

/* gpubox keeps history as keys of its own, never as old revisions, so
 * compacting etcd up to now changes nothing a caller sees. */
static void test_compaction(void **state)
{
    (void)state;
    _cleanup_free_ char *url = url_for(&etcd_test_shared, "/compaction");
    store *s = open_ok(url);
    for (int v = 1; v <= 20; v++) {
        char key[32], value[32];
        snprintf(key, sizeof(key), "rs/foo/v/%d", v);
        snprintf(value, sizeof(value), "{\"version\":%d}", v);
        put_ok(s, key, value);
        put_ok(s, "rs/foo", value);
    }
    gb_err e = GB_ERR_INIT;
    store_kv before = {0};
    assert_int_equal(store_get(s, "rs/foo", &before, &e), 1);

    int64_t now = current_revision(&etcd_test_shared);
    char body[96];
    snprintf(body, sizeof(body), "{\"revision\":\"%lld\",\"physical\":true}", (long long)now);
    _cleanup_free_ char *reply = NULL;
    if (etcd_test_post(&etcd_test_shared, "/v3/kv/compaction", body, &reply) != 200)
        fail_msg("compaction failed: %s", reply ? reply : "no answer");

    /* Reads, history and the revisions of live keys are as before. */
    store_kv after = {0};
    assert_int_equal(store_get(s, "rs/foo", &after, &e), 1);
    assert_string_equal(after.value, "{\"version\":20}");
    assert_int_equal(after.mod_revision, before.mod_revision);
    assert_int_equal(after.create_revision, before.create_revision);
    assert_int_equal(count_prefix(s, "rs/foo/v/"), 20);
    assert_value(s, "rs/foo/v/1", "{\"version\":1}");

    /* A compare-and-swap on a revision older than the compaction point
     * still compares (it is the key's current mod_revision). */
    store_cmp cmp = {
        .kind = STORE_CMP_MOD_REVISION, .key = "rs/foo", .mod_revision = after.mod_revision};
    store_op op = {.kind = STORE_OP_PUT, .key = "rs/foo", .value = "{\"version\":21}"};
    bool ok = false;
    int64_t rev = 0;
    assert_int_equal(store_txn(s, &cmp, 1, &op, 1, &ok, &rev, &e), 0);
    assert_true(ok);
    assert_int_equal(rev, now + 1);
    assert_int_equal(store_txn(s, &cmp, 1, &op, 1, &ok, &rev, &e), 0);
    assert_false(ok);
    store_kv_free(&before);
    store_kv_free(&after);
    store_close(s);
}

/* ---- authentication and TLS ------------------------------------------------ */

static void post_ok(const char *base, const char *path, const char *json, const char *token)
{
    _cleanup_free_ char *reply = NULL;
    long status = etcd_test_post_tls(base, path, json, token, NULL, NULL, NULL, &reply);
    if (status != 200)
        fail_msg("%s %s: HTTP %ld %s", path, json, status, reply ? reply : "");
}

/* A user whose role may read and write /gb/ only; tokens that expire after
 * one second, so the client has to fetch new ones. */
static void test_auth(void **state)
{
    (void)state;
    static const char *const args[] = {"--auth-token-ttl", "1", NULL};
    struct etcd_test etcd;
    if (etcd_test_start_args(&etcd, 0, args) < 0) {
        etcd_test_stop(&etcd);
        fail_msg("cannot start etcd");
    }
    char base[64];
    snprintf(base, sizeof(base), "http://%s", etcd.endpoint);
    post_ok(base, "/v3/auth/user/add", "{\"name\":\"root\",\"password\":\"rootpw\"}", NULL);
    post_ok(base, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}", NULL);
    post_ok(base, "/v3/auth/user/add", "{\"name\":\"gb\",\"password\":\"p&s=s%\"}", NULL);
    post_ok(base, "/v3/auth/role/add", "{\"name\":\"gbrole\"}", NULL);
    /* readwrite on ["/gb/", "/gb0"): base64 of each. */
    post_ok(base, "/v3/auth/role/grant",
            "{\"name\":\"gbrole\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"L2diLw==\","
            "\"range_end\":\"L2diMA==\"}}",
            NULL);
    post_ok(base, "/v3/auth/user/grant", "{\"user\":\"gb\",\"role\":\"gbrole\"}", NULL);
    post_ok(base, "/v3/auth/enable", "{}", NULL);

    /* The password %-encoded in the URL. */
    _cleanup_free_ char *url = url_for(&etcd, "/gb?user=gb&password=p%26s%3Ds%25");
    store *s = open_ok(url);
    int64_t rev = put_ok(s, "rs/foo", "{}");
    assert_value(s, "rs/foo", "{}");
    sleep(3); /* the token expires; the next calls fetch a new one */
    assert_int_equal(put_ok(s, "rs/foo", "{\"v\":2}"), rev + 1);
    assert_value(s, "rs/foo", "{\"v\":2}");
    assert_int_equal(count_prefix(s, ""), 1);
    store_close(s);

    _cleanup_free_ char *wrong = url_for(&etcd, "/gb?user=gb&password=nope");
    expect_open_error(wrong, ERR_STORE_UNAVAILABLE, "does not accept user 'gb'");
    _cleanup_free_ char *anonymous = url_for(&etcd, "/gb");
    expect_open_error(anonymous, ERR_STORE_UNAVAILABLE, "authentication enabled");
    _cleanup_free_ char *outside = url_for(&etcd, "/other?user=gb&password=p%26s%3Ds%25");
    expect_open_error(outside, ERR_STORE_UNAVAILABLE, "may not");
    etcd_test_stop(&etcd);
}

/* Run a shell command (the test's certificates); fail the test if it does. */
static void sh_ok(const char *cmd)
{
    int status = system(cmd);
    if (status != 0)
        fail_msg("'%s' exited with status %d", cmd, status);
}

/* TLS with a CA of the test's own and client certificates required. */
static void test_tls(void **state)
{
    (void)state;
    char *dir = store_test_mkdtemp();
    assert_non_null(dir);
    _cleanup_free_ char *cmd = NULL;
    assert_true(
        asprintf(&cmd,
                 "set -e; cd '%s'; exec >openssl.log 2>&1;"
                 "ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';"
                 "openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=gpubox-ca;"
                 "for who in server client; do"
                 "  openssl req $ec -keyout $who.key -out $who.csr -subj /CN=127.0.0.1;"
                 "  printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,"
                 "clientAuth\\n' > $who.ext;"
                 "  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
                 "    -out $who.crt -days 2 -extfile $who.ext;"
                 "done;"
                 "openssl req -x509 $ec -keyout other.key -out other.crt -days 2 -subj /CN=x",
                 dir) > 0);
    sh_ok(cmd);
    char ca[512], crt[512], key[512], ccrt[512], ckey[512], other[512];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/server.crt", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ccrt, sizeof(ccrt), "%s/client.crt", dir);
    snprintf(ckey, sizeof(ckey), "%s/client.key", dir);
    snprintf(other, sizeof(other), "%s/other.crt", dir);
    const char *args[] = {"--cert-file",       crt, "--key-file",         key,
                          "--trusted-ca-file", ca,  "--client-cert-auth", NULL};
    struct etcd_test etcd;
    if (etcd_test_start_args(&etcd, 0, args) < 0) {
        etcd_test_stop(&etcd);
        store_test_rmdir(dir);
        fail_msg("cannot start etcd with TLS");
    }

    _cleanup_free_ char *good = NULL, *no_cert = NULL, *wrong_ca = NULL, *plain = NULL;
    assert_true(asprintf(&good, "etcd://%s/tls?cacert=%s&cert=%s&key=%s", etcd.endpoint, ca, ccrt,
                         ckey) > 0);
    assert_true(asprintf(&no_cert, "etcd://%s/tls?cacert=%s", etcd.endpoint, ca) > 0);
    assert_true(asprintf(&wrong_ca, "etcd://%s/tls?cacert=%s&cert=%s&key=%s", etcd.endpoint, other,
                         ccrt, ckey) > 0);
    assert_true(asprintf(&plain, "etcd://%s/tls", etcd.endpoint) > 0);
    store *s = open_ok(good);
    put_ok(s, "rs/foo", "over TLS");
    assert_value(s, "rs/foo", "over TLS");
    store_close(s);
    /* Every refusal is "unreachable", with curl's words for the reason. */
    expect_open_error(no_cert, ERR_STORE_UNAVAILABLE, "is unreachable");
    expect_open_error(wrong_ca, ERR_STORE_UNAVAILABLE, "certificate");
    expect_open_error(plain, ERR_STORE_UNAVAILABLE, NULL);
    etcd_test_stop(&etcd);
    store_test_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_forms),
        cmocka_unit_test(test_key_prefix),
        cmocka_unit_test(test_relative_keys),
        cmocka_unit_test(test_relative_txn_atomic),
        cmocka_unit_test(test_relative_keys_refused),
        cmocka_unit_test(test_range_pages),
        cmocka_unit_test(test_outage_killed),
        cmocka_unit_test(test_outage_frozen),
        cmocka_unit_test(test_failover),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests_name("store_etcd", tests, etcd_test_group_setup,
                                       etcd_test_group_teardown);
}
