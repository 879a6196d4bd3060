/*
 * moves.c - moving a replica set to another node (docs/fleet.md, "Moving a
 * replica set"): the user's route, and the routes the two nodes of a move
 * talk through (service/replicaset/move.h), which only a node of the fleet
 * may call (SCOPE_NODE: the request must carry the fleet's proof).
 */
#include "util/xalloc.h"
#include "api/api.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/stream.h"
#include "service/app.h"
#include "service/queue/queue.h"
#include "service/replicaset/replicaset.h"
#include "util/cleanup.h"
#include "util/log.h"

static int answer(int rc, json_t *data, http_response *resp, gb_err *err)
{
    if (rc < 0) {
        json_decref(data);
        return -1;
    }
    return http_response_data(resp, data, err);
}

/* {"node", "wait", "queue", "queueTimeout", "priority"}: with queue, a
 * move that no node can take now waits in the queue (202; docs/queue.md). */
int api_replicaset_move(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"node", "wait", "queue", "queueTimeout", "priority", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    const char *node = NULL;
    bool wait = true;
    replicaset_create_request q = {.priority = -1};
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, false, &body, err) < 0 ||
        (body && json_field_string(body, NULL, "node", &node, false, err) < 0) ||
        (body && json_field_bool(body, NULL, "wait", &wait, false, err) < 0) ||
        (body && replicaset_queue_fields_parse(body, &q, err) < 0))
        return -1;
    if (node && !node[0])
        node = NULL;
    queue_move_request rq = {.node = node,
                             .queue = q.queue,
                             .wait = wait,
                             .priority = q.priority,
                             .timeout_s = q.queue_timeout_s,
                             .authorization = http_request_header(req, "Authorization")};
    json_t *data = NULL;
    bool queued = false;
    int rc = queue_move(req->ctx, name, &rq, &data, &queued, err);
    if (answer(rc, data, resp, err) < 0)
        return -1;
    if (queued)
        resp->status = 202;
    return 0;
}

int api_move_prepare(http_request *req, http_response *resp, gb_err *err)
{
    json_t *body = NULL;
    if (api_body(req, NULL, true, &body, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_move_in_prepare(req->ctx, body, &data, err);
    return answer(rc, data, resp, err);
}

int api_move_pull(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = replicaset_move_in_pull(req->ctx, http_request_param(req, "id"),
                                     http_request_header(req, "Authorization"), &data, err);
    return answer(rc, data, resp, err);
}

int api_move_commit(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = replicaset_move_in_commit(req->ctx, http_request_param(req, "id"), &data, err);
    return answer(rc, data, resp, err);
}

int api_move_abort(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"reason", NULL};
    json_t *body = NULL;
    const char *why = NULL;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body && json_field_string(body, NULL, "reason", &why, false, err) < 0))
        return -1;
    json_t *data = NULL;
    int rc = replicaset_move_in_abort(req->ctx, http_request_param(req, "id"), why, &data, err);
    return answer(rc, data, resp, err);
}

int api_move_abandon(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = replicaset_move_abandon(req->ctx, http_request_param(req, "id"), &data, err);
    return answer(rc, data, resp, err);
}

/* ---- the data: a tar stream, made as it is sent --------------------------------------- */

typedef struct move_data {
    app *a;
    char *id;
    int read_fd, write_fd;
    pthread_t thread;
    int rc;
    gb_err err;
} move_data;

static void *export_thread(void *arg)
{
    move_data *d = arg;
    d->rc = replicaset_move_export(d->a, d->id, d->write_fd, &d->err);
    if (d->rc < 0)
        log_error("move %s: sending the data: %s", d->id, d->err.msg);
    close(d->write_fd);
    d->write_fd = -1;
    return NULL;
}

/* Test hook (GPUBOX_MOVE_CUT_AFTER=BYTES): the first stream of this process
 * breaks off after BYTES bytes, as a dropped connection would cut it, so
 * the receiving node's retry is tested on the same path. */
static bool data_cut_due(uint64_t sent)
{
    static atomic_bool cut_done;
    const char *env = getenv("GPUBOX_MOVE_CUT_AFTER");
    if (!env || atomic_load(&cut_done) || sent < strtoull(env, NULL, 10))
        return false;
    return !atomic_exchange(&cut_done, true);
}

static void data_run(http_stream *s, void *ctx)
{
    move_data *d = ctx;
    char *buf = xmalloc(256 * 1024);
    uint64_t sent = 0;
    for (;;) {
        if (data_cut_due(sent)) {
            log_warn("move %s: GPUBOX_MOVE_CUT_AFTER: breaking the stream off after %llu bytes "
                     "(test hook)",
                     d->id, (unsigned long long)sent);
            http_stream_abort(s);
            break;
        }
        ssize_t n = read(d->read_fd, buf, 256 * 1024);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || http_stream_write(s, buf, (size_t)n) < 0)
            break;
        sent += (uint64_t)n;
        replicaset_move_progress(d->id, sent, false);
    }
    replicaset_move_progress(d->id, sent, true);
    free(buf);
    close(d->read_fd); /* an export still writing stops with EPIPE */
    d->read_fd = -1;
    pthread_join(d->thread, NULL);
}

static void data_free(void *ctx)
{
    move_data *d = ctx;
    if (d->read_fd >= 0)
        close(d->read_fd);
    free(d->id);
    free(d);
}

int api_move_data(http_request *req, http_response *resp, gb_err *err)
{
    const char *id = http_request_param(req, "id");
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "pipe: %s", strerror(errno));
    move_data *d = xcalloc(1, sizeof(*d));
    *d = (move_data){.a = req->ctx, .id = xstrdup(id ? id : ""), .read_fd = p[0], .write_fd = p[1]};
    d->err = (gb_err)GB_ERR_INIT;
    if (pthread_create(&d->thread, NULL, export_thread, d) != 0) {
        close(p[1]);
        data_free(d);
        return err_set(err, ERR_INTERNAL, "starting a thread");
    }
    return http_response_stream(resp, 200, "application/x-tar", data_run, d, data_free, err);
}
