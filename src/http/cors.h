/*
 * cors.h - which web pages (origins) may call the API from a browser.
 *
 * CORS is off unless --cors-origins lists origins: then responses to a
 * request whose Origin header is on the list carry
 * Access-Control-Allow-Origin with that origin, and a preflight (OPTIONS
 * with Origin and Access-Control-Request-Method) from a listed origin is
 * answered with the methods and headers the API takes. Nothing else ever
 * gets an Access-Control-* header: no wildcard, no reflection of whatever
 * Origin a client sends, and never Access-Control-Allow-Credentials (the API
 * uses bearer tokens, which a page must send explicitly, not cookies).
 *
 * Layout: the origins, lowercased, in one array of strings; read-only after
 * start-up.
 */
#ifndef GPUBOX_HTTP_CORS_H
#define GPUBOX_HTTP_CORS_H

#include <stdbool.h>

#include "util/err.h"

#define HTTP_CORS_MAX_ORIGINS 64
#define HTTP_CORS_ALLOW_METHODS "GET, HEAD, POST, PUT, PATCH, DELETE"
#define HTTP_CORS_ALLOW_HEADERS "Authorization, Content-Type"
#define HTTP_CORS_EXPOSE_HEADERS "X-Request-Id"
#define HTTP_CORS_MAX_AGE "600"

typedef struct http_cors http_cors;

/* A comma-separated list of origins, each scheme://host[:port] with scheme
 * http or https and nothing after (no path, no '*'). ERR_INVALID_PARAMS
 * naming the bad entry otherwise. */
int http_cors_parse(const char *list, http_cors **out, gb_err *err);
void http_cors_free(http_cors *c);

/* The configured origin equal to origin (ASCII case-insensitively), or NULL
 * (also when c is NULL: CORS off). The string returned is the
 * configuration's own copy, so a response never carries bytes a client
 * chose. */
const char *http_cors_match(const http_cors *c, const char *origin);

/* Is this request a CORS preflight? */
bool http_cors_is_preflight(const char *method, const char *origin, const char *request_method);

#endif
