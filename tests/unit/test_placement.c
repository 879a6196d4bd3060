/*
 * test_placement.c - which node of a fleet takes a create (sched/placement.h):
 * each filter and the refusal naming the nodes it dropped, gpushare's
 * example across nodes (a share judged card by card, never by a node's
 * total), binpack and spread order with ties by name, pin, selector and
 * allowed nodes together, time-slice replicas, the tenant limit, ports and
 * volume space, the largest free spots and the refusal's bounded length,
 * malformed requests, and capacity records good and bad. One test holds
 * the fit rules against the node's own allocator: records written from a
 * real gpus_pool's status must say "fits" exactly when gpus_pool_alloc
 * grants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpus_test_util.h"
#include "sched/gpus.h"
#include "sched/placement.h"
#include "util/cleanup.h"

#define T4 16384
#define A100 81920
#define GIB 1024
#define X16 "xxxxxxxxxxxxxxxx"
#define X96 X16 X16 X16 X16 X16 X16

/* ---- cards and nodes made by hand ---- */

static placement_card card_free(const char *model, uint64_t mib)
{
    placement_card c = {.mode = GPUS_MODE_FREE,
                        .memory_mib = mib,
                        .free_memory_mib = mib,
                        .replicas_total = 4,
                        .healthy = true,
                        .shareable = true,
                        .schedulable = true};
    snprintf(c.model, sizeof(c.model), "%s", model);
    snprintf(c.uuid, sizeof(c.uuid), "GPU-%s-%llu", model, (unsigned long long)mib);
    return c;
}

static placement_card card_whole(const char *model, uint64_t mib)
{
    placement_card c = card_free(model, mib);
    c.mode = GPUS_MODE_WHOLE;
    c.tenants = 1;
    c.free_memory_mib = 0;
    return c;
}

static placement_card card_shared(const char *model, uint64_t mib, uint64_t free_mib,
                                  unsigned tenants)
{
    placement_card c = card_free(model, mib);
    c.mode = GPUS_MODE_MEMORY;
    c.free_memory_mib = free_mib;
    c.tenants = tenants;
    return c;
}

static placement_card card_sliced(const char *model, uint64_t mib, unsigned used)
{
    placement_card c = card_free(model, mib);
    c.mode = GPUS_MODE_TIMESLICE;
    c.free_memory_mib = 0;
    c.tenants = c.replicas_used = used;
    return c;
}

/* A readable, alive, uncordoned node over cards (kept by the caller). */
static placement_node node(const char *name, placement_card *cards, size_t ncards)
{
    return (placement_node){.name = (char *)name,
                            .readable = true,
                            .alive = true,
                            .cards = cards,
                            .ncards = ncards,
                            .free_ports = 1000,
                            .volume_free_bytes = UINT64_C(1) << 40};
}

/* The ranking as "b,a,c", or "refused" with why filled. */
static const char *rank(const placement_node *nodes, size_t n, const placement_request *req,
                        gb_err *why)
{
    static char out[1024];
    size_t order[64], n_order = 99;
    assert_true(n <= 64);
    err_clear(why);
    if (placement_rank(nodes, n, req, order, &n_order, why) < 0) {
        assert_int_equal(n_order, 0);
        assert_true(strlen(why->msg) < sizeof(why->msg));
        return "refused";
    }
    assert_true(n_order >= 1 && n_order <= n);
    out[0] = '\0';
    for (size_t k = 0; k < n_order; k++)
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", k ? "," : "",
                 nodes[order[k]].name);
    return out;
}

#define assert_contains(haystack, needle)                                                          \
    do {                                                                                           \
        if (!strstr((haystack), (needle)))                                                         \
            fail_msg("'%s' is not in '%s'", (needle), (haystack));                                 \
    } while (0)

/* ---- filters ---- */

