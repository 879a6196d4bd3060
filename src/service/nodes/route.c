/*
 * route.c - where a request for a name goes in a fleet (docs/fleet.md, "One
 * API"): the fleet's name index says which node owns the name.
 *
 *   a read or change of a name   the owner; this node when it owns it or
 *                                nobody does (the handler says "not found")
 *   a create                     the owner when it is alive (it answers as
 *                                it would on its own: "exists", or a new
 *                                life for a deleted set whose history it
 *                                keeps); this node when it owns it; else
 *                                placement - the entry of a gone node is
 *                                replaced there, when another node can
 *                                take the name
 */
#include "service/nodes/internal.h"

#include <stdio.h>
#include <string.h>

int nodes_route_name(app *a, enum nodes_kind kind, const char *name, bool create, nodes_route *out,
                     gb_err *err)
{
    *out = (nodes_route){.where = NODES_HERE};
    if (!a->fleet || !name)
        return 0;
    char owner[FLEET_NODE_MAX] = "";
    int found = fleet_name_owner(a->fleet, nodes_fleet_kind(kind), name, owner, sizeof(owner), err);
    if (found < 0)
        return -1;
    bool mine = found && strcmp(owner, fleet_node(a->fleet)) == 0;
    if (!create) {
        if (found && !mine) {
            out->where = NODES_FORWARD;
            snprintf(out->node, sizeof(out->node), "%s", owner);
        }
        return 0;
    }
    if (mine)
        return 0;
    out->where = NODES_PLACE;
    if (!found)
        return 0;
    /* the owner answers; a stale entry of a gone node is replaced by placement */
    snprintf(out->node, sizeof(out->node), "%s", owner);
    gb_err gone = GB_ERR_INIT;
    int alive = fleet_member_reach(a->fleet, owner, out->advertise, sizeof(out->advertise), &gone);
    if (alive == 1) {
        out->where = NODES_FORWARD;
        return 0;
    }
    out->advertise[0] = '\0';
    if (alive < 0 && gone.code != ERR_NODE_UNAVAILABLE)
        return *err = gone, -1;
    return 0;
}

int nodes_proxy_of(app *a, const char *set, char *addr, size_t size, gb_err *err)
{
    nodes_route route;
    if (nodes_route_name(a, NODES_REPLICASET, set, false, &route, err) < 0)
        return -1;
    if (route.where != NODES_FORWARD)
        return 0;
    fleet_member m = {0};
    int found = fleet_member_get(a->fleet, route.node, &m, err);
    if (found < 0)
        return -1;
    const char *proxy =
        found && m.alive ? json_string_value(json_object_get(m.capacity, "proxy")) : NULL;
    int rc = proxy && *proxy && strlen(proxy) < size ? 1 : -1;
    if (rc == 1)
        snprintf(addr, size, "%s", proxy);
    else
        err_set(err, ERR_NODE_UNAVAILABLE, "node %s, which runs %s, %s", route.node, set,
                found && m.alive ? "runs no service proxy" : "is unreachable");
    fleet_member_clear(&m);
    return rc;
}
