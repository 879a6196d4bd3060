/*
 * test_cli_table.c - gpubox's tables for people (src/cli/table.c): columns
 * aligned two spaces apart, "-" for a cell without a value, no trailing
 * spaces; the optional NODE column, printed only when some row has a node
 * (a fleet), so a single gpuboxd's tables stay byte for byte what they
 * were; and the HEARTBEAT age of `gpubox nodes` (cli_age).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "util/time.h"

/* The table printed, as a malloc'd string. */
static char *table_text(cli_table *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_table_print(t, f);
    fclose(f);
    return buf;
}

/* ps's columns: NODE second and optional, rows given as {name, node}. */
static char *ps_like(const char *const (*rows)[2], size_t n)
{
    static const char *const headers[] = {"NAME", "NODE", "STATE", NULL};
    cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");
    for (size_t i = 0; i < n; i++) {
        const char *row[] = {rows[i][0], rows[i][1], "running"};
        cli_table_add(t, row);
    }
    char *text = table_text(t);
    cli_table_free(t);
    return text;
}

static void test_aligned_with_dash_for_no_value(void **state)
{
    (void)state;
    static const char *const headers[] = {"NAME", "PORTS", "CREATED", NULL};
    cli_table *t = cli_table_new(headers);
    const char *r1[] = {"train", NULL, "2026-11-24T10:00:00Z"};
    const char *r2[] = {"a", "40001->22/tcp", NULL};
    cli_table_add(t, r1);
    cli_table_add(t, r2);
    char *text = table_text(t);
    assert_string_equal(text, "NAME   PORTS          CREATED\n"
                              "train  -              2026-11-24T10:00:00Z\n"
                              "a      40001->22/tcp  -\n");
    free(text);
    cli_table_free(t);
}

static void test_node_column_only_in_a_fleet(void **state)
{
    (void)state;
    /* A single gpuboxd: no item carries node; the table is the one without
     * the column, byte for byte. */
    static const char *const single[][2] = {{"train", NULL}, {"eval", NULL}};
    char *text = ps_like(single, 2);
    assert_string_equal(text, "NAME   STATE\n"
                              "train  running\n"
                              "eval   running\n");
    free(text);
    /* No rows at all: the header alone, without NODE. */
    text = ps_like(single, 0);
    assert_string_equal(text, "NAME  STATE\n");
    free(text);
    /* A fleet: one item with a node is enough; one without shows "-". */
    static const char *const fleet[][2] = {{"train", "gpu-node-a"}, {"eval", NULL}};
    text = ps_like(fleet, 2);
    assert_string_equal(text, "NAME   NODE        STATE\n"
                              "train  gpu-node-a  running\n"
                              "eval   -           running\n");
    free(text);
}

static void test_optional_last_column_leaves_no_trailing_space(void **state)
{
    (void)state;
    static const char *const headers[] = {"NAME", "NODE", NULL};
    cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");
    const char *row[] = {"a", NULL};
    cli_table_add(t, row);
    char *text = table_text(t);
    assert_string_equal(text, "NAME\na\n");
    free(text);
    cli_table_free(t);
}

static void test_heartbeat_age(void **state)
{
    (void)state;
    char buf[64];
    time_t now = time_iso_parse("2026-11-24T10:00:00Z");
    assert_true(now > 0);
    static const char *const cases[][2] = {
        {"2026-11-24T09:59:58Z", "2s ago"}, {"2026-11-24T10:00:00Z", "0s ago"},
        {"2026-11-24T09:59:00Z", "1m ago"}, {"2026-11-24T09:00:01Z", "59m ago"},
        {"2026-11-24T07:00:00Z", "3h ago"}, {"2026-11-21T10:00:00Z", "3d ago"},
        {"2026-11-24T10:00:05Z", "0s ago"}, /* ahead of this clock */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cli_age(cases[i][0], now, buf, sizeof(buf));
        assert_string_equal(buf, cases[i][1]);
    }
    cli_age(NULL, now, buf, sizeof(buf)); /* never heard from: null */
    assert_string_equal(buf, "-");
    cli_age("yesterday", now, buf, sizeof(buf)); /* another form: shown as it is */
    assert_string_equal(buf, "yesterday");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_with_dash_for_no_value),
        cmocka_unit_test(test_node_column_only_in_a_fleet),
        cmocka_unit_test(test_optional_last_column_leaves_no_trailing_space),
        cmocka_unit_test(test_heartbeat_age),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
