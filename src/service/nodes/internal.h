/*
 * internal.h - what the files of service/nodes share and nothing outside
 * them needs: the fleet's own kinds, and where a name's record lives.
 */
#ifndef GPUBOX_SERVICE_NODES_INTERNAL_H
#define GPUBOX_SERVICE_NODES_INTERNAL_H

#include <stdbool.h>

#include "fleet/fleet.h"
#include "service/keys.h"
#include "service/nodes/nodes.h"

static inline enum fleet_name_kind nodes_fleet_kind(enum nodes_kind kind)
{
    return kind == NODES_VOLUME ? FLEET_NAME_VOLUME : FLEET_NAME_REPLICASET;
}

/* Where the owner of name keeps its record (keys.h); false for a name
 * that breaks the naming rules. */
static inline bool nodes_record_key(enum nodes_kind kind, const char *name, char *key, size_t size)
{
    return kind == NODES_VOLUME ? keys_volume(key, size, name) != NULL
                                : keys_replicaset(key, size, name) != NULL;
}

#endif
