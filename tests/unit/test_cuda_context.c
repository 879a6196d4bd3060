/*
 * test_cuda_context.c - a process's context memory (src/cuda/context.h):
 * what NVML lists beyond what the process allocated is charged, follows
 * NVML's later answers both ways, and is asked for at most once a period.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cuda/context.h"

#define MIB (1024ULL * 1024ULL)

static void test_context_charged_and_followed(void **state)
{
    (void)state;
    gpucuda_context c = {0};
    assert_true(gpucuda_context_due(&c, 0));
    /* first allocation of 1 GiB: NVML lists 300 MiB of context besides it */
    assert_int_equal(gpucuda_context_update(&c, true, 1324 * MIB, 1024 * MIB, 5), 300 * MIB);
    assert_int_equal(c.charged, 300 * MIB);
    assert_false(gpucuda_context_due(&c, 5 + GPUCUDA_CONTEXT_PERIOD_NS - 1));
    assert_true(gpucuda_context_due(&c, 5 + GPUCUDA_CONTEXT_PERIOD_NS));
    /* the slot now holds the allocation and the context; the context grew */
    assert_int_equal(gpucuda_context_update(&c, true, 1400 * MIB, 1324 * MIB, 10), 76 * MIB);
    assert_int_equal(c.charged, 376 * MIB);
    /* and shrank */
    assert_int_equal(gpucuda_context_update(&c, true, 1124 * MIB, 1400 * MIB, 20),
                     -(int64_t)(276 * MIB));
    assert_int_equal(c.charged, 100 * MIB);
}

static void test_not_listed_counts_nothing(void **state)
{
    (void)state;
    gpucuda_context c = {.charged = 200 * MIB};
    /* the process left NVML's list (or NVML knows it by another PID): refund */
    assert_int_equal(gpucuda_context_update(&c, false, 0, 712 * MIB, 1), -(int64_t)(200 * MIB));
    assert_int_equal(c.charged, 0);
    /* NVML under what the library counted (an allocation not yet seen): nothing */
    assert_int_equal(gpucuda_context_update(&c, true, 100 * MIB, 512 * MIB, 2), 0);
    assert_int_equal(c.charged, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_charged_and_followed),
        cmocka_unit_test(test_not_listed_counts_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
