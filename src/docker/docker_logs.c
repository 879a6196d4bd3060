/*
 * docker_logs.c - what a container wrote: GET /containers/{id}/logs, read
 * whole into two strings (docker_container_logs) or line by line as it
 * comes (docker_container_log_lines), following the container while it
 * runs if asked.
 *
 * A container without a TTY answers with the multiplexed stream, which the
 * demultiplexer of docker_stream.c takes apart; a TTY container's output is
 * raw and all of it counts as stdout (the TTY merged the two). The line
 * reader always asks Docker for timestamps (each line then starts with
 * "2026-11-22T01:28:28.123456789Z "), cuts them off and hands them on
 * beside the text, so its callers can show them or not and compare them.
 *
 * Lines are cut at "\n" (a "\r" before it goes too: a TTY writes "\r\n"),
 * per stream, so a line split over two network reads or frames comes out
 * whole; one longer than DOCKER_LOG_LINE_MAX comes out in pieces marked
 * partial; a last line without its "\n" comes out when the stream ends.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

static bool docker_container_has_tty(docker_client *c, const char *id, bool *tty, gb_err *err)
{
    _cleanup_json_ json_t *info = NULL;
    if (docker_container_inspect(c, id, &info, err) < 0)
        return false;
    *tty = json_is_true(json_object_get(json_object_get(info, "Config"), "Tty"));
    return true;
}

int docker_container_logs(docker_client *c, const char *id_or_name, char **out_stdout,
                          char **out_stderr, size_t cap, gb_err *err)
{
    *out_stdout = *out_stderr = NULL;
    struct docker_demux d;
    docker_demux_init(&d, cap ? cap : DOCKER_MAX_RESPONSE, false);
    if (!docker_container_has_tty(c, id_or_name, &d.tty, err))
        return -1;
    _cleanup_free_ char *path = docker_container_path(id_or_name, "/logs?stdout=1&stderr=1", err);
    if (!path)
        return -1;
    long status = 0;
    int rc = docker_call_raw(c, "GET", path, NULL, DOCKER_TIMEOUT_S, docker_demux_sink, &d, &status,
                             err);
    if (rc < 0 && (d.out[0].overflow || d.out[1].overflow))
        err_set(err, ERR_INTERNAL, "logs of container '%s' exceed %zu bytes on %s", id_or_name,
                d.out[0].limit, d.out[0].overflow ? "stdout" : "stderr");
    else if (rc < 0)
        err_prefix(err, "reading logs of container '%s'", id_or_name);
    else if (status != 200) {
        _cleanup_json_ json_t *resp = docker_demux_error_body(&d);
        rc = docker_status_err(status, resp, err, "reading logs of container '%s'", id_or_name);
    } else if (docker_demux_broken(&d))
        rc = err_set(err, ERR_INTERNAL,
                     "reading logs of container '%s': Docker's log stream is not in the "
                     "multiplexed format",
                     id_or_name);
    if (rc == 0) {
        *out_stdout = docker_buf_take(&d.out[0]);
        *out_stderr = docker_buf_take(&d.out[1]);
    }
    docker_demux_free(&d);
    return rc;
}

/* ---- the line reader ---------------------------------------------------------- */

void docker_log_reader_init(struct docker_log_reader *r, docker_log_fn fn, void *ctx)
{
    *r = (struct docker_log_reader){.fn = fn, .ctx = ctx};
    for (int i = 0; i < 2; i++)
        r->part[i].limit = DOCKER_LOG_LINE_MAX;
}

void docker_log_reader_free(struct docker_log_reader *r)
{
    for (int i = 0; i < 2; i++) {
        free(r->part[i].data);
        r->part[i] = (struct docker_buf){.limit = DOCKER_LOG_LINE_MAX};
    }
}

/* "2026-11-22T01:28:28.123456789Z " at the start of s: its length without
 * the space, or 0 when s does not start so. */
static size_t docker_log_stamp_len(const char *s, size_t n)
{
    if (n < 21 || s[4] != '-' || s[10] != 'T' || s[0] < '0' || s[0] > '9')
        return 0;
    const char *sp = memchr(s, ' ', n < 40 ? n : 40);
    return sp ? (size_t)(sp - s) : 0;
}

