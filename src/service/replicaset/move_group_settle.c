/*
 * move_group_settle.c - a group of sets sharing volumes (move_group.c),
 * moved on to its node after a crash of either node, or after a later
 * set's move failed (docs/fleet.md, "Sets that share a volume").
 *
 * The group's operation ("move-group", this node's journal) lists its sets
 * in order, each with its part (sharedVolumes, keepVolumes). The move
 * thread (move_settle.c) settles each unfinished one, after the sets' own
 * moves of the same pass, unless this process runs it now:
 *
 *   a set of the group owned by the target (the fleet's name index): the
 *       group passed its point of no return: each set still owned here,
 *       in order, moves as its own move with its part, as the first run
 *       would have moved it (a volume an earlier set took is on the
 *       target: not made or copied again; this node's copy goes with the
 *       last set that binds it); a set whose record says running starts
 *       there. A failure: tried again later, every RETRY_FIRST_S seconds
 *       at first, then less often, up to RETRY_MAX_S;
 *   none: nothing changed nodes: once no set's own move is unfinished
 *       (its undo first), the sets stopped for the group run again here
 *       and the group is undone.
 *
 * A set still here waiting for its group is never started here: not by
 * its own move's undo (move.c), not at gpuboxd's start (reconcile.c asks
 * move_group_held).
 */
#include "service/replicaset/replicaset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"
#include "util/xalloc.h"

#define RETRY_FIRST_S 5
#define RETRY_MAX_S 60

/* ---- which groups this process runs now, and when each is tried again ---------------- */

typedef struct group_slot {
    char id[JOURNAL_ID_MAX];
    bool live;       /* run now (a request, or the move thread) */
    int64_t next_ns; /* time_mono_ns of the next try; 0: at once */
    int delay_s;
    struct group_slot *next;
} group_slot;

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static group_slot *slots;

static group_slot *slot_get(const char *id, bool create)
{
    group_slot *s = slots;
    while (s && strcmp(s->id, id) != 0)
        s = s->next;
    if (!s && create) {
        s = xcalloc(1, sizeof(*s));
        snprintf(s->id, sizeof(s->id), "%s", id);
        s->next = slots;
        slots = s;
    }
    return s;
}

bool move_group_claim(const char *id)
{
    pthread_mutex_lock(&slots_lock);
    group_slot *s = slot_get(id, true);
    bool ok = !s->live && (s->next_ns == 0 || time_mono_ns() >= s->next_ns);
    if (ok)
        s->live = true;
    pthread_mutex_unlock(&slots_lock);
    return ok;
}

void move_group_release(const char *id, bool retry)
{
    pthread_mutex_lock(&slots_lock);
    group_slot *s = slot_get(id, false);
    if (s && retry) {
        s->live = false;
        s->delay_s = s->delay_s ? s->delay_s * 2 : RETRY_FIRST_S;
        if (s->delay_s > RETRY_MAX_S)
            s->delay_s = RETRY_MAX_S;
        s->next_ns = time_mono_ns() + (int64_t)s->delay_s * 1000000000LL;
    } else if (s) { /* over: forgotten */
        group_slot **p = &slots;
        while (*p != s)
            p = &(*p)->next;
        *p = s->next;
        free(s);
    }
    pthread_mutex_unlock(&slots_lock);
}

/* ---- forward, and back ------------------------------------------------------------------ */

static const char *member_name(const json_t *m)
{
    const char *s = json_string_value(json_object_get(m, "name"));
    return s ? s : "";
}

/* Every set of the group moved or was deleted: a shared volume this node
 * still has a copy of, whose name is the target's, is bound by none of them
 * here any more. Its copy normally goes with the last set that binds it;
 * when that set was deleted while it waited, it goes here. */
static int move_group_sweep(app *a, journal_op *op, const char *target, gb_err *err)
{
    const json_t *members = json_object_get(op->data, "members");
    const char *lists[] = {"sharedVolumes", "keepVolumes"};
    for (size_t i = 0; i < json_array_size(members); i++)
        for (size_t l = 0; l < 2; l++) {
            const json_t *vols = json_object_get(json_array_get(members, i), lists[l]);
            for (size_t k = 0; k < json_array_size(vols); k++) {
                const char *vol = json_string_value(json_array_get(vols, k));
                char owner[NODES_NAME_MAX] = "";
                gb_err e = GB_ERR_INIT;
                if (!vol || nodes_name_owner(a, NODES_VOLUME, vol, owner, sizeof(owner), &e) <= 0 ||
                    strcmp(owner, target) != 0)
                    continue; /* not moved (or the index unread): it stays */
                if (volumes_move_remove(a, vol, err) < 0) /* none here: 0, nothing done */
                    return err_prefix(err, "move group %s: removing this node's copy of %s", op->id,
                                      vol);
            }
        }
    return 0;
}

