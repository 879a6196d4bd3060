/*
 * openapi.h - describe a router's routes as an OpenAPI 3 document, so a
 * client (or a person who got a 404) can see every route and its methods.
 */
#ifndef GPUBOX_HTTP_OPENAPI_H
#define GPUBOX_HTTP_OPENAPI_H

#include <jansson.h>

#include "http/router.h"

/* A new JSON document (caller decrefs), NULL when out of memory. */
json_t *openapi_document(const http_router *r, const char *title, const char *version);

#endif
