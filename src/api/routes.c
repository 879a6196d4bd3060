/*
 * routes.c - every route of gpubox's HTTP API, one line each. Adding an
 * endpoint is one line here plus its handler.
 *
 * Access (with --token-file, http/auth.h): a GET route needs any token,
 * any other method a user's or an admin's (the services then keep a user to
 * their own, docs/users.md); api_access lists the routes for admins alone
 * and /metrics (viewers and admins: it names everyone's use); the routes in
 * api_open_routes answer without a token, because probes and version
 * checks must reach them.
 */
#include "api/api.h"

#include "util/cleanup.h"

static const http_route api_routes[] = {
    /* system */
    {"GET", "/healthz", api_healthz, "Liveness, plus whether the store and Docker answer"},
    {"GET", "/version", api_version, "gpubox, API and Docker versions"},
    {"GET", "/openapi.json", api_openapi, "The OpenAPI document (docs/openapi.yaml) as JSON"},
    {"GET", "/openapi.yaml", api_openapi_yaml, "The OpenAPI document as written"},
    {"GET", "/metrics", api_metrics,
     "Prometheus metrics: GPUs, ports, replica sets, operations, HTTP requests, store health"},

    /* resources */
    {"GET", "/api/v1/resources/gpus", api_resources_gpus,
     "GPUs: free/held map, devices with memory and tenants, inventory source"},
    {"PATCH", "/api/v1/resources/gpus/{uuid}/healthy", api_gpu_healthy,
     "Clear a card's unhealthy mark (a critical XID, or it stopped answering)"},
    {"GET", "/api/v1/resources/ports", api_resources_ports,
     "Host port range, free count and ports in use"},
    {"GET", "/api/v1/resources/cpus", api_resources_cpus,
     "CPU cores: topology, who holds each logical CPU (cpuCount), free count"},
    {"GET", "/api/v1/events", api_events,
     "Sets stopped by their run limits, cards marked unhealthy or cleared (?limit=N)"},

    /* replica sets */
    {"POST", "/api/v1/replicaSet", api_replicaset_create,
     "Create a replica set: allocate GPUs and ports, run container <name>-1"},
    {"GET", "/api/v1/replicaSet", api_replicaset_list,
     "Replica sets with live status (?all=true includes deleted ones)"},
    {"GET", "/api/v1/replicaSet/{name}", api_replicaset_info,
     "One replica set: spec, version, container, status, GPUs, ports"},
    {"GET", "/api/v1/replicaSet/{name}/history", api_replicaset_history,
     "Every version's spec, newest first"},
    {"GET", "/api/v1/replicaSet/{name}/logs", api_replicaset_logs,
     "What the containers wrote (?tail, since, timestamps, follow streams NDJSON, versions)"},
    {"PATCH", "/api/v1/replicaSet/{name}/stop", api_replicaset_stop,
     "Stop the container and release its GPUs and ports"},
    {"PATCH", "/api/v1/replicaSet/{name}/pause", api_replicaset_pause,
     "Stop the container, keeping its GPUs and ports"},
    {"PATCH", "/api/v1/replicaSet/{name}/continue", api_replicaset_continue,
     "Start a paused replica set's container again"},
    {"POST", "/api/v1/replicaSet/{name}/execute", api_replicaset_execute,
     "Run a command in the container: stdout, stderr, exit code"},
    {"POST", "/api/v1/replicaSet/{name}/commit", api_replicaset_commit,
     "Commit the container to a new image"},
    {"DELETE", "/api/v1/replicaSet/{name}", api_replicaset_delete,
     "Remove the container and free everything (?purge=true also forgets the history)"},
    {"PATCH", "/api/v1/replicaSet/{name}", api_replicaset_patch,
     "Change GPUs, binds, env, ports or limits: a new version keeping the system disk"},
    {"PATCH", "/api/v1/replicaSet/{name}/rollback", api_replicaset_rollback,
     "A new version with version {version}'s spec, keeping the system disk"},
    {"PATCH", "/api/v1/replicaSet/{name}/restart", api_replicaset_restart,
     "Run a stopped set again: the same cards if free, else a new version on others"},

    /* operations */
    {"GET", "/api/v1/operations/{id}", api_operation,
     "An operation's kind, state and steps (patch, restart, rollback, create, stop, delete, "
     "pull)"},

    /* volumes */
    {"POST", "/api/v1/volumes", api_volume_create,
     "Create a sized volume {name, size} (\"20GB\"; KB, MB, GB, TB, decimals)"},
    {"GET", "/api/v1/volumes", api_volume_list, "Volumes with their sizes and backends"},
    {"GET", "/api/v1/volumes/{name}", api_volume_info,
     "One volume: size, bytes used, backend, version, replica sets using it"},
    {"GET", "/api/v1/volumes/{name}/history", api_volume_history,
     "Every size the volume had, newest first"},
    {"PATCH", "/api/v1/volumes/{name}/size", api_volume_resize,
     "Grow or shrink the volume to {size}, keeping its data"},
    {"DELETE", "/api/v1/volumes/{name}", api_volume_delete,
     "Delete the volume and its data (refused while a replica set uses it)"},

    /* images (docs/api.md, "Images") */
    {"GET", "/api/v1/images", api_images_list,
     "Images on the node: tags, id, size, created (?name=repo or repo:tag)"},
    {"POST", "/api/v1/images/pull", api_image_pull,
     "Pull {image} from its registry (registryAuth, wait); progress in its operation"},

    /* the fleet (docs/fleet.md) */
    {"GET", "/api/v1/nodes", api_nodes_list,
     "The fleet's nodes: state, labels, cards, free capacity, version, last heartbeat"},
    {"PATCH", "/api/v1/nodes/{name}/cordon", api_node_cordon,
     "Place no new replica sets or volumes on the node"},
    {"PATCH", "/api/v1/nodes/{name}/uncordon", api_node_uncordon, "Place on the node again"},

    /* users, quotas, accounting (docs/users.md) */
    {"GET", "/api/v1/whoami", api_whoami, "Who the token is: name, role, quota and what they hold"},
    {"GET", "/api/v1/users", api_users_list, "Every user with role, quota and what they hold"},
    {"POST", "/api/v1/users", api_users_create,
     "Create a user {name, role, quota}: the answer shows its token, this once"},
    {"GET", "/api/v1/users/{name}", api_user_get, "One user"},
    {"PATCH", "/api/v1/users/{name}", api_user_patch, "Change a user's role or quota"},
    {"DELETE", "/api/v1/users/{name}", api_user_delete,
     "Remove a user (refused while a set, deleted set not purged or volume of theirs is left)"},
    {"POST", "/api/v1/users/{name}/token", api_user_token_rotate,
     "A new token for the user; the old one stops working at once"},
    {"DELETE", "/api/v1/users/{name}/token", api_user_token_revoke,
     "Revoke the user's token at once"},
    {"GET", "/api/v1/quotas/defaults", api_quota_defaults_get, "The quota new users get"},
    {"PUT", "/api/v1/quotas/defaults", api_quota_defaults_put, "Set the quota new users get"},
    {"GET", "/api/v1/usage", api_usage,
     "Card-seconds and MiB-seconds per user and set (?user=&set=&from=&to=)"},

    /* gpu-docker-api's older route family */
    {"GET", "/api/v1/gpus", api_gpus_legacy, "GPU status map {gpuStatus:{uuid:0|1}}"},
    {"POST", "/api/v1/containers", api_container_create,
     "Create a replica set from containerName, gpuCount, binds, env, cmd, Ports"},
    {"PATCH", "/api/v1/containers/{name}/stop", api_container_stop,
     "Stop replica set {name} (foo or foo-N), releasing GPUs and ports"},
    {"DELETE", "/api/v1/containers/{name}", api_container_delete,
     "Delete replica set {name}; {delEtcdInfoAndVersionRecord:true} purges its history"},
    {"POST", "/api/v1/containers/{name}/commit", api_container_commit,
     "Commit replica set {name}'s container to a new image"},
    {"POST", "/api/v1/containers/{name}/execute", api_container_execute,
     "Run a command in replica set {name}'s container"},
    {"PATCH", "/api/v1/containers/{name}/gpu", api_container_gpu,
     "Change replica set {name}'s GPU count: a new version keeping the system disk"},
    {"PATCH", "/api/v1/containers/{name}/volume", api_container_volume,
     "Replace one of replica set {name}'s binds: a new version keeping the system disk"},
    {"PATCH", "/api/v1/containers/{name}/restart", api_container_restart,
     "Restart stopped replica set {name}"},
};

