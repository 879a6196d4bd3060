/*
 * fleet_node.h - this gpuboxd as a node of a fleet (fleet_node.c,
 * docs/fleet.md). Every function is a no-op without --node.
 */
#ifndef GPUBOX_SERVICE_FLEET_NODE_H
#define GPUBOX_SERVICE_FLEET_NODE_H

#include <stdbool.h>

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
/* 0 when this node takes new sets or volumes; -1 while it is cordoned
 * (as placement refuses it: ERR_GPU_NOT_ENOUGH "... cordoned: NODE", or
 * ERR_VOLUME_CREATE_FAILED for a volume), or on a store error. A create
 * that reaches the node by any way - a forward from a node whose view of
 * the cordon was stale, a name this node already holds - checks it here. */
int fleet_node_check_uncordoned(app *a, bool volume, gb_err *err);
/* This node's capacity record (fleet_config.capacity). */
json_t *fleet_node_capacity(void *app);

#endif
