/*
 * docker_stream.c - the demultiplexer of Docker's stdout/stderr stream, shared
 * by container logs (docker_logs.c) and exec (docker_exec.c).
 *
 * A container or exec without a TTY sends frames: an 8-byte header (stream
 * type 0/1/2 = stdin/stdout/stderr, three zero bytes, payload length as
 * big-endian uint32) followed by the payload. The sink keeps the frame
 * state in struct docker_demux, so a header split over two network reads
 * is put back together. Payloads go to one capped buffer per stream; stdin
 * echoes go with stdout.
 *
 * Two ways to meet a cap: logs want all or nothing, so a full buffer refuses
 * the body (the transfer fails and the caller says the cap was passed); exec
 * wants what fits, so with truncate the rest is dropped, the buffer's
 * overflow flag set and the stream kept draining; past drain_limit bytes in
 * total the drain_exceeded flag tells the owner to end the stream. A reader
 * that wants the pieces as they come (a followed log) sets emit instead of
 * using the buffers.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdlib.h>
#include <string.h>

/* Enough for any JSON error body Docker sends instead of a stream. */
#define DOCKER_DEMUX_HEAD 4096

void docker_demux_init(struct docker_demux *d, size_t cap, bool truncate)
{
    *d = (struct docker_demux){
        .truncate = truncate,
        .out = {{.limit = cap}, {.limit = cap}},
        .head = {.limit = DOCKER_DEMUX_HEAD},
    };
}

void docker_demux_free(struct docker_demux *d)
{
    free(d->out[0].data);
    free(d->out[1].data);
    free(d->head.data);
    d->out[0].data = d->out[1].data = d->head.data = NULL;
}

/* Append to one stream's buffer, truncating or refusing at its limit. */
static bool docker_demux_put(struct docker_demux *d, int stream, const char *data, size_t n)
{
    if (d->emit)
        return n == 0 || d->emit(d->emit_ctx, stream, data, n);
    struct docker_buf *b = &d->out[stream];
    if (!d->truncate)
        return docker_buf_append(b, data, n);
    size_t room = b->limit - b->len;
    if (n > room)
        b->overflow = true;
    return n == 0 || room == 0 || docker_buf_append(b, data, n < room ? n : room);
}

size_t docker_demux_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_demux *d = userdata;
    size_t n = size * nmemb;
    d->total += n;
    if (d->drain_limit && d->total > d->drain_limit) {
        /* Past the limit bytes are dropped unread, and refused only when the
         * stream goes on for as long again: the owner was told (the flag)
         * and has had that long to end it. */
        d->drain_exceeded = true;
        return d->total - n < 2 * d->drain_limit ? n : 0;
    }
    size_t room = d->head.limit - d->head.len;
    if (room > 0)
        docker_buf_append(&d->head, data, n < room ? n : room);
    if (d->tty)
        return docker_demux_put(d, 0, data, n) ? n : 0;

    size_t i = 0;
    while (i < n && !d->malformed) {
        if (d->frame_left == 0) {
            size_t take = sizeof(d->header) - d->header_len;
            take = take < n - i ? take : n - i;
            memcpy(d->header + d->header_len, data + i, take);
            d->header_len += take;
            i += take;
            if (d->header_len < sizeof(d->header))
                break;
            d->header_len = 0;
            d->stream = d->header[0];
            d->malformed = d->stream > 2 || d->header[1] || d->header[2] || d->header[3];
            d->frame_left = (uint32_t)d->header[4] << 24 | (uint32_t)d->header[5] << 16 |
                            (uint32_t)d->header[6] << 8 | d->header[7];
            continue;
        }
        size_t take = d->frame_left < n - i ? d->frame_left : n - i;
        if (!docker_demux_put(d, d->stream == 2 ? 1 : 0, data + i, take))
            return 0;
        d->frame_left -= (uint32_t)take;
        i += take;
    }
    return n;
}

bool docker_demux_broken(const struct docker_demux *d)
{
    return d->malformed || d->header_len || d->frame_left;
}

json_t *docker_demux_error_body(const struct docker_demux *d)
{
    return json_loadb(d->head.data ? d->head.data : "", d->head.len, 0, NULL);
}

char *docker_buf_take(struct docker_buf *b)
{
    char *s = b->data ? b->data : xstrdup("");
    b->data = NULL;
    b->len = b->alloc = 0;
    return s;
}
