/*
 * test_carry_relay.c - a move's stream cut off part way (carry/carry_tar.c,
 * carry_tar_relay): whatever byte it is cut at, what goes on to the
 * extraction is a whole archive (the entry under way completed with zeros,
 * held-back PAX headers dropped, the end blocks added), and the offset it
 * gives to resume at is the start of the first entry that did not come
 * whole - so the stream sent again from there, after what was extracted,
 * gives every entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "carry/carry.h"
#include "carry/carry_internal.h"

static unsigned char archive[64 * 1024];
static size_t archive_len;
/* Where each real entry (its PAX header included) begins and ends. */
static size_t starts[8], ends[8];
static size_t nentries;

static void put_header(const char *name, char type, size_t size)
{
    unsigned char *h = archive + archive_len;
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011zo", size);
    memcpy(h + 136, "14000000000", 12);
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    archive_len += 512;
}

static void put_data(size_t size, unsigned char fill)
{
    memset(archive + archive_len, fill, size);
    archive_len += (size + 511) / 512 * 512;
}

static void put_file(const char *name, size_t size, unsigned char fill, bool pax)
{
    starts[nentries] = archive_len;
    if (pax) {
        char rec[200];
        int n = snprintf(rec, sizeof(rec), "%d path=%s\n", (int)strlen(name) + 9, name);
        put_header("PaxHeaders/x", 'x', (size_t)n);
        put_data((size_t)n, 0);
        memcpy(archive + archive_len - 512, rec, (size_t)n);
    }
    put_header(pax ? "short" : name, size ? '0' : '5', size);
    if (size)
        put_data(size, fill);
    ends[nentries++] = archive_len;
}

static int setup(void **state)
{
    (void)state;
    archive_len = nentries = 0;
    put_file("a", 1000, 'a', false);
    put_file("d/", 0, 0, false);
    put_file("a-name-long-enough-to-need-a-pax-record-of-its-own", 3000, 'b', true);
    put_file("c", 700, 'c', false);
    memset(archive + archive_len, 0, 1024);
    archive_len += 1024;
    return 0;
}

static int pipe_with(const void *data, size_t n)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    int fd = dup(fileno(f));
    fclose(f);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

/* The relay over the first cut bytes: what it wrote, *whole, *complete. */
static unsigned char *relay(size_t cut, size_t *out_len, uint64_t *whole, bool *complete)
{
    int in = pipe_with(archive, cut), out = pipe_with("", 0);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(carry_tar_relay(in, out, whole, complete, &err), 0);
    off_t end = lseek(out, 0, SEEK_END);
    lseek(out, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)end + 1);
    assert_int_equal(read(out, buf, (size_t)end), end);
    close(in);
    close(out);
    *out_len = (size_t)end;
    return buf;
}

static void test_a_whole_stream_passes_as_it_is(void **state)
{
    (void)state;
    size_t n;
    uint64_t whole;
    bool complete;
    unsigned char *out = relay(archive_len, &n, &whole, &complete);
    assert_true(complete);
    assert_int_equal(n, archive_len);
    assert_memory_equal(out, archive, n);
    assert_int_equal(whole, ends[nentries - 1]);
    free(out);
}

/* Entries of the archive in buf: each must read, up to the end blocks. */
static size_t count_entries(const unsigned char *buf, size_t n)
{
    int fd = pipe_with(buf, n);
    carry_tar_reader *r = carry_tar_reader_new(fd);
    size_t count = 0;
    gb_err err = GB_ERR_INIT;
    for (;;) {
        carry_tar_entry e;
        int got = carry_tar_next(r, &e, &err);
        if (got < 0)
            print_error("%s\n", err.msg);
        assert_true(got >= 0);
        if (got == 0)
            break;
        assert_int_equal(carry_tar_data(r, &e, -1, &err), 0);
        carry_tar_entry_clear(&e);
        count++;
    }
    carry_tar_reader_free(r);
    close(fd);
    return count;
}

static void test_a_stream_cut_anywhere_ends_as_a_whole_archive(void **state)
{
    (void)state;
    for (size_t cut = 0; cut < ends[nentries - 1]; cut += 37) {
        size_t n;
        uint64_t whole;
        bool complete;
        unsigned char *out = relay(cut, &n, &whole, &complete);
        assert_false(complete);
        /* resume at the end of the last entry that came whole */
        size_t expect = 0, done = 0;
        for (size_t i = 0; i < nentries; i++)
            if (ends[i] <= cut) {
                expect = ends[i];
                done = i + 1;
            }
        assert_int_equal(whole, expect);
        assert_int_equal(n % 512, 0);
        /* what came whole, as it came */
        assert_memory_equal(out, archive, expect);
        /* and at most the entry under way after it (its PAX header is held
         * back until its own header came) */
        size_t count = count_entries(out, n);
        assert_true(count >= done && count <= done + 1);
        free(out);
    }
}

static void test_the_resumed_stream_begins_with_an_entry(void **state)
{
    (void)state;
    for (size_t i = 0; i < nentries; i++)
        assert_true(carry_tar_block_starts_entry(archive + starts[i]));
    assert_true(carry_tar_block_starts_entry(archive + archive_len - 512)); /* an end block */
    assert_false(carry_tar_block_starts_entry(archive + 512 + 3));          /* file data */
}

/* Cut inside an entry's data, the relay names that entry by its headers
 * (the PAX one included), which begin where the whole entries end; cut
 * between entries or inside headers, it names none. */
static void test_a_cut_inside_data_gives_the_entry_head(void **state)
{
    (void)state;
    for (size_t cut = 1; cut < archive_len - 1024; cut += 37) {
        int out = open("/dev/null", O_WRONLY);
        carry_relay *r = carry_relay_new(out);
        assert_int_equal(carry_relay_feed(r, archive, cut), 0);
        uint64_t len = 0, hash = 0, whole = 0;
        bool has = carry_relay_head(r, &len, &hash);
        bool complete = false;
        gb_err err = GB_ERR_INIT;
        assert_int_equal(carry_relay_end(r, &whole, &complete, &err), 0);
        close(out);
        size_t k = 0;
        while (k < nentries && ends[k] <= cut)
            k++;
        /* where entry k's data begins: after its headers (setup's sizes,
         * padded to whole blocks; the directory has none) */
        static const size_t data_len[] = {1024, 0, 3072, 1024};
        size_t data_at = k < nentries ? ends[k] - data_len[k] : 0;
        bool in_data = k < nentries && data_len[k] > 0 && cut >= data_at;
        assert_int_equal(has, in_data);
        if (has) {
            assert_int_equal(whole, starts[k]);
            assert_int_equal(len, data_at - starts[k]);
            assert_true(hash == carry_tar_head_hash(0, archive + starts[k], (size_t)len));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_whole_stream_passes_as_it_is),
        cmocka_unit_test(test_a_stream_cut_anywhere_ends_as_a_whole_archive),
        cmocka_unit_test(test_the_resumed_stream_begins_with_an_entry),
        cmocka_unit_test(test_a_cut_inside_data_gives_the_entry_head),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
