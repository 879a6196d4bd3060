/*
 * stream.c - a response body that a producer thread writes as it goes
 * (stream.h says how the pieces meet).
 */
#include "util/xalloc.h"
#include "http/stream.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How often the reader looks at the server's stop flag while nothing comes. */
#define HTTP_STREAM_TICK_MS 500

#ifndef POLLRDHUP
#define POLLRDHUP 0x2000
#endif

struct http_stream {
    int rfd, wfd; /* the socket pair: the reader's end, the producer's end */
    int client_fd;
    const atomic_bool *stopping;
    atomic_bool cancelled;
    atomic_bool aborted; /* the producer broke the body off: no proper end */
    pthread_t thread;
    bool started;
    http_stream_fn fn;
    void *ctx;
    void (*ctx_free)(void *);
};

static void *http_stream_main(void *arg)
{
    http_stream *s = arg;
    s->fn(s, s->ctx);
    shutdown(s->wfd, SHUT_WR); /* the reader sees the end */
    return NULL;
}

int http_response_stream(http_response *resp, int status, const char *content_type,
                         http_stream_fn fn, void *ctx, void (*ctx_free)(void *), gb_err *err)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
        if (ctx_free)
            ctx_free(ctx);
        return err_set(err, ERR_INTERNAL, "cannot start a streamed answer: %s", strerror(errno));
    }
    http_stream *s = xcalloc(1, sizeof(*s));
    *s = (http_stream){
        .rfd = fds[0], .wfd = fds[1], .client_fd = -1, .fn = fn, .ctx = ctx, .ctx_free = ctx_free};
    atomic_init(&s->cancelled, false);
    atomic_init(&s->aborted, false);
    int rc = pthread_create(&s->thread, NULL, http_stream_main, s);
    if (rc != 0) {
        http_stream_close(s);
        return err_set(err, ERR_INTERNAL, "cannot start a streamed answer: %s", strerror(rc));
    }
    s->started = true;
    http_response_clear(resp);
    resp->status = status;
    resp->code = ERR_OK;
    resp->envelope = false;
    resp->content_type = content_type;
    resp->stream = s;
    return 0;
}

int http_stream_write(http_stream *s, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        if (atomic_load(&s->cancelled))
            return -1;
        ssize_t w = send(s->wfd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void http_stream_abort(http_stream *s)
{
    atomic_store(&s->aborted, true);
}

const atomic_bool *http_stream_cancelled(const http_stream *s)
{
    return &s->cancelled;
}

void http_stream_attach(http_stream *s, int client_fd, const atomic_bool *stopping)
{
    s->client_fd = client_fd;
    s->stopping = stopping;
}

ssize_t http_stream_read(http_stream *s, char *buf, size_t max)
{
    for (;;) {
        if ((s->stopping && atomic_load(s->stopping)) || atomic_load(&s->aborted))
            return -1;
        struct pollfd p[2] = {{.fd = s->rfd, .events = POLLIN},
                              {.fd = s->client_fd, .events = POLLRDHUP}};
        int n = poll(p, s->client_fd >= 0 ? 2 : 1, HTTP_STREAM_TICK_MS);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            continue;
        if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
            return -1; /* the client hung up */
        if (!(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t r = recv(s->rfd, buf, max, 0);
        if (r < 0 && errno == EINTR)
            continue;
        return r < 0 ? -1 : r;
    }
}

void http_stream_close(http_stream *s)
{
    if (!s)
        return;
    atomic_store(&s->cancelled, true);
    /* A producer blocked in send() fails at once once the reader's end
     * is gone; one blocked elsewhere watches the flag. */
    shutdown(s->rfd, SHUT_RDWR);
    if (s->started)
        pthread_join(s->thread, NULL);
    close(s->rfd);
    close(s->wfd);
    if (s->ctx_free)
        s->ctx_free(s->ctx);
    free(s);
}
