/*
 * resources.c - handlers of the resource routes: what GPUs and host ports
 * exist and which are held.
 */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

#include "service/monitor/monitor.h"
#include "service/service.h"

int api_resources_gpus(http_request *req, http_response *resp, gb_err *err)
{
    char *text = NULL;
    size_t len = 0;
    if (resources_gpus_text(req->ctx, &text, &len, err) < 0)
        return -1;
    int rc = http_response_data_text(resp, text, len, err);
    free(text);
    return rc;
}

int api_gpus_legacy(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (resources_gpu_status(req->ctx, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_resources_ports(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (resources_ports(req->ctx, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_resources_cpus(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (resources_cpus(req->ctx, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_gpu_healthy(http_request *req, http_response *resp, gb_err *err)
{
    const char *uuid = http_request_param(req, "uuid");
    json_t *data = NULL;
    if (!uuid || !*uuid || strlen(uuid) >= GPU_UUID_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "give a GPU's UUID, as the list of GPUs shows them");
    if (resources_gpu_clear_health(req->ctx, uuid, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_events(http_request *req, http_response *resp, gb_err *err)
{
    const char *v = http_request_query(req, "limit");
    long limit = 100;
    if (v) {
        char *end = NULL;
        limit = strtol(v, &end, 10);
        if (!*v || *end)
            return err_set(err, ERR_INVALID_PARAMS,
                           "query parameter limit is '%.32s'; give a number from 1 to 1000", v);
    }
    json_t *data = NULL;
    if (monitor_events(req->ctx, limit, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}
