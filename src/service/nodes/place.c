/*
 * place.c - where a create goes in a fleet (docs/fleet.md, "Placement"),
 * once nodes_route_name said "place": nobody alive holds the name.
 *
 *   1. The candidates: replica sets by sched/placement.h, read from the
 *      create request that every create path parses the same way
 *      (service/replicaset/request.h): filter by alive, cordon, `node`,
 *      `nodeSelector`, the node of every bound volume, fit; score by
 *      `placement`, else the spec's gpuPolicy. Volumes on the `node`
 *      named, else the alive, uncordoned nodes with room, the most free
 *      space first.
 *   2. Trying them in turn (place_try.c, place.h): claim the name in the
 *      fleet's name index, create through the API's callbacks, the next
 *      candidate on a refusal for lack of room or no answer, releasing the
 *      claim.
 *   3. None could: 1013 naming why, with the largest free spots.
 */
#include "util/xalloc.h"
#include "service/nodes/place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/placement.h"
#include "service/nodes/internal.h"
#include "service/replicaset/request.h"
#include "util/cleanup.h"
#include "util/size.h"

#define MAX_SELECTOR RS_MAX_SELECTOR

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
static int bound_volume_nodes(fleet *f, const replicaset_spec *spec,
                              char (*allowed)[FLEET_NODE_MAX], bool *any, gb_err *err)
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
static int rank_replicaset(app *a, const replicaset_create_request *cr, bool volumes_follow,
                           candidates *c, gb_err *err)
{
    const replicaset_spec *spec = &cr->spec;
    const replicaset_placement *p = &cr->placement;
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
    if (!volumes_follow && bound_volume_nodes(a->fleet, spec, &allowed, &any, err) < 0)
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

static int rank_volume(app *a, const char *pin, const char *size_text, candidates *c, gb_err *err)
{
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

/* ---- the fleet's name index, for one name ---------------------------------------- */

typedef struct fleet_index {
    app *a;
    enum nodes_kind kind;
    const char *name;
    const char *record_key;
} fleet_index;

static int index_claim(void *ctx, const char *node, char *holder, size_t size, gb_err *err)
{
    fleet_index *x = ctx;
    return fleet_name_claim(x->a->fleet, nodes_fleet_kind(x->kind), x->name, node, x->record_key,
                            holder, size, err);
}

static void index_release(void *ctx, const char *node)
{
    fleet_index *x = ctx;
    gb_err ignored = GB_ERR_INIT;
    fleet_name_release(x->a->fleet, nodes_fleet_kind(x->kind), x->name, node, &ignored);
}

static int index_reach(void *ctx, const char *node, char *advertise, size_t size, gb_err *err)
{
    fleet_index *x = ctx;
    return fleet_member_reach(x->a->fleet, node, advertise, size, err);
}

/* ---- place and create -------------------------------------------------------------- */

int nodes_place_create(app *a, const nodes_place *p, const nodes_create_calls *calls, gb_err *err)
{
    bool vol = p->kind == NODES_VOLUME;
    char record_key[STORE_KEY_MAX];
    if (!nodes_record_key(p->kind, p->name, record_key, sizeof(record_key)))
        return err_set(err, ERR_INVALID_PARAMS, "'%s' is not a valid name", p->name);
    fleet_index x = {.a = a, .kind = p->kind, .name = p->name, .record_key = record_key};
    nodes_index ix = {
        .ctx = &x, .claim = index_claim, .release = index_release, .reach = index_reach};
    candidates c = {0};
    int ranked = vol ? rank_volume(a, p->volume_node, p->volume_size, &c, err)
                     : rank_replicaset(a, p->set, false, &c, err);
    if (ranked < 0) {
        candidates_free(&c);
        if (p->gone_owner && p->gone_owner[0]) /* the name is a gone node's: it says so */
            return err_clear(err), nodes_forward_to_holder(&ix, p->gone_owner, calls, err);
        return -1;
    }
    nodes_candidate *cands = xcalloc(c.norder ? c.norder : 1, sizeof(*cands));
    for (size_t i = 0; i < c.norder; i++)
        cands[i] = (nodes_candidate){c.members[c.order[i]].name, c.members[c.order[i]].advertise};
    int rc = nodes_try_candidates(cands, c.norder, fleet_node(a->fleet), &ix, calls,
                                  vol ? ERR_VOLUME_CREATE_FAILED : ERR_GPU_NOT_ENOUGH, err);
    free(cands);
    candidates_free(&c);
    return rc;
}

int nodes_move_target(app *a, const replicaset_spec *spec, const char *pin, char *node,
                      size_t node_size, char *advertise, size_t advertise_size, gb_err *err)
{
    const char *self = fleet_node(a->fleet);
    if (pin && strcmp(pin, self) == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "the replica set is on node %s already; name another node, or none to let "
                       "placement choose",
                       pin);
    /* Placement as for a create of the same spec (its volumes go with it),
     * this node left out. */
    replicaset_create_request cr = {.spec = *spec};
    cr.placement.node = pin;
    candidates c = {0};
    if (rank_replicaset(a, &cr, true, &c, err) < 0) {
        candidates_free(&c);
        return err_prefix(err, "moving it");
    }
    int rc = err_set(err, ERR_GPU_NOT_ENOUGH,
                     "no other node can take it: every other node is unreachable, cordoned or "
                     "lacks the room (cards, ports) it needs");
    for (size_t i = 0; i < c.norder; i++) {
        const fleet_member *m = &c.members[c.order[i]];
        if (strcmp(m->name, self) == 0)
            continue;
        snprintf(node, node_size, "%s", m->name);
        snprintf(advertise, advertise_size, "%s", m->advertise);
        err_clear(err);
        rc = 0;
        break;
    }
    candidates_free(&c);
    return rc;
}
