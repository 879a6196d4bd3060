/*
 * test_origin.c - Host and Origin values (http/origin.h): what parses, the
 * Host names the guard answers, and which pages may call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/origin.h"

static void test_hostport_parse(void **state)
{
    (void)state;
    http_hostport hp;
    assert_int_equal(http_hostport_parse("127.0.0.1:2378", 14, &hp), 0);
    assert_int_equal(hp.kind, HTTP_HOST_IPV4);
    assert_string_equal(hp.host, "127.0.0.1");
    assert_int_equal(hp.port, 2378);
    assert_int_equal(http_hostport_parse("[::1]:80", 8, &hp), 0);
    assert_int_equal(hp.kind, HTTP_HOST_IPV6);
    assert_string_equal(hp.host, "::1");
    assert_int_equal(hp.port, 80);
    assert_int_equal(http_hostport_parse("[FE80::A]", 9, &hp), 0);
    assert_string_equal(hp.host, "fe80::a");
    assert_int_equal(hp.port, 0);
    assert_int_equal(http_hostport_parse("GPU1.Example.COM.", 17, &hp), 0);
    assert_int_equal(hp.kind, HTTP_HOST_NAME);
    assert_string_equal(hp.host, "gpu1.example.com");
    assert_int_equal(http_hostport_parse("my_host:65535", 13, &hp), 0);
    assert_string_equal(hp.host, "my_host");
    /* only the first len bytes count */
    assert_int_equal(http_hostport_parse("localhost:80/x", 12, &hp), 0);
    assert_int_equal(hp.port, 80);

    static const char *bad[] = {
        "",          ":80",        "host:",       "host:0", "host:65536", "host:8o", "host:123456",
        "[::1",      "::1",        "[::1]x",      "[::g]",  "[]",         "127.1",   "1.2.3.256",
        "1.2.3.4.5", "-a.example", "a-.example",  "a..b",   ".",          "a b",     "a/b",
        "a@b",       "1.2.3",      "example.123", "a:1:2",  "[::1]:80:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (http_hostport_parse(bad[i], strlen(bad[i]), &hp) == 0)
            fail_msg("'%s' parsed", bad[i]);
    }
    char longname[300];
    memset(longname, 'a', sizeof(longname));
    longname[299] = '\0';
    assert_int_equal(http_hostport_parse(longname, strlen(longname), &hp), -1);
    memset(longname, 'a', 64);
    longname[64] = '\0'; /* one label of 64 */
    assert_int_equal(http_hostport_parse(longname, 64, &hp), -1);
    assert_int_equal(http_hostport_parse("a\0b", 3, &hp), -1);
    /* 253 characters and a trailing dot is the longest name */
    char name[260];
    for (int i = 0; i < 253; i++)
        name[i] = (i % 50 == 49) ? '.' : 'a';
    name[253] = '.';
    name[254] = '\0';
    assert_int_equal(http_hostport_parse(name, 254, &hp), 0);
    assert_int_equal(strlen(hp.host), 253);
    name[253] = 'a';
    assert_int_equal(http_hostport_parse(name, 254, &hp), -1);
}

