/*
 * test_fleet_auth.c - the proof a request between nodes carries
 * (fleet/fleet_auth.h): its layout (a known answer, as a test or another
 * implementation computes it), and that a proof holds for its own request
 * only - not another method, path, body, caller, node, secret or time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fleet/fleet_auth.h"

static const unsigned char KEY[] = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk";
#define KEY_LEN 32
#define NOW 1700000000

static fleet_request sample(void)
{
    return (fleet_request){.method = "POST",
                           .path_query = "/api/v1/replicaSet?x=1",
                           .authorization = "Bearer t",
                           .body = "{\"a\":1}",
                           .body_len = 7};
}

static int check(const char *value, const char *by, int64_t now, const fleet_request *req,
                 gb_err *err)
{
    *err = (gb_err)GB_ERR_INIT;
    return fleet_auth_check(KEY, KEY_LEN, value, by, now, req, NULL, err);
}

static void test_known_answer(void **state)
{
    (void)state;
    fleet_request r = sample();
    char v[FLEET_AUTH_VALUE_MAX];
    fleet_auth_sign(KEY, KEY_LEN, "a", NOW, &r, v);
    /* HMAC-SHA256(key, "gpubox-fleet-v1\na\n1700000000\nPOST\n/api/v1/replicaSet?x=1\n"
     * "<sha256 of the body>\nBearer t\n"), as tests/e2e/fleet/test_fleet_security.py signs */
    assert_string_equal(v, "v1 node=a ts=1700000000 "
                           "sig=75539910431958d858f762b9d7a0d5c69c55780f246da1422434c7fce344d8c3");
    gb_err err;
    char node[FLEET_NODE_MAX] = "";
    assert_int_equal(fleet_auth_check(KEY, KEY_LEN, v, "a", NOW + 59, &r, node, &err), 0);
    assert_string_equal(node, "a");
}

static void test_a_proof_is_for_its_own_request(void **state)
{
    (void)state;
    fleet_request r = sample();
    char v[FLEET_AUTH_VALUE_MAX];
    fleet_auth_sign(KEY, KEY_LEN, "node-a", NOW, &r, v);
    gb_err err;
    assert_int_equal(check(v, "node-a", NOW, &r, &err), 0);

    fleet_request other = r;
    other.method = "PUT";
    assert_int_equal(check(v, "node-a", NOW, &other, &err), -1);
    assert_int_equal(err.code, ERR_FORBIDDEN);
    assert_non_null(strstr(err.msg, "does not match"));
    other = r;
    other.path_query = "/api/v1/replicaSet?x=2";
    assert_int_equal(check(v, "node-a", NOW, &other, &err), -1);
    other = r;
    other.body = "{\"a\":2}";
    assert_int_equal(check(v, "node-a", NOW, &other, &err), -1);
    other = r;
    other.authorization = "Bearer u";
    assert_int_equal(check(v, "node-a", NOW, &other, &err), -1);
    other = r;
    other.authorization = NULL;
    assert_int_equal(check(v, "node-a", NOW, &other, &err), -1);

    /* another secret */
    assert_int_equal(fleet_auth_check((const unsigned char *)"another-secret-another-secret-12",
                                      KEY_LEN, v, "node-a", NOW, &r, NULL, &err),
                     -1);
    /* another node named in the forwarding header, or none */
    assert_int_equal(check(v, "node-b", NOW, &r, &err), -1);
    assert_non_null(strstr(err.msg, "names another node"));
    assert_int_equal(check(v, NULL, NOW, &r, &err), -1);
    /* the header without a proof */
    assert_int_equal(check(NULL, "node-a", NOW, &r, &err), -1);
    assert_non_null(strstr(err.msg, FLEET_FORWARDED_HEADER));
    /* out of time, either way */
    assert_int_equal(check(v, "node-a", NOW + FLEET_AUTH_SKEW_S + 1, &r, &err), -1);
    assert_non_null(strstr(err.msg, "clock"));
    assert_int_equal(check(v, "node-a", NOW - FLEET_AUTH_SKEW_S - 1, &r, &err), -1);
    assert_int_equal(check(v, "node-a", NOW - FLEET_AUTH_SKEW_S, &r, &err), 0);
}

static void test_the_node_name_is_signed(void **state)
{
    (void)state;
    fleet_request r = sample();
    char v[FLEET_AUTH_VALUE_MAX];
    fleet_auth_sign(KEY, KEY_LEN, "a", NOW, &r, v);
    char moved[FLEET_AUTH_VALUE_MAX + 8];
    snprintf(moved, sizeof(moved), "v1 node=b%s", v + strlen("v1 node=a"));
    gb_err err;
    assert_int_equal(check(moved, "b", NOW, &r, &err), -1);
    assert_non_null(strstr(err.msg, "does not match"));
}

static void test_malformed_values(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "v1",
        "v2 node=a ts=1 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node= ts=1 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=-a ts=1 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts= sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=01 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=-1 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=1111111111111111111 "
        "sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=1 sig=000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=1 sig=00000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=1 sig=000000000000000000000000000000000000000000000000000000000000000G",
        "v1 node=a ts=1 sig=000000000000000000000000000000000000000000000000000000000000000A",
        "v1  node=a ts=1 sig=0000000000000000000000000000000000000000000000000000000000000000",
        "v1 node=a ts=1 sig=0000000000000000000000000000000000000000000000000000000000000000 ",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char node[FLEET_NODE_MAX];
        int64_t ts;
        unsigned char sig[32];
        gb_err err = GB_ERR_INIT;
        assert_int_equal(fleet_auth_parse(bad[i], node, &ts, sig, &err), -1);
        assert_int_equal(err.code, ERR_FORBIDDEN);
        assert_non_null(strstr(err.msg, "v1 node=NAME"));
    }
    char node[FLEET_NODE_MAX];
    int64_t ts;
    unsigned char sig[32];
    gb_err err = GB_ERR_INIT;
    assert_int_equal(
        fleet_auth_parse("v1 node=n.1 ts=42 "
                         "sig=ff00000000000000000000000000000000000000000000000000000000000001",
                         node, &ts, sig, &err),
        0);
    assert_string_equal(node, "n.1");
    assert_int_equal(ts, 42);
    assert_int_equal(sig[0], 0xff);
    assert_int_equal(sig[31], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answer),
        cmocka_unit_test(test_a_proof_is_for_its_own_request),
        cmocka_unit_test(test_the_node_name_is_signed),
        cmocka_unit_test(test_malformed_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
