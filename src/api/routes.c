/*
 * routes.c - every route of gpubox's HTTP API, one line each. Adding an
 * endpoint is one line here plus its handler.
 *
 * Access (with --token-file, http/auth.h): a GET route needs a viewer
 * token, any other method an admin token; the routes in api_open_routes
 * answer without a token, because probes and version checks must reach
 * them.
 */
#include "api/api.h"

#include "util/cleanup.h"

static const http_route api_routes[] = {
    /* system */
    {"GET", "/healthz", api_healthz, "Liveness, plus whether the store and Docker answer"},
    {"GET", "/version", api_version, "gpubox, API and Docker versions"},
    {"GET", "/openapi.json", api_openapi, "This list of routes as an OpenAPI document"},

    /* resources */
    {"GET", "/api/v1/resources/gpus", api_resources_gpus,
     "GPUs: free/held map, devices with memory and tenants, inventory source"},
    {"GET", "/api/v1/resources/ports", api_resources_ports,
     "Host port range, free count and ports in use"},

    /* gpu-docker-api's older route family */
    {"GET", "/api/v1/gpus", api_gpus_legacy, "GPU status map {gpuStatus:{uuid:0|1}}"},
};

static const char *const api_open_routes[] = {"/healthz", "/version"};

http_router *api_router_new(gb_err *err)
{
    http_router *r = router_new();
    if (!r) {
        err_set(err, ERR_INTERNAL, "out of memory building the route table");
        return NULL;
    }
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
    return r;
}
