/*
 * move_settle.c - settling moves between nodes that a crash, a lost
 * connection or a node that went away left half done (move.h).
 *
 * Neither side needs the other to answer: the fleet's name index is the
 * one truth. The source hands the set's names to the target only once the
 * target holds all the data, in one transaction, while its own operation
 * runs; so, every MOVE_SETTLE_S seconds while this node has one (and once
 * at start-up, when the node has joined), for each unfinished move:
 *
 *   source ("move")     the name is the target's: finish (this node's
 *                       copy goes); else undo (the set stays, a set that
 *                       ran runs again here)
 *   target ("move-in")  the name is this node's: commit (the data is all
 *                       here); else when the source's operation is over
 *                       or gone (read from its journal in etcd, whether
 *                       or not it answers): undo; else wait
 *
 * A source lost for good before the hand-over leaves the set on the
 * source, shown "unknown" as any set of an unreachable node, and the
 * target waiting; `gpubox move --abandon ID` on the target (POST
 * .../abort) gives up its half when the admin knows the source is gone.
 * A source lost after it: the target commits by itself.
 */
#include "service/replicaset/replicaset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "service/namelock.h"
#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"

#define MOVE_SETTLE_S 3

static void settle_out(app *a, const journal_op *found)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", found->target);
    _cleanup_(journal_op_free) journal_op op = {0};
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    gb_err e = GB_ERR_INIT;
    if (journal_load(a->store, found->id, &op, &e) <= 0 || op.state != JOURNAL_RUNNING)
        return; /* finished meanwhile (the move itself, under the lock) */
    if (!move_out_cleanup_due(&op))
        return; /* a test hook holds the removal after the answer */
    int have = replicaset_record_load(a->store, op.target, &r, &e);
    if (have < 0)
        return;
    /* A move that answered leaves its old copy to this thread: that is no
     * crash's leftover, and the log says so. */
    bool answered = op.kind == JOURNAL_MOVE && journal_step_done(&op, OP_STEP_COMMITTED) &&
                    move_out_answered(op.id);
    if (op_resume_as(a, &op, have ? &r : NULL,
                     answered ? "answered; removing the old copy here" : NULL, &e) < 0)
        log_warn("move %s: still unsettled: %s", op.id, e.msg);
}

static void settle_in(app *a, const journal_op *found)
{
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", found->target);
    _cleanup_(journal_op_free) journal_op op = {0};
    gb_err e = GB_ERR_INIT;
    if (journal_load(a->store, found->id, &op, &e) <= 0 || op.state != JOURNAL_RUNNING)
        return;
    char owner[NODES_NAME_MAX] = "";
    if (nodes_name_owner(a, NODES_REPLICASET, op.target, owner, sizeof(owner), &e) < 0)
        return;
    const char *source = json_string_value(json_object_get(op.data, "source"));
    if (strcmp(owner, nodes_self(a)) == 0) {
        if (!journal_step_done(&op, OP_STEP_COPIED)) {
            log_error("move %s: %s is this node's by the name index, but its data never came "
                      "whole; left for an admin (docs/fleet.md, \"Moving a replica set\")",
                      op.id, op.target);
            return;
        }
        if (move_in_commit_op(a, &op, NULL, &e) < 0)
            log_warn("move %s: committing: %s", op.id, e.msg);
        return;
    }
    store *peer = source ? nodes_peer_store(a, source, &e) : NULL;
    if (!peer)
        return;
    _cleanup_(journal_op_free) journal_op theirs = {0};
    int there = journal_load(peer, op.id, &theirs, &e);
    if (there < 0 || (there && theirs.state == JOURNAL_RUNNING))
        return; /* the source still works on it, or cannot be read: wait */
    char why[200];
    snprintf(why, sizeof(why), "node %s %s the move", source,
             there ? (theirs.state == JOURNAL_DONE ? "finished" : "gave up") : "has no record of");
    if (theirs.state == JOURNAL_DONE && there) {
        /* Done there means the names came here: read again next time. */
        return;
    }
    if (move_in_undo_op(a, &op, why, &e) < 0)
        log_warn("move %s: undoing: %s", op.id, e.msg);
}

size_t replicaset_moves_settle(app *a)
{
    if (!a->fleet)
        return 0;
    journal_op *ops = NULL;
    size_t n = 0, moves = 0;
    gb_err e = GB_ERR_INIT;
    if (journal_unfinished(a->store, &ops, &n, &e) < 0)
        return 1; /* not read: try again */
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind == JOURNAL_MOVE)
            settle_out(a, &ops[i]);
        else if (ops[i].kind == JOURNAL_MOVE_IN)
            settle_in(a, &ops[i]);
        moves += ops[i].kind == JOURNAL_MOVE || ops[i].kind == JOURNAL_MOVE_IN;
    }
    /* Groups of moves after their sets' own (move_group_settle.c). */
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind == JOURNAL_MOVE_GROUP) {
            move_group_settle(a, &ops[i]);
            moves++;
        }
    journal_ops_free(ops, n);
    return moves;
}

/* The journal is read only while there may be a move to settle: from the
 * start, and after a move began here, until a reading finds none (a node
 * with a week of operations does not read them all every few seconds). */
static atomic_uint settle_wanted = 1;
static unsigned settle_idle_at;

void replicaset_moves_poke(void)
{
    atomic_fetch_add(&settle_wanted, 1);
}

/* ---- the thread ---------------------------------------------------------------------------- */

static pthread_mutex_t settle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t settle_wake = PTHREAD_COND_INITIALIZER;
static bool settle_stop, settle_started, settle_kicked;
static pthread_t settle_thread;

/* A source answered before removing its old copy (move_leave.c): that
 * removal starts now, not at the next round. */
void move_settle_wake(void)
{
    replicaset_moves_poke();
    pthread_mutex_lock(&settle_lock);
    settle_kicked = true;
    pthread_cond_broadcast(&settle_wake);
    pthread_mutex_unlock(&settle_lock);
}

static void *settle_run(void *arg)
{
    app *a = arg;
    pthread_mutex_lock(&settle_lock);
    while (!settle_stop) {
        pthread_mutex_unlock(&settle_lock);
        unsigned wanted = atomic_load(&settle_wanted);
        if (wanted != settle_idle_at && replicaset_moves_settle(a) == 0)
            settle_idle_at = wanted;
        pthread_mutex_lock(&settle_lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += MOVE_SETTLE_S;
        if (!settle_stop && !settle_kicked)
            pthread_cond_timedwait(&settle_wake, &settle_lock, &until);
        settle_kicked = false;
    }
    pthread_mutex_unlock(&settle_lock);
    return NULL;
}

void replicaset_moves_start(app *a)
{
    if (!a->fleet || settle_started)
        return;
    settle_stop = false;
    if (pthread_create(&settle_thread, NULL, settle_run, a) == 0)
        settle_started = true;
}

void replicaset_moves_stop(app *a)
{
    (void)a;
    replicaset_moves_wait();
    if (!settle_started)
        return;
    pthread_mutex_lock(&settle_lock);
    settle_stop = true;
    pthread_cond_broadcast(&settle_wake);
    pthread_mutex_unlock(&settle_lock);
    pthread_join(settle_thread, NULL);
    settle_started = false;
}
