/*
 * test_move_zstd.c - a move's data on the wire (service/replicaset/
 * move_zstd.c): what the source encodes, the target decodes back to the
 * same bytes, whichever way it went (none, zstd, auto's choice by a
 * sample); and a stream cut short or corrupted is an error, never a
 * shorter archive taken for a whole one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/replicaset/move.h"

/* A file holding data, rewound (the encoder reads to its end). */
static int file_with(const void *data, size_t n)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    int fd = dup(fileno(f));
    fclose(f);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

static int empty_file(void)
{
    return file_with("", 0);
}

static size_t file_size(int fd)
{
    off_t end = lseek(fd, 0, SEEK_END);
    lseek(fd, 0, SEEK_SET);
    return (size_t)end;
}

static unsigned char *slurp(int fd, size_t *n)
{
    *n = file_size(fd);
    unsigned char *buf = malloc(*n + 1);
    assert_int_equal(read(fd, buf, *n), (ssize_t)*n);
    return buf;
}

/* Something like a tar of text files: compresses well. */
static unsigned char *text_like(size_t n)
{
    unsigned char *b = malloc(n);
    const char *words = "bin/ etc/passwd root:x:0:0:root:/root:/bin/sh usr/lib/python3/ ";
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)words[(i * 7 + i / 64) % strlen(words)];
    memcpy(b, "root/", 5); /* as a tar begins: a path */
    return b;
}

/* Random bytes: compress not at all. */
static unsigned char *random_like(size_t n)
{
    unsigned char *b = malloc(n);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (unsigned char)x;
    }
    memcpy(b, "data/", 5);
    return b;
}

/* Encode data as mode says, decode it: the same bytes. */
static void round_trip(const unsigned char *data, size_t n, const char *mode, bool want_compressed)
{
    int in = file_with(data, n), wire = empty_file(), out = empty_file();
    bool compressed = true;
    uint64_t sent = 0;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(move_zstd_encode(in, wire, mode, &compressed, &sent, &err), 0);
    assert_int_equal(compressed, want_compressed);
    assert_int_equal(sent, file_size(wire));
    if (want_compressed && n > 4096)
        assert_true(sent < n / 2);
    else if (!want_compressed)
        assert_int_equal(sent, n);
    assert_int_equal(lseek(wire, 0, SEEK_SET), 0);
    assert_int_equal(move_zstd_decode(wire, out, &err), 0);
    size_t got_n;
    unsigned char *got = slurp(out, &got_n);
    assert_int_equal(got_n, n);
    assert_memory_equal(got, data, n);
    free(got);
    close(in);
    close(wire);
    close(out);
}

static void test_each_mode_gives_back_the_same_bytes(void **state)
{
    (void)state;
    size_t n = 6u * 1024 * 1024 + 123; /* past auto's sample */
    unsigned char *text = text_like(n), *rnd = random_like(n);
    round_trip(text, n, "none", false);
    round_trip(text, n, "zstd", true);
    round_trip(text, n, "auto", true);
    round_trip(text, n, NULL, true);
    round_trip(rnd, n, "auto", false); /* not worth it */
    round_trip(rnd, 1000, "auto", false);
    round_trip(text, 3, "zstd", true);
    free(text);
    free(rnd);
}

static void test_an_empty_stream(void **state)
{
    (void)state;
    int in = empty_file(), wire = empty_file(), out = empty_file();
    bool compressed;
    uint64_t sent;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(move_zstd_encode(in, wire, "auto", &compressed, &sent, &err), 0);
    assert_false(compressed);
    assert_int_equal(move_zstd_decode(wire, out, &err), 0);
    assert_int_equal(file_size(out), 0);
    close(in);
    close(wire);
    close(out);
}

/* A compressed stream cut short or changed is an error. */
static void test_a_stream_cut_or_corrupted_is_refused(void **state)
{
    (void)state;
    size_t n = 1024 * 1024;
    unsigned char *text = text_like(n);
    int in = file_with(text, n), wire = empty_file();
    bool compressed;
    uint64_t sent;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(move_zstd_encode(in, wire, "zstd", &compressed, &sent, &err), 0);
    size_t wn;
    unsigned char *w = slurp(wire, &wn);
    int cut = file_with(w, wn / 2), out = empty_file();
    assert_int_equal(move_zstd_decode(cut, out, &err), -1);
    assert_non_null(strstr(err.msg, "zstd"));
    w[wn / 2] ^= 0x55;
    w[wn / 2 + 1] ^= 0xaa;
    int bad = file_with(w, wn), out2 = empty_file();
    err = (gb_err)GB_ERR_INIT;
    assert_int_equal(move_zstd_decode(bad, out2, &err), -1);
    free(w);
    free(text);
    close(in);
    close(wire);
    close(cut);
    close(out);
    close(bad);
    close(out2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_mode_gives_back_the_same_bytes),
        cmocka_unit_test(test_an_empty_stream),
        cmocka_unit_test(test_a_stream_cut_or_corrupted_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
