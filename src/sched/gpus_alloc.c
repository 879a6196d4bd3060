/*
 * gpus_alloc.c - choosing cards for a request (see gpus.h for the rules).
 *
 * One decision is a scan under the pool's mutex. A slot is judged against
 * what the request wants of one card (gpus_judge), which gives either a
 * refusal or what the card would have left after placing - memory, or
 * replicas. Whole cards go lowest index first; shares go to the least
 * left (binpack) or the most (spread), ties to the lower index. The scan
 * reads the pool's offers first (gpus_internal.h) and judges only the
 * slots that could be chosen, which on a large pool is a small fraction.
 * Only then are tenant arrays grown and the tenants added, so a request
 * either gets every card or changes nothing. A failed decision judges
 * every slot again to say why, naming the cards that could take the
 * request and the largest share that would fit.
 */
#include "util/xalloc.h"
#include "sched/gpus_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* What a request asks of each card. */
struct gpus_want {
    enum gpus_mode mode; /* WHOLE, MEMORY or TIMESLICE */
    uint64_t memory_mib; /* MEMORY: the share */
    enum gpus_policy policy;
    const char *model; /* NULL = any */
    const char *owner;
    uint64_t owner_bit; /* gpus_owner_bit(owner) */
};

enum gpus_refusal {
    GPUS_FITS,
    GPUS_MIG_CARD,
    GPUS_NOT_HEALTHY,
    GPUS_EXCLUDED,
    GPUS_WRONG_MODEL,
    GPUS_NO_SHARING,
    GPUS_HELD_WHOLE,
    GPUS_SHARED,
    GPUS_OTHER_MODE,
    GPUS_OWNER_THERE,
    GPUS_TENANT_LIMIT,
    GPUS_NO_REPLICA,
    GPUS_NO_MEMORY,
};

/* A card that fits, with its score (gpus_offer_score). */
struct gpus_candidate {
    size_t slot;
    uint64_t score;
};

/* Free memory for shares, clamped at 0 (settings may have shrunk it). */
static uint64_t gpus_room(const struct gpus_slot *s)
{
    return gpus_slot_room(s);
}

/* Whether slot i offers anything to a share of w's mode (gpus_internal.h). */
static bool gpus_offers_share(const gpus_pool *p, size_t i, const struct gpus_want *w)
{
    const struct gpus_offer *o = &p->offers[i];
    return w->mode == GPUS_MODE_MEMORY ? o->memory_mib > 0 : o->replicas > 0;
}

/* Refusals every kind of request shares: the card itself, then the model. */
static enum gpus_refusal gpus_judge_card(const struct gpus_slot *s, const struct gpus_want *w)
{
    if (!s->schedulable)
        return s->dev->mig_enabled ? GPUS_MIG_CARD
               : !s->dev->healthy  ? GPUS_NOT_HEALTHY
                                   : GPUS_EXCLUDED;
    if (w->model && !strcasestr(s->dev->model, w->model))
        return GPUS_WRONG_MODEL;
    if (w->mode == GPUS_MODE_WHOLE)
        return s->ntenants == 0             ? GPUS_FITS
               : s->mode == GPUS_MODE_WHOLE ? GPUS_HELD_WHOLE
                                            : GPUS_SHARED;
    if (s->no_sharing)
        return GPUS_NO_SHARING;
    if (s->mode == GPUS_MODE_WHOLE)
        return GPUS_HELD_WHOLE;
    if (s->mode != GPUS_MODE_FREE && s->mode != w->mode)
        return GPUS_OTHER_MODE;
    return GPUS_FITS;
}

