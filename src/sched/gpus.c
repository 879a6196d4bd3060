/*
 * gpus.c - the GPU pool (see gpus.h): slots, release, status, and the
 * helpers the other allocator files share (gpus_internal.h). Choosing cards
 * is gpus_alloc.c, start-up re-marking gpus_take.c, the host settings
 * gpus_settings.c, and a grant's JSON and environment gpus_grant.c.
 */
#include "util/xalloc.h"
#include "sched/gpus_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

const char *gpus_mode_name(enum gpus_mode mode)
{
    switch (mode) {
    case GPUS_MODE_FREE:
        return "free";
    case GPUS_MODE_WHOLE:
        return "whole";
    case GPUS_MODE_MEMORY:
        return "memory";
    case GPUS_MODE_TIMESLICE:
        return "timeslice";
    }
    return "unknown";
}

int gpus_policy_parse(const char *s)
{
    if (!s || !*s || strcasecmp(s, "binpack") == 0)
        return GPUS_POLICY_BINPACK;
    if (strcasecmp(s, "spread") == 0)
        return GPUS_POLICY_SPREAD;
    return -1;
}

const char *gpus_policy_name(enum gpus_policy policy)
{
    return policy == GPUS_POLICY_SPREAD ? "spread" : "binpack";
}

bool gpus_slot_schedulable(const struct gpus_slot *s)
{
    return s->schedulable;
}

bool gpus_slot_shareable(const struct gpus_slot *s)
{
    return gpus_slot_schedulable(s) && !s->no_sharing;
}

unsigned gpus_slot_replicas(const gpus_pool *p, const struct gpus_slot *s)
{
    if (!gpus_slot_shareable(s))
        return 0;
    if (p->max_tenants && p->max_tenants < p->replicas)
        return p->max_tenants;
    return p->replicas;
}

uint64_t gpus_owner_bit(const char *owner)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)owner; *c; c++)
        h = (h ^ *c) * 16777619u;
    return UINT64_C(1) << (h & 63);
}

gpus_tenant *gpus_slot_tenant(struct gpus_slot *s, const char *owner, uint64_t bit)
{
    if (!(s->owner_bits & bit))
        return NULL;
    for (size_t t = 0; t < s->ntenants; t++)
        if (strcmp(s->tenants[t].owner, owner) == 0)
            return &s->tenants[t];
    return NULL;
}

void gpus_slot_reserve(struct gpus_slot *s)
{
    if (s->ntenants < s->cap)
        return;
    size_t cap = s->cap ? s->cap * 2 : 4;
    s->tenants = xrealloc(s->tenants, cap * sizeof(*s->tenants));
    s->cap = cap;
}

uint64_t gpus_slot_room(const struct gpus_slot *s)
{
    uint64_t taken = s->held_mib + s->foreign_mib;
    return s->capacity_mib > taken ? s->capacity_mib - taken : 0;
}

void gpus_slot_offer_update(gpus_pool *p, const struct gpus_slot *s)
{
    struct gpus_offer *o = &p->offers[s - p->slots];
    uint64_t room = gpus_slot_room(s);
    bool below_limit = !p->max_tenants || s->ntenants < p->max_tenants;
    bool shares = gpus_slot_shareable(s) && below_limit;
    unsigned replicas = gpus_slot_replicas(p, s);
    *o = (struct gpus_offer){.whole = gpus_slot_schedulable(s) && s->ntenants == 0};
    if (shares && (s->mode == GPUS_MODE_FREE || s->mode == GPUS_MODE_MEMORY))
        o->memory_mib = room;
    if (shares && (s->mode == GPUS_MODE_FREE || s->mode == GPUS_MODE_TIMESLICE) &&
        s->ntenants < replicas && room >= s->reservation_mib)
        o->replicas = (uint32_t)(replicas - s->ntenants);
}

void gpus_slot_add(gpus_pool *p, struct gpus_slot *s, const char *owner, uint64_t memory_mib,
                   enum gpus_mode mode, int replica)
{
    gpus_tenant *t = &s->tenants[s->ntenants++];
    snprintf(t->owner, sizeof(t->owner), "%s", owner);
    t->memory_mib = memory_mib;
    t->replica = mode == GPUS_MODE_TIMESLICE ? replica : -1;
    s->held_mib += memory_mib;
    s->owner_bits |= gpus_owner_bit(owner);
    s->mode = mode;
    gpus_slot_offer_update(p, s);
}

