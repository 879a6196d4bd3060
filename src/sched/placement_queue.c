/*
 * placement_queue.c - the queue's order and one dispatch pass
 * (placement_queue.h is the specification).
 *
 * The pass keeps the nodes' views current as it goes: a start takes its
 * cards from the view (placement_queue_take), and the head's reservation
 * marks its cards held in the view, keeping what they were in `saved`,
 * so that a backfill that ends in time can be judged against the view
 * without the reservation. A shape (what a request asks, where it may go)
 * that failed is remembered per view: a pass only takes from the views, so
 * a later request of that shape fails again, without ranking.
 */
#include "util/xalloc.h"
#include "sched/placement_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/placement_internal.h"
#include "util/cleanup.h"

static int placement_queue_cmp(const void *pa, const void *pb)
{
    const placement_queue_entry *a = pa, *b = pb;
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (a->usage != b->usage)
        return a->usage < b->usage ? -1 : 1;
    if (a->submit_ms != b->submit_ms)
        return a->submit_ms < b->submit_ms ? -1 : 1;
    return strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

void placement_queue_sort(placement_queue_entry *e, size_t n)
{
    if (n > 1)
        qsort(e, n, sizeof(*e), placement_queue_cmp);
}

/* ---- a node's view ---- */

static bool placement_queue_card_fits(const placement_card *c, const placement_request *r)
{
    if (r->model && *r->model && !strcasestr(c->model, r->model))
        return false;
    if (r->memory_mib)
        return placement_share_room(c) >= r->memory_mib;
    if (r->timeslice)
        return placement_takes_replica(c);
    return placement_takes_whole(c);
}

void placement_queue_take(placement_node *node, const placement_request *r)
{
    unsigned left = r->gpu_count;
    for (size_t i = 0; i < node->ncards && left; i++) {
        placement_card *c = &node->cards[i];
        if (!placement_queue_card_fits(c, r))
            continue;
        if (r->memory_mib) {
            c->mode = GPUS_MODE_MEMORY;
            c->free_memory_mib -= r->memory_mib;
        } else if (r->timeslice) {
            c->mode = GPUS_MODE_TIMESLICE;
            c->replicas_used++;
        } else {
            c->mode = GPUS_MODE_WHOLE;
            c->free_memory_mib = 0;
        }
        c->tenants++;
        left--;
    }
    if (node->free_ports >= r->ports_needed)
        node->free_ports -= r->ports_needed;
}

/* Cards of node that fit one card of r now. */
static unsigned placement_queue_free(const placement_node *node, const placement_request *r)
{
    unsigned n = 0;
    for (size_t i = 0; i < node->ncards; i++)
        n += placement_queue_card_fits(&node->cards[i], r);
    return n;
}

/* ---- shapes that failed ---- */

#define PLACEMENT_QUEUE_SHAPES 64

static bool placement_queue_str_eq(const char *a, const char *b)
{
    return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

static bool placement_queue_same_shape(const placement_request *a, const placement_request *b)
{
    if (a->gpu_count != b->gpu_count || a->memory_mib != b->memory_mib ||
        a->timeslice != b->timeslice || a->ports_needed != b->ports_needed ||
        a->volume_bytes != b->volume_bytes || a->policy != b->policy ||
        a->allowed_nodes != b->allowed_nodes || a->nallowed != b->nallowed ||
        a->nselector != b->nselector || !placement_queue_str_eq(a->model, b->model) ||
        !placement_queue_str_eq(a->node, b->node))
        return false;
    for (size_t i = 0; i < a->nselector; i++)
        if (!placement_queue_str_eq(a->selector[i].key, b->selector[i].key) ||
            !placement_queue_str_eq(a->selector[i].value, b->selector[i].value))
            return false;
    return true;
}

typedef struct placement_queue_failed {
    const placement_request *req; /* the shape */
    char why[sizeof(((placement_queue_entry *)0)->why)];
} placement_queue_failed;

/* Shapes that failed on one view. A pass only takes from the views (a
 * start, the reservation), never gives back, so a shape that failed once
 * fails for the rest of the pass: no entry ever goes stale. */
typedef struct placement_queue_failures {
    placement_queue_failed list[PLACEMENT_QUEUE_SHAPES];
    size_t n, next_slot;
} placement_queue_failures;

/* Shapes that fitted, with the nodes placement_rank ranked for them, best
 * first. The views only lose room, so no other node can fit that shape
 * later in the pass: the next request of the shape takes the first node of
 * the list that still fits (judged alone), without ranking the fleet. */
typedef struct placement_queue_fitted {
    const placement_request *req;
    size_t *order;
    size_t n, first; /* order[first..n) may still fit */
} placement_queue_fitted;

typedef struct placement_queue_pass {
    placement_node *nodes;
    size_t nnodes;
    placement_queue_fitted fitted[PLACEMENT_QUEUE_SHAPES];
    size_t nfitted;
    /* failures on the views as they are (with the reservation, once there
     * is one), and without the reservation (backfill that ends in time) */
    placement_queue_failures held, open;
    /* the reservation */
    placement_queue_reservation *res;
    size_t *saved_idx;     /* cards of res->node marked held */
    placement_card *saved; /* what they were */
} placement_queue_pass;

static const placement_queue_failed *placement_queue_failed_before(placement_queue_failures *f,
                                                                   const placement_request *r)
{
    for (size_t i = 0; i < f->n; i++)
        if (placement_queue_same_shape(f->list[i].req, r))
            return &f->list[i];
    return NULL;
}

static void placement_queue_remember_failed(placement_queue_failures *f,
                                            const placement_queue_entry *e)
{
    size_t slot = f->n < PLACEMENT_QUEUE_SHAPES ? f->n++ : f->next_slot++ % PLACEMENT_QUEUE_SHAPES;
    f->list[slot].req = &e->req;
    memcpy(f->list[slot].why, e->why, sizeof(f->list[slot].why));
}

/* ---- the head's reservation ---- */

/* The reserved cards as they were (restore) or held again (mark). */
static void placement_queue_reserved_swap(placement_queue_pass *p)
{
    placement_node *nd = &p->nodes[p->res->node];
    for (unsigned i = 0; i < p->res->cards; i++) {
        placement_card tmp = nd->cards[p->saved_idx[i]];
        nd->cards[p->saved_idx[i]] = p->saved[i];
        p->saved[i] = tmp;
    }
}

/* When head fits on node: INT64_MAX unknown. */
static int64_t placement_queue_due(const placement_queue_entry *head, size_t node, unsigned free,
                                   const placement_queue_release *rel, size_t nrel, int64_t now_ms)
{
    unsigned want = head->req.gpu_count;
    if (free >= want)
        return now_ms;
    /* the releases of this node, earliest first (few: a selection each time) */
    int64_t after = INT64_MIN;
    unsigned have = free;
    for (;;) {
        int64_t next = INT64_MAX;
        unsigned cards = 0;
        for (size_t i = 0; i < nrel; i++)
            if (rel[i].node == node && rel[i].at_ms > after && rel[i].at_ms < next)
                next = rel[i].at_ms;
        if (next == INT64_MAX)
            return INT64_MAX;
        for (size_t i = 0; i < nrel; i++)
            if (rel[i].node == node && rel[i].at_ms == next)
                cards += rel[i].cards;
        have += cards;
        if (have >= want)
            return next < now_ms ? now_ms : next;
        after = next;
    }
}

/* Make e the head: choose its node, mark what it reserves there. */
static void placement_queue_reserve(placement_queue_pass *p, placement_queue_entry *e, size_t idx,
                                    const placement_queue_release *rel, size_t nrel, int64_t now_ms)
{
    e->head = true;
    if (e->req.gpu_count == 0)
        return; /* no cards to wait for: ports or cores, which no release schedule says */
    placement_request any = e->req;
    any.gpu_count = 0;
    any.memory_mib = 0;
    any.timeslice = false;
    any.ports_needed = 0;
    any.volume_bytes = 0;
    _cleanup_free_ size_t *order = xcalloc(p->nnodes ? p->nnodes : 1, sizeof(*order));
    size_t norder = 0;
    gb_err ignore = GB_ERR_INIT;
    if (placement_rank(p->nodes, p->nnodes, &any, order, &norder, &ignore) < 0)
        return; /* no eligible node at all: nothing to reserve */
    bool found = false;
    size_t best = 0;
    int64_t best_due = INT64_MAX;
    unsigned best_free = 0;
    for (size_t k = 0; k < norder; k++) {
        unsigned free = placement_queue_free(&p->nodes[order[k]], &e->req);
        int64_t due = placement_queue_due(e, order[k], free, rel, nrel, now_ms);
        if (!found || due < best_due || (due == best_due && free > best_free)) {
            found = true;
            best = order[k];
            best_due = due;
            best_free = free;
        }
    }
    placement_node *nd = &p->nodes[best];
    *p->res =
        (placement_queue_reservation){.held = true, .entry = idx, .node = best, .due_ms = best_due};
    p->saved_idx = xcalloc(e->req.gpu_count, sizeof(*p->saved_idx));
    p->saved = xcalloc(e->req.gpu_count, sizeof(*p->saved));
    for (size_t i = 0; i < nd->ncards && p->res->cards < e->req.gpu_count; i++) {
        placement_card *c = &nd->cards[i];
        if (!placement_queue_card_fits(c, &e->req))
            continue;
        p->saved_idx[p->res->cards] = i;
        p->saved[p->res->cards] = *c;
        p->res->cards++;
        c->mode = GPUS_MODE_WHOLE;
        c->tenants++;
        c->free_memory_mib = 0;
    }
}

/* ---- the pass ---- */

/* src into dst, cut to fit. */
static void placement_queue_copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* e's shape fitted before: 1 with e->start the first listed node that
 * still fits; 0 when none does (then e is ranked, and fails: its why
 * comes from there); -1 when the shape is not listed. */
static int placement_queue_fitted_next(placement_queue_pass *p, placement_queue_entry *e)
{
    for (size_t i = 0; i < p->nfitted; i++) {
        placement_queue_fitted *ft = &p->fitted[i];
        if (!placement_queue_same_shape(ft->req, &e->req))
            continue;
        for (; ft->first < ft->n; ft->first++)
            if (placement_fits(&p->nodes[ft->order[ft->first]], &e->req)) {
                e->start = (int)ft->order[ft->first];
                return 1;
            }
        return -1; /* none left: rank the fleet for the why */
    }
    return -1;
}

/* Rank e on the views; 1 placed (e->start set), 0 not (e->why set). f:
 * the failures of the views as they are now. */
static int placement_queue_try(placement_queue_pass *p, placement_queue_failures *f,
                               placement_queue_entry *e, gb_err *err)
{
    const placement_queue_failed *same = placement_queue_failed_before(f, &e->req);
    if (same) {
        placement_queue_copy(e->why, sizeof(e->why), same->why);
        return 0;
    }
    if (f == &p->held) {
        int hit = placement_queue_fitted_next(p, e);
        if (hit >= 0)
            return hit;
    }
    _cleanup_free_ size_t *order = xcalloc(p->nnodes ? p->nnodes : 1, sizeof(*order));
    size_t norder = 0;
    gb_err why = GB_ERR_INIT;
    if (placement_rank(p->nodes, p->nnodes, &e->req, order, &norder, &why) == 0) {
        e->start = (int)order[0];
        if (f == &p->held && p->nfitted < PLACEMENT_QUEUE_SHAPES)
            p->fitted[p->nfitted++] =
                (placement_queue_fitted){.req = &e->req, .order = steal_ptr(&order), .n = norder};
        return 1;
    }
    if (why.code == ERR_INVALID_PARAMS && !e->req.node)
        return err_set(err, why.code, "%s", why.msg);
    placement_queue_copy(e->why, sizeof(e->why), why.msg);
    placement_queue_remember_failed(f, e);
    return 0;
}

/* Whether e, which does not fit beside the reservation, ends before the
 * head is due and fits without the reservation: then it starts. */
static int placement_queue_backfill(placement_queue_pass *p, placement_queue_entry *e,
                                    int64_t now_ms, gb_err *err)
{
    const placement_queue_reservation *r = p->res;
    if (!r->held || !r->cards || !e->max_duration_s || r->due_ms == INT64_MAX ||
        now_ms + e->max_duration_s * 1000 > r->due_ms)
        return 0;
    char why[sizeof(e->why)];
    memcpy(why, e->why, sizeof(why));
    if (placement_queue_failed_before(&p->open, &e->req))
        return 0;                     /* its shape does not fit even without the reservation */
    placement_queue_reserved_swap(p); /* the reserved cards as they are */
    int placed = placement_queue_try(p, &p->open, e, err);
    if (placed == 1) {
        placement_queue_take(&p->nodes[e->start], &e->req);
        e->backfill = true;
    }
    placement_queue_reserved_swap(p); /* held again for the head */
    if (placed != 1)
        memcpy(e->why, why, sizeof(why));
    return placed;
}

int placement_queue_plan(placement_queue_entry *e, size_t n, placement_node *nodes, size_t nnodes,
                         const placement_queue_release *rel, size_t nrel, int64_t now_ms,
                         size_t max_starts, placement_queue_reservation *res, gb_err *err)
{
    placement_queue_pass p = {.nodes = nodes, .nnodes = nnodes, .res = res};
    *res = (placement_queue_reservation){0};
    size_t starts = 0;
    bool have_head = false;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        e[i].start = -1;
        e[i].head = e[i].backfill = false;
        e[i].why[0] = '\0';
        if (max_starts && starts >= max_starts) {
            snprintf(e[i].why, sizeof(e[i].why), "not yet looked at");
            continue;
        }
        int placed = placement_queue_try(&p, &p.held, &e[i], err);
        if (placed < 0) {
            rc = -1;
            break;
        }
        if (placed) {
            placement_queue_take(&nodes[e[i].start], &e[i].req);
            starts++;
            continue;
        }
        if (!have_head) {
            have_head = true;
            placement_queue_reserve(&p, &e[i], i, rel, nrel, now_ms);
            continue;
        }
        placed = placement_queue_backfill(&p, &e[i], now_ms, err);
        if (placed < 0) {
            rc = -1;
            break;
        }
        if (placed) {
            starts++;
            continue;
        }
        if (res->held && res->cards) {
            char due[48] = "until its cards free";
            if (res->due_ms != INT64_MAX)
                snprintf(due, sizeof(due), "due in %llds",
                         (long long)((res->due_ms - now_ms + 999) / 1000));
            char tail[sizeof(e[i].why)];
            memcpy(tail, e[i].why, sizeof(tail));
            snprintf(e[i].why, sizeof(e[i].why),
                     "%u card(s) on node %.64s are reserved for %.64s, first in line (%s); %.240s",
                     res->cards, placement_name(&nodes[res->node]), e[res->entry].name, due, tail);
        }
    }
    if (rc == 0 && res->held) {
        /* the view as it would be without the reservation, for the caller */
        placement_queue_reserved_swap(&p);
    }
    free(p.saved_idx);
    free(p.saved);
    for (size_t k = 0; k < p.nfitted; k++)
        free(p.fitted[k].order);
    return rc;
}
