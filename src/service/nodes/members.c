/*
 * members.c - the fleet's nodes as the API lists them (GET /api/v1/nodes,
 * the cordon), the other nodes a list is asked of, and the sets of a node
 * that does not answer, read from its records.
 */
#include "util/xalloc.h"
#include "service/nodes/internal.h"

#include <stdio.h>
#include <string.h>

#include "service/replicaset/replicaset.h"

int nodes_peers(app *a, nodes_peer **out, size_t *n, gb_err *err)
{
    fleet_member *ms = NULL;
    size_t nm = 0;
    *out = NULL;
    *n = 0;
    if (fleet_members(a->fleet, false, &ms, &nm, err) < 0)
        return -1;
    nodes_peer *peers = xcalloc(nm ? nm : 1, sizeof(*peers));
    for (size_t i = 0; i < nm; i++) {
        if (strcmp(ms[i].name, fleet_node(a->fleet)) == 0)
            continue;
        nodes_peer *p = &peers[(*n)++];
        snprintf(p->name, sizeof(p->name), "%s", ms[i].name);
        snprintf(p->advertise, sizeof(p->advertise), "%s", ms[i].advertise);
        p->alive = ms[i].alive;
    }
    fleet_members_free(ms, nm);
    *out = peers;
    return 0;
}

int nodes_offline_sets(app *a, const char *node, bool all, json_t **items, gb_err *err)
{
    store *s = fleet_node_store(a->fleet, node, err);
    if (!s)
        return -1;
    return replicaset_list_offline(s, all, items, err);
}

int nodes_list(app *a, json_t **nodes, gb_err *err)
{
    fleet_member *ms = NULL;
    size_t n = 0;
    if (fleet_members(a->fleet, true, &ms, &n, err) < 0)
        return -1;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, fleet_member_json(&ms[i]));
    fleet_members_free(ms, n);
    *nodes = list;
    return 0;
}

int nodes_cordon(app *a, const char *node, bool cordoned, json_t **out, gb_err *err)
{
    if (fleet_cordon(a->fleet, node, cordoned, err) < 0)
        return -1;
    fleet_member m = {0};
    int found = fleet_member_get(a->fleet, node, &m, err);
    if (found <= 0)
        return found < 0 ? -1 : err_set(err, ERR_NOT_FOUND, "no node named '%s'", node);
    *out = fleet_member_json(&m);
    fleet_member_clear(&m);
    return 0;
}
