/*
 * client.c - one HTTP call to gpuboxd: libcurl, the JSON envelope, and the
 * exit code an answer means.
 *
 * One curl handle lives for the whole run (ctx->curl), so the calls of one
 * command (e.g. start: read the state, then continue or restart; or
 * polling an operation) share a kept-alive connection.
 *
 * Exit codes from envelope codes (cli.h): not found 3, conflict with the
 * state 4, not enough GPUs or ports 5, a request the server refuses as bad
 * 2 (it is a usage error all the same: a bad size, name or image), anything
 * else 1 (a refusal by role, 1109, or by quota, 1115, among them). A route the server does not have
 * (404 code 1101, 405 code 1102) means an older gpuboxd: the message says so rather than "no
 * route".
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "util/cleanup.h"
#include "util/err.h"

typedef struct client_buf {
    char *data;
    size_t len;
} client_buf;

static size_t client_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    client_buf *b = userdata;
    size_t n = size * nmemb;
    char *grown = xrealloc(b->data, b->len + n + 1);
    memcpy(grown + b->len, ptr, n);
    b->data = grown;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

int cli_exit_for_code(int code)
{
    switch (code) {
    case ERR_OK:
        return CLI_EXIT_OK;
    case ERR_NOT_FOUND:
    case ERR_IMAGE_NOT_FOUND:
        return CLI_EXIT_NOT_FOUND;
    case ERR_GPU_NOT_ENOUGH:
    case ERR_PORT_NOT_ENOUGH:
    case ERR_CPU_NOT_ENOUGH:
        return CLI_EXIT_SHORTAGE;
    case ERR_ROUTE_NOT_FOUND:
    case ERR_METHOD_NOT_ALLOWED:
    case CLI_CODE_QUOTA_EXCEEDED: /* 403, as a refusal by role is */
        return CLI_EXIT_ERROR;
    }
    switch (err_http_status(code)) {
    case 409:
        return CLI_EXIT_CONFLICT;
    case 400:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_ERROR;
    }
}

char *cli_escape(cli_ctx *ctx, const char *segment)
{
    char *curl_owned = curl_easy_escape(ctx->curl, segment, 0);
    char *s = curl_owned ? xstrdup(curl_owned) : NULL;
    curl_free(curl_owned);
    if (!s) {
        fputs("gpubox: out of memory\n", ctx->err);
        exit(CLI_EXIT_ERROR);
    }
    return s;
}

void cli_reply_free(cli_reply *r)
{
    json_decref(r->body);
    *r = (cli_reply){0};
}

