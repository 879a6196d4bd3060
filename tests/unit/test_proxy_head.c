/*
 * test_proxy_head.c - the service proxy's parsers (proxy/proxy_head.h) and
 * its cookie (proxy/proxy_cookie.h): heads, routes, its own query
 * parameters, body framing, and a cookie good for one service only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/proxy_cookie.h"
#include "proxy/proxy_head.h"

static int parse(const char *text, proxy_head *h, char *buf, size_t size)
{
    snprintf(buf, size, "%s", text);
    size_t end = proxy_head_end(buf, strlen(buf));
    if (!end)
        return -2;
    return proxy_head_parse(buf, end, h);
}

static void test_heads(void **state)
{
    (void)state;
    char buf[1024];
    proxy_head h;
    assert_int_equal(parse("GET /s/a/b/x?y=1 HTTP/1.1\r\nHost: h:1\r\nX-A:  v  \r\n\r\nBODY", &h,
                           buf, sizeof(buf)),
                     0);
    assert_string_equal(h.method, "GET");
    assert_string_equal(h.target, "/s/a/b/x?y=1");
    assert_string_equal(proxy_head_get(&h, "x-a"), "v");
    assert_string_equal(buf + h.length, "BODY");
    assert_int_equal(parse("GET / HTTP/1.1\nHost: h\n\n", &h, buf, sizeof(buf)), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n", &h, buf, sizeof(buf)), -2);
    static const char *const bad[] = {
        "GARBAGE\r\n\r\n",
        "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/2\r\nHost: x\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\x01b\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse(bad[i], &h, buf, sizeof(buf)), -1);
    assert_true(proxy_header_has_token("keep-alive, Upgrade", "upgrade"));
    assert_false(proxy_header_has_token("keep-alive, Upgraded", "upgrade"));
}

static void test_routes(void **state)
{
    (void)state;
    proxy_route r;
    assert_int_equal(proxy_route_of("/s/box1/lab/tree?x=1", "h:80", NULL, &r), 0);
    assert_string_equal(r.set, "box1");
    assert_string_equal(r.service, "lab");
    assert_string_equal(r.prefix, "/s/box1/lab");
    assert_false(r.add_slash);
    assert_int_equal(proxy_route_of("/s/box1/lab?x=1", "h", NULL, &r), 0);
    assert_true(r.add_slash);
    assert_int_equal(proxy_route_of("/s/box1/lab", "h", NULL, &r), 0);
    assert_true(r.add_slash);
    assert_int_equal(proxy_route_of("/s/box1", "h", NULL, &r), -1);
    assert_int_equal(proxy_route_of("/s//lab/", "h", NULL, &r), -1);
    assert_int_equal(proxy_route_of("/s/a%2Fb/lab/", "h", NULL, &r), -1);
    assert_int_equal(proxy_route_of("/x/a/b/", "h", NULL, &r), -1);
    /* host names per service */
    assert_int_equal(
        proxy_route_of("/tree", "Lab--Box1.Apps.Example.org:8080", "apps.example.org", &r), 0);
    assert_string_equal(r.set, "box1");
    assert_string_equal(r.service, "lab");
    assert_string_equal(r.prefix, "");
    assert_int_equal(proxy_route_of("/tree", "lab-box1.apps.example.org", "apps.example.org", &r),
                     -1);
    assert_int_equal(proxy_route_of("/tree", "lab--box1.evil.org", "apps.example.org", &r), -1);
    assert_int_equal(
        proxy_route_of("/tree", "x.lab--box1.apps.example.org", "apps.example.org", &r), -1);
}