int move_group_forward(app *a, journal_op *op, const replicaset_move_request *one,
                       void (*on_prepared)(void *, const json_t *), void *ctx, json_t *answers,
                       size_t *failed, gb_err *err)
{
    const json_t *members = json_object_get(op->data, "members");
    const char *target = json_string_value(json_object_get(op->data, "node"));
    if (!target)
        return err_set(err, ERR_INTERNAL, "move group %s names no node", op->id);
    replicaset_move_request rq = *one;
    rq.node = target;
    rq.with_sharers = false;
    for (size_t i = 0; i < json_array_size(members); i++) {
        const json_t *m = json_array_get(members, i);
        const char *name = member_name(m);
        *failed = i;
        char owner[NODES_NAME_MAX] = "";
        int found = nodes_name_owner(a, NODES_REPLICASET, name, owner, sizeof(owner), err);
        if (found < 0)
            return err_prefix(err, "move group %s: who owns %s", op->id, name);
        if (found && strcmp(owner, target) == 0) { /* moved already */
        } else if (found && strcmp(owner, nodes_self(a)) != 0) {
            return err_set(err, ERR_CONFLICT,
                           "move group %s: %s is on node %s, neither this node nor %s; it is "
                           "left there",
                           op->id, name, owner, target);
        } else {
            _cleanup_(replicaset_record_free) replicaset_record r = {0};
            found = replicaset_record_load(a->store, name, &r, err);
            if (found < 0)
                return -1;
            if (found && r.operation[0])
                return 1; /* its own move (or another operation) settles first */
            if (!found || replicaset_record_is_tombstone(&r) || r.state == RS_STATE_DELETED) {
                log_warn("move group %s: %s is gone from this node (deleted meanwhile); the "
                         "group goes on without it",
                         op->id, name);
                continue;
            }
            rq.group = m;
            json_t *ans = NULL;
            if (move_out_run(a, name, &rq, i == 0 ? on_prepared : NULL, ctx, &ans, err) < 0)
                return -1;
            json_array_append_new(answers, ans);
        }
        if (!journal_step_done(op, OP_STEP_FIRST_MOVED) &&
            journal_record_step(a->store, op, OP_STEP_FIRST_MOVED, err) < 0)
            log_warn("move group %s: recording its first move: %s", op->id, err->msg);
    }
    *failed = json_array_size(members);
    if (move_group_sweep(a, op, target, err) < 0)
        return -1;
    journal_mark(op, OP_STEP_ALL_MOVED);
    journal_finish(op, JOURNAL_DONE, NULL);
    json_object_del(op->data, "lastError");
    if (journal_save(a->store, op, err) < 0) {
        op->state = JOURNAL_RUNNING;
        return err_prefix(err, "move group %s: recording its end", op->id);
    }
    journal_fault(journal_kind_name(op->kind), OP_STEP_ALL_MOVED);
    log_info("move group %s: every set is on node %s", op->id, target);
    return 0;
}

int move_group_undo(app *a, journal_op *op, const char *why, gb_err *err)
{
    const json_t *members = json_object_get(op->data, "members");
    for (size_t i = 0; i < json_array_size(members); i++) {
        const char *name = member_name(json_array_get(members, i));
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        gb_err e = GB_ERR_INIT;
        if (replicaset_record_load(a->store, name, &r, &e) <= 0 || r.state != RS_STATE_RUNNING ||
            r.operation[0])
            continue;
        docker_container_state st;
        if (docker_container_state_get(a->docker, r.container_name, &st, &e) < 0 || st.running ||
            !st.exists)
            continue;
        if (replicaset_container_start(a, &r, &e) < 0)
            log_error("move group %s: starting %s again: %s", op->id, name, e.msg);
        else
            replicaset_ssh_after_start(a, &r, NULL, NULL);
    }
    journal_finish(op, JOURNAL_UNDONE, why);
    if (journal_save(a->store, op, err) < 0) {
        op->state = JOURNAL_RUNNING;
        return err_prefix(err, "move group %s: recording the undo", op->id);
    }
    log_info("move group %s: no set moved; they stay on this node: %s", op->id, why);
    return 0;
}

/* Whether the group passed its point of no return: 1 a set of it is the
 * target's, 0 none, -1 not known now. */
