/*
 * server.c - libmicrohttpd glue: one exchange per request, from the first
 * callback (headers read) to the completion notice (response sent or
 * connection gone).
 *
 * libmicrohttpd calls the access handler several times per request: once
 * when the headers are in, once per chunk of body, and once more with no
 * data when the body is complete. The exchange (struct http_exchange, kept
 * in the connection's con_cls slot) carries the state between those calls:
 * the request id, the start time, the body buffer, and the response status
 * for the access log written at completion.
 */
#include "util/xalloc.h"
#include "http/server.h"

#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/json_depth.h"
#include "http/metrics.h"
#include "http/stream.h"
#include "http/upgrade.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* A client that keeps sending after the body limit is read and dropped up to
 * this many bytes, so it still gets its 413; beyond it the connection is
 * closed. */
#define HTTP_DISCARD_MAX (16u * 1024 * 1024)

struct http_server {
    struct MHD_Daemon *mhd;
    http_server_config cfg;
    const http_router *router;
    void *ctx;
    http_metrics *metrics; /* requests by route and status, for GET /metrics */
    uint16_t port;
    char id_prefix[9]; /* random per process, so ids differ across restarts */
    atomic_uint_fast64_t next_id;
    atomic_int in_flight;
    atomic_int upgraded; /* connections switched to another protocol, still open */
    atomic_bool stopping;
};

typedef struct http_exchange {
    http_server *server;
    http_request req;
    http_response resp;
    char *body; /* grows up to the body limit, NUL-terminated */
    size_t body_len, body_cap;
    size_t received; /* every body byte seen, kept or not */
    size_t declared; /* Content-Length, when one was sent */
    bool too_large;
    bool answered;
    bool preflight;               /* a CORS preflight from an allowed origin */
    const char *www_authenticate; /* a 401's challenge (static string) */
    http_identity who;            /* for the audit line */
    const char *route;            /* the matched route's pattern, for the metrics; NULL: none */
    int64_t start_ns;             /* time_mono_ns */
} http_exchange;

static http_exchange *exchange_new(http_server *s, const char *method, const char *url)
{
    http_exchange *x = xcalloc(1, sizeof(*x));
    x->server = s;
    x->req.method = method;
    x->req.path = url;
    x->req.ctx = s->ctx;
    x->req.router = s->router;
    x->who = (http_identity){.name = "-"};
    x->req.metrics = s->metrics;
    uint64_t n = atomic_fetch_add(&s->next_id, 1);
    snprintf(x->req.id, sizeof(x->req.id), "%s-%" PRIx64, s->id_prefix, n);
    x->start_ns = time_mono_ns();
    atomic_fetch_add(&s->in_flight, 1);
    return x;
}

static void exchange_free(http_exchange *x)
{
    http_request_clear(&x->req);
    http_response_clear(&x->resp);
    free(x->req.query); /* one array holds the query arguments and the headers */
    free(x->body);
    free(x);
}

/* Keep body bytes up to the limit; past it, drop the buffer and only count.
 * Returns false when the client has sent far too much to keep reading. */
static bool exchange_receive(http_exchange *x, const char *data, size_t size)
{
    size_t limit = x->server->cfg.body_limit;
    x->received += size;
    if (!x->too_large && x->received > limit) {
        x->too_large = true;
        free(x->body);
        x->body = NULL;
        x->body_len = x->body_cap = 0;
    }
    if (x->too_large)
        return x->received <= HTTP_DISCARD_MAX;
    if (x->body_len + size + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        while (cap < x->body_len + size + 1)
            cap *= 2;
        if (cap > limit + 1)
            cap = limit + 1;
        char *grown = xrealloc(x->body, cap);
        x->body = grown;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, data, size);
    x->body_len += size;
    x->body[x->body_len] = '\0';
    return true;
}

typedef struct kv_fill {
    http_kv *items;
    size_t n, cap;
} kv_fill;

static enum MHD_Result kv_collect(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    kv_fill *f = cls;
    if (f->n < f->cap)
        f->items[f->n++] = (http_kv){.key = key, .value = value ? value : ""};
    return MHD_YES;
}

/* Point the request at the query arguments and headers libmicrohttpd parsed.
 * The strings stay libmicrohttpd's; only the array is ours. */
