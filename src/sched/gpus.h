/*
 * gpus.h - the GPU allocator: which card (or MIG instance) a replica set
 * gets, whole or as a share. Only this module decides that.
 *
 * The pool is built over the inventory (gpu/gpu.h) and copies it. Which
 * devices are held is derived from the store's replica-set records at
 * start-up (gpus_pool_take, gpus_pool_take_grant) and changes only through
 * the alloc / release calls below, so the pool never disagrees with the
 * store.
 *
 * Modes: a device is free, held whole by one tenant, shared by memory (its
 * tenants hold memory shares) or time-sliced (its tenants hold replicas,
 * each with a memory reservation of card memory / replicas). A device in a
 * sharing mode takes only tenants of that mode; whole requests never land on
 * a shared device and shares never on a device held whole. When its last
 * tenant leaves, the device is free again.
 *
 * Rules: a device is schedulable when it is healthy, not a card in MIG mode
 * (such a card is scheduled through its MIG instances, which are devices of
 * their own) and not excluded by the host settings; it is shareable when it
 * is schedulable and not excluded from sharing. Each card is judged by its
 * own memory: a share must fit on one card, never across several. Every
 * allocation is all-or-nothing and made under the pool's mutex, so
 * concurrent requests never over-pack a card. A tenant is named by an owner
 * string (the replica set's name); an owner holds at most one tenancy per
 * device, and release only frees what the named owner holds, so a stale or
 * repeated release cannot free someone else's card.
 *
 * Thread-safe: one mutex guards the pool. The grant functions (JSON, env)
 * are pure and touch no pool.
 */
#ifndef GPUBOX_SCHED_GPUS_H
#define GPUBOX_SCHED_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gpu/gpu.h"
#include "util/err.h"

#define GPUS_OWNER_MAX 64 /* replica-set names are at most 63 characters */

/* Bounds of the host settings (gpus_settings_validate). They also bound what
 * start-up re-marking accepts: a store record no allowed setting could have
 * produced is refused rather than believed. */
#define GPUS_TIMESLICE_REPLICAS_DEFAULT 4
#define GPUS_TIMESLICE_REPLICAS_MAX 64
#define GPUS_OVERSUBSCRIPTION_MAX 4.0

typedef struct gpus_pool gpus_pool;

/* How a device is used; the API shows gpus_mode_name(). */
enum gpus_mode {
    GPUS_MODE_FREE,      /* "free": no tenant */
    GPUS_MODE_WHOLE,     /* "whole": one tenant holds the whole card */
    GPUS_MODE_MEMORY,    /* "memory": tenants hold memory shares */
    GPUS_MODE_TIMESLICE, /* "timeslice": tenants hold time-slice replicas */
};

/* Which fitting card a share takes. */
enum gpus_policy {
    GPUS_POLICY_BINPACK, /* "binpack": the least memory (or replicas) left after placing */
    GPUS_POLICY_SPREAD,  /* "spread": the most left */
};

typedef struct gpus_tenant {
    char owner[GPUS_OWNER_MAX];
    uint64_t memory_mib; /* what the tenant holds; the whole card's memory in whole mode */
    int replica;         /* time-slice replica slot; -1 in the other modes */
} gpus_tenant;

/* ---- host settings ---- */

/* Passed at gpus_pool_new_with; the pool copies what it needs (it keeps no
 * pointer into the lists). Exclusion entries are device UUIDs or card
 * indexes ("0", "3"); a card's UUID or index also covers its MIG
 * instances. */
typedef struct gpus_settings {
    unsigned timeslice_replicas;        /* replicas each card offers; 1..64, default 4 */
    unsigned max_tenants_per_card;      /* shares or replicas per card; 0 = no limit */
    double memory_oversubscription;     /* shares may hold memory x this; 1.0..4.0, default 1.0 */
    const char *const *exclude_sharing; /* whole cards only */
    size_t nexclude_sharing;
    const char *const *exclude_all; /* never scheduled */
    size_t nexclude_all;
} gpus_settings;

/* The defaults: 4 replicas, no tenant limit, no oversubscription, no exclusions. */
void gpus_settings_defaults(gpus_settings *s);

/* Check the settings against the inventory: ranges above, and every
 * exclusion names a device of this host (a mistyped exclusion would hand
 * out the very card the operator meant to keep). ERR_INVALID_PARAMS with a
 * message naming the bad value. */
int gpus_settings_validate(const gpus_settings *s, const gpu_inventory *inv, gb_err *err);

/* Split a flag's value, "GPU-a,GPU-b" or "0,3" (spaces around entries are
 * ignored; "" gives no entries), into a NULL-terminated array of copies.
 * Empty entries, characters a UUID or index cannot have, and repeated
 * entries are ERR_INVALID_PARAMS naming `what` (e.g. "--gpu-exclude"). */
int gpus_settings_parse_list(const char *text, const char *what, char ***out, size_t *n,
                             gb_err *err);
void gpus_settings_list_free(char **list, size_t n);