static void test_origin_parse(void **state)
{
    (void)state;
    http_origin o;
    assert_int_equal(http_origin_parse("http://localhost:3000", &o), 0);
    assert_false(o.https);
    assert_string_equal(o.hp.host, "localhost");
    assert_int_equal(o.hp.port, 3000);
    assert_int_equal(http_origin_parse("HTTPS://[::1]", &o), 0);
    assert_true(o.https);
    assert_string_equal(o.hp.host, "::1");
    static const char *bad[] = {"null",          "",        "ftp://x",          "http://",
                                "http://x/",     "http:/x", "http://x:80/path", "//x",
                                "http://user@x", "*"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (http_origin_parse(bad[i], &o) == 0)
            fail_msg("'%s' parsed", bad[i]);
    assert_int_equal(http_origin_parse(NULL, &o), -1);
}

static void test_guard_hosts(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    /* the built-in guard: addresses and localhost */
    static const char *yes[] = {NULL,          "127.0.0.1",     "127.0.0.1:2378",
                                "[::1]:2378",  "10.77.0.3",     "localhost",
                                "LOCALHOST:1", "app.localhost", "localhost."};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_int_equal(http_guard_check_host(NULL, yes[i], &err), 0);
    static const char *no[] = {"rebind.example",  "evil.localhost.example", "localhostx", "x", "",
                               "127.0.0.1.nip.io"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        err = (gb_err)GB_ERR_INIT;
        assert_int_equal(http_guard_check_host(NULL, no[i], &err), -1);
        assert_int_equal(err.code, ERR_HOST_NOT_ALLOWED);
        assert_non_null(strstr(err.msg, "--allowed-host"));
    }

    http_guard *g = NULL;
    const char *own[] = {"gpu1", NULL, "0.0.0.0", "node2.lab:2378", "bad name", "[::1]:2378"};
    assert_int_equal(http_guard_new(" gpubox.example.com, Other.Test ,,", own,
                                    sizeof(own) / sizeof(own[0]), &g, &err),
                     0);
    static const char *named[] = {"gpubox.example.com:2378", "OTHER.TEST", "gpu1",     "gpu1:80",
                                  "node2.lab:2378",          "127.0.0.1",  "localhost"};
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
        assert_int_equal(http_guard_check_host(g, named[i], &err), 0);
    static const char *other[] = {"example.com", "gpu1.evil.example", "bad name", "node2"};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        assert_int_equal(http_guard_check_host(g, other[i], &err), -1);
    http_guard_free(g);

    assert_int_equal(http_guard_new("x.example,*", NULL, 0, &g, &err), 0);
    assert_int_equal(http_guard_check_host(g, "anything.example", &err), 0);
    assert_int_equal(http_guard_check_host(g, "not a name", &err), 0);
    http_guard_free(g);

    static const char *bad[] = {"http://x.example", "x.example:80", "bad name", "x/y", ",", " ",
                                "*.example.com"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = (gb_err)GB_ERR_INIT;
        assert_int_equal(http_guard_new(bad[i], NULL, 0, &g, &err), -1);
        assert_null(g);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
    }
}

static int check(const char *method, const char *host, const char *origin, const char *site,
                 const char *mode, const char *dest, bool tls, const http_cors *cors)
{
    gb_err err = GB_ERR_INIT;
    http_fetch_info f = {
        .method = method, .host = host, .origin = origin, .site = site, .mode = mode, .dest = dest};
    int rc = http_guard_check_origin(&f, tls, cors, &err);
    if (rc < 0)
        assert_int_equal(err.code, ERR_FORBIDDEN);
    return rc;
}

static void test_guard_origins(void **state)
{
    (void)state;
    const char *h = "127.0.0.1:2378";
    /* no Origin: not a browser's cross-site request */
    assert_int_equal(check("POST", h, NULL, NULL, NULL, NULL, false, NULL), 0);
    assert_int_equal(check("POST", NULL, NULL, NULL, NULL, NULL, false, NULL), 0);
    assert_int_equal(check("GET", h, NULL, "same-origin", NULL, NULL, false, NULL), 0);
    assert_int_equal(check("GET", h, NULL, "none", "navigate", "document", false, NULL), 0);
    /* the server's own origin */
    assert_int_equal(check("POST", h, "http://127.0.0.1:2378", NULL, NULL, NULL, false, NULL), 0);
    assert_int_equal(check("POST", "LocalHost:2378", "http://localhost:2378", "same-origin", NULL,
                           NULL, false, NULL),
                     0);
    assert_int_equal(
        check("POST", "gpu.example", "https://gpu.example:443", NULL, NULL, NULL, true, NULL), 0);
    assert_int_equal(
        check("POST", "gpu.example:80", "http://gpu.example", NULL, NULL, NULL, false, NULL), 0);
    assert_int_equal(
        check("POST", "[::1]:2378", "http://[::1]:2378", NULL, NULL, NULL, false, NULL), 0);
    /* anything else with an Origin */
    static const char *foreign[] = {"http://evil.example",
                                    "null",
                                    "http://127.0.0.1:2379",
                                    "https://127.0.0.1:2378",
                                    "http://127.0.0.1",
                                    "http://localhost:2378",
                                    "",
                                    "garbage"};
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
        assert_int_equal(check("GET", h, foreign[i], "same-origin", NULL, NULL, false, NULL), -1);
    assert_int_equal(check("POST", NULL, "http://127.0.0.1:2378", NULL, NULL, NULL, false, NULL),
                     -1);
    assert_int_equal(
        check("POST", "gpu.example", "http://gpu.example", NULL, NULL, NULL, true, NULL), -1);
    /* --cors-origins */
    http_cors *cors = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_cors_parse("https://console.example", &cors, &err), 0);
    assert_int_equal(
        check("POST", h, "https://console.example", "cross-site", "cors", "empty", false, cors), 0);
    assert_int_equal(check("POST", h, "https://console.example:444", NULL, NULL, NULL, false, cors),
                     -1);
    http_cors_free(cors);
    /* a browser's request from another site without Origin */
    assert_int_equal(check("GET", h, NULL, "cross-site", "no-cors", "image", false, NULL), -1);
    assert_int_equal(check("GET", h, NULL, "same-site", "no-cors", "script", false, NULL), -1);
    assert_int_equal(check("POST", h, NULL, "cross-site", "navigate", "document", false, NULL), -1);
    assert_int_equal(check("GET", h, NULL, "cross-site", "navigate", "iframe", false, NULL), -1);
    /* but following a link opens the page */
    assert_int_equal(check("GET", h, NULL, "cross-site", "navigate", "document", false, NULL), 0);
    assert_int_equal(check("HEAD", h, NULL, "same-site", "navigate", "document", false, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostport_parse),
        cmocka_unit_test(test_origin_parse),
        cmocka_unit_test(test_guard_hosts),
        cmocka_unit_test(test_guard_origins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
