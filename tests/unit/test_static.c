/*
 * test_static.c - the console's embedded files (http/static.h): which path
 * answers which file, gzip only to clients that take it, 304 on a matching
 * ETag, and the cache and security headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/static.h"

static const unsigned char index_body[] = "<!doctype html><title>gpubox</title>";
static const unsigned char index_gz[] = {0x1f, 0x8b, 0x08};
static const unsigned char js_body[] = "console.log(1)";

static const http_static_file files[] = {
    {"/index.html", "text/html; charset=utf-8", index_body, sizeof(index_body) - 1, index_gz,
     sizeof(index_gz), "\"aaaa\"", false},
    {"/assets/index-12ab.js", "text/javascript; charset=utf-8", js_body, sizeof(js_body) - 1, NULL,
     0, "\"bbbb\"", true},
};
static const http_static_set set = {files, 2, "/index.html"};

static const char *header(const http_response *r, const char *name)
{
    for (unsigned i = 0; i < r->nheaders; i++)
        if (strcmp(r->headers[i][0], name) == 0)
            return r->headers[i][1];
    return NULL;
}

static void test_find(void **state)
{
    (void)state;
    assert_ptr_equal(http_static_find(&set, "/"), &files[0]);
    assert_ptr_equal(http_static_find(&set, "/index.html"), &files[0]);
    assert_ptr_equal(http_static_find(&set, "/assets/index-12ab.js"), &files[1]);
    assert_null(http_static_find(&set, "/assets/index-12ab.js/"));
    assert_null(http_static_find(&set, "/assets/"));
    assert_null(http_static_find(&set, "/api/v1/replicaSet"));
    assert_null(http_static_find(&set, "/../index.html"));
    assert_null(http_static_find(NULL, "/"));
}

static void test_accepts_gzip(void **state)
{
    (void)state;
    assert_true(http_accepts_gzip("gzip"));
    assert_true(http_accepts_gzip("gzip, deflate, br"));
    assert_true(http_accepts_gzip("br;q=1.0, GZIP;q=0.5"));
    assert_true(http_accepts_gzip("*"));
    assert_true(http_accepts_gzip("x-gzip"));
    assert_false(http_accepts_gzip(NULL));
    assert_false(http_accepts_gzip(""));
    assert_false(http_accepts_gzip("identity"));
    assert_false(http_accepts_gzip("br, deflate"));
    assert_false(http_accepts_gzip("gzip;q=0"));
    assert_false(http_accepts_gzip("gzip; q=0.0, br"));
}

static void test_answer(void **state)
{
    (void)state;
    http_response r = {0};
    http_static_answer(&files[0], "gzip, br", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_ptr_equal(r.static_body, index_gz);
    assert_int_equal(r.body_len, sizeof(index_gz));
    assert_null(r.body);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    assert_string_equal(header(&r, "Content-Encoding"), "gzip");
    assert_string_equal(header(&r, "Cache-Control"), "no-cache");
    assert_string_equal(header(&r, "ETag"), "\"aaaa\"");
    assert_string_equal(header(&r, "Vary"), "Accept-Encoding");
    const char *csp = header(&r, "Content-Security-Policy");
    assert_non_null(csp);
    assert_non_null(strstr(csp, "default-src 'none'"));
    assert_non_null(strstr(csp, "script-src 'self';"));
    assert_null(strstr(csp, "unsafe"));
    assert_string_equal(header(&r, "X-Content-Type-Options"), "nosniff");
    http_response_clear(&r);

    /* No gzip asked: the bytes as they are. */
    http_static_answer(&files[0], NULL, NULL, &r);
    assert_ptr_equal(r.static_body, index_body);
    assert_int_equal(r.body_len, sizeof(index_body) - 1);
    assert_null(header(&r, "Content-Encoding"));
    http_response_clear(&r);

    /* A hashed name: cached for good; no compressed copy: sent as is. */
    http_static_answer(&files[1], "gzip", NULL, &r);
    assert_ptr_equal(r.static_body, js_body);
    assert_null(header(&r, "Content-Encoding"));
    assert_string_equal(header(&r, "Cache-Control"), "public, max-age=31536000, immutable");
    http_response_clear(&r);

    /* Revalidation: 304 without a body when the ETag matches. */
    http_static_answer(&files[0], "gzip", "\"zzzz\", W/\"aaaa\"", &r);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.body_len, 0);
    assert_string_equal(header(&r, "ETag"), "\"aaaa\"");
    http_response_clear(&r);
    http_static_answer(&files[0], "gzip", "\"aaaab\"", &r);
    assert_int_equal(r.status, 200);
    http_response_clear(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_accepts_gzip),
        cmocka_unit_test(test_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
