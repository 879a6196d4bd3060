/*
 * terminal.c - GET /api/v1/replicaSet/{name}/terminal (a WebSocket) and
 * POST .../terminal/ticket (docs/access.md).
 *
 * The handler checks the handshake and the query, opens the terminal (so
 * a refusal - 404, 409, 429 - is an ordinary envelope), and switches to
 * the WebSocket, whose session joins it to the process's stream through
 * the pump (http/ws_pump.h). The messages:
 *   client binary   the process's input
 *   client text     a control message: {"resize": {"cols": C, "rows": R}}
 *                   or {"eof": true} (close the process's input)
 *   server binary   the process's output; without a TTY (?tty=false) each
 *                   begins with one byte saying the stream: 1 stdout, 2
 *                   stderr
 *   server text     {"exit": CODE} once the process ended, then the close
 *
 * In a fleet, a terminal of a set on another node is forwarded there with
 * its upgrade (api_terminal_forward): that node answers the handshake and
 * runs the terminal; this one carries the bytes (http/relay.h). A ticket
 * is the other node's too (it issued it), so it is redeemed there: here
 * it only lets the request through to be forwarded.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/relay.h"
#include "http/upgrade.h"
#include "http/ws_pump.h"
#include "service/nodes/nodes.h"
#include "service/replicaset/replicaset.h"
#include "service/tickets/tickets.h"
#include "util/cleanup.h"
#include "util/log.h"

#define TERMINAL_MAX_ARGS 64

typedef struct terminal_session {
    app *a;
    replicaset_terminal *t;
    bool tty;
    bool ended; /* the process ended by itself */
    ws_pump *pump;
} terminal_session;

static void terminal_session_free(void *ctx)
{
    terminal_session *s = ctx;
    replicaset_terminal_close(s->t, !s->ended);
    free(s);
}

static void terminal_emit(void *ctx, int stream, const uint8_t *data, size_t n)
{
    terminal_session *s = ctx;
    uint8_t prefix = (uint8_t)stream;
    ws_pump_send(s->pump, &prefix, s->tty ? 0 : 1, data, n);
}

static void terminal_peer_data(void *ctx, ws_pump *p, const uint8_t *data, size_t n)
{
    terminal_session *s = ctx;
    s->pump = p;
    if (replicaset_terminal_output(s->t, data, n, terminal_emit, s) < 0)
        log_warn("terminal: the process's stream is not in Docker's format; output dropped");
}

static int terminal_client_text(void *ctx, const char *text, size_t len, char *why, size_t size)
{
    terminal_session *s = ctx;
    _cleanup_json_ json_t *msg = json_loadb(text, len, 0, NULL);
    json_t *resize = json_object_get(msg, "resize");
    if (resize) {
        json_t *c = json_object_get(resize, "cols"), *r = json_object_get(resize, "rows");
        gb_err err = GB_ERR_INIT;
        if (!json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
            json_integer_value(r) < 1 || json_integer_value(c) > RS_TERMINAL_SIZE_MAX ||
            json_integer_value(r) > RS_TERMINAL_SIZE_MAX) {
            snprintf(why, size, "resize needs cols and rows from 1 to %u", RS_TERMINAL_SIZE_MAX);
            return -1;
        }
        if (replicaset_terminal_resize(s->t, (unsigned)json_integer_value(c),
                                       (unsigned)json_integer_value(r), &err) < 0)
            log_info("terminal: resize: %s", err.msg); /* the process may have just ended */
        return 0;
    }
    if (json_is_true(json_object_get(msg, "eof")))
        return 1;
    snprintf(why, size, "unknown control message; send {\"resize\":{...}} or {\"eof\":true}");
    return -1;
}

static void terminal_peer_end(void *ctx, char *text, size_t size)
{
    terminal_session *s = ctx;
    s->ended = true;
    snprintf(text, size, "{\"exit\":%ld}", replicaset_terminal_exit_code(s->t));
}