/* ---- the pool ---- */

/* A pool over a copy of inv (NULL or empty gives an empty pool) with the
 * default settings; never NULL. */
gpus_pool *gpus_pool_new(const gpu_inventory *inv);
/* The same with host settings (NULL = defaults); NULL with err filled when
 * the settings are invalid (gpus_settings_validate). */
gpus_pool *gpus_pool_new_with(const gpu_inventory *inv, const gpus_settings *settings, gb_err *err);
void gpus_pool_free(gpus_pool *p);

/* A request for cards. count == 0 with no pins asks for nothing. */
typedef struct gpus_request {
    size_t count;        /* cards; 0 with pins = as many as pinned */
    uint64_t memory_mib; /* a share of this much on each card; 0 = whole cards */
    bool timeslice;      /* one time-slice replica on each card (memory_mib must be 0) */
    enum gpus_policy policy;
    const char *const *pin_uuids; /* exactly these cards, or fail */
    size_t npin;
    const char *model; /* case-insensitive substring of the model; NULL or "" = any */
} gpus_request;

/* What one card of a grant gives. */
typedef struct gpus_grant_card {
    char uuid[GPU_UUID_MAX];
    uint64_t memory_mib; /* the share or reservation; whole: the card's memory, 0 when read
                            from JSON (the record does not repeat it) */
    enum gpus_mode mode; /* WHOLE, MEMORY or TIMESLICE; one mode per grant */
    int replica;         /* time-slice replica slot; -1 otherwise */
} gpus_grant_card;

/* The cards a replica set holds, in container order: ascending host index,
 * which is PCI bus order (card i of the grant is the container's CUDA
 * device i under CUDA_DEVICE_ORDER=PCI_BUS_ID). */
typedef struct gpus_grant {
    gpus_grant_card *cards;
    size_t n;
} gpus_grant;

void gpus_grant_free(gpus_grant *g);

/* Hold cards for owner as the request says; the grant into *out (free with
 * gpus_grant_free). All or nothing. Whole cards: the lowest-index free
 * schedulable ones. Memory shares and time-slice replicas: `count` distinct
 * shareable cards on which the share fits (memory x oversubscription minus
 * what the card's tenants hold, tenant limit, replicas left), chosen by the
 * policy, ties to the lowest index. ERR_INVALID_PARAMS for a malformed
 * request or an unknown pinned card; ERR_GPU_NOT_ENOUGH says what was asked,
 * which cards could take it and the largest share that would fit, or, for
 * pinned cards, why each one cannot. */
int gpus_pool_alloc(gpus_pool *p, const gpus_request *req, const char *owner, gpus_grant *out,
                    gb_err *err);

/* Replace what owner holds under `old` by a new allocation for req, in one
 * step: the decision sees old's tenancies as released. On failure nothing
 * changes and owner keeps old (a patch that does not fit leaves the replica
 * set as it was). */
int gpus_pool_realloc(gpus_pool *p, const gpus_grant *old, const gpus_request *req,
                      const char *owner, gpus_grant *out, gb_err *err);

/* Hold n whole devices for owner: the lowest-index free schedulable ones,
 * UUIDs into out[0..n). All or nothing; ERR_GPU_NOT_ENOUGH says "GPU not
 * enough: asked N, M free (uuid, ...)". n == 0 succeeds with nothing. */
int gpus_pool_alloc_whole(gpus_pool *p, size_t n, const char *owner, char (*out)[GPU_UUID_MAX],
                          gb_err *err);

/* Mark these devices as held whole by owner (start-up re-marking from the
 * store, or pinned UUIDs); all or nothing. An unknown UUID is
 * ERR_INVALID_PARAMS; a held device or a card in MIG mode is
 * ERR_GPU_NOT_ENOUGH. Health and exclusions are not judged here: the store's
 * word on who holds what stands. */
int gpus_pool_take(gpus_pool *p, const char *const *uuids, size_t n, const char *owner,
                   gb_err *err);

/* Mark a grant read from the store as held by owner; all or nothing.
 * Refused (nothing taken): an unknown UUID (ERR_INVALID_PARAMS), a card in
 * MIG mode, a whole card with any other tenant or a share on a card held
 * whole, memory shares and replicas on one card, a replica slot taken
 * twice, owner twice on a card, and totals no allowed setting could give
 * (more than GPUS_OVERSUBSCRIPTION_MAX x the card's memory, a replica slot
 * >= GPUS_TIMESLICE_REPLICAS_MAX) - all ERR_GPU_NOT_ENOUGH. Accepted and
 * logged: what only today's settings forbid (memory beyond today's
 * oversubscription, replica slots beyond today's replicas, more tenants
 * than today's limit, excluded or unhealthy cards) - the containers already
 * run with it; the card just takes no new tenant until enough leave. */
int gpus_pool_take_grant(gpus_pool *p, const gpus_grant *g, const char *owner, gb_err *err);

/* Free those of these devices that owner holds; returns how many were freed.
 * Devices that are free, unknown, or held by another owner are left alone. */