static void test_each_filter_named(void **state)
{
    (void)state;
    placement_card c[8][1];
    placement_node nodes[8];
    const char *names[8] = {"pinless", "novol", "nolabel", "badrec", "gone", "cord", "full", "ok"};
    for (int i = 0; i < 8; i++) {
        c[i][0] = card_free("T4", T4);
        nodes[i] = node(names[i], c[i], 1);
    }
    c[6][0] = card_whole("T4", T4);
    nodes[3].readable = false;
    nodes[3].ncards = 0;
    nodes[4].alive = false;
    nodes[5].cordoned = true;
    placement_label zone_a = {"zone", "a"}, zone_b = {"zone", "b"};
    for (int i = 0; i < 8; i++)
        nodes[i].labels = &zone_a, nodes[i].nlabels = 1;
    nodes[2].labels = &zone_b;
    const char *allowed[] = {"novol" /* dropped below by the allowed list itself */,
                             "nolabel",
                             "badrec",
                             "gone",
                             "cord",
                             "full",
                             "ok",
                             "pinless"};
    placement_request req = {.gpu_count = 1, .selector = &zone_a, .nselector = 1};
    gb_err why;

    /* Every node but "ok" fails one filter; "pinless" only a pin would drop. */
    req.allowed_nodes = allowed + 1;
    req.nallowed = 7;
    assert_string_equal(rank(nodes, 8, &req, &why), "ok,pinless");

    /* Pinned to "ok": every other node is "not the pinned node". */
    req.node = "ok";
    assert_string_equal(rank(nodes, 8, &req, &why), "ok");

    /* "ok" held too: refused, each reason with its node. */
    c[7][0] = card_whole("T4", T4);
    c[0][0] = card_whole("T4", T4);
    req.node = NULL;
    assert_string_equal(rank(nodes, 8, &req, &why), "refused");
    assert_int_equal(why.code, ERR_GPU_NOT_ENOUGH);
    assert_contains(why.msg, "no node can take 1 whole card: ");
    assert_contains(why.msg, "volumes live elsewhere: novol");
    assert_contains(why.msg, "labels do not match: nolabel");
    assert_contains(why.msg, "capacity record unreadable: badrec");
    assert_contains(why.msg, "unreachable: gone");
    assert_contains(why.msg, "cordoned: cord");
    assert_contains(why.msg, "too few GPUs: pinless, full, ok");
    assert_contains(why.msg, "largest free spots: none (no card takes a new tenant)");

    req.node = "gone";
    assert_string_equal(rank(nodes, 8, &req, &why), "refused");
    assert_contains(why.msg, "not the pinned node: pinless, novol, nolabel and 4 more");
    assert_contains(why.msg, "unreachable: gone");
    assert_true(strstr(why.msg, "largest free spots") == NULL); /* no node reached the fit test */
}

/* gpushare's example: a node's total free memory fits the share, no card does. */
static void test_gpushare_example(void **state)
{
    (void)state;
    placement_card a[2] = {card_shared("A100", A100, 20 * GIB, 3),
                           card_shared("A100", A100, 20 * GIB, 3)};
    placement_card b[2] = {card_whole("T4", T4), card_shared("T4", T4, 12 * GIB, 1)};
    placement_card c[1] = {card_shared("A100", A100, 32 * GIB, 2)};
    placement_node nodes[3] = {node("a", a, 2), node("b", b, 2), node("c", c, 1)};
    placement_request req = {.gpu_count = 1, .memory_mib = 30 * GIB};
    gb_err why;

    /* a has 40 GiB free in all, but 20 on each card: only c takes 30. */
    assert_string_equal(rank(nodes, 3, &req, &why), "c");
    /* Without c: refused, naming what does fit. */
    assert_string_equal(rank(nodes, 2, &req, &why), "refused");
    assert_int_equal(why.code, ERR_GPU_NOT_ENOUGH);
    assert_contains(why.msg, "no node can take 1 card with 30720 MiB: too few GPUs: a, b");
    assert_contains(why.msg, "largest free spots: a: a 20480 MiB share on each of 2 cards; "
                             "b: a 12288 MiB share on one T4");
    /* One short count of the fleet's cards ends it; no card is named. */
    assert_contains(why.msg, "; the fleet has 4 cards, 0 free");
    assert_true(strstr(why.msg, "GPU-") == NULL);
    /* 20 GiB on two distinct cards fits a; one card of b is not enough. */
    req.memory_mib = 20 * GIB;
    req.gpu_count = 2;
    assert_string_equal(rank(nodes, 3, &req, &why), "a");
}

static void test_binpack_and_spread(void **state)
{
    (void)state;
    /* left for a 1-card 8 GiB share: full 0+(16-8)=8 GiB, half 40+(80-8)... */
    placement_card full[2] = {card_whole("A100", A100), card_shared("A100", A100, 16 * GIB, 2)};
    placement_card half[2] = {card_free("A100", A100), card_shared("A100", A100, 40 * GIB, 1)};
    placement_card empty[2] = {card_free("A100", A100), card_free("A100", A100)};
    placement_node nodes[3] = {node("empty", empty, 2), node("half", half, 2),
                               node("full", full, 2)};
    placement_request req = {.gpu_count = 1, .memory_mib = 8 * GIB};
    gb_err why;

    assert_string_equal(rank(nodes, 3, &req, &why), "full,half,empty");
    req.policy = GPUS_POLICY_SPREAD;
    assert_string_equal(rank(nodes, 3, &req, &why), "empty,half,full");

    /* Whole cards: left counts free cards' memory. */
    req = (placement_request){.gpu_count = 1};
    assert_string_equal(rank(nodes, 3, &req, &why), "half,empty");
    req.policy = GPUS_POLICY_SPREAD;
    assert_string_equal(rank(nodes, 3, &req, &why), "empty,half");

    /* No GPU: binpack to the fullest, spread to the emptiest. */
    req = (placement_request){.gpu_count = 0, .memory_mib = 8 * GIB /* ignored */};
    assert_string_equal(rank(nodes, 3, &req, &why), "full,half,empty");
    req.policy = GPUS_POLICY_SPREAD;
    assert_string_equal(rank(nodes, 3, &req, &why), "empty,half,full");
}

