/*
 * fleet_create.c - a create sent to any node of a fleet (docs/fleet.md,
 * "Placement").
 *
 *   1. The name: if a node owns it already (the fleet's name index), the
 *      create goes to that node, which answers as it would on its own
 *      ("exists", or a new life for a deleted set whose history it keeps).
 *   2. The candidates: replica sets by sched/placement.h, read from the
 *      create request that every create path parses the same way
 *      (service/replicaset/request.h): filter by alive, cordon, `node`,
 *      `nodeSelector`, the node of every bound volume, fit; score by
 *      `placement`, else the spec's gpuPolicy. Volumes on the `node`
 *      named, else the alive, uncordoned nodes with room, the most free
 *      space first.
 *   3. For each candidate in order: claim the name for it (a node that
 *      claimed it first in a race wins, and the create goes there), send
 *      the create (or run it here), and pass the answer back - unless the
 *      node refused for lack of room (1013, 1014) or did not answer: then
 *      the next candidate. The node gives the name up itself when its
 *      create failed.
 *   4. None could: 1013 naming why, with the largest free spots.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/placement.h"
#include "service/keys.h"
#include "service/replicaset/request.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"
#include "util/size.h"

#define MAX_SELECTOR RS_MAX_SELECTOR

/* A volume create's `node` (and the others, refused there by its route):
 * the same checks as a replica set's (service/replicaset/request.h). */
int api_fleet_check_fields(http_request *req, const json_t *body, gb_err *err)
{
    app *a = req->ctx;
    rs_placement p;
    return rs_placement_from_json(body, a->fleet != NULL, &p, err);
}

/* ---- candidates ------------------------------------------------------------------ */

typedef struct candidates {
    fleet_member *members;
    size_t n;
    size_t *order; /* indexes into members, best first */
    size_t norder;
} candidates;

static void candidates_free(candidates *c)
{
    fleet_members_free(c->members, c->n);
    free(c->order);
}

/* The node every volume a set binds lives on: allowed gets it (or nothing
 * when they live on different nodes); *any true when no volume is bound. */
static int bound_volume_nodes(fleet *f, const rs_spec *spec, char (*allowed)[FLEET_NODE_MAX],
                              bool *any, gb_err *err)
{
    *any = true;
    for (size_t i = 0; i < spec->nbinds; i++) {
        const char *src = spec->binds[i].src;
        if (src[0] == '/')
            continue;
        char owner[FLEET_NODE_MAX] = "";
        int found = fleet_name_owner(f, FLEET_NAME_VOLUME, src, owner, sizeof(owner), err);
        if (found < 0)
            return -1;
        if (!found)
            continue; /* the node says "no such volume" */
        if (*any) {
            snprintf(*allowed, FLEET_NODE_MAX, "%s", owner);
            *any = false;
        } else if (strcmp(*allowed, owner) != 0) {
            (*allowed)[0] = '\0'; /* on two nodes: none can take it */
        }
    }
    return 0;
}

