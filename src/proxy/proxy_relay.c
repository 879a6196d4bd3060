/*
 * proxy_relay.c - one exchange of the service proxy (step 7 of
 * proxy_conn.c): the request's body up to the container, the answer down
 * to the client, and where the answer ends.
 *
 * The answer's head is collected (at most PROXY_RESPONSE_HEAD_MAX bytes)
 * and read for its framing (proxy_response_parse); its Connection and
 * Keep-Alive headers are the container connection's and are replaced. Its
 * body goes on as far as the framing says: a length or the close by
 * splice (no copy through this process; a pipe made once per client
 * connection, when a first body streams), chunked through a buffer, whose
 * chunks are read to find the last. A request's body framed by its
 * length goes up by splice too, a chunked one through the buffer. 1xx
 * answers pass before the final one; a 101 to a request that asked for an
 * upgrade makes the connection a tunnel, both ways by splice, until either
 * side closes.
 *
 * The client is read only while the request's body is coming (or in a
 * tunnel): what it sends after the body (a pipelined request) is kept in
 * the connection's buffer, unread by anyone, until this answer has ended.
 * Otherwise the client's socket is only watched for a hang-up.
 */
#include "util/xalloc.h"
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/proxy_head.h"

typedef struct head_buf {
    char *p;
    size_t len, cap;
} head_buf;

static void head_put(head_buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

/* The answer's head (buf[0..len), a whole head) without its Connection
 * and Keep-Alive headers (they are the container connection's), with
 * "Connection: close" when the client's connection ends after it. */
static void answer_head(const char *buf, size_t len, bool keep, head_buf *out)
{
    size_t pos = 0;
    bool first = true;
    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) + 1 : len - pos;
        pos += n;
        size_t content = n;
        while (content && (line[content - 1] == '\n' || line[content - 1] == '\r'))
            content--;
        if (content == 0) {
            if (!keep)
                head_put(out, "Connection: close\r\n", 19);
            head_put(out, "\r\n", 2);
            return;
        }
        bool drop = !first && (strncasecmp(line, "Connection:", 11) == 0 ||
                               strncasecmp(line, "Keep-Alive:", 11) == 0);
        if (!drop) {
            head_put(out, line, content);
            head_put(out, "\r\n", 2);
        }
        first = false;
    }
}

/* Bytes from the client: the request body as far as it goes (all of them
 * once upgraded); what follows the body waits in c->in for the next
 * request. false: stop. */
static bool relay_from_client(proxy_relay *r, const char *buf, size_t n)
{
    if (r->upgraded)
        return proxy_send_all(r->c->up, buf, n);
    long part = proxy_body_feed(&r->body, buf, n);
    if (part < 0)
        return false;
    if ((size_t)part < n)
        proxy_conn_keep(r->c, buf + part, n - (size_t)part);
    return part == 0 || proxy_send_all(r->c->up, buf, (size_t)part);
}

/* Answer body bytes from the container to the client, as far as the
 * answer's framing goes; anything after it spoils the connection. */
static bool relay_body(proxy_relay *r, const char *buf, size_t n)
{
    long part = proxy_body_feed(&r->resp.body, buf, n);
    if (part < 0)
        return false;
    if ((size_t)part < n)
        r->up_kept = false;
    r->done = r->resp.body.done;
    return part == 0 || proxy_send_all(r->c->fd, buf, (size_t)part);
}

/* The final answer's head (rhead[0..end)) and what came after it. */
static bool relay_final_head(proxy_relay *r, size_t end)
{
    if (r->resp.body.kind == PROXY_BODY_CLOSE || !r->body.done)
        r->client_keep = false; /* the end is the close, or the request's body is unread */
    if (!r->resp.keep_alive)
        r->up_kept = false;
    head_buf head = {0};
    answer_head(r->rhead, end, r->client_keep, &head);
    r->head_done = true;
    /* the body bytes that came with the head go in the same send: one
     * packet for a small answer */
    long part = proxy_body_feed(&r->resp.body, r->rhead + end, r->rlen - end);
    if (part >= 0 && (size_t)part < r->rlen - end)
        r->up_kept = false;
    r->done = r->resp.body.done;
    if (part > 0)
        head_put(&head, r->rhead + end, (size_t)part);
    bool ok = part >= 0 && proxy_send_all(r->c->fd, head.p, head.len);
    free(head.p);
    return ok;
}

