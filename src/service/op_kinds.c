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
#include "service/volumes/volumes.h"

const op_kind *const op_kinds[] = {
    &replicaset_op_create,
    &replicaset_op_stop,
    &replicaset_op_delete,
    &replicaset_op_restart_same,
    &replicaset_op_restart_new,
    &replicaset_op_patch,
    &replicaset_op_rollback,
    &replicaset_op_move,
    &replicaset_op_move_group,
    &volumes_op_create,
    &volumes_op_delete,
    &volumes_op_resize,
    NULL,
};

const op_target op_target_records = {
    .save = replicaset_record_save,
    .begin_failed = replicaset_doubt_begin_failed,
    .remove_txn = replicaset_record_remove_txn,
};
