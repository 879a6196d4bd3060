/*
 * rate.c - the compute share's rate limiter (rate.h).
 */
#include "rate.h"

static int limited(const gpucuda_rate *r)
{
    return r->target > 0 && r->target < 100;
}

void gpucuda_rate_init(gpucuda_rate *r, unsigned target)
{
    *r = (gpucuda_rate){.target = target, .rate = GPUCUDA_RATE_MAX_PER_S};
}

void gpucuda_rate_set_target(gpucuda_rate *r, unsigned target)
{
    r->target = target;
    if (!limited(r))
        r->rate = GPUCUDA_RATE_MAX_PER_S;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void refill(gpucuda_rate *r, uint64_t now_ns)
{
    double burst = r->rate * (double)GPUCUDA_RATE_BURST_NS / 1e9;
    if (burst < 1)
        burst = 1;
    if (r->last_ns == 0 || now_ns < r->last_ns) {
        r->tokens = burst;
    } else {
        r->tokens += (double)(now_ns - r->last_ns) * r->rate / 1e9;
        if (r->tokens > burst)
            r->tokens = burst;
    }
    r->last_ns = now_ns;
}

uint64_t gpucuda_rate_acquire(gpucuda_rate *r, uint64_t now_ns)
{
    if (r->period_ns == 0)
        r->period_ns = now_ns ? now_ns : 1;
    r->launches++;
    if (!limited(r))
        return 0;
    refill(r, now_ns);
    r->tokens -= 1;
    if (r->tokens >= 0)
        return 0;
    /* The token this launch took comes -tokens/rate seconds from now. */
    return (uint64_t)(-r->tokens / r->rate * 1e9);
}

int gpucuda_rate_sample_due(const gpucuda_rate *r, uint64_t now_ns)
{
    return r->period_ns != 0 && now_ns >= r->period_ns + GPUCUDA_RATE_PERIOD_NS;
}

void gpucuda_rate_sample(gpucuda_rate *r, uint64_t now_ns, unsigned util)
{
    uint64_t span = r->period_ns && now_ns > r->period_ns ? now_ns - r->period_ns : 0;
    double went = span ? (double)r->launches * 1e9 / (double)span : 0;
    r->period_ns = now_ns ? now_ns : 1;
    r->launches = 0;
    if (!limited(r))
        return;
    if (util > 100)
        util = 100;
    double t = r->target, u = util;
    double next;
    if (u > t) {
        /* Over: from the rate launches really went at (the allowed rate
         * may be far above it), scaled down. */
        double base = went > 0 && went < r->rate ? went : r->rate;
        next = base * clamp(t / u, 0.5, 1.0);
    } else if (went < r->rate * 0.8) {
        next = r->rate; /* under, but not held back by the bucket: no need to grow */
    } else {
        next = r->rate * (u < 1 ? 2.0 : clamp(t / u, 1.0, 2.0));
    }
    refill(r, now_ns); /* tokens earned so far at the old rate */
    r->rate = clamp(next, GPUCUDA_RATE_MIN_PER_S, GPUCUDA_RATE_MAX_PER_S);
}