/* Bytes from the container: the answer's head collected and rewritten
 * (passed as it is for 101), then its body. false: stop. */
static bool relay_from_up(proxy_relay *r, const char *buf, size_t n)
{
    if (r->upgraded)
        return r->sent_any = true, proxy_send_all(r->c->fd, buf, n);
    if (r->head_done)
        return relay_body(r, buf, n);
    if (r->rlen + n > PROXY_RESPONSE_HEAD_MAX)
        return false;
    r->rhead = xrealloc(r->rhead, r->rlen + n + 1);
    memcpy(r->rhead + r->rlen, buf, n);
    r->rlen += n;
    for (;;) {
        size_t end = proxy_head_end(r->rhead, r->rlen);
        if (!end)
            return true;
        if (proxy_response_parse(r->rhead, end, r->method, &r->resp) < 0)
            return false;
        r->sent_any = true;
        if (r->resp.status == 101) {
            if (!r->upgrade_asked)
                return false;
            /* a tunnel from now on: what the client sent after its head too */
            r->upgraded = r->head_done = true;
            r->client_keep = r->up_kept = false;
            bool ok = proxy_send_all(r->c->fd, r->rhead, r->rlen) &&
                      (!r->c->in_len || proxy_send_all(r->c->up, r->c->in, r->c->in_len));
            r->c->in_len = r->rlen = 0;
            return ok;
        }
        if (r->resp.status < 200) {
            /* 100 Continue and other interim answers pass; the final one follows */
            if (!proxy_send_all(r->c->fd, r->rhead, end))
                return false;
            memmove(r->rhead, r->rhead + end, r->rlen - end);
            r->rlen -= end;
            continue;
        }
        return relay_final_head(r, end);
    }
}

/* Bytes that need no reading move from socket from to socket to through
 * the connection's pipe (splice), without a copy through this process:
 * an answer's body framed by its length or by the close, a request's body
 * framed by its length, and both ways of a tunnel. counted: the body's
 * framing when it has a length (no more than its bytes are taken: what
 * follows is the next request or answer), NULL when everything goes.
 * Each round empties the pipe before the next, so one pipe serves both
 * directions. 1 moved (or nothing was there yet), 0 from closed, -1 to
 * is gone. */