/* Whether slot s takes one card of w; *left is the score. */
static enum gpus_refusal gpus_judge(const gpus_pool *p, struct gpus_slot *s,
                                    const struct gpus_want *w, uint64_t *left)
{
    *left = 0;
    enum gpus_refusal r = gpus_judge_card(s, w);
    if (r != GPUS_FITS || w->mode == GPUS_MODE_WHOLE)
        return r;
    if ((s->owner_bits & w->owner_bit) && gpus_slot_tenant(s, w->owner, w->owner_bit))
        return GPUS_OWNER_THERE;
    if (p->max_tenants && s->ntenants >= p->max_tenants)
        return GPUS_TENANT_LIMIT;
    uint64_t room = gpus_room(s);
    if (w->mode == GPUS_MODE_MEMORY) {
        if (room < w->memory_mib)
            return GPUS_NO_MEMORY;
        *left = room - w->memory_mib;
        return GPUS_FITS;
    }
    unsigned replicas = gpus_slot_replicas(p, s);
    if (s->ntenants >= replicas)
        return GPUS_NO_REPLICA;
    if (room < s->reservation_mib)
        return GPUS_NO_MEMORY; /* only after a settings change */
    *left = replicas - s->ntenants - 1;
    return GPUS_FITS;
}

/* Why slot s refuses w, for a user. */
static void gpus_reason(const gpus_pool *p, const struct gpus_slot *s, enum gpus_refusal r,
                        const struct gpus_want *w, struct gpus_list *l)
{
    const char *u = s->dev->uuid;
    switch (r) {
    case GPUS_FITS:
        break;
    case GPUS_MIG_CARD:
        gpus_list_add(l, "%s is in MIG mode (ask for one of its MIG instances)", u);
        break;
    case GPUS_NOT_HEALTHY:
        gpus_list_add(l, "%s is unhealthy", u);
        break;
    case GPUS_EXCLUDED:
        gpus_list_add(l, "%s is excluded from scheduling on this host", u);
        break;
    case GPUS_WRONG_MODEL:
        gpus_list_add(l, "%s is a %.48s, not '%.32s'", u, s->dev->model, w->model);
        break;
    case GPUS_NO_SHARING:
        gpus_list_add(l, "%s is excluded from sharing (whole cards only)", u);
        break;
    case GPUS_HELD_WHOLE:
        gpus_list_add(l, "%s is held whole by %s", u, s->tenants[0].owner);
        break;
    case GPUS_SHARED:
    case GPUS_OTHER_MODE:
        gpus_list_add(l, "%s is %s by %zu tenant(s)", u,
                      s->mode == GPUS_MODE_MEMORY ? "shared by memory" : "time-sliced",
                      s->ntenants);
        break;
    case GPUS_OWNER_THERE:
        gpus_list_add(l, "%s already has a share for %s", u, w->owner);
        break;
    case GPUS_TENANT_LIMIT:
        gpus_list_add(l, "%s is at the limit of %u tenants", u, p->max_tenants);
        break;
    case GPUS_NO_REPLICA:
        gpus_list_add(l, "%s has no time-slice replica free (%zu of %u used)", u, s->ntenants,
                      gpus_slot_replicas(p, s));
        break;
    case GPUS_NO_MEMORY:
        gpus_list_add(
            l, "%s has %llu MiB free, %llu MiB asked", u, (unsigned long long)gpus_room(s),
            (unsigned long long)(w->mode == GPUS_MODE_MEMORY ? w->memory_mib : s->reservation_mib));
        break;
    }
}

/* " of model 'x'" or "". */
static const char *gpus_model_note(const struct gpus_want *w, char *buf, size_t len)
{
    if (!w->model)
        return "";
    snprintf(buf, len, " of model '%.32s'", w->model);
    return buf;
}

/* The data a 1013 carries: what was asked, the cards the server has, how
 * many could take it and their ids ("freeGpus"), so the message can stay
 * one short sentence. Ids that would not fit in the buffer are left out
 * ("freeGpusCut": true). */
struct gpus_shortage {
    char json[sizeof(((gb_err *)0)->data)];
    size_t used;
    bool cut;
};

static void gpus_shortage_add(struct gpus_shortage *d, const char *uuid)
{
    size_t need = strlen(uuid) + 4; /* ,"" and room for the closing */
    if (d->cut || d->used + need + 40 >= sizeof(d->json)) {
        d->cut = true;
        return;
    }
    d->used += (size_t)snprintf(d->json + d->used, sizeof(d->json) - d->used, "%s\"%s\"",
                                d->json[d->used - 1] == '[' ? "" : ",", uuid);
}