static void exchange_collect_kv(http_exchange *x, struct MHD_Connection *conn)
{
    int nq = MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, NULL, NULL);
    int nh = MHD_get_connection_values(conn, MHD_HEADER_KIND, NULL, NULL);
    size_t total = (size_t)(nq > 0 ? nq : 0) + (size_t)(nh > 0 ? nh : 0);
    if (total == 0)
        return;
    http_kv *items = xcalloc(total, sizeof(*items));
    kv_fill q = {.items = items, .cap = (size_t)(nq > 0 ? nq : 0)};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, kv_collect, &q);
    kv_fill h = {.items = items + q.cap, .cap = total - q.cap};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, kv_collect, &h);
    x->req.query = items;
    x->req.nquery = q.n;
    x->req.headers = h.items;
    x->req.nheaders = h.n;
}

/* 404 text that helps: say what was asked, where the routes are listed, and
 * suggest the /api/v1 form when the client forgot the prefix. */
static void exchange_not_found(http_exchange *x, gb_err *err)
{
    const char *path = x->req.path;
    char prefixed[512];
    bool suggest = false;
    if (strncmp(path, "/api/", 5) != 0) {
        snprintf(prefixed, sizeof(prefixed), "/api/v1%s", path);
        router_match m;
        suggest = router_match_request(x->server->router, x->req.method, prefixed, &m) !=
                  ROUTER_NOT_FOUND;
        router_match_free(&m);
    }
    err_set(err, ERR_ROUTE_NOT_FOUND,
            "no route %s %s%s%s%s; the routes are listed at GET /openapi.json", x->req.method, path,
            suggest ? " (did you mean " : "", suggest ? prefixed : "", suggest ? "?)" : "");
}

/* A CORS preflight: allowed origins learn what they may send; anyone else
 * gets a 403 without a single Access-Control-* header. */
static void exchange_preflight(http_exchange *x, const char *origin, gb_err *err)
{
    const http_cors *cors = x->server->cfg.cors;
    if (!http_cors_match(cors, origin)) {
        err_set(err, ERR_FORBIDDEN,
                cors ? "cross-origin requests from %.200s are not allowed; the server's "
                       "--cors-origins lists the origins that are"
                     : "cross-origin requests (from %.200s) are off on this server; an operator "
                       "can allow origins with --cors-origins",
                origin);
        return;
    }
    x->preflight = true;
    http_response_raw(&x->resp, 204, "text/plain", NULL, 0);
    x->resp.code = ERR_OK;
}

/* Answer a request the caller may make: 404, 405, or the handler's answer. */
static void exchange_route(http_exchange *x, enum router_result found, router_match *m, char *allow,
                           size_t allow_size, gb_err *err)
{
    switch (found) {
    case ROUTER_NOT_FOUND:
        exchange_not_found(x, err);
        break;
    case ROUTER_METHOD_NOT_ALLOWED:
        snprintf(allow, allow_size, "%s", m->allow);
        err_set(err, ERR_METHOD_NOT_ALLOWED, "method %s is not allowed on %s; allowed: %s",
                x->req.method, x->req.path, m->allow);
        break;
    case ROUTER_FOUND:
        x->route = m->route->pattern;
        x->req.params = m->params;
        x->req.nparams = m->nparams;
        x->req.body = x->body ? x->body : "";
        x->req.body_len = x->body_len;
        if (x->body_len &&
            http_json_depth(x->body, x->body_len, HTTP_JSON_DEPTH_MAX) > HTTP_JSON_DEPTH_MAX)
            err_set(err, ERR_MALFORMED_JSON,
                    "request body nests arrays and objects more than %d levels deep; no gpubox "
                    "request needs more than a few",
                    HTTP_JSON_DEPTH_MAX);
        else if ((x->server->cfg.intercept
                      ? x->server->cfg.intercept(&x->req, m->route, &x->resp, err)
                      : m->route->handler(&x->req, &x->resp, err)) == 0 &&
                 x->resp.status)
            err_clear(err);
        else if (x->resp.status == 0 && err->code == ERR_OK)
            err_set(err, ERR_INTERNAL, "handler for %s %s answered nothing", m->route->method,
                    m->route->pattern);
        else if (err->code == ERR_OK)
            err_set(err, ERR_INTERNAL, "handler for %s %s failed without saying why",
                    m->route->method, m->route->pattern);
        x->req.params = NULL; /* they point into m, which goes away after this */
        x->req.nparams = 0;
        break;
    }
}

/* A ticket in place of the Authorization header (http_server_config.ticket):
 * 1 when the request carries none and a valid ticket stands for a caller
 * whose role may call the route (x->who set), 0 when it carries none, -1
 * (err set) when the ticket is no good or the role may not. */
