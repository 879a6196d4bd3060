/*
 * internal.h - what the volume service's files share: the service's
 * state in the app, the locks an operation takes, who binds and who mounts
 * a volume, and the Docker volume behind it.
 * Not for use outside src/service/volumes/.
 */
#ifndef GPUBOX_SERVICE_VOLUMES_INTERNAL_H
#define GPUBOX_SERVICE_VOLUMES_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>

#include "service/app.h"
#include "service/engine.h"
#include "service/namelock.h"
#include "service/volumes/record.h"
#include "service/volumes/volumes.h"
#include "service/users/users.h"
#include "volume/volume.h"

struct volumes_ctx {
    volume_env env;
    pthread_mutex_t mutex; /* guards unavailable and leaving */
    /* name -> why: volumes that could not be attached (or belong to another
     * backend) at start-up; replica sets binding them are not started. */
    json_t *unavailable;
    /* name -> true: moved to another node with its set, its removal here
     * still to come (volumes_move_leaving); not listed. Under mutex too. */
    json_t *leaving;
};

/* The locks of one resize or delete: the replica sets binding the volume
 * (in name order), then the volume itself. */
typedef struct volumes_locks {
    namelock **rs;
    size_t nrs;
    namelock *vol;
} volumes_locks;

/* Take the locks of the replica sets that bind `name`, then the volume's.
 * *sets (may be NULL) gets the binding sets, as volumes_bound_by answers, read
 * while all those locks are held. */
int volumes_lock_with_users(app *a, const char *name, volumes_locks *l, json_t **sets, gb_err *err);
void volumes_locks_release(volumes_locks *l);

/* Name check, then load: ERR_NOT_FOUND when there is no such volume. */
int volumes_load_existing(app *a, const char *name, volumes_record *r, gb_err *err);

/* The replica sets (not deleted) whose spec binds volume `name`: an array
 * of {name, state, dest: where it is bound (the first bind of it)}, sorted
 * by name. */
int volumes_bound_by(app *a, const char *name, json_t **sets, gb_err *err);
/* The containers that have Docker volume `docker_volume` mounted now
 * (running, paused or restarting): an array of {container, replicaSet
 * (null for a container gpubox did not make), state}. */
int volumes_mounted_by(app *a, const char *docker_volume, json_t **containers, gb_err *err);
/* "foo (running), bar (stopped)" from volumes_bound_by's answer, or the
 * replica sets (or containers) of volumes_mounted_by's. */
void volumes_describe_sets(const json_t *sets, char *buf, size_t size);
void volumes_describe_mounts(const json_t *containers, char *buf, size_t size);

/* Refuse (ERR_STATE_CONFLICT) a volume made by another backend than the
 * one gpuboxd runs with: its storage is not where this backend looks. */
int volumes_check_backend(app *a, const volumes_record *r, gb_err *err);

/* Make r's Docker volume with r->docker_options and the label, unless it
 * exists already with those options (then *created is false). One of that
 * name made for something else is ERR_VOLUME_EXISTS. Sets
 * r->docker_mountpoint from Docker's answer. */
int volumes_docker_create(app *a, volumes_record *r, bool *created, gb_err *err);

/* Remove r's Docker volume if it is there and labelled as r's (one made
 * for something else is left alone). Docker refuses while a container
 * references it: ERR_CONFLICT. */
int volumes_docker_remove(app *a, const volumes_record *r, gb_err *err);

/* Remember (or forget, why NULL) that `name` is unusable, and ask. */
void volumes_set_unavailable(app *a, const char *name, const char *why);
bool volumes_unavailable(app *a, const char *name, char *why, size_t size);

/* The steps a crash may leave half done, shared by the operations and
 * start-up. volumes_finish_delete: Docker volume, storage, record; on a
 * failure the volume is put back as it was (ready). */
int volumes_finish_delete(app *a, volumes_record *r, gb_err *err);
/* Undo a create: Docker volume (if created_docker), storage, record. */
void volumes_undo_create(app *a, volumes_record *r, bool created_docker);
/* Commit a resize that the storage completed: size, version + 1, the
 * history entry, the marker cleared, in one transaction. */
int volumes_commit_resize(app *a, volumes_record *r, uint64_t new_size, gb_err *err);

#endif
