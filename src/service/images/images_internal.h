/*
 * images_internal.h - what the files of service/images/ share: the pull
 * table (pulls.c) and the configured registry credentials
 * (registry_auth.c).
 */
#ifndef GPUBOX_SERVICE_IMAGES_INTERNAL_H
#define GPUBOX_SERVICE_IMAGES_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "docker/docker.h"
#include "service/images/images.h"
#include "service/journal.h"

/* One layer of a pull, as Docker's progress lines tell it. */
typedef struct image_layer {
    char id[80];
    char status[48];          /* Docker's last word on it: "Downloading", "Pull complete" */
    long long current, total; /* bytes downloaded, of total (0: not known yet) */
    bool done;
} image_layer;

enum image_pull_state { IMAGE_PULL_RUNNING, IMAGE_PULL_DONE, IMAGE_PULL_FAILED };

/* One pull: its record, and what running it takes. Guarded by the table's
 * mutex; refs counts those who still read it (the table's own is not
 * counted: a finished pull nobody reads may be pruned). */
typedef struct image_pull_op {
    char id[JOURNAL_ID_MAX];
    char ref[DOCKER_REPO_MAX + DOCKER_TAG_MAX + 1]; /* repo:tag, as checked */
    char by[80];                                    /* who asked first */
    char owner[80]; /* whose the image becomes when it ends well ("": everyone's) */
    char *xauth;    /* the X-Registry-Auth value while it runs (NULL: none); wiped after */
    enum image_pull_state state;
    image_layer *layers;
    size_t nlayers, alloc;
    char image_id[80]; /* done: the image's id */
    int error_code;    /* failed: its code */
    char error[512];   /* failed: why */
    char create_time[32], update_time[32];
    int64_t finished_ns; /* time_mono_ns when it ended */
    int refs;
    struct image_pull_op *next;
} image_pull_op;

/* One configured registry's credentials (registry_auth.c). */
typedef struct image_registry_cred {
    char *registry, *username, *password;
} image_registry_cred;

typedef struct images {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a pull ended, or a background one left */
    image_pull_op *ops;     /* newest first */
    size_t background;      /* pulls running on their own thread */
    atomic_bool stopping;   /* shut-down: running pulls stop */
    image_registry_cred *creds;
    size_t ncreds;
} images;

/* The credentials configured for registry (docker_image_ref_registry's
 * form); NULL when none. */
const image_registry_cred *images_registry_cred(const images *im, const char *registry);
/* Read auth_file into im (registry_auth.c); ERR_INVALID_PARAMS naming the
 * file and the line, never a password. */
int images_registry_load(images *im, const char *auth_file, gb_err *err);
void images_registry_free(images *im);

/* Pull ref (checked) with xauth (the X-Registry-Auth value or NULL; taken,
 * wiped when done), joining a running pull of both: wait for its end (its
 * error then is the answer's), or not. *record: the pull's record. When a
 * pull it starts ends well, ref becomes owner's (NULL: everyone's), as
 * images_record_pull says. */
int images_pull_run(app *a, const char *ref, char *xauth, const char *owner, bool wait,
                    json_t **record, gb_err *err);

/* ---- owners.c ---- */

/* ref (and the digests of its repository the image here has) becomes
 * user's too, or everyone's (user NULL). */
int images_record_pull(app *a, const char *ref, const char *user, gb_err *err);
/* Is a pull of ref with auth by the caller one that makes it the caller's?
 * A user's, with credentials of their own, of a name not here for everyone. */
int images_pull_is_private(app *a, const char *ref, const image_auth *auth, bool *private_pull,
                           gb_err *err);
/* One item of GET /images (item, built from Docker's docker_item): its
 * names a user may not use removed, "owners" added. 1: keep it; 0: the
 * caller may name none of it (leave it out); -1: the store failed. */
int images_list_filter(app *a, json_t *item, const json_t *docker_item, gb_err *err);
/* The answer for an image a user may not use: as for one not there. */
int image_not_found(gb_err *err, const char *ref);

/* The record of op as JSON; the caller holds im->mu. */
json_t *image_pull_op_json(const image_pull_op *op);

#endif
