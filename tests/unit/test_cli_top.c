/*
 * test_cli_top.c - the frames of `gpubox top` (cli_top_render, src/cli/
 * cmd_top.c) from answers of GET /api/v1/resources/gpus: the header (time,
 * cards, unhealthy, memory used of all, foreign memory), the cards table
 * (NODE only in a fleet; HEALTH "ok", "XID 79", "lost") and the instances
 * table (one row per tenant and card, most memory used first, FLAG OVER
 * only when some instance uses more than its share); `usage: null`
 * (sampling off) showing "-" and saying so; the escape codes only when
 * asked. Also the tables of `gpubox events` and the lines `gpubox inspect`
 * adds for the automatic stops and the usage of a set's cards.
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

#define NOW_ISO "2026-11-24T10:00:00Z"

/* The frame for the answer's data (JSON text), as a malloc'd string. */
static char *frame(const char *data_json, bool clear)
{
    json_error_t jerr;
    json_t *data = json_loads(data_json, 0, &jerr);
    assert_non_null(data);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_top_render(data, time_iso_parse(NOW_ISO), clear, f);
    fclose(f);
    json_decref(data);
    return buf;
}

/* What a printer (cli_print_fn) prints for data_json, malloc'd. */
static char *printed(cli_print_fn *print, const char *data_json)
{
    json_error_t jerr;
    json_t *data = json_loads(data_json, 0, &jerr);
    assert_non_null(data);
    char *buf = NULL;
    size_t len = 0;
    cli_ctx ctx = {.out = open_memstream(&buf, &len), .err = stderr};
    assert_non_null(ctx.out);
    print(&ctx, data, NULL);
    fclose(ctx.out);
    json_decref(data);
    return buf;
}

static void test_sampled_frame(void **state)
{
    (void)state;
    char *text =
        frame("{\"devices\":["
              "{\"uuid\":\"GPU-a\",\"index\":0,\"model\":\"Tesla T4\",\"memoryMiB\":16384,"
              "\"healthy\":true,\"usage\":{\"memoryUsedMiB\":5120,\"utilization\":37,"
              "\"foreignMemoryMiB\":1024,\"processes\":3,\"sampledAt\":\"" NOW_ISO "\"},"
              "\"allocations\":[{\"name\":\"small\",\"memoryMiB\":4096,\"memoryUsedMiB\":1024,"
              "\"utilization\":5},{\"name\":\"big\",\"memoryMiB\":8192,\"memoryUsedMiB\":3072,"
              "\"utilization\":30}]},"
              "{\"uuid\":\"GPU-b\",\"index\":1,\"model\":\"Tesla T4\",\"memoryMiB\":16384,"
              "\"healthy\":true,\"usage\":{\"memoryUsedMiB\":0,\"utilization\":0,"
              "\"foreignMemoryMiB\":0,\"processes\":0,\"sampledAt\":\"" NOW_ISO "\"},"
              "\"allocations\":[]}]}",
              false);
    assert_string_equal(text, "gpubox top  " NOW_ISO
                              "  2 cards, 0 unhealthy  memory used 5GB/32GB  foreign "
                              "1GB\n"
                              "\n"
                              "INDEX  MODEL     MEM USED/TOTAL  UTIL %  FOREIGN  TENANTS  HEALTH\n"
                              "0      Tesla T4  5GB/16GB        37      1GB      2        ok\n"
                              "1      Tesla T4  0B/16GB         0       0B       0        ok\n"
                              "\n"
                              "NAME   CARD  MEM USED/SHARE  UTIL %\n"
                              "big    0     3GB/8GB         30\n"
                              "small  0     1GB/4GB         5\n");
    free(text);
}

static void test_usage_off_shows_dashes(void **state)
{
    (void)state;
    char *text = frame("{\"devices\":["
                       "{\"uuid\":\"GPU-a\",\"index\":0,\"model\":\"Tesla T4\",\"memoryMiB\":16384,"
                       "\"healthy\":true,\"usage\":null,"
                       "\"allocations\":[{\"name\":\"train\",\"memoryMiB\":16384}]}]}",
                       false);
    assert_string_equal(text, "gpubox top  " NOW_ISO
                              "  1 card, 0 unhealthy  memory used -/16GB  foreign -  "
                              "(usage sampling is off)\n"
                              "\n"
                              "INDEX  MODEL     MEM USED/TOTAL  UTIL %  FOREIGN  TENANTS  HEALTH\n"
                              "0      Tesla T4  -/16GB          -       -        1        ok\n"
                              "\n"
                              "NAME   CARD  MEM USED/SHARE  UTIL %\n"
                              "train  0     -/16GB          -\n");
    free(text);
    /* An answer without usage at all (an older gpuboxd) reads the same. */
    text = frame("{\"devices\":[{\"index\":0,\"model\":\"T4\",\"memoryMiB\":1024,"
                 "\"healthy\":true,\"tenants\":[]}]}",
                 false);
    assert_non_null(strstr(text, "(usage sampling is off)\n"));
    assert_non_null(strstr(text, "(no instances on the cards)\n"));
    free(text);
    /* No card at all: nothing is off. */
    text = frame("{\"devices\":[]}", false);
    assert_string_equal(text, "gpubox top  " NOW_ISO "  0 cards, 0 unhealthy  memory used "
                              "-/0B  foreign -\n\n(no GPUs)\n\n(no instances on the cards)\n");
    free(text);
}