/* The candidates for a parsed create request, best first. */
static int rank_replicaset(app *a, const rs_create_request *cr, candidates *c, gb_err *err)
{
    const rs_spec *spec = &cr->spec;
    const rs_placement *p = &cr->placement;
    placement_request pr = {0};
    pr.gpu_count = spec->gpu_count > 0 ? (unsigned)spec->gpu_count : 0;
    pr.memory_mib = spec->gpu_memory_mib;
    pr.timeslice = spec->gpu_shared;
    pr.model = spec->gpu_model;
    pr.policy = p->has_policy ? p->policy : spec->gpu_policy;
    pr.ports_needed = (unsigned)spec->nports;
    pr.node = p->node;
    placement_label selector[MAX_SELECTOR];
    for (size_t i = 0; i < p->nselector; i++)
        selector[pr.nselector++] = (placement_label){p->selector[i].key, p->selector[i].value};
    pr.selector = selector;
    char allowed[FLEET_NODE_MAX] = "";
    const char *allowed_list[1] = {allowed};
    bool any = true;
    if (bound_volume_nodes(a->fleet, spec, &allowed, &any, err) < 0)
        return -1;
    if (!any) {
        pr.allowed_nodes = allowed_list;
        pr.nallowed = allowed[0] ? 1 : 0;
    }
    if (fleet_members(a->fleet, true, &c->members, &c->n, err) < 0)
        return -1;
    placement_node *nodes = xcalloc(c->n ? c->n : 1, sizeof(*nodes));
    placement_label *labels = xcalloc(c->n * MAX_SELECTOR + 1, sizeof(*labels));
    for (size_t i = 0; i < c->n; i++) {
        const fleet_member *m = &c->members[i];
        _cleanup_free_ char *cap = m->capacity ? json_dumps(m->capacity, JSON_COMPACT) : NULL;
        gb_err ignored = GB_ERR_INIT;
        placement_node_parse(m->name, cap, &nodes[i], &ignored);
        nodes[i].alive = m->alive;
        nodes[i].cordoned = m->cordoned;
        nodes[i].labels = &labels[i * MAX_SELECTOR];
        const char *k;
        json_t *v;
        json_object_foreach(m->labels, k, v)
        {
            if (nodes[i].nlabels < MAX_SELECTOR)
                labels[i * MAX_SELECTOR + nodes[i].nlabels++] =
                    (placement_label){k, json_string_value(v)};
        }
    }
    c->order = xcalloc(c->n ? c->n : 1, sizeof(*c->order));
    int rc = placement_rank(nodes, c->n, &pr, c->order, &c->norder, err);
    for (size_t i = 0; i < c->n; i++)
        placement_node_free(&nodes[i]);
    free(nodes);
    free(labels);
    return rc;
}

static int cmp_free_space(const void *x, const void *y, void *ctx)
{
    const fleet_member *m = ctx;
    const fleet_member *p = &m[*(const size_t *)x], *q = &m[*(const size_t *)y];
    json_int_t fp =
        json_integer_value(json_object_get(json_object_get(p->capacity, "volumes"), "freeBytes"));
    json_int_t fq =
        json_integer_value(json_object_get(json_object_get(q->capacity, "volumes"), "freeBytes"));
    return fp != fq ? (fp > fq ? -1 : 1) : strcmp(p->name, q->name);
}

static int rank_volume(app *a, const json_t *body, candidates *c, gb_err *err)
{
    const char *pin = json_string_value(json_object_get(body, "node"));
    const char *size_text = json_string_value(json_object_get(body, "size"));
    uint64_t size = 0;
    gb_err ignored = GB_ERR_INIT;
    if (size_text && size_parse(size_text, &size, &ignored) < 0)
        size = 0; /* the node says what is wrong with it */
    if (fleet_members(a->fleet, true, &c->members, &c->n, err) < 0)
        return -1;
    c->order = xcalloc(c->n ? c->n : 1, sizeof(*c->order));
    for (size_t i = 0; i < c->n; i++) {
        const fleet_member *m = &c->members[i];
        json_int_t free_bytes = json_integer_value(
            json_object_get(json_object_get(m->capacity, "volumes"), "freeBytes"));
        if ((!pin || strcmp(m->name, pin) == 0) && m->alive && !m->cordoned &&
            (uint64_t)free_bytes >= size)
            c->order[c->norder++] = i;
    }
    qsort_r(c->order, c->norder, sizeof(*c->order), cmp_free_space, c->members);
    if (c->norder)
        return 0;
    if (pin) {
        fleet_member m = {0};
        int found = fleet_member_get(a->fleet, pin, &m, &ignored);
        const char *why = found != 1   ? "is not in the fleet"
                          : !m.alive   ? "is unreachable"
                          : m.cordoned ? "is cordoned"
                                       : "has less free space";
        int code = found == 1 && !m.alive ? ERR_NODE_UNAVAILABLE : ERR_VOLUME_CREATE_FAILED;
        fleet_member_clear(&m);
        return err_set(err, code, "node %s %s; a volume of %s cannot be made there", pin, why,
                       size_text ? size_text : "that size");
    }
    return err_set(err, ERR_VOLUME_CREATE_FAILED,
                   "no node can take a volume of %s: every node is unreachable, cordoned or has "
                   "less free space",
                   size_text ? size_text : "that size");
}

/* ---- trying the candidates -------------------------------------------------------- */

