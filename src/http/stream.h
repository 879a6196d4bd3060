/*
 * stream.h - a response body sent as it is made (a followed log): a
 * producer runs on a thread of its own and writes; the connection's thread
 * sends what it wrote at once, as HTTP/1.1 chunks.
 *
 * The two meet in a socket pair: the producer's writes block while the
 * client reads slowly (so a fast producer never piles up memory), and the
 * connection's thread waits on the pair and on the client's socket at
 * once, so a client that hangs up is noticed even while the producer has
 * nothing to say. Then, or when the server stops, the stream is cancelled:
 * writes fail, the flag producers hand to their own blocking calls is set
 * (docker_logs_opts.cancel), and the producer's thread is joined before
 * anything is freed, so no thread or handle outlives the request.
 *
 * Errors before the stream begins are ordinary envelopes: a handler checks
 * everything it can first, and only then answers with a stream.
 */
#ifndef GPUBOX_HTTP_STREAM_H
#define GPUBOX_HTTP_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http/response.h"
#include "util/err.h"

typedef struct http_stream http_stream;

/* What the producer's thread runs; the body ends when it returns. */
typedef void (*http_stream_fn)(http_stream *s, void *ctx);

/* Answer resp with a stream that fn(s, ctx) writes on a new thread;
 * ctx_free(ctx) (may be NULL) runs once fn has returned and the stream is
 * done with. On error (no thread) ctx is freed at once. */
int http_response_stream(http_response *resp, int status, const char *content_type,
                         http_stream_fn fn, void *ctx, void (*ctx_free)(void *), gb_err *err);

/* From the producer: write all n bytes, blocking while the client is slow.
 * -1 once the stream is cancelled (the client went away). */
int http_stream_write(http_stream *s, const void *data, size_t n);
/* From the producer: end the body without its proper end (the connection
 * is closed part way), so the client sees it broken off, not complete. */
void http_stream_abort(http_stream *s);
/* Set once the stream is cancelled. */
const atomic_bool *http_stream_cancelled(const http_stream *s);

/* ---- for the server (server.c) ---- */

/* The client's socket (-1: not known) and the server's stop flag, watched
 * while the reader waits. */
void http_stream_attach(http_stream *s, int client_fd, const atomic_bool *stopping);
/* Up to max bytes of what the producer wrote, waiting for some: > 0 bytes,
 * 0 at the end of the body, -1 when the client went away or the server
 * stops. */
ssize_t http_stream_read(http_stream *s, char *buf, size_t max);
/* Cancel, join the producer, free everything. NULL is fine. */
void http_stream_close(http_stream *s);

#endif
