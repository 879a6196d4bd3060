/*
 * test_openapi.c - docs/openapi.yaml and src/api/routes.c describe the
 * same routes: every route the daemon has is in the document with its
 * method, and the document has no route the daemon lacks. Also: the
 * embedded JSON form (converted from the YAML at build time) loads, and
 * nothing had to be generated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "http/openapi.h"
#include "util/cleanup.h"

static void test_every_route_is_documented(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    http_router *r = api_router_new(&e);
    assert_non_null(r);
    _cleanup_json_ json_t *doc = openapi_file_document(&e);
    if (!doc) {
        router_free(r);
        fail_msg("docs/openapi.yaml's JSON form does not load: %s", e.msg);
    }
    int missing = 0;
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        if (!openapi_has_operation(doc, route->method, route->pattern)) {
            print_error("routes.c has %s %s; docs/openapi.yaml does not describe it\n",
                        route->method, route->pattern);
            missing++;
        }
    }
    router_free(r);
    assert_int_equal(missing, 0);
}

static void test_every_documented_route_exists(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    http_router *r = api_router_new(&e);
    assert_non_null(r);
    _cleanup_json_ json_t *doc = openapi_file_document(&e);
    assert_non_null(doc);
    static const char *const methods[] = {"get", "post", "put", "patch", "delete", "head", NULL};
    int extra = 0, operations = 0;
    const char *pattern;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), pattern, item)
    {
        for (size_t m = 0; methods[m]; m++) {
            if (!json_object_get(item, methods[m]))
                continue;
            operations++;
            bool found = false;
            for (size_t i = 0; i < router_count(r) && !found; i++) {
                const http_route *route = router_route(r, i);
                found = strcasecmp(route->method, methods[m]) == 0 &&
                        strcmp(route->pattern, pattern) == 0;
            }
            if (!found) {
                print_error("docs/openapi.yaml describes %s %s; routes.c has no such route\n",
                            methods[m], pattern);
                extra++;
            }
        }
    }
    assert_int_equal(extra, 0);
    assert_int_equal(operations, (int)router_count(r));
    router_free(r);
}

/* The served JSON is the file's: nothing generated in a tested build. */
static void test_document_needs_no_generated_entries(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    http_router *r = api_router_new(&e);
    _cleanup_json_ json_t *doc = openapi_document(r, &e);
    assert_non_null(doc);
    _cleanup_json_ json_t *plain = openapi_file_document(&e);
    assert_true(json_equal(doc, plain));
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.0.3");
    router_free(r);
}

/* A route the file lacks still shows, with its summary and parameters. */
static int dummy_handler(http_request *req, http_response *resp, gb_err *err)
{
    (void)req;
    (void)resp;
    (void)err;
    return 0;
}

static void test_undocumented_route_is_generated(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    http_router *r = router_new();
    http_route route = {"PUT", "/api/v1/things/{id}/{part}", dummy_handler,
                        .summary = "A thing's part"};
    assert_int_equal(router_add(r, &route, &e), 0);
    _cleanup_json_ json_t *doc = openapi_document(r, &e);
    assert_non_null(doc);
    json_t *op = json_object_get(
        json_object_get(json_object_get(doc, "paths"), "/api/v1/things/{id}/{part}"), "put");
    assert_non_null(op);
    assert_string_equal(json_string_value(json_object_get(op, "summary")), "A thing's part");
    json_t *params = json_object_get(op, "parameters");
    assert_int_equal(json_array_size(params), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(params, 1), "name")),
                        "part");
    router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_is_documented),
        cmocka_unit_test(test_every_documented_route_exists),
        cmocka_unit_test(test_document_needs_no_generated_entries),
        cmocka_unit_test(test_undocumented_route_is_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
