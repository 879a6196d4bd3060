/*
 * test_cli_table.c - gpubox's tables for people (src/cli/table.c): columns
 * aligned two spaces apart, "-" for a cell without a value, no trailing
 * spaces; the optional NODE column, printed only when some row has a node
 * (a fleet), so a single gpuboxd's tables stay byte for byte what they
 * were; the HEARTBEAT age of `gpubox nodes` (cli_age); and the OWNER
 * column of ps and volume ls, shown only when the items carry two owners or
 * more (cli_owners_differ), so an answer without owners, or with one owner
 * only, prints the table it printed before users existed.
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

/* What a printer (cli_ps_print, cli_volume_ls_print) prints for the
 * answer data (JSON text) after the words of argv (its subcommand). */
static char *printed(cli_print_fn *print, const char *data_text, int argc, char **argv)
{
    cli_args a;
    char msg[256];
    assert_int_equal(cli_parse(argc, argv, &a, msg, sizeof(msg)), 0);
    json_error_t jerr;
    json_t *data = json_loads(data_text, 0, &jerr);
    if (!data)
        fail_msg("bad test JSON: %s", jerr.text);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_ctx ctx = {.out = f, .err = stderr};
    print(&ctx, data, &a);
    fclose(f);
    json_decref(data);
    cli_args_free(&a);
    return buf;
}

static char *ps_printed(const char *sets)
{
    char *text = NULL;
    assert_true(asprintf(&text, "{\"replicaSets\": [%s]}", sets) > 0);
    char *out = printed(cli_ps_print, text, 2, (char *[]){"gpubox", "ps", NULL});
    free(text);
    return out;
}

#define SET(name, owner_field)                                                                     \
    "{\"name\": \"" name "\", \"version\": 1, \"state\": \"running\", \"status\": \"running\", "   \
    "\"image\": \"busybox\", \"gpus\": [\"GPU-1\"], \"ports\": [], "                               \
    "\"createTime\": \"2026-11-24T10:00:00Z\"" owner_field "}"

static void test_owner_rule(void **state)
{
    (void)state;
    json_t *list = json_loads("[{\"owner\": \"a\"}, {}, {\"owner\": \"a\"}]", 0, NULL);
    assert_false(cli_owners_differ(list)); /* one owner, and one item without */
    json_array_append_new(list, json_pack("{s:s}", "owner", "b"));
    assert_true(cli_owners_differ(list));
    assert_string_equal(cli_owner_cell(json_array_get(list, 3), true), "b");
    assert_null(cli_owner_cell(json_array_get(list, 3), false));
    assert_null(cli_owner_cell(json_array_get(list, 1), true)); /* none: "-" */
    json_decref(list);
    list = json_array();
    assert_false(cli_owners_differ(list));
    assert_false(cli_owners_differ(NULL));
    json_decref(list);
}

/* Issue 27: IMAGE, one STATE column with Docker's status only when it
 * disagrees, and BUSY only when some set carries usage. */
static void test_ps_state_once_and_busy(void **state)
{
    (void)state;
    char *out = ps_printed(
        "{\"name\": \"a\", \"version\": 2, \"state\": \"running\", \"status\": \"exited\", "
        "\"image\": \"ubuntu:22.04\", \"gpus\": [], \"ports\": [], \"createTime\": \"T\", "
        "\"usage\": {\"utilization\": 37, \"idleSince\": null}},"
        "{\"name\": \"b\", \"version\": 1, \"state\": \"stopped\", \"status\": \"missing\", "
        "\"gpus\": [], \"ports\": [], \"createTime\": \"T\", \"usage\": null},"
        "{\"name\": \"c\", \"version\": 1, \"state\": \"paused\", \"status\": \"exited\", "
        "\"image\": \"x\", \"gpus\": [\"G\"], \"ports\": [], \"createTime\": \"T\", "
        "\"usage\": {\"utilization\": 0, \"idleSince\": \"2026-11-24T10:00:00Z\"}}");
    assert_string_equal(out,
                        "NAME  VERSION  IMAGE         STATE                       GPUS  BUSY     "
                        "PORTS  CREATED\n"
                        "a     2        ubuntu:22.04  running (container exited)  0     37%      "
                        "-      T\n"
                        "b     1        -             stopped                     0     -        "
                        "-      T\n"
                        "c     1        x             paused                      1     0% idle  "
                        "-      T\n");
    free(out);
}

