/*
 * response.h - what a handler answers, and the JSON envelope every API
 * response wears: {"code": int, "msg": string, "data": any}.
 *
 * `code` is ERR_OK (200) on success or an envelope code from util/err.h; the
 * HTTP status tells the class of the code (err_http_status), unless the
 * server runs with --compat-http-200, in which case every envelope goes out
 * as HTTP 200 as gpu-docker-api's clients expect.
 *
 * Layout: the body is serialized at once into one malloc'd buffer that the
 * server hands to libmicrohttpd without copying (MHD_RESPMEM_MUST_FREE).
 */
#ifndef GPUBOX_HTTP_RESPONSE_H
#define GPUBOX_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

#define HTTP_SUCCESS_MSG "success"

/* Headers a response may carry beyond those every response gets. */
#define HTTP_EXTRA_HEADERS 10

typedef struct http_response {
    int status;               /* HTTP status */
    int code;                 /* envelope code, for the access log */
    bool envelope;            /* body is an envelope: --compat-http-200 applies */
    const char *content_type; /* static string */
    char *body;               /* malloc'd, owned until handed to the server */
    size_t body_len;
    /* In place of body: bytes that live as long as the program (an embedded
     * file), sent without a copy and never freed. */
    const void *static_body;
    /* In place of body: a body made as it is sent (http/stream.h), owned
     * until handed to the server. */
    struct http_stream *stream;
    /* In place of a body: switch protocols (http/upgrade.h), owned until
     * the switch. */
    struct http_upgrade *upgrade;
    /* Name and value pairs, both static strings (http_response_header). */
    const char *headers[HTTP_EXTRA_HEADERS][2];
    unsigned nheaders;
} http_response;

/* Serialize an envelope; data (borrowed, may be NULL -> null). Returns a
 * malloc'd string and its length, or NULL when msg is not UTF-8. */
char *http_envelope_dump(int code, const char *msg, const json_t *data, size_t *len);

/* The HTTP status an envelope code goes out with. */
int http_status_for(int code, bool compat_http_200);

/* Success: {"code":200,"msg":"success","data":data}. Steals data (NULL is
 * sent as null). Returns 0 (the int and err are kept for its callers). */
int http_response_data(http_response *resp, json_t *data, gb_err *err);

/* Success with data that is already serialized JSON (a cached answer):
 * the envelope is put around the text without parsing it again. */
int http_response_data_text(http_response *resp, const char *data, size_t len, gb_err *err);

/* Any envelope, e.g. an error that still carries data (healthz). Steals
 * data. -1 with *err set when msg is not UTF-8. */
int http_response_envelope(http_response *resp, int code, const char *msg, json_t *data,
                           gb_err *err);

/* The error envelope for e (data null). Never fails: falls back to a fixed
 * body when e's message is not UTF-8. */
void http_response_error(http_response *resp, const gb_err *e);

/* A body that is not an envelope (e.g. /openapi.json, /metrics). Steals body. */
void http_response_raw(http_response *resp, int status, const char *content_type, char *body,
                       size_t len);

/* A body that lives as long as the program (see static_body). */
void http_response_static(http_response *resp, int status, const char *content_type,
                          const void *body, size_t len);

/* Add a header; name and value must be static strings. Aborts past
 * HTTP_EXTRA_HEADERS (a programming error). */
void http_response_header(http_response *resp, const char *name, const char *value);

void http_response_clear(http_response *resp);

#endif