static void test_query(void **state)
{
    (void)state;
    char v[80], rest[256];
    assert_int_equal(proxy_query_take("/p/?gpubox-ticket=abc", "gpubox-ticket", v, sizeof(v), rest,
                                      sizeof(rest)),
                     1);
    assert_string_equal(v, "abc");
    assert_string_equal(rest, "/p/");
    assert_int_equal(proxy_query_take("/p/?a=1&gpubox-ticket=abc&b=2", "gpubox-ticket", v,
                                      sizeof(v), rest, sizeof(rest)),
                     1);
    assert_string_equal(rest, "/p/?a=1&b=2");
    assert_int_equal(proxy_query_take("/p/?gpubox-ticket=abc&b=2", "gpubox-ticket", v, sizeof(v),
                                      rest, sizeof(rest)),
                     1);
    assert_string_equal(rest, "/p/?b=2");
    assert_int_equal(proxy_query_take("/p/?a=1&gpubox-ticket=abc", "gpubox-ticket", v, sizeof(v),
                                      rest, sizeof(rest)),
                     1);
    assert_string_equal(rest, "/p/?a=1");
    assert_int_equal(proxy_query_take("/p/?xgpubox-ticket=abc", "gpubox-ticket", v, sizeof(v), rest,
                                      sizeof(rest)),
                     0);
    assert_int_equal(
        proxy_query_take("/p/gpubox-ticket=abc", "gpubox-ticket", v, sizeof(v), rest, sizeof(rest)),
        0);
}

static void test_bodies(void **state)
{
    (void)state;
    char buf[512];
    proxy_head h;
    proxy_body b;
    assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &h, buf, sizeof(buf)),
                     0);
    assert_int_equal(proxy_body_init(&h, &b), 0);
    assert_int_equal(proxy_body_feed(&b, "abcGET / HTTP/1.1", 3), 3);
    assert_false(b.done);
    assert_int_equal(proxy_body_feed(&b, "deGET / HTTP/1.1", 16), 2);
    assert_true(b.done);
    assert_int_equal(proxy_body_feed(&b, "more", 4), 0);

    assert_int_equal(
        parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &h, buf, sizeof(buf)), 0);
    assert_int_equal(proxy_body_init(&h, &b), 0);
    const char chunked[] = "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: x\r\n\r\nNEXT";
    size_t body_len = sizeof(chunked) - 1 - 4;
    size_t fed = 0;
    for (size_t i = 0; i < sizeof(chunked) - 1 && !b.done; i++) /* a byte at a time */
        fed += (size_t)proxy_body_feed(&b, chunked + i, 1);
    assert_true(b.done);
    assert_int_equal(fed, body_len);
    assert_int_equal(proxy_body_init(&h, &b), 0);
    assert_int_equal(proxy_body_feed(&b, "zz\r\n", 4), -1);

    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &h, buf, sizeof(buf)), 0);
    assert_int_equal(proxy_body_init(&h, &b), 0);
    assert_true(b.done);
    static const char *const bad[] = {
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i], &h, buf, sizeof(buf)), 0);
        assert_int_equal(proxy_body_init(&h, &b), -1);
    }
}

static void test_cookies(void **state)
{
    (void)state;
    caller alice = {.name = "alice@lab", .role = USER_ROLE_USER}, who = {0};
    char value[PROXY_COOKIE_MAX], header[512], link[80];
    assert_int_equal(proxy_cookie_user(&alice, "box1", "lab", value, sizeof(value)), 0);
    snprintf(header, sizeof(header), "a=1; " PROXY_COOKIE_NAME "=%s; b=2", value);
    assert_int_equal(proxy_cookie_read(header, "box1", "lab", &who, link, sizeof(link)), 1);
    assert_string_equal(who.name, "alice@lab");
    assert_int_equal(who.role, USER_ROLE_USER);
    /* another service, another set, a changed role or name: nothing */
    assert_int_equal(proxy_cookie_read(header, "box1", "tb", &who, link, sizeof(link)), 0);
    assert_int_equal(proxy_cookie_read(header, "box2", "lab", &who, link, sizeof(link)), 0);
    char *role = strchr(strchr(value, '.') + 1, '.') + 1;
    *role = '3';
    snprintf(header, sizeof(header), PROXY_COOKIE_NAME "=%s", value);
    assert_int_equal(proxy_cookie_read(header, "box1", "lab", &who, link, sizeof(link)), 0);
    assert_int_equal(
        proxy_cookie_read(PROXY_COOKIE_NAME "=l.gpbx_abc", "box1", "lab", &who, link, sizeof(link)),
        2);
    assert_string_equal(link, "gpbx_abc");
    char kept[256];
    assert_true(proxy_cookie_strip("a=1; " PROXY_COOKIE_NAME "=x; b=2", kept, sizeof(kept)));
    assert_string_equal(kept, "a=1; b=2");
    assert_false(proxy_cookie_strip(PROXY_COOKIE_NAME "=x", kept, sizeof(kept)));
}

