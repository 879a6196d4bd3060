/*
 * engine.c - the operation engine's helpers (see engine.h): starting an
 * operation of a kind, its first transaction, a step, its last
 * transaction, and resuming an unfinished one through the table of kinds.
 *
 * Every kind's record and operation go to the store together in the first
 * and the last transaction, so the store never says a set is in an
 * operation the journal does not know, nor the other way round.
 */
#include "service/engine.h"

#include <stdio.h>
#include <string.h>

/* The record's layout only (its operation and owner fields): every
 * function on it is reached through app->op_target. */
#include "service/replicaset/record.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/log.h"

#define OP_EXTRA_MAX 3

const op_kind *op_kind_of(const op_kind *const *kinds, const journal_op *op)
{
    const char *mode = json_string_value(json_object_get(op->data, "mode"));
    const op_kind *any = NULL;
    for (size_t i = 0; kinds && kinds[i]; i++) {
        const op_kind *k = kinds[i];
        if (!k->journalled || k->kind != op->kind)
            continue;
        if (!k->mode && !any)
            any = k;
        else if (k->mode && mode && strcmp(k->mode, mode) == 0)
            return k;
    }
    return any;
}

#define OP_STEPS_MAX 16

int op_init(journal_op *op, const op_kind *k, const char *target, json_t *data, gb_err *err)
{
    const char *names[OP_STEPS_MAX];
    if (k->nsteps > OP_STEPS_MAX) {
        json_decref(data);
        return err_set(err, ERR_INTERNAL, "operation kind %s has too many steps", k->name);
    }
    for (size_t i = 0; i < k->nsteps; i++)
        names[i] = k->steps[i].name;
    return journal_op_init(op, k->kind, target, names, k->nsteps, data, err);
}

int op_forward(app *a, const op_kind *k, journal_op *op, void *ctx, gb_err *err)
{
    for (size_t i = 1; i < k->nsteps; i++) {
        const op_step_def *s = &k->steps[i];
        if (journal_step_done(op, s->name))
            continue;
        if (s->forward && s->forward(ctx, err) < 0)
            return OP_FORWARD_WORK_FAILED;
        if (i + 1 < k->nsteps && op_step(a, op, s->name, err) < 0)
            return OP_FORWARD_RECORD_FAILED;
    }
    return 0;
}

int op_back(const op_kind *k, const journal_op *op, void *ctx, gb_err *err)
{
    size_t begun = 1;
    while (begun < k->nsteps && journal_step_done(op, k->steps[begun].name))
        begun++;
    if (begun == k->nsteps)
        begun--;
    for (size_t i = begun; i >= 1; i--) {
        const op_step_def *s = &k->steps[i];
        if (s->back && s->back(ctx, err) < 0)
            return -1;
    }
    return 0;
}

/* ops gets extra, then room for the operation's put. */
static int op_gather(store_op *ops, const store_op *extra, size_t nextra, gb_err *err)
{
    if (nextra > OP_EXTRA_MAX)
        return err_set(err, ERR_INTERNAL, "an operation's transaction has too many writes");
    for (size_t i = 0; i < nextra; i++)
        ops[i] = extra[i];
    return 0;
}

int op_begin(app *a, journal_op *op, struct replicaset_record *r,
             const struct replicaset_record *before, const store_op *extra, size_t nextra,
             gb_err *err)
{
    const char *first = op->steps[0].name;
    char okey[STORE_KEY_MAX];
    _cleanup_free_ char *oval = NULL;
    store_op ops[OP_EXTRA_MAX + 1];
    if (op_gather(ops, extra, nextra, err) < 0)
        return -1;
    snprintf(r->operation, sizeof(r->operation), "%s", op->id);
    snprintf(op->owner, sizeof(op->owner), "%s", r->owner); /* who may read it */
    journal_mark(op, first);
    if (journal_txn_op(op, okey, &oval, &ops[nextra], err) < 0)
        return -1;
    if (a->op_target->save(a, r, ops, nextra + 1, err) < 0)
        return before ? a->op_target->begin_failed(a, before, r, err) : -1;
    journal_step_written(op, first);
    journal_fault(journal_kind_name(op->kind), first);
    return 0;
}

int op_step(app *a, journal_op *op, const char *step, gb_err *err)
{
    return journal_record_step(a->store, op, step, err);
}

/* op goes to state; done, its last step is marked. */
static const char *op_finish(journal_op *op, enum journal_state state, const char *why)
{
    const char *last = op->steps[op->nsteps - 1].name;
    if (state == JOURNAL_DONE)
        journal_mark(op, last);
    journal_finish(op, state, why);
    return last;
}

/* The last transaction landed. */
static void op_closed(journal_op *op, enum journal_state state, const char *last)
{
    if (state != JOURNAL_DONE)
        return;
    journal_step_written(op, last);
    journal_fault(journal_kind_name(op->kind), last);
}

