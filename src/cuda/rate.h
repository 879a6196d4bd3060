/*
 * rate.h - the compute share's rate limiter: a token bucket of kernel
 * launches whose refill rate follows the card's measured utilization
 * (docs/gpus.md, "Compute shares").
 *
 * Pure: time and utilization come in as arguments, so the tests drive it
 * with a simulated card. The library calls gpucuda_rate_acquire before
 * each kernel launch (and sleeps the delay it answers) and
 * gpucuda_rate_sample whenever a new utilization sample is due
 * (GPUCUDA_RATE_PERIOD_NS).
 *
 * Control: each sample compares the utilization u with the target t. Over
 * it, the allowed launch rate becomes the rate launches actually went at
 * during the period times t/u (at least halved at a time); under it, and
 * when the bucket held launches back, the allowed rate grows by t/u (at
 * most doubled at a time; doubled when the card is idle). Since utilization is roughly proportional
 * to the launch rate of a given kernel mix, one or two samples get near the target and the next
 * ones correct the rest. The rate never drops below GPUCUDA_RATE_MIN_PER_S (a process is slowed,
 * never starved), and the bucket holds at most GPUCUDA_RATE_BURST_NS worth of launches.
 *
 * A target of 0 (no compute share) or 100 or more never delays.
 */
#ifndef GPUBOX_CUDA_RATE_H
#define GPUBOX_CUDA_RATE_H

#include <stdint.h>

#define GPUCUDA_RATE_PERIOD_NS 100000000ULL /* one utilization sample per 100 ms */
#define GPUCUDA_RATE_MIN_PER_S 20.0         /* never slower than 20 launches a second */
#define GPUCUDA_RATE_MAX_PER_S 1e8          /* effectively unlimited */
#define GPUCUDA_RATE_BURST_NS 20000000ULL   /* the bucket holds 20 ms of launches */

typedef struct {
    unsigned target;    /* percent; 0 or >= 100: not limited */
    double rate;        /* launches a second the bucket refills with */
    double tokens;      /* may go negative: launches already promised */
    uint64_t last_ns;   /* when tokens were last refilled */
    uint64_t period_ns; /* start of the current sampling period; 0: none yet */
    uint64_t launches;  /* launches in the current period */
} gpucuda_rate;

/* A limiter with the target (percent), not yet sampled: no delay until
 * the first sample. */
void gpucuda_rate_init(gpucuda_rate *r, unsigned target);

/* Changes the target (a share changed) keeping what was learnt. */
void gpucuda_rate_set_target(gpucuda_rate *r, unsigned target);

/* One launch at now_ns: takes a token and answers how long to wait before
 * launching (0: at once). */
uint64_t gpucuda_rate_acquire(gpucuda_rate *r, uint64_t now_ns);

/* A utilization sample (percent of time the card was busy, 0-100) taken
 * at now_ns: adjusts the rate from the launches since the last sample. */
void gpucuda_rate_sample(gpucuda_rate *r, uint64_t now_ns, unsigned util);

/* Whether a sample is due at now_ns (a period has passed since the last). */
int gpucuda_rate_sample_due(const gpucuda_rate *r, uint64_t now_ns);

#endif