static void test_unhealthy_cards(void **state)
{
    (void)state;
    char *text = frame(
        "{\"devices\":["
        "{\"index\":0,\"model\":\"A100\",\"memoryMiB\":81920,\"healthy\":false,"
        "\"unhealthy\":{\"reason\":\"xid\",\"xid\":79,\"since\":\"" NOW_ISO "\","
        "\"detail\":\"XID 79 (GPU has fallen off the bus)\"},"
        "\"usage\":{\"memoryUsedMiB\":0,\"utilization\":-1,\"foreignMemoryMiB\":0},"
        "\"allocations\":[]},"
        "{\"index\":1,\"model\":\"A100\",\"memoryMiB\":81920,\"healthy\":false,"
        "\"unhealthy\":{\"reason\":\"lost\",\"since\":\"" NOW_ISO "\"},\"usage\":null,"
        "\"allocations\":[]},"
        "{\"index\":2,\"model\":\"A100\",\"memoryMiB\":81920,\"healthy\":false,\"usage\":null,"
        "\"allocations\":[]},"
        "{\"index\":3,\"model\":\"A100\",\"memoryMiB\":81920,\"healthy\":true,"
        "\"usage\":{\"memoryUsedMiB\":1024,\"utilization\":100,\"foreignMemoryMiB\":512},"
        "\"allocations\":[]}]}",
        false);
    assert_string_equal(text, "gpubox top  " NOW_ISO
                              "  4 cards, 3 unhealthy  memory used 1GB/320GB  foreign "
                              "512MB\n"
                              "\n"
                              "INDEX  MODEL  MEM USED/TOTAL  UTIL %  FOREIGN  TENANTS  HEALTH\n"
                              "0      A100   0B/80GB         -       0B       0        XID 79\n"
                              "1      A100   -/80GB          -       -        0        lost\n"
                              "2      A100   -/80GB          -       -        0        unhealthy\n"
                              "3      A100   1GB/80GB        100     512MB    0        ok\n"
                              "\n"
                              "(no instances on the cards)\n");
    free(text);
    json_t *d = json_pack("{s:b}", "healthy", true);
    char buf[32];
    cli_gpu_health(d, buf, sizeof(buf));
    assert_string_equal(buf, "ok");
    assert_false(cli_gpu_unhealthy(d));
    json_decref(d);
}

static void test_over_share_is_flagged_and_sorted(void **state)
{
    (void)state;
    char *text =
        frame("{\"devices\":["
              "{\"index\":0,\"model\":\"T4\",\"memoryMiB\":16384,\"healthy\":true,"
              "\"usage\":{\"memoryUsedMiB\":12288,\"utilization\":90,\"foreignMemoryMiB\":0},"
              "\"allocations\":[{\"name\":\"greedy\",\"memoryMiB\":4096,\"memoryUsedMiB\":6144,"
              "\"utilization\":80},{\"name\":\"calm\",\"memoryMiB\":8192,\"memoryUsedMiB\":6144,"
              "\"utilization\":10}]},"
              "{\"index\":1,\"model\":\"T4\",\"memoryMiB\":16384,\"healthy\":true,"
              "\"usage\":{\"memoryUsedMiB\":9000,\"utilization\":50,\"foreignMemoryMiB\":0},"
              "\"allocations\":[{\"name\":\"greedy\",\"memoryMiB\":4096,\"memoryUsedMiB\":0,"
              "\"utilization\":0},{\"name\":\"whole\",\"memoryMiB\":16384,\"memoryUsedMiB\":9000,"
              "\"utilization\":-1}]}]}",
              false);
    const char *instances = strstr(text, "NAME");
    assert_non_null(instances);
    assert_string_equal(instances, "NAME    CARD  MEM USED/SHARE  UTIL %  FLAG\n"
                                   "whole   1     8.79GB/16GB     -       -\n"
                                   "calm    0     6GB/8GB         10      -\n"
                                   "greedy  0     6GB/4GB         80      OVER\n"
                                   "greedy  1     0B/4GB          0       -\n");
    free(text);
}

