/*
 * move_group.c - a move with its sharers ("withSharers": true; docs/fleet.md,
 * "Sets that share a volume"): the set, every set that binds one of its
 * volumes, and transitively every set that binds one of theirs, go to one
 * node with those volumes.
 *
 * Before anything changes: every set is running, paused or stopped and
 * on this node, every volume ready, and the target has the room for all
 * of them together (cards, exclusive cores and ports as one create of
 * their sum; the disk for all of them in the first set's prepare), else
 * the refusal names the group. Then the group's other running sets stop
 * here (their records still say running: each moves as a running set and
 * starts on the target), so that no set writes a shared volume while the
 * first set's move copies it.
 *
 * Then one move after another, each its own journalled operation (move.c),
 * in the order the sets were found. A set moves the volumes no earlier set
 * moved; the volumes an earlier set moved are on the target already
 * ("sharedVolumes": neither made, copied nor switched again), and a volume
 * that a later set still binds stays here ("keepVolumes") until that set
 * leaves, so each set's container here keeps what it binds.
 *
 * Between the first move's point of no return and the last one's, the
 * later sets are still here, stopped, binding this node's copy of a volume
 * whose name is the target's now. A failure or a crash there leaves each
 * set existing once, on one node, with its data: the moved ones on the
 * target, the rest here, stopped (a crash: gpuboxd starts a set whose
 * record says running again at its start), the shared volume's data in
 * both copies as it was when the first set stopped. A move of each
 * remaining set alone then finds its volume owned by the target; those
 * sets are moved by hand as docs/fleet.md says.
 */
#include "util/xalloc.h"
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"

#define GROUP_MAX 16

static bool listed(const json_t *list, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

/* Whether r binds gpubox volume vol. */
static bool binds_volume(const replicaset_record *r, const char *vol)
{
    for (size_t i = 0; i < r->spec.nbinds; i++)
        if (r->spec.binds[i].src[0] != '/' && strcmp(r->spec.binds[i].src, vol) == 0)
            return true;
    return false;
}

/* Every set that binds a volume of vols and is not in sets yet goes into it. */
struct sharers_ctx {
    const json_t *vols;
    json_t *sets;
};

static int sharers_one(void *ctx, replicaset_record *r, gb_err *err)
{
    struct sharers_ctx *c = ctx;
    (void)err;
    if (r->state == RS_STATE_DELETED || listed(c->sets, r->name))
        return 0;
    size_t i;
    json_t *v;
    json_array_foreach(c->vols, i, v)
    {
        if (binds_volume(r, json_string_value(v))) {
            json_array_append_new(c->sets, json_string(r->name));
            break;
        }
    }
    return 0;
}

/* "a, b, c" of the sets after the first. */
static void group_others(const json_t *sets, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 1; i < json_array_size(sets); i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i > 1 ? ", " : "",
                 json_string_value(json_array_get(sets, i)));
    }
}

typedef struct group {
    json_t *sets; /* names, the asked set first */
    replicaset_record recs[GROUP_MAX];
    size_t n; /* records loaded */
} group;

static void group_free(group *g)
{
    for (size_t i = 0; i < g->n; i++)
        replicaset_record_free(&g->recs[i]);
    json_decref(g->sets);
}

/* The group of name: its sets found and loaded, each in a state that moves. */
static int group_find(app *a, const char *name, group *g, gb_err *err)
{
    g->sets = json_pack("[s]", name);
    _cleanup_json_ json_t *vols = json_array();
    for (size_t i = 0; i < json_array_size(g->sets); i++) {
        const char *s = json_string_value(json_array_get(g->sets, i));
        if (i >= GROUP_MAX)
            return err_set(err, ERR_STATE_CONFLICT,
                           "replica set '%s' shares volumes with more than %d sets; move fewer at "
                           "a time (take volumes out of some: gpubox update NAME --volume-rm DEST)",
                           name, GROUP_MAX - 1);
        replicaset_record *r = &g->recs[i];
        if (replicaset_load_settled(a, s, r, err) < 0)
            return i ? err_prefix(err, "replica set '%s' shares a volume with '%s'", s, name) : -1;
        g->n = i + 1;
        switch (r->state) {
        case RS_STATE_RUNNING:
        case RS_STATE_PAUSED:
        case RS_STATE_STOPPED:
            break;
        default:
            return err_set(err, ERR_STATE_CONFLICT,
                           "replica set '%s', which shares a volume with '%s', is %s; a move "
                           "takes only running, paused or stopped sets: nothing moved",
                           s, name, replicaset_state_name(r->state));
        }
        _cleanup_json_ json_t *fresh = json_array();
        for (size_t k = 0; k < r->spec.nbinds; k++) {
            const char *src = r->spec.binds[k].src;
            if (src[0] != '/' && !listed(vols, src)) {
                json_array_append_new(vols, json_string(src));
                json_array_append_new(fresh, json_string(src));
            }
        }
        struct sharers_ctx c = {.vols = fresh, .sets = g->sets};
        if (json_array_size(fresh) && replicaset_records_each(a->store, sharers_one, &c, err) < 0)
            return err_prefix(err, "finding the sets that share the volumes of %s", s);
    }
    return 0;
}

/* The room of the whole group on one node: placement of one create whose
 * cards, exclusive cores and ports are the sum of theirs. */
