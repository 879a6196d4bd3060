/*
 * alloc_bench.c - how long one GPU allocation decision takes, in process,
 * through the sched/gpus.h calls gpuboxd's service layer makes
 * (gpus_pool_alloc to take, gpus_pool_release_grant to give back), on
 * simulated pools of 8, 1024 and 16384 cards. bench/alloc.sh runs it.
 *
 *   alloc_bench [--seconds S] [--cards N[,N...]] [--only TEXT]
 *
 * --only runs the request kinds whose name contains TEXT (for profiling
 * one kind under perf); --seconds is the time each row takes (default 0.5).
 *
 * The pool: cards of mixed sizes in a repeating pattern of eight (four
 * A100 80 GB, two A100 40 GB, two T4 16 GB), realistically part held,
 * placed by a fixed pseudo-random shuffle so every run sees the same pool:
 * half the cards held whole (one replica set each), a quarter shared by
 * memory (one to three tenants of 4, 8 or 12 GB), an eighth time-sliced
 * (one to three of the four replicas taken), the rest free. Tenants are
 * marked as gpuboxd marks them from the store at start-up
 * (gpus_pool_take, gpus_pool_take_grant).
 *
 * The API does not separate the decision from holding what it decided, so
 * one decision here is a take and its give-back, which leaves the pool as
 * it was: every iteration decides on the same pool. A request the pool
 * cannot meet is a refusal, timed alone (it takes nothing); the service
 * pays for its message, so the refusal path counts too.
 *
 * The baseline, on the same cards: one plain pass over an array of every
 * card's free memory (8 bytes a card, read once and summed) - the floor of
 * a decision that must look at every card, as a share's does (a whole-card
 * request stops at the first free cards and can beat it). Each row runs
 * ALLOC_BENCH_ROUNDS rounds of decisions, each followed by a round of the
 * baseline, and prints the median of each and their ratio: a round in
 * which another process had the CPU does not count, and the two sides of
 * a ratio saw the same machine.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "sched/gpus.h"
#include "util/err.h"

#define ALLOC_BENCH_MAX_COUNTS 8
#define ALLOC_BENCH_TARGET_CARDS 1024
#define ALLOC_BENCH_TARGET_US 20.0
#define ALLOC_BENCH_ROUNDS 9
#define ALLOC_BENCH_BATCH 16

/* The rows at ALLOC_BENCH_TARGET_CARDS, and how many met the target. */
static int alloc_bench_target_rows, alloc_bench_target_met;

struct alloc_bench_model {
    const char *name;
    uint64_t memory_mib;
};

/* The repeating pattern of eight cards. */
static const struct alloc_bench_model alloc_bench_models[8] = {
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-PCIE-40GB", 40960},
    {"NVIDIA A100-PCIE-40GB", 40960},
    {"Tesla T4", 16384},
    {"Tesla T4", 16384},
};

/* The request kinds, as a replica set's spec turns into them. */
struct alloc_bench_kind {
    const char *name;
    gpus_request req;
};

static const struct alloc_bench_kind alloc_bench_kinds[] = {
    {"whole, 1 card", {.count = 1}},
    {"whole, 8 cards", {.count = 8}},
    {"8GB share, binpack", {.count = 1, .memory_mib = 8192, .policy = GPUS_POLICY_BINPACK}},
    {"8GB share, spread", {.count = 1, .memory_mib = 8192, .policy = GPUS_POLICY_SPREAD}},
    {"8GB share x2, binpack", {.count = 2, .memory_mib = 8192, .policy = GPUS_POLICY_BINPACK}},
    {"time-slice replica", {.count = 1, .timeslice = true}},
    /* More than any card has: every pool refuses, so this times a refusal
     * and its message at each size. */
    {"96GB share, binpack", {.count = 1, .memory_mib = 98304, .policy = GPUS_POLICY_BINPACK}},
};
#define ALLOC_BENCH_NKINDS (sizeof(alloc_bench_kinds) / sizeof(alloc_bench_kinds[0]))

