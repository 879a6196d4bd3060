/*
 * logs.c - GET /api/v1/replicaSet/{name}/logs: what the set's containers
 * wrote (docs/api.md, "Logs").
 *
 * Query: tail (a number of lines, or all: the default), since (RFC 3339,
 * a duration back from now such as 10m, or unix seconds), timestamps,
 * follow, versions (a number of versions back from the current, or all;
 * default 1, the current only). Every check, and the set's lookup, come
 * before any answer, so a bad request is an ordinary envelope.
 *
 * Without follow the answer is an envelope whose data holds the lines:
 * at most API_LOGS_MAX_LINES lines and API_LOGS_MAX_BYTES of their JSON,
 * the newest kept (truncated says so). It is measured first and then
 * streamed as it is read (answer_lines), so its memory is a few lines
 * and a ring of sizes, whatever the containers printed.
 * With follow it is a stream of NDJSON objects, sent as they come: first
 * {name, version, state, versions}, then one object a line, and last
 * {"end": true, "reason"} (or "error") once the followed container stops;
 * a client that hangs up ends it (http/stream.h).
 */
#include "util/xalloc.h"
#include "api/api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/stream.h"
#include "service/replicaset/replicaset.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

/* The JSON of the lines a non-follow answer holds at most (each line
 * counted as sent, with its fields and comma), and their number. */
#define API_LOGS_MAX_BYTES (16u * 1024 * 1024)
#define API_LOGS_MAX_LINES 1000000u
/* The largest number tail and versions take. */
#define API_LOGS_MAX_N 1000000L

/* "all" (*out -1) or a whole number from min to API_LOGS_MAX_N. */
static int query_count(const http_request *req, const char *name, long min, long *out, gb_err *err)
{
    const char *v = http_request_query(req, name);
    if (!v)
        return 0;
    if (strcmp(v, "all") == 0) {
        *out = -1;
        return 0;
    }
    char *end = NULL;
    long n = isdigit((unsigned char)v[0]) ? strtol(v, &end, 10) : -1;
    if (n < min || n > API_LOGS_MAX_N || !end || *end)
        return err_set(err, ERR_INVALID_PARAMS,
                       "query parameter %s is '%.32s'; give a number from %ld to %ld, or all", name,
                       v, min, API_LOGS_MAX_N);
    *out = n;
    return 0;
}

int api_logs_since(const char *v, int64_t now, int64_t *out, gb_err *err)
{
    int64_t secs = 0;
    bool digits = *v != '\0';
    for (const char *p = v; *p; p++)
        digits = digits && isdigit((unsigned char)*p);
    if (digits && strlen(v) <= 12) {
        *out = strtoll(v, NULL, 10); /* unix seconds, as Docker's --since */
        return 0;
    }
    if (time_rfc3339_parse(v, out) == 0)
        return 0;
    if (!digits && time_duration_parse(v, &secs) == 0) {
        *out = now - secs > 0 ? now - secs : 1;
        return 0;
    }
    return err_set(err, ERR_INVALID_PARAMS,
                   "query parameter since is '%.64s'; give an RFC 3339 time "
                   "(2026-11-22T01:28:28Z), a duration back from now (90s, 10m, 1h30m, 2d) or "
                   "unix seconds",
                   v);
}

int api_logs_query(const http_request *req, int64_t now, replicaset_logs_request *rq,
                   bool *timestamps, gb_err *err)
{
    *rq = (replicaset_logs_request){.tail = -1, .versions = 1};
    long versions = 1;
    const char *since = http_request_query(req, "since");
    if (query_count(req, "tail", 0, &rq->tail, err) < 0 ||
        query_count(req, "versions", 1, &versions, err) < 0 ||
        api_query_flag(req, "timestamps", timestamps, err) < 0 ||
        api_query_flag(req, "follow", &rq->follow, err) < 0 ||
        (since && api_logs_since(since, now, &rq->since, err) < 0))
        return -1;
    rq->versions = versions < 0 ? 0 : (int)versions;
    return 0;
}

/* A line as the answer shows it, written into o (reset first). */
static void line_encode(json_out *o, const replicaset_log_line *l, bool timestamps)
{
    json_out_reset(o);
    json_out_printf(o, "{\"version\":%d,\"stream\":\"%s\"", l->version,
                    l->stream == 2 ? "stderr" : "stdout");
    if (timestamps) {
        json_out_raw(o, ",\"time\":", 8);
        json_out_string_lossy(o, l->time, strlen(l->time));
    }
    if (l->partial)
        json_out_raw(o, ",\"partial\":true", 15);
    json_out_raw(o, ",\"text\":", 8);
    json_out_string_lossy(o, l->text, l->len);
    json_out_raw(o, "}", 1);
}

