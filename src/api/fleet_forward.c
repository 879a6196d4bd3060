/*
 * fleet_forward.c - the pieces a fleet's dispatch, create placement and list
 * merging share (docs/fleet.md): a request as it is passed on to another
 * node (its path and query re-encoded, the caller's identity passed on;
 * service/nodes signs it), a node's answer passed back unchanged, the name
 * a request is about, and a request answered on this node (service/nodes
 * claims a create's name first, gives it up again when this node ends up
 * not holding it, refuses it while this node is cordoned).
 *
 * fleet_dispatch.c decides which node answers; fleet_create.c and
 * fleet_merge.c call these and nothing in fleet_dispatch.c, so the calls go
 * one way.
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

nodes_request api_fleet_request_of(const http_request *req, const char *pq, long timeout_ms)
{
    return (nodes_request){.method = req->method,
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
void api_fleet_pass_answer(nodes_answer *ans, http_response *resp)
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

int api_fleet_forward_to(app *a, const char *node, const char *advertise, http_request *req,
                         http_response *resp, gb_err *err)
{
    char reached[NODES_URL_MAX];
    if (!advertise && nodes_reach(a, node, reached, sizeof(reached), err) < 0)
        return -1;
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    nodes_request nr = api_fleet_request_of(req, pq, 0);
    nodes_answer ans;
    if (nodes_send(a, advertise ? advertise : reached, &nr, &ans, err) < 0) {
        nodes_answer_clear(&ans);
        return err_prefix(err, "forwarding to node %s", node);
    }
    api_fleet_pass_answer(&ans, resp);
    nodes_answer_clear(&ans);
    return 0;
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

enum nodes_kind api_fleet_name_kind(enum fleet_scope scope)
{
    return scope == SCOPE_VOL_OWNER || scope == SCOPE_VOL_CREATE ? NODES_VOLUME : NODES_REPLICASET;
}

/* Run the handler here; then, after a change, publish the capacity soon
 * and keep the name index in line with this node's records (a create that
 * failed, a purge: service/nodes gives the name up). */
int api_fleet_run_here(app *a, http_request *req, const http_route *route, enum fleet_scope scope,
                       http_response *resp, gb_err *err)
{
    char buf[NAME_MAX_LEN + 1];
    bool creates =
        scope == SCOPE_RS_CREATE || scope == SCOPE_LEGACY_CREATE || scope == SCOPE_VOL_CREATE;
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    enum nodes_kind kind = api_fleet_name_kind(scope);
    if (creates && name && nodes_claim_here(a, kind, name, err) < 0)
        return -1;
    int rc = route->handler(req, resp, err);
    bool change = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
    if (!change)
        return rc;
    nodes_poke(a);
    if (creates || strcmp(req->method, "DELETE") == 0)
        nodes_release_unheld(a, kind, name);
    return rc;
}

int api_fleet_create_here(app *a, http_request *req, const http_route *route,
                          enum fleet_scope scope, http_response *resp, gb_err *err)
{
    char buf[NAME_MAX_LEN + 1];
    const char *name = api_fleet_request_name(req, scope, buf, sizeof(buf));
    if (nodes_check_uncordoned(a, api_fleet_name_kind(scope), name, err) < 0)
        return -1;
    return api_fleet_run_here(a, req, route, scope, resp, err);
}