/* splitmix64: a fixed, seedable sequence, so every run builds the same pool. */
static uint64_t alloc_bench_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double alloc_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n cards with NVIDIA-shaped UUIDs ("GPU-xxxxxxxx-xxxx-..."); gpu_sim_load
 * stops at GPU_SIM_MAX_DEVICES, so the bench builds its own inventory. */
static int alloc_bench_inventory(size_t n, gpu_inventory *inv)
{
    memset(inv, 0, sizeof(*inv));
    inv->devices = calloc(n, sizeof(*inv->devices));
    if (!inv->devices)
        return -1;
    uint64_t seed = 42;
    for (size_t i = 0; i < n; i++) {
        gpu_device *d = &inv->devices[i];
        uint64_t a = alloc_bench_next(&seed), b = alloc_bench_next(&seed);
        snprintf(d->uuid, sizeof(d->uuid),
                 "GPU-%08" PRIx32 "-%04" PRIx32 "-%04" PRIx32 "-%04" PRIx32 "-%012" PRIx64,
                 (uint32_t)a, (uint32_t)(a >> 32) & 0xffff, (uint32_t)(a >> 48),
                 (uint32_t)b & 0xffff, (b >> 16) & UINT64_C(0xffffffffffff));
        d->index = (int)i;
        snprintf(d->model, sizeof(d->model), "%s", alloc_bench_models[i % 8].name);
        d->memory_mib = alloc_bench_models[i % 8].memory_mib;
        d->healthy = true;
    }
    inv->n = n;
    snprintf(inv->source, sizeof(inv->source), "simulated");
    inv->simulated = true;
    return 0;
}

/* Mark the pool part held (see the top of the file); free_mib[i] becomes
 * card i's free memory for the baseline. */
static int alloc_bench_occupy(gpus_pool *p, const gpu_inventory *inv, uint64_t *free_mib)
{
    size_t n = inv->n;
    size_t *order = calloc(n, sizeof(*order));
    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t seed = 7;
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)(alloc_bench_next(&seed) % i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    size_t nwhole = n / 2, nmemory = n / 4, ntimeslice = n / 8;
    static const uint64_t share_sizes[] = {4096, 8192, 12288};
    gb_err err = GB_ERR_INIT;
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        size_t i = order[k];
        const gpu_device *d = &inv->devices[i];
        char owner[GPUS_OWNER_MAX];
        free_mib[i] = d->memory_mib;
        if (k < nwhole) {
            const char *uuid = d->uuid;
            snprintf(owner, sizeof(owner), "whole%zu", k);
            rc = gpus_pool_take(p, &uuid, 1, owner, &err);
            free_mib[i] = 0;
            continue;
        }
        bool memory = k < nwhole + nmemory;
        if (!memory && k >= nwhole + nmemory + ntimeslice)
            continue; /* free */
        unsigned tenants = 1 + (unsigned)(alloc_bench_next(&seed) % 3);
        for (unsigned t = 0; t < tenants && rc == 0; t++) {
            gpus_grant_card c = {.mode = memory ? GPUS_MODE_MEMORY : GPUS_MODE_TIMESLICE,
                                 .replica = memory ? -1 : (int)t};
            c.memory_mib = memory ? share_sizes[alloc_bench_next(&seed) % 3]
                                  : d->memory_mib / GPUS_TIMESLICE_REPLICAS_DEFAULT;
            if (c.memory_mib > free_mib[i])
                break; /* a T4 holds what fits */
            memcpy(c.uuid, d->uuid, sizeof(c.uuid));
            gpus_grant g = {.cards = &c, .n = 1};
            snprintf(owner, sizeof(owner), "share%zu_%u", k, t);
            rc = gpus_pool_take_grant(p, &g, owner, &err);
            free_mib[i] -= c.memory_mib;
        }
    }
    free(order);
    if (rc < 0)
        fprintf(stderr, "alloc_bench: marking the pool: %s\n", err.msg);
    return rc;
}

/* Call step(arg) in batches of ALLOC_BENCH_BATCH for `seconds`;
 * microseconds per call. */
