/*
 * openapi.c - the OpenAPI document (see openapi.h): the embedded YAML, its
 * embedded JSON form, and generated entries for routes the file lacks (one path
 * item per pattern, one operation per method, path parameters taken from
 * the "{name}" segments, answering the envelope).
 */
#include "http/openapi.h"

#include <ctype.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/log.h"

const char *openapi_yaml(size_t *len)
{
    *len = gpubox_openapi_yaml_len;
    return (const char *)gpubox_openapi_yaml;
}

json_t *openapi_file_document(gb_err *err)
{
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)gpubox_openapi_json, gpubox_openapi_json_len, 0, &jerr);
    if (!doc)
        err_set(err, ERR_INTERNAL, "the embedded OpenAPI JSON does not load: %s", jerr.text);
    return doc;
}

static void openapi_lower(const char *method, char *out, size_t size)
{
    size_t n = 0;
    for (; n + 1 < size && method[n]; n++)
        out[n] = (char)tolower((unsigned char)method[n]);
    out[n] = '\0';
}

int openapi_has_operation(const json_t *doc, const char *method, const char *pattern)
{
    char m[16];
    openapi_lower(method, m, sizeof(m));
    return json_object_get(json_object_get(json_object_get(doc, "paths"), pattern), m) != NULL;
}

static json_t *openapi_parameters(const char *pattern)
{
    json_t *params = json_array();
    for (const char *p = strchr(pattern, '{'); p; p = strchr(p + 1, '{')) {
        const char *end = strchr(p, '}');
        if (!end)
            break;
        json_array_append_new(params, json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", p + 1,
                                                (size_t)(end - p - 1), "in", "path", "required", 1,
                                                "schema", "type", "string"));
    }
    return params;
}

/* A minimal operation for a route the YAML does not describe. */
static json_t *openapi_generated(const http_route *route)
{
    return json_pack("{s:s, s:o, s:{s:{s:s, s:{s:{s:{s:s}}}}}}", "summary", route->summary,
                     "parameters", openapi_parameters(route->pattern), "responses", "default",
                     "description", "the envelope {code, msg, data}; code 200 is success",
                     "content", "application/json", "schema", "$ref",
                     "#/components/schemas/Envelope");
}

json_t *openapi_document(const http_router *r, gb_err *err)
{
    _cleanup_json_ json_t *doc = openapi_file_document(err);
    if (!doc)
        return NULL;
    json_t *paths = json_object_get(doc, "paths");
    if (!json_is_object(paths)) {
        err_set(err, ERR_INTERNAL, "the embedded OpenAPI document has no paths");
        return NULL;
    }
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        if (openapi_has_operation(doc, route->method, route->pattern))
            continue;
        json_t *item = json_object_get(paths, route->pattern);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, route->pattern, item);
        }
        char method[16];
        openapi_lower(route->method, method, sizeof(method));
        json_object_set_new(item, method, openapi_generated(route));
    }
    return steal_ptr(&doc);
}
