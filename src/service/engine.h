/*
 * engine.h - the operation engine: every kind of multi-step change is
 * described once, in a table (op_kinds.c), and driven by the same few
 * helpers, as git's refs.c drives each ref_storage_be.
 *
 * A kind (op_kind) gives its steps in order, each an op_step_def: its
 * name, its forward (the step's work) and its back (how that work is
 * undone), and how the kind resumes after a crash. A journalled kind's
 * steps are written the same way by every kind:
 *   steps[0]            op_begin: one transaction, the target's record
 *                       naming the operation and the operation itself
 *   steps[1..n-2]       op_forward: each step's forward, then its record
 *                       (op_step, journal_record_step); fault points
 *                       <kind>:<step> and <kind>:before:<step>
 *   steps[n-1]          its forward (op_forward too), then op_close: one
 *                       transaction, the record naming no operation and the
 *                       operation done (or undone, with no step marked)
 * Going back (op_back) runs the back of every step begun, the latest
 * first: a step done, and the first not done, whose work may have begun
 * when a failure or a crash came. The kind's code says when it goes back
 * (before its point of no return) and writes the undone record. Start-up
 * (or a later call on the set) resumes an unfinished operation through
 * op_resume, which picks the kind's entry in the table. Volume operations
 * are not journalled: op_steps_run runs their steps with a fault point
 * after each (GPUBOX_FAULT=volume.create.storage), and on a failure the
 * steps done go back; start-up settles what a crash left (volume/startup.c).
 *
 * The engine does not know the kinds (no symbol of a kind's file is used
 * here): the table reaches it through app->op_kinds, and the records the
 * journalled kinds act on through app->op_target (op_target below), both
 * set by app_open from op_kinds.c, so the kinds' files use the engine and
 * never the other way round.
 *
 * A new kind: its step names below, its steps (op_step_def) and its entry
 * (an op_kind) in its own file, a line in op_kinds.c, and, if it is
 * journalled, its name in journal.h's enum journal_kind.
 */
#ifndef GPUBOX_SERVICE_ENGINE_H
#define GPUBOX_SERVICE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "service/app.h"
#include "service/journal.h"
#include "store/store.h"
#include "util/err.h"

struct replicaset_record;

/* Step names, as the journal records them (existing stores and the fault
 * tests depend on them: never rename one). */
#define OP_STEP_BEGIN "begin"
#define OP_STEP_RECORD "record"
#define OP_STEP_CONTAINER_CREATED "container-created"
#define OP_STEP_STARTED "started"
#define OP_STEP_CONTAINER_STOPPED "container-stopped"
#define OP_STEP_CONTAINER_REMOVED "container-removed"
#define OP_STEP_OLD_STOPPED "old-stopped"
#define OP_STEP_CARRY_BEGIN "carry-begin"
#define OP_STEP_CARRIED "carried"
#define OP_STEP_NEW_STARTED "new-started"
#define OP_STEP_OLD_REMOVED "old-removed"
#define OP_STEP_COMMITTED "committed"
/* A move between nodes (replicaset/move.c, move_in.c). */
#define OP_STEP_PREPARED "prepared"
#define OP_STEP_PRE_COPIED "pre-copied"
#define OP_STEP_COPIED "copied"
#define OP_STEP_SWITCHED "switched"
/* Sets sharing volumes moved together (replicaset/move_group.c). */
#define OP_STEP_FIRST_MOVED "first-moved"
#define OP_STEP_ALL_MOVED "all-moved"
/* Volume operations' fault points (not journalled). */
#define OP_STEP_STORAGE "storage"
#define OP_STEP_DOCKER "docker"
#define OP_STEP_RECORDED "recorded"
#define OP_STEP_MARKED "marked"

/* What journalled operations act on: their target's record (a replica
 * set's, replicaset/record.h), written through these, which op_kinds.c
 * fills in (op_target_records) and app_open hands over in app->op_target. */
typedef struct op_target {
    /* One compare-and-swap of r with extra in the same transaction
     * (replicaset_record_save). */
    int (*save)(app *a, struct replicaset_record *r, const store_op *extra, size_t nextra,
                gb_err *err);
    /* The first transaction was not confirmed: hand it to the doubt
     * handling (replicaset_doubt_begin_failed); always -1. */
    int (*begin_failed)(app *a, const struct replicaset_record *before,
                        const struct replicaset_record *after, gb_err *err);
    /* ops under cmps, with gone's ledger entry removed in the same
     * transaction (replicaset_record_remove_txn); *landed false: a compare failed. */
    int (*remove_txn)(app *a, const struct replicaset_record *gone, const store_cmp *cmps,
                      size_t ncmps, store_op *ops, size_t nops, bool *landed, gb_err *err);
} op_target;

/* Finish or undo an unfinished operation of this kind; r is its target's
 * record, naming op. */
typedef int (*op_resume_fn)(app *a, journal_op *op, const struct replicaset_record *r, gb_err *err);

/* A step's work, on the kind's own context (what one run of an operation
 * works with: the set's record, the operation, ...). */
typedef int (*op_step_fn)(void *ctx, gb_err *err);

/* One step of a kind. */
typedef struct op_step_def {
    const char *name;   /* an OP_STEP_* constant */
    op_step_fn forward; /* its work, done before the step is recorded; NULL: nothing but the
                           record (a point of no return) */
    op_step_fn back;    /* undoes what forward may have done, recorded or not (a crash can come
                           between the two), so it is safe to repeat; NULL: nothing to undo */
} op_step_def;