static bool is_refusal(int code)
{
    return code == ERR_GPU_NOT_ENOUGH || code == ERR_PORT_NOT_ENOUGH;
}

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
    _cleanup_(rs_create_request_free) rs_create_request cr = {0};
    if (vol ? api_fleet_check_fields(req, body, err) < 0
            : rs_create_request_parse(
                  body, scope == SCOPE_LEGACY_CREATE ? RS_CREATE_CONTAINERS : RS_CREATE_REPLICASET,
                  true, &cr, err) < 0)
        return -1;
    enum fleet_name_kind kind = vol ? FLEET_NAME_VOLUME : FLEET_NAME_REPLICASET;
    char owner[FLEET_NODE_MAX] = "";
    int found = fleet_name_owner(a->fleet, kind, name, owner, sizeof(owner), err);
    if (found < 0)
        return -1;
    if (found && strcmp(owner, fleet_node(a->fleet)) == 0)
        return api_fleet_create_here(a, req, route, scope, resp, err);
    if (found) { /* the owner answers; a stale entry of a gone node is replaced below */
        char advertise[FLEET_URL_MAX];
        gb_err gone = GB_ERR_INIT;
        int alive = fleet_member_reach(a->fleet, owner, advertise, sizeof(advertise), &gone);
        if (alive == 1)
            return api_fleet_forward_to(a->fleet, owner, advertise, req, resp, err);
        if (alive < 0 && gone.code != ERR_NODE_UNAVAILABLE)
            return *err = gone, -1;
    }
    char record_key[STORE_KEY_MAX];
    if (vol)
        keys_volume(record_key, sizeof(record_key), name);
    else
        keys_replicaset(record_key, sizeof(record_key), name);
    candidates c = {0};
    int ranked = vol ? rank_volume(a, body, &c, err) : rank_replicaset(a, &cr, &c, err);
    if (ranked < 0) {
        candidates_free(&c);
        if (found) /* the name is a gone node's: it says so */
            return err_clear(err), api_fleet_forward_to_node(a->fleet, owner, req, resp, err);
        return -1;
    }
    char refusals[1024] = "";
    int rc = 1;
    for (size_t i = 0; i < c.norder && rc == 1; i++) {
        const fleet_member *m = &c.members[c.order[i]];
        char holder[FLEET_NODE_MAX] = "";
        int claimed = fleet_name_claim(a->fleet, kind, name, m->name, record_key, holder,
                                       sizeof(holder), err);
        if (claimed < 0) {
            rc = -1;
            break;
        }
        if (claimed == 0) { /* another create won the name: its node answers */
            rc = api_fleet_forward_to_node(a->fleet, holder, req, resp, err);
            break;
        }
        if (strcmp(m->name, fleet_node(a->fleet)) == 0) {
            rc = api_fleet_create_here(a, req, route, scope, resp, err);
            if (rc < 0 && is_refusal(err->code) && i + 1 < c.norder) {
                size_t used = strlen(refusals);
                snprintf(refusals + used, sizeof(refusals) - used, "%snode %s: %s",
                         used ? "; " : "", m->name, err->msg);
                err_clear(err);
                rc = 1;
            }
            continue;
        }
        _cleanup_free_ char *pq = api_fleet_path_query(req);
        fleet_request fr = api_fleet_request_of(req, pq, 0);
        fleet_answer ans;
        gb_err send_err = GB_ERR_INIT;
        int sent = fleet_send(a->fleet, m->advertise, &fr, &ans, &send_err);
        _cleanup_json_ json_t *env =
            sent == 0 ? json_loadb(ans.body ? ans.body : "", ans.body_len, 0, NULL) : NULL;
        int code = (int)json_integer_value(json_object_get(env, "code"));
        if (sent == 0 && !(is_refusal(code) && i + 1 < c.norder)) {
            api_fleet_pass_answer(&ans, resp);
            fleet_answer_clear(&ans);
            rc = 0;
            break;
        }
        const char *msg = sent == 0 ? json_string_value(json_object_get(env, "msg")) : send_err.msg;
        size_t used = strlen(refusals);
        snprintf(refusals + used, sizeof(refusals) - used, "%snode %s: %s", used ? "; " : "",
                 m->name, msg ? msg : "refused");
        fleet_answer_clear(&ans);
        fleet_name_release(a->fleet, kind, name, m->name, &ignored);
    }
    candidates_free(&c);
    if (rc == 1)
        return err_set(err, vol ? ERR_VOLUME_CREATE_FAILED : ERR_GPU_NOT_ENOUGH,
                       "no node of the fleet took it: %s", refusals);
    return rc;
}
