/*
 * test_routes_table.c - every route of the API (api/routes.c) with its
 * handler, who may call it and how a fleet answers it. The table was taken
 * from the daemon while these lived in three tables (routes, api_access and
 * fleet_dispatch's scope_of, before issue 26 put them on one line per
 * route), so it pins that nothing changed. A route added, removed or
 * changed is a failure here until this table says so too, and so is a
 * line that leaves its access or fleet scope unset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "api/fleet.h"
#include "http/auth.h"
#include "util/cleanup.h"

/* Who may call a route with --token-file, as http_auth_check decides. */
enum who {
    WHO_ANYONE,    /* no token needed */
    WHO_ANY_TOKEN, /* any valid token: viewer, user or admin */
    WHO_OBSERVER,  /* a viewer's or an admin's token */
    WHO_USER,      /* a user's or an admin's token */
    WHO_ADMIN,     /* an admin's token */
};

static const struct {
    const char *method, *pattern;
    http_handler handler;
    enum who who;
    enum fleet_scope fleet;
} expected[] = {
    {"GET", "/healthz", api_healthz, WHO_ANYONE, SCOPE_LOCAL},
    {"GET", "/version", api_version, WHO_ANYONE, SCOPE_LOCAL},
    {"GET", "/openapi.json", api_openapi, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"GET", "/openapi.yaml", api_openapi_yaml, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"GET", "/metrics", api_metrics, WHO_OBSERVER, SCOPE_LOCAL},
    {"GET", "/api/v1/resources/gpus", api_resources_gpus, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"PATCH", "/api/v1/resources/gpus/{uuid}/healthy", api_gpu_healthy, WHO_ADMIN, SCOPE_LOCAL},
    {"GET", "/api/v1/resources/ports", api_resources_ports, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"GET", "/api/v1/resources/cpus", api_resources_cpus, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"GET", "/api/v1/events", api_events, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"POST", "/api/v1/replicaSet", api_replicaset_create, WHO_USER, SCOPE_RS_CREATE},
    {"GET", "/api/v1/replicaSet", api_replicaset_list, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"GET", "/api/v1/queue", api_queue_list, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"DELETE", "/api/v1/queue/{name}", api_queue_cancel, WHO_USER, SCOPE_RS_OWNER},
    {"GET", "/api/v1/replicaSet/{name}", api_replicaset_info, WHO_ANY_TOKEN, SCOPE_RS_OWNER},
    {"GET", "/api/v1/replicaSet/{name}/history", api_replicaset_history, WHO_ANY_TOKEN,
     SCOPE_RS_OWNER},
    {"GET", "/api/v1/replicaSet/{name}/logs", api_replicaset_logs, WHO_ANY_TOKEN, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}/stop", api_replicaset_stop, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}/pause", api_replicaset_pause, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}/continue", api_replicaset_continue, WHO_USER,
     SCOPE_RS_OWNER},
    {"POST", "/api/v1/replicaSet/{name}/execute", api_replicaset_execute, WHO_USER, SCOPE_RS_OWNER},
    {"GET", "/api/v1/replicaSet/{name}/terminal", api_replicaset_terminal, WHO_USER,
     SCOPE_RS_OWNER},
    {"POST", "/api/v1/replicaSet/{name}/terminal/ticket", api_replicaset_terminal_ticket, WHO_USER,
     SCOPE_RS_OWNER},
    {"POST", "/api/v1/replicaSet/{name}/commit", api_replicaset_commit, WHO_USER, SCOPE_RS_OWNER},
    {"DELETE", "/api/v1/replicaSet/{name}", api_replicaset_delete, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}", api_replicaset_patch, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}/rollback", api_replicaset_rollback, WHO_USER,
     SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/replicaSet/{name}/restart", api_replicaset_restart, WHO_USER,
     SCOPE_RS_OWNER},
    {"POST", "/api/v1/replicaSet/{name}/services/{service}/ticket", api_replicaset_service_ticket,
     WHO_USER, SCOPE_RS_OWNER},
    {"POST", "/api/v1/replicaSet/{name}/move", api_replicaset_move, WHO_USER, SCOPE_RS_OWNER},
    {"POST", "/api/v1/internal/queue/tell", api_queue_tell, WHO_USER, SCOPE_NODE},
    {"POST", "/api/v1/internal/moves", api_move_prepare, WHO_USER, SCOPE_NODE},
    {"POST", "/api/v1/internal/moves/{id}/pull", api_move_pull, WHO_USER, SCOPE_NODE},
    {"POST", "/api/v1/internal/moves/{id}/commit", api_move_commit, WHO_USER, SCOPE_NODE},
    {"POST", "/api/v1/internal/moves/{id}/abort", api_move_abort, WHO_USER, SCOPE_NODE},
    {"GET", "/api/v1/internal/moves/{id}/data", api_move_data, WHO_USER, SCOPE_NODE},
    {"GET", "/api/v1/operations/{id}", api_operation, WHO_ANY_TOKEN, SCOPE_OPERATION},
    {"POST", "/api/v1/operations/{id}/abandon", api_move_abandon, WHO_ADMIN, SCOPE_OPERATION},
    {"POST", "/api/v1/volumes", api_volume_create, WHO_USER, SCOPE_VOL_CREATE},
    {"GET", "/api/v1/volumes", api_volume_list, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"GET", "/api/v1/volumes/{name}", api_volume_info, WHO_ANY_TOKEN, SCOPE_VOL_OWNER},
    {"GET", "/api/v1/volumes/{name}/history", api_volume_history, WHO_ANY_TOKEN, SCOPE_VOL_OWNER},
    {"PATCH", "/api/v1/volumes/{name}/size", api_volume_resize, WHO_USER, SCOPE_VOL_OWNER},
    {"DELETE", "/api/v1/volumes/{name}", api_volume_delete, WHO_USER, SCOPE_VOL_OWNER},
    {"GET", "/api/v1/images", api_images_list, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"POST", "/api/v1/images/pull", api_image_pull, WHO_USER, SCOPE_LOCAL},
    {"DELETE", "/api/v1/images", api_image_delete, WHO_USER, SCOPE_LOCAL},
    {"GET", "/api/v1/nodes", api_nodes_list, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"PATCH", "/api/v1/nodes/{name}/cordon", api_node_cordon, WHO_ADMIN, SCOPE_LOCAL},
    {"PATCH", "/api/v1/nodes/{name}/uncordon", api_node_uncordon, WHO_ADMIN, SCOPE_LOCAL},
    {"GET", "/api/v1/whoami", api_whoami, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"GET", "/api/v1/users", api_users_list, WHO_ADMIN, SCOPE_LOCAL},
    {"POST", "/api/v1/users", api_users_create, WHO_ADMIN, SCOPE_LOCAL},
    {"GET", "/api/v1/users/{name}", api_user_get, WHO_ADMIN, SCOPE_LOCAL},
    {"PATCH", "/api/v1/users/{name}", api_user_patch, WHO_ADMIN, SCOPE_LOCAL},
    {"DELETE", "/api/v1/users/{name}", api_user_delete, WHO_ADMIN, SCOPE_LOCAL},
    {"POST", "/api/v1/users/{name}/token", api_user_token_rotate, WHO_ADMIN, SCOPE_LOCAL},
    {"DELETE", "/api/v1/users/{name}/token", api_user_token_revoke, WHO_ADMIN, SCOPE_LOCAL},
    {"GET", "/api/v1/quotas/defaults", api_quota_defaults_get, WHO_ADMIN, SCOPE_LOCAL},
    {"PUT", "/api/v1/quotas/defaults", api_quota_defaults_put, WHO_ADMIN, SCOPE_LOCAL},
    {"GET", "/api/v1/usage", api_usage, WHO_ANY_TOKEN, SCOPE_LOCAL},
    {"GET", "/api/v1/gpus", api_gpus_legacy, WHO_ANY_TOKEN, SCOPE_MERGE},
    {"POST", "/api/v1/containers", api_container_create, WHO_USER, SCOPE_LEGACY_CREATE},
    {"PATCH", "/api/v1/containers/{name}/stop", api_container_stop, WHO_USER, SCOPE_RS_OWNER},
    {"DELETE", "/api/v1/containers/{name}", api_container_delete, WHO_USER, SCOPE_RS_OWNER},
    {"POST", "/api/v1/containers/{name}/commit", api_container_commit, WHO_USER, SCOPE_RS_OWNER},
    {"POST", "/api/v1/containers/{name}/execute", api_container_execute, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/containers/{name}/gpu", api_container_gpu, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/containers/{name}/volume", api_container_volume, WHO_USER, SCOPE_RS_OWNER},
    {"PATCH", "/api/v1/containers/{name}/restart", api_container_restart, WHO_USER, SCOPE_RS_OWNER},
};