static void gpus_shortage_start(struct gpus_shortage *d, size_t count, size_t cards)
{
    d->used = (size_t)snprintf(d->json, sizeof(d->json),
                               "{\"asked\":%zu,\"cards\":%zu,\"freeGpus\":[", count, cards);
    d->cut = false;
}

static int gpus_shortage_set(struct gpus_shortage *d, size_t nfree, gb_err *err)
{
    snprintf(d->json + d->used, sizeof(d->json) - d->used, "],\"free\":%zu%s}", nfree,
             d->cut ? ",\"freeGpusCut\":true" : "");
    return err_set_data(err, d->json);
}


/* "the server has N card(s)" */
static const char *gpus_cards_note(size_t n, char *buf, size_t len)
{
    snprintf(buf, len, "the server has %zu card%s", n, n == 1 ? "" : "s");
    return buf;
}

/* Whole cards: "asked N[ of model 'x']; the server has T cards, M free" in
 * one sentence; the free cards' ids go in the error's data. */
static int gpus_not_enough_whole(gpus_pool *p, size_t count, const struct gpus_want *w, gb_err *err)
{
    struct gpus_shortage d;
    gpus_shortage_start(&d, count, p->n);
    size_t nfree = 0, nshared = 0;
    uint64_t left;
    for (size_t i = 0; i < p->n; i++) {
        enum gpus_refusal r = gpus_judge(p, &p->slots[i], w, &left);
        if (r == GPUS_FITS) {
            nfree++;
            gpus_shortage_add(&d, p->slots[i].dev->uuid);
        }
        nshared += r == GPUS_SHARED;
    }
    char model[64], cards[48], shared[80] = "";
    if (nshared)
        snprintf(shared, sizeof(shared), " (%zu hold%s memory shares or time-slice replicas)",
                 nshared, nshared == 1 ? "s" : "");
    err_set(err, ERR_GPU_NOT_ENOUGH, "GPU not enough: asked %zu%s; %s, %zu free%s", count,
            gpus_model_note(w, model, sizeof(model)), gpus_cards_note(p->n, cards, sizeof(cards)),
            nfree, shared);
    return gpus_shortage_set(&d, nfree, err);
}

/* Shares: how many cards could take one, the largest share any card takes,
 * and how many cards the tenant limit blocks; the ids of the cards that
 * could take one go in the error's data. */
static int gpus_not_enough_share(gpus_pool *p, size_t count, const struct gpus_want *w, gb_err *err)
{
    struct gpus_shortage d;
    gpus_shortage_start(&d, count, p->n);
    size_t nfit = 0, nlimit = 0;
    uint64_t largest = 0, left;
    for (size_t i = 0; i < p->n; i++) {
        /* Without a tenant limit, a card that offers nothing to this mode
         * is neither a fit, nor at the limit, nor a memory share's largest
         * room (it has none): what refuses it is not in the message. On a
         * full pool that skips nearly every card. */
        if (!p->max_tenants && !gpus_offers_share(p, i, w))
            continue;
        struct gpus_slot *s = &p->slots[i];
        enum gpus_refusal r = gpus_judge(p, s, w, &left);
        nlimit += r == GPUS_TENANT_LIMIT;
        if (r == GPUS_FITS) {
            nfit++;
            gpus_shortage_add(&d, s->dev->uuid);
        }
        if ((r == GPUS_FITS || r == GPUS_NO_MEMORY) && gpus_room(s) > largest)
            largest = gpus_room(s);
    }
    char model[64], asked[160], found[96], cards[48], tail[160] = "";
    if (w->mode == GPUS_MODE_MEMORY)
        snprintf(asked, sizeof(asked), "%zu card%s with %llu MiB%s%s", count, count == 1 ? "" : "s",
                 (unsigned long long)w->memory_mib, count == 1 ? "" : " each",
                 gpus_model_note(w, model, sizeof(model)));
    else
        snprintf(asked, sizeof(asked), "%zu time-slice replica%s%s%s", count, count == 1 ? "" : "s",
                 count == 1 ? "" : " on distinct cards", gpus_model_note(w, model, sizeof(model)));
    const char *what = w->mode == GPUS_MODE_MEMORY ? "can fit it" : "has one free";
    if (nfit == 0)
        snprintf(found, sizeof(found), "none %s", what);
    else
        snprintf(found, sizeof(found), "%zu %s", nfit,
                 nfit == 1 || w->mode == GPUS_MODE_MEMORY ? what : "have one free");
    size_t t = 0;
    if (w->mode == GPUS_MODE_MEMORY)
        t += (size_t)snprintf(tail, sizeof(tail), "; largest free share %llu MiB",
                              (unsigned long long)largest);
    if (nlimit && t < sizeof(tail))
        snprintf(tail + t, sizeof(tail) - t, "; %zu card(s) at the limit of %u tenants", nlimit,
                 p->max_tenants);
    err_set(err, ERR_GPU_NOT_ENOUGH, "GPU not enough: asked %s; %s, %s%s", asked,
            gpus_cards_note(p->n, cards, sizeof(cards)), found, tail);
    return gpus_shortage_set(&d, nfit, err);
}

