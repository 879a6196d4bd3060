/*
 * move_request.c - how a move is asked for (move.c does it): waited for,
 * or answered as soon as the other node took the room while a thread of
 * its own does the rest (the answer of "wait": false, whose progress the
 * operation shows); and a restart that moves the set when it does not fit
 * here (PATCH .../restart {"move": true}).
 */
#include "util/xalloc.h"
#include "service/replicaset/replicaset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "service/replicaset/move.h"
#include "util/cleanup.h"
#include "util/log.h"

/* ---- a move that answers once the target took the room --------------------------------- */

typedef struct move_job {
    app *a;
    char name[NAME_MAX_LEN + 1];
    char *node, *auth;
    bool with_sharers;
    pthread_mutex_t lock;
    pthread_cond_t answered_cond;
    bool answered; /* the request has its answer: from here the worker owns the job */
    bool request_gone;
    int rc;
    gb_err err;
    json_t *answer;
} move_job;

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_idle = PTHREAD_COND_INITIALIZER;
static int jobs_running;

static void job_free(move_job *j)
{
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->answered_cond);
    json_decref(j->answer);
    free(j->node);
    free(j->auth);
    free(j);
}

/* Hand the request its answer (once); the job is freed by whichever side
 * lets go of it last. */
static void job_answer(move_job *j, int rc, const gb_err *err, const json_t *answer)
{
    pthread_mutex_lock(&j->lock);
    if (!j->answered) {
        j->answered = true;
        j->rc = rc;
        if (err)
            j->err = *err;
        j->answer = answer ? json_deep_copy(answer) : NULL;
        pthread_cond_signal(&j->answered_cond);
    }
    pthread_mutex_unlock(&j->lock);
}

static void job_on_prepared(void *ctx, const json_t *answer)
{
    job_answer(ctx, 0, NULL, answer);
}

static void *job_run(void *arg)
{
    move_job *j = arg;
    replicaset_move_request rq = {
        .node = j->node, .authorization = j->auth, .with_sharers = j->with_sharers};
    json_t *out = NULL;
    gb_err err = GB_ERR_INIT;
    int rc = move_out_run(j->a, j->name, &rq, job_on_prepared, j, &out, &err);
    job_answer(j, rc, &err, out);
    json_decref(out);
    pthread_mutex_lock(&j->lock);
    bool last = j->request_gone;
    j->request_gone = true;
    pthread_mutex_unlock(&j->lock);
    if (last)
        job_free(j);
    pthread_mutex_lock(&jobs_lock);
    if (--jobs_running == 0)
        pthread_cond_broadcast(&jobs_idle);
    pthread_mutex_unlock(&jobs_lock);
    return NULL;
}

int replicaset_move(app *a, const char *name, const replicaset_move_request *rq, json_t **out,
                    gb_err *err)
{
    /* A set left behind by a group that moved in part goes with its group. */
    if (a->fleet && move_group_check_free(a, name, err) < 0)
        return -1;
    if (rq->wait)
        return move_out_run(a, name, rq, NULL, NULL, out, err);
    move_job *j = xcalloc(1, sizeof(*j));
    j->a = a;
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->node = rq->node ? xstrdup(rq->node) : NULL;
    j->auth = rq->authorization ? xstrdup(rq->authorization) : NULL;
    j->with_sharers = rq->with_sharers;
    j->err = (gb_err)GB_ERR_INIT;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->answered_cond, NULL);
    pthread_mutex_lock(&jobs_lock);
    jobs_running++;
    pthread_mutex_unlock(&jobs_lock);
    pthread_t t;
    if (pthread_create(&t, NULL, job_run, j) != 0) {
        pthread_mutex_lock(&jobs_lock);
        jobs_running--;
        pthread_mutex_unlock(&jobs_lock);
        job_free(j);
        return err_set(err, ERR_INTERNAL, "starting a thread for the move");
    }
    pthread_detach(t);
    pthread_mutex_lock(&j->lock);
    while (!j->answered)
        pthread_cond_wait(&j->answered_cond, &j->lock);
    int rc = j->rc;
    if (rc < 0)
        *err = j->err;
    else
        *out = json_incref(j->answer);
    bool last = j->request_gone;
    j->request_gone = true;
    pthread_mutex_unlock(&j->lock);
    if (last)
        job_free(j);
    return rc;
}

void replicaset_moves_wait(void)
{
    pthread_mutex_lock(&jobs_lock);
    while (jobs_running > 0)
        pthread_cond_wait(&jobs_idle, &jobs_lock);
    pthread_mutex_unlock(&jobs_lock);
}

/* ---- a restart that may move ------------------------------------------------------------ */

int replicaset_restart_or_move(app *a, const char *name, bool no_gpu, const char *authorization,
                               json_t **out, gb_err *err)
{
    int rc = replicaset_restart(a, name, no_gpu, out, err);
    if (rc == 0 || !a->fleet ||
        (err->code != ERR_GPU_NOT_ENOUGH && err->code != ERR_PORT_NOT_ENOUGH &&
         err->code != ERR_CPU_NOT_ENOUGH))
        return rc;
    char here[sizeof(err->msg)];
    snprintf(here, sizeof(here), "%s", err->msg);
    err_clear(err);
    log_info("replica set %s: cannot start on this node (%s); moving it", name, here);
    replicaset_move_request rq = {.authorization = authorization, .wait = true};
    _cleanup_json_ json_t *moved = NULL;
    if (replicaset_move(a, name, &rq, &moved, err) < 0) {
        char there[sizeof(err->msg)];
        snprintf(there, sizeof(there), "%s", err->msg);
        return err_set(err, ERR_GPU_NOT_ENOUGH,
                       "replica set '%s' cannot start on node %s (%s), and no other node can take "
                       "it: %s",
                       name, nodes_self(a), here, there);
    }
    const char *to = json_string_value(json_object_get(moved, "to"));
    char advertise[NODES_URL_MAX];
    if (!to || nodes_reach(a, to, advertise, sizeof(advertise), err) < 0)
        return err_prefix(err, "replica set '%s' moved to node %s, stopped; start it there", name,
                          to ? to : "?");
    char path[NAME_MAX_LEN + 64];
    snprintf(path, sizeof(path), "/api/v1/replicaSet/%s/restart", name);
    _cleanup_json_ json_t *body = no_gpu ? json_pack("{s:i}", "gpuCount", 0) : json_object();
    if (move_call(a, advertise, "PATCH", path, authorization, body, 0, out, err) < 0)
        return err_prefix(
            err, "replica set '%s' moved to node %s, stopped, but did not start there", name, to);
    if (*out) {
        json_object_set_new(*out, "movedFrom", json_string(nodes_self(a)));
        json_object_set_new(*out, "node", json_string(to));
        json_object_set(*out, "move", moved);
    }
    return 0;
}