static enum who who_of(enum http_access access, const char *method)
{
    if (access == HTTP_ACCESS_OBSERVER)
        return WHO_OBSERVER;
    switch (http_access_required(access, method)) {
    case HTTP_ROLE_NONE:
        return WHO_ANYONE;
    case HTTP_ROLE_VIEWER:
        return WHO_ANY_TOKEN;
    case HTTP_ROLE_USER:
        return WHO_USER;
    case HTTP_ROLE_ADMIN:
        return WHO_ADMIN;
    }
    fail_msg("access %d of a %s route needs no known role", (int)access, method);
    return WHO_ANYONE;
}

static int setup(void **state)
{
    gb_err err = GB_ERR_INIT;
    http_router *r = api_router_new(&err);
    if (!r)
        fail_msg("api_router_new: %s", err.msg);
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    router_free(*state);
    return 0;
}

static size_t expected_index(const char *method, const char *pattern)
{
    for (size_t i = 0; i < ARRAY_SIZE(expected); i++)
        if (strcmp(expected[i].method, method) == 0 && strcmp(expected[i].pattern, pattern) == 0)
            return i;
    return ARRAY_SIZE(expected);
}

/* The router holds exactly the routes of the table, each once. */
static void test_every_route_is_listed(void **state)
{
    const http_router *r = *state;
    bool seen[ARRAY_SIZE(expected)] = {0};
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        size_t e = expected_index(route->method, route->pattern);
        if (e == ARRAY_SIZE(expected))
            fail_msg("route %s %s is not in this test's table: add it, with who may call it "
                     "and how a fleet answers it",
                     route->method, route->pattern);
        assert_false(seen[e]);
        seen[e] = true;
    }
    for (size_t e = 0; e < ARRAY_SIZE(expected); e++)
        if (!seen[e])
            fail_msg("route %s %s of this test's table is gone from the API", expected[e].method,
                     expected[e].pattern);
    assert_int_equal(router_count(r), ARRAY_SIZE(expected));
}

