/*
 * test_gpus_share.c - GPU sharing in the allocator, on mixed card sizes
 * (2 x T4 16 GB, A100 40 GB, H100 80 GB unless a test says otherwise):
 * binpack and spread placement, a share judged by its own card (never
 * split, never by the node total), whole and shared cards kept apart,
 * time-slice replicas with their memory reservation, the tenant limit,
 * oversubscription, exclusions, unhealthy cards, pinning and the model
 * filter, atomic re-allocation, the grant's JSON and start-up re-marking,
 * the container environment, the host settings parser, and concurrent
 * requests that must never over-pack a card.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpus_test_util.h"
#include "sched/gpus.h"
#include "util/cleanup.h"

#define MIXED "2xT4-16GB,1xA100-40GB,1xH100-80GB"
#define T4 16384
#define A100 40960
#define H100 81920

static gpus_pool *pool_with(const char *spec, const gpus_settings *s, gpu_inventory *inv)
{
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load(spec, inv, &e), 0);
    gpus_pool *p = gpus_pool_new_with(inv, s, &e);
    if (!p)
        fail_msg("pool: %s", e.msg);
    return p;
}

/* A memory share of mib on count cards; the grant's first card's index in inv, or -1. */
static int share(gpus_pool *p, const gpu_inventory *inv, const char *owner, uint64_t mib,
                 size_t count, enum gpus_policy policy, gpus_grant *g, gb_err *e)
{
    gpus_request req = {.count = count, .memory_mib = mib, .policy = policy};
    if (gpus_pool_alloc(p, &req, owner, g, e) < 0)
        return -1;
    for (size_t i = 0; i < inv->n; i++)
        if (strcmp(inv->devices[i].uuid, g->cards[0].uuid) == 0)
            return (int)i;
    return -2;
}

/* share() for one card, freeing the grant; the chosen index. */
static int share1(gpus_pool *p, const gpu_inventory *inv, const char *owner, uint64_t mib,
                  enum gpus_policy policy)
{
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    int at = share(p, inv, owner, mib, 1, policy, &g, &e);
    if (at >= 0) {
        assert_int_equal(g.n, 1);
        assert_int_equal(g.cards[0].memory_mib, mib);
        assert_int_equal(g.cards[0].mode, GPUS_MODE_MEMORY);
        assert_int_equal(g.cards[0].replica, -1);
    }
    gpus_grant_free(&g);
    return at;
}

static gpus_device_status device_status(gpus_pool *p, size_t i, gpus_status *st)
{
    gpus_pool_status(p, st);
    assert_true(i < st->n);
    return st->devices[i];
}

static uint64_t allocated(gpus_pool *p, size_t i)
{
    gpus_status st;
    uint64_t mib = device_status(p, i, &st).allocated_memory_mib;
    gpus_status_free(&st);
    return mib;
}

