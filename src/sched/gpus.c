/*
 * gpus.c - the GPU allocator (see gpus.h).
 *
 * The pool is an array of slots in inventory order (sorted by index, MIG
 * instances after their card), so "lowest index first" is a front-to-back
 * scan. Each slot has a copy of its device, a mode and a tenant array; the
 * array is allocated with room for one tenant when the pool is made, so
 * whole-card allocation never has to allocate memory halfway through an
 * all-or-nothing change. Sharing modes will grow it.
 */
#include "sched/gpus.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct gpus_slot {
    gpu_device dev;
    enum gpus_mode mode;
    gpus_tenant *tenants;
    size_t ntenants, cap;
};

struct gpus_pool {
    pthread_mutex_t lock;
    struct gpus_slot *slots;
    size_t n;
};

const char *gpus_mode_name(enum gpus_mode mode)
{
    switch (mode) {
    case GPUS_MODE_FREE:
        return "free";
    case GPUS_MODE_WHOLE:
        return "whole";
    }
    return "unknown";
}

gpus_pool *gpus_pool_new(const gpu_inventory *inv)
{
    gpus_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    size_t n = inv ? inv->n : 0;
    p->slots = calloc(n ? n : 1, sizeof(*p->slots));
    if (!p->slots) {
        gpus_pool_free(p);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct gpus_slot *s = &p->slots[i];
        s->dev = inv->devices[i];
        s->tenants = calloc(1, sizeof(*s->tenants));
        if (!s->tenants) {
            gpus_pool_free(p);
            return NULL;
        }
        s->cap = 1;
        p->n++;
    }
    return p;
}

void gpus_pool_free(gpus_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->slots[i].tenants);
    free(p->slots);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static bool gpus_slot_schedulable(const struct gpus_slot *s)
{
    return s->dev.healthy && !s->dev.mig_enabled;
}

static bool gpus_slot_free(const struct gpus_slot *s)
{
    return s->ntenants == 0;
}

static struct gpus_slot *gpus_find(gpus_pool *p, const char *uuid)
{
    for (size_t i = 0; uuid && i < p->n; i++)
        if (strcmp(p->slots[i].dev.uuid, uuid) == 0)
            return &p->slots[i];
    return NULL;
}

static void gpus_hold_whole(struct gpus_slot *s, const char *owner)
{
    snprintf(s->tenants[0].owner, sizeof(s->tenants[0].owner), "%s", owner);
    s->tenants[0].memory_mib = s->dev.memory_mib;
    s->ntenants = 1;
    s->mode = GPUS_MODE_WHOLE;
}

static int gpus_check_owner(const char *owner, gb_err *err)
{
    if (!owner || !*owner)
        return err_set(err, ERR_INVALID_PARAMS, "a GPU needs an owner (the replica set's name)");
    if (strlen(owner) >= GPUS_OWNER_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "GPU owner '%.40s...' is longer than %d characters",
                       owner, GPUS_OWNER_MAX - 1);
    return 0;
}

/* Why these devices cannot be taken, or 0. Called locked. */
static int gpus_check_take(gpus_pool *p, const char *const *uuids, size_t n, gb_err *err)
{
    for (size_t i = 0; i < n; i++) {
        struct gpus_slot *s = gpus_find(p, uuids[i]);
        if (!s)
            return err_set(err, ERR_INVALID_PARAMS, "no GPU %.96s on this host",
                           uuids[i] ? uuids[i] : "(null)");
        for (size_t j = 0; j < i; j++)
            if (strcmp(uuids[j], uuids[i]) == 0)
                return err_set(err, ERR_INVALID_PARAMS, "GPU %s is asked for twice", uuids[i]);
        if (s->dev.mig_enabled)
            return err_set(err, ERR_GPU_NOT_ENOUGH,
                           "GPU %s is in MIG mode; ask for one of its MIG instances", uuids[i]);
        if (!gpus_slot_free(s))
            return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU %s is held by %s", uuids[i],
                           s->tenants[0].owner);
    }
    return 0;
}

