/*
 * placement.c - ranking the fleet's nodes for a request (placement.h is the
 * specification: filters, fit rules, score).
 *
 * One pass judges every node: the filters in their order, then the node's
 * cards against what the request asks of one card, summing "left" on the
 * way, so a node costs one read of its cards. The nodes that fit are
 * sorted by left, then name. A refusal is the slow path and may look
 * again: each node's reason was kept from the pass, and the nodes that
 * reached the fit test are read once more for the largest free spots.
 */
#include "util/xalloc.h"
#include "sched/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* What a request asks of each card. */
struct placement_want {
    enum gpus_mode mode; /* WHOLE, MEMORY or TIMESLICE; FREE = no GPU */
    unsigned count;
    uint64_t memory_mib; /* MEMORY: the share */
    const char *model;   /* NULL = any */
};

/* Why a node is dropped: the filters of placement.h, in their order. */
enum placement_drop {
    PLACEMENT_KEPT,
    PLACEMENT_NOT_PINNED,
    PLACEMENT_VOLUMES_ELSEWHERE,
    PLACEMENT_LABELS,
    PLACEMENT_UNREADABLE,
    PLACEMENT_UNREACHABLE,
    PLACEMENT_CORDONED,
    PLACEMENT_NO_GPUS,
    PLACEMENT_NO_PORTS,
    PLACEMENT_NO_VOLUME_SPACE,
    PLACEMENT_NDROPS,
};

static const char *const placement_drop_text[PLACEMENT_NDROPS] = {
    [PLACEMENT_NOT_PINNED] = "not the pinned node",
    [PLACEMENT_VOLUMES_ELSEWHERE] = "volumes live elsewhere",
    [PLACEMENT_LABELS] = "labels do not match",
    [PLACEMENT_UNREADABLE] = "capacity record unreadable",
    [PLACEMENT_UNREACHABLE] = "unreachable",
    [PLACEMENT_CORDONED] = "cordoned",
    [PLACEMENT_NO_GPUS] = "too few GPUs",
    [PLACEMENT_NO_PORTS] = "too few host ports",
    [PLACEMENT_NO_VOLUME_SPACE] = "too little volume space",
};

static const char *placement_name(const placement_node *nd)
{
    return nd->name ? nd->name : "";
}

/* ---- one card ---- */

static bool placement_usable(const placement_card *c)
{
    return c->healthy && !c->excluded && c->schedulable;
}

static bool placement_tenant_slot(const placement_card *c)
{
    return !c->max_tenants || c->tenants < c->max_tenants;
}

static bool placement_takes_whole(const placement_card *c)
{
    return placement_usable(c) && c->mode == GPUS_MODE_FREE && c->tenants == 0;
}

/* The largest memory share the card takes now; 0 = none. */
static uint64_t placement_share_room(const placement_card *c)
{
    bool takes = placement_usable(c) && c->shareable &&
                 (c->mode == GPUS_MODE_FREE || c->mode == GPUS_MODE_MEMORY) &&
                 placement_tenant_slot(c);
    return takes ? c->free_memory_mib : 0;
}

static bool placement_takes_replica(const placement_card *c)
{
    return placement_usable(c) && c->shareable &&
           (c->mode == GPUS_MODE_FREE || c->mode == GPUS_MODE_TIMESLICE) &&
           c->replicas_used < c->replicas_total && placement_tenant_slot(c);
}

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
    if (!nd->readable)
        return PLACEMENT_UNREADABLE;
    if (!nd->alive)
        return PLACEMENT_UNREACHABLE;
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

static int placement_refuse(const placement_node *nodes, size_t n, const placement_request *req,
                            const struct placement_want *w, const unsigned char *drops,
                            gb_err *why);

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

/* ---- the refusal ---- */

/* Text into a fixed buffer; what does not fit ends in "...". */
struct placement_text {
    char *buf;
    size_t size, used;
};

