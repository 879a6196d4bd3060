/*
 * engine.h - the operation engine: every kind of multi-step change is
 * described once, in a table (op_kinds.c), and driven by the same few
 * helpers, as git's refs.c drives each ref_storage_be.
 *
 * A kind (op_kind) gives its step names in order, what it does at each
 * (forward, and back when it fails before its point of no return), and how
 * it resumes after a crash. A journalled kind's steps are written the same
 * way by every kind:
 *   steps[0]            op_begin: one transaction, the target's record
 *                       naming the operation and the operation itself
 *   steps[1..n-2]       op_step: the step's work done, then its record
 *                       (journal_record_step); fault points <kind>:<step>
 *                       and <kind>:before:<step>
 *   steps[n-1]          op_close: one transaction, the record naming no
 *                       operation and the operation done (or undone, with
 *                       no step marked)
 * and start-up (or a later call on the set) resumes an unfinished one
 * through op_resume, which picks the kind's entry in the table. Volume
 * operations are not journalled; their entries name the steps at which
 * they have fault points (GPUBOX_FAULT=volume.create.storage).
 *
 * The engine does not know the kinds (no symbol of a kind's file is used
 * here): the table reaches it through app->op_kinds, set by app_open, so
 * the kinds' files use the engine and never the other way round.
 *
 * A new kind: its step names below, its entry (an op_kind) in its own
 * file, a line in op_kinds.c, and, if it is journalled, its name in
 * journal.h's enum journal_kind.
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

struct rs_record;

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
/* Volume operations' fault points (not journalled). */
#define OP_STEP_STORAGE "storage"
#define OP_STEP_DOCKER "docker"
#define OP_STEP_RECORDED "recorded"
#define OP_STEP_MARKED "marked"

/* Finish or undo an unfinished operation of this kind; r is its target's
 * record, naming op. */
typedef int (*op_resume_fn)(app *a, journal_op *op, const struct rs_record *r, gb_err *err);

typedef struct op_kind {
    const char *name;         /* the table's name: "create", "restart-same", "volume.create" */
    bool journalled;          /* false: volume operations (fault points only) */
    enum journal_kind kind;   /* journalled: the journal's kind */
    const char *mode;         /* journalled: the op's data.mode that picks this entry among
                                 the kind's ("same" for a restart on the same cards); NULL:
                                 any other */
    const char *const *steps; /* in order */
    size_t nsteps;
    const char *no_return; /* the step from which it only goes forward; NULL: forward
                              whenever it can (its docs say when it is undone) */
    const char *forward;   /* in words: what the steps do */
    const char *back;      /* in words: how it is undone */
    op_resume_fn resume;   /* journalled: how it resumes after a crash */
} op_kind;

/* An op_kind's steps, from an array of names. */
#define OP_STEPS(list) .steps = (list), .nsteps = sizeof(list) / sizeof((list)[0])

/* The table (op_kinds.c): every kind, NULL-terminated. */
extern const op_kind *const op_kinds[];

/* The entry of a journalled operation (its kind, and data.mode), NULL if
 * the table has none. */
const op_kind *op_kind_of(const op_kind *const *kinds, const journal_op *op);

/* A new operation of kind k on target, every step listed (journal_op_init). */
int op_init(journal_op *op, const op_kind *k, const char *target, json_t *data, gb_err *err);

/* The first transaction: r names op, op has its first step done, written
 * with extra (may be NULL/0) as one compare-and-swap on r
 * (rs_record_save); then the fault point <kind>:<first step>. When the
 * store did not confirm it and before is given (r as it was loaded), the
 * write is handed to the doubt handling (doubt.h: rs_doubt_begin_failed) and the
 * error says so: the caller gives back nothing then (err->code stays
 * ERR_STORE_UNAVAILABLE). */
int op_begin(app *a, journal_op *op, struct rs_record *r, const struct rs_record *before,
             const store_op *extra, size_t nextra, gb_err *err);
/* A step between the first and the last: its work is done, record it. */
int op_step(app *a, journal_op *op, const char *step, gb_err *err);
/* The last transaction: r (naming no operation) with op in state (why:
 * the error for undone or failed) and extra (may be NULL/0); going DONE,
 * the kind's last step is marked, and its fault point follows the write.
 * op may be NULL (a create from before the journal): r alone. On failure
 * op is running again, as the store still has it. */
int op_close(app *a, journal_op *op, enum journal_state state, const char *why, struct rs_record *r,
             const store_op *extra, size_t nextra, gb_err *err);
/* The same for a last transaction that is not a record save: ops (room for
 * one more, the operation's put) under cmp. 1 written, 0 cmp failed (a
 * conflict: nothing written), -1 error. */
int op_close_txn(app *a, journal_op *op, enum journal_state state, const char *why,
                 const store_cmp *cmp, store_op *ops, size_t nops, gb_err *err);

/* Resume or undo one unfinished operation through the table (start-up, or
 * a call on a set whose record names one). r is its target's record (NULL
 * when the store has none): when it no longer names op, op is marked
 * failed and left alone. */
int op_resume(app *a, journal_op *op, const struct rs_record *r, gb_err *err);

/* Fault injection at a step of an unjournalled kind:
 * GPUBOX_FAULT=<kind name>.<step>. */
void op_fault(const op_kind *k, const char *step);

/* Every fault point of every kind in kinds, one a line: the GPUBOX_FAULT
 * value, a tab, the entry's name ("restart:begin\trestart-same"). */
void op_print_fault_points(const op_kind *const *kinds, FILE *out);

#endif