static void test_owner_column_only_with_two_owners(void **state)
{
    (void)state;
    static const char *const before = "NAME   VERSION  IMAGE    STATE    GPUS  PORTS  CREATED\n"
                                      "train  1        busybox  running  1     -      "
                                      "2026-11-24T10:00:00Z\n"
                                      "eval   1        busybox  running  1     -      "
                                      "2026-11-24T10:00:00Z\n";
    /* No owner at all (a server from before users): the old table. */
    char *out = ps_printed(SET("train", "") "," SET("eval", ""));
    assert_string_equal(out, before);
    free(out);
    /* One owner for all (a user's own list): the same bytes. */
    out = ps_printed(
        SET("train", ", \"owner\": \"alice\"") "," SET("eval", ", \"owner\": \"alice\""));
    assert_string_equal(out, before);
    free(out);
    /* Two owners: OWNER after NAME (and after NODE in a fleet). */
    out =
        ps_printed(SET("train", ", \"owner\": \"alice\"") "," SET("eval", ", \"owner\": \"bob\""));
    assert_string_equal(out, "NAME   OWNER  VERSION  IMAGE    STATE    GPUS  PORTS  CREATED\n"
                             "train  alice  1        busybox  running  1     -      "
                             "2026-11-24T10:00:00Z\n"
                             "eval   bob    1        busybox  running  1     -      "
                             "2026-11-24T10:00:00Z\n");
    free(out);
    out = ps_printed(SET("train", ", \"owner\": \"alice\", \"node\": \"a\"") "," SET(
        "eval", ", \"owner\": \"bob\"") "," SET("old", ""));
    assert_string_equal(out, "NAME   NODE  OWNER  VERSION  IMAGE    STATE    GPUS  PORTS  CREATED\n"
                             "train  a     alice  1        busybox  running  1     -      "
                             "2026-11-24T10:00:00Z\n"
                             "eval   -     bob    1        busybox  running  1     -      "
                             "2026-11-24T10:00:00Z\n"
                             "old    -     -      1        busybox  running  1     -      "
                             "2026-11-24T10:00:00Z\n");
    free(out);
    /* -q: the names only, whoever owns them. */
    char *text = NULL;
    assert_true(asprintf(&text, "{\"replicaSets\": [%s]}",
                         SET("train", ", \"owner\": \"alice\"") "," SET(
                             "eval", ", \"owner\": \"bob\"")) > 0);
    out = printed(cli_ps_print, text, 3, (char *[]){"gpubox", "ps", "-q", NULL});
    assert_string_equal(out, "train\neval\n");
    free(out);
    free(text);
}

#define VOL(name, owner_field)                                                                     \
    "{\"name\": \"" name                                                                           \
    "\", \"sizeText\": \"20GB\", \"backend\": \"plain\", \"state\": \"ready\", "                   \
    "\"version\": 1, \"createTime\": \"2026-11-24T10:00:00Z\"" owner_field "}"

static void test_volume_owner_column(void **state)
{
    (void)state;
    char **argv = (char *[]){"gpubox", "volume", "ls", NULL};
    static const char *const before = "NAME  SIZE  BACKEND  STATE  VERSION  CREATED\n"
                                      "data  20GB  plain    ready  1        2026-11-24T10:00:00Z\n"
                                      "logs  20GB  plain    ready  1        2026-11-24T10:00:00Z\n";
    char *out = printed(cli_volume_ls_print,
                        "{\"volumes\": [" VOL("data", "") "," VOL("logs", "") "]}", 3, argv);
    assert_string_equal(out, before);
    free(out);
    out = printed(cli_volume_ls_print,
                  "{\"volumes\": [" VOL("data", ", \"owner\": \"bob\"") "," VOL(
                      "logs", ", \"owner\": \"bob\"") "]}",
                  3, argv);
    assert_string_equal(out, before);
    free(out);
    out = printed(cli_volume_ls_print,
                  "{\"volumes\": [" VOL("data", ", \"owner\": \"bob\"") "," VOL(
                      "logs", ", \"owner\": \"carol\"") "]}",
                  3, argv);
    assert_string_equal(out, "NAME  OWNER  SIZE  BACKEND  STATE  VERSION  CREATED\n"
                             "data  bob    20GB  plain    ready  1        2026-11-24T10:00:00Z\n"
                             "logs  carol  20GB  plain    ready  1        2026-11-24T10:00:00Z\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_with_dash_for_no_value),
        cmocka_unit_test(test_node_column_only_in_a_fleet),
        cmocka_unit_test(test_optional_last_column_leaves_no_trailing_space),
        cmocka_unit_test(test_heartbeat_age),
        cmocka_unit_test(test_owner_rule),
        cmocka_unit_test(test_owner_column_only_with_two_owners),
        cmocka_unit_test(test_ps_state_once_and_busy),
        cmocka_unit_test(test_volume_owner_column),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
