/*
 * test_request_json.c - the request body as handlers read it (req_json_body,
 * then util/json.h's typed field checks): malformed JSON with its position,
 * wrong types naming the field, required and optional fields, nested
 * objects, and the lookups of params, query and headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/request.h"
#include "util/json.h"

static http_request req_with(const char *body)
{
    return (http_request){.body = body, .body_len = strlen(body)};
}

/* The parsed body, which the request must have. */
static json_t *body_of(http_request *req)
{
    json_t *body = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(req_json_body(req, &body, &err), 0);
    return body;
}

static void test_reads_typed_fields(void **state)
{
    (void)state;
    http_request req = req_with("{\"imageName\":\"ubuntu\",\"gpuCount\":2,\"force\":true,"
                                "\"env\":[\"A=1\",\"B=2\"],\"gpuPatch\":{\"gpuCount\":3}}");
    gb_err err = GB_ERR_INIT;
    json_t *body = body_of(&req);
    const char *image = NULL;
    long long count = 0;
    bool force = false;
    const char **env = NULL;
    size_t nenv = 0;
    json_t *patch = NULL;
    assert_int_equal(json_field_string(body, NULL, "imageName", &image, true, &err), 1);
    assert_string_equal(image, "ubuntu");
    assert_int_equal(json_field_int(body, NULL, "gpuCount", &count, true, &err), 1);
    assert_int_equal(count, 2);
    assert_int_equal(json_field_bool(body, NULL, "force", &force, false, &err), 1);
    assert_true(force);
    assert_int_equal(json_field_string_array(body, NULL, "env", &env, &nenv, false, &err), 1);
    assert_int_equal(nenv, 2);
    assert_string_equal(env[1], "B=2");
    free(env);
    assert_int_equal(json_field_object(body, NULL, "gpuPatch", &patch, false, &err), 1);
    assert_int_equal(json_field_int(patch, "gpuPatch", "gpuCount", &count, true, &err), 1);
    assert_int_equal(count, 3);
    http_request_clear(&req);
}

