/*
 * test_logs.c - the pieces of GET .../logs that need no Docker: the query
 * (api/logs.c: tail, since in its three forms, versions, the flags) and
 * the line reader of docker_logs.c (lines cut per stream across network
 * reads and frames, timestamps split off, "\r\n", long lines in pieces,
 * a last line without its "\n", a reader that says stop), fed through the
 * demultiplexer of docker_stream.c as Docker's bytes arrive; and the
 * string writer the streamed answer and the kept files use
 * (json_out_string_lossy), which must write what jansson would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "docker/docker_internal.h"
#include "service/replicaset/replicaset.h"
#include "util/json.h"

#define NOW 1800000000LL

static int query(const char *const *kv, size_t n, replicaset_logs_request *rq, bool *ts,
                 gb_err *err)
{
    http_kv q[8];
    for (size_t i = 0; i < n; i++)
        q[i] = (http_kv){.key = kv[2 * i], .value = kv[2 * i + 1]};
    http_request req = {.query = q, .nquery = n};
    return api_logs_query(&req, NOW, rq, ts, err);
}

static void test_query_defaults(void **state)
{
    (void)state;
    replicaset_logs_request rq;
    bool ts = true;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(query(NULL, 0, &rq, &ts, &err), 0);
    assert_int_equal(rq.tail, -1);
    assert_int_equal(rq.since, 0);
    assert_int_equal(rq.versions, 1);
    assert_false(rq.follow);
    assert_false(ts);
}

static void test_query_values(void **state)
{
    (void)state;
    replicaset_logs_request rq;
    bool ts = false;
    gb_err err = GB_ERR_INIT;
    const char *kv[] = {"tail", "25", "versions", "all", "timestamps", "true", "follow", "1"};
    assert_int_equal(query(kv, 4, &rq, &ts, &err), 0);
    assert_int_equal(rq.tail, 25);
    assert_int_equal(rq.versions, 0);
    assert_true(ts);
    assert_true(rq.follow);
    const char *kv2[] = {"tail", "all", "versions", "3"};
    assert_int_equal(query(kv2, 2, &rq, &ts, &err), 0);
    assert_int_equal(rq.tail, -1);
    assert_int_equal(rq.versions, 3);
}

static void test_query_refusals_name_the_parameter(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"tail", "-1"},
        {"tail", ""},
        {"tail", "1x"},
        {"tail", "2000000"},
        {"versions", "0"},
        {"versions", "all2"},
        {"follow", "yes"},
        {"timestamps", "2"},
        {"since", "bogus"},
        {"since", "10 m"},
        {"since", "-10m"},
        {"since", ""},
        {"since", "2026-11-22T01:28:28"},
        {"since", "2026-11-22T01:28:28+0100"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        replicaset_logs_request rq;
        bool ts;
        gb_err err = GB_ERR_INIT;
        const char *kv[] = {bad[i][0], bad[i][1]};
        assert_int_equal(query(kv, 1, &rq, &ts, &err), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, bad[i][0]));
    }
}

static void test_since_forms(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    int64_t t = 0;
    assert_int_equal(api_logs_since("10m", NOW, &t, &err), 0);
    assert_int_equal(t, NOW - 600);
    assert_int_equal(api_logs_since("1h30m", NOW, &t, &err), 0);
    assert_int_equal(t, NOW - 5400);
    assert_int_equal(api_logs_since("1700000000", NOW, &t, &err), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(api_logs_since("2023-11-14T22:13:20Z", NOW, &t, &err), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(api_logs_since("2023-11-14T22:13:20.999999999Z", NOW, &t, &err), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(api_logs_since("2023-11-15T00:13:20+02:00", NOW, &t, &err), 0);
    assert_int_equal(t, 1700000000);
    assert_int_equal(api_logs_since("2023-11-14T20:13:20.5-02:00", NOW, &t, &err), 0);
    assert_int_equal(t, 1700000000);
}

/* ---- the line reader ---- */

struct got {
    char lines[16][64];
    char times[16][48];
    int streams[16];
    bool partial[16];
    int n;
    int stop_after; /* 0: never */
};

static bool got_line(void *ctx, const docker_log_line *l)
{
    struct got *g = ctx;
    snprintf(g->lines[g->n], sizeof(g->lines[0]), "%.*s", (int)l->len, l->text);
    snprintf(g->times[g->n], sizeof(g->times[0]), "%s", l->time);
    g->streams[g->n] = l->stream;
    g->partial[g->n] = l->partial;
    g->n++;
    return !(g->stop_after && g->n >= g->stop_after);
}

/* A frame of Docker's multiplexed stream. */
static size_t frame(char *out, int stream, const char *payload)
{
    size_t n = strlen(payload);
    unsigned char h[8] = {(unsigned char)stream,
                          0,
                          0,
                          0,
                          (unsigned char)(n >> 24),
                          (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8),
                          (unsigned char)n};
    memcpy(out, h, 8);
    memcpy(out + 8, payload, n);
    return n + 8;
}

/* A demultiplexer feeding reader r, which hands lines to g. */
static void reader_setup(struct docker_log_reader *r, struct docker_demux *d, struct got *g,
                         bool tty)
{
    docker_log_reader_init(r, got_line, g);
    docker_demux_init(d, 0, false);
    d->tty = tty;
    d->emit = docker_log_reader_feed;
    d->emit_ctx = r;
}

static void feed_bytewise(struct docker_demux *d, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(docker_demux_sink((char *)data + i, 1, 1, d), 1);
}

