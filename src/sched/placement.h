/*
 * placement.h - which node of the fleet a create goes to. sched/gpus.h
 * decides which card of one node; this decides which node, from the
 * capacity records the nodes publish, as gpushare's scheduler extender does
 * across a Kubernetes cluster: filter, then score.
 *
 * Pure: no store, no HTTP, no threads, no clock. The caller reads every
 * node's capacity record (<prefix>/fleet/capacity/<node>), parses each with
 * placement_node_parse, adds what membership says (alive, cordoned,
 * labels), and asks placement_rank for the candidates, best first. It
 * forwards the create to the first; that node's own allocator picks the
 * cards and may still refuse (its record was stale), and the caller then
 * tries the next. So a wrong guess here costs a retry, never an
 * over-allocation.
 *
 * The capacity record, as a node writes it (devices as in GET
 * /api/v1/resources/gpus):
 *   {"node":"n1","updated":<Unix ms>,
 *    "devices":[{"uuid","index","model","memoryMiB","mode","freeMemoryMiB",
 *                "tenants" (a count),"maxTenants","replicas":{"total","used"},
 *                "excluded","shareable","healthy"[,"schedulable"]}, ...],
 *    "ports":{"availableCount"},"volumes":{"freeBytes"}}
 * Every field is required but "index" (default: the position) and
 * "schedulable" (default: healthy and not excluded; a card in MIG mode
 * says false there, its instances being devices of their own). Unknown
 * fields are ignored, so a newer node may add some.
 *
 * Filters, in this order; a node is named in the refusal under the first
 * that drops it:
 *   1. not the pinned node          (req->node)
 *   2. volumes live elsewhere       (not in req->allowed_nodes)
 *   3. labels do not match          (a selector label missing or different)
 *   4. unreachable                  (!alive: no lease; its record is gone too)
 *   5. capacity record unreadable   (placement_node_parse failed)
 *   6. cordoned
 *   7. does not fit: too few GPUs, too few host ports, or too little volume
 *      space, judged as the node's own allocator judges a card:
 *        whole      - gpu_count cards each in mode free with no tenant,
 *                     schedulable (healthy, not excluded);
 *        share      - gpu_count distinct cards each shareable, in mode free
 *                     or memory, freeMemoryMiB >= memory_mib, and a tenant
 *                     slot free (tenants < maxTenants, or maxTenants 0);
 *        time-slice - gpu_count distinct cards each shareable, in mode free
 *                     or timeslice, replicas used < total, a tenant slot free;
 *      and for all three the card's model contains req->model, ignoring
 *      case (as gpus_request.model). A share is judged card by card, never
 *      by a node's total: 2 cards with 20 GiB free each do not take a
 *      30 GiB share (gpushare's example).
 *
 * Score: "left", the node's free GPU memory in MiB after placing. Before
 * placing it is the sum over the node's cards of
 *   - a card that takes a whole tenant (rule 7): its memoryMiB;
 *   - a card in mode memory that takes a tenant: its freeMemoryMiB;
 *   - a card in mode timeslice that takes a tenant: memoryMiB x (total -
 *     used) / total, the memory of its free replicas;
 *   - any other card: 0;
 * and placing takes from it: for whole cards the memoryMiB of the first
 * gpu_count cards that fit, in the record's (index) order, which are the
 * node's own choice; for a share gpu_count x memory_mib; for time-slice
 * memoryMiB / total of each of the first gpu_count cards that fit (the
 * node picks by its own policy: an estimate). Never below 0. Binpack
 * (GPUS_POLICY_BINPACK, the default) ranks the least left first - fill one
 * node before opening another; spread (GPUS_POLICY_SPREAD) the most left
 * first. A request without GPUs takes nothing: binpack sends it to the
 * fullest node, spread to the emptiest. Ties go to the node name (strcmp),
 * so the ranking is deterministic. Ports and volume space filter but do not
 * score.
 */
#ifndef GPUBOX_SCHED_PLACEMENT_H
#define GPUBOX_SCHED_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/gpus.h"
#include "util/err.h"

/* A record with more devices than this is refused (a node has at most
 * GPU_SIM_MAX_DEVICES; this bounds the work one bad record can cause). */
#define PLACEMENT_CARDS_MAX 1024
#define PLACEMENT_MODEL_MAX 96
#define PLACEMENT_UUID_MAX 96

typedef struct placement_label {
    const char *key;
    const char *value;
} placement_label;