static int group_switched(app *a, const journal_op *op, gb_err *err)
{
    const json_t *members = json_object_get(op->data, "members");
    const char *target = json_string_value(json_object_get(op->data, "node"));
    for (size_t i = 0; target && i < json_array_size(members); i++) {
        char owner[NODES_NAME_MAX] = "";
        int found = nodes_name_owner(a, NODES_REPLICASET, member_name(json_array_get(members, i)),
                                     owner, sizeof(owner), err);
        if (found < 0)
            return -1;
        if (found && strcmp(owner, target) == 0)
            return 1;
    }
    return 0;
}

/* Some set of the group has an operation of its own still unfinished. */
static bool group_busy(app *a, const journal_op *op)
{
    const json_t *members = json_object_get(op->data, "members");
    for (size_t i = 0; i < json_array_size(members); i++) {
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        gb_err e = GB_ERR_INIT;
        if (replicaset_record_load(a->store, member_name(json_array_get(members, i)), &r, &e) > 0 &&
            r.operation[0])
            return true;
    }
    return false;
}

void move_group_settle(app *a, const journal_op *found)
{
    if (!move_group_claim(found->id))
        return; /* run now, or not due yet */
    _cleanup_(journal_op_free) journal_op op = {0};
    gb_err e = GB_ERR_INIT;
    if (journal_load(a->store, found->id, &op, &e) <= 0 || op.state != JOURNAL_RUNNING) {
        move_group_release(found->id, false);
        return;
    }
    int switched = group_switched(a, &op, &e);
    if (switched < 0 || (switched == 0 && group_busy(a, &op))) {
        move_group_release(op.id, true);
        return;
    }
    if (switched == 0) {
        bool ok =
            move_group_undo(a, &op, "gpuboxd stopped during the move, before a set changed nodes",
                            &e) == 0;
        if (!ok)
            log_warn("move group %s: %s", op.id, e.msg);
        move_group_release(op.id, !ok);
        return;
    }
    log_info("move group %s: moving the rest of the group on to node %s", op.id,
             json_string_value(json_object_get(op.data, "node")));
    _cleanup_json_ json_t *answers = json_array();
    size_t failed = 0;
    replicaset_move_request rq = {.wait = true};
    int rc = move_group_forward(a, &op, &rq, NULL, NULL, answers, &failed, &e);
    if (rc < 0) {
        const json_t *members = json_object_get(op.data, "members");
        log_warn("move group %s: %s did not move yet (tried again later): %s", op.id,
                 member_name(json_array_get(members, failed)), e.msg);
        json_object_set_new(op.data, "lastError", json_string(e.msg));
        gb_err se = GB_ERR_INIT;
        if (journal_save(a->store, &op, &se) < 0)
            log_warn("move group %s: %s", op.id, se.msg);
    }
    move_group_release(op.id, rc != 0);
}

void move_group_held(app *a, json_t *held)
{
    journal_op *ops = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    if (journal_unfinished(a->store, &ops, &n, &e) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != JOURNAL_MOVE_GROUP)
            continue;
        const json_t *members = json_object_get(ops[i].data, "members");
        for (size_t k = 0; k < json_array_size(members); k++)
            json_object_set_new(held, member_name(json_array_get(members, k)),
                                json_pack("{s:s, s:O?}", "id", ops[i].id, "node",
                                          json_object_get(ops[i].data, "node")));
    }
    journal_ops_free(ops, n);
}

int move_group_check_free(app *a, const char *name, gb_err *err)
{
    journal_op *ops = NULL;
    size_t n = 0;
    if (journal_unfinished(a->store, &ops, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ops[i].kind != JOURNAL_MOVE_GROUP)
            continue;
        const json_t *members = json_object_get(ops[i].data, "members");
        for (size_t k = 0; k < json_array_size(members) && rc == 0; k++) {
            if (strcmp(member_name(json_array_get(members, k)), name) != 0)
                continue;
            const char *node = json_string_value(json_object_get(ops[i].data, "node"));
            const char *last = json_string_value(json_object_get(ops[i].data, "lastError"));
            rc = err_set(err, ERR_STATE_CONFLICT,
                         "replica set '%s' waits to follow the sets it shares a volume with to "
                         "node %s (operation %s): node %s moves it there by itself, trying again "
                         "until node %s takes it%s%s",
                         name, node ? node : "?", ops[i].id, nodes_self(a), node ? node : "?",
                         last ? "; the last try: " : "", last ? last : "");
        }
    }
    journal_ops_free(ops, n);
    return rc;
}
