/*
 * doubt.h - replica-set writes left in doubt by a store outage: a write
 * that failed with ERR_STORE_UNAVAILABLE may have landed all the same, so
 * what it would give back stays held until the store says what became of
 * it (doubt.c). The operation engine (engine.c) hands it the first
 * transactions of operations; create and the releases (stop, delete) hand
 * it theirs.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_DOUBT_H
#define GPUBOX_SERVICE_REPLICASET_DOUBT_H

#include "service/app.h"
#include "service/replicaset/record.h"
#include "util/err.h"

/* Writes the store did not confirm. A write that failed with
 * ERR_STORE_UNAVAILABLE may have landed all the same; instead of giving back
 * what r holds, the caller hands it here, and it is given back once the
 * store says what became of the write:
 *   CREATE       the record transaction of a create (r as written,
 *                r->mod_revision what the key had before; previous the
 *                record before the create, NULL if none);
 *   CREATE_UNDO  the undo of a create whose record had landed
 *                (r->mod_revision the created record's);
 *   RELEASE      a stop or delete (r as it was, holding its GPUs and ports);
 *   OPERATION    the first transaction of a journaled operation (r as that
 *                transaction wrote it, naming the operation, r->mod_revision
 *                what the key had before; previous the record before). If
 *                it landed, the operation is finished or undone
 *                (op_resume, engine.h); if not, the pools hold previous's again. */
enum replicaset_doubt_kind {
    RS_DOUBT_CREATE,
    RS_DOUBT_CREATE_UNDO,
    RS_DOUBT_RELEASE,
    RS_DOUBT_OPERATION
};
void replicaset_doubt_hold(app *a, enum replicaset_doubt_kind kind, const replicaset_record *r,
                           const char *previous);
/* Settle what is in doubt for name; call with its name lock held, before
 * reading its record. -1 (ERR_STORE_UNAVAILABLE) while the store is down. */
int replicaset_doubt_resolve(app *a, const char *name, gb_err *err);
/* The background thread that settles entries every second. */
int replicaset_doubt_start(app *a, gb_err *err);
void replicaset_doubt_stop(app *a);

/* The first transaction of an operation, which wrote `after` (naming the
 * operation), failed. When the store did not confirm it, it may have landed:
 * it is handed to replicaset/doubt.c with `before` (the record as it was) and the
 * message says so; the caller then gives back nothing. Always -1. */
int replicaset_doubt_begin_failed(app *a, const replicaset_record *before,
                                  const replicaset_record *after, gb_err *err);

#endif