int gpus_pool_take(gpus_pool *p, const char *const *uuids, size_t n, const char *owner, gb_err *err)
{
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    pthread_mutex_lock(&p->lock);
    int rc = gpus_check_take(p, uuids, n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        gpus_hold_whole(gpus_find(p, uuids[i]), owner);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* "GPU not enough: asked N, M free (uuid, uuid, ...)", the list cut short
 * so the message fits. Called locked. */
static int gpus_not_enough(gpus_pool *p, size_t asked, size_t nfree, gb_err *err)
{
    char list[320] = "";
    size_t used = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct gpus_slot *s = &p->slots[i];
        if (!gpus_slot_free(s) || !gpus_slot_schedulable(s))
            continue;
        size_t need = strlen(s->dev.uuid) + (used ? 2 : 0);
        if (used + need + 5 >= sizeof(list)) {
            strcpy(list + used, ", ...");
            break;
        }
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "",
                                 s->dev.uuid);
    }
    if (nfree == 0)
        return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU not enough: asked %zu, 0 free", asked);
    return err_set(err, ERR_GPU_NOT_ENOUGH, "GPU not enough: asked %zu, %zu free (%s)", asked,
                   nfree, list);
}

int gpus_pool_alloc_whole(gpus_pool *p, size_t n, const char *owner, char (*out)[GPU_UUID_MAX],
                          gb_err *err)
{
    if (gpus_check_owner(owner, err) < 0)
        return -1;
    if (n == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    size_t nfree = 0;
    for (size_t i = 0; i < p->n; i++)
        if (gpus_slot_free(&p->slots[i]) && gpus_slot_schedulable(&p->slots[i]))
            nfree++;
    if (nfree < n) {
        int rc = gpus_not_enough(p, n, nfree, err);
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    size_t got = 0;
    for (size_t i = 0; i < p->n && got < n; i++) {
        struct gpus_slot *s = &p->slots[i];
        if (!gpus_slot_free(s) || !gpus_slot_schedulable(s))
            continue;
        gpus_hold_whole(s, owner);
        memcpy(out[got++], s->dev.uuid, GPU_UUID_MAX);
    }
    pthread_mutex_unlock(&p->lock);
    return 0;
}

/* Drop owner from the slot's tenants; true if it was one. Called locked. */
static bool gpus_slot_release(struct gpus_slot *s, const char *owner)
{
    for (size_t t = 0; t < s->ntenants; t++) {
        if (strcmp(s->tenants[t].owner, owner) != 0)
            continue;
        memmove(&s->tenants[t], &s->tenants[t + 1], (s->ntenants - t - 1) * sizeof(s->tenants[0]));
        s->ntenants--;
        if (s->ntenants == 0)
            s->mode = GPUS_MODE_FREE;
        return true;
    }
    return false;
}

size_t gpus_pool_release(gpus_pool *p, const char *const *uuids, size_t n, const char *owner)
{
    size_t released = 0;
    if (!owner)
        return 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        struct gpus_slot *s = gpus_find(p, uuids[i]);
        if (!s)
            continue;
        if (gpus_slot_release(s, owner))
            released++;
        else if (!gpus_slot_free(s))
            log_warn("GPU %s not released for %s: it is held by %s", s->dev.uuid, owner,
                     s->tenants[0].owner);
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
        if (gpus_slot_release(&p->slots[i], owner))
            released++;
    pthread_mutex_unlock(&p->lock);
    return released;
}

size_t gpus_pool_free_count(gpus_pool *p)
{
    size_t nfree = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n; i++)
        if (gpus_slot_free(&p->slots[i]) && gpus_slot_schedulable(&p->slots[i]))
            nfree++;
    pthread_mutex_unlock(&p->lock);
    return nfree;
}

size_t gpus_pool_size(gpus_pool *p)
{
    return p->n; /* fixed when the pool is made */
}

int gpus_pool_status(gpus_pool *p, gpus_status *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&p->lock);
    out->devices = calloc(p->n ? p->n : 1, sizeof(*out->devices));
    for (size_t i = 0; out->devices && i < p->n; i++) {
        const struct gpus_slot *s = &p->slots[i];
        gpus_device_status *d = &out->devices[i];
        d->device = s->dev;
        d->schedulable = gpus_slot_schedulable(s);
        d->mode = s->mode;
        d->tenants = calloc(s->ntenants ? s->ntenants : 1, sizeof(*d->tenants));
        if (!d->tenants)
            break;
        out->n++;
        for (size_t t = 0; t < s->ntenants; t++) {
            d->tenants[t] = s->tenants[t];
            d->allocated_memory_mib += s->tenants[t].memory_mib;
        }
        d->ntenants = s->ntenants;
    }
    bool complete = out->devices && out->n == p->n;
    pthread_mutex_unlock(&p->lock);
    if (!complete) {
        gpus_status_free(out);
        return err_set(err, ERR_INTERNAL, "out of memory reading the GPU status");
    }
    return 0;
}

void gpus_status_free(gpus_status *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->devices[i].tenants);
    free(s->devices);
    memset(s, 0, sizeof(*s));
}