static int exchange_ticket(http_exchange *x, const router_match *m, gb_err *err)
{
    http_server *s = x->server;
    const char *ticket = http_request_query(&x->req, "ticket");
    if (!ticket || !s->cfg.ticket || http_request_header(&x->req, "Authorization"))
        return 0;
    x->req.params = m->params;
    x->req.nparams = m->nparams;
    bool ok = s->cfg.ticket(s->ctx, m->route, &x->req, ticket, &x->who);
    x->req.params = NULL;
    x->req.nparams = 0;
    if (!ok) {
        x->www_authenticate = "Bearer realm=\"gpubox\", error=\"invalid_token\"";
        return err_set(err, ERR_UNAUTHORIZED,
                       "the ticket is unknown, spent or expired (a ticket opens one thing once, "
                       "within %d seconds of being issued); ask for a new one",
                       30);
    }
    if (x->who.role < http_access_required(m->route->access, x->req.method))
        return err_set(err, ERR_FORBIDDEN, "role %s may not %s %s", http_role_name(x->who.role),
                       x->req.method, x->req.path);
    return 1;
}

/* Check the caller and route the request; leaves the answer in x->resp and
 * the Allow methods (for a 405) in allow. The order matters: a caller
 * without a valid token learns nothing, not even whether a route exists,
 * before the token check. */
static void exchange_dispatch(http_exchange *x, struct MHD_Connection *conn, char *allow,
                              size_t allow_size)
{
    gb_err err = GB_ERR_INIT;
    http_server *s = x->server;
    exchange_collect_kv(x, conn);
    const char *origin = http_request_header(&x->req, "Origin");
    /* Browsers' requests first, before even the body limit: a name that is
     * not this server's (DNS rebinding), then a foreign page. */
    http_fetch_info fetch = {
        .method = x->req.method,
        .host = http_request_header(&x->req, "Host"),
        .origin = origin,
        .site = http_request_header(&x->req, "Sec-Fetch-Site"),
        .mode = http_request_header(&x->req, "Sec-Fetch-Mode"),
        .dest = http_request_header(&x->req, "Sec-Fetch-Dest"),
    };
    if (http_guard_check_host(s->cfg.guard, fetch.host, &err) < 0 ||
        http_guard_check_origin(&fetch, s->cfg.tls_cert_pem != NULL, s->cfg.cors, &err) < 0) {
        x->route = "(refused)";
        http_response_error(&x->resp, &err);
        return;
    }
    if (x->too_large) {
        err_set(&err, ERR_BODY_TOO_LARGE,
                "request body is %zu bytes, over the limit of %zu bytes (1 MiB)",
                x->declared > x->received ? x->declared : x->received, s->cfg.body_limit);
        http_response_error(&x->resp, &err);
        return;
    }
    if (http_cors_is_preflight(x->req.method, origin,
                               http_request_header(&x->req, "Access-Control-Request-Method"))) {
        exchange_preflight(x, origin, &err);
        if (err.code != ERR_OK)
            http_response_error(&x->resp, &err);
        return;
    }

    bool get = strcmp(x->req.method, "GET") == 0 || strcmp(x->req.method, "HEAD") == 0;
    const http_static_file *file = get ? http_static_find(s->cfg.statics, x->req.path) : NULL;
    if (file) {
        x->route = "(console)";
        http_static_answer(file, http_request_header(&x->req, "Accept-Encoding"),
                           http_request_header(&x->req, "If-None-Match"), &x->resp);
        return;
    }

    router_match m;
    enum router_result found = router_match_request(s->router, x->req.method, x->req.path, &m);
    int by_ticket = found == ROUTER_FOUND ? exchange_ticket(x, &m, &err) : 0;
    if (by_ticket == 0 && found == ROUTER_FOUND && s->cfg.node_acting &&
        !http_request_header(&x->req, "Authorization")) {
        /* A node's own request: its proof (over the body too) stands for
         * a token. */
        x->req.body = x->body ? x->body : "";
        x->req.body_len = x->body_len;
        if (s->cfg.node_acting(s->ctx, m.route, &x->req, &x->who))
            by_ticket = 1;
    }
    if (by_ticket < 0) {
        /* err says why */
    } else if (!by_ticket &&
               http_auth_check(s->cfg.auth,
                               found == ROUTER_FOUND ? m.route->access : HTTP_ACCESS_VIEWER,
                               x->req.method, x->req.path,
                               http_request_header(&x->req, "Authorization"), &x->who, &err) < 0) {
        if (err.code == ERR_UNAUTHORIZED)
            x->www_authenticate = x->who.bad_token
                                      ? "Bearer realm=\"gpubox\", error=\"invalid_token\""
                                      : "Bearer realm=\"gpubox\"";
    } else {
        x->req.who = &x->who;
        exchange_route(x, found, &m, allow, allow_size, &err);
    }
    router_match_free(&m);
    if (err.code != ERR_OK)
        http_response_error(&x->resp, &err);
}

