/*
 * test_cli_table.c - gpubox's tables for people (src/cli/table.c): columns
 * aligned two spaces apart, "-" for a cell without a value, no trailing
 * spaces; the optional NODE column, printed only when some row has a node
 * (a fleet), so a single gpuboxd's tables stay byte for byte what they
 * were.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_with_dash_for_no_value),
        cmocka_unit_test(test_node_column_only_in_a_fleet),
        cmocka_unit_test(test_optional_last_column_leaves_no_trailing_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
