/*
 * fuzz_move_zstd.c - a move's data as the node it goes to reads it from
 * the other (service/replicaset/move_zstd.c: move_zstd_decode): a zstd
 * stream, or anything else copied as it is.
 *
 * Properties: no crash, no leak; input that does not begin with zstd's
 * magic number comes out unchanged; a compressed stream that decodes
 * gives, encoded again and decoded, the same bytes (one round).
 */
#include "fuzz_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "service/replicaset/move.h"

static int fuzz_file(const void *data, size_t n)
{
    FILE *f = tmpfile();
    if (!f)
        return -1;
    int fd = dup(fileno(f));
    fclose(f);
    if (n && write(fd, data, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

static unsigned char *fuzz_slurp(int fd, size_t *n)
{
    off_t end = lseek(fd, 0, SEEK_END);
    lseek(fd, 0, SEEK_SET);
    *n = end > 0 ? (size_t)end : 0;
    unsigned char *buf = malloc(*n + 1);
    if (*n && read(fd, buf, *n) != (ssize_t)*n)
        *n = 0;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    int in = fuzz_file(data, size), out = fuzz_file("", 0);
    if (in < 0 || out < 0)
        return 0;
    gb_err err = GB_ERR_INIT;
    int rc = move_zstd_decode(in, out, &err);
    lseek(out, 0, SEEK_SET);
    size_t n = 0;
    unsigned char *got = fuzz_slurp(out, &n);
    bool compressed = size >= 4 && memcmp(data, magic, 4) == 0;
    if (!compressed) {
        FUZZ_CHECK(rc == 0, "plain input refused: %s", err.msg);
        FUZZ_CHECK(n == size && (size == 0 || memcmp(got, data, size) == 0),
                   "plain input changed (%zu bytes in, %zu out)", size, n);
    } else if (rc == 0) {
        int again = fuzz_file(got, n), wire = fuzz_file("", 0), back = fuzz_file("", 0);
        bool z = false;
        uint64_t sent = 0;
        FUZZ_CHECK(move_zstd_encode(again, wire, "zstd", &z, &sent, &err) == 0, "encode: %s",
                   err.msg);
        lseek(wire, 0, SEEK_SET);
        FUZZ_CHECK(move_zstd_decode(wire, back, &err) == 0, "decode again: %s", err.msg);
        size_t m = 0;
        unsigned char *twice = fuzz_slurp(back, &m);
        FUZZ_CHECK(m == n && (n == 0 || memcmp(twice, got, n) == 0), "round trip changed it");
        free(twice);
        close(again);
        close(wire);
        close(back);
    }
    free(got);
    close(in);
    close(out);
    return 0;
}
