/*
 * test_log_escape.c - one log message, one line (util/log.h): control
 * characters and bytes that are not UTF-8 are escaped, whole characters and
 * escapes only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/log.h"

static void test_escapes(void **state)
{
    (void)state;
    char out[256];
    const char in[] = "GET /x\n2026 INFO forged\r\t\x1b[2J\x7f \\n caf\xc3\xa9 \xe2\x82\xac "
                      "\xf0\x9f\x98\x80 \xc2\x9b \xff \xc3 \xed\xa0\x80 \xc0\xaf";
    size_t n = log_escape(out, sizeof(out), in, sizeof(in) - 1);
    assert_string_equal(out, "GET /x\\n2026 INFO forged\\r\\t\\x1b[2J\\x7f \\n caf\xc3\xa9 "
                             "\xe2\x82\xac \xf0\x9f\x98\x80 \\xc2\\x9b \\xff \\xc3 "
                             "\\xed\\xa0\\x80 \\xc0\\xaf");
    assert_int_equal(n, strlen(out));
    /* a NUL inside is escaped too */
    n = log_escape(out, sizeof(out), "a\0b", 3);
    assert_string_equal(out, "a\\x00b");
}

static void test_cut_whole(void **state)
{
    (void)state;
    char out[8];
    /* "ab" + "\n" escape would need 4 bytes + NUL at 5: fits; the next doesn't */
    size_t n = log_escape(out, 6, "ab\ncd", 5);
    assert_string_equal(out, "ab\\nc");
    assert_int_equal(n, 5);
    n = log_escape(out, 4, "ab\ncd", 5);
    assert_string_equal(out, "ab");
    n = log_escape(out, 4, "a\xe2\x82\xac", 4);
    assert_string_equal(out, "a");
    n = log_escape(out, 5, "a\x01", 2);
    assert_string_equal(out, "a");
    n = log_escape(out, 1, "abc", 3);
    assert_int_equal(n, 0);
    assert_string_equal(out, "");
    assert_int_equal(log_escape(out, 0, "abc", 3), 0);
}

/* log_msg writes one line whatever the message: read stderr back through
 * a pipe. */
static void test_log_msg_one_line(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int saved = dup(STDERR_FILENO);
    dup2(fds[1], STDERR_FILENO);
    log_info("GET %s 404", "/api/v1/replicaSet/x\n2026-01-01T00:00:00.000Z INFO  audit: forged");
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fds[1]);
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "replicaSet/x\\n2026-01-01"));
    assert_ptr_equal(strchr(buf, '\n'), buf + n - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_cut_whole),
        cmocka_unit_test(test_log_msg_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
