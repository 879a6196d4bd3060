/*
 * fleet_dispatch.c - one API on every node of a fleet (docs/fleet.md): the
 * server's intercept (http_server_config.intercept) sends each request to
 * the node that answers it - which one, service/nodes decides
 * (nodes_route_name, nodes_place_create); this file does the HTTP.
 *
 *   a change or read of one name    the node that owns the name (the
 *                                   fleet's name index) answers; another
 *                                   node forwards the request to it, with
 *                                   the caller's Authorization, and passes
 *                                   its answer back unchanged
 *   a create                        placement (service/nodes) picks the
 *                                   node; the name is claimed for it in the
 *                                   fleet; the create is forwarded. A node
 *                                   that refuses for lack of room (its
 *                                   capacity record was stale) costs a try
 *                                   on the next candidate
 *   a list (sets, volumes, GPUs,    every node that is alive is asked at
 *   ports, images)                  once; the answers are merged, each item
 *                                   with its "node". The sets of an
 *                                   unreachable node are read from the
 *                                   store, with status "unknown"
 *                                   (but a followed log, a stream, is
 *                                   refused: forwarding gathers answers
 *                                   whole)
 *   a terminal (a WebSocket)        the owner, as a change: the handshake
 *                                   forwarded, then the bytes relayed
 *                                   (api/terminal.c)
 *   GET /operations/{id}            this node, else the first that knows it
 *   anything else                   this node
 *
 * A request that carries NODES_FORWARDED_HEADER came from another node and
 * is answered here alone - once NODES_AUTH_HEADER proves it (fleet_auth.h:
 * an HMAC with the fleet's secret over the method, path, body, time,
 * sending node and caller). Either header without a valid proof is refused
 * (403) before anything reads them: a client cannot skip placement by
 * posing as a node. A create answered here is refused while this node is
 * cordoned, however it came. After a create or delete answered here, the
 * name index is brought in line with this node's records: a name this node
 * does not hold (the create failed, the set was purged) is given up.
 *
 * Without --node the intercept calls the route's handler, but refuses the
 * two headers: a single server has no nodes to hear from.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"
#include "service/users/caller.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/app.h"
#include "service/nodes/nodes.h"
#include "util/cleanup.h"
#include "util/names.h"

enum fleet_scope api_fleet_scope(const http_route *route)
{
    return (enum fleet_scope)route->fleet;
}

/* ---- one name ------------------------------------------------------------------ */

/* A request whose answer is a stream (a followed log): forwarding gathers
 * an answer whole, so it is refused rather than held until the stream ends. */
static bool streams(const http_request *req, const http_route *route)
{
    const char *follow = http_request_query(req, "follow");
    return route->handler == api_replicaset_logs && follow &&
           (strcmp(follow, "true") == 0 || strcmp(follow, "1") == 0);
}

static int dispatch_owner(app *a, http_request *req, const http_route *route,
                          enum fleet_scope scope, http_response *resp, gb_err *err)
{
    char buf[NAME_MAX_LEN + 1];
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    nodes_route to;
    if (nodes_route_name(a, api_fleet_name_kind(scope), name, false, &to, err) < 0)
        return -1;
    if (to.where == NODES_FORWARD && streams(req, route))
        return err_set(err, ERR_INVALID_PARAMS,
                       "follow streams only from the node that holds the set: replica set "
                       "'%s' is on node %s; ask that node directly (the list of nodes gives its "
                       "address), or leave follow out",
                       name, to.node);
    if (to.where == NODES_FORWARD && route->handler == api_replicaset_terminal)
        return api_terminal_forward(a, to.node, req, resp, err);
    if (to.where == NODES_FORWARD)
        return api_fleet_forward_to(a, to.node, NULL, req, resp, err);
    return api_fleet_run_here(a, req, route, scope, resp, err);
}