bool gpus_slot_remove(gpus_pool *p, struct gpus_slot *s, const char *owner, gpus_tenant *removed)
{
    gpus_tenant *t = gpus_slot_tenant(s, owner, gpus_owner_bit(owner));
    if (!t)
        return false;
    if (removed)
        *removed = *t;
    s->held_mib -= t->memory_mib < s->held_mib ? t->memory_mib : s->held_mib;
    size_t at = (size_t)(t - s->tenants);
    memmove(t, t + 1, (s->ntenants - at - 1) * sizeof(*t));
    if (--s->ntenants == 0) {
        s->mode = GPUS_MODE_FREE;
        s->held_mib = 0;
    }
    s->owner_bits = 0;
    for (size_t i = 0; i < s->ntenants; i++)
        s->owner_bits |= gpus_owner_bit(s->tenants[i].owner);
    gpus_slot_offer_update(p, s);
    return true;
}

static int gpus_uuid_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, (*(struct gpus_slot *const *)elem)->dev->uuid);
}

static int gpus_uuid_cmp(const void *a, const void *b)
{
    return strcmp((*(struct gpus_slot *const *)a)->dev->uuid,
                  (*(struct gpus_slot *const *)b)->dev->uuid);
}

struct gpus_slot *gpus_find(gpus_pool *p, const char *uuid)
{
    if (!uuid || p->n == 0)
        return NULL;
    struct gpus_slot **hit =
        bsearch(uuid, p->by_uuid, p->n, sizeof(struct gpus_slot *), gpus_uuid_key_cmp);
    return hit ? *hit : NULL;
}

int gpus_check_owner(const char *owner, gb_err *err)
{
    if (!owner || !*owner)
        return err_set(err, ERR_INVALID_PARAMS, "a GPU needs an owner (the replica set's name)");
    if (strlen(owner) >= GPUS_OWNER_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "GPU owner '%.40s...' is longer than %d characters",
                       owner, GPUS_OWNER_MAX - 1);
    return 0;
}

void gpus_list_add(struct gpus_list *l, const char *fmt, ...)
{
    if (l->cut)
        return;
    char entry[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(entry, sizeof(entry), fmt, ap);
    va_end(ap);
    const char *sep = l->used ? (l->sep ? l->sep : ", ") : "";
    size_t need = strlen(sep) + strlen(entry);
    if (l->used + need + 6 >= sizeof(l->buf)) {
        snprintf(l->buf + l->used, sizeof(l->buf) - l->used, "%s...", sep);
        l->cut = true;
        return;
    }
    l->used += (size_t)snprintf(l->buf + l->used, sizeof(l->buf) - l->used, "%s%s", sep, entry);
}

gpus_pool *gpus_pool_new(const gpu_inventory *inv)
{
    return gpus_pool_new_with(inv, NULL, NULL);
}

gpus_pool *gpus_pool_new_with(const gpu_inventory *inv, const gpus_settings *settings, gb_err *err)
{
    gpus_settings defaults;
    gpus_settings_defaults(&defaults);
    const gpus_settings *s = settings ? settings : &defaults;
    if (gpus_settings_validate(s, inv, err) < 0)
        return NULL;
    gpus_pool *p = xcalloc(1, sizeof(*p));
    size_t n = inv ? inv->n : 0;
    p->slots = xcalloc(n ? n : 1, sizeof(*p->slots));
    p->offers = xcalloc(n ? n : 1, sizeof(*p->offers));
    p->by_uuid = xcalloc(n ? n : 1, sizeof(struct gpus_slot *));
    p->devices = xcalloc(n ? n : 1, sizeof(*p->devices));
    pthread_mutex_init(&p->lock, NULL);
    p->replicas = s->timeslice_replicas;
    p->max_tenants = s->max_tenants_per_card;
    for (size_t i = 0; i < n; i++) {
        struct gpus_slot *slot = &p->slots[i];
        p->devices[i] = inv->devices[i];
        slot->dev = &p->devices[i];
        slot->excluded = gpus_settings_matches(s->exclude_all, s->nexclude_all, slot->dev);
        slot->no_sharing =
            gpus_settings_matches(s->exclude_sharing, s->nexclude_sharing, slot->dev);
        slot->schedulable = slot->dev->healthy && !slot->dev->mig_enabled && !slot->excluded;
        slot->capacity_mib = (uint64_t)((double)slot->dev->memory_mib * s->memory_oversubscription);
        slot->reservation_mib = slot->dev->memory_mib / s->timeslice_replicas;
        p->by_uuid[i] = slot;
        gpus_slot_offer_update(p, slot);
        p->n++;
    }
    qsort(p->by_uuid, p->n, sizeof(struct gpus_slot *), gpus_uuid_cmp);
    return p;
}

void gpus_pool_free(gpus_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->slots[i].tenants);
    free(p->slots);
    free(p->offers);
    free(p->by_uuid);
    free(p->devices);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Drop owner from each named slot; returns how many it left. Called locked. */
static size_t gpus_release_locked(gpus_pool *p, const char *const *uuids, size_t n,
                                  const char *owner)
{
    size_t released = 0;
    for (size_t i = 0; i < n; i++) {
        struct gpus_slot *s = gpus_find(p, uuids[i]);
        if (!s)
            continue;
        if (gpus_slot_remove(p, s, owner, NULL))
            released++;
        else if (s->ntenants)
            log_warn("GPU %s not released for %s: it is held by %s%s", s->dev->uuid, owner,
                     s->tenants[0].owner, s->ntenants > 1 ? " and others" : "");
    }
    return released;
}

size_t gpus_pool_release(gpus_pool *p, const char *const *uuids, size_t n, const char *owner)
{
    if (!owner)
        return 0;
    pthread_mutex_lock(&p->lock);
    size_t released = gpus_release_locked(p, uuids, n, owner);
    pthread_mutex_unlock(&p->lock);
    return released;
}

size_t gpus_pool_release_grant(gpus_pool *p, const gpus_grant *g, const char *owner)
{
    if (!owner || !g)
        return 0;
    size_t released = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < g->n; i++) {
        const char *uuid = g->cards[i].uuid;
        released += gpus_release_locked(p, &uuid, 1, owner);
    }
    pthread_mutex_unlock(&p->lock);
    return released;
}

