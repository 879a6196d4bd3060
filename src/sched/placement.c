/*
 * placement.c - ranking the fleet's nodes for a request (placement.h is the
 * specification: filters, fit rules, score).
 *
 * One pass judges every node: the filters in their order, then the node's
 * cards against what the request asks of one card, summing "left" on the
 * way, so a node costs one read of its cards. The nodes that fit are
 * sorted by left, then name. A refusal is the slow path
 * (placement_why.c): each node's reason is kept from the pass for it.
 */
#include "util/xalloc.h"
#include "sched/placement_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* ---- one card ---- */

/* The card's part of "left" before placing (placement.h, Score). */
static uint64_t placement_card_left(const placement_card *c)
{
    if (placement_takes_whole(c))
        return c->memory_mib;
    if (c->mode == GPUS_MODE_MEMORY)
        return placement_share_room(c);
    if (c->mode == GPUS_MODE_TIMESLICE && placement_takes_replica(c))
        return c->memory_mib * (c->replicas_total - c->replicas_used) / c->replicas_total;
    return 0;
}

static bool placement_card_fits(const placement_card *c, const struct placement_want *w)
{
    if (w->model && !strcasestr(c->model, w->model))
        return false;
    switch (w->mode) {
    case GPUS_MODE_WHOLE:
        return placement_takes_whole(c);
    case GPUS_MODE_MEMORY:
        return placement_share_room(c) >= w->memory_mib;
    case GPUS_MODE_TIMESLICE:
        return placement_takes_replica(c);
    case GPUS_MODE_FREE:
        break;
    }
    return false;
}

/* What placing one card of w takes from "left" (the card fits). */
static uint64_t placement_card_taken(const placement_card *c, const struct placement_want *w)
{
    if (w->mode == GPUS_MODE_MEMORY)
        return w->memory_mib;
    if (w->mode == GPUS_MODE_TIMESLICE)
        return c->memory_mib / c->replicas_total; /* total > 0: it takes a replica */
    return c->memory_mib;
}

/* ---- one node ---- */

static bool placement_allowed(const char *name, const placement_request *req)
{
    for (size_t i = 0; i < req->nallowed; i++)
        if (req->allowed_nodes[i] && strcmp(req->allowed_nodes[i], name) == 0)
            return true;
    return false;
}

