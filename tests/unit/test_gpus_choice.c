/*
 * test_gpus_choice.c - the allocator picks exactly the cards its rules
 * (sched/gpus.h) name, on random pools under random host settings.
 *
 * The pool decides from a dense array of per-card offers and judges only
 * cards that could win (gpus_internal.h). This test decides the same
 * requests the slow, obvious way - every card judged from the public
 * status snapshot by the documented rules, candidates sorted - and checks
 * after every step that the pool granted the very same cards, or refused
 * when no choice exists, counting in its message what the rules count.
 * Requests mix whole cards, memory shares and time-slice replicas, one to
 * three cards, both policies, a model filter; pools have unhealthy,
 * MIG-mode and excluded cards, a tenant limit or none, oversubscription,
 * and tenants re-marked from the store beyond today's settings; grants are
 * given back at random so cards change mode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "sched/gpus.h"

#define STEPS 1500
#define MAX_GRANTS 256

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

struct candidate {
    size_t index;
    uint64_t left;
};

static enum gpus_policy sort_policy;

static int candidate_cmp(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->left != y->left) {
        bool x_first = sort_policy == GPUS_POLICY_SPREAD ? x->left > y->left : x->left < y->left;
        return x_first ? -1 : 1;
    }
    return x->index < y->index ? -1 : 1;
}

static int index_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The checks a share meets before the tenant limit: the card, the model,
 * sharing, the card's mode, the owner not there yet. */
static bool rule_open_to_share(const gpus_device_status *d, const gpus_request *req,
                               const char *owner)
{
    const gpu_device *dev = &d->device;
    if (!dev->healthy || dev->mig_enabled || d->excluded)
        return false;
    if (req->model && *req->model && !strcasestr(dev->model, req->model))
        return false;
    enum gpus_mode mode = req->memory_mib ? GPUS_MODE_MEMORY : GPUS_MODE_TIMESLICE;
    if (!d->shareable || (d->mode != GPUS_MODE_FREE && d->mode != mode))
        return false;
    for (size_t t = 0; t < d->ntenants; t++)
        if (strcmp(d->tenants[t].owner, owner) == 0)
            return false;
    return true;
}

static uint64_t rule_room(const gpus_device_status *d)
{
    return d->capacity_mib > d->allocated_memory_mib ? d->capacity_mib - d->allocated_memory_mib
                                                     : 0;
}

/* Whether device d takes one card of req for owner by the rules of gpus.h,
 * and what it would have left (memory, or replicas). */
static bool rule_fits(const gpus_device_status *d, const gpus_request *req, const char *owner,
                      unsigned replicas_setting, unsigned max_tenants, uint64_t *left)
{
    *left = 0;
    const gpu_device *dev = &d->device;
    if (!req->memory_mib && !req->timeslice)
        return dev->healthy && !dev->mig_enabled && !d->excluded &&
               (!req->model || !*req->model || strcasestr(dev->model, req->model)) &&
               d->ntenants == 0;
    if (!rule_open_to_share(d, req, owner))
        return false;
    if (max_tenants && d->ntenants >= max_tenants)
        return false;
    uint64_t room = rule_room(d);
    if (req->memory_mib) {
        if (room < req->memory_mib)
            return false;
        *left = room - req->memory_mib;
        return true;
    }
    unsigned replicas =
        max_tenants && max_tenants < replicas_setting ? max_tenants : replicas_setting;
    if (d->ntenants >= replicas || room < dev->memory_mib / replicas_setting)
        return false;
    *left = replicas - d->ntenants - 1;
    return true;
}

