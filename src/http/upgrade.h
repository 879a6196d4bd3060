/*
 * upgrade.h - an answer that turns the connection into another protocol: a
 * WebSocket (RFC 6455), as the terminal uses.
 *
 * A handler checks the request and prepares everything that can fail
 * first (so a refusal is an ordinary envelope with its status), then
 * answers with http_response_websocket. The server sends "101 Switching
 * Protocols" and, once it is out, runs fn on a thread of its own with the
 * connection's socket; when fn returns, the connection is closed and
 * ctx_free(ctx) runs. If the connection goes before the switch, fn never
 * runs and ctx_free(ctx) still does. fn must return soon after *stopping
 * is set (the server stops) and must not close the socket.
 */
#ifndef GPUBOX_HTTP_UPGRADE_H
#define GPUBOX_HTTP_UPGRADE_H

#include <stdatomic.h>
#include <stddef.h>

#include "http/request.h"
#include "http/response.h"
#include "http/websocket.h"
#include "util/err.h"

typedef void (*http_upgrade_fn)(void *ctx, int fd, const char *extra, size_t extra_len,
                                const atomic_bool *stopping);

typedef struct http_upgrade {
    http_upgrade_fn fn;
    void *ctx;
    void (*ctx_free)(void *ctx);
    char accept[WS_ACCEPT_SIZE]; /* Sec-WebSocket-Accept */
} http_upgrade;

/* Is req a WebSocket handshake (websocket.h: ws_handshake_check)? */
int http_websocket_check(const http_request *req, gb_err *err);

/* Answer resp by switching to a WebSocket that fn serves. On error (not a
 * handshake) ctx is freed at once. */
int http_response_websocket(http_response *resp, const http_request *req, http_upgrade_fn fn,
                            void *ctx, void (*ctx_free)(void *), gb_err *err);

/* Free u, running its ctx_free. NULL is fine. */
void http_upgrade_free(http_upgrade *u);

#endif
