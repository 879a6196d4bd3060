/*
 * ws_pump.c - the loop between a WebSocket and a peer socket (ws_pump.h
 * says when it ends and why it never blocks on a write).
 *
 * State: two outgoing buffers, to_client (frames, already encoded) and
 * to_peer (raw input bytes), each drained with non-blocking sends when
 * poll says the socket can take more; the reader of the client's frames
 * (http/websocket.h). Once the end is decided (`closing`), the loop only
 * drains to_client, so the last output, the final message and the close
 * frame reach the client, for at most WS_PUMP_LINGER_MS.
 */
#include "util/xalloc.h"
#include "http/ws_pump.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/websocket.h"
#include "util/time.h"

#define WS_PUMP_TICK_MS 500
#define WS_PUMP_READ 65536
/* After the end is decided, how long the last frames may take to leave. */
#define WS_PUMP_LINGER_MS 5000

typedef struct ws_buf {
    uint8_t *data;
    size_t off, len, cap;
} ws_buf;

struct ws_pump {
    const ws_pump_config *cfg;
    ws_reader reader;
    ws_buf to_client, to_peer;
    bool closing;    /* the end is decided: drain to_client, then stop */
    bool close_sent; /* our close frame is queued */
    bool peer_eof;   /* the peer closed its stream */
    int peer_shut;   /* the peer's input: 0 open, 1 to close once drained, 2 closed */
    enum ws_pump_end end;
    long last_ms; /* last data either way, for idle */
    long closing_since;
};

static size_t ws_buf_left(const ws_buf *b)
{
    return b->len - b->off;
}

static void ws_buf_add(ws_buf *b, const void *data, size_t n)
{
    if (!n)
        return;
    if (b->off == b->len)
        b->off = b->len = 0;
    if (b->len + n > b->cap && b->off) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + n)
            cap *= 2;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