/* GET /operations/{id}: here, else the first node that knows it. */
static int dispatch_operation(app *a, http_request *req, const http_route *route,
                              http_response *resp, gb_err *err)
{
    int rc = route->handler(req, resp, err);
    if (rc == 0 || err->code != ERR_NOT_FOUND)
        return rc;
    nodes_peer *peers = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    if (nodes_peers(a, &peers, &n, &e) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!peers[i].alive)
            continue;
        _cleanup_free_ char *pq = api_fleet_path_query(req);
        nodes_request nr = api_fleet_request_of(req, pq, 5000);
        nodes_answer ans = {0};
        if (nodes_send(a, peers[i].advertise, &nr, &ans, &e) == 0 && ans.status == 200) {
            err_clear(err);
            api_fleet_pass_answer(&ans, resp);
            nodes_answer_clear(&ans);
            free(peers);
            return 0;
        }
        nodes_answer_clear(&ans);
    }
    free(peers);
    return rc;
}

/* ---- the intercept --------------------------------------------------------------- */

/* 1: a node of this fleet sent req (answer it here alone); 0: it carries
 * neither header (a client's); -1: it carries one without a valid proof. */
static int sent_by_node(app *a, http_request *req, gb_err *err)
{
    const char *by = http_request_header(req, NODES_FORWARDED_HEADER);
    const char *proof = http_request_header(req, NODES_AUTH_HEADER);
    if (!by && !proof)
        return 0;
    if (!a->fleet)
        return err_set(err, ERR_FORBIDDEN,
                       NODES_FORWARDED_HEADER " and " NODES_AUTH_HEADER " are for requests "
                                              "between the nodes of a fleet; this gpuboxd is a "
                                              "single server (started without --node): leave "
                                              "them out");
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    nodes_request nr = api_fleet_request_of(req, pq, 0);
    if (nodes_verify(a, proof, by, &nr, err) < 0)
        return -1;
    return 1;
}

bool api_node_acting(void *ctx, const http_route *route, const http_request *req,
                     http_identity *who)
{
    app *a = ctx;
    gb_err ignored = GB_ERR_INIT;
    if (!a->fleet || api_fleet_scope(route) != SCOPE_NODE)
        return false;
    if (sent_by_node(a, (http_request *)req, &ignored) != 1)
        return false;
    snprintf(who->name, sizeof(who->name), "%s", "fleet");
    who->role = HTTP_ROLE_ADMIN;
    who->bad_token = false;
    return true;
}

static int fleet_dispatch(http_request *req, const http_route *route, http_response *resp,
                          gb_err *err)
{
    app *a = req->ctx;
    int from_node = sent_by_node(a, req, err);
    if (from_node < 0)
        return -1;
    enum fleet_scope scope = api_fleet_scope(route);
    if (scope == SCOPE_NODE && !from_node)
        return err_set(err, ERR_FORBIDDEN,
                       "%s is for the nodes of a fleet talking to each other during a move; "
                       "move a replica set with POST /api/v1/replicaSet/{name}/move",
                       req->path);
    if (!a->fleet)
        return route->handler(req, resp, err);
    bool creates =
        scope == SCOPE_RS_CREATE || scope == SCOPE_LEGACY_CREATE || scope == SCOPE_VOL_CREATE;
    if (from_node && creates)
        return api_fleet_create_here(a, req, route, scope, resp, err);
    if (from_node || scope == SCOPE_LOCAL)
        return api_fleet_run_here(a, req, route, scope, resp, err);
    switch (scope) {
    case SCOPE_RS_OWNER:
    case SCOPE_VOL_OWNER:
        return dispatch_owner(a, req, route, scope, resp, err);
    case SCOPE_RS_CREATE:
    case SCOPE_LEGACY_CREATE:
    case SCOPE_VOL_CREATE:
        return api_fleet_create(a, req, route, scope, resp, err);
    case SCOPE_MERGE:
        return api_fleet_merge(a, req, route, resp, err);
    case SCOPE_OPERATION:
        return dispatch_operation(a, req, route, resp, err);
    case SCOPE_UNSET: /* as SCOPE_LOCAL; the route table's test refuses it */
    case SCOPE_NODE:
    case SCOPE_LOCAL:
        break;
    }
    return api_fleet_run_here(a, req, route, scope, resp, err);
}

int api_fleet_intercept(http_request *req, const http_route *route, http_response *resp,
                        gb_err *err)
{
    api_caller_enter(req);
    int rc = fleet_dispatch(req, route, resp, err);
    users_caller_leave();
    return rc;
}
