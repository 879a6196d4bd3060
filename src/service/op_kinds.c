/*
 * op_kinds.c - the operation engine's table (engine.h): every kind of
 * operation, each described once, in its own file, by an op_kind. A new
 * kind gets a line here.
 *
 * Only the composition root (app.c, which hands the table to the engine
 * through app->op_kinds, and op_target_records through app->op_target) and
 * gpuboxd --list-fault-points read it.
 */
#include "service/engine.h"
#include "service/replicaset/doubt.h"
#include "service/replicaset/record.h"
#include "service/replicaset/replicaset.h"
#include "service/volume/volumes.h"

const op_kind *const op_kinds[] = {
    &rs_op_create, &rs_op_stop,     &rs_op_delete,  &rs_op_restart_same, &rs_op_restart_new,
    &rs_op_patch,  &rs_op_rollback, &vol_op_create, &vol_op_delete,      &vol_op_resize,
    NULL,
};

const op_target op_target_records = {
    .save = rs_record_save,
    .begin_failed = rs_doubt_begin_failed,
    .remove_txn = rs_record_remove_txn,
};
