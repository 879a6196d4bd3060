/*
 * relay.c - two sockets joined (relay.h): one poll over both, a buffer per
 * direction, non-blocking sends.
 */
#include "util/xalloc.h"
#include "http/relay.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RELAY_BUF (256u * 1024)

typedef struct relay_dir {
    int from, to;
    char *buf;
    size_t off, len;
    bool eof; /* from closed: pass on what is left, then stop */
} relay_dir;

/* Read what `from` has into the free room; false at its end or an error. */
static bool relay_fill(relay_dir *d)
{
    if (d->off == d->len)
        d->off = d->len = 0;
    ssize_t n = recv(d->from, d->buf + d->len, RELAY_BUF - d->len, MSG_DONTWAIT);
    if (n > 0) {
        d->len += (size_t)n;
        return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/* Send what `to` takes now; false when it is gone. */
static bool relay_drain(relay_dir *d)
{
    while (d->off < d->len) {
        ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            d->off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

void http_relay(int a, const char *extra, size_t extra_len, int b, const atomic_bool *stop)
{
    relay_dir dirs[2] = {{.from = a, .to = b}, {.from = b, .to = a}};
    dirs[0].buf = xmalloc(RELAY_BUF);
    dirs[1].buf = xmalloc(RELAY_BUF);
    size_t take = extra_len < RELAY_BUF ? extra_len : RELAY_BUF;
    if (take)
        memcpy(dirs[0].buf, extra, take);
    dirs[0].len = take;
    for (;;) {
        if (stop && atomic_load(stop))
            break;
        bool done = false;
        for (int i = 0; i < 2; i++)
            if (dirs[i].eof && dirs[i].off == dirs[i].len)
                done = true;
        if (done)
            break;
        struct pollfd p[2] = {{.fd = a}, {.fd = b}};
        for (int i = 0; i < 2; i++) {
            relay_dir *d = &dirs[i];
            struct pollfd *in = &p[i], *out = &p[1 - i];
            if (!d->eof && d->len < RELAY_BUF)
                in->events |= POLLIN;
            if (d->off < d->len)
                out->events |= POLLOUT;
        }
        int rc = poll(p, 2, 500);
        if (rc < 0 && errno != EINTR)
            break;
        if (rc <= 0)
            continue;
        bool gone = false;
        for (int i = 0; i < 2; i++) {
            relay_dir *d = &dirs[i];
            if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) && !d->eof && !relay_fill(d))
                d->eof = true;
            if (!relay_drain(d))
                gone = true;
        }
        if (gone)
            break;
    }
    free(dirs[0].buf);
    free(dirs[1].buf);
}
