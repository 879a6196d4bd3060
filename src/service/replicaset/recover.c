/*
 * recover.c - finishing or undoing operations that did not end:
 * at start-up for every unfinished operation in the journal (before the
 * rest of reconciliation), and on a later call on a set whose record still
 * names one (an operation that could go neither way when it ran).
 *
 * Each kind decides in its own file, reached through the operation
 * engine's table (op_resume, engine.h):
 *   create               container exists: started, running; else undone
 *   patch, rollback,     before carry-begin: undone; from carry-begin on:
 *   restart (new cards)  forward (version.c)
 *   restart (same cards) forward: the container is started
 *   stop, delete         forward
 * An operation whose set's record no longer names it (changed by hand) is
 * marked failed and left alone: guessing could hand a card out twice.
 *
 * Finished operations stay in the journal for GET /api/v1/operations/{id};
 * start-up removes those older than JOURNAL_KEEP_S.
 */
#include "service/replicaset/replicaset.h"

#include <string.h>

#include "service/journal.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

#define JOURNAL_KEEP_S (7L * 24 * 3600)

/* r names an operation: settle it, or forget it when it already ended. */
static void replicaset_resume_named(app *a, const char *name, replicaset_record *r)
{
    journal_op op = {0};
    gb_err e = GB_ERR_INIT;
    int found = journal_load(a->store, r->operation, &op, &e);
    if (found < 0) {
        log_warn("replica set %s: cannot read operation %s: %s", name, r->operation, e.msg);
        return;
    }
    if (found && op.state == JOURNAL_RUNNING) {
        if (op_resume(a, &op, r, &e) < 0)
            log_warn("replica set %s: operation %s is still pending: %s", name, op.id, e.msg);
    } else {
        /* It ended (or is gone): the record only kept its name by mistake. */
        log_warn("replica set %s: forgetting operation %s, which is %s", name, r->operation,
                 found ? journal_state_name(op.state) : "not in the journal");
        r->operation[0] = '\0';
        if (replicaset_record_save(a, r, NULL, 0, &e) < 0)
            log_warn("replica set %s: %s", name, e.msg);
    }
    journal_op_free(&op);
}

int replicaset_load_settled(app *a, const char *name, replicaset_record *r, gb_err *err)
{
    /* First what a store outage left in doubt (replicaset/doubt.c), then what a
     * crash or a failure left unfinished (the journal). */
    if (name_check_replicaset(name, err) < 0 || replicaset_doubt_resolve(a, name, err) < 0)
        return -1;
    for (int attempt = 0;; attempt++) {
        int found = replicaset_record_load_visible(a->store, name, r, err);
        if (found < 0) {
            if (err && err->code == ERR_STORE_UNAVAILABLE)
                err_prefix(err, "replica set '%s': nothing was changed", name);
            return -1;
        }
        if (!found || replicaset_record_is_tombstone(r)) {
            replicaset_record_free(r);
            return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
        }
        if (!r->operation[0])
            return 0;
        if (attempt == 1) {
            err_set(err, ERR_STATE_CONFLICT,
                    "replica set '%s' has an unfinished operation %s that could not be settled; "
                    "see operation %s",
                    name, r->operation, r->operation);
            replicaset_record_free(r);
            return -1;
        }
        replicaset_resume_named(a, name, r);
        replicaset_record_free(r);
    }
}

int replicaset_recover(app *a, gb_err *err)
{
    journal_op *ops = NULL;
    size_t n = 0;
    if (journal_unfinished(a->store, &ops, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        gb_err e = GB_ERR_INIT;
        /* A move needs the fleet, which the node joins after this: its
         * thread settles it then (move_settle.c); a group of moves too
         * (move_group_settle.c: no record names it). */
        if (ops[i].kind == JOURNAL_MOVE_IN || ops[i].kind == JOURNAL_MOVE_GROUP ||
            (ops[i].kind == JOURNAL_MOVE && !a->fleet))
            continue;
        int found = replicaset_record_load(a->store, ops[i].target, &r, &e);
        if (found < 0 || op_resume(a, &ops[i], found ? &r : NULL, &e) < 0)
            log_error("recover: operation %s (%s of %s): %s", ops[i].id,
                      journal_kind_name(ops[i].kind), ops[i].target, e.msg);
    }
    journal_ops_free(ops, n);
    size_t pruned = 0;
    gb_err e = GB_ERR_INIT;
    if (journal_prune(a->store, JOURNAL_KEEP_S, &pruned, &e) < 0)
        log_warn("recover: %s", e.msg);
    else if (pruned)
        log_info("recover: removed %zu finished operation(s) older than 7 days", pruned);
    return 0;
}

/* May the caller read op? A user reads only the operations on what they
 * own: by the owner the record names (the target's owner when it began),
 * so an operation stays its owner's after the set is purged and its name
 * taken by someone else, and is not the next user's of the owner's name.
 * A record written before owners were recorded is checked by its kind's
 * target: every journalled kind's is a replica set (volume operations are
 * not journalled and have no record). 1, 0, -1. */
static int replicaset_operation_visible(app *a, const journal_op *op, gb_err *err)
{
    if (!users_caller_is_user())
        return 1;
    if (op->owner[0]) /* and not an earlier user's of the caller's name */
        return users_caller_sees(op->owner) &&
               time_iso_parse(op->create_time) >=
                   (time_t)(users_created_ms(a->users, users_caller_current()->name) / 1000);
    replicaset_record r = {0};
    int seen = replicaset_record_load_visible(a->store, op->target, &r, err);
    replicaset_record_free(&r);
    return seen;
}

int replicaset_operation(app *a, const char *id, json_t **out, gb_err *err)
{
    if (!journal_id_valid(id))
        return err_set(err, ERR_INVALID_PARAMS,
                       "operation id '%.64s' is malformed; ids look like "
                       "20260512T101530123-a1b2c3d4",
                       id ? id : "");
    _cleanup_(journal_op_free) journal_op op = {0};
    int found = journal_load(a->store, id, &op, err);
    if (found > 0)
        found =
            replicaset_operation_visible(a, &op, err); /* someone else's: as unknown as their set */
    if (found < 0)
        return -1;
    if (!found)
        return err_set(err, ERR_NOT_FOUND, "no operation '%s' (finished ones are kept 7 days)", id);
    *out = journal_op_to_json(&op);
    uint64_t bytes = 0;
    double seconds = 0;
    if (*out && (op.kind == JOURNAL_MOVE || op.kind == JOURNAL_MOVE_IN) &&
        move_progress_get(op.id, &bytes, &seconds))
        /* A move's data so far (docs/fleet.md): the stream's bytes and rate. */
        json_object_set_new(*out, "progress",
                            json_pack("{s:I, s:I, s:f, s:f}", "current", (json_int_t)bytes, "bytes",
                                      (json_int_t)bytes, "seconds", seconds, "bytesPerSecond",
                                      seconds > 0 ? (double)bytes / seconds : 0.0));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
