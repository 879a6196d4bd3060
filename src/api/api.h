/*
 * api.h - gpubox's HTTP API: the route table (routes.c) and the handlers.
 *
 * A handler parses and validates the request, calls ONE service function
 * (service/service.h) with the app from req->ctx, and turns the result into
 * a response. Nothing else: no store, Docker or pool calls here.
 */
#ifndef GPUBOX_API_API_H
#define GPUBOX_API_API_H

#include <stdbool.h>
#include <stdint.h>

#include "http/auth.h"
#include "http/router.h"

/* How a fleet answers a route (http_route.fleet; the intercept in
 * fleet_dispatch.c acts on it, docs/fleet.md). Every line of routes.c says
 * one; 0 is a line that forgot, answered as SCOPE_LOCAL, and fails
 * tests/unit/test_routes_table.c. */
enum fleet_scope {
    SCOPE_UNSET = 0,
    SCOPE_LOCAL,         /* this node answers, whichever it is */
    SCOPE_RS_OWNER,      /* the node that owns replica set {name} (a legacy "foo-3" is foo) */
    SCOPE_VOL_OWNER,     /* the node that owns volume {name} */
    SCOPE_RS_CREATE,     /* placed; the set is named by the body's replicaSetName */
    SCOPE_LEGACY_CREATE, /* placed; the set is named by the body's containerName */
    SCOPE_VOL_CREATE,    /* placed; the volume is named by the body's name */
    SCOPE_MERGE,         /* every live node is asked, the lists merged (fleet_merge.c) */
    SCOPE_OPERATION,     /* this node, else the first node that knows the operation */
    SCOPE_NODE,          /* between nodes only: this node, for a request with the fleet's
                            proof (a move's conversation); refused (403) to anyone else */
};

/* A router holding every route of routes.c. */
http_router *api_router_new(gb_err *err);

/* system.c */
int api_healthz(http_request *req, http_response *resp, gb_err *err);
int api_version(http_request *req, http_response *resp, gb_err *err);
int api_openapi(http_request *req, http_response *resp, gb_err *err);
int api_openapi_yaml(http_request *req, http_response *resp, gb_err *err);
int api_metrics(http_request *req, http_response *resp, gb_err *err);

/* resources.c */
int api_resources_gpus(http_request *req, http_response *resp, gb_err *err);
int api_gpu_healthy(http_request *req, http_response *resp, gb_err *err);
int api_events(http_request *req, http_response *resp, gb_err *err);
int api_resources_ports(http_request *req, http_response *resp, gb_err *err);
int api_resources_cpus(http_request *req, http_response *resp, gb_err *err);
int api_gpus_legacy(http_request *req, http_response *resp, gb_err *err);

