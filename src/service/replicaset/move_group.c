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
 * The group is journalled as a whole first (operation "move-group",
 * before any set stops): its node and, in order, each set's part
 * ("members": its name, sharedVolumes, keepVolumes). The first set's
 * point of no return (its name handed to the target) is the group's:
 * before it, a failure or a crash undoes the group (the sets stopped for
 * it run again here); from it on, the group only goes forward. A later
 * set's move that fails (the target refuses or does not answer), or a
 * crash of either node between two sets, leaves the rest here, stopped,
 * binding this node's copy of a volume whose name is the target's now:
 * they are never started here (move.c's undo, reconcile.c), and the move
 * thread moves them on (move_group_settle.c), trying again until the
 * target takes them, each with the volumes an earlier set took as shared.
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
#include "util/json.h"
#include "util/log.h"

#define GROUP_MAX 16

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
    if (r->state == RS_STATE_DELETED || json_array_has_string(c->sets, r->name))
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
            if (src[0] != '/' && !json_array_has_string(vols, src)) {
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

/* Each set's part of the group: its name, the volumes already on the
 * target when it moves, and those a later set still binds here. */
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
        if (before && !json_array_has_string(shared, src))
            json_array_append_new(shared, json_string(src));
        if (after && !json_array_has_string(keep, src))
            json_array_append_new(keep, json_string(src));
    }
    return json_pack("{s:s, s:O, s:o, s:o, s:I}", "name", r->name, "sets", g->sets, "sharedVolumes",
                     shared, "keepVolumes", keep, "groupBytes", (json_int_t)later_bytes);
}

/* "a, b" of the names in list from index from on. */
static void names_from(const json_t *list, size_t from, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = from; i < json_array_size(list); i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i > from ? ", " : "",
                 json_string_value(json_array_get(list, i)));
    }
}

/* The answer to a group that moved in part: the failing set's code, what
 * moved and what did not, and that the rest follows by itself. */
static int group_partial(app *a, const journal_op *op, size_t failed, gb_err *err)
{
    const json_t *sets = json_object_get(op->data, "sets");
    const char *target = json_string_value(json_object_get(op->data, "node"));
    char done[256], left[256], why[sizeof(err->msg)];
    _cleanup_json_ json_t *moved = json_array(), *waiting = json_array();
    for (size_t i = 0; i < json_array_size(sets); i++)
        json_array_append(i < failed ? moved : waiting, json_array_get(sets, i));
    names_from(moved, 0, done, sizeof(done));
    names_from(waiting, 0, left, sizeof(left));
    snprintf(why, sizeof(why), "%s", err->msg);
    int code = err->code;
    err_set(err, code,
            "%s moved to node %s; %s did not yet and wait%s on node %s, stopped: node %s moves "
            "them there by itself, trying again until node %s takes them (operation %s; docs/"
            "fleet.md, \"Sets that share a volume\"). Why: %s",
            done, target, left, json_array_size(waiting) == 1 ? "s" : "", nodes_self(a),
            nodes_self(a), target, op->id, why);
    _cleanup_json_ json_t *data = json_pack("{s:s, s:s, s:O, s:O}", "groupOperationId", op->id,
                                            "node", target, "moved", moved, "notMoved", waiting);
    _cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
    if (text)
        err_set_data(err, text);
    return -1;
}

/* The answer at once ("wait": false) names the group's operation too. */
struct early {
    void (*on_prepared)(void *, const json_t *);
    void *ctx;
    const char *id;
};

