/*
 * request.h - one HTTP request as handlers see it, and the helpers that read
 * typed fields out of its JSON body.
 *
 * The server fills the request from libmicrohttpd: method, decoded path, the
 * path parameters the router captured, query parameters and headers (as
 * key/value arrays whose strings belong to libmicrohttpd and live as long
 * as the request), and the body bytes. The JSON body is parsed on first use
 * and kept, so several field helpers parse it once.
 *
 * The field helpers turn a bad body into the error a client can act on:
 *   - malformed JSON, or an object with a key given twice -> ERR_MALFORMED_JSON
 *     with jansson's line and column;
 *   - a field of the wrong JSON type -> ERR_WRONG_TYPE naming the field and
 *     the expected type;
 *   - a required field that is missing -> ERR_INVALID_PARAMS naming it.
 * They return 1 when the field was present (and *out is set), 0 when it was
 * absent or null and not required (*out untouched), -1 on error.
 */
#ifndef GPUBOX_HTTP_REQUEST_H
#define GPUBOX_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"
#include "util/json.h"

#define HTTP_REQUEST_ID_MAX 32

struct http_router;
struct http_metrics;
struct http_identity;

typedef struct http_kv {
    const char *key;
    const char *value;
} http_kv;

typedef struct http_request {
    const char *method;
    const char *path; /* decoded, without the query string */
    char id[HTTP_REQUEST_ID_MAX];

    const http_kv *params; /* path parameters, from the router */
    size_t nparams;
    http_kv *query;
    size_t nquery;
    http_kv *headers;
    size_t nheaders;

    const char *body; /* NUL-terminated for convenience; may contain NULs */
    size_t body_len;

    void *ctx;                        /* the application context handed to the server */
    const struct http_router *router; /* the router that matched this request */
    struct http_metrics *metrics;     /* the server's request counters (GET /metrics) */
    const struct http_identity *who;  /* the caller, once the access check passed (http/auth.h) */

    json_t *json; /* parsed body, once asked for */
    bool json_tried;
    gb_err json_err; /* why parsing failed, kept for repeated asks */
} http_request;

/* Release what the request owns (the parsed JSON). */
void http_request_clear(http_request *req);

/* Lookups; NULL when absent. Header names are case-insensitive. */
const char *http_request_param(const http_request *req, const char *name);
const char *http_request_query(const http_request *req, const char *name);
const char *http_request_header(const http_request *req, const char *name);

/* The body as a JSON object (borrowed; owned by req). An empty body, bad
 * JSON or a non-object is an error. */
int req_json_body(http_request *req, json_t **out, gb_err *err);

#endif
