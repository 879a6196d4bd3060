/*
 * websocket.c - RFC 6455 framing: the accept key, frame headers, and the
 * reader that assembles messages (websocket.h says what is refused).
 *
 * A frame on the wire:
 *   byte 0   FIN, RSV1-3, opcode (4 bits)
 *   byte 1   MASK, length (7 bits: 0-125, or 126: 16-bit length follows,
 *            127: 64-bit length follows, big-endian)
 *   then     the 4-byte masking key when MASK is set, then the payload,
 *            XORed with the key byte (i mod 4) when masked.
 */
#include "util/xalloc.h"
#include "http/websocket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/sha1.h>

#include "util/base64.h"
#include "util/cleanup.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int ws_accept_key(const char *client_key, char out[WS_ACCEPT_SIZE])
{
    out[0] = '\0';
    if (!client_key)
        return -1;
    size_t klen = strlen(client_key);
    _cleanup_free_ char *raw = NULL;
    size_t n = 0;
    if (klen != 24 || base64_decode(client_key, klen, &raw, &n) < 0 || n != 16)
        return -1;
    struct sha1_ctx ctx;
    uint8_t digest[SHA1_DIGEST_SIZE];
    sha1_init(&ctx);
    sha1_update(&ctx, klen, (const uint8_t *)client_key);
    sha1_update(&ctx, strlen(WS_GUID), (const uint8_t *)WS_GUID);
    sha1_digest(&ctx, sizeof(digest), digest);
    _cleanup_free_ char *b64 = base64_encode(digest, sizeof(digest));
    snprintf(out, WS_ACCEPT_SIZE, "%s", b64);
    return 0;
}

/* Does the comma-separated header value list hold token (case-insensitive)? */
static bool ws_header_has_token(const char *value, const char *token)
{
    size_t tlen = strlen(token);
    for (const char *p = value; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t end = n;
        while (end && (p[end - 1] == ' ' || p[end - 1] == '\t'))
            end--;
        if (end == tlen && strncasecmp(p, token, tlen) == 0)
            return true;
        p += n;
    }
    return false;
}

int ws_handshake_check(const char *upgrade, const char *connection, const char *version,
                       const char *key, gb_err *err)
{
    if (!upgrade || !ws_header_has_token(upgrade, "websocket"))
        return err_set(err, ERR_INVALID_PARAMS,
                       "this endpoint speaks WebSocket only: send \"Upgrade: websocket\" and "
                       "\"Connection: Upgrade\" (a WebSocket client does)");
    if (!connection || !ws_header_has_token(connection, "upgrade"))
        return err_set(err, ERR_INVALID_PARAMS,
                       "the WebSocket handshake needs \"Connection: Upgrade\"");
    if (!version || strcmp(version, "13") != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "Sec-WebSocket-Version is %.20s; gpubox speaks version 13 (RFC 6455)",
                       version ? version : "missing");
    char accept[WS_ACCEPT_SIZE];
    if (ws_accept_key(key, accept) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "Sec-WebSocket-Key must be the base64 of 16 random bytes");
    return 0;
}

size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode op, bool fin, uint64_t len,
                       const uint8_t *mask)
{
    size_t n = 0;
    out[n++] = (uint8_t)((fin ? 0x80 : 0) | (op & 0x0F));
    uint8_t m = mask ? 0x80 : 0;
    if (len <= 125) {
        out[n++] = (uint8_t)(m | len);
    } else if (len <= 0xFFFF) {
        out[n++] = m | 126;
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else {
        out[n++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)(len >> (8 * i));
    }
    if (mask) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t offset)
{
    for (size_t i = 0; i < n; i++)
        data[i] ^= mask[(offset + i) & 3];
}

bool ws_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t more;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0)
            more = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            more = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            more = 3, cp = c & 0x07, min = 0x10000;
        else
            return false;
        if (n - i <= more)
            return false;
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += more + 1;
    }
    return true;
}

void ws_reader_init(ws_reader *r, bool from_client, size_t max_message)
{
    *r = (ws_reader){.from_client = from_client, .max_message = max_message};
}

void ws_reader_feed(ws_reader *r, const void *data, size_t n)
{
    if (!n)
        return;
    if (r->in_off && r->in_off == r->in_len)
        r->in_off = r->in_len = 0;
    if (r->in_len + n > r->in_cap && r->in_off) { /* reuse the used front first */
        memmove(r->in, r->in + r->in_off, r->in_len - r->in_off);
        r->in_len -= r->in_off;
        r->in_off = 0;
    }
    if (r->in_len + n > r->in_cap) {
        size_t cap = r->in_cap ? r->in_cap : 4096;
        while (cap < r->in_len + n)
            cap *= 2;
        r->in = xrealloc(r->in, cap);
        r->in_cap = cap;
    }
    memcpy(r->in + r->in_len, data, n);
    r->in_len += n;
}

size_t ws_reader_pending(const ws_reader *r)
{
    return r->in_len - r->in_off;
}

static int ws_fail(ws_reader *r, uint16_t code, const char *why)
{
    r->fail_code = code;
    snprintf(r->fail_why, sizeof(r->fail_why), "%s", why);
    return -1;
}

/* A frame's header, once all of it is in. */
typedef struct ws_frame {
    bool fin;
    enum ws_opcode op;
    bool masked;
    uint8_t mask[4];
    uint64_t len;
    size_t header_len;
} ws_frame;