size_t gpus_pool_release(gpus_pool *p, const char *const *uuids, size_t n, const char *owner);
/* Free owner's tenancy on each card of the grant; returns how many. */
size_t gpus_pool_release_grant(gpus_pool *p, const gpus_grant *g, const char *owner);
/* Free everything owner holds; returns how many devices were freed. */
size_t gpus_pool_release_owner(gpus_pool *p, const char *owner);

/* ---- what the host's cards do (the service's monitor) ---- */

/* Mark a device healthy or not (a critical XID, a card that stopped
 * answering, an admin clearing the mark). An unhealthy device takes no new
 * tenant; those it has keep it. 1 when the state changed, 0 when it already
 * was so, -1 for an unknown UUID. */
int gpus_pool_set_health(gpus_pool *p, const char *uuid, bool healthy);
/* Memory on the device that processes outside gpubox use: memory shares
 * must fit beside it (whole cards are not judged by it). -1 for an unknown
 * UUID. */
int gpus_pool_set_foreign(gpus_pool *p, const char *uuid, uint64_t memory_mib);

/* Free schedulable devices right now (no tenant, not excluded). */
size_t gpus_pool_free_count(gpus_pool *p);
size_t gpus_pool_size(gpus_pool *p);

/* ---- status, for the resources API ---- */

/* One device as the resources API shows it: {uuid, index, model, memoryMiB,
 * allocatedMemoryMiB, tenants:[...], mode, healthy, ...}; "gpus":{uuid: 0|1}
 * is (ntenants > 0). */
typedef struct gpus_device_status {
    gpu_device device;
    bool schedulable; /* healthy, not a MIG-mode card, not excluded */
    enum gpus_mode mode;
    uint64_t allocated_memory_mib; /* sum of the tenants' memory; whole: the card's */
    gpus_tenant *tenants;
    size_t ntenants;
    bool excluded;               /* excluded from scheduling by the host settings */
    bool shareable;              /* takes memory shares and time-slice replicas */
    uint64_t capacity_mib;       /* what shares may hold in all: memory x oversubscription */
    uint64_t free_memory_mib;    /* the largest memory share it takes now; 0 if none */
    uint64_t foreign_memory_mib; /* used by processes outside gpubox (gpus_pool_set_foreign) */
    unsigned replicas_total;     /* time-slice replicas it offers (0 if not shareable) */
    unsigned replicas_used;      /* time-slice tenants */
    unsigned max_tenants;        /* shares or replicas it takes; 0 = no limit */
} gpus_device_status;

typedef struct gpus_status {
    gpus_device_status *devices; /* in inventory order */
    size_t n;
} gpus_status;

/* A consistent snapshot of every device; free with gpus_status_free. */
void gpus_pool_status(gpus_pool *p, gpus_status *out);
void gpus_status_free(gpus_status *s);

/* "free" | "whole" | "memory" | "timeslice" */
const char *gpus_mode_name(enum gpus_mode mode);
/* "binpack" | "spread" -> policy; -1 when unknown (NULL or "" = binpack). */
int gpus_policy_parse(const char *s);
const char *gpus_policy_name(enum gpus_policy policy);

/* ---- a grant in the store and in the container ---- */

/* Write g into a replica-set record: "gpus" lists the UUIDs in container
 * order (whole cards: that is all, the form records have always had), and
 * for shares "gpuShares" adds [{"uuid", "memoryMiB", "mode":
 * "memory"|"timeslice", "replica" (time-slice only)}] in the same order. */
int gpus_grant_to_json(const gpus_grant *g, json_t *record, gb_err *err);
/* Read them back (both absent = no GPUs). A record with "gpus" only holds
 * whole cards. With "gpuShares", "gpus" (if present) must list the same
 * cards. One mode per grant. ERR_INVALID_PARAMS names the bad field. */
int gpus_grant_from_json(const json_t *record, gpus_grant *out, gb_err *err);

/* The environment a container with this grant needs, as "KEY=VALUE"
 * strings (free with gpus_grant_env_free):
 *   shares:  CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m for each card i (HAMi-core's
 *            form), GPUBOX_GPU_MEMORY_MIB=<MiB> (a comma list in container
 *            order when cards differ), GPUBOX_GPU_SHARE=memory|timeslice, and
 *            CUDA_DEVICE_ORDER=PCI_BUS_ID when the cards' limits differ, so
 *            CUDA's device i is the grant's card i;
 *   whole:   GPUBOX_GPU_SHARE=whole;
 *   none:    nothing. */
int gpus_grant_env(const gpus_grant *g, char ***env, size_t *n, gb_err *err);
void gpus_grant_env_free(char **env, size_t n);
/* The text of /etc/gpubox/gpu.env: the same lines, each "KEY=VALUE\n". */
int gpus_grant_env_file(const gpus_grant *g, char **text, gb_err *err);

#define GPUS_ENV_FILE_PATH "/etc/gpubox/gpu.env"

#endif