/* Headers every answer may carry beyond the body's own: CORS for allowed
 * origins, the 401 challenge, Allow for a 405. */
static void exchange_add_headers(http_exchange *x, struct MHD_Connection *conn,
                                 struct MHD_Response *r, const char *allow)
{
    http_server *s = x->server;
    MHD_add_response_header(r, "X-Request-Id", x->req.id);
    if (allow[0])
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (x->www_authenticate)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, x->www_authenticate);
    if (s->cfg.cors) {
        const char *origin =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
        const char *allowed = http_cors_match(s->cfg.cors, origin);
        MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin");
        if (allowed) {
            MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
            MHD_add_response_header(r, "Access-Control-Expose-Headers", HTTP_CORS_EXPOSE_HEADERS);
        }
        if (allowed && x->preflight) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", HTTP_CORS_ALLOW_METHODS);
            MHD_add_response_header(r, "Access-Control-Allow-Headers", HTTP_CORS_ALLOW_HEADERS);
            MHD_add_response_header(r, "Access-Control-Max-Age", HTTP_CORS_MAX_AGE);
        }
    }
    if (atomic_load(&s->stopping))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* libmicrohttpd's reader of a streamed body (http/stream.h), on the
 * connection's own thread, which may block here. */
static ssize_t exchange_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    ssize_t n = http_stream_read(cls, buf, max);
    return n > 0    ? n
           : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM
                    : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void exchange_stream_free(void *cls)
{
    http_stream_close(cls);
}

/* A response of unknown length (chunked) read from x's stream, which it
 * then owns; NULL (the stream closed) when libmicrohttpd cannot make one. */
static struct MHD_Response *exchange_stream_response(http_exchange *x, struct MHD_Connection *conn)
{
    http_stream *st = x->resp.stream;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    http_stream_attach(st, ci ? (int)ci->connect_fd : -1, &x->server->stopping);
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 256 * 1024, exchange_stream_read, st, exchange_stream_free);
    if (!r) {
        http_stream_close(st);
        x->resp.stream = NULL;
    }
    return r;
}

/* A switched connection's session: the handler's function on a thread of
 * its own, then the close. */
typedef struct upgrade_session {
    http_server *server;
    http_upgrade *up;
    struct MHD_UpgradeResponseHandle *urh;
    int fd;
    char *extra;
    size_t extra_len;
    char id[HTTP_REQUEST_ID_MAX];
} upgrade_session;

static void *upgrade_session_main(void *arg)
{
    upgrade_session *u = arg;
    log_set_request_id(u->id);
    u->up->fn(u->up->ctx, u->fd, u->extra, u->extra_len, &u->server->stopping);
    http_upgrade_free(u->up);
    MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
    log_set_request_id(NULL);
    atomic_fetch_sub(&u->server->upgraded, 1);
    free(u->extra);
    free(u);
    return NULL;
}

/* libmicrohttpd's word that the 101 is out: start the session. */
static void server_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls,
                            const char *extra_in, size_t extra_in_size, MHD_socket sock,
                            struct MHD_UpgradeResponseHandle *urh)
{
    (void)conn;
    http_server *s = cls;
    http_exchange *x = con_cls;
    upgrade_session *u = xcalloc(1, sizeof(*u));
    *u = (upgrade_session){.server = s, .urh = urh, .fd = (int)sock};
    if (x) {
        u->up = x->resp.upgrade;
        x->resp.upgrade = NULL;
        snprintf(u->id, sizeof(u->id), "%s", x->req.id);
    }
    if (extra_in_size) {
        u->extra = xmalloc(extra_in_size);
        memcpy(u->extra, extra_in, extra_in_size);
        u->extra_len = extra_in_size;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&s->upgraded, 1);
    if (!u->up || pthread_create(&t, &attr, upgrade_session_main, u) != 0) {
        log_warn("http: cannot serve a switched connection (no thread)");
        http_upgrade_free(u->up);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        atomic_fetch_sub(&s->upgraded, 1);
        free(u->extra);
        free(u);
    }
    pthread_attr_destroy(&attr);
}

