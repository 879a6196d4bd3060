/*
 * test_cuda_pids.c - the pids file gpuboxd writes for a container
 * (src/cuda/pids.h): its parsing, and how NVML's host PIDs are matched to
 * the process's own through it, or directly without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda/pids.h"

static gpucuda_pids pids; /* large: not on the stack */

static void test_parse_lines(void **state)
{
    (void)state;
    char err[160] = "";
    assert_int_equal(gpucuda_pids_parse("# gpubox: HOSTPID PID\n\n81234 1\n  81240\t57 \r\n"
                                        "4194304 4194304",
                                        &pids, err, sizeof(err)),
                     0);
    assert_int_equal(pids.n, 3);
    assert_int_equal(pids.pid[0].host, 81234);
    assert_int_equal(pids.pid[0].own, 1);
    assert_int_equal(pids.pid[1].host, 81240);
    assert_int_equal(pids.pid[1].own, 57);
    assert_int_equal(pids.pid[2].host, 4194304);
    assert_int_equal(gpucuda_pids_parse("", &pids, err, sizeof(err)), 0);
    assert_int_equal(pids.n, 0);
}

static void test_parse_refuses(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "81234\n",    "81234 57 9\n", "81234 x\n",         "0 57\n",
        "81234 0\n",  "-1 57\n",      "4194305 57\n",      "81234 99999999999999999999\n",
        "81234,57\n", "8123457\n",    "12 34\nbad line\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[160] = "";
        assert_int_equal(gpucuda_pids_parse(bad[i], &pids, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "HOSTPID PID"));
    }
    char err[160] = "";
    gpucuda_pids_parse("12 34\nbad line\n", &pids, err, sizeof(err));
    assert_non_null(strstr(err, "line 2"));
}

static void test_parse_caps_lines(void **state)
{
    (void)state;
    size_t size = (GPUCUDA_MAX_PIDS + 10) * 24;
    char *text = malloc(size), *p = text;
    for (int i = 0; i < GPUCUDA_MAX_PIDS + 10; i++)
        p += sprintf(p, "%d %d\n", 100000 + i, i + 1);
    char err[160];
    assert_int_equal(gpucuda_pids_parse(text, &pids, err, sizeof(err)), 0);
    assert_int_equal(pids.n, GPUCUDA_MAX_PIDS);
    free(text);
}

static void test_translation(void **state)
{
    (void)state;
    static gpucuda_pids_file f;
    memset(&f, 0, sizeof(f));
    /* no file (outside gpuboxd's containers): NVML's PIDs are the process's */
    assert_true(gpucuda_pids_is_self(&f, 57, 57));
    assert_false(gpucuda_pids_is_self(&f, 81240, 57));
    /* the file: through it only; the container's PID 57 is another
     * process's host PID, never its own */
    f.present = true;
    char err[160];
    assert_int_equal(gpucuda_pids_parse("81234 1\n81240 57\n", &f.pids, err, sizeof(err)), 0);
    assert_int_equal(gpucuda_pids_host_of(&f.pids, 57), 81240);
    assert_int_equal(gpucuda_pids_host_of(&f.pids, 58), 0);
    assert_true(gpucuda_pids_is_self(&f, 81240, 57));
    assert_false(gpucuda_pids_is_self(&f, 57, 57));
    assert_false(gpucuda_pids_is_self(&f, 81234, 57));
    /* a process the file does not name yet matches nothing */
    assert_false(gpucuda_pids_is_self(&f, 58, 58));
    assert_false(gpucuda_pids_is_self(&f, 0, 58));
}

static void write_text(const char *path, const char *text)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static void test_refresh_follows_the_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpubox-cuda-pids-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/pids", dir);
    static gpucuda_pids_file f;
    memset(&f, 0, sizeof(f));
    f.path = path;
    gpucuda_pids_refresh(&f);
    assert_false(f.present);
    write_text(path, "# HOSTPID PID\n");
    gpucuda_pids_refresh(&f);
    assert_true(f.present);
    assert_int_equal(f.pids.n, 0);
    write_text(path, "81240 57\n");
    gpucuda_pids_refresh(&f);
    assert_true(gpucuda_pids_is_self(&f, 81240, 57));
    /* a malformed version keeps what was read before */
    write_text(path, "81240 57 1\n");
    gpucuda_pids_refresh(&f);
    assert_true(gpucuda_pids_is_self(&f, 81240, 57));
    write_text(path, "81241 58\n");
    gpucuda_pids_refresh(&f);
    assert_false(gpucuda_pids_is_self(&f, 81240, 57));
    assert_true(gpucuda_pids_is_self(&f, 81241, 58));
    /* removed: no longer in a gpuboxd container's terms */
    unlink(path);
    gpucuda_pids_refresh(&f);
    assert_false(f.present);
    assert_true(gpucuda_pids_is_self(&f, 57, 57));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_lines),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_caps_lines),
        cmocka_unit_test(test_translation),
        cmocka_unit_test(test_refresh_follows_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
