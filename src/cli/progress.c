/*
 * progress.c - progress on stderr while a long request runs.
 *
 * gpuboxd answers run, scale, stop, restart, rollback and rm when their
 * operation is over, so the answer cannot show progress. While such a
 * request is in flight a second thread polls, every 250 ms, the set's info
 * (GET /api/v1/replicaSet/{name}: its "operation" names the operation in
 * flight, read without taking the set's lock) until it names a new one,
 * then that operation (GET /api/v1/operations/{id}: every step, done or
 * not, as the journal records it). The operation the set named before the
 * request began (a stuck one) is not shown; one that ends is forgotten, so
 * a request that runs two (a resumed one, then its own) shows both.
 *
 * On a terminal one line is rewritten in place ("scale train: carry-begin
 * (4/8) 1.2s") and cleared at the end; otherwise a plain line is written
 * each time the step changes ("scale train: carried (5/8)"). stdout is
 * never touched.
 *
 * Threads: the poller has its own cli_ctx, with its own curl handle (one
 * handle per thread, as libcurl asks) and a multi handle through which its
 * transfers and its sleeps run, so that stopping it (an atomic flag, then
 * curl_multi_wakeup) ends a sleep or a request at once. The main thread is
 * inside its own request while the poller runs and joins it before it
 * writes anything on stderr (cli_fail stops it first), so lines never mix.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "util/cleanup.h"
#include "util/time.h"

#define PROGRESS_INTERVAL_MS 250
#define PROGRESS_ENV "GPUBOX_PROGRESS"

struct cli_progress {
    cli_ctx poll; /* the poller's context; progress_perform finds the rest from it */
    CURLM *multi;
    pthread_t thread;
    atomic_bool stop;
    char *verb, *name;
    char *set_path;    /* /api/v1/replicaSet/<name> */
    char *op_path;     /* /api/v1/operations/<id> once the set names a new one */
    char op_id[128];   /* that id */
    char ignored[128]; /* the id the set named before, or the last that ended */
    char last[256];    /* the plain line last written */
    bool drawn;        /* a terminal line is on screen */
    int64_t t0_ns;     /* when the request began (time_mono_ns) */
};

typedef struct cli_progress cli_progress;

static cli_progress *progress_of(cli_ctx *poll)
{
    return (cli_progress *)((char *)poll - offsetof(cli_progress, poll));
}

/* A transfer of the poller: the multi handle runs it, and it ends early
 * (CURLE_ABORTED_BY_CALLBACK) once the poller is told to stop. */
