/*
 * placement_internal.h - what the files of the placement decision share
 * (placement.c: filters, fit and score; placement_why.c: the refusal's
 * message). Nothing outside src/sched/placement*.c includes it.
 *
 * The card predicates are the fit rules of placement.h, one per kind of
 * tenant; the message uses them to describe what a node has free, so what
 * it calls free is exactly what would have fit.
 */
#ifndef GPUBOX_SCHED_PLACEMENT_INTERNAL_H
#define GPUBOX_SCHED_PLACEMENT_INTERNAL_H

#include "sched/placement.h"

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
    PLACEMENT_UNREACHABLE,
    PLACEMENT_UNREADABLE,
    PLACEMENT_CORDONED,
    PLACEMENT_NO_GPUS,
    PLACEMENT_NO_PORTS,
    PLACEMENT_NO_VOLUME_SPACE,
    PLACEMENT_NDROPS,
};

static inline const char *placement_name(const placement_node *nd)
{
    return nd->name ? nd->name : "";
}

static inline bool placement_usable(const placement_card *c)
{
    return c->healthy && !c->excluded && c->schedulable;
}

static inline bool placement_tenant_slot(const placement_card *c)
{
    return !c->max_tenants || c->tenants < c->max_tenants;
}

static inline bool placement_takes_whole(const placement_card *c)
{
    return placement_usable(c) && c->mode == GPUS_MODE_FREE && c->tenants == 0;
}

/* The largest memory share the card takes now; 0 = none. */
static inline uint64_t placement_share_room(const placement_card *c)
{
    bool takes = placement_usable(c) && c->shareable &&
                 (c->mode == GPUS_MODE_FREE || c->mode == GPUS_MODE_MEMORY) &&
                 placement_tenant_slot(c);
    return takes ? c->free_memory_mib : 0;
}

static inline bool placement_takes_replica(const placement_card *c)
{
    return placement_usable(c) && c->shareable &&
           (c->mode == GPUS_MODE_FREE || c->mode == GPUS_MODE_TIMESLICE) &&
           c->replicas_used < c->replicas_total && placement_tenant_slot(c);
}

/* Fill *why with the refusal: its code and a message naming the nodes
 * each reason dropped (drops[i] is node i's) and the largest free spots;
 * -1. */
int placement_refuse(const placement_node *nodes, size_t n, const placement_request *req,
                     const struct placement_want *w, const unsigned char *drops, gb_err *why);

#endif