/* replicasets.c: /api/v1/replicaSet... */
int api_replicaset_create(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_list(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_info(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_history(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_stop(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_pause(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_continue(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_execute(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_commit(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_delete(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_patch(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_rollback(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_restart(http_request *req, http_response *resp, gb_err *err);
/* terminal.c: the terminal WebSocket and its ticket (docs/access.md). */
int api_replicaset_terminal(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_terminal_ticket(http_request *req, http_response *resp, gb_err *err);
/* A fleet: the terminal of a set on node, forwarded with its upgrade. */
struct app;
int api_terminal_forward(struct app *a, const char *node, http_request *req, http_response *resp,
                         gb_err *err);
/* http_server_config.ticket: a terminal's ticket stands for its caller. */
bool api_ticket_check(void *ctx, const http_route *route, const http_request *req,
                      const char *ticket, http_identity *who);
/* GET /api/v1/queue (api/queue.c). */
int api_queue_list(http_request *req, http_response *resp, gb_err *err);
int api_queue_cancel(http_request *req, http_response *resp, gb_err *err);
int api_queue_tell(http_request *req, http_response *resp, gb_err *err);
int api_replicaset_service_ticket(http_request *req, http_response *resp, gb_err *err);
/* moves.c: a move to another node, and the nodes' side of it. */
int api_replicaset_move(http_request *req, http_response *resp, gb_err *err);
int api_move_prepare(http_request *req, http_response *resp, gb_err *err);
int api_move_pull(http_request *req, http_response *resp, gb_err *err);
int api_move_commit(http_request *req, http_response *resp, gb_err *err);
int api_move_abort(http_request *req, http_response *resp, gb_err *err);
int api_move_data(http_request *req, http_response *resp, gb_err *err);
int api_move_abandon(http_request *req, http_response *resp, gb_err *err);
/* logs.c: GET /api/v1/replicaSet/{name}/logs (docs/api.md, "Logs"). */
int api_replicaset_logs(http_request *req, http_response *resp, gb_err *err);
/* The query of a logs request, read at time now (unix seconds): tail,
 * since, timestamps, follow, versions; ERR_INVALID_PARAMS naming a bad one. */
struct replicaset_logs_request;
int api_logs_query(const http_request *req, int64_t now, struct replicaset_logs_request *rq,
                   bool *timestamps, gb_err *err);
/* since as an RFC 3339 time, a duration back from now or unix seconds. */
int api_logs_since(const char *v, int64_t now, int64_t *out, gb_err *err);
/* GET /api/v1/operations/{id} */
int api_operation(http_request *req, http_response *resp, gb_err *err);
/* The bodies both route families share: a create body, parsed once into
 * a create request (service/replicaset/request.h; older: the /containers
 * family's field names), and the execute and commit bodies for set `name`. */
int api_replicaset_create_from(http_request *req, const json_t *body, bool older,
                               http_response *resp, gb_err *err);
int api_execute_from(http_request *req, const char *name, const json_t *body, http_response *resp,
                     gb_err *err);
int api_commit_from(http_request *req, const char *name, const json_t *body, http_response *resp,
                    gb_err *err);
/* A parsed patch (replicaset_patch_request_parse) of set `name`; "nothing
 * changed" says so in msg. */
struct replicaset_patch_request;
int api_patch_from(http_request *req, const char *name,
                   const struct replicaset_patch_request *patch, http_response *resp, gb_err *err);

/* fleet_nodes.c: /api/v1/nodes... (404 on a single server) */
int api_nodes_list(http_request *req, http_response *resp, gb_err *err);

/* users (users.c, docs/users.md) */
int api_whoami(http_request *req, http_response *resp, gb_err *err);
int api_users_list(http_request *req, http_response *resp, gb_err *err);
int api_users_create(http_request *req, http_response *resp, gb_err *err);
int api_user_get(http_request *req, http_response *resp, gb_err *err);
int api_user_patch(http_request *req, http_response *resp, gb_err *err);
int api_user_delete(http_request *req, http_response *resp, gb_err *err);
int api_user_token_rotate(http_request *req, http_response *resp, gb_err *err);
int api_user_token_revoke(http_request *req, http_response *resp, gb_err *err);
int api_quota_defaults_get(http_request *req, http_response *resp, gb_err *err);
int api_quota_defaults_put(http_request *req, http_response *resp, gb_err *err);
int api_usage(http_request *req, http_response *resp, gb_err *err);
/* The service role (enum users_role) of an HTTP role. */
int api_user_role(enum http_role role);
/* http/auth.h's directory over the users of app ctx. */
enum http_role api_users_directory(void *ctx, const char *token, size_t len, char *name,
                                   size_t name_size);
/* The request's caller is this thread's (service/users/caller.h) until
 * users_caller_leave. */
void api_caller_enter(const http_request *req);
int api_node_cordon(http_request *req, http_response *resp, gb_err *err);
int api_node_uncordon(http_request *req, http_response *resp, gb_err *err);

/* legacy.c: gpu-docker-api's /api/v1/containers... */
int api_container_create(http_request *req, http_response *resp, gb_err *err);
int api_container_stop(http_request *req, http_response *resp, gb_err *err);
int api_container_delete(http_request *req, http_response *resp, gb_err *err);
int api_container_commit(http_request *req, http_response *resp, gb_err *err);
int api_container_execute(http_request *req, http_response *resp, gb_err *err);
int api_container_gpu(http_request *req, http_response *resp, gb_err *err);
int api_container_volume(http_request *req, http_response *resp, gb_err *err);
int api_container_restart(http_request *req, http_response *resp, gb_err *err);

/* input.c: checks every handler shares. */
/* Every field of obj is in allowed (NULL-terminated), else ERR_INVALID_PARAMS
 * naming the field and the fields allowed. */
int api_check_fields(const json_t *obj, const char *const *allowed, gb_err *err);
/* The body as an object whose fields are all in allowed (borrowed from req;
 * allowed NULL: a parser that knows the fields checks them). Not required: an empty or blank body
 * gives *out NULL and 0. */
int api_body(http_request *req, const char *const *allowed, bool required, json_t **out,
             gb_err *err);
/* ?name=true|1|false|0; absent is false; anything else ERR_INVALID_PARAMS. */
int api_query_flag(const http_request *req, const char *name, bool *out, gb_err *err);
/* The {name} path parameter, checked as a replica-set name (util/names.h). */
int api_path_name(const http_request *req, const char **out, gb_err *err);

/* images.c: /api/v1/images... */
int api_images_list(http_request *req, http_response *resp, gb_err *err);
int api_image_pull(http_request *req, http_response *resp, gb_err *err);
int api_image_delete(http_request *req, http_response *resp, gb_err *err);

/* volumes.c */
int api_volume_create(http_request *req, http_response *resp, gb_err *err);
int api_volume_list(http_request *req, http_response *resp, gb_err *err);
int api_volume_info(http_request *req, http_response *resp, gb_err *err);
int api_volume_history(http_request *req, http_response *resp, gb_err *err);
int api_volume_resize(http_request *req, http_response *resp, gb_err *err);
int api_volume_delete(http_request *req, http_response *resp, gb_err *err);

#endif