static const ws_pump_ops terminal_ops = {
    .peer_data = terminal_peer_data,
    .client_text = terminal_client_text,
    .peer_end = terminal_peer_end,
};

static void terminal_session_run(void *ctx, int fd, const char *extra, size_t extra_len,
                                 const atomic_bool *stopping)
{
    terminal_session *s = ctx;
    ws_pump_config cfg = {
        .client_fd = fd,
        .extra = extra,
        .extra_len = extra_len,
        .peer_fd = replicaset_terminal_fd(s->t),
        .idle_ms = (long)replicaset_terminal_idle_s(s->a) * 1000,
        .stop = stopping,
        .ops = &terminal_ops,
        .ctx = s,
    };
    enum ws_pump_end end = ws_pump_run(&cfg);
    log_info("terminal: ended: %s", ws_pump_end_name(end));
}

/* An unsigned query number from 1 to max; 0 when absent. */
static int terminal_query_size(const http_request *req, const char *key, unsigned *out, gb_err *err)
{
    const char *v = http_request_query(req, key);
    *out = 0;
    if (!v)
        return 0;
    char *end = NULL;
    unsigned long n = strtoul(v, &end, 10);
    if (!*v || *end || n < 1 || n > RS_TERMINAL_SIZE_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%s is '%.20s'; give a number from 1 to %u", key, v,
                       RS_TERMINAL_SIZE_MAX);
    *out = (unsigned)n;
    return 0;
}

/* The query: cmd (repeated: one per argument), tty, cols, rows. */
static int terminal_query(const http_request *req, const char **argv,
                          replicaset_terminal_request *q, gb_err *err)
{
    *q = (replicaset_terminal_request){.cmd = argv, .tty = true};
    for (size_t i = 0; i < req->nquery; i++) {
        if (strcmp(req->query[i].key, "cmd") != 0)
            continue;
        if (q->ncmd == TERMINAL_MAX_ARGS)
            return err_set(err, ERR_INVALID_PARAMS, "cmd: at most %d arguments", TERMINAL_MAX_ARGS);
        if (!req->query[i].value[0])
            return err_set(err, ERR_INVALID_PARAMS,
                           "cmd is empty; leave it out for a shell, or name a program");
        argv[q->ncmd++] = req->query[i].value;
    }
    const char *tty = http_request_query(req, "tty");
    if (tty && strcmp(tty, "true") != 0 && strcmp(tty, "false") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "tty is '%.20s'; true or false", tty);
    q->tty = !tty || strcmp(tty, "true") == 0;
    if (terminal_query_size(req, "cols", &q->cols, err) < 0 ||
        terminal_query_size(req, "rows", &q->rows, err) < 0)
        return -1;
    if (!q->cols != !q->rows)
        return err_set(err, ERR_INVALID_PARAMS, "give cols and rows together, or neither");
    return 0;
}

int api_replicaset_terminal(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = http_request_param(req, "name");
    const char *argv[TERMINAL_MAX_ARGS];
    replicaset_terminal_request q;
    if (http_websocket_check(req, err) < 0 || terminal_query(req, argv, &q, err) < 0)
        return -1;
    replicaset_terminal *t = NULL;
    if (replicaset_terminal_open(req->ctx, name, &q, &t, err) < 0)
        return -1;
    terminal_session *s = xcalloc(1, sizeof(*s));
    *s = (terminal_session){.a = req->ctx, .t = t, .tty = q.tty};
    return http_response_websocket(resp, req, terminal_session_run, s, terminal_session_free, err);
}

int api_replicaset_terminal_ticket(http_request *req, http_response *resp, gb_err *err)
{
    char ticket[TICKET_SIZE];
    if (replicaset_terminal_ticket(req->ctx, http_request_param(req, "name"), ticket, err) < 0)
        return -1;
    return http_response_data(
        resp, json_pack("{s:s, s:i}", "ticket", ticket, "expiresInSeconds", TICKET_TTL_S), err);
}

