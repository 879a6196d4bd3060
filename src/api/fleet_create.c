/*
 * fleet_create.c - a create sent to any node of a fleet (docs/fleet.md,
 * "Placement"), the HTTP side: the body is parsed once, by the parser
 * every create path uses (service/replicaset/request.h); service/nodes
 * says where it goes (nodes_route_name: the owner of the name, or
 * placement) and places it (nodes_place_create: ranking, the name claim,
 * the next candidate after a refusal, the claim released after a failed
 * create). This file only supplies the callbacks that make the create:
 * run it here, or forward it with the caller's identity and hold the
 * answer until placement says to pass it back.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/queue/queue.h"
#include "service/replicaset/request.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"

/* A volume create's `node` (and the others, refused there by its route):
 * the same checks as a replica set's (service/replicaset/request.h). */
int api_fleet_check_fields(http_request *req, const json_t *body, gb_err *err)
{
    app *a = req->ctx;
    replicaset_placement p;
    return replicaset_placement_from_json(body, a->fleet != NULL, &p, err);
}

/* ---- the callbacks placement makes the create through ------------------------------ */

typedef struct create_call {
    app *a;
    http_request *req;
    const http_route *route;
    enum fleet_scope scope;
    http_response *resp;
    nodes_answer held; /* the last forward's answer, until passed or dropped */
} create_call;

static int create_here(void *ctx, gb_err *err)
{
    create_call *c = ctx;
    return api_fleet_create_here(c->a, c->req, c->route, c->scope, c->resp, err);
}

static int create_forward(void *ctx, const char *node, const char *advertise, gb_err *answer,
                          gb_err *err)
{
    (void)node;
    create_call *c = ctx;
    nodes_answer_clear(&c->held);
    _cleanup_free_ char *pq = api_fleet_path_query(c->req);
    nodes_request nr = api_fleet_request_of(c->req, pq, 0);
    if (nodes_send(c->a, advertise, &nr, &c->held, err) < 0)
        return -1;
    _cleanup_json_ json_t *env =
        json_loadb(c->held.body ? c->held.body : "", c->held.body_len, 0, NULL);
    answer->code = (int)json_integer_value(json_object_get(env, "code"));
    const char *msg = json_string_value(json_object_get(env, "msg"));
    snprintf(answer->msg, sizeof(answer->msg), "%s", msg ? msg : "");
    return 0;
}

static void create_pass(void *ctx)
{
    create_call *c = ctx;
    api_fleet_pass_answer(&c->held, c->resp);
    nodes_answer_clear(&c->held);
}

/* ---- the create ----------------------------------------------------------------- */

int api_fleet_create(app *a, http_request *req, const http_route *route, enum fleet_scope scope,
                     http_response *resp, gb_err *err)
{
    char buf[NAME_MAX_LEN + 1];
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    json_t *body = NULL;
    gb_err ignored = GB_ERR_INIT;
    if (!name || req_json_body(req, &body, &ignored) < 0)
        return api_fleet_run_here(a, req, route, scope, resp, err); /* it says what is wrong */
    bool vol = scope == SCOPE_VOL_CREATE;
    /* A replica set's body is parsed once, by the parser every create
     * path uses: a body it refuses is refused here with its answer. */
    _cleanup_(replicaset_create_request_free) replicaset_create_request cr = {0};
    if (vol ? api_fleet_check_fields(req, body, err) < 0
            : replicaset_create_request_parse(
                  body, scope == SCOPE_LEGACY_CREATE ? RS_CREATE_CONTAINERS : RS_CREATE_REPLICASET,
                  true, &cr, err) < 0)
        return -1;
    enum nodes_kind kind = api_fleet_name_kind(scope);
    nodes_route to;
    if (nodes_route_name(a, kind, name, true, &to, err) < 0)
        return -1;
    if (to.where == NODES_HERE)
        return api_fleet_create_here(a, req, route, scope, resp, err);
    if (to.where == NODES_FORWARD)
        return api_fleet_forward_to(a, to.node, to.advertise, req, resp, err);
    nodes_place p = {
        .kind = kind,
        .name = name,
        .set = vol ? NULL : &cr,
        .volume_node = vol ? json_string_value(json_object_get(body, "node")) : NULL,
        .volume_size = vol ? json_string_value(json_object_get(body, "size")) : NULL,
        .gone_owner = to.node,
    };
    create_call c = {.a = a, .req = req, .route = route, .scope = scope, .resp = resp};
    nodes_create_calls calls = {
        .ctx = &c, .here = create_here, .forward = create_forward, .pass = create_pass};
    int rc = nodes_place_create(a, &p, &calls, err);
    nodes_answer_clear(&c.held);
    if (rc < 0 && !vol && cr.queue && queue_may_wait_here(a, &cr, err)) {
        /* No node can take it now: it waits in the fleet's queue, its
         * record on this node, and the fleet's dispatcher starts it on
         * any node where it fits (docs/queue.md, "In a fleet"). */
        err_clear(err);
        return api_fleet_run_here(a, req, route, scope, resp, err);
    }
    return rc;
}