void cli_print_json(cli_ctx *ctx, const json_t *data)
{
    json_dumpf(data ? data : json_null(), ctx->out, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', ctx->out);
}

/* Send the request; the raw answer into buf. 0, or an exit code after
 * saying why gpuboxd could not be reached. */
static int client_perform_to(cli_ctx *ctx, const char *method, const char *url, const char *body,
                             size_t (*write)(char *, size_t, size_t, void *), void *wdata,
                             long *status)
{
    CURL *c = ctx->curl;
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
    if (body)
        headers = curl_slist_append(headers, "Content-Type: application/json");
    _cleanup_free_ char *auth = NULL;
    if (ctx->token && ctx->token[0]) {
        auth = xasprintf("Authorization: Bearer %s", ctx->token);
        headers = curl_slist_append(headers, auth);
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (!body && strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    if (strcmp(method, "GET") == 0)
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, wdata);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = ctx->perform ? (CURLcode)ctx->perform(ctx) : curl_easy_perform(c);
    curl_slist_free_all(headers);
    if (rc == CURLE_WRITE_ERROR)
        return CLI_EXIT_ERROR; /* the sink stopped it, and said why if it had to */
    if (rc != CURLE_OK) {
        return cli_fail(ctx, CLI_EXIT_ERROR,
                        "cannot reach gpuboxd at %s: %s (is it running? set --host or "
                        "GPUBOX_HOST)",
                        ctx->host, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

static int client_perform(cli_ctx *ctx, const char *method, const char *url, const char *body,
                          client_buf *buf, long *status)
{
    return client_perform_to(ctx, method, url, body, client_write, buf, status);
}

int cli_call(cli_ctx *ctx, const char *method, const char *path, const json_t *body, cli_reply *r)
{
    return cli_request(ctx, method, path, body, r, true);
}

static int client_reply_of(cli_ctx *ctx, const char *method, const char *path, const char *raw,
                           cli_reply *r, bool report);

int cli_request(cli_ctx *ctx, const char *method, const char *path, const json_t *body,
                cli_reply *r, bool report)
{
    *r = (cli_reply){0};
    _cleanup_free_ char *url = xasprintf("%s%s", ctx->host, path);
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    client_buf buf = {0};
    int rc = client_perform(ctx, method, url, text, &buf, &r->status);
    _cleanup_free_ char *raw = buf.data;
    if (rc)
        return rc;
    return client_reply_of(ctx, method, path, raw, r, report);
}

int cli_reply_parse(cli_ctx *ctx, const char *method, const char *path, const char *raw,
                    long status, cli_reply *r)
{
    *r = (cli_reply){.status = status};
    return client_reply_of(ctx, method, path, raw, r, true);
}

/* r from the answer's text raw: 0 for a success envelope, else the exit
 * code (the error printed when report). */
static int client_reply_of(cli_ctx *ctx, const char *method, const char *path, const char *raw,
                           cli_reply *r, bool report)
{
    json_error_t jerr;
    r->body = raw ? json_loads(raw, 0, &jerr) : NULL;
    json_t *code = json_object_get(r->body, "code");
    if (!json_is_integer(code)) {
        return cli_fail(ctx, CLI_EXIT_ERROR,
                        "%s %s answered HTTP %ld without a gpubox envelope; is %s a gpuboxd?",
                        method, path, r->status, ctx->host);
    }
    r->code = (int)json_integer_value(code);
    r->msg = json_string_value(json_object_get(r->body, "msg"));
    r->data = json_object_get(r->body, "data");
    if (r->code == ERR_OK)
        return 0;
    if (!report)
        return cli_exit_for_code(r->code);
    if (r->code == ERR_ROUTE_NOT_FOUND || r->code == ERR_METHOD_NOT_ALLOWED)
        return cli_fail(ctx, CLI_EXIT_ERROR,
                        "not supported by this server: %s %s is not a route of the gpuboxd at %s "
                        "(an older version?)",
                        method, path, ctx->host);
    /* --json: what the message leaves out (a 1013's free cards) on stdout. */
    if (ctx->json && r->data && !json_is_null(r->data))
        cli_print_json(ctx, r->data);
    char words[1024];
    return cli_fail(ctx, cli_exit_for_code(r->code), "%s",
                    r->msg ? cli_words(r->msg, words, sizeof(words)) : "(no message)");
}

/* cli_get_stream's sink: lines of a 200 NDJSON answer go to the callback
 * as they complete; any other answer is gathered whole (an envelope). */
typedef struct client_stream {
    cli_ctx *ctx;
    int (*on_line)(void *arg, const char *line, size_t n);
    void *arg;
    int mode; /* 0 not known yet, 1 lines, 2 whole */
    client_buf buf;
    int stopped; /* what on_line answered when it asked to stop */
} client_stream;

static size_t client_stream_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    client_stream *st = userdata;
    size_t n = size * nmemb;
    if (st->mode == 0) {
        long status = 0;
        const char *type = NULL;
        curl_easy_getinfo(st->ctx->curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(st->ctx->curl, CURLINFO_CONTENT_TYPE, &type);
        st->mode = status == 200 && type && strncmp(type, "application/x-ndjson", 20) == 0 ? 1 : 2;
    }
    client_write(ptr, size, nmemb, &st->buf);
    if (st->mode == 2)
        return n;
    char *start = st->buf.data, *nl;
    while ((nl = memchr(start, '\n', st->buf.len - (size_t)(start - st->buf.data)))) {
        int rc = st->on_line(st->arg, start, (size_t)(nl - start));
        start = nl + 1;
        if (rc) {
            st->stopped = rc;
            return 0;
        }
    }
    size_t left = st->buf.len - (size_t)(start - st->buf.data);
    memmove(st->buf.data, start, left);
    st->buf.len = left;
    st->buf.data[left] = '\0';
    return n;
}

int cli_get_stream(cli_ctx *ctx, const char *path,
                   int (*on_line)(void *arg, const char *line, size_t n), void *arg, cli_reply *r)
{
    *r = (cli_reply){0};
    _cleanup_free_ char *url = xasprintf("%s%s", ctx->host, path);
    client_stream st = {.ctx = ctx, .on_line = on_line, .arg = arg};
    long status = 0;
    int rc = client_perform_to(ctx, "GET", url, NULL, client_stream_write, &st, &status);
    _cleanup_free_ char *raw = st.buf.data;
    r->status = status;
    if (st.stopped)
        return st.stopped;
    if (rc)
        return rc;
    if (st.mode == 1) {
        if (st.buf.len)
            return on_line(arg, raw, st.buf.len);
        return 0;
    }
    return client_reply_of(ctx, "GET", path, raw ? raw : "", r, true);
}
