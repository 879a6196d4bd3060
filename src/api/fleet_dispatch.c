/*
 * fleet_dispatch.c - one API on every node of a fleet (docs/fleet.md): the
 * server's intercept (http_server_config.intercept) decides, for each
 * request, which node answers it.
 *
 *   a change or read of one name    the node that owns the name (the
 *                                   fleet's name index) answers; another
 *                                   node forwards the request to it, with
 *                                   the caller's Authorization, and passes
 *                                   its answer back unchanged
 *   a create                        placement (sched/placement.h) picks the
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
 *   GET /operations/{id}            this node, else the first that knows it
 *   anything else                   this node
 *
 * A request that carries FLEET_FORWARDED_HEADER came from another node and
 * is answered here alone - once FLEET_AUTH_HEADER proves it (fleet_auth.h:
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

#include "fleet/fleet.h"
#include "service/app.h"
#include "service/fleet_node.h"
#include "service/keys.h"
#include "util/cleanup.h"
#include "util/names.h"

enum fleet_scope api_fleet_scope(const http_route *route)
{
    return (enum fleet_scope)route->fleet;
}

/* ---- the request as it is passed on ------------------------------------------ */

static void append_encoded(char **buf, size_t *len, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep_slash && *p == '/');
        *buf = xrealloc(*buf, *len + 4);
        if (plain) {
            (*buf)[(*len)++] = (char)*p;
        } else {
            (*buf)[(*len)++] = '%';
            (*buf)[(*len)++] = hex[*p >> 4];
            (*buf)[(*len)++] = hex[*p & 15];
        }
        (*buf)[*len] = '\0';
    }
}

/* The decoded path and query, encoded again. */
char *api_fleet_path_query(const http_request *req)
{
    char *buf = xstrdup("");
    size_t len = 0;
    append_encoded(&buf, &len, req->path, true);
    for (size_t i = 0; i < req->nquery; i++) {
        buf = xrealloc(buf, len + 2);
        buf[len++] = i ? '&' : '?';
        buf[len] = '\0';
        append_encoded(&buf, &len, req->query[i].key, false);
        if (req->query[i].value) {
            buf = xrealloc(buf, len + 2);
            buf[len++] = '=';
            buf[len] = '\0';
            append_encoded(&buf, &len, req->query[i].value, false);
        }
    }
    return buf;
}

fleet_request api_fleet_request_of(const http_request *req, const char *pq, long timeout_ms)
{
    return (fleet_request){.method = req->method,
                           .path_query = pq,
                           .authorization = http_request_header(req, "Authorization"),
                           .body = req->body,
                           .body_len = req->body_len,
                           .timeout_ms = timeout_ms};
}

/* An envelope's code, its first member as every node writes it
 * (http_envelope_dump): read from the head of the body, as parsing the
 * whole would build a tree many times its size (a log's lines). */
static bool envelope_code(const char *body, size_t len, int *code)
{
    static const char head[] = "{\"code\":";
    size_t h = sizeof(head) - 1;
    char digits[12];
    size_t n = 0;
    if (!body || len <= h || memcmp(body, head, h) != 0)
        return false;
    while (h + n < len && n < sizeof(digits) - 1 && isdigit((unsigned char)body[h + n]))
        digits[n] = body[h + n], n++;
    if (n == 0 || n > 9 || h + n >= len || body[h + n] != ',')
        return false;
    digits[n] = '\0';
    *code = atoi(digits);
    return true;
}

/* The node's answer as this node's: status, type and body unchanged. */
void api_fleet_pass_answer(fleet_answer *ans, http_response *resp)
{
    int code = ERR_OK;
    bool envelope = envelope_code(ans->body, ans->body_len, &code);
    bool is_json = strncmp(ans->content_type, "application/json", 16) == 0;
    http_response_raw(resp, ans->status, is_json ? "application/json" : "text/plain", ans->body,
                      ans->body_len);
    resp->code = code;
    resp->envelope = envelope;
    ans->body = NULL;
    ans->body_len = 0;
}

int api_fleet_forward_to(fleet *f, const char *node, const char *advertise, http_request *req,
                         http_response *resp, gb_err *err)
{
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    fleet_request fr = api_fleet_request_of(req, pq, 0);
    fleet_answer ans;
    if (fleet_send(f, advertise, &fr, &ans, err) < 0)
        return err_prefix(err, "forwarding to node %s", node);
    api_fleet_pass_answer(&ans, resp);
    fleet_answer_clear(&ans);
    return 0;
}

