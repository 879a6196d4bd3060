/*
 * volumes.c - handlers of the volume routes: POST/GET /api/v1/volumes,
 * GET /api/v1/volumes/{name}, GET /api/v1/volumes/{name}/history,
 * PATCH /api/v1/volumes/{name}/size, DELETE /api/v1/volumes/{name}.
 * Sizes are strings with a unit ("20GB", "1.5tb"; util/size.h); the
 * service checks names and sizes. Bodies with fields other than the ones
 * documented are refused (a typo such as "sise" must not go unnoticed).
 */
#include "api/api.h"
#include "api/fleet.h"

#include "service/volumes/volumes.h"

/* One service answer into the response (call it with the service's
 * result already in hand: argument order is unspecified in C). */
static int api_volume_answer(int rc, json_t *data, http_response *resp, gb_err *err)
{
    if (rc < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_volume_create(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const allowed[] = {"name", "size", "node", NULL};
    const char *name = NULL, *size = NULL;
    json_t *body = NULL;
    /* A missing name is the service's 1024 (volume name empty), a missing
     * size its "size is missing"; the types are checked here. */
    if (api_body(req, allowed, true, &body, err) < 0 ||
        api_fleet_check_fields(req, body, err) < 0 ||
        json_field_string(body, NULL, "name", &name, false, err) < 0 ||
        json_field_string(body, NULL, "size", &size, false, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = volumes_create(req->ctx, name, size, &data, err);
    return api_volume_answer(rc, data, resp, err);
}

int api_volume_list(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = volumes_list(req->ctx, &data, err);
    return api_volume_answer(rc, data, resp, err);
}

int api_volume_info(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = volumes_info(req->ctx, http_request_param(req, "name"), &data, err);
    return api_volume_answer(rc, data, resp, err);
}

int api_volume_history(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    int rc = volumes_history(req->ctx, http_request_param(req, "name"), &data, err);
    return api_volume_answer(rc, data, resp, err);
}

int api_volume_resize(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const allowed[] = {"size", NULL};
    const char *size = NULL;
    json_t *body = NULL;
    if (api_body(req, allowed, true, &body, err) < 0 ||
        json_field_string(body, NULL, "size", &size, true, err) < 0)
        return -1;
    json_t *data = NULL;
    int rc = volumes_resize(req->ctx, http_request_param(req, "name"), size, &data, err);
    return api_volume_answer(rc, data, resp, err);
}

int api_volume_delete(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    /* gpu-docker-api's force: gpubox never deletes a volume a replica set
     * binds (docs/volumes.md, "No force"); asking for it is an error, not
     * a flag silently ignored. */
    if (http_request_query(req, "force") || req->body_len > 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "a volume delete takes no force and no body: a volume a replica set binds "
                       "is never deleted; delete the set, or move it to another volume with "
                       "volumePatch, first");
    int rc = volumes_delete(req->ctx, http_request_param(req, "name"), &data, err);
    return api_volume_answer(rc, data, resp, err);
}