static int gpus_size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* What the offer would score for one card of w: 0 when it cannot take
 * it, else higher for a better card - less left after placing (binpack)
 * or more (spread), "left" being what gpus_judge gives for the card. The
 * model and owner checks are the judge's. One number per card lets the
 * scan below ask one predictable question of most cards. */
static inline uint64_t gpus_offer_score(const struct gpus_offer *o, const struct gpus_want *w)
{
    bool fits;
    uint64_t left;
    if (w->mode == GPUS_MODE_MEMORY) {
        fits = o->memory_mib >= w->memory_mib;
        left = o->memory_mib - w->memory_mib; /* wraps when it does not fit: unused then */
    } else {
        fits = o->replicas > 0;
        left = (uint64_t)o->replicas - 1;
    }
    /* left is far below 2^63 (card memory x 4, or 64 replicas). */
    uint64_t score = w->policy == GPUS_POLICY_SPREAD ? left + 1 : UINT64_MAX - left;
    /* A mask, not a branch: "fits" is as good as random from card to card,
     * and the compiler would test it apart from the score. */
    return score & (UINT64_C(0) - (uint64_t)fits);
}

/* Whole cards: the `count` lowest-index slots that fit, into chosen[];
 * how many were found. */
static size_t gpus_choose_whole(gpus_pool *p, size_t count, const struct gpus_want *w,
                                size_t *chosen)
{
    size_t nfit = 0;
    uint64_t left;
    for (size_t i = 0; i < p->n && nfit < count; i++)
        if (p->offers[i].whole && gpus_judge(p, &p->slots[i], w, &left) == GPUS_FITS)
            chosen[nfit++] = i;
    return nfit;
}

/* Shares: the `count` best slots for the policy into best[], best first
 * (ties to the lower slot); how many were found. The offers are read for
 * every card; a slot is judged only when its offer fits and scores above
 * the worst of a full list, so most cards cost one read of 16 bytes and
 * one well-predicted branch. A card passed over without judging could
 * not have made the list, so the list is what judging every card and
 * sorting would give. */
static size_t gpus_choose_shares(gpus_pool *p, size_t count, const struct gpus_want *w,
                                 struct gpus_candidate *best)
{
    size_t nbest = 0;
    uint64_t bar = 0, left; /* a card must score above bar: the worst of a full list */
    for (size_t i = 0; i < p->n; i++) {
        uint64_t score = gpus_offer_score(&p->offers[i], w);
        if (score <= bar || gpus_judge(p, &p->slots[i], w, &left) != GPUS_FITS)
            continue;
        /* Insert after every candidate scoring as much (they have lower slots). */
        size_t at = nbest < count ? nbest : count - 1;
        while (at > 0 && score > best[at - 1].score) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = (struct gpus_candidate){.slot = i, .score = score};
        nbest += nbest < count;
        if (nbest == count)
            bar = best[count - 1].score;
    }
    return nbest;
}

/* Choose `count` unpinned slots into chosen[], in slot order; -1 with the
 * not-enough message when too few fit. */
