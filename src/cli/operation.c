/*
 * operation.c - following a long operation (create, patch, restart,
 * rollback, resize, delete) that gpuboxd runs in steps and journals.
 *
 * An answer that names an operation (data.operationId, or data.operation
 * as an id or an object with an id) and does not say it is finished is
 * polled at GET /api/v1/operations/{id} until its state is final. On a
 * terminal (stderr is a TTY) progress is one line rewritten in place;
 * otherwise a plain line is printed each time the step changes, so logs
 * of scripts stay readable. A server without the operations route (404
 * code 1101) is taken to have finished: its answers come when the work is
 * done.
 */
#include "cli/cli.h"

#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/err.h"
#include "util/xalloc.h"

#define OP_POLL_LIMIT_S (2 * 3600)

static const char *const op_failed_states[] = {"failed",     "error",     "undone",
                                               "rolledBack", "cancelled", NULL};
static const char *const op_final_states[] = {"done",      "succeeded", "success",
                                              "completed", "finished",  NULL};

static bool op_in(const char *s, const char *const *list);

int cli_operation_state(const json_t *op)
{
    const char *s = json_string_value(json_object_get(op, "state"));
    if (!s)
        s = json_string_value(json_object_get(op, "status"));
    return op_in(s, op_failed_states) ? -1 : op_in(s, op_final_states) ? 1 : 0;
}

static bool op_in(const char *s, const char *const *list)
{
    for (; s && *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static const char *op_state(const json_t *op)
{
    const char *s = json_string_value(json_object_get(op, "state"));
    return s ? s : json_string_value(json_object_get(op, "status"));
}

/* The operation's id as text into buf; false when data names none. */
static bool op_id(const json_t *data, char *buf, size_t size, const json_t **inline_op)
{
    const json_t *id = json_object_get(data, "operationId");
    const json_t *op = json_object_get(data, "operation");
    *inline_op = json_is_object(op) ? op : NULL;
    if (!id && json_is_object(op))
        id = json_object_get(op, "id");
    else if (!id)
        id = op;
    if (json_is_string(id))
        snprintf(buf, size, "%s", json_string_value(id));
    else if (json_is_integer(id))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
    else
        return false;
    return buf[0] != '\0';
}

/* "create foo: running, start-container [2/5]" from whatever the answer has. */
void cli_operation_line(const json_t *op, char *buf, size_t size)
{
    const char *kind = json_string_value(json_object_get(op, "kind"));
    const char *target = json_string_value(json_object_get(op, "name"));
    if (!target)
        target = json_string_value(json_object_get(op, "target"));
    const char *step = json_string_value(json_object_get(op, "step"));
    json_t *steps = json_object_get(op, "steps");
    long long done = -1, total = -1;
    if (json_is_array(steps)) {
        total = (long long)json_array_size(steps);
        done = 0;
        size_t i;
        json_t *s;
        json_array_foreach(steps, i, s)
        {
            done += json_is_true(json_object_get(s, "done"));
            if (!step && !json_is_true(json_object_get(s, "done")))
                step = json_string_value(json_object_get(s, "name"));
        }
    } else if (json_is_integer(steps)) {
        total = json_integer_value(steps);
        done = json_integer_value(json_object_get(op, "stepsDone"));
    }
    char count[48] = "";
    if (total > 0)
        snprintf(count, sizeof(count), " [%lld/%lld]", done, total);
    snprintf(buf, size, "%s%s%s: %s%s%s", kind ? kind : "operation", target ? " " : "",
             target ? target : "", op_state(op) ? op_state(op) : "running", step ? ", " : "",
             step ? step : "");
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "%s", count);
    /* A pull's bytes: "12.3/45.6 MB". */
    json_t *progress = json_object_get(op, "progress");
    json_int_t cur = json_integer_value(json_object_get(progress, "current"));
    json_int_t tot = json_integer_value(json_object_get(progress, "total"));
    len = strlen(buf);
    if (tot > 0)
        snprintf(buf + len, size - len, " %.1f/%.1f MB", (double)cur / 1e6, (double)tot / 1e6);
    /* A move's: "12.3 MB sent, 45.6 MB/s". */
    json_t *rate = json_object_get(progress, "bytesPerSecond");
    if (tot <= 0 && json_is_number(rate))
        snprintf(buf + len, size - len, " %.1f MB sent, %.1f MB/s", (double)cur / 1e6,
                 json_number_value(rate) / 1e6);
}

static void op_sleep(double seconds)
{
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

int cli_follow_operation(cli_ctx *ctx, const json_t *data)
{
    char id[128];
    const json_t *inline_op = NULL;
    if (!op_id(data, id, sizeof(id), &inline_op))
        return CLI_EXIT_OK;
    if (inline_op && (op_in(op_state(inline_op), op_final_states) ||
                      op_in(op_state(inline_op), op_failed_states)))
        return op_in(op_state(inline_op), op_failed_states) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
    _cleanup_free_ char *esc = cli_escape(ctx, id);
    _cleanup_free_ char *path = xasprintf("/api/v1/operations/%s", esc);
    char last[512] = "";
    double waited = 0, delay = 0.1;
    int rc = CLI_EXIT_OK;
    for (;;) {
        _cleanup_(cli_reply_free) cli_reply r = {0};
        rc = cli_request(ctx, "GET", path, NULL, &r, false);
        if (r.code == ERR_ROUTE_NOT_FOUND || r.code == ERR_METHOD_NOT_ALLOWED) {
            rc = CLI_EXIT_OK; /* no operations route: the answer came when it was done */
            break;
        }
        if (rc) {
            if (r.msg)
                cli_fail(ctx, rc, "following operation %s: %s", id, r.msg);
            break;
        }
        const json_t *op = json_is_object(json_object_get(r.data, "operation"))
                               ? json_object_get(r.data, "operation")
                               : r.data;
        char line[512];
        cli_operation_line(op, line, sizeof(line));
        if (ctx->progress_tty)
            fprintf(ctx->err, "\r\033[K%s", line);
        else if (strcmp(line, last) != 0)
            fprintf(ctx->err, "%s\n", line);
        snprintf(last, sizeof(last), "%s", line);
        const char *state = op_state(op);
        if (op_in(state, op_failed_states)) {
            const char *why = json_string_value(json_object_get(op, "error"));
            if (ctx->progress_tty)
                fputc('\n', ctx->err);
            char words[1024];
            rc = cli_fail(ctx, CLI_EXIT_ERROR, "operation %s %s%s%s", id, state, why ? ": " : "",
                          why ? cli_words(why, words, sizeof(words)) : "");
            return rc;
        }
        if (op_in(state, op_final_states))
            break;
        if (waited > OP_POLL_LIMIT_S) {
            rc = cli_fail(ctx, CLI_EXIT_ERROR, "operation %s still %s after %ds; gave up waiting",
                          id, state ? state : "running", OP_POLL_LIMIT_S);
            break;
        }
        op_sleep(delay);
        waited += delay;
        delay = delay < 1.0 ? delay * 2 : 1.0;
    }
    if (ctx->progress_tty && last[0])
        fputc('\n', ctx->err);
    return rc;
}