static void test_ties_by_name(void **state)
{
    (void)state;
    placement_card x[1] = {card_free("T4", T4)}, y[1] = {card_free("T4", T4)},
                   z[1] = {card_free("T4", T4)};
    placement_node nodes[3] = {node("n3", x, 1), node("n1", y, 1), node("n2", z, 1)};
    placement_request req = {.gpu_count = 1};
    gb_err why;
    assert_string_equal(rank(nodes, 3, &req, &why), "n1,n2,n3");
    req.policy = GPUS_POLICY_SPREAD;
    assert_string_equal(rank(nodes, 3, &req, &why), "n1,n2,n3");
}

static void test_pin_selector_allowed(void **state)
{
    (void)state;
    placement_card cards[4][1];
    placement_node nodes[4];
    const char *names[4] = {"a", "b", "c", "d"};
    placement_label gpu_a100[2] = {{"gpu", "a100"}, {"rack", "r1"}};
    placement_label gpu_t4[1] = {{"gpu", "t4"}};
    for (int i = 0; i < 4; i++) {
        cards[i][0] = card_free("A100", A100);
        nodes[i] = node(names[i], cards[i], 1);
        nodes[i].labels = i < 3 ? gpu_a100 : gpu_t4;
        nodes[i].nlabels = i < 3 ? 2 : 1;
    }
    nodes[2].labels = gpu_a100 + 1; /* rack only */
    nodes[2].nlabels = 1;
    placement_label sel[2] = {{"gpu", "a100"}, {"rack", "r1"}};
    placement_request req = {.gpu_count = 1, .selector = sel, .nselector = 1};
    gb_err why;

    assert_string_equal(rank(nodes, 4, &req, &why), "a,b");
    req.nselector = 2;
    assert_string_equal(rank(nodes, 4, &req, &why), "a,b");
    const char *vol_on_b[] = {"b"};
    req.allowed_nodes = vol_on_b;
    req.nallowed = 1;
    assert_string_equal(rank(nodes, 4, &req, &why), "b");
    /* Pinned where the volume is not. */
    req.node = "a";
    assert_string_equal(rank(nodes, 4, &req, &why), "refused");
    assert_contains(why.msg, "not the pinned node: b, c, d");
    assert_contains(why.msg, "volumes live elsewhere: a");
    /* Volumes on two nodes: no node has them all. */
    req.node = NULL;
    req.allowed_nodes = vol_on_b;
    req.nallowed = 0;
    assert_string_equal(rank(nodes, 4, &req, &why), "refused");
    assert_contains(why.msg, "volumes live elsewhere: a, b, c and 1 more");
    /* A selector no node matches. */
    placement_label h100 = {"gpu", "h100"};
    req = (placement_request){.gpu_count = 1, .selector = &h100, .nselector = 1};
    assert_string_equal(rank(nodes, 4, &req, &why), "refused");
    assert_contains(why.msg, "labels do not match: a, b, c and 1 more");
}

static void test_timeslice(void **state)
{
    (void)state;
    placement_card a[2] = {card_sliced("T4", T4, 4), card_sliced("T4", T4, 3)};
    placement_card b[2] = {card_sliced("T4", T4, 1), card_shared("T4", T4, 8 * GIB, 1)};
    placement_card c[1] = {card_free("T4", T4)};
    c[0].shareable = false; /* whole cards only */
    placement_node nodes[3] = {node("a", a, 2), node("b", b, 2), node("c", c, 1)};
    placement_request req = {.gpu_count = 1, .timeslice = true};
    gb_err why;

    /* a: one replica left (4 GiB) -> 0 left; b: 3 left (12 GiB) + 8 -> 16 GiB. */
    assert_string_equal(rank(nodes, 3, &req, &why), "a,b");
    req.policy = GPUS_POLICY_SPREAD;
    assert_string_equal(rank(nodes, 3, &req, &why), "b,a");
    /* Two replicas need two distinct cards that have one. */
    req.gpu_count = 2;
    assert_string_equal(rank(nodes, 3, &req, &why), "refused");
    assert_contains(why.msg, "2 time-slice replicas on distinct cards");
    assert_contains(why.msg, "too few GPUs: a, b, c");
    assert_contains(why.msg, "c: 1 whole T4");
    assert_contains(why.msg, "b: a 8192 MiB share on one T4, time-slice replicas on 1 card");
    /* The tenant limit counts every tenant on the card. */
    req.gpu_count = 1;
    a[1].max_tenants = b[0].max_tenants = 1;
    assert_string_equal(rank(nodes, 3, &req, &why), "refused");
}

