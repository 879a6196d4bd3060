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

/* Docker's timestamps and what people type: a fraction and an offset. */
static void test_rfc3339_parse(void **state)
{
    (void)state;
    int64_t t = 0;
    assert_int_equal(time_rfc3339_parse("2023-11-14T22:13:20Z", &t), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(time_rfc3339_parse("2023-11-14T22:13:20.123456789Z", &t), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(time_rfc3339_parse("2023-11-15T00:13:20+02:00", &t), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(time_rfc3339_parse("2023-11-14T20:43:20.5-01:30", &t), 0);
    assert_int_equal(t, 1700000000);
    const char *bad[] = {"",
                         "2023-11-14",
                         "2023-11-14 22:13:20Z",
                         "2023-11-14T22:13:20",
                         "2023-11-14T22:13:20.Z",
                         "2023-11-14T22:13:20+0200",
                         "2023-13-14T22:13:20Z",
                         "2023-11-14T22:13:20Zjunk"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(time_rfc3339_parse(bad[i], &t), -1);
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
        cmocka_unit_test(test_rfc3339_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
