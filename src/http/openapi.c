/*
 * openapi.c - the OpenAPI document of a router: one path item per pattern,
 * one operation per method, path parameters taken from "{name}" segments.
 * Every operation answers the envelope, so they share one response schema.
 */
#include "http/openapi.h"

#include <ctype.h>
#include <string.h>

#include "util/cleanup.h"

static json_t *openapi_parameters(const char *pattern)
{
    json_t *params = json_array();
    for (const char *p = strchr(pattern, '{'); params && p; p = strchr(p + 1, '{')) {
        const char *end = strchr(p, '}');
        if (!end)
            break;
        json_array_append_new(params, json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", p + 1,
                                                (size_t)(end - p - 1), "in", "path", "required", 1,
                                                "schema", "type", "string"));
    }
    return params;
}

static json_t *openapi_envelope_schema(void)
{
    return json_pack("{s:s, s:[s,s,s], s:{s:{s:s}, s:{s:s}, s:{}}}", "type", "object", "required",
                     "code", "msg", "data", "properties", "code", "type", "integer", "msg", "type",
                     "string", "data");
}

json_t *openapi_document(const http_router *r, const char *title, const char *version)
{
    _cleanup_json_ json_t *paths = json_object();
    if (!paths)
        return NULL;
    for (size_t i = 0; i < router_count(r); i++) {
        const http_route *route = router_route(r, i);
        json_t *item = json_object_get(paths, route->pattern);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, route->pattern, item);
        }
        char method[16];
        size_t n = 0;
        for (; n < sizeof(method) - 1 && route->method[n]; n++)
            method[n] = (char)tolower((unsigned char)route->method[n]);
        method[n] = '\0';
        json_object_set_new(item, method,
                            json_pack("{s:s, s:o, s:{s:{s:s, s:{s:{s:o}}}}}", "summary",
                                      route->summary, "parameters",
                                      openapi_parameters(route->pattern), "responses", "default",
                                      "description", "the envelope; code 200 is success", "content",
                                      "application/json", "schema", openapi_envelope_schema()));
    }
    return json_pack("{s:s, s:{s:s, s:s}, s:O}", "openapi", "3.0.3", "info", "title", title,
                     "version", version, "paths", paths);
}