static int progress_perform(cli_ctx *ctx)
{
    cli_progress *p = progress_of(ctx);
    if (curl_multi_add_handle(p->multi, ctx->curl) != CURLM_OK)
        return CURLE_FAILED_INIT;
    CURLcode rc = CURLE_ABORTED_BY_CALLBACK;
    int running = 1;
    while (running && !atomic_load(&p->stop)) {
        if (curl_multi_perform(p->multi, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        if (running)
            curl_multi_poll(p->multi, NULL, 0, 1000, NULL);
    }
    CURLMsg *msg;
    int left;
    while (!running && (msg = curl_multi_info_read(p->multi, &left)))
        if (msg->msg == CURLMSG_DONE)
            rc = msg->data.result;
    curl_multi_remove_handle(p->multi, ctx->curl);
    return (int)rc;
}

static double progress_elapsed(const cli_progress *p)
{
    return time_since_s(p->t0_ns);
}

void cli_progress_line(const char *verb, const char *name, const json_t *op, double elapsed_s,
                       char *buf, size_t size)
{
    const json_t *steps = json_object_get(op, "steps"), *s;
    const char *step = NULL;
    size_t i, done = 0;
    json_array_foreach(steps, i, s)
    {
        if (json_is_true(json_object_get(s, "done"))) {
            done++;
            step = json_string_value(json_object_get(s, "name"));
        }
    }
    const char *state = json_string_value(json_object_get(op, "state"));
    const char *label = state && strcmp(state, "running") != 0 ? state : step ? step : "starting";
    int len =
        snprintf(buf, size, "%s %s: %s (%zu/%zu)", verb, name, label, done, json_array_size(steps));
    if (elapsed_s < 0 || len < 0 || (size_t)len >= size)
        return;
    /* A move's data so far, on a terminal (lines for logs change by step). */
    const json_t *progress = json_object_get(op, "progress");
    if (json_is_number(json_object_get(progress, "bytesPerSecond"))) {
        int more = snprintf(buf + len, size - (size_t)len, " %.1f MB, %.1f MB/s",
                            (double)json_integer_value(json_object_get(progress, "bytes")) / 1e6,
                            json_number_value(json_object_get(progress, "bytesPerSecond")) / 1e6);
        if (more < 0 || (size_t)(len + more) >= size)
            return;
        len += more;
    }
    if (elapsed_s < 60)
        snprintf(buf + len, size - (size_t)len, " %.1fs", elapsed_s);
    else
        snprintf(buf + len, size - (size_t)len, " %dm%02ds", (int)(elapsed_s / 60),
                 (int)elapsed_s % 60);
}

static void progress_show(cli_progress *p, const json_t *op)
{
    char line[256];
    FILE *err = p->poll.err;
    if (p->poll.progress_tty) {
        cli_progress_line(p->verb, p->name, op, progress_elapsed(p), line, sizeof(line));
        fprintf(err, "\r\033[K%s", line);
        p->drawn = true;
    } else {
        cli_progress_line(p->verb, p->name, op, -1, line, sizeof(line));
        if (strcmp(line, p->last) == 0)
            return;
        fprintf(err, "%s\n", line);
        snprintf(p->last, sizeof(p->last), "%s", line);
    }
    fflush(err);
}

/* The id of the operation the set names into id ("" when none); false when
 * the set could not be read (not there yet, or the server busy). */
static bool progress_set_operation(cli_progress *p, char *id, size_t size)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    if (cli_request(&p->poll, "GET", p->set_path, NULL, &r, false) != 0)
        return false;
    const char *op =
        json_string_value(json_object_get(json_object_get(r.data, "info"), "operation"));
    snprintf(id, size, "%s", op ? op : "");
    return true;
}

/* One round: find the operation in flight if none is followed yet, then
 * show where it is. */
static void progress_poll(cli_progress *p)
{
    if (!p->op_path) {
        char id[sizeof(p->op_id)];
        if (!progress_set_operation(p, id, sizeof(id)) || !id[0] || strcmp(id, p->ignored) == 0)
            return;
        _cleanup_free_ char *esc = cli_escape(&p->poll, id);
        p->op_path = xasprintf("/api/v1/operations/%s", esc);
        snprintf(p->op_id, sizeof(p->op_id), "%s", id);
    }
    _cleanup_(cli_reply_free) cli_reply r = {0};
    if (cli_request(&p->poll, "GET", p->op_path, NULL, &r, false) != 0)
        return;
    progress_show(p, r.data);
    if (cli_operation_state(r.data) != 0) {
        snprintf(p->ignored, sizeof(p->ignored), "%s", p->op_id);
        free(p->op_path);
        p->op_path = NULL;
    }
}

static void *progress_main(void *arg)
{
    cli_progress *p = arg;
    while (!atomic_load(&p->stop)) {
        /* No transfer is added: this waits out the interval, or until
         * cli_progress_stop wakes it. */
        curl_multi_poll(p->multi, NULL, 0, PROGRESS_INTERVAL_MS, NULL);
        if (!atomic_load(&p->stop))
            progress_poll(p);
    }
    return NULL;
}

static void progress_free(cli_progress *p)
{
    if (p->poll.curl)
        curl_easy_cleanup(p->poll.curl);
    if (p->multi)
        curl_multi_cleanup(p->multi);
    free(p->verb);
    free(p->name);
    free(p->set_path);
    free(p->op_path);
    free(p);
}

static bool progress_wanted(void)
{
    const char *v = getenv(PROGRESS_ENV);
    static const char *const off[] = {"0", "no", "off", "false"};
    for (size_t i = 0; v && i < ARRAY_SIZE(off); i++)
        if (strcasecmp(v, off[i]) == 0)
            return false;
    return true;
}

void cli_progress_start(cli_ctx *ctx, const char *verb, const char *name)
{
    if (ctx->progress || ctx->silent || !progress_wanted())
        return;
    cli_progress *p = xcalloc(1, sizeof(*p));
    p->poll = (cli_ctx){.host = ctx->host,
                        .token = ctx->token,
                        .progress_tty = ctx->progress_tty,
                        .out = ctx->out,
                        .err = ctx->err,
                        .curl = curl_easy_init(),
                        .silent = true,
                        .perform = progress_perform};
    p->multi = curl_multi_init();
    p->verb = xstrdup(verb);
    p->name = xstrdup(name);
    p->t0_ns = time_mono_ns();
    if (!p->poll.curl || !p->multi) {
        progress_free(p);
        return;
    }
    _cleanup_free_ char *esc = cli_escape(&p->poll, name);
    p->set_path = xasprintf("/api/v1/replicaSet/%s", esc);
    /* Which operation the set names before the request: not this one's.
     * A set that does not exist yet (run) names none; a server that does
     * not answer gets no polling at all. */
    _cleanup_(cli_reply_free) cli_reply r = {0};
    if (cli_request(&p->poll, "GET", p->set_path, NULL, &r, false) != 0 && !r.code) {
        progress_free(p);
        return;
    }
    const char *before =
        json_string_value(json_object_get(json_object_get(r.data, "info"), "operation"));
    snprintf(p->ignored, sizeof(p->ignored), "%s", before ? before : "");
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        progress_free(p);
        return;
    }
    ctx->progress = p;
}

void cli_progress_stop(cli_ctx *ctx)
{
    cli_progress *p = ctx->progress;
    if (!p)
        return;
    ctx->progress = NULL;
    atomic_store(&p->stop, true);
    curl_multi_wakeup(p->multi);
    pthread_join(p->thread, NULL);
    if (p->drawn) {
        fputs("\r\033[K", ctx->err);
        fflush(ctx->err);
    }
    progress_free(p);
}

int cli_call_progress(cli_ctx *ctx, const char *verb, const char *name, const char *method,
                      const char *path, const json_t *body, cli_reply *r)
{
    cli_progress_start(ctx, verb, name);
    int rc = cli_call(ctx, method, path, body, r);
    cli_progress_stop(ctx);
    return rc;
}
