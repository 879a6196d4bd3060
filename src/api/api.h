/*
 * api.h - gpubox's HTTP API: the route table (routes.c) and the handlers.
 *
 * A handler parses and validates the request, calls ONE service function
 * (service/service.h) with the app from req->ctx, and turns the result into
 * a response. Nothing else: no store, Docker or pool calls here.
 */
#ifndef GPUBOX_API_API_H
#define GPUBOX_API_API_H

#include "http/router.h"

/* A router holding every route of routes.c. */
http_router *api_router_new(gb_err *err);

/* system.c */
int api_healthz(http_request *req, http_response *resp, gb_err *err);
int api_version(http_request *req, http_response *resp, gb_err *err);
int api_openapi(http_request *req, http_response *resp, gb_err *err);

/* resources.c */
int api_resources_gpus(http_request *req, http_response *resp, gb_err *err);
int api_resources_ports(http_request *req, http_response *resp, gb_err *err);
int api_gpus_legacy(http_request *req, http_response *resp, gb_err *err);

/* volumes.c */
int api_volume_create(http_request *req, http_response *resp, gb_err *err);
int api_volume_list(http_request *req, http_response *resp, gb_err *err);
int api_volume_info(http_request *req, http_response *resp, gb_err *err);
int api_volume_history(http_request *req, http_response *resp, gb_err *err);
int api_volume_resize(http_request *req, http_response *resp, gb_err *err);
int api_volume_delete(http_request *req, http_response *resp, gb_err *err);

#endif