static int gpus_choose(gpus_pool *p, size_t count, const struct gpus_want *w, size_t *chosen,
                       gb_err *err)
{
    if (w->mode == GPUS_MODE_WHOLE) {
        if (gpus_choose_whole(p, count, w, chosen) < count)
            return gpus_not_enough_whole(p, count, w, err);
        return 0; /* found in slot order */
    }
    _cleanup_free_ struct gpus_candidate *best = xcalloc(count, sizeof(*best));
    if (gpus_choose_shares(p, count, w, best) < count)
        return gpus_not_enough_share(p, count, w, err);
    for (size_t k = 0; k < count; k++)
        chosen[k] = best[k].slot;
    qsort(chosen, count, sizeof(*chosen), gpus_size_cmp);
    return 0;
}

/* The pinned slots into chosen[] in slot order, or why they cannot be had:
 * an unknown or repeated UUID is the caller's mistake (ERR_INVALID_PARAMS),
 * anything else is ERR_GPU_NOT_ENOUGH with a reason per card. */
static int gpus_choose_pinned(gpus_pool *p, const gpus_request *req, const struct gpus_want *w,
                              size_t *chosen, gb_err *err)
{
    struct gpus_list reasons = {.sep = "; "};
    uint64_t left;
    for (size_t k = 0; k < req->npin; k++) {
        const char *uuid = req->pin_uuids[k];
        struct gpus_slot *s = gpus_find(p, uuid);
        if (!s)
            return err_set(err, ERR_INVALID_PARAMS, "no GPU %.96s on this host",
                           uuid ? uuid : "(null)");
        chosen[k] = (size_t)(s - p->slots);
        for (size_t j = 0; j < k; j++)
            if (chosen[j] == chosen[k])
                return err_set(err, ERR_INVALID_PARAMS, "GPU %s is pinned twice", uuid);
        gpus_reason(p, s, gpus_judge(p, s, w, &left), w, &reasons);
    }
    if (reasons.used)
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU not enough: %s", reasons.buf);
    qsort(chosen, req->npin, sizeof(*chosen), gpus_size_cmp);
    return 0;
}

/* The lowest replica slot no tenant of s holds. */
static int gpus_free_replica(const gpus_pool *p, const struct gpus_slot *s)
{
    bool used[GPUS_TIMESLICE_REPLICAS_MAX] = {false};
    for (size_t t = 0; t < s->ntenants; t++)
        if (s->tenants[t].replica >= 0 && s->tenants[t].replica < GPUS_TIMESLICE_REPLICAS_MAX)
            used[s->tenants[t].replica] = true;
    for (unsigned r = 0; r < p->replicas; r++)
        if (!used[r])
            return (int)r;
    return -1; /* not reached: the judge saw fewer tenants than replicas */
}

/* Grow the chosen slots' tenant arrays, then add the tenants and fill out. */
static void gpus_commit(gpus_pool *p, const size_t *chosen, size_t count, const struct gpus_want *w,
                        gpus_grant *out)
{
    out->cards = xcalloc(count, sizeof(*out->cards));
    for (size_t k = 0; k < count; k++)
        gpus_slot_reserve(&p->slots[chosen[k]]);
    for (size_t k = 0; k < count; k++) {
        struct gpus_slot *s = &p->slots[chosen[k]];
        gpus_grant_card *c = &out->cards[k];
        c->mode = w->mode;
        c->replica = w->mode == GPUS_MODE_TIMESLICE ? gpus_free_replica(p, s) : -1;
        c->memory_mib = w->mode == GPUS_MODE_WHOLE    ? s->dev->memory_mib
                        : w->mode == GPUS_MODE_MEMORY ? w->memory_mib
                                                      : s->reservation_mib;
        memcpy(c->uuid, s->dev->uuid, GPU_UUID_MAX);
        gpus_slot_add(p, s, w->owner, c->memory_mib, w->mode, c->replica);
    }
    out->n = count;
}

