/*
 * placement_why.c - the message of a refusal (placement.h, placement_rank):
 * what was asked, the nodes each reason dropped, and the largest free spots
 * of the nodes that reached the fit test, in at most gb_err's 512 bytes.
 *
 * A fleet of a thousand nodes has more to say than fits, so the room is
 * shared out by what helps the reader most: first every reason with its
 * count ("unreachable: 181 nodes"), then the largest free spot (what
 * could be asked instead), then a first name to each reason, then two more
 * spots, then more names. Names are cut at 40 bytes, models at 32.
 */
#include "sched/placement_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
/* Nodes shown under "largest free spots". */
#define PLACEMENT_SPOTS_SHOWN 3
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

/* Every reason that dropped a node, and how many names each shows. */
struct placement_reasons {
    struct placement_reason of[PLACEMENT_NDROPS];
    size_t shown[PLACEMENT_NDROPS];
    size_t len[PLACEMENT_NDROPS]; /* of its text with shown[] names */
    size_t total;                 /* of them all */
};

static const char *placement_reason_sep(const struct placement_reasons *rs, int d)
{
    for (int e = PLACEMENT_KEPT + 1; e < d; e++)
        if (rs->of[e].count)
            return "; ";
    return "";
}

/* Count the nodes of each reason; each says its count, no name yet. */
static void placement_reasons_count(const placement_node *nodes, size_t n,
                                    const unsigned char *drops, struct placement_reasons *rs)
{
    memset(rs, 0, sizeof(*rs));
    for (size_t i = 0; i < n; i++) {
        struct placement_reason *r = &rs->of[drops[i]];
        if (r->count < PLACEMENT_NAMES_SHOWN)
            r->first[r->count] = i;
        r->count++;
    }
    char part[PLACEMENT_PART_MAX];
    for (int d = PLACEMENT_KEPT + 1; d < PLACEMENT_NDROPS; d++)
        if (rs->of[d].count) {
            rs->len[d] = placement_reason_text(nodes, &rs->of[d], placement_drop_text[d],
                                               placement_reason_sep(rs, d), 0, part);
            rs->total += rs->len[d];
        }
}

/* Names, one round at a time (a first name to each reason, then a
 * second, ...) up to `rounds` names each, while all the reasons stay
 * within room bytes: the last reasons are not cut away by the first. */
static void placement_reasons_fit(const placement_node *nodes, struct placement_reasons *rs,
                                  size_t rounds, size_t room)
{
    char part[PLACEMENT_PART_MAX];
    for (size_t round = 1; round <= rounds && round <= PLACEMENT_NAMES_SHOWN; round++)
        for (int d = PLACEMENT_KEPT + 1; d < PLACEMENT_NDROPS; d++) {
            if (rs->of[d].count < round)
                continue;
            size_t l = placement_reason_text(nodes, &rs->of[d], placement_drop_text[d],
                                             placement_reason_sep(rs, d), round, part);
            if (rs->total - rs->len[d] + l > room)
                continue; /* stays at round - 1 names */
            rs->total += l - rs->len[d];
            rs->len[d] = l;
            rs->shown[d] = round;
        }
}

/* "unreachable: c, d and 5 more; cordoned: e". */
static void placement_reasons_write(const placement_node *nodes, const struct placement_reasons *rs,
                                    struct placement_text *t)
{
    char part[PLACEMENT_PART_MAX];
    for (int d = PLACEMENT_KEPT + 1; d < PLACEMENT_NDROPS; d++)
        if (rs->of[d].count) {
            placement_reason_text(nodes, &rs->of[d], placement_drop_text[d],
                                  placement_reason_sep(rs, d), rs->shown[d], part);
            placement_text_add(t, "%s", part);
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
                            size_t shown, struct placement_text *t)
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
    for (size_t k = 0; k < nbest && k < shown; k++) {
        char one[PLACEMENT_PART_MAX];
        struct placement_text o = {.buf = one, .size = sizeof(one)};
        placement_text_add(&o, "%s", k ? "; " : "");
        placement_spot_text(&nodes[best[k].idx], &best[k], &o);
        if (k && t->used + o.used + 1 > t->size)
            break;
        placement_text_add(t, "%s", one);
    }
}

int placement_refuse(const placement_node *nodes, size_t n, const placement_request *req,
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
    why->code = code;
    why->msg[0] = '\0';
    why->data[0] = '\0';
    /* A shortage of cards ends with how many the fleet has and how many a
     * whole tenant could take; its room is kept aside first. */
    char fleet_count[80] = "";
    if (code == ERR_GPU_NOT_ENOUGH && req->gpu_count) {
        size_t cards = 0, free_cards = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < nodes[i].ncards; k++) {
                cards++;
                free_cards += placement_takes_whole(&nodes[i].cards[k]);
            }
        snprintf(fleet_count, sizeof(fleet_count), "; the fleet has %zu card%s, %zu free", cards,
                 cards == 1 ? "" : "s", free_cards);
    }
    struct placement_text t = {.buf = why->msg, .size = sizeof(why->msg) - strlen(fleet_count)};
    placement_text_add(&t, "no node can take ");
    placement_asked(req, w, &t);
    placement_text_add(&t, ": ");
    if (n == 0)
        placement_text_add(&t, "the fleet has no nodes");
    /* Room first for every reason with its count, then for the largest
     * spot - what could be asked instead - then for a name to each reason,
     * then for two more spots, then for more names. */
    struct placement_reasons rs;
    placement_reasons_count(nodes, n, drops, &rs);
    size_t left = t.size - 1 - t.used;
    char spots[sizeof(why->msg)] = "";
    struct placement_text st = {.buf = spots, .size = left > rs.total ? left - rs.total + 1 : 1};
    placement_spots(nodes, n, drops, 1, &st);
    placement_reasons_fit(nodes, &rs, 1, left > st.used ? left - st.used : 0);
    st = (struct placement_text){.buf = spots, .size = left > rs.total ? left - rs.total + 1 : 1};
    placement_spots(nodes, n, drops, PLACEMENT_SPOTS_SHOWN, &st);
    placement_reasons_fit(nodes, &rs, PLACEMENT_NAMES_SHOWN, left > st.used ? left - st.used : 0);
    placement_reasons_write(nodes, &rs, &t);
    placement_text_add(&t, "%s", spots);
    t.size = sizeof(why->msg);
    placement_text_add(&t, "%s", fleet_count);
    return -1;
}