static void test_whole_card_rules(void **state)
{
    (void)state;
    placement_card a[5] = {card_free("NVIDIA A100-SXM4-80GB", A100),
                           card_free("NVIDIA A100-SXM4-80GB", A100), card_free("Tesla T4", T4),
                           card_free("Tesla T4", T4), card_free("Tesla T4", T4)};
    a[1].healthy = false;
    a[2].excluded = true;
    a[3].schedulable = false; /* a card in MIG mode */
    placement_node nodes[1] = {node("a", a, 5)};
    placement_request req = {.gpu_count = 1, .model = "a100"};
    gb_err why;

    assert_string_equal(rank(nodes, 1, &req, &why), "a");
    req.gpu_count = 2; /* the second A100 is unhealthy */
    assert_string_equal(rank(nodes, 1, &req, &why), "refused");
    assert_contains(why.msg, "2 whole cards of model 'a100'");
    assert_contains(why.msg, "a: 2 whole (1 NVIDIA A100-SXM4-80GB, 1 Tesla T4)");
    req.model = "t4"; /* one T4 of three */
    assert_string_equal(rank(nodes, 1, &req, &why), "refused");
    req.model = NULL;
    assert_string_equal(rank(nodes, 1, &req, &why), "a");
    req.gpu_count = 3;
    assert_string_equal(rank(nodes, 1, &req, &why), "refused");
    /* A share never lands on a card held whole or time-sliced. */
    placement_card b[2] = {card_whole("T4", T4), card_sliced("T4", T4, 1)};
    placement_node nb[1] = {node("b", b, 2)};
    req = (placement_request){.gpu_count = 1, .memory_mib = 1};
    assert_string_equal(rank(nb, 1, &req, &why), "refused");
    assert_contains(why.msg, "b: time-slice replicas on 1 card");
}

static void test_ports_and_volume_space(void **state)
{
    (void)state;
    placement_card a[1] = {card_free("T4", T4)}, b[1] = {card_free("T4", T4)};
    placement_node nodes[2] = {node("a", a, 1), node("b", b, 1)};
    nodes[0].free_ports = 2;
    nodes[1].free_ports = 5;
    nodes[1].volume_free_bytes = 100;
    placement_request req = {.gpu_count = 1, .ports_needed = 3};
    gb_err why;

    assert_string_equal(rank(nodes, 2, &req, &why), "b");
    req.volume_bytes = 1000;
    assert_string_equal(rank(nodes, 2, &req, &why), "refused");
    assert_int_equal(why.code, ERR_GPU_NOT_ENOUGH);
    assert_contains(why.msg, "too few host ports: a; too little volume space: b");
    req.volume_bytes = 0;
    req.ports_needed = 6;
    assert_string_equal(rank(nodes, 2, &req, &why), "refused");
    assert_int_equal(why.code, ERR_PORT_NOT_ENOUGH);
    assert_contains(why.msg, "no node can take 1 whole card and 6 host ports: too few host ports: "
                             "a, b");
    req.gpu_count = 0;
    assert_string_equal(rank(nodes, 2, &req, &why), "refused");
    assert_contains(why.msg, "no node can take 6 host ports:");
}

