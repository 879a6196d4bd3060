/*
 * move.c - what a move of a replica set between nodes (replicaset/move.c)
 * asks of the fleet (its data stream is nodes_send_to_sink, in send.c): the
 * name index handed over at the move's point of no return, and a look at
 * the other node's journal when a move is settled after a crash.
 */
#include "util/xalloc.h"
#include "service/nodes/internal.h"

#include <stdio.h>
#include <stdlib.h>

int nodes_name_owner(app *a, enum nodes_kind kind, const char *name, char *node, size_t size,
                     gb_err *err)
{
    return fleet_name_owner(a->fleet, nodes_fleet_kind(kind), name, node, size, err);
}

int nodes_names_move(app *a, const enum nodes_kind *kinds, const char *const *names, size_t n,
                     const char *from, const char *to, gb_err *err)
{
    enum fleet_name_kind *fk = xcalloc(n ? n : 1, sizeof(*fk));
    for (size_t i = 0; i < n; i++)
        fk[i] = nodes_fleet_kind(kinds[i]);
    int rc = fleet_names_move(a->fleet, fk, names, n, from, to, err);
    free(fk);
    return rc;
}

struct store *nodes_peer_store(app *a, const char *node, gb_err *err)
{
    return fleet_node_store(a->fleet, node, err);
}