/* ---- without follow: one envelope, streamed ---------------------------------------- */

/* An answer's lines are the newest that fit tail, API_LOGS_MAX_LINES and
 * API_LOGS_MAX_BYTES of JSON (each line counted as sent). Holding them
 * until the end costs what they say and more (a json_t per line, and a
 * heap fragmented for good), so nothing holds them: a first read measures
 * each line and keeps only the sizes of a sliding window, which says how
 * many of each version's last lines fit; a second read asks for just
 * those and writes them out as they come, on the stream's thread. */
struct window {
    json_out line;
    uint32_t *cost; /* a ring of the window's line sizes */
    size_t ring, start, n;
    size_t bytes;
    long tail;
    bool timestamps, truncated;
    const json_t *versions; /* the plan's, to count lines per version */
    size_t *count;
    size_t at;
};

static void window_drop_first(struct window *w)
{
    w->bytes -= w->cost[w->start];
    w->start = (w->start + 1) % w->ring;
    w->n--;
}

static bool window_line(void *ctx, const replicaset_log_line *l)
{
    struct window *w = ctx;
    size_t nv = json_array_size(w->versions);
    while (w->at + 1 < nv && json_integer_value(json_object_get(json_array_get(w->versions, w->at),
                                                                "version")) != l->version)
        w->at++;
    w->count[w->at]++;
    if (w->n == w->ring) { /* grow the ring, its oldest first */
        size_t ring = w->ring ? 2 * w->ring : 1024;
        uint32_t *cost = xmalloc(ring * sizeof(*cost));
        for (size_t i = 0; i < w->n; i++)
            cost[i] = w->cost[(w->start + i) % w->ring];
        free(w->cost);
        w->cost = cost;
        w->ring = ring;
        w->start = 0;
    }
    line_encode(&w->line, l, w->timestamps);
    uint32_t cost = (uint32_t)w->line.len + 1; /* and its comma */
    w->cost[(w->start + w->n++) % w->ring] = cost;
    w->bytes += cost;
    while (w->tail >= 0 && w->n > (size_t)w->tail)
        window_drop_first(w);
    while (w->n > 1 && (w->bytes > API_LOGS_MAX_BYTES || w->n > API_LOGS_MAX_LINES)) {
        window_drop_first(w);
        w->truncated = true;
    }
    return true;
}

struct answer {
    app *a;
    json_t *plan;
    replicaset_logs_request rq;
    long *tails; /* per version of the plan: how many of its last lines */
    size_t want; /* lines in all */
    size_t sent, bytes;
    bool timestamps, truncated;
    http_stream *s;
    json_out out, line;
};

static void answer_free(void *ctx)
{
    struct answer *an = ctx;
    json_decref(an->plan);
    free(an->tails);
    json_out_free(&an->out);
    json_out_free(&an->line);
    free(an);
}

static bool answer_flush(struct answer *an)
{
    bool ok = http_stream_write(an->s, an->out.data, an->out.len) == 0;
    json_out_reset(&an->out);
    return ok;
}

static bool answer_line(void *ctx, const replicaset_log_line *l)
{
    struct answer *an = ctx;
    line_encode(&an->line, l, an->timestamps);
    /* The log may have moved since it was measured: never more than then. */
    if (an->sent == an->want || an->bytes + an->line.len + 1 > API_LOGS_MAX_BYTES) {
        an->truncated = true;
        return false;
    }
    if (an->sent++)
        json_out_raw(&an->out, ",", 1);
    json_out_raw(&an->out, an->line.data, an->line.len);
    an->bytes += an->line.len + 1;
    return an->out.len < 64 * 1024 || answer_flush(an);
}

static void answer_run(http_stream *s, void *ctx)
{
    struct answer *an = ctx;
    an->s = s;
    an->rq.cancel = http_stream_cancelled(s);
    an->rq.tails = an->tails;
    /* The envelope as http_response_data writes it, the plan's fields
     * first, its object left open for the lines. */
    _cleanup_free_ char *head = json_dumps(an->plan, JSON_COMPACT);
    if (!head)
        return; /* cannot be: every string in the plan was checked UTF-8 */
    json_out_printf(&an->out, "{\"code\":%d,\"msg\":\"%s\",\"data\":", ERR_OK, HTTP_SUCCESS_MSG);
    json_out_raw(&an->out, head, strlen(head) - 1);
    json_out_raw(&an->out, ",\"lines\":[", 10);
    gb_err err = GB_ERR_INIT;
    if (replicaset_logs_read(an->a, an->plan, &an->rq, answer_line, an, &err) < 0) {
        /* Too late for an error envelope: the lines sent stay valid JSON. */
        log_warn("logs: %s", err.msg);
        an->truncated = true;
    }
    if (atomic_load(an->rq.cancel))
        return;
    json_out_printf(&an->out, "],\"truncated\":%s}}", an->truncated ? "true" : "false");
    answer_flush(an);
}