static const char *const api_open_routes[] = {"/healthz", "/version"};

/* Routes that are not the default of their method (http/router.h). */
static const struct {
    const char *method, *pattern;
    enum http_access access;
} api_access[] = {
    {"GET", "/metrics", HTTP_ACCESS_OBSERVER},
    {"PATCH", "/api/v1/nodes/{name}/cordon", HTTP_ACCESS_ADMIN},
    {"PATCH", "/api/v1/nodes/{name}/uncordon", HTTP_ACCESS_ADMIN},
    {"PATCH", "/api/v1/resources/gpus/{uuid}/healthy", HTTP_ACCESS_ADMIN},
    {"GET", "/api/v1/users", HTTP_ACCESS_ADMIN},
    {"POST", "/api/v1/users", HTTP_ACCESS_ADMIN},
    {"GET", "/api/v1/users/{name}", HTTP_ACCESS_ADMIN},
    {"PATCH", "/api/v1/users/{name}", HTTP_ACCESS_ADMIN},
    {"DELETE", "/api/v1/users/{name}", HTTP_ACCESS_ADMIN},
    {"POST", "/api/v1/users/{name}/token", HTTP_ACCESS_ADMIN},
    {"DELETE", "/api/v1/users/{name}/token", HTTP_ACCESS_ADMIN},
    {"GET", "/api/v1/quotas/defaults", HTTP_ACCESS_ADMIN},
    {"PUT", "/api/v1/quotas/defaults", HTTP_ACCESS_ADMIN},
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
    for (size_t i = 0; i < ARRAY_SIZE(api_open_routes); i++) {
        if (router_set_access(r, "GET", api_open_routes[i], HTTP_ACCESS_OPEN, err) < 0) {
            router_free(r);
            return NULL;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(api_access); i++) {
        if (router_set_access(r, api_access[i].method, api_access[i].pattern, api_access[i].access,
                              err) < 0) {
            router_free(r);
            return NULL;
        }
    }
    return r;
}
