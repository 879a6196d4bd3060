/*
 * router.h - maps (method, path) to a handler, with path parameters.
 *
 * A route is a method plus a pattern such as "/api/v1/replicaSet/{name}/stop":
 * literal segments must match exactly, "{name}" segments match any one
 * non-empty segment and are handed to the handler as path parameters. Several
 * routes may share a pattern with different methods; a path that matches a
 * pattern but none of its methods is a 405 (with the methods for an Allow
 * header), a path that matches no pattern is a 404. HEAD is answered by the
 * GET route of a pattern (libmicrohttpd leaves the body out).
 *
 * Layout: the router keeps its routes in one array, each pattern pre-split
 * into segments. Matching walks the array (tens of routes, so a linear scan
 * costs less than hashing the path); when a literal and a parameter pattern
 * both match ("/volumes/usage" vs "/volumes/{name}") the literal one wins.
 * A router is built once at start-up and only read afterwards, so matching
 * needs no lock.
 */
#ifndef GPUBOX_HTTP_ROUTER_H
#define GPUBOX_HTTP_ROUTER_H

#include <stddef.h>

#include "http/request.h"
#include "http/response.h"
#include "util/err.h"

#define ROUTER_MAX_SEGMENTS 16
#define ROUTER_MAX_PARAMS 8

/* A handler fills resp (http_response_data and friends) and returns 0, or
 * returns -1 with *err filled; the server then answers with the error
 * envelope. */
typedef int (*http_handler)(http_request *req, http_response *resp, gb_err *err);
struct http_route;
/* A handler that may call the route's own (http_server_config.intercept). */
typedef int (*http_handler_via)(http_request *req, const struct http_route *route,
                                http_response *resp, gb_err *err);

/* Who may call a route when tokens are configured (http/auth.h decides).
 * A route says it in its line (http_route.access); a line that leaves it
 * out gets the default of its method: reading routes (GET, HEAD) for every
 * role, everything else for users and admins. */
enum http_access {
    HTTP_ACCESS_BY_METHOD = 0, /* GET / HEAD: any valid token; any other method: user or admin */
    HTTP_ACCESS_OPEN,          /* no token needed (liveness probes, version checks) */
    HTTP_ACCESS_VIEWER,        /* any valid token */
    HTTP_ACCESS_USER,          /* a user's or an admin's token */
    HTTP_ACCESS_OBSERVER,      /* viewer or admin: reads of everyone's use (/metrics) */
    HTTP_ACCESS_ADMIN,         /* an admin token */
};

/* One route, everything about it in one line of a table (api/routes.c). */
typedef struct http_route {
    const char *method;  /* "GET", "POST", "PATCH", "PUT", "DELETE" */
    const char *pattern; /* "/api/v1/replicaSet/{name}" */
    http_handler handler;
    enum http_access access; /* who may call it */
    int fleet;               /* how a fleet answers it: the application's value (gpubox: enum
                                fleet_scope, api/api.h), handed to the intercept untouched */
    const char *summary;     /* one line for /openapi.json and docs */
} http_route;

typedef struct http_router http_router;

enum router_result { ROUTER_FOUND, ROUTER_NOT_FOUND, ROUTER_METHOD_NOT_ALLOWED };

typedef struct router_match {
    const http_route *route; /* ROUTER_FOUND only */
    http_kv params[ROUTER_MAX_PARAMS];
    size_t nparams;
    char allow[96]; /* ROUTER_METHOD_NOT_ALLOWED: "GET, PATCH" */
    char *scratch;  /* owns the strings params point into */
} router_match;

http_router *router_new(void);
void router_free(http_router *r);

/* Add a route; the route's strings must outlive the router (they are
 * normally string literals). Fails on a malformed pattern or a duplicate
 * method+pattern. */
int router_add(http_router *r, const http_route *route, gb_err *err);

/* Match a request. Parameters point into m->scratch; release with
 * router_match_free. */
enum router_result router_match_request(const http_router *r, const char *method, const char *path,
                                        router_match *m);
void router_match_free(router_match *m);

/* Every route in insertion order (for /openapi.json). */
size_t router_count(const http_router *r);
const http_route *router_route(const http_router *r, size_t i);

#endif