int op_close(app *a, journal_op *op, enum journal_state state, const char *why,
             struct replicaset_record *r, const store_op *extra, size_t nextra, gb_err *err)
{
    r->operation[0] = '\0';
    if (!op)
        return a->op_target->save(a, r, extra, nextra, err);
    char okey[STORE_KEY_MAX];
    _cleanup_free_ char *oval = NULL;
    store_op ops[OP_EXTRA_MAX + 1];
    if (op_gather(ops, extra, nextra, err) < 0)
        return -1;
    const char *last = op_finish(op, state, why);
    if (journal_txn_op(op, okey, &oval, &ops[nextra], err) < 0 ||
        a->op_target->save(a, r, ops, nextra + 1, err) < 0) {
        op->state = JOURNAL_RUNNING;
        return -1;
    }
    op_closed(op, state, last);
    return 0;
}

int op_close_txn(app *a, journal_op *op, enum journal_state state, const char *why,
                 const struct replicaset_record *gone, const store_cmp *cmp, store_op *ops,
                 size_t nops, gb_err *err)
{
    char okey[STORE_KEY_MAX];
    _cleanup_free_ char *oval = NULL;
    const char *last = NULL;
    if (op) {
        last = op_finish(op, state, why);
        if (journal_txn_op(op, okey, &oval, &ops[nops++], err) < 0) {
            op->state = JOURNAL_RUNNING;
            return -1;
        }
    }
    bool ok = false;
    int rc = a->op_target->remove_txn(a, gone, cmp, 1, ops, nops, &ok, err);
    if (rc < 0 || !ok) {
        if (op)
            op->state = JOURNAL_RUNNING;
        return rc < 0 ? -1 : 0;
    }
    if (op)
        op_closed(op, state, last);
    return 1;
}

int op_resume(app *a, journal_op *op, const struct replicaset_record *r, gb_err *err)
{
    return op_resume_as(a, op, r, NULL, err);
}

int op_resume_as(app *a, journal_op *op, const struct replicaset_record *r, const char *why,
                 gb_err *err)
{
    if (!r || strcmp(r->operation, op->id) != 0) {
        journal_finish(op, JOURNAL_FAILED,
                       "the replica set's record no longer names this operation; left alone");
        log_error("recover: operation %s (%s of %s): %s", op->id, journal_kind_name(op->kind),
                  op->target, op->error);
        return journal_save(a->store, op, err);
    }
    if (why)
        log_info("operation %s (%s of %s): %s", op->id, journal_kind_name(op->kind), op->target,
                 why);
    else
        log_info("recover: operation %s (%s of %s) did not finish; settling it", op->id,
                 journal_kind_name(op->kind), op->target);
    const op_kind *k = op_kind_of(a->op_kinds, op);
    if (!k || !k->resume)
        return err_set(err, ERR_INTERNAL, "operation %s has an unknown kind", op->id);
    return k->resume(a, op, r, err);
}

/* Fault injection at a step of an unjournalled kind:
 * GPUBOX_FAULT=<kind name>.<step>. */
static void op_fault(const op_kind *k, const char *step)
{
    char point[96];
    snprintf(point, sizeof(point), "%s.%s", k->name, step);
    fault_point(point);
}

int op_steps_run(const op_kind *k, size_t from, void *ctx, gb_err *err)
{
    for (size_t i = from; i < k->nsteps; i++) {
        const op_step_def *s = &k->steps[i];
        if (s->forward && s->forward(ctx, err) < 0) {
            op_steps_back(k, i, ctx);
            return -1;
        }
        op_fault(k, s->name);
    }
    return 0;
}

void op_steps_back(const op_kind *k, size_t upto, void *ctx)
{
    for (size_t i = upto; i-- > 0;) {
        gb_err e = GB_ERR_INIT;
        if (k->steps[i].back && k->steps[i].back(ctx, &e) < 0)
            return;
    }
}

void op_print_fault_points(const op_kind *const *kinds, FILE *out)
{
    for (size_t i = 0; kinds[i]; i++) {
        const op_kind *k = kinds[i];
        for (size_t s = 0; s < k->nsteps; s++) {
            if (!k->journalled) {
                fprintf(out, "%s.%s\t%s\n", k->name, k->steps[s].name, k->name);
                continue;
            }
            const char *kind = journal_kind_name(k->kind);
            /* Only the steps between the first and the last transaction
             * are recorded by op_step, which has a point before the write. */
            if (s > 0 && s + 1 < k->nsteps)
                fprintf(out, "%s:before:%s\t%s\n", kind, k->steps[s].name, k->name);
            fprintf(out, "%s:%s\t%s\n", kind, k->steps[s].name, k->name);
        }
    }
}