static void placement_text_add(struct placement_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void placement_text_add(struct placement_text *t, const char *fmt, ...)
{
    if (t->used + 1 >= t->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->used, t->size - t->used, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if ((size_t)k < t->size - t->used) {
        t->used += (size_t)k;
        return;
    }
    t->used = t->size - 1; /* cut: mark it */
    memcpy(t->buf + t->size - 4, "...", 4);
}

/* Names shown per reason; the rest are counted. */
#define PLACEMENT_NAMES_SHOWN 3
/* Nodes shown under "largest free spots", and the bytes they may take of
 * the message (the reasons have the rest). */
#define PLACEMENT_SPOTS_SHOWN 3
#define PLACEMENT_SPOTS_ROOM 240
/* One reason, or one spot, at most (names are cut at 40 bytes). */
#define PLACEMENT_PART_MAX 256

/* "2 cards with 40960 MiB each of model 'A100' and 3 host ports". */
static void placement_asked(const placement_request *req, const struct placement_want *w,
                            struct placement_text *t)
{
    unsigned c = w->count;
    const char *s = c == 1 ? "" : "s";
    size_t before = t->used;
    if (w->mode == GPUS_MODE_WHOLE)
        placement_text_add(t, "%u whole card%s", c, s);
    else if (w->mode == GPUS_MODE_MEMORY)
        placement_text_add(t, "%u card%s with %llu MiB%s", c, s, (unsigned long long)w->memory_mib,
                           c == 1 ? "" : " each");
    else if (w->mode == GPUS_MODE_TIMESLICE)
        placement_text_add(t, "%u time-slice replica%s%s", c, s,
                           c == 1 ? "" : " on distinct cards");
    if (w->model)
        placement_text_add(t, " of model '%.32s'", w->model);
    if (req->ports_needed)
        placement_text_add(t, "%s%u host port%s", t->used > before ? " and " : "",
                           req->ports_needed, req->ports_needed == 1 ? "" : "s");
    if (req->volume_bytes)
        placement_text_add(t, "%s%llu bytes of volume space", t->used > before ? " and " : "",
                           (unsigned long long)req->volume_bytes);
    if (t->used == before)
        placement_text_add(t, "a create without GPUs");
}

/* The nodes one reason dropped: how many, and the first few. */
struct placement_reason {
    size_t count;
    size_t first[PLACEMENT_NAMES_SHOWN];
};

/* "; unreachable: c, d and 5 more" with k names shown ("unreachable: 7
 * nodes" with none) into part; its length. */
static size_t placement_reason_text(const placement_node *nodes, const struct placement_reason *r,
                                    const char *label, const char *sep, size_t k, char *part)
{
    struct placement_text p = {.buf = part, .size = PLACEMENT_PART_MAX};
    part[0] = '\0';
    placement_text_add(&p, "%s%s: ", sep, label);
    for (size_t j = 0; j < k; j++)
        placement_text_add(&p, "%s%.40s", j ? ", " : "", placement_name(&nodes[r->first[j]]));
    if (k == 0)
        placement_text_add(&p, "%zu node%s", r->count, r->count == 1 ? "" : "s");
    else if (k < r->count)
        placement_text_add(&p, " and %zu more", r->count - k);
    return p.used;
}

/* "unreachable: c, d and 5 more; cordoned: e" for each reason that
 * dropped a node. Every reason is said, with a count at least; names are
 * added one round at a time (a first name to each reason, then a second,
 * ...) while they fit, so the last reasons are not cut away by the first. */
static void placement_reasons(const placement_node *nodes, size_t n, const unsigned char *drops,
                              struct placement_text *t)
{
    struct placement_reason reasons[PLACEMENT_NDROPS] = {{0}};
    for (size_t i = 0; i < n; i++) {
        struct placement_reason *r = &reasons[drops[i]];
        if (r->count < PLACEMENT_NAMES_SHOWN)
            r->first[r->count] = i;
        r->count++;
    }
    size_t room = t->used + 1 < t->size ? t->size - 1 - t->used : 0;
    size_t shown[PLACEMENT_NDROPS] = {0}, len[PLACEMENT_NDROPS] = {0}, total = 0;
    char part[PLACEMENT_PART_MAX];
    int first = PLACEMENT_KEPT + 1;
    while (first < PLACEMENT_NDROPS && !reasons[first].count)
        first++;
    for (int round = 0; round <= PLACEMENT_NAMES_SHOWN; round++) {
        for (int d = first; d < PLACEMENT_NDROPS; d++) {
            const struct placement_reason *r = &reasons[d];
            if (r->count < (size_t)round || !r->count)
                continue;
            size_t l = placement_reason_text(nodes, r, placement_drop_text[d],
                                             d == first ? "" : "; ", round, part);
            if (round > 0 && total - len[d] + l > room)
                continue; /* stays at round - 1 names */
            total = total - len[d] + l;
            len[d] = l;
            shown[d] = round;
        }
    }
    const char *sep = "";
    for (int d = PLACEMENT_KEPT + 1; d < PLACEMENT_NDROPS; d++) {
        if (!reasons[d].count)
            continue;
        placement_reason_text(nodes, &reasons[d], placement_drop_text[d], sep, shown[d], part);
        placement_text_add(t, "%s", part);
        sep = "; ";
    }
}

/* What a node has free, for "largest free spots". */
struct placement_spot {
    size_t idx;
    unsigned whole;         /* free cards that take a whole tenant */
    uint64_t share;         /* the largest memory share a shared card takes */
    unsigned share_cards;   /* shared cards that take that much */
    unsigned replica_cards; /* time-sliced cards with a replica free */
};

static void placement_spot_of(const placement_node *nd, size_t idx, struct placement_spot *s)
{
    *s = (struct placement_spot){.idx = idx};
    for (size_t i = 0; i < nd->ncards; i++) {
        const placement_card *c = &nd->cards[i];
        if (placement_takes_whole(c)) {
            s->whole++; /* which takes a share or a replica as well: said once */
            continue;
        }
        uint64_t room = placement_share_room(c);
        s->replica_cards += placement_takes_replica(c);
        if (room && room == s->share)
            s->share_cards++;
        if (room > s->share) {
            s->share = room;
            s->share_cards = 1;
        }
    }
}

/* More whole cards, then a larger share, then more replicas, then the name. */
static bool placement_spot_better(const struct placement_spot *a, const struct placement_spot *b,
                                  const placement_node *nodes)
{
    if (a->whole != b->whole)
        return a->whole > b->whole;
    if (a->share != b->share)
        return a->share > b->share;
    if (a->replica_cards != b->replica_cards)
        return a->replica_cards > b->replica_cards;
    return strcmp(placement_name(&nodes[a->idx]), placement_name(&nodes[b->idx])) < 0;
}

/* "2 whole T4-16GB" or "3 whole (2 A100-80GB, 1 T4, ...)": the first two
 * models of the node's free cards. */
static void placement_whole_text(const placement_node *nd, unsigned whole, struct placement_text *t)
{
    const char *model[2] = {NULL, NULL};
    unsigned count[2] = {0, 0};
    bool more = false;
    for (size_t i = 0; i < nd->ncards; i++) {
        const placement_card *c = &nd->cards[i];
        if (!placement_takes_whole(c))
            continue;
        int m = 0;
        while (m < 2 && model[m] && strcmp(model[m], c->model) != 0)
            m++;
        if (m == 2) {
            more = true;
            continue;
        }
        model[m] = c->model;
        count[m]++;
    }
    if (!model[1]) {
        placement_text_add(t, "%u whole %.32s", whole, model[0]);
        return;
    }
    placement_text_add(t, "%u whole (%u %.32s, %u %.32s%s)", whole, count[0], model[0], count[1],
                       model[1], more ? ", ..." : "");
}

/* "b: 2 whole T4-16GB, a 16384 MiB share on each of 2 cards, time-slice
 * replicas on 2 cards". */
static void placement_spot_text(const placement_node *nd, const struct placement_spot *s,
                                struct placement_text *t)
{
    placement_text_add(t, "%.40s: ", placement_name(nd));
    const char *sep = "";
    if (s->whole) {
        placement_whole_text(nd, s->whole, t);
        sep = ", ";
    }
    if (s->share && s->share_cards == 1) {
        const char *model = "";
        for (size_t i = 0; i < nd->ncards && !*model; i++)
            if (placement_share_room(&nd->cards[i]) == s->share)
                model = nd->cards[i].model;
        placement_text_add(t, "%sa %llu MiB share on one %.32s", sep, (unsigned long long)s->share,
                           model);
        sep = ", ";
    } else if (s->share) {
        placement_text_add(t, "%sa %llu MiB share on each of %u cards", sep,
                           (unsigned long long)s->share, s->share_cards);
        sep = ", ";
    }
    if (s->replica_cards)
        placement_text_add(t, "%stime-slice replicas on %u card%s", sep, s->replica_cards,
                           s->replica_cards == 1 ? "" : "s");
}

/* "; largest free spots: ..." over the nodes that reached the fit test. */
static void placement_spots(const placement_node *nodes, size_t n, const unsigned char *drops,
                            struct placement_text *t)
{
    struct placement_spot best[PLACEMENT_SPOTS_SHOWN];
    size_t nbest = 0;
    bool judged = false; /* a node reached the fit test */
    for (size_t i = 0; i < n; i++) {
        if (drops[i] < PLACEMENT_NO_GPUS)
            continue;
        judged = true;
        struct placement_spot s;
        placement_spot_of(&nodes[i], i, &s);
        if (!s.whole && !s.share && !s.replica_cards)
            continue; /* nothing free: no spot */
        if (nbest == PLACEMENT_SPOTS_SHOWN && !placement_spot_better(&s, &best[nbest - 1], nodes))
            continue;
        size_t at = nbest < PLACEMENT_SPOTS_SHOWN ? nbest++ : nbest - 1;
        while (at > 0 && placement_spot_better(&s, &best[at - 1], nodes)) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = s;
    }
    if (!judged)
        return;
    placement_text_add(t, "; largest free spots: ");
    if (!nbest)
        placement_text_add(t, "none (no card takes a new tenant)");
    /* Whole entries only: the first always, the others when they fit. */
    for (size_t k = 0; k < nbest; k++) {
        char one[PLACEMENT_PART_MAX];
        struct placement_text o = {.buf = one, .size = sizeof(one)};
        placement_text_add(&o, "%s", k ? "; " : "");
        placement_spot_text(&nodes[best[k].idx], &best[k], &o);
        if (k && t->used + o.used + 1 > t->size)
            break;
        placement_text_add(t, "%s", one);
    }
}

static int placement_refuse(const placement_node *nodes, size_t n, const placement_request *req,
                            const struct placement_want *w, const unsigned char *drops, gb_err *why)
{
    size_t count[PLACEMENT_NDROPS] = {0};
    for (size_t i = 0; i < n; i++)
        count[drops[i]]++;
    int code =
        count[PLACEMENT_NO_PORTS] && !count[PLACEMENT_NO_GPUS] && !count[PLACEMENT_NO_VOLUME_SPACE]
            ? ERR_PORT_NOT_ENOUGH
            : ERR_GPU_NOT_ENOUGH;
    if (!why)
        return -1;
    /* The spots first, in their own room, so a long list of reasons cuts
     * itself short rather than them: they say what could be asked instead. */
    char spots[PLACEMENT_SPOTS_ROOM] = "";
    struct placement_text st = {.buf = spots, .size = sizeof(spots)};
    placement_spots(nodes, n, drops, &st);
    why->code = code;
    why->msg[0] = '\0';
    struct placement_text t = {.buf = why->msg, .size = sizeof(why->msg) - st.used};
    placement_text_add(&t, "no node can take ");
    placement_asked(req, w, &t);
    placement_text_add(&t, ": ");
    if (n == 0)
        placement_text_add(&t, "the fleet has no nodes");
    placement_reasons(nodes, n, drops, &t);
    t.size = sizeof(why->msg);
    placement_text_add(&t, "%s", spots);
    return -1;
}
