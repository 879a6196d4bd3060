/*
 * test_prom.c - the Prometheus text writer: counters and histograms by
 * label values, cumulative buckets, escaping, and the series cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/prom.h"

static char *render(prom_family *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    prom_family_write(f, out);
    fclose(out);
    return buf;
}

static void test_counter_by_labels(void **state)
{
    (void)state;
    static const char *const labels[] = {"route", "status", NULL};
    prom_family *f = prom_counter_new("x_requests_total", "Requests", labels);
    const char *a[] = {"/a/{name}", "200"}, *b[] = {"/a/{name}", "404"};
    prom_counter_inc(f, a);
    prom_counter_inc(f, a);
    prom_counter_inc(f, b);
    char *text = render(f);
    assert_non_null(strstr(text, "# HELP x_requests_total Requests\n# TYPE x_requests_total "
                                 "counter\n"));
    assert_non_null(strstr(text, "x_requests_total{route=\"/a/{name}\",status=\"200\"} 2\n"));
    assert_non_null(strstr(text, "x_requests_total{route=\"/a/{name}\",status=\"404\"} 1\n"));
    free(text);
    prom_family_free(f);
}

static void test_histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    static const char *const labels[] = {"kind", NULL};
    static const double buckets[] = {0.1, 1};
    prom_family *f = prom_histogram_new("x_seconds", "Time", labels, buckets, 2);
    const char *k[] = {"stop"};
    prom_histogram_observe(f, k, 0.05);
    prom_histogram_observe(f, k, 0.5);
    prom_histogram_observe(f, k, 5);
    char *text = render(f);
    assert_non_null(strstr(text, "# TYPE x_seconds histogram\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{kind=\"stop\",le=\"0.1\"} 1\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{kind=\"stop\",le=\"1\"} 2\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{kind=\"stop\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(text, "x_seconds_sum{kind=\"stop\"} 5.55\n"));
    assert_non_null(strstr(text, "x_seconds_count{kind=\"stop\"} 3\n"));
    free(text);
    prom_family_free(f);
}

static void test_label_values_are_escaped(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    static const char *const labels[] = {"model", NULL};
    const char *values[] = {"A \"100\"\\x\nB"};
    prom_write_sample(out, "g", labels, values, 1.5);
    fclose(out);
    assert_string_equal(buf, "g{model=\"A \\\"100\\\"\\\\x\\nB\"} 1.5\n");
    free(buf);
}

static void test_series_are_capped(void **state)
{
    (void)state;
    static const char *const labels[] = {"v", NULL};
    prom_family *f = prom_counter_new("c_total", "C", labels);
    char value[32];
    const char *values[] = {value};
    for (int i = 0; i < PROM_MAX_SERIES + 50; i++) {
        snprintf(value, sizeof(value), "%d", i);
        prom_counter_inc(f, values);
    }
    char *text = render(f);
    size_t lines = 0;
    for (const char *p = text; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, PROM_MAX_SERIES + 2);
    free(text);
    prom_family_free(f);
}

/* A fleet node's /metrics: every sample carries node="..." first, with
 * or without labels of its own; comments and blank lines are kept. */
static void test_add_label_tags_every_sample(void **state)
{
    (void)state;
    static const char text[] = "# HELP a_total A\n# TYPE a_total counter\na_total 3\n"
                               "b{x=\"1\"} 2\nc{} 1\n\nd 4";
    size_t len = 0;
    char *out = prom_add_label(text, sizeof(text) - 1, "node", "n\"1", &len);
    assert_int_equal(len, strlen(out));
    assert_string_equal(out,
                        "# HELP a_total A\n# TYPE a_total counter\na_total{node=\"n\\\"1\"} 3\n"
                        "b{node=\"n\\\"1\",x=\"1\"} 2\nc{node=\"n\\\"1\"} 1\n\n"
                        "d{node=\"n\\\"1\"} 4");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_by_labels),
        cmocka_unit_test(test_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_label_values_are_escaped),
        cmocka_unit_test(test_series_are_capped),
        cmocka_unit_test(test_add_label_tags_every_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
