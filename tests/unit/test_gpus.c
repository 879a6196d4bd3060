/*
 * test_gpus.c - the whole-card GPU allocator: lowest index first, all or
 * nothing with a message naming the free cards, start-up re-marking,
 * release only by the owner and never twice, unhealthy cards and MIG-mode
 * cards never handed out, the status snapshot the resources API reads, and
 * 50 threads racing for 8 cards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpus_test_util.h"
#include "sched/gpus.h"

static gpus_pool *pool_of_spec(const char *spec, gpu_inventory *inv)
{
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load(spec, inv, &e), 0);
    gpus_pool *p = gpus_pool_new(inv);
    assert_non_null(p);
    return p;
}

static void test_alloc_lowest_first(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_of_spec("4xA100-80GB", &inv);
    gb_err e = GB_ERR_INIT;
    char got[4][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_size(p), 4);
    assert_int_equal(gpus_pool_free_count(p), 4);
    assert_int_equal(gpus_pool_alloc_whole(p, 0, "foo", got, &e), 0);
    assert_int_equal(gpus_pool_free_count(p), 4);

    assert_int_equal(gpus_pool_alloc_whole(p, 2, "foo", got, &e), 0);
    assert_string_equal(got[0], inv.devices[0].uuid);
    assert_string_equal(got[1], inv.devices[1].uuid);
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "bar", got, &e), 0);
    assert_string_equal(got[0], inv.devices[2].uuid);

    /* Asking for more than is free takes nothing and says what is free. */
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "baz", got, &e), -1);
    assert_int_equal(e.code, ERR_GPU_NOT_ENOUGH);
    char expect[256];
    assert_string_equal(e.msg, "GPU not enough: asked 2; the server has 4 cards, 1 free");
    /* The free card's id is in the data, never in the message. */
    snprintf(expect, sizeof(expect), "{\"asked\":2,\"cards\":4,\"freeGpus\":[\"%s\"],\"free\":1}",
             inv.devices[3].uuid);
    assert_string_equal(e.data, expect);
    assert_int_equal(gpus_pool_free_count(p), 1);

    /* foo releases card 0; the next allocation gets it back first. */
    const char *zero[] = {inv.devices[0].uuid};
    assert_int_equal(gpus_pool_release(p, zero, 1, "foo"), 1);
    assert_int_equal(gpus_pool_release(p, zero, 1, "foo"), 0); /* never twice */
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "baz", got, &e), 0);
    assert_string_equal(got[0], inv.devices[0].uuid);
    assert_string_equal(got[1], inv.devices[3].uuid);
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "qux", got, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 1; the server has 4 cards, 0 free");

    /* Owner checks. */
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "", got, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(gpus_pool_alloc_whole(p, 1, NULL, got, &e), -1);
    char longname[80];
    memset(longname, 'a', 70);
    longname[70] = '\0';
    assert_int_equal(gpus_pool_alloc_whole(p, 1, longname, got, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_release_only_by_owner(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_of_spec("3xT4-16GB", &inv);
    gb_err e = GB_ERR_INIT;
    char got[3][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "foo", got, &e), 0);
    const char *both[] = {got[0], got[1]};
    /* Another owner, an unknown card, a free card: nothing released. */
    assert_int_equal(gpus_pool_release(p, both, 2, "bar"), 0);
    const char *odd[] = {"GPU-unknown", inv.devices[2].uuid};
    assert_int_equal(gpus_pool_release(p, odd, 2, "foo"), 0);
    assert_int_equal(gpus_pool_free_count(p), 1);
    assert_int_equal(gpus_pool_release_owner(p, "bar"), 0);
    assert_int_equal(gpus_pool_release_owner(p, "foo"), 2);
    assert_int_equal(gpus_pool_release_owner(p, "foo"), 0);
    assert_int_equal(gpus_pool_free_count(p), 3);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_take_at_startup(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_of_spec("4xA100-80GB", &inv);
    gb_err e = GB_ERR_INIT;
    const char *foo[] = {inv.devices[1].uuid, inv.devices[2].uuid};
    assert_int_equal(gpus_pool_take(p, foo, 2, "foo", &e), 0);
    assert_int_equal(gpus_pool_free_count(p), 2);

    /* Held, unknown, twice in one list: an error, and nothing taken. */
    const char *held[] = {inv.devices[0].uuid, inv.devices[1].uuid};
    assert_int_equal(gpus_pool_take(p, held, 2, "bar", &e), -1);
    assert_int_equal(e.code, ERR_GPU_NOT_ENOUGH);
    assert_non_null(strstr(e.msg, "is held by foo"));
    const char *unknown[] = {inv.devices[0].uuid, "GPU-00000000-0000-4000-8000-000000000000"};
    assert_int_equal(gpus_pool_take(p, unknown, 2, "bar", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "no GPU GPU-00000000"));
    const char *twice[] = {inv.devices[0].uuid, inv.devices[0].uuid};
    assert_int_equal(gpus_pool_take(p, twice, 2, "bar", &e), -1);
    assert_non_null(strstr(e.msg, "twice"));
    assert_int_equal(gpus_pool_free_count(p), 2);

    char got[2][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "bar", got, &e), 0);
    assert_string_equal(got[0], inv.devices[0].uuid);
    assert_string_equal(got[1], inv.devices[3].uuid);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

/* An inventory by hand: card 0 fine, card 1 lost, card 2 in MIG mode with
 * two instances. */
static void mixed_inventory(gpu_inventory *inv)
{
    static const gpus_test_card cards[] = {
        {"GPU-0", "NVIDIA A100-SXM4-80GB", 0, 81920},
        {"GPU-1", "NVIDIA A100-SXM4-80GB", 1, 81920}, /* lost */
        {"GPU-2", "NVIDIA A100-SXM4-80GB", 2, 81920}, /* in MIG mode */
        {"MIG-2a", "NVIDIA A100-SXM4-80GB", 2, 9856}, /* its instances */
        {"MIG-2b", "NVIDIA A100-SXM4-80GB", 2, 9856},
    };
    static gpu_device devs[5];
    gpus_test_inventory(inv, devs, cards, 5);
    devs[1].healthy = false;
    gpus_test_mig_mode(devs, 2, 2);
}

static void test_unhealthy_and_mig(void **state)
{
    (void)state;
    gpu_inventory inv;
    mixed_inventory(&inv);
    gpus_pool *p = gpus_pool_new(&inv);
    gb_err e = GB_ERR_INIT;
    /* Schedulable: GPU-0, MIG-2a, MIG-2b (not the lost card, not the MIG card itself). */
    assert_int_equal(gpus_pool_free_count(p), 3);
    char got[4][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 4, "foo", got, &e), -1);
    assert_non_null(strstr(e.msg, "asked 4; the server has "));
    assert_non_null(strstr(e.msg, " cards, 3 free"));
    assert_non_null(strstr(e.data, "\"freeGpus\":[\"GPU-0\",\"MIG-2a\",\"MIG-2b\"]"));
    assert_int_equal(gpus_pool_alloc_whole(p, 3, "foo", got, &e), 0);
    assert_string_equal(got[0], "GPU-0");
    assert_string_equal(got[1], "MIG-2a");
    assert_string_equal(got[2], "MIG-2b");

    const char *card[] = {"GPU-2"};
    assert_int_equal(gpus_pool_take(p, card, 1, "bar", &e), -1);
    assert_non_null(strstr(e.msg, "MIG mode"));
    /* The store says bar holds the lost card: that stands. */
    const char *lost[] = {"GPU-1"};
    assert_int_equal(gpus_pool_take(p, lost, 1, "bar", &e), 0);

    gpus_status st;
    gpus_pool_status(p, &st);
    assert_int_equal(st.n, 5);
    assert_string_equal(st.devices[0].device.uuid, "GPU-0");
    assert_int_equal(st.devices[0].mode, GPUS_MODE_WHOLE);
    assert_string_equal(gpus_mode_name(st.devices[0].mode), "whole");
    assert_int_equal(st.devices[0].ntenants, 1);
    assert_string_equal(st.devices[0].tenants[0].owner, "foo");
    assert_int_equal(st.devices[0].allocated_memory_mib, 81920);
    assert_true(st.devices[0].schedulable);
    assert_false(st.devices[1].device.healthy);
    assert_false(st.devices[1].schedulable);
    assert_string_equal(st.devices[1].tenants[0].owner, "bar");
    assert_int_equal(st.devices[2].mode, GPUS_MODE_FREE);
    assert_string_equal(gpus_mode_name(st.devices[2].mode), "free");
    assert_int_equal(st.devices[2].ntenants, 0);
    assert_int_equal(st.devices[2].allocated_memory_mib, 0);
    assert_false(st.devices[2].schedulable);
    assert_true(st.devices[3].device.is_mig);
    assert_int_equal(st.devices[3].allocated_memory_mib, 9856);
    gpus_status_free(&st);

    assert_int_equal(gpus_pool_release_owner(p, "foo"), 3);
    gpus_pool_status(p, &st);
    assert_int_equal(st.devices[0].mode, GPUS_MODE_FREE);
    assert_int_equal(st.devices[0].ntenants, 0);
    gpus_status_free(&st);
    gpus_pool_free(p);
}

static void test_empty_and_long_lists(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    gpus_pool *p = gpus_pool_new(NULL);
    char got[1][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "foo", got, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 1; the server has 0 cards, 0 free");
    assert_string_equal(e.data, "{\"asked\":1,\"cards\":0,\"freeGpus\":[],\"free\":0}");
    gpus_status st;
    gpus_pool_status(p, &st);
    assert_int_equal(st.n, 0);
    gpus_status_free(&st);
    gpus_pool_free(p);

    /* Many free cards: the list in the data is cut, the count is not. */
    gpu_inventory inv;
    p = pool_of_spec("64xA100-80GB", &inv);
    char(*many)[GPU_UUID_MAX] = calloc(65, GPU_UUID_MAX);
    assert_int_equal(gpus_pool_alloc_whole(p, 65, "foo", many, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 65; the server has 64 cards, 64 free");
    assert_non_null(strstr(e.data, "\"free\":64,\"freeGpusCut\":true}"));
    assert_true(strlen(e.data) < sizeof(e.data) - 1);
    assert_int_equal(gpus_pool_alloc_whole(p, 64, "foo", many, &e), 0);
    for (int i = 0; i < 64; i++)
        assert_string_equal(many[i], inv.devices[i].uuid);
    free(many);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

#define RACERS 50

struct race {
    gpus_pool *pool;
    atomic_int successes, other_errors;
    char got[RACERS][GPU_UUID_MAX];
    bool ok[RACERS];
};

/* Racer id asks for one card as owner "rs<id>". */
static void race_one_card(void *arg, int id)
{
    struct race *r = arg;
    char owner[16];
    snprintf(owner, sizeof(owner), "rs%d", id);
    gb_err e = GB_ERR_INIT;
    char got[1][GPU_UUID_MAX];
    if (gpus_pool_alloc_whole(r->pool, 1, owner, got, &e) == 0) {
        memcpy(r->got[id], got[0], GPU_UUID_MAX);
        r->ok[id] = true;
        atomic_fetch_add(&r->successes, 1);
    } else if (e.code != ERR_GPU_NOT_ENOUGH) {
        atomic_fetch_add(&r->other_errors, 1);
    }
}

static void test_fifty_threads_eight_cards(void **state)
{
    (void)state;
    gpu_inventory inv;
    struct race *r = calloc(1, sizeof(*r));
    r->pool = pool_of_spec("8xA100-80GB", &inv);
    gpus_test_race(RACERS, race_one_card, r);
    assert_int_equal(atomic_load(&r->successes), 8);
    assert_int_equal(atomic_load(&r->other_errors), 0);
    for (int i = 0; i < RACERS; i++)
        for (int j = 0; j < i; j++)
            if (r->ok[i] && r->ok[j])
                assert_string_not_equal(r->got[i], r->got[j]);
    assert_int_equal(gpus_pool_free_count(r->pool), 0);

    /* Each winner holds exactly its card. */
    gpus_status st;
    gpus_pool_status(r->pool, &st);
    for (int i = 0; i < RACERS; i++) {
        if (!r->ok[i])
            continue;
        char owner[16];
        snprintf(owner, sizeof(owner), "rs%d", i);
        bool found = false;
        for (size_t d = 0; d < st.n; d++)
            if (strcmp(st.devices[d].device.uuid, r->got[i]) == 0)
                found = st.devices[d].ntenants == 1 &&
                        strcmp(st.devices[d].tenants[0].owner, owner) == 0;
        assert_true(found);
    }
    gpus_status_free(&st);
    gpus_pool_free(r->pool);
    free(r);
    gpu_inventory_free(&inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_lowest_first),
        cmocka_unit_test(test_release_only_by_owner),
        cmocka_unit_test(test_take_at_startup),
        cmocka_unit_test(test_unhealthy_and_mig),
        cmocka_unit_test(test_empty_and_long_lists),
        cmocka_unit_test(test_fifty_threads_eight_cards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