/* Check the request; *count becomes the number of cards. */
static int gpus_want_from(const gpus_request *req, const char *owner, struct gpus_want *w,
                          size_t *count, gb_err *err)
{
    if (req->memory_mib && req->timeslice)
        return err_set(err, ERR_INVALID_PARAMS,
                       "a GPU request takes a memory share or a time-slice replica, not both");
    if (req->policy != GPUS_POLICY_BINPACK && req->policy != GPUS_POLICY_SPREAD)
        return err_set(err, ERR_INVALID_PARAMS, "GPU policy must be binpack or spread");
    if (req->npin && !req->pin_uuids)
        return err_set(err, ERR_INVALID_PARAMS, "%zu pinned GPUs but no list", req->npin);
    if (req->npin && req->count && req->count != req->npin)
        return err_set(err, ERR_INVALID_PARAMS,
                       "asked %zu GPUs but pinned %zu; pin exactly the cards you ask for",
                       req->count, req->npin);
    *count = req->npin ? req->npin : req->count;
    *w = (struct gpus_want){
        .mode = req->memory_mib  ? GPUS_MODE_MEMORY
                : req->timeslice ? GPUS_MODE_TIMESLICE
                                 : GPUS_MODE_WHOLE,
        .memory_mib = req->memory_mib,
        .policy = req->policy,
        .model = req->model && *req->model ? req->model : NULL,
        .owner = owner,
        .owner_bit = gpus_owner_bit(owner),
    };
    return 0;
}

int gpus_alloc_locked(gpus_pool *p, const gpus_request *req, const char *owner, gpus_grant *out,
                      gb_err *err)
{
    struct gpus_want w = {0};
    size_t count = 0;
    memset(out, 0, sizeof(*out));
    if (gpus_want_from(req, owner, &w, &count, err) < 0)
        return -1;
    if (count == 0)
        return 0;
    if (count > p->n && !req->npin)
        return w.mode == GPUS_MODE_WHOLE ? gpus_not_enough_whole(p, count, &w, err)
                                         : gpus_not_enough_share(p, count, &w, err);
    _cleanup_free_ size_t *chosen = xcalloc(count, sizeof(*chosen));
    int rc = req->npin ? gpus_choose_pinned(p, req, &w, chosen, err)
                       : gpus_choose(p, count, &w, chosen, err);
    if (rc < 0)
        return -1;
    gpus_commit(p, chosen, count, &w, out);
    return 0;
}

int gpus_pool_alloc(gpus_pool *p, const gpus_request *req, const char *owner, gpus_grant *out,
                    gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    pthread_mutex_lock(&p->lock);
    int rc = gpus_alloc_locked(p, req, owner, out, err);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* A tenancy taken off for a realloc, to put back if the new one fails. */
struct gpus_saved {
    struct gpus_slot *slot;
    enum gpus_mode mode;
    gpus_tenant tenant;
};

int gpus_pool_realloc(gpus_pool *p, const gpus_grant *old, const gpus_request *req,
                      const char *owner, gpus_grant *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    size_t nold = old ? old->n : 0;
    _cleanup_free_ struct gpus_saved *saved = xcalloc(nold ? nold : 1, sizeof(*saved));
    size_t nsaved = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < nold; i++) {
        struct gpus_slot *s = gpus_find(p, old->cards[i].uuid);
        enum gpus_mode mode = s ? s->mode : GPUS_MODE_FREE;
        if (s && gpus_slot_remove(p, s, owner, &saved[nsaved].tenant)) {
            saved[nsaved].slot = s;
            saved[nsaved++].mode = mode;
        }
    }
    int rc = gpus_alloc_locked(p, req, owner, out, err);
    /* Put the old tenancies back; their room is still there (a failed
     * decision adds no tenant, and growing an array only adds room). */
    for (size_t i = 0; rc < 0 && i < nsaved; i++)
        gpus_slot_add(p, saved[i].slot, owner, saved[i].tenant.memory_mib, saved[i].mode,
                      saved[i].tenant.replica);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int gpus_pool_alloc_whole(gpus_pool *p, size_t n, const char *owner, char (*out)[GPU_UUID_MAX],
                          gb_err *err)
{
    gpus_request req = {.count = n};
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    if (gpus_pool_alloc(p, &req, owner, &g, err) < 0)
        return -1;
    for (size_t i = 0; i < g.n; i++)
        memcpy(out[i], g.cards[i].uuid, GPU_UUID_MAX);
    return 0;
}
