/*
 * test_json_depth.c - the nesting scanner the server runs on every body:
 * brackets inside strings (escaped quotes included) do not count, the
 * limit is exact, and a hostile body is refused after limit + 1 brackets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/json_depth.h"

static size_t depth(const char *s)
{
    return http_json_depth(s, strlen(s), HTTP_JSON_DEPTH_MAX);
}

static void test_plain_documents(void **state)
{
    (void)state;
    assert_int_equal(depth(""), 0);
    assert_int_equal(depth("42"), 0);
    assert_int_equal(depth("\"text\""), 0);
    assert_int_equal(depth("{}"), 1);
    assert_int_equal(depth("{\"a\":1,\"b\":[1,2]}"), 2);
    assert_int_equal(depth("{\"binds\":[{\"src\":\"v\",\"dest\":\"/d\"}],\"env\":[]}"), 3);
    assert_int_equal(depth("[[1],[2],[3]]"), 2); /* siblings do not add up */
}

static void test_brackets_in_strings_do_not_count(void **state)
{
    (void)state;
    assert_int_equal(depth("{\"a\":\"[[[[{{{{\"}"), 1);
    assert_int_equal(depth("{\"a\\\"[[[\":\"]]]\"}"), 1); /* escaped quote in a key */
    assert_int_equal(depth("[\"\\\\\",[[\"x\"]]]"), 3);   /* "\\" ends the string */
    assert_int_equal(depth("[\"\\\\\\\"[[[[\"]"), 1);     /* \\ then \" stays inside */
    assert_int_equal(depth("[\"unterminated [[[[[[[[[["), 1);
}

/* Found by fuzz_json_depth: a parser that lets a repeated key win drops the
 * deeper first value, but the scanner still counts it (and the server
 * refuses repeated keys anyway). */
static void test_repeated_key_still_counts_the_first_value(void **state)
{
    (void)state;
    assert_int_equal(depth("{\"a\":[2,{\"b\":\"\\\"_]\"}],\"a\":{}}"), 3);
}

static void test_stray_closers_and_bytes(void **state)
{
    (void)state;
    assert_int_equal(depth("]]]]}}}[["), 2);
    const char bin[] = {'[', '\0', '[', '"', '\0', '"', ']', ']'};
    assert_int_equal(http_json_depth(bin, sizeof(bin), HTTP_JSON_DEPTH_MAX), 2);
}

static char *nested(size_t levels)
{
    char *s = malloc(2 * levels + 1);
    for (size_t i = 0; i < levels; i++) {
        s[i] = i % 2 ? '{' : '[';
        s[2 * levels - 1 - i] = i % 2 ? '}' : ']';
    }
    s[2 * levels] = '\0';
    return s;
}

static void test_limit_is_exact(void **state)
{
    (void)state;
    char *at = nested(HTTP_JSON_DEPTH_MAX);
    assert_int_equal(depth(at), HTTP_JSON_DEPTH_MAX);
    free(at);
    char *over = nested(HTTP_JSON_DEPTH_MAX + 1);
    assert_int_equal(depth(over), HTTP_JSON_DEPTH_MAX + 1);
    free(over);
}

static void test_hostile_depth_stops_early(void **state)
{
    (void)state;
    size_t n = 1000000;
    char *s = malloc(n);
    memset(s, '[', n);
    assert_int_equal(http_json_depth(s, n, HTTP_JSON_DEPTH_MAX), HTTP_JSON_DEPTH_MAX + 1);
    assert_int_equal(http_json_depth(s, n, 3), 4);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_documents),
        cmocka_unit_test(test_brackets_in_strings_do_not_count),
        cmocka_unit_test(test_stray_closers_and_bytes),
        cmocka_unit_test(test_repeated_key_still_counts_the_first_value),
        cmocka_unit_test(test_limit_is_exact),
        cmocka_unit_test(test_hostile_depth_stops_early),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
