/*
 * pulls.c - the pull table: every pull running on this node and the ones
 * that ended within the hour, as operation records (images.h).
 *
 * A pull is found by its reference and its credentials (the X-Registry-Auth
 * value, compared whole): a second request for a pull that runs joins it,
 * waiting for its end or answering its id at once, so two people asking
 * for the same image cause one pull. Different credentials do not join:
 * the first might fail where the second would not.
 *
 * The thread that runs a pull (the request's own, or one of its own for a
 * pull answered at once) updates the record under the table's mutex as
 * Docker's progress lines arrive; readers copy it out as JSON under the
 * same mutex. Ended pulls are pruned when a new one starts: older than
 * IMAGES_KEEP_S, or past IMAGES_KEEP_MAX, unless someone still reads them.
 */
#include "util/xalloc.h"
#include "service/images/images_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/users/caller.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* ---- the record -------------------------------------------------------------- */

json_t *images_pull_op_json(const images_pull_op *op)
{
    static const char *const states[] = {"running", "done", "failed"};
    json_t *steps = json_array();
    long long current = 0, total = 0;
    size_t done = 0;
    for (size_t i = 0; i < op->nlayers; i++) {
        const images_layer *l = &op->layers[i];
        json_array_append_new(steps,
                              json_pack("{s:s, s:b, s:s, s:I, s:I}", "name", l->id, "done", l->done,
                                        "status", l->status, "current", (json_int_t)l->current,
                                        "total", (json_int_t)l->total));
        current += l->current;
        total += l->total;
        done += l->done;
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:{s:I, s:I, s:I, s:I}, s:s, s:s, s:s}",
                          "id", op->id, "kind", "pull", "target", op->ref, "state",
                          states[op->state], "by", op->by, "steps", steps, "progress", "current",
                          (json_int_t)current, "total", (json_int_t)total, "layers",
                          (json_int_t)op->nlayers, "layersDone", (json_int_t)done, "createTime",
                          op->create_time, "updateTime", op->update_time, "error", op->error);
    if (j && op->state == IMAGE_PULL_DONE)
        json_object_set_new(j, "imageId", json_string(op->image_id));
    if (j && op->state == IMAGE_PULL_FAILED)
        json_object_set_new(j, "errorCode", json_integer(op->error_code));
    return j;
}

static images_layer *pull_layer(images_pull_op *op, const char *id)
{
    for (size_t i = 0; i < op->nlayers; i++)
        if (strcmp(op->layers[i].id, id) == 0)
            return &op->layers[i];
    if (op->nlayers == op->alloc) {
        op->alloc = op->alloc ? op->alloc * 2 : 8;
        op->layers = xrealloc(op->layers, op->alloc * sizeof(*op->layers));
    }
    images_layer *l = &op->layers[op->nlayers++];
    *l = (images_layer){0};
    snprintf(l->id, sizeof(l->id), "%s", id);
    return l;
}

/* ---- running one ------------------------------------------------------------- */

typedef struct pull_run {
    app *a;
    images *im;
    images_pull_op *op;
} pull_run;

/* Docker's lines that name a layer: everything but the first ("Pulling
 * from repo", whose id is the tag) and the last ("Digest:", "Status:"). */
static bool pull_is_layer_line(const docker_pull_event *ev)
{
    return ev->id && strncmp(ev->status, "Pulling from", 12) != 0;
}

static int pull_progress(void *ctx, const docker_pull_event *ev)
{
    pull_run *r = ctx;
    if (atomic_load(&r->im->stopping))
        return 1;
    if (!pull_is_layer_line(ev))
        return 0;
    pthread_mutex_lock(&r->im->mu);
    images_layer *l = pull_layer(r->op, ev->id);
    snprintf(l->status, sizeof(l->status), "%s", ev->status);
    if (ev->total > 0 && strcmp(ev->status, "Downloading") == 0) {
        l->total = ev->total;
        l->current = ev->current > 0 ? ev->current : 0;
    } else if (strcmp(ev->status, "Download complete") == 0 ||
               strcmp(ev->status, "Verifying Checksum") == 0) {
        l->current = l->total;
    }
    if (strcmp(ev->status, "Pull complete") == 0 || strcmp(ev->status, "Already exists") == 0) {
        l->done = true;
        l->current = l->total;
    }
    time_iso_now(r->op->update_time, sizeof(r->op->update_time));
    pthread_mutex_unlock(&r->im->mu);
    return 0;
}

