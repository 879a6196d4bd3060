/*
 * replicasets.c - handlers of /api/v1/replicaSet...: create, list, inspect,
 * history, stop, pause, continue, execute, commit and delete.
 *
 * Each handler checks what the request carries (body fields, their types
 * and ranges, the {name} in the path, query flags) and calls one function
 * of the replica-set service (service/replicaset.h), whose data it answers
 * as it is. The execute and commit bodies are parsed by helpers that
 * legacy.c shares, so both route families accept the same input; a create
 * body goes through the one create parser (service/replicaset/request.h),
 * as a fleet's placement does, and a patch body through the one patch
 * parser (service/replicaset/patch_request.h). Also here: patch, rollback, restart,
 * and GET /operations/{id}.
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "service/replicaset/services.h"
#include "api/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/queue/queue.h"
#include "service/replicaset/replicaset.h"
#include "service/service.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"

/* Answer the data a service call produced, or pass its error on. */
static int answer(int rc, json_t *data, http_response *resp, gb_err *err)
{
    if (rc < 0) {
        json_decref(data);
        return -1;
    }
    return http_response_data(resp, data, err);
}

int api_replicaset_create_from(http_request *req, const json_t *body, bool older,
                               http_response *resp, gb_err *err)
{
    app *a = req->ctx;
    replicaset_create_request cr;
    if (replicaset_create_request_parse(body, older ? RS_CREATE_CONTAINERS : RS_CREATE_REPLICASET,
                                        a->fleet != NULL, &cr, err) < 0)
        return -1;
    json_t *data = NULL;
    bool queued = false;
    int rc = queue_create(a, &cr, &data, &queued, err);
    replicaset_create_request_free(&cr);
    if (answer(rc, data, resp, err) < 0)
        return -1;
    if (queued)
        resp->status = 202; /* accepted: it starts when it fits (docs/queue.md) */
    return 0;
}

int api_replicaset_create(http_request *req, http_response *resp, gb_err *err)
{
    json_t *body = NULL;
    if (req_json_body(req, &body, err) < 0)
        return -1;
    return api_replicaset_create_from(req, body, false, resp, err);
}