static void assert_says(const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void assert_says(const char *msg, const char *fmt, ...)
{
    char want[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof(want), fmt, ap);
    va_end(ap);
    if (!strstr(msg, want))
        fail_msg("refusal '%s' does not say '%s'", msg, want);
}

/* A refusal says how many cards could take one card of the request, the
 * largest memory share any card would take, and how many cards the tenant
 * limit blocks - all as the rules count them. */
static void assert_refusal_counts(gpus_pool *p, const gpus_request *req, const char *owner,
                                  const gpus_settings *s, const char *msg)
{
    gpus_status st;
    gpus_pool_status(p, &st);
    size_t nfit = 0, nlimit = 0;
    uint64_t largest = 0, left;
    unsigned limit = s->max_tenants_per_card;
    for (size_t i = 0; i < st.n; i++) {
        const gpus_device_status *d = &st.devices[i];
        nfit += rule_fits(d, req, owner, s->timeslice_replicas, limit, &left);
        if (req->memory_mib || req->timeslice) {
            bool open = rule_open_to_share(d, req, owner);
            nlimit += open && limit && d->ntenants >= limit;
            if (open && (!limit || d->ntenants < limit) && rule_room(d) > largest)
                largest = rule_room(d);
        }
    }
    gpus_status_free(&st);
    if (!req->memory_mib && !req->timeslice) {
        assert_says(msg, ", %zu free", nfit);
        return;
    }
    const char *fit = req->memory_mib ? "can fit it" : nfit == 1 ? "has one free" : "have one free";
    if (nfit == 0)
        assert_says(msg, ", none %s", req->memory_mib ? "can fit it" : "has one free");
    else
        assert_says(msg, ", %zu %s", nfit, fit);
    if (strstr(msg, "GPU-"))
        fail_msg("refusal '%s' names a card; the ids belong in its data", msg);
    if (req->memory_mib)
        assert_says(msg, "; largest free share %llu MiB", (unsigned long long)largest);
    if (nlimit)
        assert_says(msg, "; %zu card(s) at the limit of %u tenants", nlimit, limit);
    else if (strstr(msg, "at the limit"))
        fail_msg("refusal '%s' names a limit no card is at", msg);
}

/* The cards the rules choose, in index order, into out[]; false when too few fit. */
static bool rule_choose(gpus_pool *p, const gpus_request *req, const char *owner,
                        const gpus_settings *s, size_t *out)
{
    gpus_status st;
    gpus_pool_status(p, &st);
    struct candidate *cand = calloc(st.n, sizeof(*cand));
    assert_non_null(cand);
    size_t nfit = 0;
    for (size_t i = 0; i < st.n; i++) {
        uint64_t left;
        if (rule_fits(&st.devices[i], req, owner, s->timeslice_replicas, s->max_tenants_per_card,
                      &left))
            cand[nfit++] = (struct candidate){.index = i, .left = left};
    }
    gpus_status_free(&st);
    bool enough = nfit >= req->count;
    if (enough) {
        if (req->memory_mib || req->timeslice) { /* whole cards: lowest index, as found */
            sort_policy = req->policy;
            qsort(cand, nfit, sizeof(*cand), candidate_cmp);
        }
        for (size_t k = 0; k < req->count; k++)
            out[k] = cand[k].index;
        qsort(out, req->count, sizeof(*out), index_cmp);
    }
    free(cand);
    return enough;
}

static size_t index_of(const gpu_inventory *inv, const char *uuid)
{
    for (size_t i = 0; i < inv->n; i++)
        if (strcmp(inv->devices[i].uuid, uuid) == 0)
            return i;
    fail_msg("no card %s", uuid);
    return 0;
}

struct held {
    gpus_grant grant;
    char owner[16];
};

/* Tenants re-marked from the store that today's settings would not allow. */
static void mark_overruns(gpus_pool *p, const gpu_inventory *inv, struct held *held, size_t *nheld)
{
    /* Card 0 (an 80 GB card): three 36 GB shares, beyond 1.0x and a limit of 2. */
    for (int t = 0; t < 3; t++) {
        gpus_grant_card *c = calloc(1, sizeof(*c));
        snprintf(c->uuid, sizeof(c->uuid), "%s", inv->devices[0].uuid);
        c->memory_mib = 36864;
        c->mode = GPUS_MODE_MEMORY;
        c->replica = -1;
        struct held *h = &held[(*nheld)++];
        h->grant = (gpus_grant){.cards = c, .n = 1};
        snprintf(h->owner, sizeof(h->owner), "store%d", t);
        gb_err e = GB_ERR_INIT;
        if (gpus_pool_take_grant(p, &h->grant, h->owner, &e) < 0)
            fail_msg("re-marking: %s", e.msg);
    }
}

static void run_seed(uint64_t seed)
{
    uint64_t rnd = seed;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(
        gpu_sim_load("6xA100-80GB,4xA100-40GB,5xT4-16GB,3xH100-80GB,2xL4-24GB", &inv, &e), 0);
    /* Cards gpus_pool never schedules: two unhealthy, one in MIG mode. */
    inv.devices[3].healthy = false;
    inv.devices[12].healthy = false;
    inv.devices[16].mig_enabled = true;

    gpus_settings s;
    gpus_settings_defaults(&s);
    s.timeslice_replicas = 2 + (unsigned)(next_random(&rnd) % 4);
    /* Half the seeds without a tenant limit, half with one of 1 to 3. */
    s.max_tenants_per_card = seed % 2 ? 1 + (unsigned)(next_random(&rnd) % 3) : 0;
    s.memory_oversubscription = next_random(&rnd) % 2 ? 1.5 : 1.0;
    char no_share[8], none[8];
    snprintf(no_share, sizeof(no_share), "%d", 5 + (int)(next_random(&rnd) % 3));
    snprintf(none, sizeof(none), "%d", 9 + (int)(next_random(&rnd) % 3));
    const char *exclude_sharing[] = {no_share}, *exclude_all[] = {none};
    s.exclude_sharing = exclude_sharing;
    s.nexclude_sharing = 1;
    s.exclude_all = exclude_all;
    s.nexclude_all = 1;
    gpus_pool *p = gpus_pool_new_with(&inv, &s, &e);
    if (!p)
        fail_msg("pool: %s", e.msg);

    struct held *held = calloc(MAX_GRANTS, sizeof(*held));
    assert_non_null(held);
    size_t nheld = 0, granted = 0, refused = 0;
    if (seed % 3 == 0)
        mark_overruns(p, &inv, held, &nheld);
    static const char *const models[] = {NULL, "a100", "T4", "80GB"};
    static const uint64_t sizes[] = {1024, 4096, 8192, 12000, 20480, 40960, 70000};
    for (int step = 0; step < STEPS; step++) {
        /* Give back one grant in three steps, or when the list is full. */
        if (nheld && (next_random(&rnd) % 3 == 0 || nheld == MAX_GRANTS)) {
            size_t k = (size_t)(next_random(&rnd) % nheld);
            assert_int_equal(gpus_pool_release_grant(p, &held[k].grant, held[k].owner),
                             held[k].grant.n);
            gpus_grant_free(&held[k].grant);
            held[k] = held[--nheld];
            continue;
        }
        uint64_t r = next_random(&rnd);
        gpus_request req = {
            .count = 1 + (size_t)(r % 3),
            .policy = (r >> 4) % 2 ? GPUS_POLICY_SPREAD : GPUS_POLICY_BINPACK,
            .model = models[(r >> 8) % 8 < 5 ? 0 : (r >> 8) % 4],
        };
        switch ((r >> 12) % 4) {
        case 0:
            break; /* whole cards */
        case 1:
        case 2:
            req.memory_mib = sizes[(r >> 16) % 7];
            break;
        default:
            req.timeslice = true;
        }
        /* A few owners come back, so "already has a share here" is judged too. */
        char owner[16];
        snprintf(owner, sizeof(owner), "o%d", (r >> 24) % 4 == 0 ? (int)((r >> 28) % 5) : step);
        size_t want[3];
        bool fits = rule_choose(p, &req, owner, &s, want);
        struct held *h = &held[nheld];
        gb_err err = GB_ERR_INIT;
        int rc = gpus_pool_alloc(p, &req, owner, &h->grant, &err);
        if (!fits) {
            if (rc == 0)
                fail_msg("seed %llu step %d: granted %zu card(s) the rules refuse",
                         (unsigned long long)seed, step, h->grant.n);
            assert_int_equal(err.code, ERR_GPU_NOT_ENOUGH);
            assert_refusal_counts(p, &req, owner, &s, err.msg);
            refused++;
            continue;
        }
        if (rc < 0)
            fail_msg("seed %llu step %d: refused what the rules grant: %s",
                     (unsigned long long)seed, step, err.msg);
        assert_int_equal(h->grant.n, req.count);
        for (size_t k = 0; k < req.count; k++)
            if (index_of(&inv, h->grant.cards[k].uuid) != want[k])
                fail_msg("seed %llu step %d: card %zu is #%zu, the rules say #%zu",
                         (unsigned long long)seed, step, k, index_of(&inv, h->grant.cards[k].uuid),
                         want[k]);
        snprintf(h->owner, sizeof(h->owner), "%s", owner);
        nheld++;
        granted++;
    }
    /* Both outcomes were exercised. */
    assert_true(granted > STEPS / 10);
    assert_true(refused > STEPS / 20);
    for (size_t k = 0; k < nheld; k++) {
        gpus_pool_release_grant(p, &held[k].grant, held[k].owner);
        gpus_grant_free(&held[k].grant);
    }
    assert_int_equal(gpus_pool_free_count(p), inv.n - 4); /* all back but the 4 never scheduled */
    free(held);
    gpus_pool_free(p);
    gpu_inventory_free(&inv);
}

static void test_choice_matches_rules(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 12; seed++)
        run_seed(seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choice_matches_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