int api_fleet_forward_to_node(fleet *f, const char *node, http_request *req, http_response *resp,
                              gb_err *err)
{
    char advertise[FLEET_URL_MAX];
    int alive = fleet_member_reach(f, node, advertise, sizeof(advertise), err);
    if (alive < 0)
        return -1;
    if (!alive)
        return err_set(err, ERR_NODE_UNAVAILABLE,
                       "node %s, which holds it, is unreachable (no heartbeat within its lease); "
                       "nothing it holds is given to another node",
                       node);
    return api_fleet_forward_to(f, node, advertise, req, resp, err);
}

/* ---- answered here ----------------------------------------------------------- */

/* The name a request is about: {name} of the path (a legacy "foo-3" is
 * set foo), or the create body's. NULL when there is none or it is not a
 * valid name (the handler then says what is wrong). */
const char *api_fleet_request_name(http_request *req, enum fleet_scope scope, char *buf,
                                   size_t size)
{
    const char *name = NULL;
    if (scope == SCOPE_RS_OWNER || scope == SCOPE_VOL_OWNER) {
        name = http_request_param(req, "name");
    } else if (scope != SCOPE_RS_CREATE && scope != SCOPE_LEGACY_CREATE &&
               scope != SCOPE_VOL_CREATE) {
        return NULL;
    } else {
        json_t *body = NULL;
        gb_err ignored = GB_ERR_INIT;
        if (req_json_body(req, &body, &ignored) < 0)
            return NULL;
        const char *field = scope == SCOPE_RS_CREATE       ? "replicaSetName"
                            : scope == SCOPE_LEGACY_CREATE ? "containerName"
                                                           : "name";
        name = json_string_value(json_object_get(body, field));
    }
    if (!name)
        return NULL;
    gb_err ignored = GB_ERR_INIT;
    bool vol = scope == SCOPE_VOL_OWNER || scope == SCOPE_VOL_CREATE;
    if (vol ? name_check_volume(name, &ignored) == 0 : name_check_replicaset(name, &ignored) == 0) {
        snprintf(buf, size, "%s", name);
        return buf;
    }
    int version = 0;
    if (!vol && name_split_versioned(name, buf, &version) == 0)
        return buf;
    return NULL;
}

static enum fleet_name_kind kind_of(enum fleet_scope scope)
{
    return scope == SCOPE_VOL_OWNER || scope == SCOPE_VOL_CREATE ? FLEET_NAME_VOLUME
                                                                 : FLEET_NAME_REPLICASET;
}

/* Run the handler here; then, after a change, publish the capacity soon
 * and keep the name index in line with this node's records. */
/* A create here needs the name in the fleet first: the node that placed
 * it took it for this one, or nobody holds it. Another node's name is
 * refused as taken, however the request came (a client may send the
 * forwarded header too). */
static int claim_for_create(app *a, enum fleet_scope scope, const char *name, gb_err *err)
{
    bool vol = scope == SCOPE_VOL_CREATE;
    char key[STORE_KEY_MAX];
    if (!(vol ? keys_volume(key, sizeof(key), name) : keys_replicaset(key, sizeof(key), name)))
        return 0; /* the handler refuses the name */
    char owner[FLEET_NODE_MAX] = "";
    int claimed = fleet_name_claim(a->fleet, kind_of(scope), name, fleet_node(a->fleet), key, owner,
                                   sizeof(owner), err);
    if (claimed != 0)
        return claimed < 0 ? -1 : 0;
    return err_set(err, vol ? ERR_VOLUME_EXISTS : ERR_EXISTS,
                   "%s '%s' already exists in the fleet, on node %s",
                   vol ? "volume" : "replica set", name, owner);
}

int api_fleet_run_here(app *a, http_request *req, const http_route *route, enum fleet_scope scope,
                       http_response *resp, gb_err *err)
{
    char buf[NAME_MAX_LEN + 1];
    bool creates =
        scope == SCOPE_RS_CREATE || scope == SCOPE_LEGACY_CREATE || scope == SCOPE_VOL_CREATE;
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    if (creates && name && claim_for_create(a, scope, name, err) < 0)
        return -1;
    int rc = route->handler(req, resp, err);
    bool change = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
    if (!change)
        return rc;
    fleet_poke(a->fleet);
    if (!name || (!creates && strcmp(req->method, "DELETE") != 0))
        return rc;
    /* the name stays this node's while it keeps a record of it */
    gb_err e = GB_ERR_INIT;
    if (fleet_node_holds(a, kind_of(scope), name, &e) == 0)
        fleet_name_release(a->fleet, kind_of(scope), name, fleet_node(a->fleet), &e);
    return rc;
}

