/*
 * gpus_test_util.h - GPU inventories made by hand for the allocator's
 * tests (test_gpus*.c), for what a simulated spec cannot describe: lost
 * cards and cards in MIG mode with their instances.
 *
 * A test lists its devices as NVML does (sorted by index, a MIG instance
 * right after its card, carrying the card's index), each one healthy and
 * whole, and then marks what is special: a lost card (healthy = false) and
 * a card in MIG mode with its instances (gpus_test_mig_mode).
 *
 * gpus_test_race runs many racers against one pool at once, for the tests
 * that threads never share a card they must not. Include after cmocka.h.
 */
#ifndef GPUBOX_TESTS_GPUS_TEST_UTIL_H
#define GPUBOX_TESTS_GPUS_TEST_UTIL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

/* One device of a hand-made inventory. */
typedef struct gpus_test_card {
    const char *uuid;
    const char *model;
    int index;
    uint64_t memory_mib;
} gpus_test_card;

/* inv over devs (n of them, kept by the caller) from cards, as an NVML
 * source would report them: every device healthy, none MIG. */
static inline void gpus_test_inventory(gpu_inventory *inv, gpu_device *devs,
                                       const gpus_test_card *cards, size_t n)
{
    memset(devs, 0, n * sizeof(*devs));
    for (size_t i = 0; i < n; i++) {
        snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", cards[i].uuid);
        snprintf(devs[i].model, sizeof(devs[i].model), "%s", cards[i].model);
        devs[i].index = cards[i].index;
        devs[i].memory_mib = cards[i].memory_mib;
        devs[i].healthy = true;
    }
    memset(inv, 0, sizeof(*inv));
    inv->devices = devs;
    inv->n = n;
    strcpy(inv->source, "nvml");
}

/* devs[card] in MIG mode, with the ninstances devices after it as its MIG
 * instances (mig_index 0, 1, ...). */
static inline void gpus_test_mig_mode(gpu_device *devs, size_t card, size_t ninstances)
{
    devs[card].mig_enabled = true;
    for (size_t k = 0; k < ninstances; k++) {
        gpu_device *mig = &devs[card + 1 + k];
        mig->is_mig = true;
        mig->mig_index = (int)k;
        snprintf(mig->parent_uuid, sizeof(mig->parent_uuid), "%s", devs[card].uuid);
    }
}

/* One thread of gpus_test_race. */
typedef struct gpus_test_racer {
    pthread_barrier_t *start;
    void (*run)(void *race, int id);
    void *race;
    int id;
} gpus_test_racer;

static inline void *gpus_test_racer_main(void *arg)
{
    gpus_test_racer *me = arg;
    pthread_barrier_wait(me->start);
    me->run(me->race, me->id);
    return NULL;
}

/* run(race, id) for each id in 0..n-1, each in its own thread, all
 * released together by one barrier; returns when every one has ended. */
static inline void gpus_test_race(int n, void (*run)(void *race, int id), void *race)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n);
    pthread_t *threads = calloc((size_t)n, sizeof(*threads));
    gpus_test_racer *racers = calloc((size_t)n, sizeof(*racers));
    assert_non_null(threads);
    assert_non_null(racers);
    for (int i = 0; i < n; i++) {
        racers[i] = (gpus_test_racer){.start = &start, .run = run, .race = race, .id = i};
        assert_int_equal(pthread_create(&threads[i], NULL, gpus_test_racer_main, &racers[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    free(threads);
    free(racers);
}

#endif