static struct MHD_Response *exchange_upgrade_response(http_exchange *x)
{
    struct MHD_Response *r = MHD_create_response_for_upgrade(server_upgraded, x->server);
    if (r) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket");
        MHD_add_response_header(r, "Sec-WebSocket-Accept", x->resp.upgrade->accept);
    }
    return r;
}

static enum MHD_Result exchange_answer(http_exchange *x, struct MHD_Connection *conn)
{
    http_server *s = x->server;
    char allow[96] = "";
    log_set_request_id(x->req.id);
    exchange_dispatch(x, conn, allow, sizeof(allow));
    log_set_request_id(NULL);

    http_response *resp = &x->resp;
    struct MHD_Response *r =
        resp->upgrade  ? exchange_upgrade_response(x)
        : resp->stream ? exchange_stream_response(x, conn)
        : resp->static_body
            ? MHD_create_response_from_buffer(resp->body_len, (void *)resp->static_body,
                                              MHD_RESPMEM_PERSISTENT)
            : MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    if (!r)
        return MHD_NO;
    resp->body = NULL; /* libmicrohttpd frees it now */
    resp->stream = NULL;
    if (!resp->upgrade)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                resp->content_type ? resp->content_type : "application/json");
    for (unsigned i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->headers[i][0], resp->headers[i][1]);
    exchange_add_headers(x, conn, r, allow);
    if (resp->envelope && s->cfg.compat_http_200)
        resp->status = 200;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    x->answered = true;
    return ret;
}

static enum MHD_Result server_access(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     const char *upload_data, size_t *upload_data_size,
                                     void **con_cls)
{
    (void)version;
    http_server *s = cls;
    http_exchange *x = *con_cls;
    if (!x) {
        if (!(x = exchange_new(s, method, url)))
            return MHD_NO;
        *con_cls = x;
        /* An oversized body is known from Content-Length. A client waiting
         * for "100 Continue", or announcing more than is worth draining, is
         * answered now (only this first call may answer before the body):
         * it sends no body, or loses its connection. Any other client is
         * already sending; its body is read and dropped, and the 413 comes
         * after it, so the client is not cut off mid-send before it can
         * read the answer. */
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.body_limit) {
            x->too_large = true;
            x->declared = strtoull(cl, NULL, 10);
            if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) ||
                x->declared > HTTP_DISCARD_MAX)
                return exchange_answer(x, conn);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (x->answered)
            return MHD_YES;
        return exchange_receive(x, upload_data, n) ? MHD_YES : MHD_NO;
    }
    if (x->answered)
        return MHD_YES;
    return exchange_answer(x, conn);
}

static bool server_read_only(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

static void server_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                             enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    http_server *s = cls;
    http_exchange *x = *con_cls;
    if (!x)
        return;
    *con_cls = NULL;
    double ms = time_since_s(x->start_ns) * 1e3;
    char result[64];
    if (x->answered && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        http_metrics_observe(s->metrics, x->route, x->req.method, x->resp.status, ms / 1e3);
    if (x->answered && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        snprintf(result, sizeof(result), "%d code=%d", x->resp.status, x->resp.code);
    else
        snprintf(result, sizeof(result), "aborted (%s)",
                 toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED   ? "timeout"
                 : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "shutdown"
                 : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT    ? "client closed"
                                                                 : "connection error");
    log_set_request_id(x->req.id);
    log_info("%s %s %s %s%.3fms", x->req.method, x->req.path, result,
             result[0] == 'a' ? "after " : "", ms);
    /* The audit trail: every request that may change something, refused or
     * not, with who asked (a token's name, never the token). */
    if (!server_read_only(x->req.method))
        log_info("audit: user=%s role=%s %s %s -> %s", x->who.name, http_role_name(x->who.role),
                 x->req.method, x->req.path, result);
    log_set_request_id(NULL);
    exchange_free(x);
    atomic_fetch_sub(&s->in_flight, 1);
}

static void server_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    log_warn("http: %s", line);
}

static int server_resolve(const char *host, uint16_t port, struct sockaddr_storage *addr,
                          gb_err *err)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return err_set(err, ERR_INVALID_PARAMS, "cannot resolve listen address '%s': %s", host,
                       gai_strerror(rc));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (addr->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)addr)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)addr)->sin_port = htons(port);
    return 0;
}

