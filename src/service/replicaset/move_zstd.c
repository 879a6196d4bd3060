/*
 * move_zstd.c - a move's data on the wire, compressed when it helps
 * (--move-compress; docs/fleet.md).
 *
 * The source encodes: the carry's tar read from one pipe, written to the
 * stream as it is (none), as zstd frames (zstd), or (auto) as one or the
 * other by a sample: the first MOVE_ZSTD_SAMPLE bytes compressed at level
 * 1; when they shrink to less than MOVE_ZSTD_WORTH of their size the whole
 * stream is compressed, else it goes as it is (already compressed data,
 * model weights, archives gain little and would cost the CPU time). The
 * target decodes without being told: a stream that begins with zstd's
 * magic number is decompressed, any other is copied (a tar archive begins
 * with a path name, never with those four bytes).
 *
 * zstd runs with two worker threads, so compressing keeps up with a fast
 * network; memory stays bounded (the sample and zstd's own windows).
 */
#include "util/xalloc.h"
#include "service/replicaset/move.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "carry/carry.h"
#include "util/cleanup.h"
#include "util/log.h"

#define MOVE_ZSTD_SAMPLE (4u * 1024 * 1024)
#define MOVE_ZSTD_WORTH 0.85
#define MOVE_ZSTD_LEVEL 1
#define MOVE_ZSTD_BUF (256u * 1024)

