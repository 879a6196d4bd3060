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
typedef struct images_layer {
    char id[80];
    char status[48];          /* Docker's last word on it: "Downloading", "Pull complete" */
    long long current, total; /* bytes downloaded, of total (0: not known yet) */
    bool done;
} images_layer;

enum images_pull_state { IMAGE_PULL_RUNNING, IMAGE_PULL_DONE, IMAGE_PULL_FAILED };

/* One pull: its record, and what running it takes. Guarded by the table's
 * mutex; refs counts those who still read it (the table's own is not
 * counted: a finished pull nobody reads may be pruned). */
typedef struct images_pull_op {
    char id[JOURNAL_ID_MAX];
    char ref[DOCKER_REPO_MAX + DOCKER_TAG_MAX + 1]; /* repo:tag, as checked */
    char by[80];                                    /* who asked first */
    char owner[80];  /* whose the image becomes when it ends well ("": everyone's) */
    bool claim;      /* owner claims the name while it runs (images_pull_for) */
    json_t *readers; /* the users who asked for it (by and who joined): they read a private one */
    char *xauth;     /* the X-Registry-Auth value while it runs (NULL: none); wiped after */
    enum images_pull_state state;
    images_layer *layers;
    size_t nlayers, alloc;
    char image_id[80]; /* done: the image's id */
    int error_code;    /* failed: its code */
    char error[512];   /* failed: why */
    char create_time[32], update_time[32];
    int64_t finished_ns; /* time_mono_ns when it ended */
    int refs;
    struct images_pull_op *next;
} images_pull_op;

/* One configured registry's credentials (registry_auth.c). */
typedef struct images_cred {
    char *registry, *username, *password;
} images_cred;

typedef struct images {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a pull ended, or a background one left */
    images_pull_op *ops;    /* newest first */
    size_t background;      /* pulls running on their own thread */
    atomic_bool stopping;   /* shut-down: running pulls stop */
    images_cred *creds;
    size_t ncreds;
} images;

/* The credentials configured for registry (docker_image_ref_registry's
 * form); NULL when none. */
const images_cred *images_registry_cred(const images *im, const char *registry);
/* Read auth_file into im (registry_auth.c); ERR_INVALID_PARAMS naming the
 * file and the line, never a password. */
int images_registry_load(images *im, const char *auth_file, gb_err *err);
void images_registry_free(images *im);

/* Who a pull makes an image's: owner NULL, everyone; else that user, who
 * claims the name before the pull starts when claim (the image was not
 * here: nobody may take it for everyone's while it arrives) and gives the
 * claim back if the pull fails. */
typedef struct images_pull_for {
    const char *owner;
    bool claim;
} images_pull_for;

/* Pull ref (checked) with xauth (the X-Registry-Auth value or NULL; taken,
 * wiped when done), joining a running pull of both: wait for its end (its
 * error then is the answer's), or not. *record: the pull's record. A pull
 * it starts that ends well makes ref for->owner's (images_record_pull). */
int images_pull_run(app *a, const char *ref, char *xauth, images_pull_for for_, bool wait,
                    json_t **record, gb_err *err);

/* ---- owners.c ---- */

/* ref (and the digests of its repository the image here has) becomes
 * user's too, or everyone's (user NULL). */
int images_record_pull(app *a, const char *ref, const char *user, gb_err *err);
/* Add user to the users of ref's name, or take them out (claim false);
 * *changed: whether that changed anything. */
int images_claim(app *a, const char *ref, const char *user, bool claim, bool *changed, gb_err *err);
/* Does a pull of ref with auth by the caller make it the caller's? A
 * user's, with credentials of their own, of a name not here for everyone.
 * *absent: it is not here at all. */
int images_pull_owner(app *a, const char *ref, const images_auth *auth, bool *private_pull,
                      bool *absent, gb_err *err);
/* One item of GET /images (item, built from Docker's docker_item): its
 * names a user may not use removed, "owners" added. 1: keep it; 0: the
 * caller may name none of it (leave it out); -1: the store failed. */
int images_list_filter(app *a, json_t *item, const json_t *docker_item, gb_err *err);
/* The answer for an image a user may not use: as for one not there. */
int images_not_found(gb_err *err, const char *ref);

/* For a user's removal (images_user_left, images_user_forget): "pull of
 * REF" appended to left for each running pull that makes REF user's; user
 * taken out of the readers of every pull record. */
void images_pulls_running_for(app *a, const char *user, json_t *left);
void images_pulls_forget_user(app *a, const char *user);

/* The record of op as JSON; the caller holds im->mu. */
json_t *images_pull_op_json(const images_pull_op *op);

#endif
