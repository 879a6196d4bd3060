/*
 * request.c - request lookups and the lazily parsed JSON body (whose
 * fields handlers read with util/json.h's typed field checks).
 */
#include "http/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

void http_request_clear(http_request *req)
{
    if (req->json)
        json_decref(req->json);
    req->json = NULL;
    req->json_tried = false;
}

static const char *kv_find(const http_kv *kv, size_t n, const char *key, bool nocase)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i].key && (nocase ? strcasecmp(kv[i].key, key) : strcmp(kv[i].key, key)) == 0)
            return kv[i].value;
    return NULL;
}

const char *http_request_param(const http_request *req, const char *name)
{
    return kv_find(req->params, req->nparams, name, false);
}

const char *http_request_query(const http_request *req, const char *name)
{
    return kv_find(req->query, req->nquery, name, false);
}

const char *http_request_header(const http_request *req, const char *name)
{
    return kv_find(req->headers, req->nheaders, name, true);
}

int req_json_body(http_request *req, json_t **out, gb_err *err)
{
    if (!req->json_tried) {
        req->json_tried = true;
        err_clear(&req->json_err);
        json_error_t jerr;
        if (req->body_len == 0) {
            err_set(&req->json_err, ERR_MALFORMED_JSON,
                    "request body is empty; send a JSON object (Content-Type: application/json)");
        } else if (!(req->json =
                         json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr))) {
            /* A key given twice is refused rather than "last one wins": two
             * readers of one body (a proxy's policy, gpubox) must not be
             * able to see different values. */
            err_set(&req->json_err, ERR_MALFORMED_JSON,
                    "malformed JSON body at line %d, column %d: %s", jerr.line, jerr.column,
                    jerr.text);
        } else if (!json_is_object(req->json)) {
            err_set(&req->json_err, ERR_WRONG_TYPE, "request body must be a JSON object, got %s",
                    json_type_name(req->json));
            json_decref(req->json);
            req->json = NULL;
        }
    }
    if (!req->json) {
        if (err)
            *err = req->json_err;
        return -1;
    }
    *out = req->json;
    return 0;
}