/* 1: a header parsed into f; 0: more bytes needed; -1: refused. */
static int ws_parse_header(ws_reader *r, const uint8_t *p, size_t n, ws_frame *f)
{
    if (n < 2)
        return 0;
    if (p[0] & 0x70)
        return ws_fail(r, WS_CLOSE_PROTOCOL, "reserved bits set (no extension was agreed)");
    f->fin = p[0] & 0x80;
    f->op = (enum ws_opcode)(p[0] & 0x0F);
    f->masked = p[1] & 0x80;
    uint64_t len = p[1] & 0x7F;
    size_t h = 2;
    if (len == 126) {
        if (n < 4)
            return 0;
        len = ((uint64_t)p[2] << 8) | p[3];
        h = 4;
    } else if (len == 127) {
        if (n < 10)
            return 0;
        len = 0;
        for (int i = 0; i < 8; i++)
            len = (len << 8) | p[2 + i];
        if (len >> 63)
            return ws_fail(r, WS_CLOSE_PROTOCOL, "64-bit length with its top bit set");
        h = 10;
    }
    if (f->masked) {
        if (n < h + 4)
            return 0;
        memcpy(f->mask, p + h, 4);
        h += 4;
    }
    f->len = len;
    f->header_len = h;
    bool control = f->op & 0x08;
    if (f->op != WS_OP_CONTINUATION && f->op != WS_OP_TEXT && f->op != WS_OP_BINARY &&
        f->op != WS_OP_CLOSE && f->op != WS_OP_PING && f->op != WS_OP_PONG)
        return ws_fail(r, WS_CLOSE_PROTOCOL, "reserved opcode");
    if (f->masked != r->from_client)
        return ws_fail(r, WS_CLOSE_PROTOCOL,
                       r->from_client ? "a client's frame must be masked"
                                      : "a server's frame must not be masked");
    if (control && (!f->fin || len > WS_CONTROL_MAX))
        return ws_fail(r, WS_CLOSE_PROTOCOL,
                       "a control frame must be one frame of at most 125 bytes");
    if (f->op == WS_OP_CONTINUATION && r->msg_op == WS_OP_CONTINUATION)
        return ws_fail(r, WS_CLOSE_PROTOCOL, "a continuation frame with no message to continue");
    if ((f->op == WS_OP_TEXT || f->op == WS_OP_BINARY) && r->msg_op != WS_OP_CONTINUATION)
        return ws_fail(r, WS_CLOSE_PROTOCOL, "a new message inside an unfinished one");
    if (!control && len > r->max_message - r->msg_len)
        return ws_fail(r, WS_CLOSE_TOO_BIG, "message longer than this server takes");
    return 1;
}

/* A control frame's payload (in r->control) as a message. */
static int ws_control_message(ws_reader *r, const ws_frame *f, ws_message *m)
{
    *m = (ws_message){.op = f->op, .data = r->control, .len = (size_t)f->len};
    if (f->op != WS_OP_CLOSE)
        return 1;
    if (f->len == 1)
        return ws_fail(r, WS_CLOSE_PROTOCOL, "a close frame with a 1-byte body");
    m->close_code = WS_CLOSE_NO_STATUS;
    if (f->len >= 2) {
        m->close_code = (uint16_t)((r->control[0] << 8) | r->control[1]);
        if (!ws_utf8_valid(r->control + 2, (size_t)f->len - 2))
            return ws_fail(r, WS_CLOSE_INVALID_DATA, "a close reason that is not UTF-8");
    }
    return 1;
}

int ws_reader_next(ws_reader *r, ws_message *m)
{
    if (r->fail_code)
        return -1;
    for (;;) {
        size_t n = r->in_len - r->in_off;
        if (n == 0)
            return 0; /* in may still be NULL */
        const uint8_t *p = r->in + r->in_off;
        ws_frame f;
        int rc = ws_parse_header(r, p, n, &f);
        if (rc <= 0)
            return rc;
        if (n - f.header_len < f.len)
            return 0;
        const uint8_t *payload = p + f.header_len;
        size_t len = (size_t)f.len;
        r->in_off += f.header_len + len;
        if (f.op & 0x08) {
            memcpy(r->control, payload, len);
            if (f.masked)
                ws_mask(r->control, len, f.mask, 0);
            return ws_control_message(r, &f, m);
        }
        if (f.op != WS_OP_CONTINUATION) {
            r->msg_op = f.op;
            r->msg_len = 0;
        }
        if (r->msg_len + len > r->msg_cap) {
            size_t cap = r->msg_cap ? r->msg_cap : 4096;
            while (cap < r->msg_len + len)
                cap *= 2;
            r->msg = xrealloc(r->msg, cap);
            r->msg_cap = cap;
        }
        if (len) { /* msg is still NULL before the first non-empty piece */
            memcpy(r->msg + r->msg_len, payload, len);
            if (f.masked)
                ws_mask(r->msg + r->msg_len, len, f.mask, 0);
        }
        r->msg_len += len;
        if (!f.fin)
            continue;
        enum ws_opcode op = r->msg_op;
        size_t whole = r->msg_len;
        r->msg_op = WS_OP_CONTINUATION;
        r->msg_len = 0; /* the next message starts afresh; msg stays valid */
        if (op == WS_OP_TEXT && !ws_utf8_valid(r->msg, whole))
            return ws_fail(r, WS_CLOSE_INVALID_DATA, "a text message that is not UTF-8");
        *m = (ws_message){.op = op, .data = r->msg, .len = whole};
        return 1;
    }
}

void ws_reader_free(ws_reader *r)
{
    free(r->in);
    free(r->msg);
    *r = (ws_reader){0};
}