static void test_request_checks(void **state)
{
    (void)state;
    placement_card a[1] = {card_free("T4", T4)};
    placement_node nodes[1] = {node("a", a, 1)};
    size_t order[1], n_order = 7;
    gb_err why;
    placement_request bad[] = {
        {.gpu_count = 1, .memory_mib = 1, .timeslice = true},
        {.gpu_count = 1, .policy = (enum gpus_policy)7},
        {.gpu_count = 1, .nselector = 1},
        {.gpu_count = 1, .nallowed = 2},
        {.gpu_count = 1, .node = "nowhere"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err_clear(&why);
        assert_int_equal(placement_rank(nodes, 1, &bad[i], order, &n_order, &why), -1);
        assert_int_equal(why.code, ERR_INVALID_PARAMS);
        assert_int_equal(n_order, 0);
    }
    assert_contains(why.msg, "no node 'nowhere' in the fleet");
    placement_label nokey = {NULL, "x"};
    placement_request r = {.gpu_count = 1, .selector = &nokey, .nselector = 1};
    assert_int_equal(placement_rank(nodes, 1, &r, order, &n_order, &why), -1);
    assert_int_equal(why.code, ERR_INVALID_PARAMS);
    /* An empty fleet refuses everything. */
    r = (placement_request){.gpu_count = 0};
    assert_int_equal(placement_rank(NULL, 0, &r, order, &n_order, &why), -1);
    assert_int_equal(why.code, ERR_GPU_NOT_ENOUGH);
    assert_contains(why.msg, "the fleet has no nodes");
    /* A NULL why is allowed. */
    assert_int_equal(placement_rank(nodes, 1, &bad[0], order, &n_order, NULL), -1);
}

/* A thousand nodes dropped for long-named reasons: the message stays in
 * its buffer, names a few per reason and counts the rest. */
static void test_why_is_bounded(void **state)
{
    (void)state;
    enum { N = 1000 };
    placement_node *nodes = calloc(N, sizeof(*nodes));
    placement_card *cards = calloc(N, sizeof(*cards));
    char(*names)[64] = calloc(N, sizeof(*names));
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "node-with-a-rather-long-name-%04zu", i);
        cards[i] = i % 2 ? card_whole("NVIDIA A100-SXM4-80GB", A100)
                         : card_shared("NVIDIA A100-SXM4-80GB", A100, (i % 64) * GIB, 1);
        nodes[i] = node(names[i], &cards[i], 1);
        nodes[i].alive = i % 5 != 0;
        nodes[i].cordoned = i % 7 == 0;
        nodes[i].readable = i % 11 != 0;
    }
    size_t *order = calloc(N, sizeof(*order)), n_order = 0;
    placement_request req = {.gpu_count = 1, .memory_mib = 70 * GIB, .model = "A100"};
    gb_err why;
    assert_int_equal(placement_rank(nodes, N, &req, order, &n_order, &why), -1);
    assert_int_equal(n_order, 0);
    assert_true(strlen(why.msg) < sizeof(why.msg));
    /* Every reason with one name and a count; the spots whole. */
    assert_contains(why.msg, "no node can take 1 card with 71680 MiB of model 'A100': "
                             "unreachable: node-with-a-rather-long-name-0000, "
                             "node-with-a-rather-long-name-0005 and 198 more; "
                             "capacity record unreadable: node-with-a-rather-long-name-0011 and 71 "
                             "more; "
                             "cordoned: node-with-a-rather-long-name-0007 and 103 more; too few "
                             "GPUs: node-with-a-rather-long-name-0001 and 623 more; largest free "
                             "spots: node-with-a-rather-long-name-0062: a 63488 MiB share on one "
                             "NVIDIA A100-SXM4-80GB; the fleet has 1000 cards, 0 free");
    /* Short names: three of each. */
    for (size_t i = 0; i < N; i++)
        snprintf(names[i], sizeof(names[i]), "n%zu", i);
    assert_int_equal(placement_rank(nodes, N, &req, order, &n_order, &why), -1);
    assert_contains(why.msg, "unreachable: n0, n5, n10 and 197 more; capacity record unreadable: "
                             "n11, n22, n33 and 69 more; cordoned: n7, n14, n21 and 101 more; too "
                             "few GPUs: n1, n2, n3 and 621 more; largest free spots: n254: a 63488 "
                             "MiB share on one NVIDIA A100-SXM4-80GB; n318: ");
    free(nodes);
    free(cards);
    free(names);
    free(order);
}

/* ---- capacity records ---- */

static const char *good_record =
    "{\"node\":\"n1\",\"updated\":1764000000123,\"future\":{\"x\":1},"
    "\"devices\":["
    "{\"uuid\":\"GPU-aa\",\"index\":0,\"model\":\"A100-80GB\",\"memoryMiB\":81920,"
    "\"mode\":\"free\",\"freeMemoryMiB\":81920,\"tenants\":0,\"maxTenants\":0,"
    "\"replicas\":{\"total\":4,\"used\":0},\"excluded\":false,\"shareable\":true,"
    "\"healthy\":true},"
    "{\"uuid\":\"GPU-bb\",\"model\":\"T4\",\"memoryMiB\":16384,"
    "\"mode\":\"timeslice\",\"freeMemoryMiB\":0,\"tenants\":2,\"maxTenants\":3,"
    "\"replicas\":{\"total\":3,\"used\":2},\"excluded\":true,\"shareable\":false,"
    "\"healthy\":true,\"schedulable\":false}],"
    "\"ports\":{\"availableCount\":25534},\"volumes\":{\"freeBytes\":1234567890}}";

