/*
 * test_users.c - the pieces of users that need no daemon: tokens and their
 * digests (util/token), quota values as JSON (service/users/quota.c), and
 * the caller's view (service/users/caller.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "service/users/users_internal.h"
#include "util/token.h"

static void test_digest_is_sha256(void **state)
{
    (void)state;
    char d[TOKEN_DIGEST_HEX];
    token_digest("abc", 3, d);
    assert_string_equal(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    token_digest("", 0, d);
    assert_string_equal(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_tokens_are_new_each_time(void **state)
{
    (void)state;
    char a[TOKEN_LEN + 1], b[TOKEN_LEN + 1];
    gb_err err = GB_ERR_INIT;
    assert_int_equal(token_new(a, sizeof(a), &err), 0);
    assert_int_equal(token_new(b, sizeof(b), &err), 0);
    assert_int_equal(strlen(a), TOKEN_LEN);
    assert_memory_equal(a, TOKEN_PREFIX, strlen(TOKEN_PREFIX));
    assert_string_not_equal(a, b);
    for (const char *p = a + strlen(TOKEN_PREFIX); *p; p++)
        assert_non_null(strchr("0123456789abcdef", *p));
    char small[8];
    assert_int_equal(token_new(small, sizeof(small), &err), -1);
}

static void test_quota_json(void **state)
{
    (void)state;
    users_quota q;
    users_quota_unlimited(&q);
    gb_err err = GB_ERR_INIT;
    json_t *j =
        json_loads("{\"cards\": 2, \"shareMiB\": null, \"volumeBytes\": \"1.5GB\"}", 0, NULL);
    assert_int_equal(users_quota_from_json(j, &q, &err), 0);
    json_decref(j);
    assert_int_equal(q.cards, 2);
    assert_int_equal(q.share_mib, QUOTA_UNLIMITED);
    assert_int_equal(q.instances, QUOTA_UNLIMITED);
    assert_true(q.volume_bytes > 1000 * 1000 * 1000);
    json_t *back = users_quota_to_json(&q);
    assert_true(json_is_null(json_object_get(back, "instances")));
    assert_int_equal(json_integer_value(json_object_get(back, "cards")), 2);
    json_decref(back);

    static const struct {
        const char *text, *expect;
        int code;
    } bad[] = {
        {"{\"cards\": -1}", "quota.cards must be between 0", ERR_INVALID_PARAMS},
        {"{\"gpus\": 1}", "quota has no field 'gpus'", ERR_INVALID_PARAMS},
        {"{\"cards\": \"2\"}", "quota.cards must be a whole number", ERR_WRONG_TYPE},
        {"{\"cards\": 1.5}", "quota.cards must be a whole number", ERR_WRONG_TYPE},
        {"{\"volumeBytes\": \"9ZB\"}", "quota.volumeBytes", ERR_VOLUME_SIZE_UNIT},
        {"[1]", "quota must be an object", ERR_WRONG_TYPE},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        users_quota unchanged = q;
        err = (gb_err)GB_ERR_INIT;
        j = json_loads(bad[i].text, JSON_DECODE_ANY, NULL);
        assert_int_equal(users_quota_from_json(j, &q, &err), -1);
        json_decref(j);
        if (!strstr(err.msg, bad[i].expect))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].expect);
        (void)unchanged;
    }
}

/* The millisecond a user was made is stored (a later user of the name reads
 * nothing from before it) but not shown. */
static void test_user_record_keeps_its_creation_ms(void **state)
{
    (void)state;
    users_info u = {.role = USER_ROLE_USER, .create_ms = 1795000000123};
    snprintf(u.name, sizeof(u.name), "carol");
    snprintf(u.create_time, sizeof(u.create_time), "2026-11-17T10:13:20Z");
    users_quota_unlimited(&u.quota);
    json_t *stored = users_to_json(&u, true), *shown = users_to_json(&u, false);
    assert_int_equal(json_integer_value(json_object_get(stored, "createMs")), 1795000000123);
    assert_null(json_object_get(shown, "createMs"));
    users_info back;
    assert_int_equal(users_from_json(stored, &back, &u.quota), 0);
    assert_int_equal(back.create_ms, 1795000000123);
    json_decref(stored);
    json_decref(shown);
    /* an older record has none */
    json_t *old = json_pack("{s:s, s:s, s:s}", "name", "dave", "role", "user", "createTime",
                            "2026-11-17T10:13:20Z");
    assert_int_equal(users_from_json(old, &back, &u.quota), 0);
    assert_int_equal(back.create_ms, 0);
    json_decref(old);
}

static void test_caller_sees(void **state)
{
    (void)state;
    assert_null(users_caller_current());
    assert_true(users_caller_sees("anyone"));
    assert_string_equal(users_caller_owner(), USER_ANONYMOUS);
    caller c = {.name = "carol", .role = USER_ROLE_USER};
    users_caller_enter(&c);
    assert_true(users_caller_sees("carol"));
    assert_false(users_caller_sees("dave"));
    assert_false(users_caller_sees(""));
    assert_true(users_caller_is_user());
    assert_string_equal(users_caller_owner(), "carol");
    caller v = {.name = "vera", .role = USER_ROLE_VIEWER};
    users_caller_enter(&v);
    assert_true(users_caller_sees("dave"));
    assert_false(users_caller_is_user());
    users_caller_leave();
    assert_null(users_caller_current());
    assert_int_equal(users_role_parse("user"), USER_ROLE_USER);
    assert_int_equal(users_role_parse("root"), USER_ROLE_NONE);
    assert_string_equal(users_role_name(USER_ROLE_VIEWER), "viewer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_is_sha256),
        cmocka_unit_test(test_tokens_are_new_each_time),
        cmocka_unit_test(test_quota_json),
        cmocka_unit_test(test_user_record_keeps_its_creation_ms),
        cmocka_unit_test(test_caller_sees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
