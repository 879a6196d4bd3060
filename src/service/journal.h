/*
 * journal.h - the operation journal: every multi-step change (create, patch,
 * restart, rollback, stop, delete) writes an operation record before it
 * touches anything, and marks each step done as it completes, so a daemon
 * that dies part way can, at its next start, resume or undo exactly what
 * was in flight.
 *
 * An operation lives at keys_operation(id) (keys.h):
 *   {"id": "20260512T101530123-a1b2c3d4", "kind": "patch", "target": "foo",
 *    "owner": "alice",
 *    "state": "running" | "done" | "undone" | "failed",
 *    "steps": [{"name": "begin", "done": true, "time": "...Z", "ms": 3.1},
 *              {"name": "container-created", "done": false, "time": null,
 *               "ms": null}, ...],
 *    "data": {...what the kind needs to resume or undo...},
 *    "createTime": "...Z", "updateTime": "...Z", "error": ""}
 * Every step the operation will take is listed from the start, so its
 * progress shows. Ids sort by creation time. A step's "ms" is how long it
 * took, from the moment the step before it was recorded (for the first,
 * from journal_op_init or the load that resumed the operation) to its own
 * record written, so a step's work and its journal write count together
 * and the steps of one run add up to the operation's time. A step marked
 * in memory and written by the caller's own transaction (journal_mark)
 * counts up to the mark, plus that transaction once the caller says it
 * landed (journal_step_written). A record holds a step's write time from
 * the record's next write on, so the last step's "ms" lacks its own write.
 * Each step also logs its time, split into work and write, at debug level.
 *
 * This module knows the record's form and its place in the store; what each
 * kind does, and how it resumes, is the operation engine's table (engine.h,
 * op_kinds.c), each kind in its own file. Each step's work must be
 * idempotent: after a crash it may run again.
 *
 * Fault injection (for tests): with GPUBOX_FAULT=<kind>:<step> in its
 * environment, gpuboxd exits at once with status 99 right after that step is
 * recorded; with GPUBOX_FAULT=<kind>:before:<step> right before the record
 * is written (the step's work done, the journal not knowing it yet).
 */
#ifndef GPUBOX_SERVICE_JOURNAL_H
#define GPUBOX_SERVICE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "store/store.h"
#include "util/err.h"
#include "util/fault.h"
#include "util/names.h"

#define JOURNAL_ID_MAX 40
#define JOURNAL_STEP_MAX 32
#define JOURNAL_TIME_MAX 32
#define JOURNAL_FAULT_ENV FAULT_ENV
#define JOURNAL_FAULT_EXIT FAULT_EXIT_CODE

enum journal_kind {
    JOURNAL_CREATE,
    JOURNAL_PATCH,
    JOURNAL_RESTART,
    JOURNAL_ROLLBACK,
    JOURNAL_DELETE,
    JOURNAL_STOP,
    JOURNAL_MOVE,       /* a set leaving this node (replicaset/move.c) */
    JOURNAL_MOVE_IN,    /* a set arriving on this node (replicaset/move_in.c) */
    JOURNAL_MOVE_GROUP, /* sets sharing volumes leaving this node together
                           (replicaset/move_group.c) */
};

enum journal_state { JOURNAL_RUNNING, JOURNAL_DONE, JOURNAL_UNDONE, JOURNAL_FAILED };

typedef struct journal_step {
    char name[JOURNAL_STEP_MAX];
    bool done;
    char time[JOURNAL_TIME_MAX]; /* "" until done */
    double ms;                   /* how long it took; < 0 until done (or unknown) */
} journal_step;

typedef struct journal_op {
    char id[JOURNAL_ID_MAX];
    enum journal_kind kind;
    char target[NAME_MAX_LEN + 1]; /* the replica set */
    char owner[NAME_MAX_LEN + 1];  /* its owner when the operation began: who may read it
                                      (docs/security.md, "Operations"); "" in records
                                      written before owners were recorded */
    enum journal_state state;
    journal_step *steps;
    size_t nsteps;
    json_t *data; /* object, owned; kind-specific */
    char create_time[JOURNAL_TIME_MAX];
    char update_time[JOURNAL_TIME_MAX];
    char error[512];  /* why it was undone or failed; "" otherwise */
    int64_t since_ns; /* time_mono_ns: when the last step ended (in memory only) */
} journal_op;

const char *journal_kind_name(enum journal_kind k);
const char *journal_state_name(enum journal_state s);

/* A new operation in state running with a fresh id, every step listed and
 * not done. data (may be NULL: an empty object) is stolen. Nothing is
 * written yet. */
int journal_op_init(journal_op *op, enum journal_kind kind, const char *target,
                    const char *const *steps, size_t nsteps, json_t *data, gb_err *err);
void journal_op_free(journal_op *op);

json_t *journal_op_to_json(const journal_op *op);
int journal_op_from_json(const json_t *j, journal_op *out, gb_err *err);

bool journal_step_done(const journal_op *op, const char *step);
/* Mark step done in memory (for steps recorded in the caller's own
 * transaction); a step already done stays as it was. An unknown step name
 * is a programming error, logged. */
void journal_mark(journal_op *op, const char *step);
/* The caller's transaction that wrote step (marked with journal_mark)
 * landed: its time since the mark counts in the step's. */
void journal_step_written(journal_op *op, const char *step);
/* Set the final state (and the error saying why, for undone or failed). */
void journal_finish(journal_op *op, enum journal_state state, const char *error);

/* The put that writes op, for the caller's transaction: *value is malloc'd
 * (free it after the transaction), key is filled (STORE_KEY_MAX bytes). */
int journal_txn_op(journal_op *op, char key[STORE_KEY_MAX], char **value, store_op *out,
                   gb_err *err);
/* Write op as it is now. */
int journal_save(store *s, journal_op *op, gb_err *err);
/* Mark step done and write op: the unit of progress. Fault injection
 * happens around the write (see above). */
int journal_record_step(store *s, journal_op *op, const char *step, gb_err *err);

/* 1 found (out filled), 0 absent, -1 error. */
int journal_load(store *s, const char *id, journal_op *out, gb_err *err);
/* Every operation still running, oldest first; free with journal_ops_free. */
int journal_unfinished(store *s, journal_op **out, size_t *n, gb_err *err);
void journal_ops_free(journal_op *ops, size_t n);
/* Delete finished operations whose last change is older than max_age_s;
 * *deleted (may be NULL) gets how many. */
int journal_prune(store *s, long max_age_s, size_t *deleted, gb_err *err);

/* A new id, "20260512T101530123-a1b2c3d4": the time to the millisecond, so
 * ids sort by creation, then random bits, so two operations never share
 * one (journal_op_init uses it; so do image pulls, service/images/). */
void journal_new_id(char id[JOURNAL_ID_MAX]);

/* A valid operation id: 1-39 of [A-Za-z0-9._-]. */
bool journal_id_valid(const char *id);

/* Fault injection (util/fault.h): exit(JOURNAL_FAULT_EXIT) at once, without
 * clean-up, when GPUBOX_FAULT is "<kind>:<step>". */
void journal_fault(const char *kind, const char *step);

#endif
