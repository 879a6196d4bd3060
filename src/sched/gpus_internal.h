/*
 * gpus_internal.h - the pool's layout, shared by the files of the GPU
 * allocator (gpus.c: the pool, re-marking, release and status;
 * gpus_alloc.c: choosing cards; gpus_settings.c; gpus_grant.c). Nothing
 * outside src/sched/gpus*.c includes it.
 *
 * The pool is an array of slots in inventory order (sorted by index, MIG
 * instances after their card), so "lowest index first" is a front-to-back
 * scan and ties between equally good cards go to the lower index. Each slot
 * has a copy of its device, its mode, what the settings say about it, and a
 * tenant array that grows as shares arrive; growth happens before anything
 * is changed, so an all-or-nothing change never fails halfway.
 *
 * Beside the slots, an array of offers says what each card takes right now
 * (a whole tenant, how large a memory share, how many replicas), recomputed
 * from the slot and the settings whenever a tenant comes or goes
 * (gpus_slot_add, gpus_slot_remove). A decision reads the offers, 16 bytes
 * a card in one dense array, and looks at a slot only for a card that could
 * win; on a pool of thousands of cards that is what keeps it close to one
 * pass over memory.
 */
#ifndef GPUBOX_SCHED_GPUS_INTERNAL_H
#define GPUBOX_SCHED_GPUS_INTERNAL_H

#include <pthread.h>

#include "sched/gpus.h"

/* What every decision reads is in the slot, so a scan over a thousand
 * cards touches about one cache line per card; the device (UUID, model,
 * ...) is kept apart and read only to match a model or a UUID, or to
 * explain a refusal. */
struct gpus_slot {
    bool schedulable; /* healthy, not a MIG-mode card, not excluded */
    bool no_sharing;  /* settings: whole cards only */
    bool excluded;    /* settings: never scheduled */
    enum gpus_mode mode;
    size_t ntenants, cap;
    uint64_t capacity_mib;    /* memory x oversubscription */
    uint64_t reservation_mib; /* a time-slice replica's memory: memory / replicas */
    uint64_t held_mib;        /* sum of the tenants' memory */
    uint64_t foreign_mib;     /* memory processes outside gpubox use (gpus_pool_set_foreign) */
    uint64_t owner_bits;      /* gpus_owner_bit() of each tenant: "owner not here" in one test */
    gpus_tenant *tenants;
    const gpu_device *dev; /* into the pool's copy of the inventory */
};

/* What a slot offers a new tenant (see the top of the file). An offer is
 * necessary, not sufficient: the model filter and "owner already there"
 * are judged on the slot. */
struct gpus_offer {
    uint64_t memory_mib; /* the largest memory share it takes; 0 = none */
    uint32_t replicas;   /* time-slice replicas it takes; 0 = none */
    bool whole;          /* schedulable and free: takes a whole-card tenant */
};

struct gpus_pool {
    pthread_mutex_t lock;
    struct gpus_slot *slots;
    struct gpus_offer *offers;  /* offers[i] is what slots[i] takes */
    gpu_device *devices;        /* the copy of the inventory, slots[i].dev = &devices[i] */
    struct gpus_slot **by_uuid; /* the slots sorted by UUID, for gpus_find */
    size_t n;
    unsigned replicas;    /* time-slice replicas per card */
    unsigned max_tenants; /* per card; 0 = no limit */
};

/* Healthy, not a MIG-mode card, not excluded. */
bool gpus_slot_schedulable(const struct gpus_slot *s);
/* Schedulable and not excluded from sharing. */
bool gpus_slot_shareable(const struct gpus_slot *s);
/* The replicas a shareable card offers: the setting, capped by the tenant limit. */
unsigned gpus_slot_replicas(const gpus_pool *p, const struct gpus_slot *s);
/* One bit of 64 chosen by a hash of the owner's name. A decision asks
 * every card whether the owner is already there; the bit answers "no" for
 * most cards without comparing names. */
uint64_t gpus_owner_bit(const char *owner);
/* Owner's tenancy on the slot, or NULL; bit = gpus_owner_bit(owner). */
gpus_tenant *gpus_slot_tenant(struct gpus_slot *s, const char *owner, uint64_t bit);
/* Room for one more tenant. */
void gpus_slot_reserve(struct gpus_slot *s);
/* Add a tenant (room reserved), set the slot's mode and renew its offer. */
void gpus_slot_add(gpus_pool *p, struct gpus_slot *s, const char *owner, uint64_t memory_mib,
                   enum gpus_mode mode, int replica);
/* Drop owner's tenancy; true if it had one. Frees the slot with its last
 * tenant; renews its offer. */
bool gpus_slot_remove(gpus_pool *p, struct gpus_slot *s, const char *owner, gpus_tenant *removed);
/* Recompute p->offers for slot s from the slot and the settings. */
void gpus_slot_offer_update(gpus_pool *p, const struct gpus_slot *s);
/* Memory a new share could still take: capacity minus what the tenants
 * hold and what processes outside gpubox use, clamped at 0. */
uint64_t gpus_slot_room(const struct gpus_slot *s);
/* The slot of a UUID (binary search), or NULL. */
struct gpus_slot *gpus_find(gpus_pool *p, const char *uuid);
/* Whether a settings list (UUIDs or card indexes) names this device; a
 * card's entry also names its MIG instances (gpus_settings.c). */
bool gpus_settings_matches(const char *const *list, size_t n, const gpu_device *d);
int gpus_check_owner(const char *owner, gb_err *err);

/* A bounded list for error messages, entries separated by sep (NULL =
 * ", "): entries that do not fit are replaced by one "...". */
struct gpus_list {
    char buf[320];
    size_t used;
    bool cut;
    const char *sep;
};
void gpus_list_add(struct gpus_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The allocation decision and commit, called locked (gpus_alloc.c). */
int gpus_alloc_locked(gpus_pool *p, const gpus_request *req, const char *owner, gpus_grant *out,
                      gb_err *err);

#endif