typedef struct op_kind {
    const char *name;         /* the table's name: "create", "restart-same", "volume.create" */
    bool journalled;          /* false: volume operations (fault points only) */
    enum journal_kind kind;   /* journalled: the journal's kind */
    const char *mode;         /* journalled: the op's data.mode that picks this entry among
                                 the kind's ("same" for a restart on the same cards); NULL:
                                 any other */
    const op_step_def *steps; /* in order; the first and the last are the operation's first
                                 and last transactions (op_begin, op_close), whose work
                                 (forward) the kind's own code does around them */
    size_t nsteps;
    op_resume_fn resume; /* journalled: how it resumes after a crash */
} op_kind;

/* An op_kind's steps, from an array of op_step_def. */
#define OP_STEPS(list) .steps = (list), .nsteps = sizeof(list) / sizeof((list)[0])

/* The table (op_kinds.c): every kind, NULL-terminated; and what the
 * journalled ones act on. */
extern const op_kind *const op_kinds[];
extern const op_target op_target_records;

/* The entry of a journalled operation (its kind, and data.mode), NULL if
 * the table has none. */
const op_kind *op_kind_of(const op_kind *const *kinds, const journal_op *op);

/* A new operation of kind k on target, every step listed (journal_op_init). */
int op_init(journal_op *op, const op_kind *k, const char *target, json_t *data, gb_err *err);

/* The first transaction: r names op, op has its first step done, written
 * with extra (may be NULL/0) as one compare-and-swap on r
 * (app->op_target's save); then the fault point <kind>:<first step>. When the
 * store did not confirm it and before is given (r as it was loaded), the
 * write is handed to the doubt handling (op_target's begin_failed) and the
 * error says so: the caller gives back nothing then (err->code stays
 * ERR_STORE_UNAVAILABLE). */
int op_begin(app *a, journal_op *op, struct replicaset_record *r,
             const struct replicaset_record *before, const store_op *extra, size_t nextra,
             gb_err *err);
/* A step between the first and the last: its work is done, record it. */
int op_step(app *a, journal_op *op, const char *step, gb_err *err);
/* The last transaction: r (naming no operation) with op in state (why:
 * the error for undone or failed) and extra (may be NULL/0); going DONE,
 * the kind's last step is marked, and its fault point follows the write.
 * op may be NULL (a create from before the journal): r alone. On failure
 * op is running again, as the store still has it. */
int op_close(app *a, journal_op *op, enum journal_state state, const char *why,
             struct replicaset_record *r, const store_op *extra, size_t nextra, gb_err *err);
/* The same for a last transaction that is not a record save but removes
 * the record of gone: ops (room for one more, the operation's put) under
 * cmp, with gone's ledger entry removed in the same transaction. 1
 * written, 0 cmp failed (a conflict: nothing written), -1 error. */
int op_close_txn(app *a, journal_op *op, enum journal_state state, const char *why,
                 const struct replicaset_record *gone, const store_cmp *cmp, store_op *ops,
                 size_t nops, gb_err *err);

/* Forward from wherever op got to: for each step after the first that is
 * not done, its forward; each step between the first and the last is then
 * recorded (op_step). The last step's forward is the work before the
 * closing transaction, which the caller writes (op_close). Stops at the
 * first failure: -1 when a step's work failed (the caller may go back),
 * -2 when its work was done but recording it failed (the operation stays
 * where the store has it, and resumes from there). */
#define OP_FORWARD_WORK_FAILED (-1)
#define OP_FORWARD_RECORD_FAILED (-2)
int op_forward(app *a, const op_kind *k, journal_op *op, void *ctx, gb_err *err);

/* Back over what op began, the latest first: the back of every step done
 * and of the first step not done (its work may have begun). Stops at the
 * first back that fails, with its error; the caller then leaves the
 * operation to be tried again. The first step's back is the caller's
 * (its closing transaction, undone). */
int op_back(const op_kind *k, const journal_op *op, void *ctx, gb_err *err);

/* An unjournalled kind's steps (volume operations), from steps[from] on
 * (the ones before count as done): each one's forward, then its fault
 * point <kind>.<step>. When a forward fails (it cleans up its own part
 * first), the steps done go back, the latest first (op_steps_back), and its
 * error is returned. The work after the last step (the record's last
 * write) is the caller's; when it fails, op_steps_back(k, k->nsteps, ctx). */
int op_steps_run(const op_kind *k, size_t from, void *ctx, gb_err *err);
/* Back over steps[upto-1] down to steps[0], stopping at the first back
 * that fails (each back logs its own trouble: start-up tries again). */
void op_steps_back(const op_kind *k, size_t upto, void *ctx);

/* Resume or undo one unfinished operation through the table (start-up, or
 * a call on a set whose record names one). r is its target's record (NULL
 * when the store has none): when it no longer names op, op is marked
 * failed and left alone. */
int op_resume(app *a, journal_op *op, const struct replicaset_record *r, gb_err *err);
/* The same, logged with why it is settled now instead of as a crash's
 * leftover (why NULL: as op_resume). */
int op_resume_as(app *a, journal_op *op, const struct replicaset_record *r, const char *why,
                 gb_err *err);

/* Every fault point of every kind in kinds, one a line: the GPUBOX_FAULT
 * value, a tab, the entry's name ("restart:begin\trestart-same"). */
void op_print_fault_points(const op_kind *const *kinds, FILE *out);

#endif
