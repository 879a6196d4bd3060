/*
 * fleet_node.h - this gpuboxd as a node of a fleet (fleet_node.c,
 * docs/fleet.md). Every function is a no-op without --node.
 */
#ifndef GPUBOX_SERVICE_FLEET_NODE_H
#define GPUBOX_SERVICE_FLEET_NODE_H

#include <jansson.h>

#include "fleet/fleet.h"
#include "service/app.h"
#include "util/err.h"

/* Move a single server's records (at the fleet prefix's root) under this
 * node; run after the node's claim, before anything reads the records. */
int fleet_node_migrate(app *a, gb_err *err);
/* Join the fleet and claim the names of this node's records. */
int fleet_node_join(app *a, gb_err *err);
/* Does this node keep a record of name (1), or not (0)? -1 on error. */
int fleet_node_holds(app *a, enum fleet_name_kind kind, const char *name, gb_err *err);
/* This node's capacity record (fleet_config.capacity). */
json_t *fleet_node_capacity(void *app);

#endif