static void test_parse_good_record(void **state)
{
    (void)state;
    placement_node n;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(placement_node_parse("n1", good_record, &n, &e), 0);
    assert_string_equal(n.name, "n1");
    assert_true(n.readable);
    assert_false(n.alive);
    assert_false(n.cordoned);
    assert_int_equal(n.updated_ms, 1764000000123LL);
    assert_int_equal(n.free_ports, 25534);
    assert_int_equal(n.volume_free_bytes, 1234567890);
    assert_int_equal(n.ncards, 2);
    placement_card *a = &n.cards[0], *b = &n.cards[1];
    assert_string_equal(a->uuid, "GPU-aa");
    assert_string_equal(a->model, "A100-80GB");
    assert_int_equal(a->mode, GPUS_MODE_FREE);
    assert_int_equal(a->memory_mib, 81920);
    assert_int_equal(a->free_memory_mib, 81920);
    assert_int_equal(a->replicas_total, 4);
    assert_true(a->healthy && a->shareable && a->schedulable && !a->excluded);
    assert_int_equal(b->index, 1); /* the position, when absent */
    assert_int_equal(b->mode, GPUS_MODE_TIMESLICE);
    assert_int_equal(b->tenants, 2);
    assert_int_equal(b->max_tenants, 3);
    assert_int_equal(b->replicas_used, 2);
    assert_true(b->excluded && !b->shareable && !b->schedulable);
    placement_node_free(&n);
    assert_null(n.name);

    /* A node without devices is a record too (ports and volumes only). */
    assert_int_equal(placement_node_parse("n2",
                                          "{\"node\":\"n2\",\"updated\":1,\"devices\":[],"
                                          "\"ports\":{\"availableCount\":0},"
                                          "\"volumes\":{\"freeBytes\":0}}",
                                          &n, &e),
                     0);
    assert_true(n.readable);
    assert_int_equal(n.ncards, 0);
    placement_node_free(&n);
}

/* good_record with `from` replaced by `to` (the first occurrence). */
static char *record_with(const char *from, const char *to)
{
    const char *at = strstr(good_record, from);
    if (!at)
        fail_msg("'%s' not in the record", from);
    size_t len = strlen(good_record) - strlen(from) + strlen(to) + 1;
    char *s = malloc(len);
    snprintf(s, len, "%.*s%s%s", (int)(at - good_record), good_record, to, at + strlen(from));
    return s;
}

static void test_parse_bad_records(void **state)
{
    (void)state;
    struct {
        const char *from, *to, *says;
    } bad[] = {
        {"{\"node\"", "[{\"node\"", "not JSON"},
        {"\"node\":\"n1\"", "\"node\":\"n2\"", "it names node 'n2'"},
        {"\"node\":\"n1\",", "", "'node' is required"},
        {"\"updated\":1764000000123", "\"updated\":\"now\"", "'updated' must be an integer"},
        {"\"devices\":[", "\"devices\":7,\"x\":[", "'devices' must be an array, got an integer"},
        {"\"devices\":[{", "\"devices\":[7,{", "devices[0] must be an object"},
        {"\"mode\":\"free\"", "\"mode\":\"busy\"", "devices[0].mode' must be free, whole"},
        {"\"memoryMiB\":81920", "\"memoryMiB\":-1", "between 0 and"},
        {"\"memoryMiB\":81920", "\"memoryMiB\":99999999999999", "between 0 and"},
        {"\"memoryMiB\":81920", "\"memoryMiB\":1.5", "must be an integer"},
        {"\"used\":2", "\"used\":5", "devices[1].replicas.used' (5) exceeds total (3)"},
        {"\"total\":4", "\"total\":65", "'devices[0].replicas.total' must be between 0 and 64"},
        {"\"tenants\":0", "\"tenants\":4294967296", "between 0 and"},
        {"\"uuid\":\"GPU-aa\"", "\"uuid\":\"GPU-aa\",\"uuid\":\"GPU-cc\"", "duplicate"},
        {"\"healthy\":true}", "\"healthy\":1}", "'devices[0].healthy' must be a boolean"},
        {"\"replicas\":{\"total\":4,\"used\":0}", "\"replicas\":4", "devices[0].replicas"},
        {"\"ports\":{\"availableCount\":25534}", "\"ports\":{}", "ports.availableCount"},
        {",\"volumes\":{\"freeBytes\":1234567890}", "", "'volumes' is required"},
        {"\"model\":\"T4\"", "\"model\":\"T4 " X96 "\"",
         "devices[1].model' is longer than 95 bytes"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *text = record_with(bad[i].from, bad[i].to);
        placement_node n;
        gb_err e = GB_ERR_INIT;
        if (placement_node_parse("n1", text, &n, &e) != -1)
            fail_msg("bad record %zu was accepted: %s", i, text);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_contains(e.msg, "capacity record of node 'n1': ");
        assert_contains(e.msg, bad[i].says);
        assert_string_equal(n.name, "n1");
        assert_false(n.readable);
        assert_int_equal(n.ncards, 0);
        assert_null(n.cards);
        placement_node_free(&n);
    }
    /* Not text at all, no record, too many devices. */
    const char *junk[] = {"", "null", "\"x\"", "{", "\xff\xfe"};
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
        placement_node n;
        gb_err e = GB_ERR_INIT;
        assert_int_equal(placement_node_parse("n1", junk[i], &n, &e), -1);
        placement_node_free(&n);
    }
    placement_node n;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(placement_node_parse("n9", NULL, &n, &e), -1);
    assert_contains(e.msg, "node 'n9' has no capacity record");
    placement_node_free(&n);
    size_t len = 200 + (PLACEMENT_CARDS_MAX + 1) * 4;
    _cleanup_free_ char *many = malloc(len);
    size_t used = (size_t)snprintf(many, len, "{\"node\":\"n1\",\"updated\":1,\"devices\":[");
    for (int i = 0; i <= PLACEMENT_CARDS_MAX; i++)
        used += (size_t)snprintf(many + used, len - used, "%s{}", i ? "," : "");
    snprintf(many + used, len - used,
             "],\"ports\":{\"availableCount\":1},\"volumes\":{\"freeBytes\":1}}");
    assert_int_equal(placement_node_parse("n1", many, &n, &e), -1);
    assert_contains(e.msg, "1025 devices, more than 1024");
    placement_node_free(&n);
}

