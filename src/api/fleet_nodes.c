/*
 * fleet_nodes.c - GET /api/v1/nodes and PATCH /api/v1/nodes/{name}/cordon
 * and /uncordon: the fleet's nodes, their state (ready, cordoned,
 * unreachable), labels, cards, free capacity, version and last heartbeat.
 * On a single server (no --node) they answer 404: there are no nodes.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"

#include <string.h>

static int not_in_fleet(gb_err *err)
{
    return err_set(err, ERR_NOT_FOUND,
                   "this gpuboxd is not in a fleet (started without --node); see docs/fleet.md");
}

int api_nodes_list(http_request *req, http_response *resp, gb_err *err)
{
    app *a = req->ctx;
    if (!a->fleet)
        return not_in_fleet(err);
    fleet_member *ms = NULL;
    size_t n = 0;
    if (fleet_members(a->fleet, true, &ms, &n, err) < 0)
        return -1;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, fleet_member_json(&ms[i]));
    fleet_members_free(ms, n);
    return http_response_data(resp, json_pack("{s:o}", "nodes", list), err);
}

static int node_cordon(http_request *req, http_response *resp, bool cordoned, gb_err *err)
{
    app *a = req->ctx;
    if (!a->fleet)
        return not_in_fleet(err);
    const char *name = http_request_param(req, "name");
    if (fleet_cordon(a->fleet, name, cordoned, err) < 0)
        return -1;
    fleet_member m = {0};
    int found = fleet_member_get(a->fleet, name, &m, err);
    if (found <= 0)
        return found < 0 ? -1 : err_set(err, ERR_NOT_FOUND, "no node named '%s'", name);
    json_t *item = fleet_member_json(&m);
    fleet_member_clear(&m);
    return http_response_data(resp, json_pack("{s:o}", "node", item), err);
}

int api_node_cordon(http_request *req, http_response *resp, gb_err *err)
{
    return node_cordon(req, resp, true, err);
}

int api_node_uncordon(http_request *req, http_response *resp, gb_err *err)
{
    return node_cordon(req, resp, false, err);
}