static void test_binpack_least_left(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    /* 36 GB fits the A100 and the H100; the A100 is left with less. */
    assert_int_equal(share1(p, &inv, "a", 36864, GPUS_POLICY_BINPACK), 2);
    /* A partly held big card beats a free small one when it is left with
     * less: 4 GB leaves 0 on the A100, 12 GB on a free T4. */
    assert_int_equal(share1(p, &inv, "b", 4096, GPUS_POLICY_BINPACK), 2);
    /* 10 GB: a T4 leaves 6 GB, the least; ties go to the lower index. */
    assert_int_equal(share1(p, &inv, "c", 10240, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "d", 10240, GPUS_POLICY_BINPACK), 1);
    /* 4 GB fits both T4s' 6 GB equally: the lower index. */
    assert_int_equal(share1(p, &inv, "e", 4096, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(allocated(p, 0), 14336);
    assert_int_equal(allocated(p, 1), 10240);
    assert_int_equal(allocated(p, 2), A100);
    assert_int_equal(allocated(p, 3), 0);
    gpus_status st;
    gpus_device_status d = device_status(p, 0, &st);
    assert_int_equal(d.mode, GPUS_MODE_MEMORY);
    assert_string_equal(gpus_mode_name(d.mode), "memory");
    assert_int_equal(d.ntenants, 2);
    assert_string_equal(d.tenants[0].owner, "c");
    assert_int_equal(d.tenants[0].memory_mib, 10240);
    assert_int_equal(d.tenants[0].replica, -1);
    assert_string_equal(d.tenants[1].owner, "e");
    assert_int_equal(d.free_memory_mib, 2048);
    assert_int_equal(d.capacity_mib, T4);
    assert_true(d.shareable);
    assert_false(d.excluded);
    gpus_status_free(&st);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_spread_most_left(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    assert_int_equal(share1(p, &inv, "a", 8192, GPUS_POLICY_SPREAD), 3);
    /* The H100 still has the most left (72 GB - 8 GB > 40 GB - 8 GB): spread
     * goes by memory left, not by tenant count. */
    assert_int_equal(share1(p, &inv, "b", 8192, GPUS_POLICY_SPREAD), 3);
    assert_int_equal(share1(p, &inv, "c", 40000, GPUS_POLICY_SPREAD), 3);
    /* Now the A100 (40 GB) has more than the H100 (24 GB). */
    assert_int_equal(share1(p, &inv, "d", 1024, GPUS_POLICY_SPREAD), 2);
    /* Two cards: the two with the most left, in index order. */
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    assert_int_equal(share(p, &inv, "e", 2048, 2, GPUS_POLICY_SPREAD, &g, &e), 2);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.cards[0].uuid, inv.devices[2].uuid);
    assert_string_equal(g.cards[1].uuid, inv.devices[3].uuid);
    gpus_grant_free(&g);
    /* Binpack with two cards: the two leaving the least (the T4s tie, 14 GB
     * each; the H100 would leave 21 GB). */
    assert_int_equal(share(p, &inv, "f", 2048, 2, GPUS_POLICY_BINPACK, &g, &e), 0);
    assert_string_equal(g.cards[1].uuid, inv.devices[1].uuid);
    gpus_grant_free(&g);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_share_fits_one_card_only(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with("4xT4-16GB", NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    /* 64 GB on the node, but no card has 20 GB: refused, never split. */
    assert_int_equal(share(p, &inv, "a", 20480, 1, GPUS_POLICY_BINPACK, &g, &e), -1);
    assert_int_equal(e.code, ERR_GPU_NOT_ENOUGH);
    char want[512];
    assert_string_equal(e.msg, "GPU not enough: asked 1 card with 20480 MiB; the server has 4 "
                               "cards, none can fit it; largest free share 16384 MiB");
    assert_null(g.cards);
    assert_int_equal(gpus_pool_free_count(p), 4);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);

    /* Two cards of 30000 MiB each: only the A100 can take one (the H100 has
     * 20 GB left). Nothing is taken. */
    p = pool_with(MIXED, NULL, &inv);
    assert_int_equal(share1(p, &inv, "big", 61440, GPUS_POLICY_BINPACK), 3);
    assert_int_equal(share(p, &inv, "a", 30000, 2, GPUS_POLICY_BINPACK, &g, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 2 cards with 30000 MiB each; the server has "
                               "4 cards, 1 can fit it; largest free share 40960 MiB");
    snprintf(want, sizeof(want), "\"freeGpus\":[\"%s\"],\"free\":1}", inv.devices[2].uuid);
    assert_non_null(strstr(e.data, want));
    assert_int_equal(allocated(p, 2), 0);
    assert_int_equal(gpus_pool_free_count(p), 3);
    /* More cards than the host has. */
    assert_int_equal(share(p, &inv, "a", 1024, 5, GPUS_POLICY_BINPACK, &g, &e), -1);
    assert_int_equal(e.code, ERR_GPU_NOT_ENOUGH);
    assert_non_null(strstr(e.msg, "asked 5 cards with 1024 MiB each; the server has 4 cards, 4 "
                                  "can fit it"));
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_whole_and_shares_apart(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    char got[4][GPU_UUID_MAX];
    assert_int_equal(share1(p, &inv, "s", 1024, GPUS_POLICY_BINPACK), 0);
    /* Whole cards never land on the shared T4. */
    assert_int_equal(gpus_pool_free_count(p), 3);
    assert_int_equal(gpus_pool_alloc_whole(p, 4, "w", got, &e), -1);
    char want[512];
    assert_string_equal(e.msg, "GPU not enough: asked 4; the server has 4 cards, 3 free (1 holds "
                               "memory shares or time-slice replicas)");
    snprintf(want, sizeof(want), "\"freeGpus\":[\"%s\",\"%s\",\"%s\"]", inv.devices[1].uuid,
             inv.devices[2].uuid, inv.devices[3].uuid);
    assert_non_null(strstr(e.data, want));
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "w", got, &e), 0);
    assert_string_equal(got[0], inv.devices[1].uuid);
    assert_string_equal(got[1], inv.devices[2].uuid);
    /* Shares never land on cards held whole: the H100 is the only choice
     * besides the shared T4, even with spread. */
    assert_int_equal(share1(p, &inv, "t", 1024, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "u", 20480, GPUS_POLICY_BINPACK), 3);
    assert_int_equal(share1(p, &inv, "v", 70000, GPUS_POLICY_SPREAD), -1);
    /* Pinned to a whole card: the reason names the holder. */
    const char *pin[] = {inv.devices[1].uuid};
    gpus_request req = {.memory_mib = 1024, .pin_uuids = pin, .npin = 1};
    gpus_grant g = {0};
    assert_int_equal(gpus_pool_alloc(p, &req, "x", &g, &e), -1);
    snprintf(want, sizeof(want), "GPU not enough: %s is held whole by w", inv.devices[1].uuid);
    assert_string_equal(e.msg, want);
    /* Pinned whole onto a shared card. */
    const char *pin0[] = {inv.devices[0].uuid};
    req = (gpus_request){.pin_uuids = pin0, .npin = 1};
    assert_int_equal(gpus_pool_alloc(p, &req, "x", &g, &e), -1);
    snprintf(want, sizeof(want), "GPU not enough: %s is shared by memory by 2 tenant(s)",
             inv.devices[0].uuid);
    assert_string_equal(e.msg, want);
    /* When its last tenant leaves the card is free again, for whole cards too. */
    assert_int_equal(gpus_pool_release_owner(p, "s"), 1);
    assert_int_equal(gpus_pool_release(p, pin0, 1, "t"), 1);
    gpus_status st;
    assert_int_equal(device_status(p, 0, &st).mode, GPUS_MODE_FREE);
    assert_int_equal(st.devices[0].allocated_memory_mib, 0);
    assert_int_equal(st.devices[0].free_memory_mib, T4);
    gpus_status_free(&st);
    assert_int_equal(gpus_pool_alloc(p, &req, "x", &g, &e), 0);
    assert_int_equal(g.cards[0].mode, GPUS_MODE_WHOLE);
    assert_int_equal(g.cards[0].memory_mib, T4);
    gpus_grant_free(&g);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_timeslice_replicas(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with("1xA100-40GB,1xT4-16GB", NULL, &inv); /* 4 replicas by default */
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    gpus_request ts = {.count = 1, .timeslice = true};
    char owner[16];
    for (int i = 0; i < 4; i++) {
        /* Binpack: fewest replicas left after placing, so card 0 fills first. */
        snprintf(owner, sizeof(owner), "ts%d", i);
        assert_int_equal(gpus_pool_alloc(p, &ts, owner, &g, &e), 0);
        assert_string_equal(g.cards[0].uuid, inv.devices[0].uuid);
        assert_int_equal(g.cards[0].mode, GPUS_MODE_TIMESLICE);
        assert_int_equal(g.cards[0].replica, i);
        assert_int_equal(g.cards[0].memory_mib, A100 / 4);
        gpus_grant_free(&g);
    }
    gpus_status st;
    gpus_device_status d = device_status(p, 0, &st);
    assert_int_equal(d.mode, GPUS_MODE_TIMESLICE);
    assert_string_equal(gpus_mode_name(d.mode), "timeslice");
    assert_int_equal(d.replicas_total, 4);
    assert_int_equal(d.replicas_used, 4);
    assert_int_equal(d.allocated_memory_mib, A100); /* memory and replicas agree */
    assert_int_equal(d.free_memory_mib, 0);
    assert_int_equal(d.tenants[2].replica, 2);
    gpus_status_free(&st);
    /* Card 0 is full: the next replica goes to the T4, with a quarter of its memory. */
    assert_int_equal(gpus_pool_alloc(p, &ts, "ts4", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[1].uuid);
    assert_int_equal(g.cards[0].memory_mib, T4 / 4);
    gpus_grant_free(&g);
    /* A memory share never lands on a time-sliced card, nor whole. */
    assert_int_equal(share(p, &inv, "m", 1024, 1, GPUS_POLICY_BINPACK, &g, &e), -1);
    assert_string_equal(e.msg,
                        "GPU not enough: asked 1 card with 1024 MiB; the server has 2 cards, "
                        "none can fit it; largest free share 0 MiB");
    char got[1][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "w", got, &e), -1);
    /* Released replica slot 1 is handed out again first. */
    const char *a100[] = {inv.devices[0].uuid};
    assert_int_equal(gpus_pool_release(p, a100, 1, "ts1"), 1);
    assert_int_equal(gpus_pool_alloc(p, &ts, "ts5", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[0].uuid);
    assert_int_equal(g.cards[0].replica, 1);
    gpus_grant_free(&g);
    /* Two replicas ask for two distinct cards; card 0 has none left. */
    ts.count = 2;
    assert_int_equal(gpus_pool_alloc(p, &ts, "ts6", &g, &e), -1);
    char want[512];
    assert_string_equal(e.msg, "GPU not enough: asked 2 time-slice replicas on distinct cards; the "
                               "server has 2 cards, 1 has one free");
    snprintf(want, sizeof(want), "\"freeGpus\":[\"%s\"]", inv.devices[1].uuid);
    assert_non_null(strstr(e.data, want));
    /* Spread takes the card with the most replicas left. */
    gpus_pool_release_owner(p, "ts0");
    gpus_pool_release_owner(p, "ts2");
    ts = (gpus_request){.count = 1, .timeslice = true, .policy = GPUS_POLICY_SPREAD};
    assert_int_equal(gpus_pool_alloc(p, &ts, "ts7", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[1].uuid);
    gpus_grant_free(&g);
    ts.policy = GPUS_POLICY_BINPACK;
    assert_int_equal(gpus_pool_alloc(p, &ts, "ts8", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[0].uuid); /* 2 of 4 used: 1 left after */
    assert_int_equal(g.cards[0].replica, 0);
    gpus_grant_free(&g);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);

    /* Another replica count: 8 replicas of 5120 MiB on the A100. */
    gpus_settings s;
    gpus_settings_defaults(&s);
    s.timeslice_replicas = 8;
    p = pool_with("1xA100-40GB", &s, &inv);
    ts.count = 1;
    for (int i = 0; i < 8; i++) {
        snprintf(owner, sizeof(owner), "r%d", i);
        assert_int_equal(gpus_pool_alloc(p, &ts, owner, &g, &e), 0);
        assert_int_equal(g.cards[0].memory_mib, 5120);
        gpus_grant_free(&g);
    }
    assert_int_equal(gpus_pool_alloc(p, &ts, "r8", &g, &e), -1);
    assert_non_null(strstr(e.msg, "GPU not enough: asked 1 time-slice replica; the server has "));
    assert_non_null(strstr(e.msg, ", none has one free"));
    assert_int_equal(allocated(p, 0), A100);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_max_tenants(void **state)
{
    (void)state;
    gpus_settings s;
    gpus_settings_defaults(&s);
    s.max_tenants_per_card = 2;
    gpu_inventory inv;
    gpus_pool *p = pool_with("1xA100-40GB", &s, &inv);
    assert_int_equal(share1(p, &inv, "a", 1024, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "b", 1024, GPUS_POLICY_BINPACK), 0);
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    assert_int_equal(share(p, &inv, "c", 1024, 1, GPUS_POLICY_BINPACK, &g, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 1 card with 1024 MiB; the server has 1 card, "
                               "none can fit it; largest free share 0 MiB; 1 card(s) at the limit "
                               "of 2 tenants");
    gpus_status st;
    assert_int_equal(device_status(p, 0, &st).max_tenants, 2);
    assert_int_equal(st.devices[0].free_memory_mib, 0);
    gpus_status_free(&st);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);

    /* The limit also caps the replicas a card offers. */
    p = pool_with("1xA100-40GB", &s, &inv);
    gpus_request ts = {.count = 1, .timeslice = true};
    assert_int_equal(gpus_pool_alloc(p, &ts, "a", &g, &e), 0);
    gpus_grant_free(&g);
    assert_int_equal(gpus_pool_alloc(p, &ts, "b", &g, &e), 0);
    assert_int_equal(g.cards[0].memory_mib, A100 / 4); /* still memory / replicas */
    gpus_grant_free(&g);
    assert_int_equal(gpus_pool_alloc(p, &ts, "c", &g, &e), -1);
    assert_non_null(strstr(e.msg, "1 card(s) at the limit of 2 tenants"));
    assert_int_equal(device_status(p, 0, &st).replicas_total, 2);
    gpus_status_free(&st);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_oversubscription(void **state)
{
    (void)state;
    gpus_settings s;
    gpus_settings_defaults(&s);
    s.memory_oversubscription = 1.5;
    gpu_inventory inv;
    gpus_pool *p = pool_with("1xT4-16GB", &s, &inv);
    /* 1.5 x 16 GB = 24 GB of shares; one share may be bigger than the card. */
    assert_int_equal(share1(p, &inv, "a", 20480, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "b", 4096, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "c", 1, GPUS_POLICY_BINPACK), -1);
    gpus_status st;
    gpus_device_status d = device_status(p, 0, &st);
    assert_int_equal(d.capacity_mib, 24576);
    assert_int_equal(d.allocated_memory_mib, 24576);
    gpus_status_free(&st);
    gpus_pool_free(p);

    /* Without it the same card takes 16 GB. */
    gpus_pool *q = gpus_pool_new(&inv);
    assert_int_equal(share1(q, &inv, "a", 20480, GPUS_POLICY_BINPACK), -1);
    assert_int_equal(share1(q, &inv, "a", T4, GPUS_POLICY_BINPACK), 0);
    gpus_pool_free(q);

    /* Out of range: less than 1, more than 4, not a number. */
    gb_err e = GB_ERR_INIT;
    double bad[] = {0.9, 4.5, NAN};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        s.memory_oversubscription = bad[i];
        assert_null(gpus_pool_new_with(&inv, &s, &e));
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(e.msg, "oversubscription must be between 1.0 (none) and 4.0"));
    }
    gpu_inventory_free(&inv);
}

/* Card 0 fine (T4), card 1 lost (the biggest), card 2 in MIG mode with two
 * instances, card 3 fine (A100). */
static void hand_inventory(gpu_inventory *inv, gpu_device *devs)
{
    static const gpus_test_card cards[] = {
        {"GPU-0", "Tesla T4", 0, T4},
        {"GPU-1", "NVIDIA H100 80GB HBM3", 1, H100},               /* lost */
        {"GPU-2", "NVIDIA A100-SXM4-80GB", 2, H100},               /* in MIG mode */
        {"MIG-2a", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", 2, 40192}, /* its instances */
        {"MIG-2b", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", 2, 40192},
        {"GPU-3", "NVIDIA A100-PCIE-40GB", 3, A100},
    };
    gpus_test_inventory(inv, devs, cards, 6);
    devs[1].healthy = false;
    gpus_test_mig_mode(devs, 2, 2);
}

static void test_unhealthy_and_mig_never_chosen(void **state)
{
    (void)state;
    gpu_device devs[6];
    gpu_inventory inv;
    hand_inventory(&inv, devs);
    gpus_pool *p = gpus_pool_new(&inv);
    gb_err e = GB_ERR_INIT;
    /* Spread would love the 80 GB lost card or the MIG card: neither is chosen. */
    assert_int_equal(share1(p, &inv, "a", 1024, GPUS_POLICY_SPREAD), 5);
    assert_int_equal(share1(p, &inv, "b", 39000, GPUS_POLICY_SPREAD), 3);
    assert_int_equal(share1(p, &inv, "c", 39000, GPUS_POLICY_SPREAD), 4);
    assert_int_equal(share1(p, &inv, "d", 39000, GPUS_POLICY_SPREAD), 5);
    assert_int_equal(share1(p, &inv, "e", 16000, GPUS_POLICY_SPREAD), 0);
    assert_int_equal(share1(p, &inv, "f", 2048, GPUS_POLICY_SPREAD), -1);
    gpus_request ts = {.count = 1, .timeslice = true};
    gpus_grant g = {0};
    assert_int_equal(gpus_pool_alloc(p, &ts, "g", &g, &e), -1);
    const char *pins[] = {"GPU-1", "GPU-2"};
    gpus_request req = {.memory_mib = 1024, .pin_uuids = pins, .npin = 2};
    assert_int_equal(gpus_pool_alloc(p, &req, "h", &g, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: GPU-1 is unhealthy; GPU-2 is in MIG mode (ask "
                               "for one of its MIG instances)");
    gpus_status st;
    assert_false(device_status(p, 1, &st).schedulable);
    assert_false(st.devices[1].shareable);
    assert_int_equal(st.devices[1].replicas_total, 0);
    assert_false(st.devices[2].shareable);
    assert_true(st.devices[3].shareable);
    gpus_status_free(&st);
    gpus_pool_free(p);
}

static void test_exclusions(void **state)
{
    (void)state;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load(MIXED, &inv, &e), 0);
    gpus_settings s;
    gpus_settings_defaults(&s);
    const char *all[] = {"1"};                     /* by index */
    const char *sharing[] = {inv.devices[3].uuid}; /* by UUID */
    s.exclude_all = all;
    s.nexclude_all = 1;
    s.exclude_sharing = sharing;
    s.nexclude_sharing = 1;
    gpus_pool *p = gpus_pool_new_with(&inv, &s, &e);
    assert_non_null(p);
    assert_int_equal(gpus_pool_free_count(p), 3);
    /* Shares: only cards 0 and 2; spread would pick the H100 otherwise. */
    assert_int_equal(share1(p, &inv, "a", 1024, GPUS_POLICY_SPREAD), 2);
    assert_int_equal(share1(p, &inv, "b", 16384, GPUS_POLICY_BINPACK), 0);
    assert_int_equal(share1(p, &inv, "c", 40000, GPUS_POLICY_BINPACK), -1);
    const char *pin[] = {inv.devices[3].uuid, inv.devices[1].uuid};
    gpus_request req = {.memory_mib = 1024, .pin_uuids = pin, .npin = 2};
    gpus_grant g = {0};
    assert_int_equal(gpus_pool_alloc(p, &req, "d", &g, &e), -1);
    char want[512];
    snprintf(want, sizeof(want),
             "GPU not enough: %s is excluded from sharing (whole cards only); %s is excluded "
             "from scheduling on this host",
             inv.devices[3].uuid, inv.devices[1].uuid);
    assert_string_equal(e.msg, want);
    /* Whole cards: the H100 yes, card 1 never. */
    char got[2][GPU_UUID_MAX];
    assert_int_equal(gpus_pool_alloc_whole(p, 2, "w", got, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 2; the server has 4 cards, 1 free (2 hold "
                               "memory shares or time-slice replicas)");
    assert_int_equal(gpus_pool_alloc_whole(p, 1, "w", got, &e), 0);
    assert_string_equal(got[0], inv.devices[3].uuid);
    gpus_status st;
    assert_true(device_status(p, 1, &st).excluded);
    assert_false(st.devices[1].schedulable);
    assert_false(st.devices[1].shareable);
    assert_false(st.devices[3].excluded);
    assert_true(st.devices[3].schedulable);
    assert_false(st.devices[3].shareable);
    assert_true(st.devices[0].shareable);
    gpus_status_free(&st);
    gpus_pool_free(p);

    /* A mistyped exclusion stops the pool rather than hand out the card. */
    const char *typo[] = {"GPU-nope"};
    s.exclude_all = typo;
    assert_null(gpus_pool_new_with(&inv, &s, &e));
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "GPUs excluded from scheduling: 'GPU-nope' is neither the UUID "
                                  "nor the index of a GPU on this host (GPUs: 0 GPU-"));
    const char *nine[] = {"9"};
    s.exclude_all = nine;
    assert_null(gpus_pool_new_with(&inv, &s, &e));
    assert_non_null(strstr(e.msg, "'9' is neither"));
    gpu_inventory_free(&inv);

    /* A MIG-mode card's index or UUID covers its instances. */
    gpu_device devs[6];
    hand_inventory(&inv, devs);
    const char *card2[] = {"GPU-2"};
    gpus_settings_defaults(&s);
    s.exclude_sharing = card2;
    s.nexclude_sharing = 1;
    p = gpus_pool_new_with(&inv, &s, &e);
    assert_non_null(p);
    const char *mig[] = {"MIG-2a"};
    req = (gpus_request){.memory_mib = 1024, .pin_uuids = mig, .npin = 1};
    assert_int_equal(gpus_pool_alloc(p, &req, "m", &g, &e), -1);
    assert_non_null(strstr(e.msg, "MIG-2a is excluded from sharing"));
    req.memory_mib = 0; /* whole is fine */
    assert_int_equal(gpus_pool_alloc(p, &req, "m", &g, &e), 0);
    gpus_grant_free(&g);
    gpus_pool_free(p);
}

static void test_pinning_and_model(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    /* Pinned H100 then T4: the grant is in index order (container order). */
    const char *pins[] = {inv.devices[3].uuid, inv.devices[0].uuid};
    gpus_request req = {.memory_mib = 8192, .pin_uuids = pins, .npin = 2};
    assert_int_equal(gpus_pool_alloc(p, &req, "a", &g, &e), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.cards[0].uuid, inv.devices[0].uuid);
    assert_string_equal(g.cards[1].uuid, inv.devices[3].uuid);
    gpus_grant_free(&g);
    /* The T4 has 8 GB left: a 10 GB pin fails there, with the reason, and
     * takes nothing on the H100 either. */
    req.memory_mib = 10240;
    req.count = 2;
    assert_int_equal(gpus_pool_alloc(p, &req, "b", &g, &e), -1);
    char want[512];
    snprintf(want, sizeof(want), "GPU not enough: %s has 8192 MiB free, 10240 MiB asked",
             inv.devices[0].uuid);
    assert_string_equal(e.msg, want);
    assert_int_equal(allocated(p, 3), 8192);
    /* The same owner twice on a card is refused. */
    req.memory_mib = 1024;
    assert_int_equal(gpus_pool_alloc(p, &req, "a", &g, &e), -1);
    assert_non_null(strstr(e.msg, "already has a share for a"));
    /* Count must match the pins; unknown and repeated pins are the caller's mistake. */
    req.count = 1;
    assert_int_equal(gpus_pool_alloc(p, &req, "c", &g, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "asked 1 GPUs but pinned 2; pin exactly the cards you ask for");
    const char *unknown[] = {"GPU-nope"};
    req = (gpus_request){.memory_mib = 1024, .pin_uuids = unknown, .npin = 1};
    assert_int_equal(gpus_pool_alloc(p, &req, "c", &g, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "no GPU GPU-nope on this host");
    const char *twice[] = {inv.devices[1].uuid, inv.devices[1].uuid};
    req = (gpus_request){.pin_uuids = twice, .npin = 2};
    assert_int_equal(gpus_pool_alloc(p, &req, "c", &g, &e), -1);
    assert_non_null(strstr(e.msg, "is pinned twice"));

    /* Model filter, case-insensitive, applied before choosing: spread among
     * T4s picks the emptier T4, never the H100. */
    req =
        (gpus_request){.count = 1, .memory_mib = 1024, .policy = GPUS_POLICY_SPREAD, .model = "t4"};
    assert_int_equal(gpus_pool_alloc(p, &req, "d", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[1].uuid);
    gpus_grant_free(&g);
    req.model = "V100";
    assert_int_equal(gpus_pool_alloc(p, &req, "e", &g, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 1 card with 1024 MiB of model 'V100'; the "
                               "server has 4 cards, none can fit it; largest free share 0 MiB");
    /* Whole cards by model. */
    req = (gpus_request){.count = 1, .model = "A100"};
    assert_int_equal(gpus_pool_alloc(p, &req, "f", &g, &e), 0);
    assert_string_equal(g.cards[0].uuid, inv.devices[2].uuid);
    gpus_grant_free(&g);
    assert_int_equal(gpus_pool_alloc(p, &req, "g", &g, &e), -1);
    assert_string_equal(e.msg, "GPU not enough: asked 1 of model 'A100'; the server has 4 cards, 0 "
                               "free");
    /* Pinned card of the wrong model. */
    const char *t4[] = {inv.devices[1].uuid};
    req = (gpus_request){.model = "h100", .pin_uuids = t4, .npin = 1, .memory_mib = 1024};
    assert_int_equal(gpus_pool_alloc(p, &req, "h", &g, &e), -1);
    snprintf(want, sizeof(want), "GPU not enough: %s is a %s, not 'h100'", inv.devices[1].uuid,
             inv.devices[1].model);
    assert_string_equal(e.msg, want);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_request_checks(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    gpus_request req = {.count = 1, .memory_mib = 1024, .timeslice = true};
    assert_int_equal(gpus_pool_alloc(p, &req, "a", &g, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "memory share or a time-slice replica, not both"));
    req = (gpus_request){.count = 1, .policy = (enum gpus_policy)7};
    assert_int_equal(gpus_pool_alloc(p, &req, "a", &g, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    req = (gpus_request){.count = 0, .memory_mib = 1024};
    assert_int_equal(gpus_pool_alloc(p, &req, "a", &g, &e), 0);
    assert_int_equal(g.n, 0);
    req.count = 1;
    assert_int_equal(gpus_pool_alloc(p, &req, "", &g, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(gpus_policy_parse("binpack"), GPUS_POLICY_BINPACK);
    assert_int_equal(gpus_policy_parse("Spread"), GPUS_POLICY_SPREAD);
    assert_int_equal(gpus_policy_parse(NULL), GPUS_POLICY_BINPACK);
    assert_int_equal(gpus_policy_parse("pack"), -1);
    assert_string_equal(gpus_policy_name(GPUS_POLICY_SPREAD), "spread");
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_realloc_atomic(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with("2xT4-16GB", NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant old = {0}, neu = {0};
    assert_int_equal(share(p, &inv, "a", 12288, 1, GPUS_POLICY_BINPACK, &old, &e), 0);
    assert_int_equal(share1(p, &inv, "b", 12288, GPUS_POLICY_BINPACK), 1);
    /* Grow 12 -> 16 GB: only fits where a's own share is, counted as released. */
    gpus_request req = {.count = 1, .memory_mib = T4};
    assert_int_equal(gpus_pool_realloc(p, &old, &req, "a", &neu, &e), 0);
    assert_string_equal(neu.cards[0].uuid, inv.devices[0].uuid);
    assert_int_equal(allocated(p, 0), T4);
    gpus_grant_free(&old);
    old = neu;
    /* Two whole cards do not fit (b holds a share): a keeps its share. */
    req = (gpus_request){.count = 2};
    assert_int_equal(gpus_pool_realloc(p, &old, &req, "a", &neu, &e), -1);
    assert_int_equal(e.code, ERR_GPU_NOT_ENOUGH);
    gpus_status st;
    gpus_device_status d = device_status(p, 0, &st);
    assert_int_equal(d.mode, GPUS_MODE_MEMORY);
    assert_int_equal(d.ntenants, 1);
    assert_string_equal(d.tenants[0].owner, "a");
    assert_int_equal(d.allocated_memory_mib, T4);
    gpus_status_free(&st);
    /* One whole card: a's card, its share turned whole. */
    req.count = 1;
    assert_int_equal(gpus_pool_realloc(p, &old, &req, "a", &neu, &e), 0);
    assert_int_equal(neu.cards[0].mode, GPUS_MODE_WHOLE);
    assert_string_equal(neu.cards[0].uuid, inv.devices[0].uuid);
    assert_int_equal(device_status(p, 0, &st).mode, GPUS_MODE_WHOLE);
    gpus_status_free(&st);
    /* Back to a time-slice replica, then release by grant. */
    gpus_grant_free(&old);
    old = neu;
    req = (gpus_request){.count = 1, .timeslice = true};
    assert_int_equal(gpus_pool_realloc(p, &old, &req, "a", &neu, &e), 0);
    assert_int_equal(neu.cards[0].mode, GPUS_MODE_TIMESLICE);
    assert_int_equal(gpus_pool_release_grant(p, &neu, "b"), 0);
    assert_int_equal(gpus_pool_release_grant(p, &neu, "a"), 1);
    assert_int_equal(gpus_pool_release_grant(p, &neu, "a"), 0);
    assert_int_equal(gpus_pool_free_count(p), 1);
    gpus_grant_free(&old);
    gpus_grant_free(&neu);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

/* A grant's JSON text as a record would hold it. */
static char *grant_text(const gpus_grant *g)
{
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *record = json_pack("{s:s}", "image", "x");
    assert_int_equal(gpus_grant_to_json(g, record, &e), 0);
    return json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);
}

static void assert_same_grant(const gpus_grant *a, const gpus_grant *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(a->cards[i].uuid, b->cards[i].uuid);
        assert_int_equal(a->cards[i].mode, b->cards[i].mode);
        assert_int_equal(a->cards[i].replica, b->cards[i].replica);
        if (a->cards[i].mode != GPUS_MODE_WHOLE)
            assert_int_equal(a->cards[i].memory_mib, b->cards[i].memory_mib);
    }
}

static void test_grant_json(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant mem = {0}, ts = {0}, whole = {0}, back = {0};
    assert_int_equal(share(p, &inv, "m", 8192, 2, GPUS_POLICY_BINPACK, &mem, &e), 0);
    gpus_request req = {.count = 1, .timeslice = true, .policy = GPUS_POLICY_SPREAD};
    assert_int_equal(gpus_pool_alloc(p, &req, "t", &ts, &e), 0);
    req = (gpus_request){.count = 1};
    assert_int_equal(gpus_pool_alloc(p, &req, "w", &whole, &e), 0);

    char want[1024];
    _cleanup_free_ char *text = grant_text(&mem);
    snprintf(want, sizeof(want),
             "{\"gpuShares\":[{\"memoryMiB\":8192,\"mode\":\"memory\",\"uuid\":\"%s\"},"
             "{\"memoryMiB\":8192,\"mode\":\"memory\",\"uuid\":\"%s\"}],\"gpus\":[\"%s\",\"%s\"],"
             "\"image\":\"x\"}",
             inv.devices[0].uuid, inv.devices[1].uuid, inv.devices[0].uuid, inv.devices[1].uuid);
    assert_string_equal(text, want);
    _cleanup_free_ char *ttext = grant_text(&ts);
    snprintf(want, sizeof(want),
             "{\"gpuShares\":[{\"memoryMiB\":10240,\"mode\":\"timeslice\",\"replica\":0,"
             "\"uuid\":\"%s\"}],\"gpus\":[\"%s\"],\"image\":\"x\"}",
             inv.devices[2].uuid, inv.devices[2].uuid);
    assert_string_equal(ttext, want);
    _cleanup_free_ char *wtext = grant_text(&whole);
    snprintf(want, sizeof(want), "{\"gpus\":[\"%s\"],\"image\":\"x\"}", inv.devices[3].uuid);
    assert_string_equal(wtext, want);

    /* Round trips; a record rewritten as whole loses its stale gpuShares. */
    gpus_grant *grants[] = {&mem, &ts, &whole};
    for (size_t i = 0; i < ARRAY_SIZE(grants); i++) {
        _cleanup_json_ json_t *record = json_object();
        assert_int_equal(gpus_grant_to_json(&mem, record, &e), 0);
        assert_int_equal(gpus_grant_to_json(grants[i], record, &e), 0);
        assert_int_equal(gpus_grant_from_json(record, &back, &e), 0);
        assert_same_grant(grants[i], &back);
        assert_int_equal(json_object_get(record, "gpuShares") != NULL, i < 2);
        gpus_grant_free(&back);
    }
    /* No GPUs at all. */
    _cleanup_json_ json_t *none = json_object();
    assert_int_equal(gpus_grant_from_json(none, &back, &e), 0);
    assert_int_equal(back.n, 0);
    gpus_grant_free(&back);

    /* Bad records name the field. */
    struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"gpus\": [1]}", "element 0 is an integer"},
        {"{\"gpus\": [\"GPU-a\", \"GPU-a\"]}", "gpus[1]: GPU GPU-a is listed twice"},
        {"{\"gpus\": [\"\"]}", "gpus[0] is not a GPU UUID"},
        {"{\"gpuShares\": {}}", "'gpuShares' must be an array"},
        {"{\"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":0,\"mode\":\"memory\"}]}",
         "gpuShares[0].memoryMiB must be positive"},
        {"{\"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":5,\"mode\":\"mps\"}]}",
         "gpuShares[0].mode must be memory or timeslice"},
        {"{\"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":5,\"mode\":\"timeslice\"}]}",
         "'gpuShares[0].replica' is required"},
        {"{\"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":5,\"mode\":\"timeslice\","
         "\"replica\":64}]}",
         "gpuShares[0].replica must be 0..63"},
        {"{\"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":5,\"mode\":\"memory\"},"
         "{\"uuid\":\"GPU-b\",\"memoryMiB\":5,\"mode\":\"timeslice\",\"replica\":1}]}",
         "cards of one mode"},
        {"{\"gpus\":[\"GPU-b\"], \"gpuShares\": [{\"uuid\":\"GPU-a\",\"memoryMiB\":5,"
         "\"mode\":\"memory\"}]}",
         "gpus and gpuShares must list the same GPUs"},
        {"{\"gpuShares\": [{\"memoryMiB\":5,\"mode\":\"memory\"}]}",
         "'gpuShares[0].uuid' is required"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_json_ json_t *record = json_loads(bad[i].json, 0, NULL);
        assert_non_null(record);
        assert_int_equal(gpus_grant_from_json(record, &back, &e), -1);
        if (!strstr(e.msg, bad[i].msg))
            fail_msg("%s: got '%s', want '%s'", bad[i].json, e.msg, bad[i].msg);
        assert_null(back.cards);
    }
    gpus_grant_free(&mem);
    gpus_grant_free(&ts);
    gpus_grant_free(&whole);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

/* Read a grant from JSON text (format with the inventory's UUIDs) and take it. */
static int take_json(gpus_pool *p, const char *owner, gb_err *e, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    _cleanup_json_ json_t *record = json_loads(text, 0, NULL);
    assert_non_null(record);
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    assert_int_equal(gpus_grant_from_json(record, &g, e), 0);
    return gpus_pool_take_grant(p, &g, owner, e);
}

/* take_json of a record holding one share of uuid: mode "memory" (replica
 * < 0: the record has none) or "timeslice" in replica slot replica. */
static int take_share(gpus_pool *p, const char *owner, gb_err *e, const char *uuid, unsigned mib,
                      const char *mode, int replica)
{
    char slot[32] = "";
    if (replica >= 0)
        snprintf(slot, sizeof(slot), ",\"replica\":%d", replica);
    return take_json(p, owner, e,
                     "{\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":%u,\"mode\":\"%s\"%s}]}", uuid,
                     mib, mode, slot);
}

static void test_take_grant_at_startup(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    const char *t0 = inv.devices[0].uuid, *t1 = inv.devices[1].uuid, *a = inv.devices[2].uuid,
               *h = inv.devices[3].uuid;
    /* Allocate, write the records, and re-mark a fresh pool from them. */
    gpus_grant g1 = {0}, g2 = {0}, g3 = {0};
    assert_int_equal(share(p, &inv, "m", 6144, 2, GPUS_POLICY_BINPACK, &g1, &e), 0);
    gpus_request req = {.count = 2, .timeslice = true, .policy = GPUS_POLICY_SPREAD};
    assert_int_equal(gpus_pool_alloc(p, &req, "t", &g2, &e), 0);
    req = (gpus_request){.count = 1};
    assert_int_equal(gpus_pool_alloc(p, &req, "w", &g3, &e), -1); /* every card has a tenant */
    gpus_pool_release_owner(p, "t");
    assert_int_equal(gpus_pool_alloc(p, &req, "w", &g3, &e), 0);
    req = (gpus_request){.count = 1, .timeslice = true};
    gpus_grant_free(&g2);
    assert_int_equal(gpus_pool_alloc(p, &req, "t", &g2, &e), 0);
    gpus_status before;
    gpus_pool_status(p, &before);

    gpus_pool *q = gpus_pool_new(&inv);
    gpus_grant *grants[] = {&g1, &g2, &g3};
    const char *owners[] = {"m", "t", "w"};
    for (size_t i = 0; i < 3; i++) {
        _cleanup_json_ json_t *record = json_object();
        assert_int_equal(gpus_grant_to_json(grants[i], record, &e), 0);
        _cleanup_(gpus_grant_free) gpus_grant back = {0};
        assert_int_equal(gpus_grant_from_json(record, &back, &e), 0);
        assert_int_equal(gpus_pool_take_grant(q, &back, owners[i], &e), 0);
    }
    gpus_status after;
    gpus_pool_status(q, &after);
    for (size_t i = 0; i < before.n; i++) {
        assert_int_equal(before.devices[i].mode, after.devices[i].mode);
        assert_int_equal(before.devices[i].allocated_memory_mib,
                         after.devices[i].allocated_memory_mib);
        assert_int_equal(before.devices[i].ntenants, after.devices[i].ntenants);
        for (size_t t = 0; t < before.devices[i].ntenants; t++) {
            assert_string_equal(before.devices[i].tenants[t].owner,
                                after.devices[i].tenants[t].owner);
            assert_int_equal(before.devices[i].tenants[t].replica,
                             after.devices[i].tenants[t].replica);
        }
    }
    gpus_status_free(&before);
    gpus_status_free(&after);
    gpus_grant_free(&g1);
    gpus_grant_free(&g2);
    gpus_grant_free(&g3);
    gpus_pool_free(p);

    /* Contradictions are refused, all or nothing: the first card (fine)
     * is not taken either. q: T4s memory-shared by m, A100 whole by w, H100
     * time-sliced by t on slot 0. */
    assert_int_equal(take_json(q, "x", &e,
                               "{\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":1024,\"mode\":"
                               "\"memory\"},{\"uuid\":\"%s\",\"memoryMiB\":1024,\"mode\":"
                               "\"memory\"}]}",
                               t1, a),
                     -1);
    char want[512];
    snprintf(want, sizeof(want), "GPU %s is held by w", a);
    assert_string_equal(e.msg, want);
    assert_int_equal(allocated(q, 1), 6144);
    assert_int_equal(take_json(q, "x", &e, "{\"gpus\":[\"%s\"]}", t0), -1);
    assert_non_null(strstr(e.msg, "is held by m"));
    assert_int_equal(take_share(q, "x", &e, t0, 1024, "timeslice", 1), -1);
    assert_non_null(strstr(e.msg, "holds memory tenants, not timeslice"));
    assert_int_equal(take_share(q, "x", &e, h, 1024, "timeslice", 0), -1);
    assert_non_null(strstr(e.msg, "replica slot 0 is held by t"));
    assert_int_equal(take_share(q, "m", &e, t0, 1024, "memory", -1), -1);
    assert_non_null(strstr(e.msg, "already has a share for m"));
    /* More than 4x the card's memory: no setting could have allowed it. */
    assert_int_equal(take_share(q, "x", &e, t1, 60000, "memory", -1), -1);
    assert_non_null(strstr(e.msg, "would exceed 4x its 16384 MiB"));
    assert_int_equal(take_json(q, "x", &e, "{\"gpus\":[\"GPU-gone\"]}"), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);

    /* Over today's settings but within what some setting allows: accepted
     * (the container runs with it), and the card takes no new share.
     * 6144 + 14000 MiB on a T4 was fine at oversubscription 1.5. */
    assert_int_equal(take_share(q, "y", &e, t1, 14000, "memory", -1), 0);
    assert_int_equal(allocated(q, 1), 20144);
    gpus_status st;
    assert_int_equal(device_status(q, 1, &st).free_memory_mib, 0);
    gpus_status_free(&st);
    req = (gpus_request){.count = 1, .memory_mib = 1, .pin_uuids = &t1, .npin = 1};
    gpus_grant g = {0};
    assert_int_equal(gpus_pool_alloc(q, &req, "z", &g, &e), -1);
    snprintf(want, sizeof(want), "GPU not enough: %s has 0 MiB free, 1 MiB asked", t1);
    assert_string_equal(e.msg, want);
    /* A replica slot beyond today's replicas (there were 8 once). */
    assert_int_equal(take_share(q, "r", &e, h, 10240, "timeslice", 6), 0);
    assert_int_equal(device_status(q, 3, &st).replicas_used, 2);
    gpus_status_free(&st);
    gpus_pool_free(q);
    gpu_inventory_free(&inv);
}

static char *env_text(const gpus_grant *g)
{
    char **env = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpus_grant_env(g, &env, &n, &e), 0);
    char *joined = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&joined, &len);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", env[i]);
    fclose(f);
    gpus_grant_env_free(env, n);
    /* The file carries the same lines. */
    char *file = NULL;
    assert_int_equal(gpus_grant_env_file(g, &file, &e), 0);
    assert_string_equal(file, joined);
    free(file);
    return joined;
}

static void test_grant_env(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpus_pool *p = pool_with(MIXED, NULL, &inv);
    gb_err e = GB_ERR_INIT;
    gpus_grant g = {0};
    assert_int_equal(share(p, &inv, "m", 6144, 2, GPUS_POLICY_BINPACK, &g, &e), 0);
    _cleanup_free_ char *mem = env_text(&g);
    assert_string_equal(mem, "CUDA_DEVICE_MEMORY_LIMIT_0=6144m\n"
                             "CUDA_DEVICE_MEMORY_LIMIT_1=6144m\n"
                             "GPUBOX_GPU_MEMORY_MIB=6144\n"
                             "GPUBOX_GPU_SHARE=memory\n");
    gpus_grant_free(&g);
    /* Replicas on an A100 and an H100: different reservations, so CUDA is
     * told to number the cards in PCI order, as the grant lists them. */
    gpus_request req = {.count = 2, .timeslice = true, .model = "100"};
    assert_int_equal(gpus_pool_alloc(p, &req, "t", &g, &e), 0);
    _cleanup_free_ char *ts = env_text(&g);
    assert_string_equal(ts, "CUDA_DEVICE_MEMORY_LIMIT_0=10240m\n"
                            "CUDA_DEVICE_MEMORY_LIMIT_1=20480m\n"
                            "CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
                            "GPUBOX_GPU_MEMORY_MIB=10240,20480\n"
                            "GPUBOX_GPU_SHARE=timeslice\n");
    gpus_grant_free(&g);
    gpus_pool_release_owner(p, "m");
    req = (gpus_request){.count = 2};
    assert_int_equal(gpus_pool_alloc(p, &req, "w", &g, &e), 0);
    _cleanup_free_ char *whole = env_text(&g);
    assert_string_equal(whole, "GPUBOX_GPU_SHARE=whole\n");
    /* Mixed modes are refused; no grant gives no lines. */
    g.cards[1].mode = GPUS_MODE_MEMORY;
    char **env = NULL;
    size_t n = 0;
    assert_int_equal(gpus_grant_env(&g, &env, &n, &e), -1);
    assert_non_null(strstr(e.msg, "cards of one mode"));
    assert_null(env);
    gpus_grant_free(&g);
    _cleanup_free_ char *empty = env_text(&g);
    assert_string_equal(empty, "");
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_settings_parse(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char **list = NULL;
    size_t n = 0;
    assert_int_equal(
        gpus_settings_parse_list(" GPU-a , MIG-GPU-b/1/0,3 ", "--gpu-exclude", &list, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(list[0], "GPU-a");
    assert_string_equal(list[1], "MIG-GPU-b/1/0");
    assert_string_equal(list[2], "3");
    assert_null(list[3]);
    gpus_settings_list_free(list, n);
    assert_int_equal(gpus_settings_parse_list("", "--gpu-exclude", &list, &n, &e), 0);
    assert_int_equal(n, 0);
    gpus_settings_list_free(list, n);
    struct {
        const char *text, *msg;
    } bad[] = {
        {"0,,3", "--gpu-exclude: entry 2 is empty; give GPU UUIDs or indexes separated by commas"},
        {"0,", "--gpu-exclude: entry 2 is empty"},
        {"GPU-a,GPU-a", "--gpu-exclude: 'GPU-a' is listed twice"},
        {"GPU a", "--gpu-exclude: 'GPU a' is not a GPU UUID or index (character ' ')"},
        {"0;3", "character ';'"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(gpus_settings_parse_list(bad[i].text, "--gpu-exclude", &list, &n, &e), -1);
        if (!strstr(e.msg, bad[i].msg))
            fail_msg("'%s': got '%s'", bad[i].text, e.msg);
        assert_null(list);
    }
    /* The parsed list works as settings. */
    gpu_inventory inv;
    assert_int_equal(gpu_sim_load(MIXED, &inv, &e), 0);
    char text[256];
    snprintf(text, sizeof(text), "0,%s", inv.devices[3].uuid);
    assert_int_equal(gpus_settings_parse_list(text, "--gpu-exclude", &list, &n, &e), 0);
    gpus_settings s;
    gpus_settings_defaults(&s);
    assert_int_equal(s.timeslice_replicas, 4);
    assert_int_equal(s.max_tenants_per_card, 0);
    s.exclude_all = (const char *const *)list;
    s.nexclude_all = n;
    assert_int_equal(gpus_settings_validate(&s, &inv, &e), 0);
    gpus_pool *p = gpus_pool_new_with(&inv, &s, &e);
    assert_int_equal(gpus_pool_free_count(p), 2);
    gpus_pool_free(p);
    gpus_settings_list_free(list, n);
    s = (gpus_settings){.timeslice_replicas = 0, .memory_oversubscription = 1.0};
    assert_int_equal(gpus_settings_validate(&s, &inv, &e), -1);
    assert_string_equal(e.msg, "time-slice replicas per GPU must be between 1 and 64, got 0");
    s.timeslice_replicas = 65;
    assert_int_equal(gpus_settings_validate(&s, &inv, &e), -1);
    s.timeslice_replicas = 64;
    assert_int_equal(gpus_settings_validate(&s, &inv, &e), 0);
    gpu_inventory_free(&inv);
}

/* ---- concurrency ---- */

#define RACERS 120

struct race {
    gpus_pool *pool;
    const gpu_inventory *inv;
    atomic_int granted, refused, other;
    int mix; /* 0: 4 GB shares; 1: mixed sizes, policies and time-slice */
    gpus_grant grants[RACERS];
};

/* Racer id asks for its share (by r->mix and id) as owner "rs<id>". */
static void race_one_share(void *arg, int id)
{
    struct race *r = arg;
    char owner[16];
    snprintf(owner, sizeof(owner), "rs%d", id);
    gpus_request req = {.count = 1, .memory_mib = 4096};
    if (r->mix) {
        static const uint64_t sizes[] = {1024, 3072, 5120, 7000};
        req.memory_mib = sizes[id % 4];
        req.policy = id % 3 ? GPUS_POLICY_BINPACK : GPUS_POLICY_SPREAD;
        req.count = id % 5 == 0 ? 2 : 1;
        if (id % 7 == 0) {
            req.memory_mib = 0;
            req.timeslice = true;
        }
    }
    gb_err e = GB_ERR_INIT;
    if (gpus_pool_alloc(r->pool, &req, owner, &r->grants[id], &e) == 0)
        atomic_fetch_add(&r->granted, 1);
    else if (e.code == ERR_GPU_NOT_ENOUGH)
        atomic_fetch_add(&r->refused, 1);
    else
        atomic_fetch_add(&r->other, 1);
}

static void race(struct race *r)
{
    gpus_test_race(RACERS, race_one_share, r);
    assert_int_equal(atomic_load(&r->other), 0);
    assert_int_equal(atomic_load(&r->granted) + atomic_load(&r->refused), RACERS);
}

/* The pool's tenants are exactly the grants the racers got; frees them. */
static void assert_pool_matches_grants(struct race *r)
{
    gpus_status st;
    gpus_pool_status(r->pool, &st);
    size_t tenancies = 0, granted = 0;
    for (size_t d = 0; d < st.n; d++)
        tenancies += st.devices[d].ntenants;
    for (int i = 0; i < RACERS; i++) {
        char owner[16];
        snprintf(owner, sizeof(owner), "rs%d", i);
        const gpus_grant *g = &r->grants[i];
        granted += g->n;
        for (size_t c = 0; c < g->n; c++) {
            bool found = false;
            for (size_t d = 0; d < st.n; d++)
                for (size_t t = 0; t < st.devices[d].ntenants; t++) {
                    const gpus_tenant *ten = &st.devices[d].tenants[t];
                    if (strcmp(ten->owner, owner) ||
                        strcmp(st.devices[d].device.uuid, g->cards[c].uuid))
                        continue;
                    assert_false(found);
                    found = true;
                    assert_int_equal(ten->memory_mib, g->cards[c].memory_mib);
                    assert_int_equal(ten->replica, g->cards[c].replica);
                    assert_int_equal(st.devices[d].mode, g->cards[c].mode);
                }
            assert_true(found);
        }
        gpus_grant_free(&r->grants[i]);
    }
    assert_int_equal(tenancies, granted);
    gpus_status_free(&st);
}

/* No card holds more than its memory or more tenants than allowed; each
 * owner appears at most once per card. Returns the memory held in all. */
static uint64_t assert_not_overpacked(gpus_pool *p, unsigned max_tenants)
{
    gpus_status st;
    gpus_pool_status(p, &st);
    uint64_t total = 0;
    for (size_t i = 0; i < st.n; i++) {
        const gpus_device_status *d = &st.devices[i];
        uint64_t sum = 0;
        for (size_t t = 0; t < d->ntenants; t++) {
            sum += d->tenants[t].memory_mib;
            for (size_t u = 0; u < t; u++)
                assert_string_not_equal(d->tenants[t].owner, d->tenants[u].owner);
        }
        assert_int_equal(sum, d->allocated_memory_mib);
        if (sum > d->device.memory_mib)
            fail_msg("%s holds %llu MiB of %llu", d->device.uuid, (unsigned long long)sum,
                     (unsigned long long)d->device.memory_mib);
        if (max_tenants)
            assert_true(d->ntenants <= max_tenants);
        if (d->mode == GPUS_MODE_TIMESLICE)
            assert_true(d->replicas_used <= d->replicas_total);
        total += sum;
    }
    gpus_status_free(&st);
    return total;
}

static void test_concurrent_shares_never_overpack(void **state)
{
    (void)state;
    gpu_inventory inv;
    struct race *r = calloc(1, sizeof(*r));
    r->pool = pool_with(MIXED, NULL, &inv);
    r->inv = &inv;
    /* 4 GB shares fit exactly 4 + 4 + 10 + 20 = 38 times. */
    race(r);
    assert_int_equal(atomic_load(&r->granted), 38);
    assert_int_equal(assert_not_overpacked(r->pool, 0), T4 + T4 + A100 + H100);
    for (size_t i = 0; i < inv.n; i++)
        assert_int_equal(allocated(r->pool, i), inv.devices[i].memory_mib);
    assert_pool_matches_grants(r);
    gpus_pool_free(r->pool);
    gpu_inventory_free(&inv);

    /* Mixed sizes, policies, two-card shares and time-slice replicas under a
     * tenant limit. */
    gpus_settings s;
    gpus_settings_defaults(&s);
    s.max_tenants_per_card = 6;
    memset(r, 0, sizeof(*r));
    r->pool = pool_with(MIXED, &s, &inv);
    r->mix = 1;
    race(r);
    assert_true(atomic_load(&r->granted) > 0);
    assert_true(atomic_load(&r->refused) > 0);
    assert_not_overpacked(r->pool, 6);
    assert_pool_matches_grants(r);
    gpus_pool_free(r->pool);
    free(r);
    gpu_inventory_free(&inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binpack_least_left),
        cmocka_unit_test(test_spread_most_left),
        cmocka_unit_test(test_share_fits_one_card_only),
        cmocka_unit_test(test_whole_and_shares_apart),
        cmocka_unit_test(test_timeslice_replicas),
        cmocka_unit_test(test_max_tenants),
        cmocka_unit_test(test_oversubscription),
        cmocka_unit_test(test_unhealthy_and_mig_never_chosen),
        cmocka_unit_test(test_exclusions),
        cmocka_unit_test(test_pinning_and_model),
        cmocka_unit_test(test_request_checks),
        cmocka_unit_test(test_realloc_atomic),
        cmocka_unit_test(test_grant_json),
        cmocka_unit_test(test_take_grant_at_startup),
        cmocka_unit_test(test_grant_env),
        cmocka_unit_test(test_settings_parse),
        cmocka_unit_test(test_concurrent_shares_never_overpack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
