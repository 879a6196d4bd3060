/*
 * cmd_queue.c - the queue from the command line (docs/queue.md):
 * `gpubox queue` lists it, and `gpubox run --queue` waits in it, showing
 * the request's position and why it waits until it runs (--detach: return
 * at once, the set queued).
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

#define RS_BASE "/api/v1/replicaSet"
#define QUEUE_POLL_MS 1000

/* "2 x 8192 MiB" / "1 card" / "-": what an entry asks. */
static void queue_asks_text(const json_t *asks, char *buf, size_t size)
{
    json_int_t n = json_integer_value(json_object_get(asks, "gpuCount"));
    json_int_t mib = json_integer_value(json_object_get(asks, "gpuMemoryMiB"));
    buf[0] = '\0';
    if (!asks)
        snprintf(buf, size, "-");
    else if (mib)
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT " x %" JSON_INTEGER_FORMAT " MiB", n, mib);
    else if (json_is_true(json_object_get(asks, "gpuShared")))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT " x time-slice", n);
    else
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT " card%s", n, n == 1 ? "" : "s");
}

static void queue_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    static const char *const headers[] = {"POS",  "NAME",   "OWNER", "PRIORITY",
                                          "ASKS", "WAITED", "WHY",   NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(data, "queue"), i, e)
    {
        char pos[32], prio[16], asks[64], waited[32];
        snprintf(pos, sizeof(pos), "%" JSON_INTEGER_FORMAT "%s",
                 json_integer_value(json_object_get(e, "position")),
                 json_is_true(json_object_get(e, "head")) ? "*" : "");
        snprintf(prio, sizeof(prio), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(e, "priority")));
        queue_asks_text(json_object_get(e, "asks"), asks, sizeof(asks));
        json_t *w = json_object_get(e, "waitedSeconds");
        if (w)
            snprintf(waited, sizeof(waited), "%" JSON_INTEGER_FORMAT "s", json_integer_value(w));
        else
            snprintf(waited, sizeof(waited), "-");
        const char *row[] = {
            pos, cli_str(e, "name"), cli_str(e, "owner"), prio, asks, waited, cli_str(e, "why"),
            NULL};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    if (!json_array_size(json_object_get(data, "queue")))
        fprintf(ctx->out, "(nothing waits)\n");
}

int cli_cmd_queue(cli_ctx *ctx, const cli_args *a)
{
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = "/api/v1/queue"}, queue_print, a);
}

/* Wait until set name leaves the queue, showing its position and why on
 * ctx->err when they change. 0 with *info the set's info once it runs;
 * an exit code when it was dropped or cancelled. */
static int queue_wait(cli_ctx *ctx, const char *name, json_t **info)
{
    _cleanup_free_ char *path = cli_path(ctx, RS_BASE, name, NULL);
    char last[1024] = "";
    for (;;) {
        _cleanup_(cli_reply_free) cli_reply r = {0};
        int rc = cli_call(ctx, "GET", path, NULL, &r);
        if (rc)
            return rc;
        json_t *in = json_object_get(r.data, "info");
        const char *state = json_string_value(json_object_get(in, "state"));
        json_t *q = json_object_get(in, "queue");
        if (state && strcmp(state, "queued") != 0) {
            if (strcmp(state, "deleted") == 0) {
                json_t *dropped = json_object_get(q, "dropped");
                return cli_fail(ctx, CLI_EXIT_SHORTAGE,
                                "%s left the queue without starting: %s (%s)", name,
                                dropped ? cli_str(dropped, "reason") : "deleted",
                                dropped ? cli_str(dropped, "detail") : "");
            }
            *info = json_incref(in);
            return 0;
        }
        char line[1024];
        json_t *pos = json_object_get(q, "position");
        snprintf(line, sizeof(line), "%s: queued, position %s%" JSON_INTEGER_FORMAT ": %s", name,
                 pos ? "" : "?", pos ? json_integer_value(pos) : 0, cli_str(q, "why"));
        if (strcmp(line, last) != 0) {
            fprintf(ctx->err, "%s\n", line);
            fflush(ctx->err);
            snprintf(last, sizeof(last), "%s", line);
        }
        struct timespec ts = {QUEUE_POLL_MS / 1000, (long)(QUEUE_POLL_MS % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int cli_run_queued(cli_ctx *ctx, const cli_args *a, const json_t *body, cli_print_fn *human)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", RS_BASE, body, &r);
    if (rc)
        return rc;
    const char *name = a->pos[0];
    bool waits = r.status == 202;
    if (!waits || cli_flag(a, "detach")) {
        if (ctx->json)
            cli_print_json(ctx, r.data);
        else if (waits)
            fprintf(ctx->out, "%s: queued, position %" JSON_INTEGER_FORMAT ": %s\n", name,
                    json_integer_value(json_object_get(r.data, "position")),
                    cli_str(r.data, "why"));
        else
            human(ctx, json_object_get(r.data, "info") ? json_object_get(r.data, "info") : r.data,
                  a);
        return CLI_EXIT_OK;
    }
    _cleanup_json_ json_t *info = NULL;
    if ((rc = queue_wait(ctx, name, &info)))
        return rc;
    if (ctx->json)
        cli_print_json(ctx, info);
    else
        human(ctx, info, a);
    return CLI_EXIT_OK;
}