static bool placement_labels_match(const placement_node *nd, const placement_request *req)
{
    for (size_t s = 0; s < req->nselector; s++) {
        const placement_label *want = &req->selector[s];
        bool found = false;
        for (size_t l = 0; l < nd->nlabels && !found; l++)
            found = nd->labels[l].key && nd->labels[l].value &&
                    strcmp(nd->labels[l].key, want->key) == 0 &&
                    strcmp(nd->labels[l].value, want->value) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* The filters in order; for a kept node, *left is its score. */
static enum placement_drop placement_judge(const placement_node *nd, const placement_request *req,
                                           const struct placement_want *w, uint64_t *left)
{
    const char *name = placement_name(nd);
    *left = 0;
    if (req->node && strcmp(name, req->node) != 0)
        return PLACEMENT_NOT_PINNED;
    if (req->allowed_nodes && !placement_allowed(name, req))
        return PLACEMENT_VOLUMES_ELSEWHERE;
    if (!placement_labels_match(nd, req))
        return PLACEMENT_LABELS;
    /* a node that is gone has no record either: it is named as gone */
    if (!nd->alive)
        return PLACEMENT_UNREACHABLE;
    if (!nd->readable)
        return PLACEMENT_UNREADABLE;
    if (nd->cordoned)
        return PLACEMENT_CORDONED;
    uint64_t total = 0, taken = 0;
    unsigned nfit = 0;
    for (size_t i = 0; i < nd->ncards; i++) {
        const placement_card *c = &nd->cards[i];
        total += placement_card_left(c);
        if (nfit < w->count && placement_card_fits(c, w)) {
            taken += placement_card_taken(c, w);
            nfit++;
        }
    }
    if (nfit < w->count)
        return PLACEMENT_NO_GPUS;
    if (nd->free_ports < req->ports_needed)
        return PLACEMENT_NO_PORTS;
    if (nd->volume_free_bytes < req->volume_bytes)
        return PLACEMENT_NO_VOLUME_SPACE;
    *left = total > taken ? total - taken : 0;
    return PLACEMENT_KEPT;
}

/* ---- the ranking ---- */

struct placement_scored {
    size_t idx;
    uint64_t left;
    const char *name;
};

static int placement_by_name(const struct placement_scored *a, const struct placement_scored *b)
{
    int c = strcmp(a->name, b->name);
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static int placement_cmp_binpack(const void *pa, const void *pb)
{
    const struct placement_scored *a = pa, *b = pb;
    if (a->left != b->left)
        return a->left < b->left ? -1 : 1;
    return placement_by_name(a, b);
}

static int placement_cmp_spread(const void *pa, const void *pb)
{
    const struct placement_scored *a = pa, *b = pb;
    if (a->left != b->left)
        return a->left > b->left ? -1 : 1;
    return placement_by_name(a, b);
}

/* Check the request and say what it asks of each card. */
static int placement_want_from(const placement_node *nodes, size_t n, const placement_request *req,
                               const size_t *order, struct placement_want *w, gb_err *err)
{
    if (!req || !order || (n && !nodes))
        return err_set(err, ERR_INVALID_PARAMS, "placement: no request, nodes or order array");
    if (req->memory_mib && req->timeslice)
        return err_set(err, ERR_INVALID_PARAMS,
                       "a GPU request takes a memory share or a time-slice replica, not both");
    if (req->policy != GPUS_POLICY_BINPACK && req->policy != GPUS_POLICY_SPREAD)
        return err_set(err, ERR_INVALID_PARAMS, "placement policy must be binpack or spread");
    if (req->nselector && !req->selector)
        return err_set(err, ERR_INVALID_PARAMS, "%zu selector labels but no list", req->nselector);
    for (size_t s = 0; s < req->nselector; s++)
        if (!req->selector[s].key || !req->selector[s].value)
            return err_set(err, ERR_INVALID_PARAMS, "selector label %zu has no key or value", s);
    if (req->nallowed && !req->allowed_nodes)
        return err_set(err, ERR_INVALID_PARAMS, "%zu allowed nodes but no list", req->nallowed);
    if (req->node) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = nodes[i].name && strcmp(nodes[i].name, req->node) == 0;
        if (!known)
            return err_set(err, ERR_INVALID_PARAMS, "no node '%.64s' in the fleet", req->node);
    }
    *w = (struct placement_want){
        .mode = req->gpu_count == 0 ? GPUS_MODE_FREE
                : req->memory_mib   ? GPUS_MODE_MEMORY
                : req->timeslice    ? GPUS_MODE_TIMESLICE
                                    : GPUS_MODE_WHOLE,
        .count = req->gpu_count,
        .memory_mib = req->memory_mib,
        .model = req->gpu_count && req->model && *req->model ? req->model : NULL,
    };
    return 0;
}

int placement_rank(const placement_node *nodes, size_t n, const placement_request *req,
                   size_t *order, size_t *n_order, gb_err *why)
{
    struct placement_want w;
    if (n_order)
        *n_order = 0;
    if (!n_order)
        return err_set(why, ERR_INVALID_PARAMS, "placement: no count to fill");
    if (placement_want_from(nodes, n, req, order, &w, why) < 0)
        return -1;
    _cleanup_free_ struct placement_scored *kept = xcalloc(n ? n : 1, sizeof(*kept));
    _cleanup_free_ unsigned char *drops = xcalloc(n ? n : 1, 1);
    size_t nkept = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t left;
        drops[i] = (unsigned char)placement_judge(&nodes[i], req, &w, &left);
        if (drops[i] == PLACEMENT_KEPT)
            kept[nkept++] = (struct placement_scored){
                .idx = i, .left = left, .name = placement_name(&nodes[i])};
    }
    if (nkept == 0)
        return placement_refuse(nodes, n, req, &w, drops, why);
    qsort(kept, nkept, sizeof(*kept),
          req->policy == GPUS_POLICY_SPREAD ? placement_cmp_spread : placement_cmp_binpack);
    for (size_t k = 0; k < nkept; k++)
        order[k] = kept[k].idx;
    *n_order = nkept;
    return 0;
}

bool placement_fits(const placement_node *nd, const placement_request *req)
{
    struct placement_want w;
    size_t order = 0;
    uint64_t left;
    gb_err ignore = GB_ERR_INIT;
    return nd && placement_want_from(nd, 1, req, &order, &w, &ignore) == 0 &&
           placement_judge(nd, req, &w, &left) == PLACEMENT_KEPT;
}
