/*
 * gpus_take.c - re-marking the pool from the store at start-up
 * (gpus_pool_take for whole cards, gpus_pool_take_grant for any grant).
 *
 * The store is the truth: its records say which containers hold which
 * cards, and they were allocated under the settings of the day. So a
 * record is refused only when it contradicts itself or another record in
 * a way no settings could explain (a whole card with another tenant, two
 * tenants on one replica slot, more memory than any oversubscription
 * allows); what only today's settings forbid is accepted and logged, and
 * the card takes no new tenant until enough have left. A refused record is
 * taken not at all (all or nothing) and the caller logs it.
 */
#include "util/xalloc.h"
#include "sched/gpus_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/log.h"

/* Why card c of the grant cannot be marked on slot s, or 0. */
static int gpus_check_card(struct gpus_slot *s, const gpus_grant_card *c, const char *owner,
                           gb_err *err)
{
    if (s->dev->mig_enabled)
        return err_set(err, ERR_GPU_NOT_ENOUGH,
                       "GPU %s is in MIG mode; ask for one of its MIG instances", c->uuid);
    if (c->mode == GPUS_MODE_WHOLE) {
        if (s->ntenants)
            return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s is held by %s", c->uuid,
                           s->tenants[0].owner);
        return 0;
    }
    if (c->mode != GPUS_MODE_MEMORY && c->mode != GPUS_MODE_TIMESLICE)
        return err_set(err, ERR_INVALID_PARAMS,
                       "GPU %s: a grant's card must be whole, memory "
                       "or timeslice",
                       c->uuid);
    if (s->mode == GPUS_MODE_WHOLE)
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s is held by %s", c->uuid,
                       s->tenants[0].owner);
    if (s->mode != GPUS_MODE_FREE && s->mode != c->mode)
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s holds %s tenants, not %s", c->uuid,
                       gpus_mode_name(s->mode), gpus_mode_name(c->mode));
    if (gpus_slot_tenant(s, owner, gpus_owner_bit(owner)))
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s already has a share for %s", c->uuid,
                       owner);
    if (c->memory_mib == 0)
        return err_set(err, ERR_INVALID_PARAMS, "GPU %s: a share of 0 MiB", c->uuid);
    uint64_t ceiling = (uint64_t)((double)s->dev->memory_mib * GPUS_OVERSUBSCRIPTION_MAX);
    if (c->memory_mib > ceiling || s->held_mib + c->memory_mib > ceiling)
        return err_set(err, ERR_GPU_NOT_ENOUGH,
                       "GPU %s: shares of %llu MiB would exceed %.0fx its %llu MiB, which no "
                       "setting allows",
                       c->uuid, (unsigned long long)s->held_mib + (unsigned long long)c->memory_mib,
                       GPUS_OVERSUBSCRIPTION_MAX, (unsigned long long)s->dev->memory_mib);
    if (c->mode != GPUS_MODE_TIMESLICE)
        return 0;
    if (c->replica < 0 || c->replica >= GPUS_TIMESLICE_REPLICAS_MAX)
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s: replica slot %d is outside 0..%d", c->uuid,
                       c->replica, GPUS_TIMESLICE_REPLICAS_MAX - 1);
    for (size_t t = 0; t < s->ntenants; t++)
        if (s->tenants[t].replica == c->replica)
            return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s: replica slot %d is held by %s",
                           c->uuid, c->replica, s->tenants[t].owner);
    return 0;
}

/* What today's settings would not have allowed, logged once marked. */
static void gpus_warn_overrun(const gpus_pool *p, const struct gpus_slot *s,
                              const gpus_grant_card *c, const char *owner)
{
    const char *u = s->dev->uuid;
    if (!s->dev->healthy)
        log_warn("GPU %s is unhealthy but %s holds it (kept as the store says)", u, owner);
    if (s->excluded)
        log_warn("GPU %s is excluded from scheduling but %s holds it (kept)", u, owner);
    if (c->mode == GPUS_MODE_WHOLE)
        return;
    if (s->no_sharing)
        log_warn("GPU %s is excluded from sharing but %s holds a %s share (kept)", u, owner,
                 gpus_mode_name(c->mode));
    if (s->held_mib > s->capacity_mib)
        log_warn("GPU %s: shares hold %llu MiB, more than its %llu MiB at today's "
                 "oversubscription (kept; no new share until some leave)",
                 u, (unsigned long long)s->held_mib, (unsigned long long)s->capacity_mib);
    if (p->max_tenants && s->ntenants > p->max_tenants)
        log_warn("GPU %s has %zu tenants, more than today's limit of %u (kept)", u, s->ntenants,
                 p->max_tenants);
    if (c->mode == GPUS_MODE_TIMESLICE && (unsigned)c->replica >= p->replicas)
        log_warn("GPU %s: %s holds replica slot %d, beyond today's %u replicas (kept)", u, owner,
                 c->replica, p->replicas);
}

/* Check every card, make room, then mark; called locked. */
static int gpus_take_locked(gpus_pool *p, const gpus_grant *g, const char *owner, gb_err *err)
{
    _cleanup_free_ struct gpus_slot **slots = xcalloc(g->n ? g->n : 1, sizeof(struct gpus_slot *));
    for (size_t k = 0; k < g->n; k++) {
        const char *uuid = g->cards[k].uuid;
        if (!(slots[k] = gpus_find(p, uuid)))
            return err_set(err, ERR_INVALID_PARAMS, "no GPU %.96s on this host", uuid);
        for (size_t j = 0; j < k; j++)
            if (slots[j] == slots[k])
                return err_set(err, ERR_INVALID_PARAMS, "GPU %s is asked for twice", uuid);
        if (gpus_check_card(slots[k], &g->cards[k], owner, err) < 0)
            return -1;
    }
    for (size_t k = 0; k < g->n; k++)
        gpus_slot_reserve(slots[k]);
    for (size_t k = 0; k < g->n; k++) {
        const gpus_grant_card *c = &g->cards[k];
        uint64_t memory = c->mode == GPUS_MODE_WHOLE ? slots[k]->dev->memory_mib : c->memory_mib;
        gpus_slot_add(p, slots[k], owner, memory, c->mode, c->replica);
        gpus_warn_overrun(p, slots[k], c, owner);
    }
    return 0;
}

int gpus_pool_take_grant(gpus_pool *p, const gpus_grant *g, const char *owner, gb_err *err)
{
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    if (!g || g->n == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    int rc = gpus_take_locked(p, g, owner, err);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int gpus_pool_take(gpus_pool *p, const char *const *uuids, size_t n, const char *owner, gb_err *err)
{
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    _cleanup_(gpus_grant_free) gpus_grant g = {.cards = xcalloc(n ? n : 1, sizeof(*g.cards))};
    for (size_t i = 0; i < n; i++) {
        if (!uuids[i])
            return err_set(err, ERR_INVALID_PARAMS, "no GPU (null) on this host");
        snprintf(g.cards[i].uuid, sizeof(g.cards[i].uuid), "%s", uuids[i]);
        g.cards[i].mode = GPUS_MODE_WHOLE;
        g.cards[i].replica = -1;
    }
    g.n = n;
    return gpus_pool_take_grant(p, &g, owner, err);
}
