/*
 * proxy.h - the service proxy: gpuboxd's second listener (--proxy-listen),
 * which lets a replica set's owner reach the web services in the set's
 * container (JupyterLab, TensorBoard, ...) from a browser, on an origin
 * apart from the console's and the API's, so that a page served by an
 * instance can never read the console's token (docs/services.md).
 *
 * A request names its service by path (/s/SET/SERVICE/..., passed on
 * intact: the program is told that base path) or, with --proxy-domain D,
 * by host name (SERVICE--SET.D). The proxy reads the request's head,
 * authenticates the caller (an Authorization: Bearer token, its cookie,
 * a ticket or a link exchanged for that cookie), asks the replica-set
 * service whether the caller may use the service and where its container
 * is (replicaset_service_resolve), connects to the container's own address
 * and then copies bytes both ways: bodies stream in both directions and a
 * WebSocket upgrade passes as it is.
 *
 * Keep-alive, each request authorised for its own path: a connection
 * carries request after request, served one at a time; every head is
 * read, authenticated and authorised again (no request rides on the
 * first one's credentials), and nothing after a request's body is read
 * or passed on before its answer has ended. The container connection is
 * kept for the next request when it goes to the same set and service,
 * and belongs to that one client connection only (proxy_conn.c).
 *
 * Threads: one accepting thread and one thread per connection, at most
 * max_connections at a time (more are answered 503 at once), and at most
 * max_per_ip from one client address (one more is answered 429 and
 * closed; in a fleet, connections another node forwards count against
 * that node's address). Limits: the
 * head must come within PROXY_HEAD_TIMEOUT_S and be at most
 * PROXY_HEAD_MAX bytes (431); a kept connection waits PROXY_KEEPALIVE_S
 * for its next request; an exchange idle in both directions for
 * PROXY_IDLE_S is closed; the container must accept within
 * PROXY_CONNECT_TIMEOUT_S (502).
 */
#ifndef GPUBOX_PROXY_PROXY_H
#define GPUBOX_PROXY_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include "http/auth.h"
#include "util/err.h"

struct app;

#define PROXY_HEAD_TIMEOUT_S 30
#define PROXY_KEEPALIVE_S 30 /* a kept connection waits this long for its next request */
#define PROXY_IDLE_S 3600
#define PROXY_CONNECT_TIMEOUT_S 5
#define PROXY_MAX_CONNECTIONS 1024

typedef struct proxy_config {
    const char *host;      /* "0.0.0.0", "::1", ... */
    uint16_t port;         /* 0: any free port */
    const http_auth *auth; /* NULL: authentication is off (everyone is an admin) */
    struct app *app;
    const char *domain;       /* --proxy-domain; NULL: path URLs only */
    bool secure_cookies;      /* the proxy's URL is https (TLS ends in front of it) */
    unsigned max_connections; /* 0: PROXY_MAX_CONNECTIONS */
    unsigned max_per_ip;      /* connections one client address may hold open; 0: no cap */
} proxy_config;

typedef struct proxy proxy;

/* Listen and serve (threads); ERR_INVALID_PARAMS when the address cannot
 * be bound. cfg's strings must outlive the proxy. */
int proxy_start(const proxy_config *cfg, proxy **out, gb_err *err);
/* The port it listens on (the one picked when cfg.port was 0). */
uint16_t proxy_port(const proxy *p);
/* Stop accepting, cut the connections in flight, wait for their threads. */
void proxy_stop(proxy *p);

#endif
