/*
 * test_time.c - util/time: the monotonic clock moves forward, and ISO 8601
 * UTC timestamps print and parse back, refusing anything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "util/time.h"

static void test_mono_moves_forward(void **state)
{
    (void)state;
    int64_t a = time_mono_ns();
    struct timespec pause = {.tv_nsec = 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int64_t b = time_mono_ns();
    assert_true(b - a >= 2 * 1000 * 1000);
    assert_true(time_since_s(a) >= 0.002);
    assert_true(time_mono_ms() >= b / 1000000);
}

static void test_iso_format_and_parse(void **state)
{
    (void)state;
    char buf[TIME_ISO_MAX];
    assert_int_equal(time_iso_format((time_t)1795310908, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-11-22T01:28:28Z");
    assert_int_equal(time_iso_parse(buf), 1795310908);
    assert_int_equal(time_iso_format(0, buf, 10), -1); /* does not fit */
    assert_string_equal(buf, "");

    time_iso_now(buf, sizeof(buf));
    assert_int_equal(strlen(buf), TIME_ISO_MAX - 1);
    assert_true(time_iso_parse(buf) > 0);

    assert_int_equal(time_iso_parse(NULL), 0);
    assert_int_equal(time_iso_parse(""), 0);
    assert_int_equal(time_iso_parse("2026-11-22T01:28:28"), 0);   /* no Z */
    assert_int_equal(time_iso_parse("2026-11-22T01:28:28Zx"), 0); /* more after it */
    assert_int_equal(time_iso_parse("yesterday"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mono_moves_forward),
        cmocka_unit_test(test_iso_format_and_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