http_server *http_server_start(const http_server_config *cfg, const http_router *router, void *ctx,
                               gb_err *err)
{
    struct sockaddr_storage addr = {0};
    if (server_resolve(cfg->host, cfg->port, &addr, err) < 0)
        return NULL;
    _cleanup_free_ http_server *s = xcalloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->cfg.host = NULL; /* not kept: only needed to bind */
    if (!s->cfg.body_limit)
        s->cfg.body_limit = HTTP_BODY_LIMIT_DEFAULT;
    s->router = router;
    s->ctx = ctx;
    s->metrics = http_metrics_new();
    uint32_t rnd = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        rnd ^= (uint32_t)clock();
    snprintf(s->id_prefix, sizeof(s->id_prefix), "%08" PRIx32, rnd);
    atomic_init(&s->next_id, 1);

    bool tls = cfg->tls_cert_pem || cfg->tls_key_pem;
    if (tls && (!cfg->tls_cert_pem || !cfg->tls_key_pem)) {
        err_set(err, ERR_INVALID_PARAMS, "HTTPS needs both a certificate and its private key");
        return NULL;
    }
    if (tls && !http_server_tls_supported()) {
        err_set(err, ERR_INVALID_PARAMS,
                "this libmicrohttpd (%s) was built without TLS support, so --tls-cert cannot be "
                "served; install a libmicrohttpd built with GnuTLS (Debian's is) or terminate "
                "TLS in a proxy",
                MHD_get_version());
        return NULL;
    }

    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_ALLOW_UPGRADE;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* Options that depend on the configuration go in one array. TLS 1.2 is
     * the oldest version offered: older ones have known breaks. */
    struct MHD_OptionItem extra[6];
    size_t n = 0;
    if (cfg->per_ip_limit)
        extra[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                             (intptr_t)cfg->per_ip_limit, NULL};
    if (tls) {
        flags |= MHD_USE_TLS;
        extra[n++] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cfg->tls_cert_pem};
        extra[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)cfg->tls_key_pem};
        extra[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                             (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
    }
    extra[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    /* The logger option goes first so even errors about later options
     * reach gpubox's log. */
    s->mhd = MHD_start_daemon(
        flags, cfg->port, NULL, NULL, server_access, s, MHD_OPTION_EXTERNAL_LOGGER, server_mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
        cfg->connection_limit, MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, server_completed, s, MHD_OPTION_ARRAY, extra, MHD_OPTION_END);
    if (!s->mhd) {
        http_metrics_free(s->metrics);
        err_set(err, ERR_INVALID_PARAMS,
                tls ? "cannot serve HTTPS on %s:%u: the address is in use, not local or not "
                      "permitted, or the certificate and key do not load (PEM, a matching pair; "
                      "the log above says which); check --listen, --tls-cert and --tls-key"
                    : "cannot listen on %s:%u (address in use, not local, or not permitted); "
                      "choose another --listen",
                cfg->host, cfg->port);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    return steal_ptr(&s);
}

uint16_t http_server_port(const http_server *s)
{
    return s->port;
}

bool http_server_tls_supported(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

void http_server_stop(http_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    MHD_socket listen_fd = MHD_quiesce_daemon(s->mhd);
    /* Quiescing only stops accept(); the kernel would still complete
     * handshakes into the backlog. Shutting the socket down makes new
     * clients get a refusal at once instead of hanging. */
    if (listen_fd != MHD_INVALID_SOCKET)
        shutdown(listen_fd, SHUT_RDWR);
    /* Requests already being served finish; idle keep-alive connections are
     * simply closed by MHD_stop_daemon below. */
    unsigned waited_ms = 0, limit_ms = s->cfg.shutdown_timeout_s * 1000;
    while (atomic_load(&s->in_flight) > 0 && waited_ms < limit_ms) {
        struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
        nanosleep(&tick, NULL);
        waited_ms += 10;
    }
    /* Switched connections (terminals) see the stop flag within a second. */
    while (atomic_load(&s->upgraded) > 0 && waited_ms < limit_ms + 5000) {
        struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
        nanosleep(&tick, NULL);
        waited_ms += 10;
    }
    int left = atomic_load(&s->in_flight);
    if (left > 0)
        log_warn("http: %d request(s) still running after %us; closing their connections", left,
                 s->cfg.shutdown_timeout_s);
    MHD_stop_daemon(s->mhd);
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    http_metrics_free(s->metrics);
    free(s);
}