static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* Read up to n bytes (fewer only at the end); -1 on error. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int write_full(int fd, const void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const char *)buf + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* The rest of in_fd as it is, after head. */
static int copy_rest(int in_fd, move_sink_fn sink, void *sctx, const void *head, size_t nhead,
                     uint64_t *out_bytes, gb_err *err)
{
    if (nhead && sink(sctx, head, nhead) < 0)
        return err_set(err, ERR_INTERNAL, "sending a move's data: %s", strerror(errno));
    *out_bytes += nhead;
    char *buf = xmalloc(MOVE_ZSTD_BUF);
    int rc = 0;
    for (;;) {
        ssize_t n = read(in_fd, buf, MOVE_ZSTD_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = err_set(err, ERR_INTERNAL, "reading a move's data: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (sink(sctx, buf, (size_t)n) < 0) {
            rc = err_set(err, ERR_INTERNAL, "sending a move's data: %s", strerror(errno));
            break;
        }
        *out_bytes += (uint64_t)n;
    }
    free(buf);
    return rc;
}

/* Feed in (may be empty) through cctx to out_fd; end: the frame's end. */
static int zstd_push(ZSTD_CCtx *cctx, const void *data, size_t n, bool end, char *obuf,
                     move_sink_fn sink, void *sctx, uint64_t *out_bytes, gb_err *err)
{
    ZSTD_inBuffer in = {data, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {obuf, ZSTD_CStreamOutSize(), 0};
        size_t left = ZSTD_compressStream2(cctx, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left))
            return err_set(err, ERR_INTERNAL, "compressing a move's data: %s",
                           ZSTD_getErrorName(left));
        if (out.pos && sink(sctx, obuf, out.pos) < 0)
            return err_set(err, ERR_INTERNAL, "sending a move's data: %s", strerror(errno));
        *out_bytes += out.pos;
        if (end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

static int compress_rest(int in_fd, move_sink_fn sink, void *sctx, const void *head, size_t nhead,
                         uint64_t *out_bytes, gb_err *err)
{
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    if (!cctx)
        return err_set(err, ERR_INTERNAL, "compressing a move's data: no zstd context");
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, MOVE_ZSTD_LEVEL);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, 2); /* ignored by a libzstd without threads */
    /* A checksum per frame: a stream changed on the way is refused, not extracted. */
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    char *ibuf = xmalloc(MOVE_ZSTD_BUF);
    char *obuf = xmalloc(ZSTD_CStreamOutSize());
    int rc = nhead ? zstd_push(cctx, head, nhead, false, obuf, sink, sctx, out_bytes, err) : 0;
    while (rc == 0) {
        ssize_t n = read(in_fd, ibuf, MOVE_ZSTD_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = err_set(err, ERR_INTERNAL, "reading a move's data: %s", strerror(errno));
            break;
        }
        rc = zstd_push(cctx, ibuf, (size_t)n, n == 0, obuf, sink, sctx, out_bytes, err);
        if (n == 0)
            break;
    }
    free(ibuf);
    free(obuf);
    ZSTD_freeCCtx(cctx);
    return rc;
}

/* Whether data compresses to less than MOVE_ZSTD_WORTH of its size. */
static bool worth_it(const void *data, size_t n)
{
    if (n < 4096)
        return false;
    size_t cap = ZSTD_compressBound(n);
    void *out = xmalloc(cap);
    size_t z = ZSTD_compress(out, cap, data, n, MOVE_ZSTD_LEVEL);
    free(out);
    return !ZSTD_isError(z) && (double)z < MOVE_ZSTD_WORTH * (double)n;
}

/* Read and drop n bytes of fd: 0, or -1 when it ends first or fails. */
static int discard(int fd, uint64_t n, gb_err *err)
{
    char *buf = xmalloc(MOVE_ZSTD_BUF);
    int rc = 0;
    while (n > 0 && rc == 0) {
        ssize_t r = read(fd, buf, n < MOVE_ZSTD_BUF ? (size_t)n : MOVE_ZSTD_BUF);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = err_set(err, r == 0 ? ERR_CONFLICT : ERR_INTERNAL, "resuming a move's data: %s",
                         r == 0 ? "the stream is shorter than the offset asked" : strerror(errno));
        else
            n -= (uint64_t)r;
    }
    free(buf);
    return rc;
}

static int fd_sink(void *ctx, const void *p, size_t n)
{
    return write_full(*(int *)ctx, p, n);
}

int move_zstd_encode_to(int in_fd, move_sink_fn sink, void *sctx, const char *mode, uint64_t skip,
                        bool *compressed, uint64_t *out_bytes, gb_err *err)
{
    *out_bytes = 0;
    *compressed = false;
    bool none = mode && strcmp(mode, "none") == 0, zstd = mode && strcmp(mode, "zstd") == 0;
    if (skip == 0 && none)
        return copy_rest(in_fd, sink, sctx, NULL, 0, out_bytes, err);
    if (skip == 0 && zstd) {
        *compressed = true;
        return compress_rest(in_fd, sink, sctx, NULL, 0, out_bytes, err);
    }
    if (skip > 0 && discard(in_fd, skip, err) < 0)
        return -1;
    /* auto: a sample decides; resumed: the first block must begin an entry. */
    size_t want = none || zstd ? 512 : MOVE_ZSTD_SAMPLE;
    char *sample = xmalloc(want);
    ssize_t n = read_full(in_fd, sample, want);
    int rc;
    if (n < 0) {
        rc = err_set(err, ERR_INTERNAL, "reading a move's data: %s", strerror(errno));
    } else if (skip > 0 && (n < 512 || !carry_tar_block_starts_entry((unsigned char *)sample))) {
        rc = err_set(err, ERR_CONFLICT,
                     "the stream changed: no entry begins at the offset asked to resume at");
    } else {
        *compressed = zstd || (!none && worth_it(sample, (size_t)n));
        rc = *compressed ? compress_rest(in_fd, sink, sctx, sample, (size_t)n, out_bytes, err)
                         : copy_rest(in_fd, sink, sctx, sample, (size_t)n, out_bytes, err);
    }
    free(sample);
    return rc;
}

int move_zstd_encode_at(int in_fd, int out_fd, const char *mode, uint64_t skip, bool *compressed,
                        uint64_t *out_bytes, gb_err *err)
{
    return move_zstd_encode_to(in_fd, fd_sink, &out_fd, mode, skip, compressed, out_bytes, err);
}

int move_zstd_encode(int in_fd, int out_fd, const char *mode, bool *compressed, uint64_t *out_bytes,
                     gb_err *err)
{
    return move_zstd_encode_at(in_fd, out_fd, mode, 0, compressed, out_bytes, err);
}

struct move_zstd_decoder {
    move_sink_fn sink;
    void *ctx;
    unsigned char head[4];
    size_t nhead;
    int how; /* 0 not known yet, 1 copied, 2 zstd */
    ZSTD_DCtx *dctx;
    char *obuf;
    size_t osize;
    bool frame_done;
};

move_zstd_decoder *move_zstd_decoder_new(move_sink_fn sink, void *ctx)
{
    move_zstd_decoder *d = xcalloc(1, sizeof(*d));
    d->sink = sink;
    d->ctx = ctx;
    d->frame_done = true;
    return d;
}

static int decoder_sink(move_zstd_decoder *d, const void *p, size_t n, gb_err *err)
{
    if (n && d->sink(d->ctx, p, n) < 0)
        return err_set(err, ERR_INTERNAL, "extracting a move's data: %s",
                       errno ? strerror(errno) : "the extraction stopped");
    return 0;
}

static int decoder_zstd(move_zstd_decoder *d, const void *p, size_t n, gb_err *err)
{
    ZSTD_inBuffer in = {p, n, 0};
    bool full = false; /* the output filled: zstd may hold more to give */
    while (in.pos < in.size || full) {
        ZSTD_outBuffer out = {d->obuf, d->osize, 0};
        size_t left = ZSTD_decompressStream(d->dctx, &out, &in);
        if (ZSTD_isError(left))
            return err_set(err, ERR_INTERNAL, "decompressing a move's data: %s",
                           ZSTD_getErrorName(left));
        if (decoder_sink(d, d->obuf, out.pos, err) < 0)
            return -1;
        d->frame_done = left == 0;
        full = out.pos == out.size;
    }
    return 0;
}

/* The first four bytes decide how the rest goes. */
static int decoder_decide(move_zstd_decoder *d, gb_err *err)
{
    if (d->nhead == sizeof(d->head) && memcmp(d->head, zstd_magic, sizeof(d->head)) == 0) {
        d->how = 2;
        d->dctx = ZSTD_createDCtx();
        if (!d->dctx)
            return err_set(err, ERR_INTERNAL, "decompressing a move's data: no zstd context");
        d->osize = ZSTD_DStreamOutSize();
        d->obuf = xmalloc(d->osize);
        d->frame_done = false;
        return decoder_zstd(d, d->head, d->nhead, err);
    }
    d->how = 1;
    return decoder_sink(d, d->head, d->nhead, err);
}

int move_zstd_decoder_push(move_zstd_decoder *d, const void *data, size_t n, gb_err *err)
{
    const unsigned char *p = data;
    if (d->how == 0) {
        size_t take = sizeof(d->head) - d->nhead < n ? sizeof(d->head) - d->nhead : n;
        memcpy(d->head + d->nhead, p, take);
        d->nhead += take;
        p += take;
        n -= take;
        if (d->nhead < sizeof(d->head))
            return 0;
        if (decoder_decide(d, err) < 0)
            return -1;
    }
    if (n == 0)
        return 0;
    return d->how == 2 ? decoder_zstd(d, p, n, err) : decoder_sink(d, p, n, err);
}

int move_zstd_decoder_end(move_zstd_decoder *d, gb_err *err)
{
    int rc = 0;
    if (d->how == 0)
        rc = decoder_decide(d, err); /* fewer than four bytes: as they are */
    if (rc == 0 && d->how == 2 && !d->frame_done)
        rc = err_set(err, ERR_INTERNAL, "a move's data ended in the middle of a zstd frame");
    return rc;
}

void move_zstd_decoder_free(move_zstd_decoder *d)
{
    if (!d)
        return;
    ZSTD_freeDCtx(d->dctx);
    free(d->obuf);
    free(d);
}

int move_zstd_decode(int in_fd, int out_fd, gb_err *err)
{
    move_zstd_decoder *d = move_zstd_decoder_new(fd_sink, &out_fd);
    size_t isize = ZSTD_DStreamInSize();
    char *ibuf = xmalloc(isize);
    int rc = 0;
    for (;;) {
        ssize_t r = read(in_fd, ibuf, isize);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = err_set(err, ERR_INTERNAL, "reading a move's data: %s", strerror(errno));
            break;
        }
        if (r == 0) {
            rc = move_zstd_decoder_end(d, err);
            break;
        }
        if (move_zstd_decoder_push(d, ibuf, (size_t)r, err) < 0) {
            rc = -1;
            break;
        }
    }
    free(ibuf);
    move_zstd_decoder_free(d);
    return rc;
}
