/*
 * test_cors.c - the --cors-origins list: what is an origin, matching
 * without reflecting the client's bytes, and preflight detection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/cors.h"

static void test_parse_and_match(void **state)
{
    (void)state;
    http_cors *c = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_cors_parse(" https://Console.Example.com, http://localhost:3000,"
                                     "http://[::1]:8080 ,",
                                     &c, &err),
                     0);
    char origin[] = "https://console.example.com";
    const char *m = http_cors_match(c, origin);
    assert_non_null(m);
    assert_string_equal(m, "https://console.example.com");
    assert_ptr_not_equal(m, origin); /* the configuration's copy, never the request's */
    assert_non_null(http_cors_match(c, "HTTPS://CONSOLE.EXAMPLE.COM"));
    assert_non_null(http_cors_match(c, "http://localhost:3000"));
    assert_non_null(http_cors_match(c, "http://[::1]:8080"));
    static const char *others[] = {"https://console.example.com.evil.test",
                                   "https://evil.test",
                                   "http://console.example.com",
                                   "https://console.example.com:443",
                                   "http://localhost:3001",
                                   "null",
                                   "",
                                   "*"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        assert_null(http_cors_match(c, others[i]));
    assert_null(http_cors_match(c, NULL));
    http_cors_free(c);
    assert_null(http_cors_match(NULL, "https://console.example.com"));
}

static void test_bad_origins_are_refused(void **state)
{
    (void)state;
    static const char *bad[] = {"*",
                                "https://*.example.com",
                                "https://a.example/",
                                "https://a.example/path",
                                "ftp://a.example",
                                "a.example",
                                "null",
                                "https://",
                                "https://a.example:0",
                                "https://a.example:99999",
                                "https://a.example:",
                                "https://user@a.example",
                                "https://[zz]",
                                "https://a.example,https://b example"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        http_cors *c = NULL;
        gb_err err = GB_ERR_INIT;
        assert_int_equal(http_cors_parse(bad[i], &c, &err), -1);
        assert_null(c);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, "scheme://host[:port]"));
    }
    http_cors *c = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_cors_parse(" , ", &c, &err), -1);
    assert_non_null(strstr(err.msg, "no origin given"));
}

static void test_preflight(void **state)
{
    (void)state;
    assert_true(http_cors_is_preflight("OPTIONS", "https://a", "POST"));
    assert_false(http_cors_is_preflight("OPTIONS", "https://a", NULL));
    assert_false(http_cors_is_preflight("OPTIONS", NULL, "POST"));
    assert_false(http_cors_is_preflight("POST", "https://a", "POST"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_match),
        cmocka_unit_test(test_bad_origins_are_refused),
        cmocka_unit_test(test_preflight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