/* Send what fd takes now: 0, or -1 when the connection is gone. */
static int ws_buf_flush(ws_buf *b, int fd)
{
    while (ws_buf_left(b)) {
        ssize_t n = send(fd, b->data + b->off, ws_buf_left(b), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            b->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    return 0;
}

static void ws_pump_frame(ws_pump *p, enum ws_opcode op, const uint8_t *prefix, size_t plen,
                          const uint8_t *data, size_t n)
{
    uint8_t h[WS_HEADER_MAX];
    size_t hl = ws_frame_header(h, op, true, plen + n, NULL);
    ws_buf_add(&p->to_client, h, hl);
    ws_buf_add(&p->to_client, prefix, plen);
    ws_buf_add(&p->to_client, data, n);
}

void ws_pump_send(ws_pump *p, const uint8_t *prefix, size_t plen, const uint8_t *data, size_t n)
{
    ws_pump_frame(p, WS_OP_BINARY, prefix, plen, data, n);
}

/* Queue our close frame and decide the end (the first reason wins). */
static void ws_pump_close(ws_pump *p, enum ws_pump_end end, uint16_t code, const char *why)
{
    if (p->closing)
        return;
    p->closing = true;
    p->end = end;
    p->closing_since = time_mono_ms();
    if (end == WS_PUMP_CLIENT_GONE && code == 0)
        return; /* nobody to tell */
    uint8_t body[WS_CONTROL_MAX];
    size_t wl = why ? strlen(why) : 0;
    if (wl > WS_CONTROL_MAX - 2)
        wl = WS_CONTROL_MAX - 2;
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    if (wl)
        memcpy(body + 2, why, wl);
    ws_pump_frame(p, WS_OP_CLOSE, NULL, 0, body, 2 + wl);
    p->close_sent = true;
}

/* One message from the client. */
static void ws_pump_message(ws_pump *p, const ws_message *m)
{
    const ws_pump_config *cfg = p->cfg;
    switch (m->op) {
    case WS_OP_BINARY:
        if (!p->peer_shut)
            ws_buf_add(&p->to_peer, m->data, m->len);
        p->last_ms = time_mono_ms();
        break;
    case WS_OP_TEXT: {
        char why[96] = "";
        int rc = cfg->ops->client_text ? cfg->ops->client_text(cfg->ctx, (const char *)m->data,
                                                               m->len, why, sizeof(why))
                                       : 0;
        if (rc < 0)
            ws_pump_close(p, WS_PUMP_CLIENT_ERROR, WS_CLOSE_POLICY, why);
        else if (rc == 1 && !p->peer_shut)
            p->peer_shut = 1; /* shut down once to_peer is drained */
        p->last_ms = time_mono_ms();
        break;
    }
    case WS_OP_PING:
        ws_pump_frame(p, WS_OP_PONG, NULL, 0, m->data, m->len);
        break;
    case WS_OP_CLOSE:
        /* Answer with the client's code, as RFC 6455 5.5.1 asks. */
        ws_pump_close(p, WS_PUMP_CLIENT_GONE,
                      m->close_code == WS_CLOSE_NO_STATUS ? WS_CLOSE_NORMAL : m->close_code, NULL);
        break;
    default:
        break; /* a pong: nothing to do */
    }
}

/* Read what the client sent and act on each message. */
static void ws_pump_read_client(ws_pump *p, const uint8_t *data, size_t n)
{
    ws_reader_feed(&p->reader, data, n);
    ws_message m;
    int rc;
    while (!p->closing && (rc = ws_reader_next(&p->reader, &m)) != 0) {
        if (rc < 0) {
            ws_pump_close(p, WS_PUMP_CLIENT_ERROR, p->reader.fail_code, p->reader.fail_why);
            return;
        }
        ws_pump_message(p, &m);
    }
}

static void ws_pump_peer_ended(ws_pump *p)
{
    const ws_pump_config *cfg = p->cfg;
    p->peer_eof = true;
    char text[256] = "";
    if (cfg->ops->peer_end)
        cfg->ops->peer_end(cfg->ctx, text, sizeof(text));
    if (text[0])
        ws_pump_frame(p, WS_OP_TEXT, NULL, 0, (const uint8_t *)text, strlen(text));
    ws_pump_close(p, WS_PUMP_PEER_ENDED, WS_CLOSE_NORMAL, NULL);
}

static void ws_pump_read_peer(ws_pump *p, int fd)
{
    uint8_t buf[WS_PUMP_READ];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        ws_pump_peer_ended(p);
        return;
    }
    p->last_ms = time_mono_ms();
    if (p->cfg->ops->peer_data)
        p->cfg->ops->peer_data(p->cfg->ctx, p, buf, (size_t)n);
    else
        ws_pump_send(p, NULL, 0, buf, (size_t)n);
}

/* One round of poll; false when the pump is done. */
static bool ws_pump_round(ws_pump *p)
{
    const ws_pump_config *cfg = p->cfg;
    long now = time_mono_ms();
    if (p->closing && (!ws_buf_left(&p->to_client) || !p->close_sent ||
                       now - p->closing_since > WS_PUMP_LINGER_MS))
        return false;
    if (!p->closing && cfg->stop && atomic_load(cfg->stop))
        ws_pump_close(p, WS_PUMP_STOPPED, WS_CLOSE_GOING_AWAY, "the server is stopping");
    if (!p->closing && cfg->idle_ms > 0 && now - p->last_ms >= cfg->idle_ms)
        ws_pump_close(p, WS_PUMP_IDLE, WS_CLOSE_GOING_AWAY, "idle for too long");
    if (p->peer_shut == 1 && !ws_buf_left(&p->to_peer)) {
        shutdown(cfg->peer_fd, SHUT_WR);
        p->peer_shut = 2;
    }

    struct pollfd fds[2] = {{.fd = cfg->client_fd}, {.fd = cfg->peer_fd}};
    if (!p->closing && ws_buf_left(&p->to_peer) < WS_PUMP_HIGH_WATER)
        fds[0].events |= POLLIN;
    if (ws_buf_left(&p->to_client))
        fds[0].events |= POLLOUT;
    if (!p->closing && !p->peer_eof && ws_buf_left(&p->to_client) < WS_PUMP_HIGH_WATER)
        fds[1].events |= POLLIN;
    if (!p->closing && ws_buf_left(&p->to_peer))
        fds[1].events |= POLLOUT;
    int rc = poll(fds, 2, WS_PUMP_TICK_MS);
    if (rc < 0 && errno != EINTR)
        return false;
    if (rc <= 0)
        return true;

    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t buf[WS_PUMP_READ];
        ssize_t n = recv(cfg->client_fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0)
            ws_pump_read_client(p, buf, (size_t)n);
        else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            ws_pump_close(p, WS_PUMP_CLIENT_GONE, 0, NULL);
            return false;
        }
    }
    if ((fds[0].revents & POLLOUT) && ws_buf_flush(&p->to_client, cfg->client_fd) < 0) {
        ws_pump_close(p, WS_PUMP_CLIENT_GONE, 0, NULL);
        return false;
    }
    if ((fds[1].revents & POLLOUT) && ws_buf_flush(&p->to_peer, cfg->peer_fd) < 0)
        p->to_peer.off = p->to_peer.len; /* the process is gone; its end comes by read */
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR))
        ws_pump_read_peer(p, cfg->peer_fd);
    /* What was just read goes on now, not after another poll: a keystroke's
     * echo is a round trip through both buffers. */
    if (!p->closing && ws_buf_left(&p->to_peer) && ws_buf_flush(&p->to_peer, cfg->peer_fd) < 0)
        p->to_peer.off = p->to_peer.len;
    if (ws_buf_left(&p->to_client) && ws_buf_flush(&p->to_client, cfg->client_fd) < 0) {
        ws_pump_close(p, WS_PUMP_CLIENT_GONE, 0, NULL);
        return false;
    }
    return true;
}

enum ws_pump_end ws_pump_run(const ws_pump_config *cfg)
{
    ws_pump p = {.cfg = cfg, .last_ms = time_mono_ms()};
    /* Keystrokes are tiny messages: send each at once (a socket pair under
     * TLS refuses the option, which is fine). */
    int one = 1;
    setsockopt(cfg->client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ws_reader_init(&p.reader, true, WS_PUMP_MAX_MESSAGE);
    if (cfg->extra_len)
        ws_pump_read_client(&p, (const uint8_t *)cfg->extra, cfg->extra_len);
    while (ws_pump_round(&p))
        ;
    if (!p.closing)
        p.end = WS_PUMP_CLIENT_GONE;
    ws_reader_free(&p.reader);
    free(p.to_client.data);
    free(p.to_peer.data);
    return p.end;
}

const char *ws_pump_end_name(enum ws_pump_end e)
{
    switch (e) {
    case WS_PUMP_PEER_ENDED:
        return "process ended";
    case WS_PUMP_CLIENT_GONE:
        return "client closed";
    case WS_PUMP_IDLE:
        return "idle";
    case WS_PUMP_STOPPED:
        return "server stopping";
    case WS_PUMP_CLIENT_ERROR:
        return "client broke the protocol";
    }
    return "?";
}