int api_replicaset_list(http_request *req, http_response *resp, gb_err *err)
{
    bool all = false;
    if (api_query_flag(req, "all", &all, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_list(req->ctx, all, &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_info(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = NULL;
    if (api_path_name(req, &name, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_info(req->ctx, name, &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_history(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = NULL;
    if (api_path_name(req, &name, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_history(req->ctx, name, &data, err);
    return answer(rc, data, resp, err);
}

typedef int (*lifecycle_fn)(app *a, const char *name, json_t **out, gb_err *err);

/* stop, pause and continue take no body; an empty one or {} is accepted. */
static int lifecycle(http_request *req, lifecycle_fn fn, http_response *resp, gb_err *err)
{
    static const char *const no_fields[] = {NULL};
    const char *name = NULL;
    json_t *body = NULL;
    if (api_path_name(req, &name, err) < 0 || api_body(req, no_fields, false, &body, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = fn(req->ctx, name, &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_stop(http_request *req, http_response *resp, gb_err *err)
{
    return lifecycle(req, replicaset_stop, resp, err);
}

int api_replicaset_pause(http_request *req, http_response *resp, gb_err *err)
{
    return lifecycle(req, replicaset_pause, resp, err);
}

int api_replicaset_continue(http_request *req, http_response *resp, gb_err *err)
{
    return lifecycle(req, replicaset_continue, resp, err);
}

/* cmd as an array of strings is the argv; a string is run by the shell. */
static int exec_cmd(const json_t *body, const char ***argv, size_t *n, gb_err *err)
{
    json_t *cmd = json_object_get(body, "cmd");
    if (!cmd || json_is_null(cmd))
        return err_set(err, ERR_INVALID_PARAMS,
                       "field 'cmd' is required: an array of strings such as [\"ls\", \"-l\"], "
                       "or a string run with sh -c");
    if (json_is_string(cmd)) {
        const char *script = json_string_value(cmd);
        if (!*script)
            return err_set(err, ERR_INVALID_PARAMS, "field 'cmd' is an empty string");
        *argv = xmalloc(3 * sizeof(char *));
        (*argv)[0] = "sh";
        (*argv)[1] = "-c";
        (*argv)[2] = script;
        *n = 3;
        return 0;
    }
    if (!json_is_array(cmd))
        return err_set(err, ERR_WRONG_TYPE,
                       "field 'cmd' must be an array of strings or a string, got %s",
                       json_type_name(cmd));
    if (json_field_string_array(body, NULL, "cmd", argv, n, true, err) < 0)
        return -1;
    if (*n == 0 || !(*argv)[0][0]) {
        free(*argv);
        *argv = NULL;
        return err_set(err, ERR_INVALID_PARAMS,
                       "field 'cmd' must name a program: its first element is %s",
                       *n == 0 ? "missing" : "empty");
    }
    if (*n > RS_MAX_LIST) {
        free(*argv);
        *argv = NULL;
        return err_set(err, ERR_INVALID_PARAMS, "field 'cmd' has %zu elements; at most %d", *n,
                       RS_MAX_LIST);
    }
    return 0;
}

int api_execute_from(http_request *req, const char *name, const json_t *body, http_response *resp,
                     gb_err *err)
{
    _cleanup_free_ const char **argv = NULL;
    size_t n = 0;
    const char *workdir = NULL;
    long long timeout = RS_EXEC_DEFAULT_TIMEOUT_S;
    if (exec_cmd(body, &argv, &n, err) < 0 ||
        json_field_string(body, NULL, "workDir", &workdir, false, err) < 0 ||
        json_field_int(body, NULL, "timeoutSeconds", &timeout, false, err) < 0)
        return -1;
    if (workdir && !*workdir)
        workdir = NULL; /* gpu-docker-api sends "" for the default */
    if (workdir && (workdir[0] != '/' || strlen(workdir) > RS_MAX_STRING))
        return err_set(err, ERR_INVALID_PARAMS,
                       "field 'workDir' is '%.64s'; give an absolute path in the container (at "
                       "most %d characters)",
                       workdir, RS_MAX_STRING);
    if (timeout < 1 || timeout > RS_EXEC_MAX_TIMEOUT_S)
        return err_set(err, ERR_INVALID_PARAMS, "field 'timeoutSeconds' is %lld; give 1 to %d",
                       timeout, RS_EXEC_MAX_TIMEOUT_S);
    replicaset_exec_request exec = {
        .cmd = argv, .ncmd = n, .workdir = workdir, .timeout_s = (int)timeout};
    json_t *data = NULL;
    int rc = replicaset_execute(req->ctx, name, &exec, &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_execute(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"cmd", "workDir", "timeoutSeconds", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, true, &body, err) < 0)
        return -1;
    return api_execute_from(req, name, body, resp, err);
}

int api_commit_from(http_request *req, const char *name, const json_t *body, http_response *resp,
                    gb_err *err)
{
    const char *image = NULL;
    bool overwrite = false, keep_env = false;
    if (json_field_string(body, NULL, "newImageName", &image, true, err) < 0 ||
        json_field_bool(body, NULL, "overwrite", &overwrite, false, err) < 0 ||
        json_field_bool(body, NULL, "keepEnv", &keep_env, false, err) < 0)
        return -1; /* the service checks the name by Docker's rules */
    json_t *data = NULL;
    int rc = replicaset_commit(req->ctx, name, image, overwrite, keep_env, &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_commit(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"newImageName", "overwrite", "keepEnv", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, true, &body, err) < 0)
        return -1;
    return api_commit_from(req, name, body, resp, err);
}

/* POST /replicaSet/{name}/services/{service}/ticket: no body (or {}). */
int api_replicaset_service_ticket(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const no_fields[] = {NULL};
    const char *name = NULL;
    const char *service = http_request_param(req, "service");
    json_t *body = NULL;
    if (api_path_name(req, &name, err) < 0 || api_body(req, no_fields, false, &body, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_service_ticket(req->ctx, name, service ? service : "", &data, err);
    return answer(rc, data, resp, err);
}

int api_replicaset_delete(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const no_fields[] = {NULL};
    const char *name = NULL;
    json_t *body = NULL;
    bool purge = false;
    if (api_path_name(req, &name, err) < 0 || api_query_flag(req, "purge", &purge, err) < 0 ||
        api_body(req, no_fields, false, &body, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_delete(req->ctx, name, purge, &data, err);
    return answer(rc, data, resp, err);
}

/* A patch or rollback of a stopped set (data.pending): msg says that the
 * change waits for its next start. 1 answered, 0 not such an answer. */
static int api_pending_answer(const char *name, json_t *data, http_response *resp, gb_err *err)
{
    json_t *pending = json_object_get(data, "pending");
    if (!json_is_boolean(pending))
        return 0;
    char msg[300];
    if (json_is_true(pending))
        snprintf(msg, sizeof(msg),
                 "replica set '%s' is stopped: the change is kept and applies at its next start "
                 "(PATCH .../restart), as version %" JSON_INTEGER_FORMAT "; nothing was taken",
                 name, json_integer_value(json_object_get(data, "version")) + 1);
    else
        snprintf(msg, sizeof(msg),
                 "%sreplica set '%s' is stopped and starts as it was; no change waits for its "
                 "next start",
                 json_is_true(json_object_get(data, "changed")) ? "" : "nothing changed: ", name);
    return http_response_envelope(resp, ERR_OK, msg, data, err) < 0 ? -1 : 1;
}

int api_patch_from(http_request *req, const char *name, const replicaset_patch_request *patch,
                   http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (replicaset_patch(req->ctx, name, patch, &data, err) < 0)
        return -1;
    int pending = api_pending_answer(name, data, resp, err);
    if (pending)
        return pending < 0 ? -1 : 0;
    if (json_is_false(json_object_get(data, "changed"))) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "nothing changed: replica set '%s' already has what the patch asks for; no new "
                 "version was made",
                 name);
        return http_response_envelope(resp, ERR_OK, msg, data, err);
    }
    return http_response_data(resp, data, err);
}

int api_replicaset_patch(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = NULL;
    json_t *body = NULL;
    replicaset_patch_request patch;
    if (api_path_name(req, &name, err) < 0 || api_body(req, NULL, false, &body, err) < 0 ||
        replicaset_patch_request_parse(body, RS_PATCH_REPLICASET, &patch, err) < 0)
        return -1;
    int rc = api_patch_from(req, name, &patch, resp, err);
    replicaset_patch_request_free(&patch);
    return rc;
}

int api_replicaset_rollback(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"version", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    long long version = 0;
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, true, &body, err) < 0 ||
        json_field_int(body, NULL, "version", &version, true, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = replicaset_rollback(req->ctx, name, version, &data, err);
    int pending = rc < 0 ? 0 : api_pending_answer(name, data, resp, err);
    if (pending)
        return pending < 0 ? -1 : 0;
    return answer(rc, data, resp, err);
}

/* An optional body {"gpuCount": 0}: start without the set's cards; with
 * "queue": true (and priority, queueTimeout) a stopped set that cannot
 * start now waits in the queue (202; docs/queue.md); with "move": true one
 * that does not fit on its node moves to one it fits (docs/fleet.md), and
 * with both waits when no node can take it. */
int api_replicaset_restart(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"gpuCount", "move",         "queue",
                                         "priority", "queueTimeout", NULL};
    const char *name = NULL;
    json_t *body = NULL;
    long long count = 0;
    bool move = false;
    if (api_path_name(req, &name, err) < 0 || api_body(req, fields, false, &body, err) < 0 ||
        (body && json_field_int(body, NULL, "gpuCount", &count, false, err) < 0) ||
        (body && json_field_bool(body, NULL, "move", &move, false, err) < 0))
        return -1;
    bool no_gpu = body && json_object_get(body, "gpuCount");
    if (count != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuCount on a restart is 0 (start without cards) or absent (start with "
                       "the set's cards); %lld cards is a change of the set: scale it instead",
                       count);
    replicaset_create_request q = {.priority = -1};
    if (body && replicaset_queue_fields_parse(body, &q, err) < 0)
        return -1;
    queue_restart_request rq = {.no_gpu = no_gpu,
                                .move = move,
                                .queue = q.queue,
                                .priority = q.priority,
                                .timeout_s = q.queue_timeout_s,
                                .authorization = http_request_header(req, "Authorization")};
    json_t *data = NULL;
    bool queued = false;
    int rc = queue_restart(req->ctx, name, &rq, &data, &queued, err);
    if (answer(rc, data, resp, err) < 0)
        return -1;
    if (queued)
        resp->status = 202;
    return 0;
}

int api_operation(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = operation_get(req->ctx, http_request_param(req, "id"), &data, err);
    return answer(rc, data, resp, err);
}