/* Hand stream's gathered line on and start the next. */
static bool docker_log_emit(struct docker_log_reader *r, int stream, bool partial)
{
    struct docker_buf *b = &r->part[stream];
    char *s = b->data ? b->data : "";
    size_t n = b->len;
    /* A piece after a partial one has no timestamp of its own: it keeps
     * its line's. */
    size_t sl = r->continued[stream] ? 0 : docker_log_stamp_len(s, n);
    if (sl) {
        snprintf(r->time[stream], sizeof(r->time[stream]), "%.*s", (int)sl, s);
        s += sl + 1;
        n -= sl + 1;
    } else if (!r->continued[stream]) {
        r->time[stream][0] = '\0';
    }
    if (!partial && n && s[n - 1] == '\r')
        s[--n] = '\0';
    docker_log_line line = {
        .stream = stream + 1, .time = r->time[stream], .text = s, .len = n, .partial = partial};
    r->continued[stream] = partial;
    bool go_on = r->fn(r->ctx, &line);
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
    if (!go_on)
        r->stopped = true;
    return go_on;
}

bool docker_log_reader_feed(void *ctx, int stream, const char *data, size_t n)
{
    struct docker_log_reader *r = ctx;
    struct docker_buf *b = &r->part[stream];
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        size_t room = b->limit - b->len;
        if (take > room) {
            docker_buf_append(b, data, room);
            data += room;
            n -= room;
            if (!docker_log_emit(r, stream, true))
                return false;
            continue;
        }
        docker_buf_append(b, data, take);
        data += take;
        n -= take;
        if (nl) {
            data++;
            n--;
            if (!docker_log_emit(r, stream, false))
                return false;
        }
    }
    return true;
}

bool docker_log_reader_flush(struct docker_log_reader *r)
{
    for (int i = 0; i < 2; i++)
        if (r->part[i].len && !docker_log_emit(r, i, false))
            return false;
    return true;
}

/* The query of a logs request. */
static char *docker_logs_query(const docker_logs_opts *o)
{
    char tail[32] = "all", since[32] = "";
    if (o->tail >= 0)
        snprintf(tail, sizeof(tail), "%ld", o->tail);
    if (o->since > 0)
        snprintf(since, sizeof(since), "&since=%" PRId64, o->since);
    return xasprintf("/logs?stdout=1&stderr=1&timestamps=1&tail=%s%s%s", tail, since,
                     o->follow ? "&follow=1" : "");
}

/* The line reader's sink: an answer other than 200 is an error body, kept
 * for the message rather than read as output. */
struct docker_log_sink {
    struct docker_demux d;
    struct docker_log_reader r;
    struct docker_req *req;
};

static size_t docker_log_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_log_sink *k = userdata;
    size_t n = size * nmemb;
    if (k->req->status == 200)
        return docker_demux_sink(data, size, nmemb, &k->d);
    size_t room = k->d.head.limit - k->d.head.len;
    docker_buf_append(&k->d.head, data, n < room ? n : room);
    return n;
}

int docker_container_log_lines(docker_client *c, const char *id_or_name, const docker_logs_opts *o,
                               docker_log_fn fn, void *ctx, gb_err *err)
{
    struct docker_log_sink k;
    docker_demux_init(&k.d, 0, false);
    docker_log_reader_init(&k.r, fn, ctx);
    k.d.emit = docker_log_reader_feed;
    k.d.emit_ctx = &k.r;
    int rc = -1;
    _cleanup_free_ char *rest = docker_logs_query(o);
    _cleanup_free_ char *path = NULL;
    if (!docker_container_has_tty(c, id_or_name, &k.d.tty, err) ||
        !(path = docker_container_path(id_or_name, rest, err)))
        goto out;
    struct docker_req req = {.method = "GET",
                             .path = path,
                             .timeout_ms = o->follow ? 0 : DOCKER_LONG_TIMEOUT_S * 1000,
                             .sink = docker_log_sink,
                             .sink_ctx = &k,
                             .cancel = o->cancel};
    k.req = &req;
    rc = docker_send(c, &req, err);
    bool cancelled = o->cancel && atomic_load(o->cancel);
    if (rc < 0 && (k.r.stopped || cancelled)) {
        rc = 0; /* the reader went away: not Docker's trouble */
    } else if (rc < 0) {
        err_prefix(err, "reading logs of container '%s'", id_or_name);
    } else if (req.status != 200) {
        _cleanup_json_ json_t *resp = docker_demux_error_body(&k.d);
        rc = docker_status_err(req.status, resp, err, "reading logs of container '%s'", id_or_name);
    } else if (docker_demux_broken(&k.d)) {
        rc = err_set(err, ERR_INTERNAL,
                     "reading logs of container '%s': Docker's log stream is not in the "
                     "multiplexed format",
                     id_or_name);
    } else {
        docker_log_reader_flush(&k.r);
    }
out:
    docker_log_reader_free(&k.r);
    docker_demux_free(&k.d);
    return rc;
}