static void test_handler_access_and_fleet_scope(void **state)
{
    const http_router *r = *state;
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        size_t e = expected_index(route->method, route->pattern);
        assert_true(e < ARRAY_SIZE(expected));
        if (route->handler != expected[e].handler)
            fail_msg("%s %s: another handler", route->method, route->pattern);
        enum who who = who_of(route->access, route->method);
        if (who != expected[e].who)
            fail_msg("%s %s: who may call it is %d, expected %d", route->method, route->pattern,
                     (int)who, (int)expected[e].who);
        /* HEAD is answered by the GET route, with GET's rule */
        if (strcmp(route->method, "GET") == 0)
            assert_int_equal(who_of(route->access, "HEAD"), who);
        enum fleet_scope scope = api_fleet_scope(route);
        if (scope != expected[e].fleet)
            fail_msg("%s %s: fleet scope %d, expected %d", route->method, route->pattern,
                     (int)scope, (int)expected[e].fleet);
    }
}

/* Every line says who may call it and how a fleet answers it: a route
 * whose line leaves either out is half-registered. */
static void test_every_line_says_access_and_fleet(void **state)
{
    const http_router *r = *state;
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        if (route->access == HTTP_ACCESS_BY_METHOD)
            fail_msg("%s %s: its line does not say who may call it (.access)", route->method,
                     route->pattern);
        if (route->fleet == SCOPE_UNSET)
            fail_msg("%s %s: its line does not say how a fleet answers it (.fleet)", route->method,
                     route->pattern);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_route_is_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_access_and_fleet_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_line_says_access_and_fleet, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