static int group_target(app *a, const group *g, const char *pin, char *node, size_t node_size,
                        char *advertise, size_t advertise_size, gb_err *err)
{
    replicaset_spec sum = g->recs[0].spec; /* shallow: only the counts and ports change */
    size_t nports = 0;
    for (size_t i = 0; i < g->n; i++)
        nports += g->recs[i].spec.nports;
    replicaset_port *ports = xcalloc(nports ? nports : 1, sizeof(*ports));
    sum.gpu_count = 0;
    sum.cpu_count = 0;
    sum.nports = 0;
    for (size_t i = 0; i < g->n; i++) {
        const replicaset_spec *s = &g->recs[i].spec;
        sum.gpu_count += s->gpu_count;
        sum.cpu_count += s->cpu_count;
        for (size_t k = 0; k < s->nports; k++)
            ports[sum.nports++] = s->ports[k];
    }
    sum.ports = ports;
    int rc = nodes_move_target(a, &sum, pin, node, node_size, advertise, advertise_size, err);
    free(ports);
    if (rc < 0) {
        char others[512];
        group_others(g->sets, others, sizeof(others));
        err_prefix(err, "moving '%s' with %s, which share its volumes", g->recs[0].name, others);
    }
    return rc;
}

/* Each set's part of the group: the volumes already on the target when it
 * moves, and those a later set still binds here. */
static json_t *member_of(const group *g, size_t i, uint64_t later_bytes)
{
    json_t *shared = json_array(), *keep = json_array();
    const replicaset_record *r = &g->recs[i];
    for (size_t k = 0; k < r->spec.nbinds; k++) {
        const char *src = r->spec.binds[k].src;
        if (src[0] == '/')
            continue;
        bool before = false, after = false;
        for (size_t j = 0; j < g->n; j++)
            if (j != i && binds_volume(&g->recs[j], src))
                *(j < i ? &before : &after) = true;
        if (before && !listed(shared, src))
            json_array_append_new(shared, json_string(src));
        if (after && !listed(keep, src))
            json_array_append_new(keep, json_string(src));
    }
    return json_pack("{s:O, s:o, s:o, s:I}", "sets", g->sets, "sharedVolumes", shared,
                     "keepVolumes", keep, "groupBytes", (json_int_t)later_bytes);
}

int move_group_run(app *a, const char *name, const replicaset_move_request *rq,
                   void (*on_prepared)(void *, const json_t *), void *ctx, json_t **out,
                   gb_err *err)
{
    *out = NULL;
    _cleanup_(group_free) group g = {0};
    if (group_find(a, name, &g, err) < 0)
        return -1;
    replicaset_move_request one = *rq;
    one.with_sharers = false;
    if (g.n == 1) /* it shares nothing */
        return move_out_run(a, name, &one, on_prepared, ctx, out, err);
    char target[NODES_NAME_MAX], advertise[NODES_URL_MAX];
    if (group_target(a, &g, rq->node, target, sizeof(target), advertise, sizeof(advertise), err) <
        0)
        return -1;
    /* The disk the later sets need, asked of the target with the first. */
    uint64_t later = 0;
    for (size_t i = 1; i < g.n; i++) {
        _cleanup_json_ json_t *m = member_of(&g, i, 0);
        uint64_t bytes = 0;
        if (move_need_bytes(a, &g.recs[i], m, &bytes, err) < 0)
            return err_prefix(err, "'%s' moves with '%s'", g.recs[i].name, name);
        later += bytes;
    }
    char others[512];
    group_others(g.sets, others, sizeof(others));
    log_info("move: %s to node %s with the sets that share its volumes: %s", name, target, others);
    /* No set writes a shared volume while it is copied. */
    bool stopped[GROUP_MAX] = {false};
    for (size_t i = 1; i < g.n; i++) {
        if (g.recs[i].state != RS_STATE_RUNNING)
            continue;
        if (replicaset_container_stop(a, g.recs[i].container_name, err) < 0) {
            err_prefix(err, "stopping %s, which shares a volume with %s", g.recs[i].name, name);
            for (size_t k = 1; k < i; k++) {
                gb_err e = GB_ERR_INIT;
                if (stopped[k] && replicaset_container_start(a, &g.recs[k], &e) < 0)
                    log_error("move: starting %s again: %s", g.recs[k].name, e.msg);
            }
            return -1;
        }
        stopped[i] = true;
    }
    one.node = target;
    json_t *sharers = json_array();
    int rc = 0;
    for (size_t i = 0; i < g.n; i++) {
        _cleanup_json_ json_t *m = member_of(&g, i, i == 0 ? later : 0);
        one.group = m;
        json_t *ans = NULL;
        if (move_out_run(a, g.recs[i].name, &one, i == 0 ? on_prepared : NULL, ctx, &ans, err) <
            0) {
            if (i == 0) { /* nothing moved: the others run again */
                for (size_t k = 1; k < g.n; k++) {
                    gb_err e = GB_ERR_INIT;
                    if (stopped[k] && replicaset_container_start(a, &g.recs[k], &e) < 0)
                        log_error("move: starting %s again: %s", g.recs[k].name, e.msg);
                }
            } else {
                char done[512] = "";
                for (size_t k = 0; k < i; k++) {
                    size_t len = strlen(done);
                    snprintf(done + len, sizeof(done) - len, "%s%s", k ? ", " : "", g.recs[k].name);
                }
                err_prefix(err,
                           "%s moved to node %s, but %s did not and stays on this node, stopped, "
                           "with its copy of the shared volumes (docs/fleet.md, \"Sets that "
                           "share a volume\")",
                           done, target, g.recs[i].name);
            }
            rc = -1;
            break;
        }
        if (i == 0)
            *out = ans;
        else
            json_array_append_new(sharers, ans);
    }
    if (rc < 0) {
        json_decref(sharers);
        json_decref(*out);
        *out = NULL;
        return -1;
    }
    json_object_set_new(*out, "sharers", sharers);
    return 0;
}
