/*
 * fleet_nodes.c - GET /api/v1/nodes and PATCH /api/v1/nodes/{name}/cordon
 * and /uncordon: the fleet's nodes, their state (ready, cordoned,
 * unreachable), labels, cards, free capacity, version and last heartbeat.
 * On a single server (no --node) they answer 404: there are no nodes.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"
#include "service/nodes/nodes.h"

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
    json_t *list = NULL;
    if (nodes_list(a, &list, err) < 0)
        return -1;
    return http_response_data(resp, json_pack("{s:o}", "nodes", list), err);
}

static int node_cordon(http_request *req, http_response *resp, bool cordoned, gb_err *err)
{
    app *a = req->ctx;
    if (!a->fleet)
        return not_in_fleet(err);
    const char *name = http_request_param(req, "name");
    json_t *item = NULL;
    if (nodes_cordon(a, name, cordoned, &item, err) < 0)
        return -1;
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