/* One device of a capacity record. */
typedef struct placement_card {
    char uuid[PLACEMENT_UUID_MAX];
    char model[PLACEMENT_MODEL_MAX];
    int index;
    enum gpus_mode mode;
    uint64_t memory_mib;
    uint64_t free_memory_mib; /* the largest share it takes now */
    unsigned tenants;
    unsigned max_tenants; /* 0 = no limit */
    unsigned replicas_total, replicas_used;
    bool healthy, excluded, shareable, schedulable;
} placement_card;

typedef struct placement_node {
    char *name; /* owned */
    /* From the record (placement_node_parse). */
    bool readable; /* false: the record was missing or bad; no cards */
    int64_t updated_ms;
    placement_card *cards; /* owned */
    size_t ncards;
    uint64_t free_ports;
    uint64_t volume_free_bytes;
    /* From membership: the caller sets these after parsing. */
    bool alive;                    /* its lease is present */
    bool cordoned;                 /* takes no new creates */
    const placement_label *labels; /* not owned */
    size_t nlabels;
} placement_node;

/* Parse node `name`'s capacity record (capacity_json; NULL when the node
 * has none) into *out. The record's "node" must be `name`. On success 0;
 * on failure -1 with ERR_INVALID_PARAMS naming the node and the bad field.
 * Either way *out is a node to pass to placement_rank - on failure marked
 * unreadable, with no cards, so the refusal names it - and to free with
 * placement_node_free. Membership fields are left false/NULL. */
int placement_node_parse(const char *name, const char *capacity_json, placement_node *out,
                         gb_err *err);
void placement_node_free(placement_node *n);

typedef struct placement_request {
    unsigned gpu_count;  /* cards; 0 = no GPU (memory_mib, timeslice, model ignored) */
    uint64_t memory_mib; /* > 0: a memory share of this much on each of gpu_count cards */
    bool timeslice;      /* one time-slice replica on each of gpu_count cards */
    const char *model;   /* cards whose model contains this, ignoring case; NULL or "" = any */
    const char *node;    /* pin: only this node; NULL = any */
    const placement_label *selector; /* node labels that must all be present and equal */
    size_t nselector;
    /* The only nodes allowed (e.g. the node every bound volume lives on):
     * NULL = any; non-NULL with nallowed 0 = none (volumes on two nodes). */
    const char *const *allowed_nodes;
    size_t nallowed;
    unsigned ports_needed; /* host ports */
    uint64_t volume_bytes; /* volume space to create on the node; 0 = none */
    /* The card-level policy (gpus.h) applied to nodes: GPUS_POLICY_BINPACK
     * ranks the least left first, GPUS_POLICY_SPREAD the most. One field of
     * a spec drives both levels, as in gpushare. */
    enum gpus_policy policy;
} placement_request;

/* Rank nodes[0..n) for req: order[] (room for n) gets the indexes of the
 * nodes that can take it, best first, *n_order their number (>= 1), and 0
 * is returned. Otherwise -1, *n_order = 0 and *why says why, in at most
 * sizeof(why->msg) bytes:
 *   - ERR_INVALID_PARAMS: the request is malformed (a share and a
 *     time-slice at once, an unknown policy, a list given as NULL with a
 *     count), or the pinned node is not in nodes;
 *   - ERR_PORT_NOT_ENOUGH: the nodes that passed filters 1-6 failed on
 *     host ports only;
 *   - ERR_GPU_NOT_ENOUGH: any other refusal. The message names, per reason,
 *     the nodes filtered out (a few names, then "and N more") and the
 *     largest free spots of the nodes that reached the fit test - free
 *     cards ("whole", which take a share or replicas too), the largest
 *     share left on a card shared by memory, the time-sliced cards with a
 *     replica free - e.g.
 *     "no node can take 1 card with 40960 MiB: unreachable: c; too few GPUs:
 *     a, b; largest free spots: b: 2 whole T4-16GB; a: a 20480 MiB share
 *     on each of 2 cards, time-slice replicas on 3 cards". */
int placement_rank(const placement_node *nodes, size_t n, const placement_request *req,
                   size_t *order, size_t *n_order, gb_err *why);

/* Whether node nd alone passes every filter and fits req: placement_rank's
 * judgement of one node, without ranking or a refusal's message (the
 * queue's pass asks it of nodes it ranked before: sched/placement_queue.h). */
bool placement_fits(const placement_node *nd, const placement_request *req);

#endif