static double alloc_bench_round(void (*step)(void *), void *arg, double seconds)
{
    long calls = 0;
    double start = alloc_bench_now(), elapsed;
    do {
        for (int b = 0; b < ALLOC_BENCH_BATCH; b++)
            step(arg);
        calls += ALLOC_BENCH_BATCH;
        elapsed = alloc_bench_now() - start;
    } while (elapsed < seconds);
    return elapsed / (double)calls * 1e6;
}

static double alloc_bench_median(double *v, int n)
{
    for (int a = 1; a < n; a++) /* insertion sort: a handful of rounds */
        for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
            double t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
    return v[n / 2];
}

struct alloc_bench_pass {
    const uint64_t *free_mib;
    size_t n;
    volatile uint64_t sink;
};

/* The floor: one pass reading every card's free memory. */
static void alloc_bench_pass_step(void *arg)
{
    struct alloc_bench_pass *pass = arg;
    uint64_t sum = 0;
    /* The barrier keeps the compiler from hoisting the pass out of the loop. */
    __asm__ volatile("" : : "r"(pass->free_mib) : "memory");
    for (size_t i = 0; i < pass->n; i++)
        sum += pass->free_mib[i];
    pass->sink += sum;
}

struct alloc_bench_decision {
    gpus_pool *pool;
    const gpus_request *req;
};

/* One decision: take and give back, or a refusal. */
static void alloc_bench_decision_step(void *arg)
{
    struct alloc_bench_decision *d = arg;
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    if (gpus_pool_alloc(d->pool, d->req, "benchrs", &g, &e) == 0) {
        gpus_pool_release_grant(d->pool, &g, "benchrs");
        gpus_grant_free(&g);
    }
}

struct alloc_bench_result {
    double us;      /* per decision */
    double base_us; /* the baseline pass, in the rounds between */
    bool granted;   /* false: the pool refused the request */
    char refusal[sizeof(((gb_err *)0)->msg)];
};

/* Decide the request again and again: take and give back, or, when
 * refused, the refusal alone; in ALLOC_BENCH_ROUNDS rounds, each followed
 * by a round of the baseline pass, so both see the machine as it is at
 * that moment. The medians of each into out. -1 when the API itself
 * failed. */
static int alloc_bench_decide(gpus_pool *p, const gpus_request *req, struct alloc_bench_pass *pass,
                              double seconds, struct alloc_bench_result *out)
{
    memset(out, 0, sizeof(*out));
    gb_err err = GB_ERR_INIT;
    gpus_grant g = {0};
    out->granted = gpus_pool_alloc(p, req, "benchrs", &g, &err) == 0;
    if (out->granted) {
        gpus_pool_release_grant(p, &g, "benchrs");
        gpus_grant_free(&g);
    } else if (err.code != ERR_GPU_NOT_ENOUGH) {
        fprintf(stderr, "alloc_bench: %s\n", err.msg);
        return -1;
    } else {
        snprintf(out->refusal, sizeof(out->refusal), "%s", err.msg);
    }
    struct alloc_bench_decision d = {.pool = p, .req = req};
    double us[ALLOC_BENCH_ROUNDS], base[ALLOC_BENCH_ROUNDS];
    double round = seconds / 2 / ALLOC_BENCH_ROUNDS;
    for (int r = 0; r < ALLOC_BENCH_ROUNDS; r++) {
        us[r] = alloc_bench_round(alloc_bench_decision_step, &d, round);
        base[r] = alloc_bench_round(alloc_bench_pass_step, pass, round);
    }
    out->us = alloc_bench_median(us, ALLOC_BENCH_ROUNDS);
    out->base_us = alloc_bench_median(base, ALLOC_BENCH_ROUNDS);
    return 0;
}