static void early_answer(void *ctx, const json_t *answer)
{
    struct early *e = ctx;
    _cleanup_json_ json_t *ans = json_deep_copy(answer);
    json_object_set_new(ans, "groupOperationId", json_string(e->id));
    e->on_prepared(e->ctx, ans);
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
    /* The group journalled as a whole before anything changes. */
    json_t *members = json_array();
    for (size_t i = 0; i < g.n; i++)
        json_array_append_new(members, member_of(&g, i, i == 0 ? later : 0));
    json_t *data = json_pack("{s:s, s:s, s:O, s:o}", "node", target, "source", nodes_self(a),
                             "sets", g.sets, "members", members);
    _cleanup_(journal_op_free) journal_op op = {0};
    if (op_init(&op, &replicaset_op_move_group, name, data, err) < 0)
        return -1;
    snprintf(op.owner, sizeof(op.owner), "%s", g.recs[0].owner);
    for (size_t i = 0; i < g.n; i++) /* each set's move names its group */
        json_object_set_new(json_array_get(members, i), "group", json_string(op.id));
    if (!move_group_claim(op.id))
        return err_set(err, ERR_INTERNAL, "move group %s: already running", op.id);
    if (journal_record_step(a->store, &op, OP_STEP_BEGIN, err) < 0) {
        move_group_release(op.id, false);
        return err_prefix(err, "recording the move of '%s' with the sets that share its volumes",
                          name);
    }
    replicaset_moves_poke();
    char others[512];
    group_others(g.sets, others, sizeof(others));
    log_info("move group %s: %s to node %s with the sets that share its volumes: %s", op.id, name,
             target, others);
    /* No set writes a shared volume while it is copied. */
    for (size_t i = 1; i < g.n; i++) {
        if (g.recs[i].state != RS_STATE_RUNNING)
            continue;
        if (replicaset_container_stop(a, g.recs[i].container_name, err) < 0) {
            err_prefix(err, "stopping %s, which shares a volume with %s", g.recs[i].name, name);
            gb_err e = GB_ERR_INIT;
            if (move_group_undo(a, &op, err->msg, &e) < 0)
                log_error("move group %s: %s", op.id, e.msg);
            move_group_release(op.id, false);
            return -1;
        }
    }
    one.node = target;
    _cleanup_json_ json_t *answers = json_array();
    size_t failed = 0;
    struct early early = {.on_prepared = on_prepared, .ctx = ctx, .id = op.id};
    int rc = move_group_forward(a, &op, &one, on_prepared ? early_answer : NULL, &early, answers,
                                &failed, err);
    if (rc < 0 && failed == 0) { /* nothing moved: the others run again */
        gb_err e = GB_ERR_INIT;
        if (move_group_undo(a, &op, err->msg, &e) < 0)
            log_error("move group %s: %s", op.id, e.msg);
        move_group_release(op.id, false);
        return -1;
    }
    if (rc != 0) { /* the rest follows from the move thread */
        if (rc > 0)
            err_set(err, ERR_STATE_CONFLICT, "a set of the group has an unfinished operation");
        json_object_set_new(op.data, "lastError", json_string(err->msg));
        gb_err e = GB_ERR_INIT;
        if (journal_save(a->store, &op, &e) < 0)
            log_warn("move group %s: %s", op.id, e.msg);
        move_group_release(op.id, true);
        replicaset_moves_poke();
        return group_partial(a, &op, failed, err);
    }
    move_group_release(op.id, false);
    *out = json_incref(json_array_get(answers, 0));
    json_t *sharers = json_array();
    for (size_t i = 1; i < json_array_size(answers); i++)
        json_array_append(sharers, json_array_get(answers, i));
    json_object_set_new(*out, "sharers", sharers);
    json_object_set_new(*out, "groupOperationId", json_string(op.id));
    return 0;
}

/* Not run by move_out_run: every journalled kind needs its entry (the
 * table lists its fault points); the move thread settles it. */
static int move_group_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err)
{
    (void)a;
    (void)r;
    return err_set(err, ERR_STATE_CONFLICT, "move group %s is settled by the move thread", op->id);
}

static const op_step_def move_group_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},
    {OP_STEP_FIRST_MOVED, NULL, NULL},
    {OP_STEP_ALL_MOVED, NULL, NULL},
};

/* begin: the group and each set's part recorded; first-moved: the first
 * set is on the target (the group goes forward only); all-moved: done. */
const op_kind replicaset_op_move_group = {
    .name = "move-group",
    .journalled = true,
    .kind = JOURNAL_MOVE_GROUP,
    OP_STEPS(move_group_steps),
    .resume = move_group_resume,
};
