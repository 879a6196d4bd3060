/*
 * websocket.h - the WebSocket protocol (RFC 6455) as bytes: the opening
 * handshake's accept key, frame headers to send, and a reader that turns
 * bytes from the socket into whole messages. No I/O here: the terminal's
 * pump (http/ws_pump.h) and the CLI's client move the bytes.
 *
 * Both ends use it. A server reads frames that must be masked (a client's)
 * and sends unmasked ones; a client the other way round. The reader is
 * strict where the RFC says "MUST fail the connection": reserved bits or
 * opcodes, an unmasked client frame (or a masked server frame), a control
 * frame that is fragmented or longer than 125 bytes, a continuation with
 * no message to continue, a data frame inside an unfinished message, a
 * 64-bit length with its top bit set, a close frame with a 1-byte body, and
 * a text message that is not UTF-8. A message longer than the reader's
 * limit is refused with 1009 before its payload is buffered, so a client
 * cannot make the server hold more than that limit.
 *
 * Layout: the reader keeps the bytes fed and not yet used in one buffer
 * (`in`, consumed from `in_off`), and the message being assembled from
 * fragments in another (`msg`), payloads unmasked as they are copied.
 */
#ifndef GPUBOX_HTTP_WEBSOCKET_H
#define GPUBOX_HTTP_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The accept key: base64 of a SHA-1, 28 characters and the NUL. */
#define WS_ACCEPT_SIZE 29
/* The longest frame header: 2 + 8 (length) + 4 (mask). */
#define WS_HEADER_MAX 14
/* The longest control frame payload. */
#define WS_CONTROL_MAX 125

enum ws_opcode {
    WS_OP_CONTINUATION = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA,
};

/* Close codes (RFC 6455 7.4.1) gpubox sends. */
enum ws_close_code {
    WS_CLOSE_NORMAL = 1000,
    WS_CLOSE_GOING_AWAY = 1001, /* the server stops, or the terminal was idle */
    WS_CLOSE_PROTOCOL = 1002,
    WS_CLOSE_UNSUPPORTED = 1003,
    WS_CLOSE_NO_STATUS = 1005, /* a close frame without a code (never sent) */
    WS_CLOSE_INVALID_DATA = 1007,
    WS_CLOSE_POLICY = 1008,
    WS_CLOSE_TOO_BIG = 1009,
    WS_CLOSE_INTERNAL = 1011,
};

/* The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key: -1 when
 * the key is not the base64 of 16 bytes (the handshake is then refused). */
int ws_accept_key(const char *client_key, char out[WS_ACCEPT_SIZE]);

/* Is this request a WebSocket opening handshake gpubox can take? The header
 * values as sent (NULL: absent). 0, or -1 with ERR_INVALID_PARAMS saying
 * which header is wrong. */
int ws_handshake_check(const char *upgrade, const char *connection, const char *version,
                       const char *key, gb_err *err);

/* Write a frame header for a payload of len bytes into out; mask (4 bytes)
 * NULL for a server's frame. Returns the header's length. The caller masks
 * a client's payload with ws_mask. */
size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode op, bool fin, uint64_t len,
                       const uint8_t *mask);
/* XOR n bytes with mask, starting at byte offset of the payload. */
void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t offset);

/* Is data[0..n) well-formed UTF-8 (no overlongs, surrogates or code points
 * past U+10FFFF)? */
bool ws_utf8_valid(const uint8_t *data, size_t n);

/* One message as the reader hands it out: a whole data message (fragments
 * joined) or one control frame. data is valid until the next call. */
typedef struct ws_message {
    enum ws_opcode op; /* TEXT, BINARY, CLOSE, PING or PONG */
    const uint8_t *data;
    size_t len;
    uint16_t close_code; /* CLOSE: the code sent, WS_CLOSE_NO_STATUS when none */
} ws_message;

typedef struct ws_reader {
    bool from_client;   /* frames must be masked; else they must not be */
    size_t max_message; /* longest data message accepted */
    uint8_t *in;        /* bytes fed, not yet used */
    size_t in_off, in_len, in_cap;
    uint8_t *msg; /* the data message being assembled */
    size_t msg_len, msg_cap;
    enum ws_opcode msg_op; /* its opcode; CONTINUATION when none is open */
    uint8_t control[WS_CONTROL_MAX];
    uint16_t fail_code; /* after -1: the close code to send */
    char fail_why[96];  /* and why, for the log and the close frame */
} ws_reader;

void ws_reader_init(ws_reader *r, bool from_client, size_t max_message);
/* Append n bytes read from the socket. */
void ws_reader_feed(ws_reader *r, const void *data, size_t n);
/* The next message: 1 (*m set), 0 (more bytes needed), -1 (the peer broke
 * the protocol: fail_code and fail_why say how; the reader stays failed). */
int ws_reader_next(ws_reader *r, ws_message *m);
/* Bytes fed and not yet used (to decide whether to read more). */
size_t ws_reader_pending(const ws_reader *r);
void ws_reader_free(ws_reader *r);

#endif