/* Pull op, and write how it ended into it; wakes whoever waits. */
static void pull_run_op(app *a, images *im, images_pull_op *op)
{
    pull_run r = {.a = a, .im = im, .op = op};
    gb_err err = GB_ERR_INIT;
    /* An image a user pulls with their own credentials is theirs before
     * its first byte is here (owners.c); a failed pull gives that back. */
    bool claimed = false;
    int rc = op->claim ? images_claim(a, op->ref, op->owner, true, &claimed, &err) : 0;
    if (rc == 0)
        rc = docker_image_pull(a->docker, op->ref, op->xauth, pull_progress, &r, &err);
    char id[80] = "";
    if (rc == 0 && images_record_pull(a, op->ref, op->owner[0] ? op->owner : NULL, &err) < 0)
        rc = -1;
    if (rc == 0) {
        _cleanup_json_ json_t *inspect = NULL;
        if (docker_image_inspect(a->docker, op->ref, &inspect, &err) < 0)
            rc = -1;
        else
            snprintf(id, sizeof(id), "%s",
                     json_string_value(json_object_get(inspect, "Id"))
                         ? json_string_value(json_object_get(inspect, "Id"))
                         : "");
    }
    gb_err unclaim = GB_ERR_INIT;
    if (rc < 0 && claimed && images_claim(a, op->ref, op->owner, false, NULL, &unclaim) < 0)
        log_warn("images: %s keeps a claim of %s after a failed pull: %s", op->owner, op->ref,
                 unclaim.msg);
    pthread_mutex_lock(&im->mu);
    op->state = rc == 0 ? IMAGE_PULL_DONE : IMAGE_PULL_FAILED;
    snprintf(op->image_id, sizeof(op->image_id), "%s", id);
    op->error_code = rc == 0 ? ERR_OK : err.code;
    snprintf(op->error, sizeof(op->error), "%s", rc == 0 ? "" : err.msg);
    if (op->xauth) {
        explicit_bzero(op->xauth, strlen(op->xauth));
        free(op->xauth);
        op->xauth = NULL;
    }
    time_iso_now(op->update_time, sizeof(op->update_time));
    op->finished_ns = time_mono_ns();
    pthread_cond_broadcast(&im->changed);
    pthread_mutex_unlock(&im->mu);
    if (rc == 0)
        log_info("images: pulled %s (%s), %zu layer(s), operation %s, for %s", op->ref, id,
                 op->nlayers, op->id, op->by);
    else
        log_warn("images: pull of %s failed (operation %s, for %s): %s", op->ref, op->id, op->by,
                 err.msg);
}

/* ---- the table --------------------------------------------------------------- */

static void pull_op_free(images_pull_op *op)
{
    if (op->xauth) {
        explicit_bzero(op->xauth, strlen(op->xauth));
        free(op->xauth);
    }
    json_decref(op->readers);
    free(op->layers);
    free(op);
}

/* Drop ended pulls nobody reads that are too old or too many; holds mu. */
static void pulls_prune(images *im)
{
    int64_t now = time_mono_ns();
    size_t ended = 0;
    for (images_pull_op **p = &im->ops; *p;) {
        images_pull_op *op = *p;
        bool over = op->state != IMAGE_PULL_RUNNING;
        ended += over;
        if (over && op->refs == 0 &&
            (ended > IMAGES_KEEP_MAX ||
             now - op->finished_ns > (int64_t)IMAGES_KEEP_S * 1000000000)) {
            *p = op->next;
            pull_op_free(op);
            continue;
        }
        p = &op->next;
    }
}

/* Has who asked for op (first, or by joining it)? */
static bool pull_readable_by(const images_pull_op *op, const char *who)
{
    size_t i;
    json_t *r;
    json_array_foreach(op->readers, i, r)
    {
        if (strcmp(json_string_value(r), who) == 0)
            return true;
    }
    return false;
}

static bool same_auth(const char *x, const char *y)
{
    return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

/* The running pull of ref with xauth, or a new one (xauth is taken either
 * way); *fresh says which. The caller holds a reference (refs). */
static images_pull_op *pulls_find_or_add(images *im, const char *ref, char *xauth,
                                         images_pull_for for_, bool *fresh)
{
    pthread_mutex_lock(&im->mu);
    images_pull_op *op = im->ops;
    while (op && !(op->state == IMAGE_PULL_RUNNING && strcmp(op->ref, ref) == 0 &&
                   same_auth(op->xauth, xauth)))
        op = op->next;
    *fresh = op == NULL;
    if (op && !pull_readable_by(op, users_caller_owner()))
        json_array_append_new(op->readers, json_string(users_caller_owner()));
    if (op) {
        if (xauth) {
            explicit_bzero(xauth, strlen(xauth));
            free(xauth);
        }
    } else {
        pulls_prune(im);
        op = xcalloc(1, sizeof(*op));
        journal_new_id(op->id);
        snprintf(op->ref, sizeof(op->ref), "%s", ref);
        snprintf(op->by, sizeof(op->by), "%s", users_caller_owner());
        snprintf(op->owner, sizeof(op->owner), "%s", for_.owner ? for_.owner : "");
        op->claim = for_.owner && for_.claim;
        op->readers = json_pack("[s]", users_caller_owner());
        op->xauth = xauth;
        time_iso_now(op->create_time, sizeof(op->create_time));
        memcpy(op->update_time, op->create_time, sizeof(op->update_time));
        op->next = im->ops;
        im->ops = op;
    }
    op->refs++;
    pthread_mutex_unlock(&im->mu);
    return op;
}

static void pulls_release(images *im, images_pull_op *op)
{
    pthread_mutex_lock(&im->mu);
    op->refs--;
    pthread_mutex_unlock(&im->mu);
}

typedef struct pull_thread_arg {
    app *a;
    images_pull_op *op;
} pull_thread_arg;

static void *pull_thread(void *p)
{
    pull_thread_arg *arg = p;
    images *im = arg->a->images;
    pull_run_op(arg->a, im, arg->op);
    pulls_release(im, arg->op);
    pthread_mutex_lock(&im->mu);
    im->background--;
    pthread_cond_broadcast(&im->changed);
    pthread_mutex_unlock(&im->mu);
    free(arg);
    return NULL;
}

/* Run a fresh op on a thread of its own; on failure to start one, here. */
static void pulls_start_background(app *a, images_pull_op *op)
{
    images *im = a->images;
    pull_thread_arg *arg = xcalloc(1, sizeof(*arg));
    *arg = (pull_thread_arg){.a = a, .op = op};
    pthread_mutex_lock(&im->mu);
    op->refs++; /* the thread's */
    im->background++;
    pthread_mutex_unlock(&im->mu);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, pull_thread, arg);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        pull_thread(arg);
}

