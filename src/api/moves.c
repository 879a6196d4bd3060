/*
 * moves.c - moving a replica set to another node (docs/fleet.md, "Moving a
 * replica set"): the user's route, and the routes the two nodes of a move
 * talk through (service/replicaset/move.h), which only a node of the fleet
 * may call (SCOPE_NODE: the request must carry the fleet's proof).
 */
#include "util/xalloc.h"
#include "api/api.h"

#include <errno.h>
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

/* {"node", "wait", "withSharers", "queue", "queueTimeout", "priority"}: with queue, a
 * move that no node can take now waits in the queue (202; docs/queue.md). */
int api_replicaset_move(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"node",         "wait",     "withSharers", "queue",
                                         "queueTimeout", "priority", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    const char *node = NULL;
    bool wait = true, with_sharers = false;
    replicaset_create_request q = {.priority = -1};
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, false, &body, err) < 0 ||
        (body && json_field_string(body, NULL, "node", &node, false, err) < 0) ||
        (body && json_field_bool(body, NULL, "wait", &wait, false, err) < 0) ||
        (body && json_field_bool(body, NULL, "withSharers", &with_sharers, false, err) < 0) ||
        (body && replicaset_queue_fields_parse(body, &q, err) < 0))
        return -1;
    if (node && !node[0])
        node = NULL;
    queue_move_request rq = {.node = node,
                             .queue = q.queue,
                             .wait = wait,
                             .with_sharers = with_sharers,
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
    static const char *const fields[] = {"phase", NULL};
    json_t *body = NULL;
    const char *phase = NULL;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body && json_field_string(body, NULL, "phase", &phase, false, err) < 0))
        return -1;
    if (phase && strcmp(phase, "pre") != 0 && strcmp(phase, "final") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "phase is \"pre\" or \"final\", not \"%s\"", phase);
    json_t *data = NULL;
    int rc = replicaset_move_in_pull(req->ctx, http_request_param(req, "id"),
                                     http_request_header(req, "Authorization"),
                                     phase && strcmp(phase, "pre") == 0, &data, err);
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
    replicaset_move_part part;
    http_stream *s;
    uint64_t sent;
} move_data;

/* Test hook (GPUBOX_MOVE_CUT_AFTER=BYTES): the first stream of this process
 * breaks off after BYTES bytes, as a dropped connection would cut it, so
 * the receiving node's retry is tested on the same path. 0: not now; else
 * the bytes of this write still to send before the cut. */
static bool data_cut_due(uint64_t sent, size_t n, size_t *keep)
{
    static atomic_bool cut_done;
    const char *env = getenv("GPUBOX_MOVE_CUT_AFTER");
    if (!env || atomic_load(&cut_done))
        return false;
    uint64_t at = strtoull(env, NULL, 10);
    if (sent + n <= at)
        return false;
    *keep = at > sent ? (size_t)(at - sent) : 0;
    return !atomic_exchange(&cut_done, true);
}

/* The encoded stream, written to the client as the export makes it. */
static int data_sink(void *ctx, const void *data, size_t n)
{
    move_data *d = ctx;
    size_t keep = 0;
    if (data_cut_due(d->sent, n, &keep)) {
        if (keep && http_stream_write(d->s, data, keep) == 0) {
            d->sent += keep;
            replicaset_move_progress_add(d->id, keep, false);
        }
        log_warn("move %s: GPUBOX_MOVE_CUT_AFTER: breaking the stream off after %llu bytes "
                 "(test hook)",
                 d->id, (unsigned long long)d->sent);
        http_stream_abort(d->s);
        errno = EPIPE;
        return -1;
    }
    if (http_stream_write(d->s, data, n) < 0) {
        errno = EPIPE;
        return -1;
    }
    d->sent += n;
    replicaset_move_progress_add(d->id, n, false);
    return 0;
}

static void data_run(http_stream *s, void *ctx)
{
    move_data *d = ctx;
    d->s = s;
    gb_err err = GB_ERR_INIT;
    if (replicaset_move_export(d->a, d->id, &d->part, data_sink, d, &err) < 0)
        log_error("move %s: sending the data: %s", d->id, err.msg);
    replicaset_move_progress_add(d->id, 0, true);
}

static void data_free(void *ctx)
{
    move_data *d = ctx;
    free(d->id);
    free(d);
}

int api_move_data(http_request *req, http_response *resp, gb_err *err)
{
    const char *id = http_request_param(req, "id");
    /* ?part=K (the tree way's part), ?phase=pre|final, ?offset=N (resumed) */
    replicaset_move_part part = {0};
    const char *q_part = http_request_query(req, "part");
    const char *q_phase = http_request_query(req, "phase");
    const char *q_offset = http_request_query(req, "offset");
    char *end = NULL;
    if (q_part) {
        unsigned long v = strtoul(q_part, &end, 10);
        if (!q_part[0] || *end || v > 1000)
            return err_set(err, ERR_INVALID_PARAMS, "part is a small number, not '%.32s'", q_part);
        part.tree = true;
        part.part = (unsigned)v;
    }
    if (q_phase && strcmp(q_phase, "pre") != 0 && strcmp(q_phase, "final") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "phase is pre or final, not '%.32s'", q_phase);
    part.pre = q_phase && strcmp(q_phase, "pre") == 0;
    if (q_offset) {
        errno = 0;
        unsigned long long v = strtoull(q_offset, &end, 10);
        if (!q_offset[0] || *end || errno)
            return err_set(err, ERR_INVALID_PARAMS, "offset is a byte count, not '%.32s'",
                           q_offset);
        part.offset = v;
    }
    /* ?head=LEN.HASH (hex): a resumed pre-copy's entry at offset */
    const char *q_head = http_request_query(req, "head");
    if (q_head) {
        errno = 0;
        part.head_len = strtoull(q_head, &end, 10);
        if (*end == '.')
            part.head_hash = strtoull(end + 1, &end, 16);
        if (!q_head[0] || *end || errno || part.head_len == 0)
            return err_set(err, ERR_INVALID_PARAMS, "head is LENGTH.HASH, not '%.48s'", q_head);
    }
    move_data *d = xcalloc(1, sizeof(*d));
    *d = (move_data){.a = req->ctx, .id = xstrdup(id ? id : ""), .part = part};
    return http_response_stream(resp, 200, "application/x-tar", data_run, d, data_free, err);
}