static int alloc_bench_cards(size_t n, double seconds, const char *only)
{
    gpu_inventory inv;
    if (alloc_bench_inventory(n, &inv) < 0)
        return -1;
    gb_err err = GB_ERR_INIT;
    gpus_pool *p = gpus_pool_new_with(&inv, NULL, &err);
    uint64_t *free_mib = calloc(n, sizeof(*free_mib));
    int rc = p && free_mib ? alloc_bench_occupy(p, &inv, free_mib) : -1;
    if (!p)
        fprintf(stderr, "alloc_bench: pool of %zu cards: %s\n", n, err.msg);
    struct alloc_bench_pass pass = {.free_mib = free_mib, .n = n};
    for (size_t k = 0; rc == 0 && k < ALLOC_BENCH_NKINDS; k++) {
        struct alloc_bench_result r;
        if (only && !strstr(alloc_bench_kinds[k].name, only))
            continue;
        if ((rc = alloc_bench_decide(p, &alloc_bench_kinds[k].req, &pass, seconds, &r)) < 0)
            break;
        char ratio[32], target[16] = "";
        double x = r.base_us > 0 ? r.us / r.base_us : 0;
        snprintf(ratio, sizeof(ratio), x < 10 ? "%.2fx" : "%.0fx", x);
        if (n == ALLOC_BENCH_TARGET_CARDS) {
            bool met = r.us < ALLOC_BENCH_TARGET_US;
            snprintf(target, sizeof(target), "%s", met ? "met" : "missed");
            alloc_bench_target_rows++;
            alloc_bench_target_met += met;
        }
        printf("%6zu  %-22s  %-8s  %11.3f  %11.3f  %10s  %s\n", n, alloc_bench_kinds[k].name,
               r.granted ? "granted" : "refused", r.us, r.base_us, ratio, target);
        if (!r.granted)
            printf("%6s  (%s)\n", "", r.refusal);
        fflush(stdout);
    }
    free(free_mib);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
    return rc;
}

int main(int argc, char **argv)
{
    double seconds = 0.5;
    const char *only = NULL;
    size_t counts[ALLOC_BENCH_MAX_COUNTS] = {8, 1024, 16384}, ncounts = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--cards") == 0 && i + 1 < argc) {
            ncounts = 0;
            for (char *s = argv[++i], *end; *s && ncounts < ALLOC_BENCH_MAX_COUNTS; s = end) {
                counts[ncounts] = strtoul(s, &end, 10);
                if (end == s || counts[ncounts] == 0) {
                    fprintf(stderr, "alloc_bench: --cards takes N[,N...], not '%s'\n", argv[i]);
                    return 2;
                }
                ncounts++;
                end += *end == ',';
            }
        } else {
            fprintf(stderr, "usage: alloc_bench [--seconds S] [--cards N[,N...]] [--only TEXT]\n");
            return 2;
        }
    }
    if (seconds <= 0)
        seconds = 0.5;
    printf("one decision = gpus_pool_alloc + gpus_pool_release_grant (a refusal: the alloc "
           "alone)\n");
    printf("pool: A100-80GB x4, A100-40GB x2, T4-16GB x2 per 8 cards; 1/2 held whole, 1/4 "
           "memory-shared, 1/8 time-sliced, 1/8 free\n");
    printf("baseline: one pass summing every card's free memory (8 bytes a card)\n");
    printf("times: medians of %d rounds of each, interleaved, %.2f s per row\n", ALLOC_BENCH_ROUNDS,
           seconds);
    printf("\n%6s  %-22s  %-8s  %11s  %11s  %10s  %s\n", "cards", "request", "outcome",
           "us/decision", "baseline us", "x baseline", "target");
    for (size_t c = 0; c < ncounts; c++)
        if (alloc_bench_cards(counts[c], seconds, only) < 0)
            return 1;
    printf("\ntarget: < %.0f us per decision at %d cards", ALLOC_BENCH_TARGET_US,
           ALLOC_BENCH_TARGET_CARDS);
    if (alloc_bench_target_rows)
        printf(": met by %d of %d rows\n", alloc_bench_target_met, alloc_bench_target_rows);
    else
        printf(" (no %d-card rows in this run)\n", ALLOC_BENCH_TARGET_CARDS);
    return 0;
}
