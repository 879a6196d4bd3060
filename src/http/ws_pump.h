/*
 * ws_pump.h - join a WebSocket (a client's upgraded connection) and a peer
 * socket (a process's hijacked stream) until one of them ends: the peer's
 * bytes go to the client as binary messages, the client's binary messages
 * go to the peer, the client's text messages are control messages handed
 * to the owner (resize), pings are answered.
 *
 * One thread, one poll over both sockets, neither ever written to with a
 * blocking call: what one side cannot take yet waits in a buffer, and
 * while a buffer holds more than WS_PUMP_HIGH_WATER bytes the side that
 * fills it is not read. So a client that reads slowly slows the process's
 * output down (the process blocks on its own full pipe), and a process
 * that does not read its input slows the client down, without either
 * deadlocking the other or piling up memory.
 *
 * The pump ends when:
 *   - the peer closes its stream (the process ended): everything it wrote
 *     is sent first, then the owner's final text message ({"exit": 0}),
 *     then a close frame (1000);
 *   - the client closes (a close frame, or the connection is gone);
 *   - nothing passed either way for idle_ms (close 1001, "idle");
 *   - *stop is set (the server stops: close 1001);
 *   - the client broke the protocol (1002, 1007, 1009) or sent a control
 *     message the owner refused (1008).
 * It never closes either socket: the caller owns both.
 */
#ifndef GPUBOX_HTTP_WS_PUMP_H
#define GPUBOX_HTTP_WS_PUMP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest message a client may send (input arrives in pieces). */
#define WS_PUMP_MAX_MESSAGE (1024u * 1024)
#define WS_PUMP_HIGH_WATER (1024u * 1024)

typedef struct ws_pump ws_pump;

typedef struct ws_pump_ops {
    /* Bytes read from the peer: hand them on with ws_pump_send (NULL: each
     * read goes out as one binary message as it is). */
    void (*peer_data)(void *ctx, ws_pump *p, const uint8_t *data, size_t n);
    /* A text message from the client: 0 (done), 1 (close the peer's input:
     * the process reads its end), -1 (refused: close 1008 with why). */
    int (*client_text)(void *ctx, const char *text, size_t len, char *why, size_t why_size);
    /* The peer ended: write the final text message into text (size bytes;
     * "" sends none). */
    void (*peer_end)(void *ctx, char *text, size_t size);
} ws_pump_ops;

enum ws_pump_end {
    WS_PUMP_PEER_ENDED,   /* the process ended and the client was told */
    WS_PUMP_CLIENT_GONE,  /* the client closed or vanished */
    WS_PUMP_IDLE,         /* nothing passed for idle_ms */
    WS_PUMP_STOPPED,      /* *stop was set */
    WS_PUMP_CLIENT_ERROR, /* the client broke the protocol */
};

typedef struct ws_pump_config {
    int client_fd;           /* the upgraded connection */
    const char *extra;       /* bytes of the client already read past the handshake */
    size_t extra_len;        /* (libmicrohttpd's extra_in) */
    int peer_fd;             /* the process's stream */
    long idle_ms;            /* 0: never idle */
    const atomic_bool *stop; /* NULL: none */
    const ws_pump_ops *ops;
    void *ctx;
} ws_pump_config;

/* Run until one side ends; says which. */
enum ws_pump_end ws_pump_run(const ws_pump_config *cfg);

/* From peer_data: send prefix (plen bytes, may be 0) and data as one binary
 * message. */
void ws_pump_send(ws_pump *p, const uint8_t *prefix, size_t plen, const uint8_t *data, size_t n);

const char *ws_pump_end_name(enum ws_pump_end e);

#endif
