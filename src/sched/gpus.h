/*
 * gpus.h - the GPU allocator: which card (or MIG instance) a replica set
 * gets. Only this module decides that.
 *
 * The pool is built over the inventory (gpu/gpu.h) and copies it. Which
 * devices are held is derived from the store's replica-set records at
 * start-up (gpus_pool_take) and changes only through gpus_pool_alloc_whole
 * / gpus_pool_release, so the pool never disagrees with the store.
 *
 * Rules: a device is schedulable when it is healthy and not a card in MIG
 * mode (such a card is scheduled through its MIG instances, which are
 * devices of their own). Allocation picks the lowest-index free schedulable
 * devices and is all-or-nothing. A device is held by tenants, named by an
 * owner string (the replica set's name); release only frees what the named
 * owner holds, so a stale or repeated release cannot free someone else's
 * card.
 *
 * Today a device is either free or held whole by one tenant. The tenant
 * list and per-tenant memory are there so memory shares and time-slice
 * replicas (several tenants on one card) can be added without changing the
 * status accessor the API reads.
 *
 * Thread-safe: one mutex guards the pool.
 */
#ifndef GPUBOX_SCHED_GPUS_H
#define GPUBOX_SCHED_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "util/err.h"

#define GPUS_OWNER_MAX 64 /* replica-set names are at most 63 characters */

typedef struct gpus_pool gpus_pool;

/* How a device is used; the API shows gpus_mode_name(). */
enum gpus_mode {
    GPUS_MODE_FREE,  /* "free": no tenant */
    GPUS_MODE_WHOLE, /* "whole": one tenant holds the whole card */
};

typedef struct gpus_tenant {
    char owner[GPUS_OWNER_MAX];
    uint64_t memory_mib; /* what the tenant holds; the whole card's memory in whole mode */
} gpus_tenant;

/* One device as the resources API shows it: {uuid, index, model, memoryMiB,
 * allocatedMemoryMiB, tenants:[owner...], mode, healthy}; "gpus":{uuid: 0|1}
 * is (ntenants > 0). */
typedef struct gpus_device_status {
    gpu_device device;
    bool schedulable;
    enum gpus_mode mode;
    uint64_t allocated_memory_mib;
    gpus_tenant *tenants;
    size_t ntenants;
} gpus_device_status;

typedef struct gpus_status {
    gpus_device_status *devices; /* in inventory order */
    size_t n;
} gpus_status;

/* A pool over a copy of inv (NULL or empty gives an empty pool); NULL when
 * out of memory. */
gpus_pool *gpus_pool_new(const gpu_inventory *inv);
void gpus_pool_free(gpus_pool *p);

/* Mark these devices as held by owner (start-up re-marking from the store,
 * or pinned UUIDs); all or nothing. An unknown UUID is ERR_INVALID_PARAMS; a
 * held device or a card in MIG mode is ERR_GPU_NOT_ENOUGH. Health is not
 * judged here: the store's word on who holds what stands. */
int gpus_pool_take(gpus_pool *p, const char *const *uuids, size_t n, const char *owner,
                   gb_err *err);

/* Hold n whole devices for owner: the lowest-index free schedulable ones,
 * UUIDs into out[0..n). All or nothing; ERR_GPU_NOT_ENOUGH says "GPU not
 * enough: asked N, M free (uuid, ...)". n == 0 succeeds with nothing. */
int gpus_pool_alloc_whole(gpus_pool *p, size_t n, const char *owner, char (*out)[GPU_UUID_MAX],
                          gb_err *err);

/* Free those of these devices that owner holds; returns how many were freed.
 * Devices that are free, unknown, or held by another owner are left alone. */
size_t gpus_pool_release(gpus_pool *p, const char *const *uuids, size_t n, const char *owner);
/* Free everything owner holds; returns how many devices were freed. */
size_t gpus_pool_release_owner(gpus_pool *p, const char *owner);

/* Free schedulable devices right now. */
size_t gpus_pool_free_count(gpus_pool *p);
size_t gpus_pool_size(gpus_pool *p);

/* A consistent snapshot of every device; free with gpus_status_free. */
int gpus_pool_status(gpus_pool *p, gpus_status *out, gb_err *err);
void gpus_status_free(gpus_status *s);

/* "free" | "whole" */
const char *gpus_mode_name(enum gpus_mode mode);

#endif