static void test_fleet_nodes(void **state)
{
    (void)state;
    char *text =
        frame("{\"devices\":["
              "{\"node\":\"a\",\"index\":0,\"model\":\"H100\",\"memoryMiB\":81920,"
              "\"healthy\":true,\"usage\":{\"memoryUsedMiB\":2048,\"utilization\":12,"
              "\"foreignMemoryMiB\":0},\"allocations\":[{\"name\":\"x\",\"memoryMiB\":81920,"
              "\"memoryUsedMiB\":2048,\"utilization\":12}]},"
              "{\"node\":\"b\",\"index\":0,\"model\":\"H100\",\"memoryMiB\":81920,"
              "\"healthy\":true,\"usage\":{\"memoryUsedMiB\":4096,\"utilization\":40,"
              "\"foreignMemoryMiB\":0},\"allocations\":[{\"name\":\"y\",\"memoryMiB\":81920,"
              "\"memoryUsedMiB\":4096,\"utilization\":40}]}]}",
              false);
    assert_string_equal(
        text, "gpubox top  " NOW_ISO "  2 cards, 0 unhealthy  memory used 6GB/160GB  foreign "
              "0B\n"
              "\n"
              "NODE  INDEX  MODEL  MEM USED/TOTAL  UTIL %  FOREIGN  TENANTS  HEALTH\n"
              "a     0      H100   2GB/80GB        12      0B       1        ok\n"
              "b     0      H100   4GB/80GB        40      0B       1        ok\n"
              "\n"
              "NAME  NODE  CARD  MEM USED/SHARE  UTIL %\n"
              "y     b     0     4GB/80GB        40\n"
              "x     a     0     2GB/80GB        12\n");
    free(text);
}

static void test_clear_only_when_asked(void **state)
{
    (void)state;
    const char *data = "{\"devices\":[]}";
    char *plain = frame(data, false), *cleared = frame(data, true);
    assert_null(strchr(plain, '\033'));
    assert_memory_equal(cleared, "\033[H\033[2J", 7);
    assert_string_equal(cleared + 7, plain);
    free(plain);
    free(cleared);
}

static void test_events_table(void **state)
{
    (void)state;
    char *text = printed(
        cli_events_print,
        "{\"events\":["
        "{\"time\":\"2026-11-24T10:05:00Z\",\"kind\":\"gpu.unhealthy\",\"gpu\":\"GPU-a\","
        "\"reason\":\"xid\",\"detail\":\"XID 79 (GPU has fallen off the bus)\",\"by\":\"gpubox\"},"
        "{\"time\":\"2026-11-24T10:00:00Z\",\"kind\":\"autostop\",\"replicaSet\":\"train\","
        "\"reason\":\"idle\",\"detail\":\"idle for 30m\",\"by\":\"gpubox\"}]}");
    assert_string_equal(text,
                        "TIME                  KIND           SET/GPU  REASON  DETAIL\n"
                        "2026-11-24T10:05:00Z  gpu.unhealthy  GPU-a    xid     XID 79 (GPU has "
                        "fallen off the bus)\n"
                        "2026-11-24T10:00:00Z  autostop       train    idle    idle for 30m\n");
    free(text);
    text = printed(cli_events_print, "{\"events\":[]}");
    assert_string_equal(text, "TIME  KIND  SET/GPU  REASON  DETAIL\n");
    free(text);
}

static void test_inspect_auto_stop_and_usage(void **state)
{
    (void)state;
    /* Without the new fields: the lines it always printed, nothing more. */
    char *before =
        printed(cli_inspect_print, "{\"info\":{\"name\":\"t\",\"state\":\"running\",\"spec\":{}}}");
    assert_null(strstr(before, "Auto stop:"));
    assert_null(strstr(before, "Usage:"));
    char *text =
        printed(cli_inspect_print,
                "{\"info\":{\"name\":\"t\",\"state\":\"running\",\"spec\":{\"idleStop\":\"30m\","
                "\"maxDuration\":\"8h\"},\"runningSince\":\"2026-11-24T09:00:00Z\","
                "\"stopAt\":\"2026-11-24T17:00:00Z\"},"
                "\"usage\":{\"sampledAt\":\"" NOW_ISO "\",\"idleSince\":null,\"cards\":["
                "{\"uuid\":\"GPU-a\",\"index\":0,\"memoryUsedMiB\":9216,\"utilization\":37,"
                "\"shareMiB\":8192,\"overShare\":true,\"healthy\":true}]}}");
    assert_memory_equal(text, before, strlen(before));
    assert_string_equal(text + strlen(before),
                        "Auto stop:  idle 30m; max 8h, at 2026-11-24T17:00:00Z\n"
                        "Running:    since 2026-11-24T09:00:00Z\n"
                        "Usage:      sampled " NOW_ISO "\n"
                        "  card 0 GPU-a: 9GB/8GB used, utilization 37%, OVER its share\n");
    free(text);
    text = printed(cli_inspect_print,
                   "{\"info\":{\"name\":\"t\",\"state\":\"stopped\",\"spec\":{\"idleStop\":\"\"},"
                   "\"stopped\":{\"reason\":\"idle\",\"at\":\"" NOW_ISO "\","
                   "\"detail\":\"idle for 30m\"}},\"usage\":null}");
    assert_string_equal(text + strlen(before), "Stopped:    idle at " NOW_ISO ": idle for 30m\n");
    free(text);
    free(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampled_frame),
        cmocka_unit_test(test_usage_off_shows_dashes),
        cmocka_unit_test(test_unhealthy_cards),
        cmocka_unit_test(test_over_share_is_flagged_and_sorted),
        cmocka_unit_test(test_fleet_nodes),
        cmocka_unit_test(test_clear_only_when_asked),
        cmocka_unit_test(test_events_table),
        cmocka_unit_test(test_inspect_auto_stop_and_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