/* ---- a fleet: the terminal of a set on another node -------------------- */

typedef struct terminal_relay {
    int fd; /* the connection to the node, switched */
} terminal_relay;

static void terminal_relay_free(void *ctx)
{
    terminal_relay *r = ctx;
    close(r->fd);
    free(r);
}

static void terminal_relay_run(void *ctx, int fd, const char *extra, size_t extra_len,
                               const atomic_bool *stopping)
{
    terminal_relay *r = ctx;
    /* A terminal's output comes in small pieces (an echo, a command's
     * output, then the prompt): each goes on at once, not after the
     * client's delayed acknowledgement of the one before (Nagle). The
     * node's pump does the same on its side. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    http_relay(fd, extra, extra_len, r->fd, stopping);
}

/* The node's refusal (its envelope after the head) as this node's answer. */
static int terminal_forward_refused(int fd, long status, const char *head, http_response *resp)
{
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    size_t len = cl ? strtoul(cl + 17, NULL, 10) : 0;
    if (len > 65536)
        len = 65536;
    char *body = xmalloc(len + 1);
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, body + got, len - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    body[got] = '\0';
    json_t *j = json_loadb(body, got, 0, NULL);
    int code = (int)json_integer_value(json_object_get(j, "code"));
    json_decref(j);
    http_response_raw(resp, (int)status, "application/json", body, got);
    resp->code = code;
    resp->envelope = true;
    return 0;
}

int api_terminal_forward(app *a, const char *node, http_request *req, http_response *resp,
                         gb_err *err)
{
    if (http_websocket_check(req, err) < 0)
        return -1;
    char advertise[NODES_URL_MAX];
    if (nodes_reach(a, node, advertise, sizeof(advertise), err) < 0)
        return -1;
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    nodes_request nr = api_fleet_request_of(req, pq, 0);
    _cleanup_free_ char *extra =
        xasprintf("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: %s\r\n",
                  http_request_header(req, "Sec-WebSocket-Key"));
    char head[8192];
    long status = 0;
    int fd = -1;
    if (nodes_upgrade(a, advertise, &nr, extra, &fd, &status, head, sizeof(head), err) < 0)
        return err_prefix(err, "forwarding the terminal to node %s", node);
    if (status != 101) {
        terminal_forward_refused(fd, status, head, resp);
        close(fd);
        return 0;
    }
    terminal_relay *r = xcalloc(1, sizeof(*r));
    r->fd = fd;
    /* The same key gives the same accept: the client cannot tell the
     * node that answered from this one. */
    return http_response_websocket(resp, req, terminal_relay_run, r, terminal_relay_free, err);
}

bool api_ticket_check(void *ctx, const http_route *route, const http_request *req,
                      const char *ticket, http_identity *who)
{
    app *a = ctx;
    if (route->handler != api_replicaset_terminal)
        return false;
    nodes_route to;
    gb_err ignored = GB_ERR_INIT;
    if (a->fleet &&
        nodes_route_name(a, NODES_REPLICASET, http_request_param(req, "name"), false, &to,
                         &ignored) == 0 &&
        to.where == NODES_FORWARD) {
        /* Issued and redeemed by the set's node: pass it on unspent. */
        snprintf(who->name, sizeof(who->name), "%s", "(ticket)");
        who->role = HTTP_ROLE_USER;
        who->bad_token = false;
        return true;
    }
    caller c;
    if (!tickets_redeem(ticket, "terminal", http_request_param(req, "name"), &c))
        return false;
    snprintf(who->name, sizeof(who->name), "%s", c.name);
    who->role = c.role == USER_ROLE_ADMIN    ? HTTP_ROLE_ADMIN
                : c.role == USER_ROLE_USER   ? HTTP_ROLE_USER
                : c.role == USER_ROLE_VIEWER ? HTTP_ROLE_VIEWER
                                             : HTTP_ROLE_NONE;
    who->bad_token = false;
    return true;
}
