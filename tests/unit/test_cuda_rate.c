/*
 * test_cuda_rate.c - the compute share's rate limiter (src/cuda/rate.c)
 * as a pure function: a simulated card runs the kernels a process
 * launches as fast as the limiter lets it, reports its utilization every
 * sampling period, and the achieved utilization must settle at the
 * target; the limiter never starves a process, and without a target (or
 * at 100%) never delays.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "cuda/rate.h"

/* A card running one process's kernels of kernel_ns each, in order, with
 * a launch queue of `queue` kernels (a launch blocks while it is full, as
 * CUDA's does); each launch costs the CPU launch_ns. Runs `seconds` of
 * simulated time and answers the percent of the last `tail` seconds the
 * card was busy. */
static double simulate(unsigned target, uint64_t kernel_ns, uint64_t launch_ns, int queue,
                       double seconds, double tail, uint64_t *max_delay)
{
    gpucuda_rate r;
    gpucuda_rate_init(&r, target);
    const uint64_t start = 1000000000ULL;
    uint64_t t = start, gpu_free = start, period_busy = 0, period_start = start;
    uint64_t end = start + (uint64_t)(seconds * 1e9), tail_from = end - (uint64_t)(tail * 1e9);
    uint64_t tail_busy = 0;
    *max_delay = 0;
    while (t < end) {
        if (gpucuda_rate_sample_due(&r, t)) {
            /* busy time of the period: what ran up to t of the work queued */
            uint64_t span = t - period_start;
            uint64_t busy = period_busy;
            uint64_t pending = gpu_free > t ? gpu_free - t : 0;
            busy = busy > pending ? busy - pending : 0;
            unsigned util = (unsigned)(busy * 100 / span);
            gpucuda_rate_sample(&r, t, util > 100 ? 100 : util);
            period_busy = pending;
            period_start = t;
        }
        uint64_t d = gpucuda_rate_acquire(&r, t);
        if (d > *max_delay)
            *max_delay = d;
        t += d;
        uint64_t begin = gpu_free > t ? gpu_free : t;
        gpu_free = begin + kernel_ns;
        period_busy += kernel_ns;
        if (begin >= tail_from)
            tail_busy += kernel_ns;
        if (gpu_free - t > (uint64_t)queue * kernel_ns)
            t = gpu_free - (uint64_t)queue * kernel_ns; /* the queue is full */
        t += launch_ns;
    }
    return (double)tail_busy * 100.0 / (tail * 1e9);
}

static void test_converges_to_target(void **state)
{
    (void)state;
    const struct {
        unsigned target;
        uint64_t kernel_ns;
    } cases[] = {
        {30, 1000000}, {30, 50000}, {30, 5000},   {10, 200000},
        {50, 1000000}, {70, 20000}, {90, 100000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t max_delay;
        double unlimited = simulate(0, cases[i].kernel_ns, 2000, 1024, 5, 3, &max_delay);
        assert_true(unlimited > 99);
        assert_int_equal(max_delay, 0);
        double got = simulate(cases[i].target, cases[i].kernel_ns, 2000, 1024, 20, 10, &max_delay);
        if (got < cases[i].target - 5.0 || got > cases[i].target + 5.0)
            fail_msg("target %u%%, kernels of %llu ns: %.1f%% busy", cases[i].target,
                     (unsigned long long)cases[i].kernel_ns, got);
    }
}

static void test_no_target_no_delay(void **state)
{
    (void)state;
    unsigned targets[] = {0, 100, 150};
    for (size_t i = 0; i < 3; i++) {
        gpucuda_rate r;
        gpucuda_rate_init(&r, targets[i]);
        uint64_t t = 1;
        for (int k = 0; k < 100000; k++, t += 1000) {
            if (gpucuda_rate_sample_due(&r, t))
                gpucuda_rate_sample(&r, t, 100);
            assert_int_equal(gpucuda_rate_acquire(&r, t), 0);
        }
    }
}

/* The card is always reported full (another tenant's work, say): the
 * process slows to the floor rate but keeps launching. */
static void test_never_starves(void **state)
{
    (void)state;
    gpucuda_rate r;
    gpucuda_rate_init(&r, 1);
    uint64_t t = 1000000000ULL, end = t + 10000000000ULL, launches = 0, max_delay = 0;
    while (t < end) {
        if (gpucuda_rate_sample_due(&r, t))
            gpucuda_rate_sample(&r, t, 100);
        uint64_t d = gpucuda_rate_acquire(&r, t);
        max_delay = d > max_delay ? d : max_delay;
        t += d + 1000;
        launches++;
    }
    assert_true(max_delay <= (uint64_t)(1e9 / GPUCUDA_RATE_MIN_PER_S) + 1000000);
    assert_true(launches >= (uint64_t)(10 * GPUCUDA_RATE_MIN_PER_S * 0.9));
}

/* Under the target and not held back: the allowed rate stays; a target
 * raised to 100 stops delaying at once. */
static void test_idle_and_target_change(void **state)
{
    (void)state;
    gpucuda_rate r;
    gpucuda_rate_init(&r, 30);
    uint64_t t = 1000000000ULL;
    for (int k = 0; k < 1000; k++, t += 1000)
        gpucuda_rate_acquire(&r, t);
    t += GPUCUDA_RATE_PERIOD_NS;
    gpucuda_rate_sample(&r, t, 90); /* over: slowed */
    double slowed = r.rate;
    assert_true(slowed < 1e7);
    t += 10 * GPUCUDA_RATE_PERIOD_NS;
    gpucuda_rate_sample(&r, t, 0); /* idle, no launches: the rate stays */
    assert_true(r.rate == slowed);
    gpucuda_rate_set_target(&r, 100);
    for (int k = 0; k < 10000; k++, t += 10)
        assert_int_equal(gpucuda_rate_acquire(&r, t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_converges_to_target),
        cmocka_unit_test(test_no_target_no_delay),
        cmocka_unit_test(test_never_starves),
        cmocka_unit_test(test_idle_and_target_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
