/*
 * test_cuda_limits.c - the CUDA limiter's limits file (src/cuda/limits.h):
 * UUIDs as cuDeviceGetUuid gives them, good and malformed files, and the
 * re-read when gpuboxd replaces the file (rename), rewrites it, removes it
 * or writes a malformed one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda/limits.h"

#define UUID_A "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define UUID_B "GPU-bbbbbbbb-1111-4000-8000-000000000001"

static char tmpdir[64], path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpubox-cuda-limits-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(path, sizeof(path), "%s/limits", tmpdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    unlink(tmp);
    unlink(path);
    rmdir(tmpdir);
    return 0;
}

/* Writes text as gpuboxd does: a temporary file renamed over the old one. */
static void replace_file(const char *text)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static void test_uuid_parse(void **state)
{
    (void)state;
    unsigned char u[16];
    assert_int_equal(gpucuda_uuid_parse(UUID_B, strlen(UUID_B), u), 0);
    const unsigned char want[16] = {0xbb, 0xbb, 0xbb, 0xbb, 0x11, 0x11, 0x40, 0x00,
                                    0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
    assert_memory_equal(u, want, 16);
    const char *mig = "MIG-dddddddd-2222-4000-8000-000000000000";
    assert_int_equal(gpucuda_uuid_parse(mig, strlen(mig), u), 0);
    const char *bad[] = {"GPU-aaaaaaaa-0000-4000-8000-00000000000",   /* short */
                         "GPU-aaaaaaaa-0000-4000-8000-0000000000000", /* long */
                         "XYZ-aaaaaaaa-0000-4000-8000-000000000000",  /* prefix */
                         "GPU-aaaaaaaa00000-4000-8000-000000000000",  /* dash moved */
                         "GPU-gaaaaaaa-0000-4000-8000-000000000000"}; /* not hex */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gpucuda_uuid_parse(bad[i], strlen(bad[i]), u), -1);
}

static void test_parse_good(void **state)
{
    (void)state;
    gpucuda_limits l;
    char err[160];
    const char *text = "# gpubox CUDA limits\n"
                       "\n"
                       "  " UUID_A " 8192\n" UUID_B "\t1 cores=30 future=x\r\n";
    assert_int_equal(gpucuda_limits_parse(text, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.dev[0].memory_bytes, 8192ULL << 20);
    assert_int_equal(l.dev[1].memory_bytes, 1ULL << 20);
    assert_int_equal(l.dev[0].cores, 0); /* no compute share */
    assert_int_equal(l.dev[1].cores, 30);
    assert_int_equal(gpucuda_limits_parse(UUID_A " 8 cores=100\n", &l, err, sizeof(err)), 0);
    assert_int_equal(l.dev[0].cores, 0); /* the whole card's time: not limited */
    assert_int_equal(gpucuda_limits_parse(text, &l, err, sizeof(err)), 0);
    unsigned char b[16];
    gpucuda_uuid_parse(UUID_B, strlen(UUID_B), b);
    const gpucuda_limit *found = gpucuda_limits_find(&l, b);
    assert_non_null(found);
    assert_ptr_equal(found, &l.dev[1]);

    assert_int_equal(gpucuda_limits_parse("", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
    assert_null(gpucuda_limits_find(&l, b));
}

static void test_parse_malformed(void **state)
{
    (void)state;
    const struct {
        const char *text, *message;
    } cases[] = {
        {"GPU-nope 8192\n", "line 1: expected a GPU-... or MIG-... UUID"},
        {"# c\n" UUID_A "\n", "line 2: expected the share in MiB"},
        {UUID_A " 0\n", "line 1: expected the share in MiB"},
        {UUID_A " -5\n", "line 1: expected the share in MiB"},
        {UUID_A " 12ab\n", "line 1: expected the share in MiB"},
        {UUID_A " 99999999999999999999\n", "line 1: expected the share in MiB"},
        {UUID_A " 8192 junk\n", "line 1: expected KEY=VALUE after the share"},
        {UUID_A " 8192\n" UUID_A " 4096\n", "line 2: the card is named twice"},
        {UUID_A " 8192 cores=0\n", "line 1: cores= takes a percent, 1 to 100"},
        {UUID_A " 8192 cores=101\n", "line 1: cores= takes a percent, 1 to 100"},
        {UUID_A " 8192 cores=3x\n", "line 1: cores= takes a percent, 1 to 100"},
        {UUID_A " 8192 cores=\n", "line 1: cores= takes a percent, 1 to 100"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gpucuda_limits l = {.n = 7};
        char err[160] = "";
        assert_int_equal(gpucuda_limits_parse(cases[i].text, &l, err, sizeof(err)), -1);
        assert_non_null(strstr(err, cases[i].message));
        assert_int_equal(l.n, 7); /* untouched */
    }
    /* More cards than the library follows. */
    char text[4096] = "";
    for (int i = 0; i <= GPUCUDA_MAX_DEVICES; i++) {
        char line[80];
        snprintf(line, sizeof(line), "GPU-aaaaaaaa-0000-4000-8000-%012d 100\n", i);
        strcat(text, line);
    }
    gpucuda_limits l;
    char err[160];
    assert_int_equal(gpucuda_limits_parse(text, &l, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "more than 16 cards"));
}

static void test_refresh(void **state)
{
    (void)state;
    gpucuda_limits_file f = {.path = path};
    /* No file: nothing limited, nothing changed. */
    assert_false(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.n, 0);

    replace_file(UUID_A " 4096\n");
    assert_true(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.n, 1);
    assert_int_equal(f.limits.dev[0].memory_bytes, 4096ULL << 20);
    unsigned gen = f.generation;
    /* Unchanged file: one stat, no re-read. */
    assert_false(gpucuda_limits_refresh(&f));
    assert_int_equal(f.generation, gen);

    /* Replaced by rename, same size: a new inode is enough. */
    replace_file(UUID_A " 2048\n");
    assert_true(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.dev[0].memory_bytes, 2048ULL << 20);
    assert_true(f.generation != gen);

    /* Replaced by the same limits: no change reported. */
    replace_file("# same\n" UUID_A " 2048\n");
    assert_false(gpucuda_limits_refresh(&f));

    /* Malformed: the last good limits stay. */
    replace_file(UUID_A " lots\n");
    assert_false(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.n, 1);
    assert_int_equal(f.limits.dev[0].memory_bytes, 2048ULL << 20);

    /* Rewritten in place (same inode), a second card added. */
    FILE *w = fopen(path, "w");
    assert_non_null(w);
    fputs(UUID_A " 2048\n" UUID_B " 1024\n", w);
    fclose(w);
    assert_true(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.n, 2);

    /* Removed: nothing is limited any more. */
    unlink(path);
    assert_true(gpucuda_limits_refresh(&f));
    assert_int_equal(f.limits.n, 0);
    assert_false(gpucuda_limits_refresh(&f));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_parse),
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test_setup_teardown(test_refresh, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