/* A node with a bad record is kept in the array and named in the refusal;
 * the others still place. */
static void test_bad_record_node_skipped(void **state)
{
    (void)state;
    placement_node nodes[2];
    gb_err e = GB_ERR_INIT;
    assert_int_equal(placement_node_parse("n1", good_record, &nodes[0], &e), 0);
    assert_int_equal(placement_node_parse("n2", "{\"node\":", &nodes[1], &e), -1);
    nodes[0].alive = nodes[1].alive = true;
    placement_request req = {.gpu_count = 1};
    gb_err why;
    assert_string_equal(rank(nodes, 2, &req, &why), "n1");
    req.gpu_count = 2;
    assert_string_equal(rank(nodes, 2, &req, &why), "refused");
    assert_contains(why.msg, "capacity record unreadable: n2; too few GPUs: n1; "
                             "largest free spots: n1: 1 whole A100-80GB");
    placement_node_free(&nodes[0]);
    placement_node_free(&nodes[1]);
}

/* ---- the fit rules against the node's own allocator ---- */

/* A capacity record of pool's status, as the daemon writes one. */
static char *record_of(gpus_pool *p, const char *name)
{
    gpus_status st;
    gpus_pool_status(p, &st);
    json_t *devices = json_array();
    for (size_t i = 0; i < st.n; i++) {
        const gpus_device_status *d = &st.devices[i];
        json_array_append_new(
            devices,
            json_pack("{s:s, s:i, s:s, s:I, s:s, s:I, s:i, s:i, s:{s:i, s:i}, s:b, s:b, s:b, s:b}",
                      "uuid", d->device.uuid, "index", d->device.index, "model", d->device.model,
                      "memoryMiB", (json_int_t)d->device.memory_mib, "mode",
                      gpus_mode_name(d->mode), "freeMemoryMiB", (json_int_t)d->free_memory_mib,
                      "tenants", (int)d->ntenants, "maxTenants", (int)d->max_tenants, "replicas",
                      "total", (int)d->replicas_total, "used", (int)d->replicas_used, "excluded",
                      d->excluded, "shareable", d->shareable, "healthy", d->device.healthy,
                      "schedulable", d->schedulable));
    }
    gpus_status_free(&st);
    json_t *rec = json_pack("{s:s, s:I, s:o, s:{s:i}, s:{s:I}}", "node", name, "updated",
                            (json_int_t)1, "devices", devices, "ports", "availableCount", 100,
                            "volumes", "freeBytes", (json_int_t)1 << 30);
    char *text = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    return text;
}

static uint64_t next_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* A random request the allocator and placement both judge. */
static void random_request(uint64_t *seed, gpus_request *g, placement_request *p)
{
    static const char *models[] = {NULL, "t4", "A100", "h100"};
    static const uint64_t shares[] = {1024, 4096, 8192, 12288, 20480, 40960, 61440};
    unsigned kind = (unsigned)next_rand(seed) % 3, count = 1 + (unsigned)next_rand(seed) % 3;
    const char *model = models[next_rand(seed) % 4];
    uint64_t mib = kind == 1 ? shares[next_rand(seed) % ARRAY_SIZE(shares)] : 0;
    *g = (gpus_request){.count = count, .memory_mib = mib, .timeslice = kind == 2, .model = model};
    *p = (placement_request){
        .gpu_count = count, .memory_mib = mib, .timeslice = kind == 2, .model = model};
}

/* Records from a real pool, under random traffic: placement says a node
 * fits exactly when gpus_pool_alloc grants. The pool has what a record
 * must describe: an unhealthy card, a card in MIG mode with instances, a
 * card excluded, one excluded from sharing, a tenant limit and
 * oversubscription. */
