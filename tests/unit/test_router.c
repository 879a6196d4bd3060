/*
 * test_router.c - route matching: literal and parameter segments, methods,
 * 404 versus 405 with the Allow list, and bad route tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/router.h"

static int h_a(http_request *req, http_response *resp, gb_err *err)
{
    (void)req, (void)resp, (void)err;
    return 0;
}
static int h_b(http_request *req, http_response *resp, gb_err *err)
{
    (void)req, (void)resp, (void)err;
    return 0;
}

static const http_route routes[] = {
    {"GET", "/healthz", h_a, HTTP_ACCESS_OPEN, .summary = "health"},
    {"GET", "/api/v1/replicaSet", h_a, .summary = "list"},
    {"POST", "/api/v1/replicaSet", h_b, .summary = "create"},
    {"GET", "/api/v1/replicaSet/{name}", h_a, .summary = "info"},
    {"DELETE", "/api/v1/replicaSet/{name}", h_b, .summary = "delete"},
    {"PATCH", "/api/v1/replicaSet/{name}/stop", h_a, .summary = "stop"},
    {"GET", "/api/v1/volumes/{name}/history", h_a, .summary = "volume history"},
    {"GET", "/api/v1/volumes/usage", h_b, .summary = "literal beats parameter"},
    {"GET", "/api/v1/volumes/{name}", h_a, .summary = "volume info"},
    {"GET", "/a/{x}/b/{y}", h_a, .summary = "two params"},
};

static int setup(void **state)
{
    http_router *r = router_new();
    assert_non_null(r);
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        gb_err err = GB_ERR_INIT;
        assert_int_equal(router_add(r, &routes[i], &err), 0);
    }
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    router_free(*state);
    return 0;
}

static void test_literal_route(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "GET", "/healthz", &m), ROUTER_FOUND);
    assert_string_equal(m.route->summary, "health");
    assert_int_equal(m.nparams, 0);
    router_match_free(&m);
}

static void test_path_parameter(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "PATCH", "/api/v1/replicaSet/foo/stop", &m),
                     ROUTER_FOUND);
    assert_string_equal(m.route->summary, "stop");
    assert_int_equal(m.nparams, 1);
    assert_string_equal(m.params[0].key, "name");
    assert_string_equal(m.params[0].value, "foo");
    router_match_free(&m);

    assert_int_equal(router_match_request(*state, "GET", "/a/1/b/two", &m), ROUTER_FOUND);
    assert_int_equal(m.nparams, 2);
    assert_string_equal(m.params[0].key, "x");
    assert_string_equal(m.params[0].value, "1");
    assert_string_equal(m.params[1].key, "y");
    assert_string_equal(m.params[1].value, "two");
    router_match_free(&m);
}

static void test_method_selects_route(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "POST", "/api/v1/replicaSet", &m), ROUTER_FOUND);
    assert_string_equal(m.route->summary, "create");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "DELETE", "/api/v1/replicaSet/x", &m),
                     ROUTER_FOUND);
    assert_string_equal(m.route->summary, "delete");
    assert_string_equal(m.params[0].value, "x");
    router_match_free(&m);
}

static void test_literal_beats_parameter(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/volumes/usage", &m),
                     ROUTER_FOUND);
    assert_string_equal(m.route->summary, "literal beats parameter");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/volumes/data", &m), ROUTER_FOUND);
    assert_string_equal(m.route->summary, "volume info");
    router_match_free(&m);
}

static void test_not_found(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/foo", &m), ROUTER_NOT_FOUND);
    router_match_free(&m);
    /* a parameter matches exactly one segment, never zero or two: this is
     * the info route's path, not stop's */
    assert_int_equal(router_match_request(*state, "PATCH", "/api/v1/replicaSet/stop", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, DELETE");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/replicaSet/a/b", &m),
                     ROUTER_NOT_FOUND);
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "GET", "/", &m), ROUTER_NOT_FOUND);
    router_match_free(&m);
}

static void test_method_not_allowed_lists_methods(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "PUT", "/api/v1/replicaSet/foo", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, DELETE");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/replicaSet/foo/stop", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "PATCH");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "DELETE", "/healthz", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET");
    router_match_free(&m);
}

static void test_trailing_and_double_slashes(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "GET", "/healthz/", &m), ROUTER_FOUND);
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "GET", "/api//v1/replicaSet/x", &m),
                     ROUTER_FOUND);
    assert_string_equal(m.params[0].value, "x");
    router_match_free(&m);
}

static void test_methods_are_case_sensitive(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "get", "/healthz", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    router_match_free(&m);
}

static void test_bad_routes_are_refused(void **state)
{
    (void)state;
    http_router *r = router_new();
    gb_err err = GB_ERR_INIT;
    http_route dup = {"GET", "/x/{a}", h_a, .summary = ""};
    assert_int_equal(router_add(r, &dup, &err), 0);
    http_route dup2 = {"GET", "/x/{b}", h_b, .summary = ""};
    assert_int_equal(router_add(r, &dup2, &err), -1);
    assert_non_null(strstr(err.msg, "twice"));
    http_route rel = {"GET", "x", h_a, .summary = ""};
    assert_int_equal(router_add(r, &rel, &err), -1);
    http_route brace = {"GET", "/x/{}", h_a, .summary = ""};
    assert_int_equal(router_add(r, &brace, &err), -1);
    http_route open = {"GET", "/x/{a", h_a, .summary = ""};
    assert_int_equal(router_add(r, &open, &err), -1);
    assert_int_equal(router_count(r), 1);
    assert_string_equal(router_route(r, 0)->pattern, "/x/{a}");
    assert_null(router_route(r, 1));
    router_free(r);
}

/* HEAD asks what GET answers; a path with no GET route is still a 405. */
static void test_head_is_answered_by_get(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "HEAD", "/api/v1/replicaSet/foo", &m),
                     ROUTER_FOUND);
    assert_string_equal(m.route->summary, "info");
    router_match_free(&m);
    assert_int_equal(router_match_request(*state, "HEAD", "/api/v1/replicaSet/foo/stop", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "PATCH");
    router_match_free(&m);
}

static void test_access_follows_the_route(void **state)
{
    router_match m;
    assert_int_equal(router_match_request(*state, "GET", "//healthz/", &m), ROUTER_FOUND);
    assert_int_equal(m.route->access, HTTP_ACCESS_OPEN);
    router_match_free(&m);
    /* a line that does not say: the default of its method (http/auth.h) */
    assert_int_equal(router_match_request(*state, "GET", "/api/v1/replicaSet", &m), ROUTER_FOUND);
    assert_int_equal(m.route->access, HTTP_ACCESS_BY_METHOD);
    router_match_free(&m);
    size_t n = router_count(*state);
    for (size_t i = 0; i < n; i++)
        if (strcmp(router_route(*state, i)->pattern, "/healthz") == 0)
            assert_int_equal(router_route(*state, i)->access, HTTP_ACCESS_OPEN);
}

static void test_too_many_segments(void **state)
{
    router_match m;
    char path[256] = "";
    for (int i = 0; i < ROUTER_MAX_SEGMENTS + 2; i++)
        strcat(path, "/s");
    assert_int_equal(router_match_request(*state, "GET", path, &m), ROUTER_NOT_FOUND);
    router_match_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_literal_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_path_parameter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_selects_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_literal_beats_parameter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_not_allowed_lists_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trailing_and_double_slashes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_methods_are_case_sensitive, setup, teardown),
        cmocka_unit_test(test_bad_routes_are_refused),
        cmocka_unit_test_setup_teardown(test_too_many_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_is_answered_by_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_access_follows_the_route, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