size_t gpus_pool_release_owner(gpus_pool *p, const char *owner)
{
    size_t released = 0;
    if (!owner)
        return 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n; i++)
        if (gpus_slot_remove(p, &p->slots[i], owner, NULL))
            released++;
    pthread_mutex_unlock(&p->lock);
    return released;
}

int gpus_pool_set_health(gpus_pool *p, const char *uuid, bool healthy)
{
    pthread_mutex_lock(&p->lock);
    struct gpus_slot *s = gpus_find(p, uuid);
    int changed = -1;
    if (s) {
        gpu_device *d = &p->devices[s - p->slots];
        changed = d->healthy != healthy;
        d->healthy = healthy;
        s->schedulable = healthy && !d->mig_enabled && !s->excluded;
        gpus_slot_offer_update(p, s);
    }
    pthread_mutex_unlock(&p->lock);
    return changed;
}

int gpus_pool_set_foreign(gpus_pool *p, const char *uuid, uint64_t memory_mib)
{
    pthread_mutex_lock(&p->lock);
    struct gpus_slot *s = gpus_find(p, uuid);
    if (s && s->foreign_mib != memory_mib) {
        s->foreign_mib = memory_mib;
        gpus_slot_offer_update(p, s);
    }
    pthread_mutex_unlock(&p->lock);
    return s ? 0 : -1;
}

size_t gpus_pool_free_count(gpus_pool *p)
{
    size_t nfree = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n; i++)
        if (p->slots[i].ntenants == 0 && gpus_slot_schedulable(&p->slots[i]))
            nfree++;
    pthread_mutex_unlock(&p->lock);
    return nfree;
}

size_t gpus_pool_size(gpus_pool *p)
{
    return p->n; /* fixed when the pool is made */
}

static void gpus_status_fill(const gpus_pool *p, const struct gpus_slot *s, gpus_device_status *d)
{
    d->device = *s->dev;
    d->schedulable = gpus_slot_schedulable(s);
    d->mode = s->mode;
    d->excluded = s->excluded;
    d->shareable = gpus_slot_shareable(s);
    d->capacity_mib = s->capacity_mib;
    d->foreign_memory_mib = s->foreign_mib;
    d->free_memory_mib = p->offers[s - p->slots].memory_mib;
    d->replicas_total = gpus_slot_replicas(p, s);
    d->replicas_used = s->mode == GPUS_MODE_TIMESLICE ? (unsigned)s->ntenants : 0;
    d->max_tenants = p->max_tenants;
    for (size_t t = 0; t < s->ntenants; t++) {
        d->tenants[t] = s->tenants[t];
        d->allocated_memory_mib += s->tenants[t].memory_mib;
    }
    d->ntenants = s->ntenants;
}

void gpus_pool_status(gpus_pool *p, gpus_status *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&p->lock);
    out->devices = xcalloc(p->n ? p->n : 1, sizeof(*out->devices));
    for (size_t i = 0; i < p->n; i++) {
        const struct gpus_slot *s = &p->slots[i];
        gpus_device_status *d = &out->devices[i];
        d->tenants = xcalloc(s->ntenants ? s->ntenants : 1, sizeof(*d->tenants));
        out->n++;
        gpus_status_fill(p, s, d);
    }
    pthread_mutex_unlock(&p->lock);
}

void gpus_status_free(gpus_status *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->devices && i < s->n; i++)
        free(s->devices[i].tenants);
    free(s->devices);
    memset(s, 0, sizeof(*s));
}

void gpus_grant_free(gpus_grant *g)
{
    if (!g)
        return;
    free(g->cards);
    memset(g, 0, sizeof(*g));
}
