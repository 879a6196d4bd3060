/*
 * volumes.h - the volume service: sized data disks that replica sets bind
 * by name, made by the storage layer (src/volume/) and handed to Docker as
 * named volumes. What each operation does, in which order, against the
 * store, the storage and Docker; docs/volumes.md tells the story.
 *
 * A volume `data` is:
 *   - its record in the store (volume/record.h), the one source of truth;
 *   - its storage, made by the backend gpuboxd runs with (--volume-backend);
 *   - a Docker volume "gpubox_data" (label gpubox.volume=data) with the
 *     backend's local-driver options: what a bind {src:"data"} mounts.
 *
 * In use. A volume is *bound* by every replica set (not deleted) whose
 * spec names it, and *mounted* by every container Docker runs (or has
 * frozen) with it: only those pin the filesystem. A stopped container does
 * not (Docker unmounts a volume when its last running user stops), and a
 * gpubox-paused set's container is stopped. So:
 *   resize   works while nothing mounts it (offline, e2fsck + resize2fs);
 *            while mounted, only a grow on a backend that grows online
 *            (volume_grows_online); otherwise 409 naming the replica sets
 *            to pause or stop first;
 *   delete   refused (409) while any replica set binds it, naming them.
 *
 * Locks: a volume operation holds the name lock ("vol", name). Resize and
 * delete first take the locks of the replica sets that bind the volume
 * ("rs", in name order), so none of them can start its container
 * half-way; the order is always replica sets before the volume.
 *
 * Every function returns 0 and sets *out to the `data` of the answer, or
 * -1 with *err saying what went wrong in words a user can act on.
 */
#ifndef GPUBOX_SERVICE_VOLUMES_H
#define GPUBOX_SERVICE_VOLUMES_H

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

typedef struct volumes_ctx volumes_ctx;

/* Start-up, before any replica set is reconciled (app_open): open the
 * storage layer with cfg.volume_backend (a backend this host cannot use is
 * refused here, with the layer's message), settle what a crash left half
 * done (creates undone, resizes and deletes finished), attach every volume,
 * make missing Docker volumes again, and restart containers that Docker
 * started on a volume before it was attached. A volume that cannot be
 * attached is logged as an error and marked unavailable: replica sets that
 * bind it are not started (volumes_check_spec). */
int volumes_open(app *a, gb_err *err);
void volumes_close(volumes_ctx *v);

/* POST /volumes: data {name, size, sizeText, backend, enforced, version,
 * dockerVolume}. All or nothing: a failure leaves no storage, Docker
 * volume or record behind. */
int volumes_create(app *a, const char *name, const char *size_text, json_t **out, gb_err *err);
/* GET /volumes: data {volumes:[{name, size, sizeText, backend, enforced,
 * version, state, dockerVolume, createTime, updateTime}]}, sorted by name. */
int volumes_list(app *a, json_t **out, gb_err *err);
/* GET /volumes/{name}: data {info:{... as in the list, used, usedText,
 * filesystemSize, attached, usedBy:[{name, state}], mountedBy:[...]}}. */
int volumes_info(app *a, const char *name, json_t **out, gb_err *err);
/* GET /volumes/{name}/history: data {history:[{version, size, sizeText,
 * time}]}, newest first. */
int volumes_history(app *a, const char *name, json_t **out, gb_err *err);
/* PATCH /volumes/{name}/size: data {name, size, sizeText, previousSize,
 * previousSizeText, version, online}. */
int volumes_resize(app *a, const char *name, const char *size_text, json_t **out, gb_err *err);
/* DELETE /volumes/{name}: the Docker volume, the storage with its data,
 * the record and the history all go. data {name, deleted:true}. */
int volumes_delete(app *a, const char *name, json_t **out, gb_err *err);

/* A move of a replica set to another node (replicaset/move.c):
 * volumes_move_check: *record gets volume name's record (JSON), refused
 * (ERR_STATE_CONFLICT naming them) when a set other than `set` binds it
 * too, or it is not ready; the record has "used" (bytes of data, 0 when
 * it cannot be measured). volumes_move_in: made here empty, as a create
 * for owner (the data follows in the move's stream). volumes_move_remove:
 * the Docker volume, storage, data and record go from this node, without
 * the check for sets that bind it (the set has left); 0 when absent. */
int volumes_move_check(app *a, const char *name, const char *set, const json_t *with,
                       json_t **record, gb_err *err);
int volumes_move_in(app *a, const char *name, const char *size_text, const char *owner,
                    gb_err *err);
int volumes_move_remove(app *a, const char *name, gb_err *err);
/* Volume name went to another node with its set and is removed here next
 * (volumes_move_remove): not listed here meanwhile. */
void volumes_move_leaving(app *a, const char *name);
/* The host directory that holds volume name's data (a move's tree way
 * reads and writes it past Docker): ERR_INVALID_PARAMS when it cannot be
 * reached here. */
int volumes_host_dir(app *a, const char *name, char *path, size_t size, gb_err *err);
/* Where this node keeps the volumes' storage (for a move's disk check). */
int volumes_dir_of_data(app *a, char *path, size_t size);
/* For GET /metrics: [{name, backend, state, size, used}] of every volume,
 * used in bytes (null when it cannot be measured now), from the store and
 * the storage layer; no Docker call. */
int volumes_usage_all(app *a, json_t **out, gb_err *err);

/* For the replica-set service: the Docker volume a bind {src: name} mounts
 * (malloc'd into *docker_name). Refused unless the volume exists, is ready
 * (not being created, resized or deleted) and is attached. */
int volumes_bind_source(app *a, const char *name, char **docker_name, gb_err *err);

/* The volume kinds of the operation engine's table (engine.h, op_kinds.c):
 * not journalled, listed for their steps and fault points. */
struct op_kind;
extern const struct op_kind volumes_op_create, volumes_op_delete, volumes_op_resize;

#endif
