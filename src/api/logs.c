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
 * at most API_LOGS_MAX_BYTES of text, the newest kept (truncated says so).
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
#include "util/time.h"

/* Text a non-follow answer holds at most. */
#define API_LOGS_MAX_BYTES (16u * 1024 * 1024)
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

int api_logs_query(const http_request *req, int64_t now, rs_logs_request *rq, bool *timestamps,
                   gb_err *err)
{
    *rq = (rs_logs_request){.tail = -1, .versions = 1};
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

/* A line as the answer shows it. */
static json_t *line_json(const rs_log_line *l, bool timestamps)
{
    json_t *o = json_pack("{s:i, s:s}", "version", l->version, "stream",
                          l->stream == 2 ? "stderr" : "stdout");
    if (timestamps)
        json_object_set_new(o, "time", json_string_lossy(l->time, strlen(l->time)));
    if (l->partial)
        json_object_set_new(o, "partial", json_true());
    json_object_set_new(o, "text", json_string_lossy(l->text, l->len));
    return o;
}

/* ---- without follow: one envelope ------------------------------------------------ */

/* The newest lines that fit: a window over everything read, the oldest
 * dropped as newer ones come past tail or API_LOGS_MAX_BYTES. */
struct collect {
    json_t **items;
    size_t start, n, cap;
    size_t bytes;
    long tail;
    bool timestamps, truncated;
};

static void collect_drop_first(struct collect *c)
{
    c->bytes -= json_string_length(json_object_get(c->items[c->start], "text"));
    json_decref(c->items[c->start]);
    c->items[c->start++] = NULL;
}

static bool collect_line(void *ctx, const rs_log_line *l)
{
    struct collect *c = ctx;
    if (c->n == c->cap) {
        /* move the window to the front before growing */
        size_t live = c->n - c->start;
        if (live)
            memmove(c->items, c->items + c->start, live * sizeof(*c->items));
        c->n = live;
        c->start = 0;
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 256;
            c->items = xrealloc(c->items, c->cap * sizeof(*c->items));
        }
    }
    c->items[c->n++] = line_json(l, c->timestamps);
    c->bytes += l->len;
    while (c->tail >= 0 && c->n - c->start > (size_t)c->tail)
        collect_drop_first(c);
    while (c->bytes > API_LOGS_MAX_BYTES && c->n - c->start > 1) {
        collect_drop_first(c);
        c->truncated = true;
    }
    return true;
}

static int answer_lines(http_request *req, json_t *plan, const rs_logs_request *rq, bool timestamps,
                        http_response *resp, gb_err *err)
{
    struct collect c = {.tail = rq->tail, .timestamps = timestamps};
    int rc = replicaset_logs_read(req->ctx, plan, rq, collect_line, &c, err);
    json_t *lines = json_array();
    for (size_t i = c.start; i < c.n; i++)
        json_array_append_new(lines, c.items[i]);
    free(c.items);
    if (rc < 0) {
        json_decref(lines);
        return -1;
    }
    json_object_set_new(plan, "lines", lines);
    json_object_set_new(plan, "truncated", json_boolean(c.truncated));
    return http_response_data(resp, json_incref(plan), err);
}

/* ---- with follow: a stream -------------------------------------------------------- */

struct follow {
    app *a;
    json_t *plan;
    rs_logs_request rq;
    bool timestamps;
    http_stream *s;
};

static void follow_free(void *ctx)
{
    struct follow *f = ctx;
    json_decref(f->plan);
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

static bool follow_line(void *ctx, const rs_log_line *l)
{
    struct follow *f = ctx;
    return follow_send(f, line_json(l, f->timestamps));
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
    rs_logs_request rq;
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