static void test_lines_across_frames_and_reads(void **state)
{
    (void)state;
    struct got g = {0};
    struct docker_log_reader r;
    struct docker_demux d;
    reader_setup(&r, &d, &g, false);
    char buf[512];
    size_t n = 0;
    n += frame(buf + n, 1, "2026-11-22T01:28:28.000000001Z one\n2026-11-22T01:28:29.5Z tw");
    n += frame(buf + n, 2, "2026-11-22T01:28:30.25Z err line\r\n");
    n += frame(buf + n, 1, "o\n2026-11-22T01:28:31.1Z last");
    feed_bytewise(&d, buf, n);
    assert_false(docker_demux_broken(&d));
    assert_int_equal(g.n, 3);
    assert_true(docker_log_reader_flush(&r));
    assert_int_equal(g.n, 4);
    assert_string_equal(g.lines[0], "one");
    assert_string_equal(g.times[0], "2026-11-22T01:28:28.000000001Z");
    assert_int_equal(g.streams[0], 1);
    assert_string_equal(g.lines[1], "err line");
    assert_int_equal(g.streams[1], 2);
    assert_string_equal(g.times[1], "2026-11-22T01:28:30.25Z");
    assert_string_equal(g.lines[2], "two");
    assert_string_equal(g.times[2], "2026-11-22T01:28:29.5Z");
    assert_string_equal(g.lines[3], "last");
    docker_log_reader_free(&r);
    docker_demux_free(&d);
}

static void test_tty_lines_and_long_lines(void **state)
{
    (void)state;
    struct got g = {0};
    struct docker_log_reader r;
    struct docker_demux d;
    reader_setup(&r, &d, &g, true);
    const char *raw = "2026-11-22T01:28:28.1Z plain\r\nno stamp here\n";
    feed_bytewise(&d, raw, strlen(raw));
    assert_int_equal(g.n, 2);
    assert_string_equal(g.lines[0], "plain");
    assert_int_equal(g.streams[0], 1);
    assert_string_equal(g.lines[1], "no stamp here");
    assert_string_equal(g.times[1], "");

    /* a line past DOCKER_LOG_LINE_MAX comes in pieces with its time */
    size_t big = DOCKER_LOG_LINE_MAX + 10;
    char *line = malloc(big + 40);
    int k = snprintf(line, 40, "2026-11-22T01:28:29.2Z ");
    memset(line + k, 'x', big);
    line[k + big] = '\n';
    assert_int_equal(docker_demux_sink(line, 1, (size_t)k + big + 1, &d), (size_t)k + big + 1);
    free(line);
    assert_int_equal(g.n, 4);
    assert_true(g.partial[2]);
    assert_false(g.partial[3]);
    assert_string_equal(g.times[2], "2026-11-22T01:28:29.2Z");
    assert_string_equal(g.times[3], "2026-11-22T01:28:29.2Z");
    docker_log_reader_free(&r);
    docker_demux_free(&d);
}

static void test_reader_that_stops_refuses_the_rest(void **state)
{
    (void)state;
    struct got g = {.stop_after = 1};
    struct docker_log_reader r;
    struct docker_demux d;
    reader_setup(&r, &d, &g, true);
    const char *raw = "a\nb\nc\n";
    assert_int_equal(docker_demux_sink((char *)raw, 1, strlen(raw), &d), 0);
    assert_true(r.stopped);
    assert_int_equal(g.n, 1);
    docker_log_reader_free(&r);
    docker_demux_free(&d);
}

/* s as jansson dumps json_string_lossy(s): what the answer used to be. */
static void assert_written_as_jansson(const char *s, size_t n)
{
    json_t *j = json_string_lossy(s, n);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_out o = {0};
    json_out_raw(&o, "x", 1);
    json_out_string_lossy(&o, s, n);
    assert_non_null(want);
    assert_string_equal(o.data + 1, want);
    assert_int_equal(o.len, strlen(want) + 1);
    free(want);
    json_decref(j);
    json_out_free(&o);
}

#define WRITTEN_AS_JANSSON(lit) assert_written_as_jansson(lit, sizeof(lit) - 1)

static void test_string_writer_matches_jansson(void **state)
{
    (void)state;
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    assert_written_as_jansson(all, sizeof(all));
    WRITTEN_AS_JANSSON("");
    WRITTEN_AS_JANSSON("plain text");
    WRITTEN_AS_JANSSON("\"quoted\" \\ back/slash\b\f\n\r\t\x01\x1f\x7f");
    WRITTEN_AS_JANSSON("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* invalid UTF-8: a lone continuation, a cut sequence, an overlong
     * form, a surrogate, a NUL */
    WRITTEN_AS_JANSSON("\x80 \xc3 \xe2\x82 \xc0\xaf \xed\xa0\x80 a\0b");
    /* the worst case of growth: every byte escaped as \u00XX */
    char ctl[3000];
    memset(ctl, 1, sizeof(ctl));
    assert_written_as_jansson(ctl, sizeof(ctl));
    json_out o = {0};
    json_out_printf(&o, "%d-%s", 7, "x");
    json_out_reset(&o);
    json_out_printf(&o, "%s", "y");
    assert_string_equal(o.data, "y");
    json_out_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_defaults),
        cmocka_unit_test(test_query_values),
        cmocka_unit_test(test_query_refusals_name_the_parameter),
        cmocka_unit_test(test_since_forms),
        cmocka_unit_test(test_lines_across_frames_and_reads),
        cmocka_unit_test(test_tty_lines_and_long_lines),
        cmocka_unit_test(test_reader_that_stops_refuses_the_rest),
        cmocka_unit_test(test_string_writer_matches_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
