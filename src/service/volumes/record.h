/*
 * record.h - a volume's record in the store, and its size history.
 *
 * The record (key: keys_volume) is the one source of truth for the volume:
 *   {"name": "data", "state": "ready", "version": 2,
 *    "size": 21474836480, "sizeText": "20GB",
 *    "backend": "loop", "enforced": true,
 *    "filesystem": "ext4",            loop only: "ext4" or "xfs" (absent: ext4)
 *    "dockerVolume": "gpubox_data",                     what binds mount
 *    "dockerOptions": {"type": "none", "o": "bind", "device": "..."},
 *    "dockerMountpoint": "/var/lib/docker/volumes/gpubox_data/_data",
 *    "resizing": {"size": 42949672960, "sizeText": "40GB"},   only mid-resize
 *    "createTime": "...Z", "updateTime": "...Z"}
 * dockerOptions are the local-driver options the Docker volume was made
 * with, kept so start-up can make it again if someone removed it.
 *
 * States:
 *   creating  written before any storage is made; a crash leaves it, and
 *             start-up undoes the create (nothing was ever handed out)
 *   ready     usable; "resizing" marks a resize in flight (start-up
 *             finishes it)
 *   deleting  written once the delete passed its checks; start-up
 *             finishes it
 * Only a ready volume without "resizing" can be bound by a replica set.
 *
 * Each size the volume had is kept under keys_volume_history as
 * {"version", "size", "sizeText", "time"}: version 1 at create, +1 per
 * resize.
 */
#ifndef GPUBOX_SERVICE_VOLUMES_RECORD_H
#define GPUBOX_SERVICE_VOLUMES_RECORD_H

struct app;

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "service/replicaset/record.h"
#include "store/store.h"
#include "util/err.h"
#include "util/names.h"
#include "volume/volume.h"

enum volumes_state { VOL_STATE_CREATING, VOL_STATE_READY, VOL_STATE_DELETING };

#define VOL_SIZE_TEXT_MAX 32
#define VOL_DOCKER_NAME_PREFIX "gpubox_"
#define VOL_DOCKER_NAME_MAX (NAME_MAX_LEN + sizeof(VOL_DOCKER_NAME_PREFIX))
#define VOL_BACKEND_MAX 16

typedef struct volumes_record {
    char name[NAME_MAX_LEN + 1];
    enum volumes_state state;
    int version;
    uint64_t size;
    char size_text[VOL_SIZE_TEXT_MAX];
    char backend[VOL_BACKEND_MAX];
    bool enforced;
    char filesystem[8]; /* loop: "ext4" | "xfs"; "" for the other backends */
    char docker_volume[VOL_DOCKER_NAME_MAX];
    json_t *docker_options; /* object of strings; never NULL after load or init */
    char docker_mountpoint[VOLUME_PATH_MAX];
    uint64_t resizing_to; /* 0: no resize in flight */
    char resizing_text[VOL_SIZE_TEXT_MAX];
    char create_time[RS_TIME_MAX];
    char update_time[RS_TIME_MAX];
    int64_t mod_revision;         /* of the store key when loaded; 0 for a new record */
    char owner[NAME_MAX_LEN + 1]; /* the user that created it (docs/users.md); "" before users */
} volumes_record;

const char *volumes_state_name(enum volumes_state s);

/* Load name's record: 1 found, 0 absent, -1 error (store_json.h: "reading
 * volume <name> from the store: ..." when it cannot be read). */
int volumes_record_load(store *s, const char *name, volumes_record *out, gb_err *err);
int volumes_record_from_json(const json_t *j, volumes_record *out, gb_err *err);
json_t *volumes_record_to_json(const volumes_record *r);
void volumes_record_free(volumes_record *r);

/* Write r back if nobody changed it since it was loaded (compare-and-swap
 * on mod_revision; 0 = must not exist), with extra ops (may be NULL/0) in
 * the same transaction. ERR_CONFLICT when the record changed underneath.
 * On success r->mod_revision is the new revision. */
/* a (NULL in tests: no ledger) also gets r's owner's ledger entry written in
 * the same transaction, its quota checked (users/users.h). */
int volumes_record_save(store *s, struct app *a, volumes_record *r, const store_op *extra,
                        size_t nextra, gb_err *err);
struct users_ledger_hold;
void volumes_record_hold(const volumes_record *r, struct users_ledger_hold *h);
/* Delete the record and its whole history, if r is still what was loaded. */
int volumes_record_delete(store *s, struct app *a, const volumes_record *r, gb_err *err);

/* The filesystem to show for r: its own, "ext4" for a loop volume made
 * before the record kept one, NULL for backends without a filesystem. */
const char *volumes_record_fs(const volumes_record *r);

/* The history entry for r's current version and size. */
json_t *volumes_history_entry(const volumes_record *r);

/* Every volume record (not the history), sorted by name; *out is an array
 * of volumes_record the caller frees with volumes_records_free (NULL when there is
 * none). Errors: "listing volumes: ..." (records_scan). */
int volumes_records_load_all(store *s, volumes_record **out, size_t *n, gb_err *err);
void volumes_records_free(volumes_record *v, size_t n);

#endif