int images_pull_run(app *a, const char *ref, char *xauth, images_pull_for for_, bool wait,
                    json_t **record, gb_err *err)
{
    images *im = a->images;
    bool fresh = false;
    images_pull_op *op = pulls_find_or_add(im, ref, xauth, for_, &fresh);
    if (!fresh)
        log_info("images: a pull of %s joins operation %s, already running", ref, op->id);
    if (fresh && wait)
        pull_run_op(a, im, op);
    else if (fresh)
        pulls_start_background(a, op);
    pthread_mutex_lock(&im->mu);
    while (wait && op->state == IMAGE_PULL_RUNNING)
        pthread_cond_wait(&im->changed, &im->mu);
    *record = images_pull_op_json(op);
    int rc = 0;
    if (wait && op->state == IMAGE_PULL_FAILED)
        rc = err_set(err, op->error_code, "%s", op->error);
    op->refs--;
    pthread_mutex_unlock(&im->mu);
    if (rc == 0 && !*record)
        return err_set(err, ERR_INTERNAL, "out of memory");
    return rc;
}

int images_pull_record(app *a, const char *id, json_t **out)
{
    images *im = a->images;
    *out = NULL;
    if (!im || !id)
        return 0;
    pthread_mutex_lock(&im->mu);
    for (images_pull_op *op = im->ops; op && !*out; op = op->next)
        if (strcmp(op->id, id) == 0 && (!users_caller_is_user() || !op->owner[0] ||
                                        pull_readable_by(op, users_caller_owner())))
            *out = images_pull_op_json(op);
    pthread_mutex_unlock(&im->mu);
    return *out != NULL;
}

void images_pulls_running_for(app *a, const char *user, json_t *left)
{
    images *im = a->images;
    if (!im)
        return;
    pthread_mutex_lock(&im->mu);
    for (images_pull_op *op = im->ops; op; op = op->next)
        if (op->state == IMAGE_PULL_RUNNING && strcmp(op->owner, user) == 0)
            json_array_append_new(left, json_pack("s+", "pull of ", op->ref));
    pthread_mutex_unlock(&im->mu);
}

void images_pulls_forget_user(app *a, const char *user)
{
    images *im = a->images;
    if (!im)
        return;
    pthread_mutex_lock(&im->mu);
    for (images_pull_op *op = im->ops; op; op = op->next)
        for (size_t i = json_array_size(op->readers); i-- > 0;)
            if (strcmp(json_string_value(json_array_get(op->readers, i)), user) == 0)
                json_array_remove(op->readers, i);
    pthread_mutex_unlock(&im->mu);
}

int images_open(app *a, const char *auth_file, gb_err *err)
{
    images *im = xcalloc(1, sizeof(*im));
    pthread_mutex_init(&im->mu, NULL);
    pthread_cond_init(&im->changed, NULL);
    a->images = im;
    if (auth_file && images_registry_load(im, auth_file, err) < 0)
        return err_prefix(err, "--registry-auth-file");
    if (im->ncreds)
        log_info("images: credentials for %zu registr%s from %s", im->ncreds,
                 im->ncreds == 1 ? "y" : "ies", auth_file);
    return 0;
}

void images_close(app *a)
{
    images *im = a->images;
    if (!im)
        return;
    atomic_store(&im->stopping, true);
    pthread_mutex_lock(&im->mu);
    while (im->background > 0)
        pthread_cond_wait(&im->changed, &im->mu);
    pthread_mutex_unlock(&im->mu);
    while (im->ops) {
        images_pull_op *op = im->ops;
        im->ops = op->next;
        pull_op_free(op);
    }
    images_registry_free(im);
    pthread_cond_destroy(&im->changed);
    pthread_mutex_destroy(&im->mu);
    free(im);
    a->images = NULL;
}
