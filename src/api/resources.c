/*
 * resources.c - handlers of the resource routes: what GPUs and host ports
 * exist and which are held.
 */
#include "api/api.h"

#include <stdlib.h>

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
