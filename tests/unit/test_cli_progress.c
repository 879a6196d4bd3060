/*
 * test_cli_progress.c - the progress line gpubox draws while a long request
 * runs (src/cli/progress.c): the last step done and how many of all, the
 * time taken on a terminal, a final state in place of the step; and that
 * GPUBOX_PROGRESS=0 or an unreachable server start no poller at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cli/cli.h"

/* An operation record as GET /api/v1/operations/{id} answers it, the
 * first ndone of the eight steps of a new version done. */
static json_t *version_op(const char *state, size_t ndone)
{
    static const char *const names[] = {"begin",       "container-created", "old-stopped",
                                        "carry-begin", "carried",           "new-started",
                                        "old-removed", "committed"};
    json_t *steps = json_array();
    for (size_t i = 0; i < 8; i++)
        json_array_append_new(steps, json_pack("{s:s, s:b, s:n}", "name", names[i], "done",
                                               (int)(i < ndone), "time"));
    return json_pack("{s:s, s:s, s:s, s:o}", "kind", "patch", "target", "train", "state", state,
                     "steps", steps);
}

static void test_line_names_the_last_step_done(void **state)
{
    (void)state;
    char line[256];
    json_t *op = version_op("running", 4);
    cli_progress_line("scale", "train", op, 1.23, line, sizeof(line));
    assert_string_equal(line, "scale train: carry-begin (4/8) 1.2s");
    cli_progress_line("scale", "train", op, -1, line, sizeof(line));
    assert_string_equal(line, "scale train: carry-begin (4/8)");
    cli_progress_line("scale", "train", op, 125.0, line, sizeof(line));
    assert_string_equal(line, "scale train: carry-begin (4/8) 2m05s");
    json_decref(op);

    op = version_op("running", 0);
    cli_progress_line("rollback", "train", op, 0.25, line, sizeof(line));
    assert_string_equal(line, "rollback train: starting (0/8) 0.2s");
    json_decref(op);

    op = version_op("undone", 3);
    cli_progress_line("scale", "train", op, -1, line, sizeof(line));
    assert_string_equal(line, "scale train: undone (3/8)");
    json_decref(op);
}

static void test_line_fits_its_buffer(void **state)
{
    (void)state;
    char small[16];
    json_t *op = version_op("running", 5);
    cli_progress_line("scale", "a_rather_long_name", op, 3.5, small, sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, "scale a_rather_", 15);
    json_decref(op);
    /* Not an operation at all: still a line, nothing done of nothing. */
    char line[64];
    cli_progress_line("rm", "x", NULL, -1, line, sizeof(line));
    assert_string_equal(line, "rm x: starting (0/0)");
}

/* No poller when progress is turned off, or when the server cannot be
 * read: the request then reports on its own. */
static void test_no_poller_without_progress_or_server(void **state)
{
    (void)state;
    cli_ctx ctx = {.host = "http://127.0.0.1:9", .out = stdout, .err = stderr};
    ctx.curl = curl_easy_init();
    assert_non_null(ctx.curl);
    setenv("GPUBOX_PROGRESS", "off", 1);
    cli_progress_start(&ctx, "scale", "train");
    assert_null(ctx.progress);
    unsetenv("GPUBOX_PROGRESS");
    cli_progress_start(&ctx, "scale", "train");
    assert_null(ctx.progress);
    cli_progress_stop(&ctx); /* nothing to stop: harmless */
    curl_easy_cleanup(ctx.curl);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_names_the_last_step_done),
        cmocka_unit_test(test_line_fits_its_buffer),
        cmocka_unit_test(test_no_poller_without_progress_or_server),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