int api_fleet_create_here(app *a, http_request *req, const http_route *route,
                          enum fleet_scope scope, http_response *resp, gb_err *err)
{
    if (fleet_node_check_uncordoned(a, scope == SCOPE_VOL_CREATE, err) == 0)
        return api_fleet_run_here(a, req, route, scope, resp, err);
    /* a name placement claimed for this node is given up, as after a
     * create that failed */
    char buf[NAME_MAX_LEN + 1];
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    gb_err e = GB_ERR_INIT;
    if (name && fleet_node_holds(a, kind_of(scope), name, &e) == 0)
        fleet_name_release(a->fleet, kind_of(scope), name, fleet_node(a->fleet), &e);
    return -1;
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
    char owner[FLEET_NODE_MAX] = "";
    if (name) {
        int found = fleet_name_owner(a->fleet, kind_of(scope), name, owner, sizeof(owner), err);
        if (found < 0)
            return -1;
        if (found && strcmp(owner, fleet_node(a->fleet)) != 0 && streams(req, route))
            return err_set(err, ERR_INVALID_PARAMS,
                           "follow streams only from the node that holds the set: replica set "
                           "'%s' is on node %s; ask that node's API (GET /api/v1/nodes gives its "
                           "address), or leave follow out",
                           name, owner);
        if (found && strcmp(owner, fleet_node(a->fleet)) != 0)
            return api_fleet_forward_to_node(a->fleet, owner, req, resp, err);
    }
    return api_fleet_run_here(a, req, route, scope, resp, err);
}

/* GET /operations/{id}: here, else the first node that knows it. */
static int dispatch_operation(app *a, http_request *req, const http_route *route,
                              http_response *resp, gb_err *err)
{
    int rc = route->handler(req, resp, err);
    if (rc == 0 || err->code != ERR_NOT_FOUND)
        return rc;
    fleet_member *ms = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    if (fleet_members(a->fleet, false, &ms, &n, &e) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!ms[i].alive || strcmp(ms[i].name, fleet_node(a->fleet)) == 0)
            continue;
        _cleanup_free_ char *pq = api_fleet_path_query(req);
        fleet_request fr = api_fleet_request_of(req, pq, 5000);
        fleet_answer ans;
        if (fleet_send(a->fleet, ms[i].advertise, &fr, &ans, &e) == 0 && ans.status == 200) {
            err_clear(err);
            api_fleet_pass_answer(&ans, resp);
            fleet_answer_clear(&ans);
            fleet_members_free(ms, n);
            return 0;
        }
        fleet_answer_clear(&ans);
    }
    fleet_members_free(ms, n);
    return rc;
}

/* ---- the intercept --------------------------------------------------------------- */

/* 1: a node of this fleet sent req (answer it here alone); 0: it carries
 * neither header (a client's); -1: it carries one without a valid proof. */
static int sent_by_node(app *a, http_request *req, gb_err *err)
{
    const char *by = http_request_header(req, FLEET_FORWARDED_HEADER);
    const char *proof = http_request_header(req, FLEET_AUTH_HEADER);
    if (!by && !proof)
        return 0;
    if (!a->fleet)
        return err_set(err, ERR_FORBIDDEN,
                       FLEET_FORWARDED_HEADER " and " FLEET_AUTH_HEADER " are for requests "
                                              "between the nodes of a fleet; this gpuboxd is a "
                                              "single server (started without --node): leave "
                                              "them out");
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    fleet_request fr = api_fleet_request_of(req, pq, 0);
    if (fleet_request_verify(a->fleet, proof, by, &fr, err) < 0)
        return -1;
    return 1;
}

static int fleet_dispatch(http_request *req, const http_route *route, http_response *resp,
                          gb_err *err)
{
    app *a = req->ctx;
    int from_node = sent_by_node(a, req, err);
    if (from_node < 0)
        return -1;
    if (!a->fleet)
        return route->handler(req, resp, err);
    enum fleet_scope scope = api_fleet_scope(route);
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
    caller_leave();
    return rc;
}
