/*
 * test_api_input.c - the checks the API handlers share (api/input.c):
 * bodies with only known fields, optional bodies, boolean query flags and
 * the {name} path parameter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"

static http_request req_with(const char *body)
{
    return (http_request){.body = body, .body_len = strlen(body)};
}

static void test_body_fields_known_or_refused(void **state)
{
    (void)state;
    static const char *const fields[] = {"cmd", "workDir", NULL};
    gb_err err = GB_ERR_INIT;
    json_t *body = NULL;

    http_request ok = req_with("{\"cmd\":[\"ls\"],\"workDir\":\"/\"}");
    assert_int_equal(api_body(&ok, fields, true, &body, &err), 0);
    assert_non_null(json_object_get(body, "cmd"));
    http_request_clear(&ok);

    http_request unknown = req_with("{\"cmd\":[\"ls\"],\"wrokDir\":\"/\"}");
    assert_int_equal(api_body(&unknown, fields, true, &body, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(err.msg, "unknown field 'wrokDir'"));
    assert_non_null(strstr(err.msg, "cmd, workDir"));
    http_request_clear(&unknown);
}

static void test_optional_body(void **state)
{
    (void)state;
    static const char *const none[] = {NULL};
    gb_err err = GB_ERR_INIT;
    json_t *body = (json_t *)1;

    http_request blank = req_with(" \r\n");
    assert_int_equal(api_body(&blank, none, false, &body, &err), 0);
    assert_null(body);

    http_request empty_obj = req_with("{}");
    assert_int_equal(api_body(&empty_obj, none, false, &body, &err), 0);
    assert_non_null(body);
    http_request_clear(&empty_obj);

    http_request field = req_with("{\"force\":true}");
    assert_int_equal(api_body(&field, none, false, &body, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(err.msg, "takes no fields"));
    http_request_clear(&field);

    http_request bad = req_with("{oops");
    assert_int_equal(api_body(&bad, none, false, &body, &err), -1);
    assert_int_equal(err.code, ERR_MALFORMED_JSON);
    http_request_clear(&bad);

    /* A required body may not be blank. */
    http_request missing = req_with("");
    assert_int_equal(api_body(&missing, none, true, &body, &err), -1);
    assert_int_equal(err.code, ERR_MALFORMED_JSON);
}

static void test_query_flags(void **state)
{
    (void)state;
    http_kv query[] = {{"all", "true"}, {"purge", "0"}, {"x", "yes"}};
    http_request req = {.query = query, .nquery = 3};
    gb_err err = GB_ERR_INIT;
    bool v = false;
    assert_int_equal(api_query_flag(&req, "all", &v, &err), 0);
    assert_true(v);
    assert_int_equal(api_query_flag(&req, "purge", &v, &err), 0);
    assert_false(v);
    assert_int_equal(api_query_flag(&req, "absent", &v, &err), 0);
    assert_false(v);
    assert_int_equal(api_query_flag(&req, "x", &v, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(err.msg, "x=true"));
}

static void test_path_name(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    const char *name = NULL;
    http_kv good[] = {{"name", "train_01.a"}};
    http_request req = {.params = good, .nparams = 1};
    assert_int_equal(api_path_name(&req, &name, &err), 0);
    assert_string_equal(name, "train_01.a");

    http_kv dash[] = {{"name", "foo-1"}};
    req.params = dash;
    assert_int_equal(api_path_name(&req, &name, &err), -1);
    assert_int_equal(err.code, ERR_NAME_HAS_DASH);

    http_kv bad[] = {{"name", "a b"}};
    req.params = bad;
    assert_int_equal(api_path_name(&req, &name, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_NAME);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_fields_known_or_refused),
        cmocka_unit_test(test_optional_body),
        cmocka_unit_test(test_query_flags),
        cmocka_unit_test(test_path_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