static int answer_of(const char *text, const char *method, proxy_response *r)
{
    size_t end = proxy_head_end(text, strlen(text));
    if (!end)
        return -2;
    return proxy_response_parse(text, end, method, r);
}

/* Where an answer ends, and whether its connection can carry another
 * request (the proxy's keep-alive). */
static void test_answers(void **state)
{
    (void)state;
    proxy_response r;
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", "GET", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body.kind, PROXY_BODY_LENGTH);
    assert_int_equal(r.body.left, 12);
    assert_true(r.keep_alive);
    assert_int_equal(proxy_body_feed(&r.body, "hello world!GET", 15), 12);
    assert_true(r.body.done);

    assert_int_equal(
        answer_of("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n", "GET", &r), 0);
    assert_int_equal(r.body.kind, PROXY_BODY_CHUNKED);
    assert_true(r.keep_alive);
    const char chunks[] = "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\nnext";
    assert_int_equal(proxy_body_feed(&r.body, chunks, sizeof(chunks) - 1), sizeof(chunks) - 5);
    assert_true(r.body.done);

    /* the end is the close: never done, and the connection is not kept */
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n", "GET", &r), 0);
    assert_int_equal(r.body.kind, PROXY_BODY_CLOSE);
    assert_false(r.keep_alive);
    assert_int_equal(proxy_body_feed(&r.body, "abc", 3), 3);
    assert_false(r.body.done);
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET", &r), 0);
    assert_int_equal(r.body.kind, PROXY_BODY_CLOSE);
    assert_false(r.keep_alive);
    /* both framings: Transfer-Encoding wins, the connection goes */
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n",
                               "GET", &r),
                     0);
    assert_int_equal(r.body.kind, PROXY_BODY_CHUNKED);
    assert_false(r.keep_alive);

    /* no body: HEAD, 1xx, 204, 304, whatever the headers say */
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", "HEAD", &r), 0);
    assert_int_equal(r.body.kind, PROXY_BODY_NONE);
    assert_true(r.body.done && r.keep_alive);
    assert_int_equal(answer_of("HTTP/1.1 204 No Content\r\n\r\n", "GET", &r), 0);
    assert_true(r.body.done && r.keep_alive);
    assert_int_equal(answer_of("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "GET", &r),
                     0);
    assert_true(r.body.done);
    assert_int_equal(answer_of("HTTP/1.1 100 Continue\r\n\r\n", "POST", &r), 0);
    assert_int_equal(r.status, 100);
    assert_true(r.body.done);
    assert_int_equal(answer_of("HTTP/1.1 101 Switching Protocols\r\n\r\n", "GET", &r), 0);
    assert_int_equal(r.status, 101);

    /* Connection: close, or HTTP/1.0: the container's connection goes */
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close\r\n"
                               "Content-Length: 0\r\n\r\n",
                               "GET", &r),
                     0);
    assert_false(r.keep_alive);
    assert_true(r.body.done);
    assert_int_equal(answer_of("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "GET", &r), 0);
    assert_false(r.keep_alive);
    assert_int_equal(r.body.kind, PROXY_BODY_LENGTH);

    /* not understood */
    assert_int_equal(
        answer_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "GET", &r),
        -1);
    assert_int_equal(
        answer_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", "GET", &r),
        0);
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/2 200 OK\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/1.1 2000 OK\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/1.1 099 Low\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/1.1 20\r\n\r\n", "GET", &r), -1);
    assert_int_equal(answer_of("HTTP/1.1 200\r\n\r\n", "GET", &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heads),   cmocka_unit_test(test_routes),
        cmocka_unit_test(test_query),   cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_cookies), cmocka_unit_test(test_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
