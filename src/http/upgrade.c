/*
 * upgrade.c - the WebSocket answer (upgrade.h); server.c does the switch.
 */
#include "util/xalloc.h"
#include "http/upgrade.h"

#include <stdlib.h>

int http_websocket_check(const http_request *req, gb_err *err)
{
    return ws_handshake_check(http_request_header(req, "Upgrade"),
                              http_request_header(req, "Connection"),
                              http_request_header(req, "Sec-WebSocket-Version"),
                              http_request_header(req, "Sec-WebSocket-Key"), err);
}

int http_response_websocket(http_response *resp, const http_request *req, http_upgrade_fn fn,
                            void *ctx, void (*ctx_free)(void *), gb_err *err)
{
    http_upgrade *u = xcalloc(1, sizeof(*u));
    *u = (http_upgrade){.fn = fn, .ctx = ctx, .ctx_free = ctx_free};
    if (http_websocket_check(req, err) < 0 ||
        ws_accept_key(http_request_header(req, "Sec-WebSocket-Key"), u->accept) < 0) {
        http_upgrade_free(u);
        return -1;
    }
    http_response_clear(resp);
    resp->status = 101;
    resp->code = ERR_OK;
    resp->upgrade = u;
    return 0;
}

void http_upgrade_free(http_upgrade *u)
{
    if (!u)
        return;
    if (u->ctx_free)
        u->ctx_free(u->ctx);
    free(u);
}
