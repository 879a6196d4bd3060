/*
 * fleet.h - the API of a fleet node (docs/fleet.md): HTTP only. The
 * server's intercept asks service/nodes where each request goes and
 * forwards it there (fleet_dispatch.c), a create's callbacks for
 * placement (fleet_create.c), the merged lists (fleet_merge.c) and
 * /api/v1/nodes (fleet_nodes.c). The decisions - owners, placement, name
 * claims - are service/nodes/nodes.h's.
 */
#ifndef GPUBOX_API_FLEET_H
#define GPUBOX_API_FLEET_H

#include <jansson.h>

#include "api/api.h"
#include "http/router.h"
#include "service/app.h"
#include "service/nodes/nodes.h"

/* How a fleet answers the route: its line's .fleet. */
enum fleet_scope api_fleet_scope(const http_route *route);

/* http_server_config.intercept. */
/* http_server_config.node_acting: a route between nodes (SCOPE_NODE)
 * asked without a token by a node of this fleet (its proof checked) is
 * that node acting itself: who is "fleet", an admin. */
bool api_node_acting(void *ctx, const http_route *route, const http_request *req,
                     http_identity *who);
int api_fleet_intercept(http_request *req, const http_route *route, http_response *resp,
                        gb_err *err);

/* A volume create body's fleet fields - node, nodeSelector, placement -
 * are checked (types, names) as a replica set's create request checks
 * them (replicaset_placement_from_json); outside a fleet their presence is an
 * error. */
int api_fleet_check_fields(http_request *req, const json_t *body, gb_err *err);

/* ---- shared by the fleet_*.c files ------------------------------------------- */

/* Which of the fleet's name indexes (sets or volumes) a route's names live in. */
enum nodes_kind api_fleet_name_kind(enum fleet_scope scope);
/* The name the request is about (path or create body), in buf; NULL when
 * there is none or it breaks the naming rules. */
const char *api_fleet_request_name(http_request *req, enum fleet_scope scope, char *buf,
                                   size_t size);
/* Run the route's handler here, then keep the name index in line. */
int api_fleet_run_here(app *a, http_request *req, const http_route *route, enum fleet_scope scope,
                       http_response *resp, gb_err *err);
/* A create made here: refused while this node is cordoned (as placement
 * would), else api_fleet_run_here. */
int api_fleet_create_here(app *a, http_request *req, const http_route *route,
                          enum fleet_scope scope, http_response *resp, gb_err *err);
/* Forward the request to node at advertise, or to node by name when
 * advertise is NULL (ERR_NODE_UNAVAILABLE when it is not alive), and
 * answer with its answer. */
int api_fleet_forward_to(app *a, const char *node, const char *advertise, http_request *req,
                         http_response *resp, gb_err *err);
/* The request's path and query, encoded again; free it. */
char *api_fleet_path_query(const http_request *req);
nodes_request api_fleet_request_of(const http_request *req, const char *path_query,
                                   long timeout_ms);
/* Answer with a node's answer, unchanged; takes its body. */
void api_fleet_pass_answer(nodes_answer *ans, http_response *resp);

int api_fleet_create(app *a, http_request *req, const http_route *route, enum fleet_scope scope,
                     http_response *resp, gb_err *err);
int api_fleet_merge(app *a, http_request *req, const http_route *route, http_response *resp,
                    gb_err *err);

#endif