static void test_absent_and_null_fields(void **state)
{
    (void)state;
    http_request req = req_with("{\"cmd\":null}");
    gb_err err = GB_ERR_INIT;
    json_t *body = body_of(&req);
    const char **cmd = NULL;
    size_t n = 7;
    const char *s = "untouched";
    assert_int_equal(json_field_string_array(body, NULL, "cmd", &cmd, &n, false, &err), 0);
    assert_null(cmd);
    assert_int_equal(n, 7);
    assert_int_equal(json_field_string(body, NULL, "imageName", &s, false, &err), 0);
    assert_string_equal(s, "untouched");

    assert_int_equal(json_field_string(body, NULL, "imageName", &s, true, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_string_equal(err.msg, "field 'imageName' is required (a string)");
    http_request_clear(&req);
}

static void test_wrong_types_name_field_and_type(void **state)
{
    (void)state;
    http_request req = req_with("{\"imageName\":5,\"gpuCount\":\"2\",\"ratio\":1.5,"
                                "\"force\":\"yes\",\"env\":[\"A=1\",7],\"binds\":{}}");
    gb_err err = GB_ERR_INIT;
    json_t *body = body_of(&req);
    const char *s;
    long long i;
    bool b;
    const char **arr = NULL;
    size_t n;
    assert_int_equal(json_field_string(body, NULL, "imageName", &s, true, &err), -1);
    assert_int_equal(err.code, ERR_WRONG_TYPE);
    assert_string_equal(err.msg, "field 'imageName' must be a string, got an integer");

    assert_int_equal(json_field_int(body, NULL, "gpuCount", &i, true, &err), -1);
    assert_int_equal(err.code, ERR_WRONG_TYPE);
    assert_string_equal(err.msg, "field 'gpuCount' must be an integer, got a string");

    assert_int_equal(json_field_int(body, NULL, "ratio", &i, false, &err), -1);
    assert_string_equal(err.msg, "field 'ratio' must be an integer, got a number with a fraction");

    assert_int_equal(json_field_bool(body, NULL, "force", &b, false, &err), -1);
    assert_int_equal(err.code, ERR_WRONG_TYPE);
    assert_non_null(strstr(err.msg, "'force' must be a boolean"));

    assert_int_equal(json_field_string_array(body, NULL, "env", &arr, &n, false, &err), -1);
    assert_int_equal(err.code, ERR_WRONG_TYPE);
    assert_string_equal(err.msg,
                        "field 'env' must be an array of strings; element 1 is an integer");
    assert_null(arr);

    assert_int_equal(json_field_string_array(body, NULL, "binds", &arr, &n, false, &err), -1);
    assert_string_equal(err.msg, "field 'binds' must be an array of strings, got an object");
    http_request_clear(&req);
}

static void test_nested_field_names(void **state)
{
    (void)state;
    http_request req = req_with("{\"gpuPatch\":{\"gpuCount\":\"two\"},\"volumePatch\":3}");
    gb_err err = GB_ERR_INIT;
    json_t *body = body_of(&req);
    json_t *patch = NULL;
    long long n;
    assert_int_equal(json_field_object(body, NULL, "gpuPatch", &patch, true, &err), 1);
    assert_int_equal(json_field_int(patch, "gpuPatch", "gpuCount", &n, true, &err), -1);
    assert_string_equal(err.msg, "field 'gpuPatch.gpuCount' must be an integer, got a string");
    assert_int_equal(json_field_int(patch, "gpuPatch", "other", &n, true, &err), -1);
    assert_string_equal(err.msg, "field 'gpuPatch.other' is required (an integer)");
    assert_int_equal(json_field_object(body, NULL, "volumePatch", &patch, true, &err), -1);
    assert_string_equal(err.msg, "field 'volumePatch' must be an object, got an integer");
    http_request_clear(&req);
}

static void test_malformed_json_reports_position(void **state)
{
    (void)state;
    http_request req = req_with("{\n  \"imageName\": \"x\",\n  \"gpuCount\": ,\n}");
    gb_err err = GB_ERR_INIT;
    json_t *body = NULL;
    assert_int_equal(req_json_body(&req, &body, &err), -1);
    assert_int_equal(err.code, ERR_MALFORMED_JSON);
    assert_non_null(strstr(err.msg, "malformed JSON body at line 3, column"));
    /* asking again gives the same answer without reparsing */
    gb_err again = GB_ERR_INIT;
    assert_int_equal(req_json_body(&req, &body, &again), -1);
    assert_string_equal(again.msg, err.msg);
    http_request_clear(&req);
}

/* "Last one wins" would let two readers of one body see different values. */
static void test_duplicate_keys_are_refused(void **state)
{
    (void)state;
    http_request req = req_with("{\"gpuCount\": 1, \"env\": [], \"gpuCount\": 8}");
    gb_err err = GB_ERR_INIT;
    json_t *body = NULL;
    assert_int_equal(req_json_body(&req, &body, &err), -1);
    assert_int_equal(err.code, ERR_MALFORMED_JSON);
    assert_non_null(strstr(err.msg, "duplicate object key"));
    http_request_clear(&req);
    /* the same key in two different objects is fine */
    req = req_with("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}}");
    json_t *a = NULL;
    assert_int_equal(json_field_object(body_of(&req), NULL, "a", &a, true, &err), 1);
    http_request_clear(&req);
}

static void test_body_must_be_an_object(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    json_t *body;
    http_request req = req_with("[1,2]");
    assert_int_equal(req_json_body(&req, &body, &err), -1);
    assert_int_equal(err.code, ERR_WRONG_TYPE);
    assert_string_equal(err.msg, "request body must be a JSON object, got an array");
    http_request_clear(&req);

    http_request empty = req_with("");
    assert_int_equal(req_json_body(&empty, &body, &err), -1);
    assert_int_equal(err.code, ERR_MALFORMED_JSON);
    assert_non_null(strstr(err.msg, "empty"));
    http_request_clear(&empty);
}

static void test_lookups(void **state)
{
    (void)state;
    http_kv params[] = {{"name", "foo"}};
    http_kv query[] = {{"all", "1"}, {"Label", "x"}};
    http_kv headers[] = {{"Content-Type", "application/json"}, {"X-Request-Id", "abc"}};
    http_request req = {.params = params,
                        .nparams = 1,
                        .query = query,
                        .nquery = 2,
                        .headers = headers,
                        .nheaders = 2};
    assert_string_equal(http_request_param(&req, "name"), "foo");
    assert_null(http_request_param(&req, "version"));
    assert_string_equal(http_request_query(&req, "all"), "1");
    assert_null(http_request_query(&req, "label")); /* query keys are case-sensitive */
    assert_string_equal(http_request_header(&req, "content-type"), "application/json");
    assert_null(http_request_header(&req, "Authorization"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_typed_fields),
        cmocka_unit_test(test_absent_and_null_fields),
        cmocka_unit_test(test_wrong_types_name_field_and_type),
        cmocka_unit_test(test_nested_field_names),
        cmocka_unit_test(test_malformed_json_reports_position),
        cmocka_unit_test(test_duplicate_keys_are_refused),
        cmocka_unit_test(test_body_must_be_an_object),
        cmocka_unit_test(test_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
