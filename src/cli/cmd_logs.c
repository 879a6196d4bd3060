/*
 * cmd_logs.c - gpubox logs NAME [-f] [--tail N] [--since T] [-t]
 * [--all-versions]: what a replica set's containers wrote, from GET
 * /api/v1/replicaSet/{name}/logs (docs/cli.md).
 *
 * Without --follow the answer is one envelope whose lines are printed; with
 * it the server streams NDJSON (a header, one object a line, an end) and
 * each line is printed and flushed as it arrives. Either way a line goes
 * to stdout, or to stderr when the container wrote it there; --timestamps
 * puts its time first and --all-versions its version ("[v2] "). A version
 * whose lines are gone is named on stderr. --json prints the server's data
 * (with --follow: its NDJSON objects as they come).
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

typedef struct logs_print {
    cli_ctx *ctx;
    bool timestamps, versions;
    bool failed; /* the stream ended with an error */
} logs_print;

static void logs_line(logs_print *p, const json_t *l)
{
    const char *stream = json_string_value(json_object_get(l, "stream"));
    FILE *f = stream && strcmp(stream, "stderr") == 0 ? p->ctx->err : p->ctx->out;
    if (p->versions)
        fprintf(f, "[v%" JSON_INTEGER_FORMAT "] ",
                json_integer_value(json_object_get(l, "version")));
    const char *time = json_string_value(json_object_get(l, "time"));
    if (p->timestamps && time)
        fprintf(f, "%s ", time);
    json_t *text = json_object_get(l, "text");
    fwrite(json_string_value(text), 1, json_string_length(text), f);
    if (!json_is_true(json_object_get(l, "partial")))
        fputc('\n', f);
}

/* The versions whose lines are gone, on stderr. */
static void logs_notes(logs_print *p, const json_t *versions)
{
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        const char *note = json_string_value(json_object_get(v, "note"));
        if (note)
            fprintf(p->ctx->err, "gpubox: version %" JSON_INTEGER_FORMAT ": %s\n",
                    json_integer_value(json_object_get(v, "version")), note);
    }
}

/* One object of a followed log. */
static int logs_stream_line(void *arg, const char *line, size_t n)
{
    logs_print *p = arg;
    if (p->ctx->json) {
        fwrite(line, 1, n, p->ctx->out);
        fputc('\n', p->ctx->out);
    } else {
        _cleanup_json_ json_t *o = json_loadb(line, n, 0, NULL);
        if (json_object_get(o, "text"))
            logs_line(p, o);
        else if (json_object_get(o, "versions"))
            logs_notes(p, json_object_get(o, "versions"));
        if (json_object_get(o, "error")) {
            fprintf(p->ctx->err, "gpubox: %s\n", json_string_value(json_object_get(o, "error")));
            p->failed = true;
        }
    }
    fflush(p->ctx->out);
    fflush(p->ctx->err);
    return ferror(p->ctx->out) ? CLI_EXIT_ERROR : 0;
}

int cli_cmd_logs(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    const char *tail = cli_get(a, "tail"), *since = cli_get(a, "since");
    long long n = 0;
    if (tail && strcmp(tail, "all") != 0 &&
        cli_parse_int("--tail", tail, 0, 1000000, &n, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s (or all)", msg);
    logs_print p = {.ctx = ctx,
                    .timestamps = cli_flag(a, "timestamps"),
                    .versions = cli_flag(a, "all-versions")};
    bool follow = cli_flag(a, "follow");
    _cleanup_free_ char *base = cli_path(ctx, "/api/v1/replicaSet", a->pos[0], "logs");
    _cleanup_free_ char *since_esc = since ? cli_escape(ctx, since) : NULL;
    _cleanup_free_ char *tail_esc = tail ? cli_escape(ctx, tail) : NULL;
    _cleanup_free_ char *path = xasprintf(
        "%s?timestamps=%s%s%s%s%s%s%s", base, p.timestamps ? "true" : "false",
        follow ? "&follow=true" : "", p.versions ? "&versions=all" : "", tail ? "&tail=" : "",
        tail ? tail_esc : "", since ? "&since=" : "", since ? since_esc : "");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_get_stream(ctx, path, logs_stream_line, &p, &r);
    if (rc)
        return rc;
    if (r.data && ctx->json) {
        cli_print_json(ctx, r.data);
    } else if (r.data) {
        logs_notes(&p, json_object_get(r.data, "versions"));
        size_t i;
        json_t *l;
        json_array_foreach(json_object_get(r.data, "lines"), i, l) logs_line(&p, l);
        if (json_is_true(json_object_get(r.data, "truncated")))
            fprintf(ctx->err, "gpubox: the oldest lines did not fit in one answer and were "
                              "left out; --tail N or --since TIME asks for fewer\n");
    }
    return p.failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
