/*
 * routes.c - every route of gpubox's HTTP API, one line each, saying all
 * there is to know about it. Adding an endpoint is one line here plus its
 * handler (and its operation in docs/openapi.yaml):
 *
 *   {method, pattern, handler, who may call it, how a fleet answers it, summary}
 *
 * Who may call it (http/router.h enum http_access; http/auth.c decides,
 * with --token-file):
 *   HTTP_ACCESS_OPEN      no token: probes and version checks must reach it
 *   HTTP_ACCESS_VIEWER    any valid token (the reading routes)
 *   HTTP_ACCESS_USER      a user's or an admin's token (the changes; the
 *                         services then keep a user to their own,
 *                         docs/users.md)
 *   HTTP_ACCESS_OBSERVER  a viewer's or an admin's (/metrics names
 *                         everyone's use)
 *   HTTP_ACCESS_ADMIN     an admin's token
 * How a fleet answers it (api/api.h enum fleet_scope; fleet_dispatch.c):
 *   SCOPE_LOCAL           the node asked
 *   SCOPE_RS_OWNER        the node that owns replica set {name}
 *   SCOPE_VOL_OWNER       the node that owns volume {name}
 *   SCOPE_RS_CREATE, SCOPE_LEGACY_CREATE, SCOPE_VOL_CREATE
 *                         placed on a node, the name claimed for it
 *   SCOPE_MERGE           every live node, the lists merged
 *   SCOPE_OPERATION       this node, else the first that knows it
 *   SCOPE_NODE            this node, for another node of the fleet only
 * A line must say both: tests/unit/test_routes_table.c lists every route
 * with them and refuses one left unset (0), so a route cannot be
 * half-registered.
 */
#include "api/api.h"

#include "util/cleanup.h"

