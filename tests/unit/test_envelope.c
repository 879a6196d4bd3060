/*
 * test_envelope.c - the response envelope and how envelope codes become
 * HTTP statuses, with and without --compat-http-200.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/response.h"
#include "util/cleanup.h"

static json_t *parse(const char *body, size_t len)
{
    json_error_t jerr;
    json_t *v = json_loadb(body, len, 0, &jerr);
    assert_non_null(v);
    return v;
}

static void test_success_envelope(void **state)
{
    (void)state;
    http_response resp = {0};
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_response_data(&resp, json_pack("{s:i}", "n", 3), &err), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.code, 200);
    assert_true(resp.envelope);
    assert_string_equal(resp.content_type, "application/json");
    _cleanup_json_ json_t *v = parse(resp.body, resp.body_len);
    assert_int_equal(json_integer_value(json_object_get(v, "code")), 200);
    assert_string_equal(json_string_value(json_object_get(v, "msg")), "success");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "data"), "n")), 3);
    assert_int_equal(json_object_size(v), 3);
    http_response_clear(&resp);
}

static void test_null_data(void **state)
{
    (void)state;
    http_response resp = {0};
    assert_int_equal(http_response_data(&resp, NULL, NULL), 0);
    assert_string_equal(resp.body, "{\"code\":200,\"msg\":\"success\",\"data\":null}");
    http_response_clear(&resp);
}

static void test_error_envelope(void **state)
{
    (void)state;
    http_response resp = {0};
    gb_err e = GB_ERR_INIT;
    err_set(&e, ERR_GPU_NOT_ENOUGH, "GPU not enough: asked %d, %d free", 4, 2);
    http_response_error(&resp, &e);
    assert_int_equal(resp.status, 409);
    assert_int_equal(resp.code, 1013);
    _cleanup_json_ json_t *v = parse(resp.body, resp.body_len);
    assert_int_equal(json_integer_value(json_object_get(v, "code")), 1013);
    assert_string_equal(json_string_value(json_object_get(v, "msg")),
                        "GPU not enough: asked 4, 2 free");
    assert_true(json_is_null(json_object_get(v, "data")));
    http_response_clear(&resp);
}

static void test_error_without_code_is_internal(void **state)
{
    (void)state;
    http_response resp = {0};
    gb_err e = GB_ERR_INIT;
    http_response_error(&resp, &e);
    assert_int_equal(resp.status, 500);
    assert_int_equal(resp.code, ERR_INTERNAL);
    assert_non_null(strstr(resp.body, "internal error"));
    http_response_clear(&resp);
}

static void test_envelope_with_data_and_error_code(void **state)
{
    (void)state;
    http_response resp = {0};
    assert_int_equal(http_response_envelope(&resp, ERR_DOCKER_UNAVAILABLE, "docker is down",
                                            json_pack("{s:b}", "ok", 0), NULL),
                     0);
    assert_int_equal(resp.status, 503);
    _cleanup_json_ json_t *v = parse(resp.body, resp.body_len);
    assert_true(json_is_false(json_object_get(json_object_get(v, "data"), "ok")));
    http_response_clear(&resp);
}

static void test_status_mapping(void **state)
{
    (void)state;
    static const struct {
        int code, status;
    } cases[] = {
        {ERR_OK, 200},
        {ERR_INVALID_PARAMS, 400},
        {ERR_IMAGE_EMPTY, 400},
        {ERR_NAME_HAS_DASH, 400},
        {ERR_RUN_FAILED, 500},
        {ERR_EXISTS, 409},
        {ERR_GPU_NOT_ENOUGH, 409},
        {ERR_PORT_NOT_ENOUGH, 409},
        {ERR_VOLUME_SIZE_UNIT, 400},
        {ERR_NOT_FOUND, 404},
        {ERR_ROUTE_NOT_FOUND, 404},
        {ERR_METHOD_NOT_ALLOWED, 405},
        {ERR_BODY_TOO_LARGE, 413},
        {ERR_MALFORMED_JSON, 400},
        {ERR_WRONG_TYPE, 400},
        {ERR_STATE_CONFLICT, 409},
        {ERR_UNAUTHORIZED, 401},
        {ERR_FORBIDDEN, 403},
        {ERR_IMAGE_NOT_FOUND, 422},
        {ERR_STORE_UNAVAILABLE, 503},
        {ERR_DOCKER_UNAVAILABLE, 503},
        {ERR_CONFLICT, 409},
        {ERR_INTERNAL, 500},
        {4242, 500}, /* an unknown code is a server fault */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(http_status_for(cases[i].code, false), cases[i].status);
        assert_int_equal(http_status_for(cases[i].code, true), 200);
    }
}

static void test_preserialized_data(void **state)
{
    (void)state;
    http_response resp = {0};
    const char *data = "{\"gpus\":{\"GPU-1\":0},\"simulated\":true}";
    assert_int_equal(http_response_data_text(&resp, data, strlen(data), NULL), 0);
    assert_int_equal(resp.status, 200);
    assert_true(resp.envelope);
    assert_int_equal(resp.body_len, strlen(resp.body));
    _cleanup_json_ json_t *v = parse(resp.body, resp.body_len);
    assert_int_equal(json_integer_value(json_object_get(v, "code")), 200);
    assert_string_equal(json_string_value(json_object_get(v, "msg")), "success");
    assert_true(json_is_true(json_object_get(json_object_get(v, "data"), "simulated")));
    http_response_clear(&resp);
}

static void test_raw_body_is_not_an_envelope(void **state)
{
    (void)state;
    http_response resp = {0};
    http_response_raw(&resp, 200, "text/plain", strdup("hello"), 5);
    assert_false(resp.envelope);
    assert_int_equal(resp.body_len, 5);
    assert_string_equal(resp.content_type, "text/plain");
    /* a second answer replaces the first without leaking it */
    assert_int_equal(http_response_data(&resp, json_true(), NULL), 0);
    assert_true(resp.envelope);
    http_response_clear(&resp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_envelope),
        cmocka_unit_test(test_null_data),
        cmocka_unit_test(test_error_envelope),
        cmocka_unit_test(test_error_without_code_is_internal),
        cmocka_unit_test(test_envelope_with_data_and_error_code),
        cmocka_unit_test(test_status_mapping),
        cmocka_unit_test(test_preserialized_data),
        cmocka_unit_test(test_raw_body_is_not_an_envelope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
