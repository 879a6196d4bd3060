/*
 * openapi.h - gpuboxd's OpenAPI document: docs/openapi.yaml, embedded at
 * build time (cmake/embed.cmake), served as written (GET /openapi.yaml)
 * and as JSON (GET /openapi.json).
 *
 * The JSON form is converted from the YAML at build time too
 * (src/tools/yaml2json.c, with libyaml) and embedded beside it, so the
 * daemon reads no YAML. Served, it is that JSON plus, for any route of
 * the router the file does not describe, a generated entry (summary and
 * path parameters), so the document always lists every route the running
 * daemon has. tests/unit/test_openapi.c keeps the file and routes.c in
 * step, so in a tested build nothing is generated.
 */
#ifndef GPUBOX_HTTP_OPENAPI_H
#define GPUBOX_HTTP_OPENAPI_H

#include <stddef.h>

#include <jansson.h>

#include "http/router.h"
#include "util/err.h"

/* The embedded docs/openapi.yaml and its JSON form (generated/). */
extern const unsigned char gpubox_openapi_yaml[];
extern const size_t gpubox_openapi_yaml_len;
extern const unsigned char gpubox_openapi_json[];
extern const size_t gpubox_openapi_json_len;

/* The YAML text as embedded. */
const char *openapi_yaml(size_t *len);

/* docs/openapi.yaml as JSON values, nothing generated (caller decrefs);
 * NULL with err (ERR_INTERNAL) when the embedded JSON does not load. */
json_t *openapi_file_document(gb_err *err);

/* The document served as JSON: the file's, with an entry generated for
 * each route of r it lacks (caller decrefs); NULL with err when the
 * embedded document does not load or has no paths. */
json_t *openapi_document(const http_router *r, gb_err *err);

/* Whether doc describes method (any case) on pattern. */
int openapi_has_operation(const json_t *doc, const char *method, const char *pattern);

#endif
