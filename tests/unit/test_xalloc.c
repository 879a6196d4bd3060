/*
 * test_xalloc.c - out of memory aborts in one place: an impossible
 * allocation kills the process by SIGABRT with one line on stderr, and the
 * wrappers behave like the libc calls they replace otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "util/xalloc.h"

/* Under AddressSanitizer an impossible malloc must return NULL, as libc's
 * does, rather than be reported by the sanitizer itself. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

typedef void (*doomed_fn)(void);

/* Run `fn` in a child with stderr on a pipe; return its wait status and what
 * it wrote to stderr. */
static int run_child(doomed_fn fn, char *out, size_t out_size)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < out_size && (r = read(fds[0], out + n, out_size - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void malloc_size_max(void)
{
    void *p = xmalloc(SIZE_MAX);
    free(p);
}

static void calloc_overflow(void)
{
    void *p = xcalloc(SIZE_MAX / 2, 4);
    free(p);
}

static void realloc_size_max(void)
{
    void *p = xrealloc(NULL, SIZE_MAX);
    free(p);
}

static void json_huge_string(void)
{
    xalloc_init("gpuboxd");
    /* jansson copies the string: its allocation goes through xmalloc. */
    json_t *s = json_stringn_nocheck("", SIZE_MAX - 1);
    json_decref(s);
}

static void assert_aborts(doomed_fn fn, const char *expect)
{
    char err[512];
    int status = run_child(fn, err, sizeof(err));
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(err, expect));
}

static void test_malloc_aborts(void **state)
{
    (void)state;
    char expect[96];
    snprintf(expect, sizeof(expect), "gpuboxd: out of memory allocating %zu bytes", SIZE_MAX);
    assert_aborts(malloc_size_max, expect);
    assert_aborts(realloc_size_max, expect);
}

static void test_calloc_overflow_aborts(void **state)
{
    (void)state;
    assert_aborts(calloc_overflow, "gpuboxd: out of memory allocating");
}

static void test_json_allocations_abort(void **state)
{
    (void)state;
    assert_aborts(json_huge_string, "gpuboxd: out of memory allocating");
}

static char *vformat(const char *fmt, ...) XALLOC_PRINTF(1, 2);
static char *vformat(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

static void test_wrappers_work(void **state)
{
    (void)state;
    char *s = xstrdup("volume");
    assert_string_equal(s, "volume");
    free(s);
    s = xstrndup("replicaset", 7);
    assert_string_equal(s, "replica");
    free(s);
    s = xstrndup("rs", 10);
    assert_string_equal(s, "rs");
    free(s);
    s = xasprintf("%s-%d", "gpu", 3);
    assert_string_equal(s, "gpu-3");
    free(s);
    s = vformat("%s=%zu", "GPUBOX_GPU_MEMORY_MIB", (size_t)8192);
    assert_string_equal(s, "GPUBOX_GPU_MEMORY_MIB=8192");
    free(s);
    int *v = xcalloc(4, sizeof(int));
    assert_int_equal(v[3], 0);
    v = xreallocarray(v, 8, sizeof(int));
    v[7] = 1;
    free(v);
    free(xmalloc(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_aborts),
        cmocka_unit_test(test_calloc_overflow_aborts),
        cmocka_unit_test(test_json_allocations_abort),
        cmocka_unit_test(test_wrappers_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