static int relay_splice(proxy_conn *c, int from, int to, proxy_body *counted)
{
    /* as long as from has more ready (a few rounds), before polling
     * again: fewer wake-ups for a large body */
    for (int round = 0; round < 8 && !(counted && counted->done); round++) {
        /* the socket blocks: read again only what is there (SPLICE_F_NONBLOCK
         * is the pipe's), or a WebSocket's other direction would wait */
        struct pollfd ready = {.fd = from, .events = POLLIN};
        if (round > 0 && poll(&ready, 1, 0) <= 0)
            return 1;
        size_t want = PROXY_PIPE;
        if (counted && counted->left < want)
            want = (size_t)counted->left;
        ssize_t n =
            splice(from, NULL, c->pipe_fds[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (n <= 0)
            return (int)n;
        if (counted) {
            counted->left -= (uint64_t)n;
            counted->done = counted->left == 0;
        }
        while (n > 0) {
            ssize_t m = splice(c->pipe_fds[0], NULL, to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return -1;
            n -= m;
        }
    }
    return 1;
}

/* Larger socket buffers for the answer's direction once bodies stream:
 * the container's socket holds more while the client's is busy, and the
 * client's takes a whole pipe's worth without blocking, so each splice
 * moves more and the daemon wakes less often. Measured with
 * bench/proxy.sh on a 2-core machine, it cut the daemon's CPU time per
 * GiB of answer by about a fifth against the kernel's own tuning; the
 * same for the request's direction made no difference to uploads, so
 * that is left to the kernel. The kernel caps the sizes at
 * net.core.rmem_max and wmem_max; memory is used only for bytes queued. */
static void relay_grow_buffers(proxy_conn *c)
{
    int size = PROXY_SOCKET_BUF;
    setsockopt(c->up, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

/* The connection's pipe for splice, made when a first body streams (small
 * answers come whole with their head and never need one); false when
 * none can be made (then bodies go through the buffer). */
static bool relay_pipe(proxy_conn *c)
{
    if (!c->pipe_tried) {
        c->pipe_tried = true;
        if (pipe2(c->pipe_fds, O_CLOEXEC) == 0)
            fcntl(c->pipe_fds[1], F_SETPIPE_SZ, PROXY_PIPE);
    }
    if (c->pipe_fds[0] < 0)
        return false;
    if (!c->up_grown) {
        /* once per container connection (a later request may make a new one) */
        c->up_grown = true;
        relay_grow_buffers(c);
    }
    return true;
}

/* The container closed its connection (or it broke): the end of an
 * answer framed by the close or of a tunnel; else the exchange failed. */
static bool relay_up_closed(proxy_relay *r)
{
    r->up_kept = false;
    if (r->upgraded || (r->head_done && r->resp.body.kind == PROXY_BODY_CLOSE)) {
        r->done = true;
        return true;
    }
    return false;
}

/* Copy both ways until the answer ends (or a tunnel closes): true when it
 * did, false when the exchange broke. The client is read only while the
 * request's body is coming (or in a tunnel), and otherwise only watched
 * for a hang-up. */
bool proxy_relay_run(proxy_relay *r)
{
    proxy_conn *c = r->c;
    while (!r->done) {
        bool read_client = r->client_open && (r->upgraded || !r->body.done);
        struct pollfd fds[2] = {
            {.fd = r->client_open ? c->fd : -1, .events = read_client ? POLLIN : 0},
            {.fd = c->up, .events = POLLIN}};
        int ready = poll(fds, 2, PROXY_IDLE_S * 1000);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return false;
        if (fds[1].revents) {
            bool spliced = r->head_done && (r->upgraded || r->resp.body.kind == PROXY_BODY_LENGTH ||
                                            r->resp.body.kind == PROXY_BODY_CLOSE);
            if (spliced && relay_pipe(c)) {
                r->sent_any = true;
                int moved = relay_splice(
                    c, c->up, c->fd,
                    r->upgraded || r->resp.body.kind != PROXY_BODY_LENGTH ? NULL : &r->resp.body);
                r->done = r->done || (!r->upgraded && r->resp.body.done);
                if (moved < 0 || (moved == 0 && !relay_up_closed(r)))
                    return false;
            } else {
                ssize_t n = recv(c->up, c->buf, PROXY_BUF, 0);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0 && !relay_up_closed(r))
                    return false;
                if (n > 0 && !relay_from_up(r, c->buf, (size_t)n))
                    return false;
            }
        }
        if (r->done || !r->client_open || !fds[0].revents)
            continue;
        if (!read_client)
            return false; /* hung up (or cut by proxy_stop) while waiting */
        ssize_t n;
        if ((r->upgraded || r->body.kind == PROXY_BODY_LENGTH) && relay_pipe(c)) {
            int moved = relay_splice(c, c->fd, c->up, r->upgraded ? NULL : &r->body);
            if (moved < 0)
                return false;
            n = moved; /* 0: the client closed */
        } else {
            n = recv(c->fd, c->buf, PROXY_BUF, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n > 0 && !relay_from_client(r, c->buf, (size_t)n))
                return false;
        }
        if (n <= 0) {
            if (!r->upgraded)
                return false; /* gone before its request's body was all there */
            r->client_open = false;
            shutdown(c->up, SHUT_WR);
        }
    }
    return true;
}