static int answer_lines(http_request *req, json_t *plan, const replicaset_logs_request *rq,
                        bool timestamps, http_response *resp, gb_err *err)
{
    json_t *versions = json_object_get(plan, "versions");
    size_t nv = json_array_size(versions);
    struct window w = {.tail = rq->tail,
                       .timestamps = timestamps,
                       .versions = versions,
                       .count = xcalloc(nv ? nv : 1, sizeof(size_t))};
    int rc = replicaset_logs_read(req->ctx, plan, rq, window_line, &w, err);
    free(w.cost);
    json_out_free(&w.line);
    if (rc < 0) {
        free(w.count);
        return -1;
    }
    struct answer *an = xcalloc(1, sizeof(*an));
    *an = (struct answer){.a = req->ctx,
                          .plan = json_incref(plan),
                          .rq = *rq,
                          .tails = xcalloc(nv ? nv : 1, sizeof(long)),
                          .want = w.n,
                          .timestamps = timestamps,
                          .truncated = w.truncated};
    /* The window's lines are the last ones of the newest versions. */
    size_t left = w.n;
    for (size_t i = nv; i-- > 0 && left;) {
        size_t take = w.count[i] < left ? w.count[i] : left;
        an->tails[i] = (long)take;
        left -= take;
    }
    free(w.count);
    if (http_response_stream(resp, 200, "application/json", answer_run, an, answer_free, err) < 0)
        return -1;
    resp->envelope = true;
    return 0;
}

/* ---- with follow: a stream -------------------------------------------------------- */

struct follow {
    app *a;
    json_t *plan;
    replicaset_logs_request rq;
    bool timestamps;
    http_stream *s;
    json_out line;
};

static void follow_free(void *ctx)
{
    struct follow *f = ctx;
    json_decref(f->plan);
    json_out_free(&f->line);
    free(f);
}

static bool follow_send(struct follow *f, json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return true;
    size_t n = strlen(text);
    text[n] = '\n'; /* the NUL becomes the line end */
    bool ok = http_stream_write(f->s, text, n + 1) == 0;
    free(text);
    return ok;
}

static bool follow_line(void *ctx, const replicaset_log_line *l)
{
    struct follow *f = ctx;
    line_encode(&f->line, l, f->timestamps);
    json_out_raw(&f->line, "\n", 1);
    return http_stream_write(f->s, f->line.data, f->line.len) == 0;
}

static void follow_run(http_stream *s, void *ctx)
{
    struct follow *f = ctx;
    f->s = s;
    f->rq.cancel = http_stream_cancelled(s);
    if (!follow_send(f, json_incref(f->plan)))
        return;
    gb_err err = GB_ERR_INIT;
    int rc = replicaset_logs_read(f->a, f->plan, &f->rq, follow_line, f, &err);
    if (atomic_load(f->rq.cancel))
        return;
    json_t *versions = json_object_get(f->plan, "versions");
    json_t *last = json_array_get(versions, json_array_size(versions) - 1);
    const char *source = json_string_value(json_object_get(last, "source"));
    const char *reason = source && strcmp(source, "container") == 0
                             ? "the container is not running"
                             : "no container of this version is left to follow";
    follow_send(f, rc < 0 ? json_pack("{s:b, s:s}", "end", true, "error", err.msg)
                          : json_pack("{s:b, s:s}", "end", true, "reason", reason));
}

int api_replicaset_logs(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = NULL;
    replicaset_logs_request rq;
    bool timestamps = false;
    if (api_path_name(req, &name, err) < 0 ||
        api_logs_query(req, (int64_t)time(NULL), &rq, &timestamps, err) < 0)
        return -1;
    _cleanup_json_ json_t *plan = NULL;
    if (replicaset_logs_plan(req->ctx, name, &rq, &plan, err) < 0)
        return -1;
    if (!rq.follow)
        return answer_lines(req, plan, &rq, timestamps, resp, err);
    struct follow *f = xcalloc(1, sizeof(*f));
    *f = (struct follow){
        .a = req->ctx, .plan = json_incref(plan), .rq = rq, .timestamps = timestamps};
    if (http_response_stream(resp, 200, "application/x-ndjson", follow_run, f, follow_free, err) <
        0)
        return -1;
    http_response_header(resp, "Cache-Control", "no-cache");
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
    return 0;
}
