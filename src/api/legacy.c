/*
 * legacy.c - gpu-docker-api's older route family (/api/v1/containers...),
 * mapped onto the same replica-set service functions as /replicaSet.
 *
 * The older routes name a set by its container ("foo-3") or by the set
 * ("foo"); replicaset_resolve_name turns either into the set's name. The
 * create body uses the older field names (containerName, Ports with
 * hostPort and containerPort given as numbers or as strings of digits);
 * the one create parser (service/replicaset/request.h) rewrites it into
 * the /replicaSet form and then reads it the same way as POST /replicaSet,
 * so both families accept and refuse the same things.
 * The gpu and volume patch bodies go through the one patch parser
 * (service/replicaset/patch_request.h), which makes them a replica-set
 * patch (gpuPatch, volumePatch).
 */
#include "api/api.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "service/replicaset/replicaset.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"

/* {name} of an older route: "foo" or "foo-N", resolved to the set's name. */
static int legacy_name(http_request *req, char base[NAME_MAX_LEN + 1], gb_err *err)
{
    const char *name = http_request_param(req, "name");
    char split[NAME_MAX_LEN + 1];
    int version = 0;
    if (name_check_replicaset(name, NULL) < 0 && name_split_versioned(name, split, &version) < 0)
        return name_check_replicaset(name, err); /* says what is wrong with it */
    return replicaset_resolve_name(req->ctx, name, base, err);
}

/* The older body is parsed by the one create parser, which knows the
 * older field names (service/replicaset/request.h). */
int api_container_create(http_request *req, http_response *resp, gb_err *err)
{
    json_t *body = NULL;
    if (req_json_body(req, &body, err) < 0)
        return -1;
    return api_replicaset_create_from(req, body, true, resp, err);
}

/* Stop always gives the GPUs and ports back; gpu-docker-api's later
 * clients say so with restoreGpus/restorePorts true. */
int api_container_stop(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"restoreGpus", "restorePorts", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    bool gpus = true, ports = true;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body && (json_field_bool(body, NULL, "restoreGpus", &gpus, false, err) < 0 ||
                  json_field_bool(body, NULL, "restorePorts", &ports, false, err) < 0)))
        return -1;
    if (!gpus || !ports)
        return err_set(err, ERR_INVALID_PARAMS,
                       "stop always releases the GPUs and ports; to stop and keep them, pause it "
                       "instead");
    if (legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_stop(req->ctx, name, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

/* force is accepted for gpu-docker-api's clients: gpubox always stops the
 * container before removing it. delEtcdInfoAndVersionRecord is purge. */
int api_container_delete(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"force", "delEtcdInfoAndVersionRecord", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    bool force = false, purge = false;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body &&
         (json_field_bool(body, NULL, "force", &force, false, err) < 0 ||
          json_field_bool(body, NULL, "delEtcdInfoAndVersionRecord", &purge, false, err) < 0)))
        return -1;
    if (legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_delete(req->ctx, name, purge, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_container_commit(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"newImageName", "overwrite", "keepEnv", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, fields, true, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    return api_commit_from(req, name, body, resp, err);
}

int api_container_execute(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"cmd", "workDir", "timeoutSeconds", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, fields, true, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    return api_execute_from(req, name, body, resp, err);
}

/* One of the older patch routes: its body through the one patch parser
 * (it knows their fields), then the set's patch. */
static int legacy_patch(http_request *req, enum replicaset_patch_family family, http_response *resp,
                        gb_err *err)
{
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    replicaset_patch_request patch;
    if (api_body(req, NULL, true, &body, err) < 0 ||
        replicaset_patch_request_parse(body, family, &patch, err) < 0)
        return -1;
    int rc = legacy_name(req, name, err) < 0 ? -1 : api_patch_from(req, name, &patch, resp, err);
    replicaset_patch_request_free(&patch);
    return rc;
}

/* {gpuCount} -> a patch's gpuPatch. */
int api_container_gpu(http_request *req, http_response *resp, gb_err *err)
{
    return legacy_patch(req, RS_PATCH_CONTAINERS_GPU, resp, err);
}

/* {type, oldBind, newBind} -> a patch's volumePatch; type ("volume": the
 * binds name gpubox volumes, "bind": host paths) is checked against them,
 * then dropped. */
int api_container_volume(http_request *req, http_response *resp, gb_err *err)
{
    return legacy_patch(req, RS_PATCH_CONTAINERS_VOLUME, resp, err);
}

int api_container_restart(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const no_fields[] = {NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, no_fields, false, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_restart(req->ctx, name, false, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}