static void test_fits_as_the_allocator_does(void **state)
{
    (void)state;
    gpus_test_card cards[] = {
        {"GPU-t4-0", "Tesla T4", 0, 16384},
        {"GPU-t4-1", "Tesla T4", 1, 16384},
        {"GPU-a100-2", "NVIDIA A100-SXM4-80GB", 2, 81920},
        {"GPU-a100-2-mig0", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", 2, 40960},
        {"GPU-a100-2-mig1", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", 2, 40960},
        {"GPU-a100-3", "NVIDIA A100-SXM4-80GB", 3, 81920},
        {"GPU-a100-4", "NVIDIA A100-PCIE-40GB", 4, 40960},
        {"GPU-h100-5", "NVIDIA H100 80GB HBM3", 5, 81920},
        {"GPU-h100-6", "NVIDIA H100 80GB HBM3", 6, 81920},
        {"GPU-t4-7", "Tesla T4", 7, 16384},
    };
    gpu_device devs[ARRAY_SIZE(cards)];
    gpu_inventory inv;
    gpus_test_inventory(&inv, devs, cards, ARRAY_SIZE(cards));
    gpus_test_mig_mode(devs, 2, 2);
    devs[9].healthy = false;
    const char *excl_all[] = {"GPU-h100-6"}, *excl_sharing[] = {"GPU-a100-4"};
    gpus_settings s;
    gpus_settings_defaults(&s);
    s.max_tenants_per_card = 3;
    s.memory_oversubscription = 1.5;
    s.exclude_all = excl_all;
    s.nexclude_all = 1;
    s.exclude_sharing = excl_sharing;
    s.nexclude_sharing = 1;
    gb_err e = GB_ERR_INIT;
    gpus_pool *p = gpus_pool_new_with(&inv, &s, &e);
    if (!p)
        fail_msg("pool: %s", e.msg);

    uint64_t seed = 12345;
    size_t agreed = 0, granted = 0, holders = 0;
    char owners[64][GPUS_OWNER_MAX], owner[GPUS_OWNER_MAX];
    gpus_grant held[64];
    for (int step = 0; step < 600; step++) {
        _cleanup_free_ char *text = record_of(p, "n");
        placement_node nd;
        if (placement_node_parse("n", text, &nd, &e) < 0)
            fail_msg("%s", e.msg);
        nd.alive = true;
        gpus_request g;
        placement_request r;
        random_request(&seed, &g, &r);
        size_t order[1], n_order = 0;
        gb_err why;
        bool placed = placement_rank(&nd, 1, &r, order, &n_order, &why) == 0;
        placement_node_free(&nd);
        /* The allocator's answer; keep the grant now and then, so the pool fills. */
        gpus_grant grant = {0};
        snprintf(owner, sizeof(owner), "rs%d", step);
        bool fits = gpus_pool_alloc(p, &g, owner, &grant, &e) == 0;
        if (placed != fits)
            fail_msg("step %d: %zu cards, %llu MiB, timeslice %d, model %s: placement %s, "
                     "allocator %s (%s | %s)",
                     step, g.count, (unsigned long long)g.memory_mib, g.timeslice,
                     g.model ? g.model : "any", placed ? "fits" : "refuses",
                     fits ? "grants" : "refuses", placed ? "" : why.msg, fits ? "" : e.msg);
        agreed++;
        granted += fits;
        bool keep = fits && next_rand(&seed) % 2;
        if (keep && holders < 64) {
            memcpy(owners[holders], owner, sizeof(owner));
            held[holders++] = grant;
        } else if (fits) {
            gpus_pool_release_grant(p, &grant, owner);
            gpus_grant_free(&grant);
        }
        /* Now and then a holder leaves. */
        if (holders && next_rand(&seed) % 3 == 0) {
            size_t k = (size_t)next_rand(&seed) % holders;
            gpus_pool_release_grant(p, &held[k], owners[k]);
            gpus_grant_free(&held[k]);
            held[k] = held[holders - 1];
            memcpy(owners[k], owners[holders - 1], GPUS_OWNER_MAX);
            holders--;
        }
    }
    assert_int_equal(agreed, 600);
    assert_true(granted > 100 && granted < 550); /* both answers were exercised */
    for (size_t k = 0; k < holders; k++)
        gpus_grant_free(&held[k]);
    gpus_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_filter_named),
        cmocka_unit_test(test_gpushare_example),
        cmocka_unit_test(test_binpack_and_spread),
        cmocka_unit_test(test_ties_by_name),
        cmocka_unit_test(test_pin_selector_allowed),
        cmocka_unit_test(test_timeslice),
        cmocka_unit_test(test_whole_card_rules),
        cmocka_unit_test(test_ports_and_volume_space),
        cmocka_unit_test(test_request_checks),
        cmocka_unit_test(test_why_is_bounded),
        cmocka_unit_test(test_parse_good_record),
        cmocka_unit_test(test_parse_bad_records),
        cmocka_unit_test(test_bad_record_node_skipped),
        cmocka_unit_test(test_fits_as_the_allocator_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
