/*
 * server.h - the HTTP server: libmicrohttpd with one thread per connection,
 * feeding requests through the router to handlers.
 *
 * For each request the server assigns an id (returned in X-Request-Id and
 * set as the thread's log request id while the handler runs), reads the body
 * up to a limit (413 beyond it: known from Content-Length up front, counted
 * for chunked bodies; an oversized body is drained, never buffered, so the
 * client can read its 413, unless it waits for "100 Continue"), routes
 * (404 / 405 with Allow), runs the handler, sends the JSON response and
 * writes one access log line: method, path, status, code, duration.
 *
 * Before anything else, the server refuses a Host it does not answer to
 * (421) and a request from a foreign web page (403): http/origin.h. Then
 * it answers CORS preflights (http/cors.h),
 * checks the caller's token against the route (http/auth.h: 401 with
 * WWW-Authenticate, 403) and refuses a body nested deeper than
 * HTTP_JSON_DEPTH_MAX (http/json_depth.h). Every request that may change
 * something (any method but GET, HEAD and OPTIONS) gets an audit log line:
 * who (the token's name), what, and the result.
 *
 * With a certificate and key the server speaks HTTPS only (GnuTLS inside
 * libmicrohttpd). Connections are bounded in number, per client address,
 * and in idle time, with one thread each, so slow clients hold a thread
 * each but never the threads of others.
 *
 * Stopping is graceful: the listening socket is closed first, requests in
 * flight get up to shutdown_timeout_s to finish, then every connection is
 * closed.
 */
#ifndef GPUBOX_HTTP_SERVER_H
#define GPUBOX_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/auth.h"
#include "http/cors.h"
#include "http/origin.h"
#include "http/router.h"
#include "http/static.h"
#include "util/err.h"

#define HTTP_BODY_LIMIT_DEFAULT (1024 * 1024)

typedef struct http_server_config {
    const char *host;              /* numeric or resolvable address, "127.0.0.1" */
    uint16_t port;                 /* 0: any free port (see http_server_port) */
    unsigned connection_limit;     /* simultaneous connections */
    unsigned connection_timeout_s; /* idle connections are closed after this */
    size_t body_limit;             /* bytes; 0 = HTTP_BODY_LIMIT_DEFAULT */
    unsigned shutdown_timeout_s;   /* how long stop waits for requests in flight */
    bool compat_http_200;          /* every envelope goes out as HTTP 200 */
    unsigned per_ip_limit;         /* simultaneous connections from one address; 0: no limit */
    const http_auth *auth;         /* NULL: no authentication (everyone is admin) */
    const http_cors *cors;         /* NULL: CORS off */
    /* The Host names answered (http/origin.h); NULL: IP literals and
     * localhost only. */
    const http_guard *guard;
    /* PEM text of the certificate (chain) and its private key: both for
     * HTTPS, neither for plain HTTP. They must outlive the server. */
    const char *tls_cert_pem, *tls_key_pem;
    /* Called in place of each matched route's handler, after the access
     * check (NULL: the handler is called): it answers as a handler does,
     * calling route->handler itself when the request is this server's to
     * answer. The fleet (api/fleet_dispatch.c) forwards requests to other
     * nodes through it. */
    http_handler_via intercept;
    /* Files answered to GET and HEAD before the token check and the routes
     * (http/static.h): the web console. NULL: none. */
    const http_static_set *statics;
    /* Credentials beside the Authorization header, for what a browser
     * opens without it (a WebSocket): asked when a matched route's request
     * has no Authorization header and a `ticket` query argument (req has
     * its path parameters); true with *who filled when the ticket stands
     * for a caller (who may still lack the route's role). NULL: no
     * tickets. */
    bool (*ticket)(void *ctx, const http_route *route, const http_request *req, const char *ticket,
                   http_identity *who);
    /* Another node of a fleet acting for itself, not for a caller (the
     * queue's dispatcher having a set moved, a move settled after a
     * crash): asked when a matched route's request has no Authorization
     * header; true with *who filled when the route is one between nodes
     * and the request carries that node's valid proof. NULL: none. */
    bool (*node_acting)(void *ctx, const http_route *route, const http_request *req,
                        http_identity *who);
} http_server_config;

typedef struct http_server http_server;

/* Start listening and serving; ctx is handed to handlers as req->ctx. The
 * router must outlive the server. */
http_server *http_server_start(const http_server_config *cfg, const http_router *router, void *ctx,
                               gb_err *err);
/* The port actually bound (useful with port 0). */
uint16_t http_server_port(const http_server *s);
/* Can this libmicrohttpd serve HTTPS? */
bool http_server_tls_supported(void);
/* Stop accepting, let requests in flight finish (bounded), close all
 * connections and free the server. */
void http_server_stop(http_server *s);

#endif
