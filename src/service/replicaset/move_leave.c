/*
 * move_leave.c - the source of a move after its answer (move.c): the set
 * is the target's, and this node's old copy goes in the background.
 *
 * A move of a set alone answers once the target committed (journal step
 * `committed`, the fleet's name index saying the target owns the set): the
 * removal of the old container, its volumes (a loop device each: about a
 * second) and the record is left to the settle thread (move_settle.c),
 * woken at once, which runs the same finish as after a crash
 * (move_out_resume). Until it ends:
 *
 *   the pools       the cards, ports and cores go back before the answer
 *                   (the container stopped before the copy): the record
 *                   is written without them first (not the ledger: that
 *                   counts the set on the target already), so a crash in between
 *                   rebuilds pools that agree, and the finish gives back
 *                   nothing twice
 *   the lists       the record, still here, is not listed: the set is the
 *                   target's (move_out_left)
 *   a move back     the set asked to come back here before the old copy
 *                   went: the prepare removes the old copy first, under
 *                   the set's name lock (move_out_finish_left)
 *   a crash         the journal still says `committed` and the name is the
 *                   target's: the next start finishes the removal
 *
 * Test hook: GPUBOX_MOVE_CLEANUP_DELAY_MS=N holds the settle thread's
 * removal N ms after an answer (a move back or a call on the set still
 * finishes it at once), so tests can look at the window in between.
 */
#include "service/replicaset/replicaset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

static _Atomic int64_t cleanup_not_before_ns;

void move_out_release_early(app *a, journal_op *op, replicaset_record *r)
{
    if (!r->ngpus && !r->nports && !r->ncpuset)
        return;
    replicaset_record held;
    replicaset_record_copy(r, &held);
    replicaset_record_clear_holdings(r);
    gb_err e = GB_ERR_INIT;
    if (replicaset_record_save_unledgered(a, r, &e) < 0) {
        /* The record still holds them: the finish gives them back. */
        log_warn("move %s: the cards and ports of %s go back when its old copy is removed: %s",
                 op->id, r->name, e.msg);
        replicaset_record_free(r);
        replicaset_record_copy(&held, r);
    } else {
        replicaset_alloc_give_back(a, &held);
    }
    replicaset_record_free(&held);
}

/* The moves this process answered whose old copy is still to go: the
 * settle thread's log tells them from a crash's leftovers (a ring: an id
 * pushed out only changes what one log line says). */
#define ANSWERED_MAX 32
static pthread_mutex_t answered_lock = PTHREAD_MUTEX_INITIALIZER;
static char answered[ANSWERED_MAX][JOURNAL_ID_MAX];
static size_t answered_next;

bool move_out_answered(const char *op_id)
{
    pthread_mutex_lock(&answered_lock);
    bool found = false;
    for (size_t i = 0; i < ANSWERED_MAX && !found; i++)
        found = answered[i][0] && strcmp(answered[i], op_id) == 0;
    pthread_mutex_unlock(&answered_lock);
    return found;
}

void move_out_cleanup_soon(const char *op_id)
{
    pthread_mutex_lock(&answered_lock);
    snprintf(answered[answered_next], JOURNAL_ID_MAX, "%s", op_id);
    answered_next = (answered_next + 1) % ANSWERED_MAX;
    pthread_mutex_unlock(&answered_lock);
    /* Test hook (the file's comment). */
    const char *delay = getenv("GPUBOX_MOVE_CLEANUP_DELAY_MS");
    if (delay && *delay)
        atomic_store(&cleanup_not_before_ns, time_mono_ns() + atoll(delay) * 1000000LL);
    move_settle_wake();
}

bool move_out_cleanup_due(const journal_op *op)
{
    return op->kind != JOURNAL_MOVE || !journal_step_done(op, OP_STEP_COMMITTED) ||
           time_mono_ns() >= atomic_load(&cleanup_not_before_ns);
}

/* The move r's record names, when it is this node's and past the point of
 * no return (its old copy waiting to go): 1 with *op loaded, 0 none. */
static int move_out_left_op(app *a, const replicaset_record *r, journal_op *op, gb_err *err)
{
    if (!a->fleet || !r->operation[0])
        return 0;
    int found = journal_load(a->store, r->operation, op, err);
    if (found <= 0)
        return found;
    if (op->kind == JOURNAL_MOVE && op->state == JOURNAL_RUNNING &&
        journal_step_done(op, OP_STEP_SWITCHED))
        return 1;
    journal_op_free(op);
    *op = (journal_op){0};
    return 0;
}

bool move_out_left(app *a, const replicaset_record *r)
{
    _cleanup_(journal_op_free) journal_op op = {0};
    gb_err e = GB_ERR_INIT;
    return move_out_left_op(a, r, &op, &e) > 0;
}

int move_out_finish_left(app *a, const char *name, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    _cleanup_(journal_op_free) journal_op op = {0};
    int found = replicaset_record_load(a->store, name, &r, err);
    if (found <= 0)
        return found;
    found = move_out_left_op(a, &r, &op, err);
    if (found <= 0)
        return found;
    log_info("move %s: %s comes back before its old copy here was removed: removing it first",
             op.id, name);
    if (op_resume(a, &op, &r, err) < 0)
        return err_prefix(err, "node %s still removes the copy of %s that moved away (move %s)",
                          nodes_self(a), name, op.id);
    return 0;
}