static const http_route api_routes[] = {
    /* system */
    {"GET", "/healthz", api_healthz, HTTP_ACCESS_OPEN, SCOPE_LOCAL,
     "Liveness, plus whether the store and Docker answer"},
    {"GET", "/version", api_version, HTTP_ACCESS_OPEN, SCOPE_LOCAL,
     "gpubox, API and Docker versions"},
    {"GET", "/openapi.json", api_openapi, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "The OpenAPI document (docs/openapi.yaml) as JSON"},
    {"GET", "/openapi.yaml", api_openapi_yaml, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "The OpenAPI document as written"},
    {"GET", "/metrics", api_metrics, HTTP_ACCESS_OBSERVER, SCOPE_LOCAL,
     "Prometheus metrics: GPUs, ports, replica sets, operations, HTTP requests, store health"},

    /* resources */
    {"GET", "/api/v1/resources/gpus", api_resources_gpus, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "GPUs: free/held map, devices with memory and tenants, inventory source"},
    {"PATCH", "/api/v1/resources/gpus/{uuid}/healthy", api_gpu_healthy, HTTP_ACCESS_ADMIN,
     SCOPE_LOCAL, "Clear a card's unhealthy mark (a critical XID, or it stopped answering)"},
    {"GET", "/api/v1/resources/ports", api_resources_ports, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "Host port range, free count and ports in use"},
    {"GET", "/api/v1/resources/cpus", api_resources_cpus, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "CPU cores: topology, who holds each logical CPU (cpuCount), free count"},
    {"GET", "/api/v1/events", api_events, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "Sets stopped by their run limits, cards marked unhealthy or cleared (?limit=N)"},

    /* replica sets */
    {"POST", "/api/v1/replicaSet", api_replicaset_create, HTTP_ACCESS_USER, SCOPE_RS_CREATE,
     "Create a replica set: allocate GPUs and ports, run container <name>-1"},
    {"GET", "/api/v1/replicaSet", api_replicaset_list, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "Replica sets with live status (?all=true includes deleted ones)"},
    {"GET", "/api/v1/queue", api_queue_list, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "Queued replica sets in serving order: position, priority, fair share, why each waits"},
    {"DELETE", "/api/v1/queue/{name}", api_queue_cancel, HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "Take a replica set out of the queue: a queued create is cancelled, a waiting move ends"},
    {"GET", "/api/v1/replicaSet/{name}", api_replicaset_info, HTTP_ACCESS_VIEWER, SCOPE_RS_OWNER,
     "One replica set: spec, version, container, status, GPUs, ports"},
    {"GET", "/api/v1/replicaSet/{name}/history", api_replicaset_history, HTTP_ACCESS_VIEWER,
     SCOPE_RS_OWNER, "Every version's spec, newest first"},
    {"GET", "/api/v1/replicaSet/{name}/logs", api_replicaset_logs, HTTP_ACCESS_VIEWER,
     SCOPE_RS_OWNER,
     "What the containers wrote (?tail, since, timestamps, follow streams NDJSON, versions)"},
    {"PATCH", "/api/v1/replicaSet/{name}/stop", api_replicaset_stop, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Stop the container and release its GPUs and ports"},
    {"PATCH", "/api/v1/replicaSet/{name}/pause", api_replicaset_pause, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Stop the container, keeping its GPUs and ports"},
    {"PATCH", "/api/v1/replicaSet/{name}/continue", api_replicaset_continue, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Start a paused replica set's container again"},
    {"POST", "/api/v1/replicaSet/{name}/execute", api_replicaset_execute, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Run a command in the container: stdout, stderr, exit code"},
    {"GET", "/api/v1/replicaSet/{name}/terminal", api_replicaset_terminal, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER,
     "A terminal: a WebSocket to a process in the container with a TTY (?cmd, cols, rows, tty, "
     "ticket)"},
    {"POST", "/api/v1/replicaSet/{name}/terminal/ticket", api_replicaset_terminal_ticket,
     HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "A single-use ticket (30 s) that opens the terminal without the Authorization header"},
    {"POST", "/api/v1/replicaSet/{name}/commit", api_replicaset_commit, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Commit the container to a new image"},
    {"DELETE", "/api/v1/replicaSet/{name}", api_replicaset_delete, HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "Remove the container and free everything (?purge=true also forgets the history)"},
    {"PATCH", "/api/v1/replicaSet/{name}", api_replicaset_patch, HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "Change GPUs, binds, env, ports or limits: a new version keeping the system disk"},
    {"PATCH", "/api/v1/replicaSet/{name}/rollback", api_replicaset_rollback, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "A new version with version {version}'s spec, keeping the system disk"},
    {"PATCH", "/api/v1/replicaSet/{name}/restart", api_replicaset_restart, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER,
     "Run a stopped set again: the same cards if free, else a new version on others"},
    {"POST", "/api/v1/replicaSet/{name}/services/{service}/ticket", api_replicaset_service_ticket,
     HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "A single-use ticket (30 s) and the URL that opens the service in a browser"},
    {"POST", "/api/v1/replicaSet/{name}/move", api_replicaset_move, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER,
     "Move the set to another node {node?}: system disk and volumes, a new version there"},

    /* between the nodes of a move (docs/fleet.md): only with the fleet's proof */
    {"POST", "/api/v1/internal/queue/tell", api_queue_tell, HTTP_ACCESS_USER, SCOPE_NODE,
     "Another node tells this one's queue what changed: room freed there, a request assigned"},
    {"POST", "/api/v1/internal/moves", api_move_prepare, HTTP_ACCESS_USER, SCOPE_NODE,
     "A move's target: take the room, make the volumes and the container"},
    {"POST", "/api/v1/internal/moves/{id}/pull", api_move_pull, HTTP_ACCESS_USER, SCOPE_NODE,
     "A move's target: pull the data from the source into the container"},
    {"POST", "/api/v1/internal/moves/{id}/commit", api_move_commit, HTTP_ACCESS_USER, SCOPE_NODE,
     "A move's target: write the records and start the set"},
    {"POST", "/api/v1/internal/moves/{id}/abort", api_move_abort, HTTP_ACCESS_USER, SCOPE_NODE,
     "A move's target: give up its half of the move"},
    {"GET", "/api/v1/internal/moves/{id}/data", api_move_data, HTTP_ACCESS_USER, SCOPE_NODE,
     "A move's source: the system disk and volumes as one tar stream"},

    /* operations */
    {"GET", "/api/v1/operations/{id}", api_operation, HTTP_ACCESS_VIEWER, SCOPE_OPERATION,
     "An operation's kind, state and steps (patch, restart, rollback, create, stop, delete, "
     "pull)"},
    {"POST", "/api/v1/operations/{id}/abandon", api_move_abandon, HTTP_ACCESS_ADMIN,
     SCOPE_OPERATION, "Give up a move's half on the node it was going to (its source is lost)"},

    /* volumes */
    {"POST", "/api/v1/volumes", api_volume_create, HTTP_ACCESS_USER, SCOPE_VOL_CREATE,
     "Create a sized volume {name, size} (\"20GB\"; KB, MB, GB, TB, decimals)"},
    {"GET", "/api/v1/volumes", api_volume_list, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "Volumes with their sizes and backends"},
    {"GET", "/api/v1/volumes/{name}", api_volume_info, HTTP_ACCESS_VIEWER, SCOPE_VOL_OWNER,
     "One volume: size, bytes used, backend, version, replica sets using it"},
    {"GET", "/api/v1/volumes/{name}/history", api_volume_history, HTTP_ACCESS_VIEWER,
     SCOPE_VOL_OWNER, "Every size the volume had, newest first"},
    {"PATCH", "/api/v1/volumes/{name}/size", api_volume_resize, HTTP_ACCESS_USER, SCOPE_VOL_OWNER,
     "Grow or shrink the volume to {size}, keeping its data"},
    {"DELETE", "/api/v1/volumes/{name}", api_volume_delete, HTTP_ACCESS_USER, SCOPE_VOL_OWNER,
     "Delete the volume and its data (refused while a replica set uses it)"},

    /* images (docs/api.md, "Images") */
    {"GET", "/api/v1/images", api_images_list, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "Images on the node: tags, id, size, created (?name=repo or repo:tag)"},
    {"POST", "/api/v1/images/pull", api_image_pull, HTTP_ACCESS_USER, SCOPE_LOCAL,
     "Pull {image} from its registry (registryAuth, wait); progress in its operation"},
    {"DELETE", "/api/v1/images", api_image_delete, HTTP_ACCESS_USER, SCOPE_LOCAL,
     "Remove image name ?name=repo:tag (the image too when it was its last name)"},

    /* the fleet (docs/fleet.md) */
    {"GET", "/api/v1/nodes", api_nodes_list, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "The fleet's nodes: state, labels, cards, free capacity, version, last heartbeat"},
    {"PATCH", "/api/v1/nodes/{name}/cordon", api_node_cordon, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Place no new replica sets or volumes on the node"},
    {"PATCH", "/api/v1/nodes/{name}/uncordon", api_node_uncordon, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Place on the node again"},

    /* users, quotas, accounting (docs/users.md) */
    {"GET", "/api/v1/whoami", api_whoami, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "Who the token is: name, role, quota and what they hold"},
    {"GET", "/api/v1/users", api_users_list, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Every user with role, quota and what they hold"},
    {"POST", "/api/v1/users", api_users_create, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Create a user {name, role, quota}: the answer shows its token, this once"},
    {"GET", "/api/v1/users/{name}", api_user_get, HTTP_ACCESS_ADMIN, SCOPE_LOCAL, "One user"},
    {"PATCH", "/api/v1/users/{name}", api_user_patch, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Change a user's role or quota"},
    {"DELETE", "/api/v1/users/{name}", api_user_delete, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Remove a user (refused while a set, deleted set not purged or volume of theirs is left)"},
    {"POST", "/api/v1/users/{name}/token", api_user_token_rotate, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "A new token for the user; the old one stops working at once"},
    {"DELETE", "/api/v1/users/{name}/token", api_user_token_revoke, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Revoke the user's token at once"},
    {"GET", "/api/v1/quotas/defaults", api_quota_defaults_get, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "The quota new users get"},
    {"PUT", "/api/v1/quotas/defaults", api_quota_defaults_put, HTTP_ACCESS_ADMIN, SCOPE_LOCAL,
     "Set the quota new users get"},
    {"GET", "/api/v1/usage", api_usage, HTTP_ACCESS_VIEWER, SCOPE_LOCAL,
     "Card-seconds and MiB-seconds per user and set (?user=&set=&from=&to=)"},

    /* gpu-docker-api's older route family */
    {"GET", "/api/v1/gpus", api_gpus_legacy, HTTP_ACCESS_VIEWER, SCOPE_MERGE,
     "GPU status map {gpuStatus:{uuid:0|1}}"},
    {"POST", "/api/v1/containers", api_container_create, HTTP_ACCESS_USER, SCOPE_LEGACY_CREATE,
     "Create a replica set from containerName, gpuCount, binds, env, cmd, Ports"},
    {"PATCH", "/api/v1/containers/{name}/stop", api_container_stop, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Stop replica set {name} (foo or foo-N), releasing GPUs and ports"},
    {"DELETE", "/api/v1/containers/{name}", api_container_delete, HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "Delete replica set {name}; {delEtcdInfoAndVersionRecord:true} purges its history"},
    {"POST", "/api/v1/containers/{name}/commit", api_container_commit, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Commit replica set {name}'s container to a new image"},
    {"POST", "/api/v1/containers/{name}/execute", api_container_execute, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Run a command in replica set {name}'s container"},
    {"PATCH", "/api/v1/containers/{name}/gpu", api_container_gpu, HTTP_ACCESS_USER, SCOPE_RS_OWNER,
     "Change replica set {name}'s GPU count: a new version keeping the system disk"},
    {"PATCH", "/api/v1/containers/{name}/volume", api_container_volume, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER,
     "Replace one of replica set {name}'s binds: a new version keeping the system disk"},
    {"PATCH", "/api/v1/containers/{name}/restart", api_container_restart, HTTP_ACCESS_USER,
     SCOPE_RS_OWNER, "Restart stopped replica set {name}"},
};

http_router *api_router_new(gb_err *err)
{
    http_router *r = router_new();
    for (size_t i = 0; i < ARRAY_SIZE(api_routes); i++) {
        if (router_add(r, &api_routes[i], err) < 0) {
            router_free(r);
            return NULL;
        }
    }
    return r;
}
