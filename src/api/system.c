/*
 * system.c - handlers of the system routes: /healthz, /version, /metrics
 * and the OpenAPI document.
 */
#include "util/xalloc.h"
#include "api/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "http/metrics.h"
#include "http/openapi.h"
#include "service/metrics.h"
#include "service/service.h"
#include "util/prom.h"

/* The details of /healthz and /version are for callers with a token (or
 * every caller, without --token-file): they name Docker's version, storage
 * driver and socket (docs/security.md, "Without a token"). */
static bool api_details(const http_request *req)
{
    return req->who && req->who->role != HTTP_ROLE_NONE;
}

int api_healthz(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (system_health(req->ctx, api_details(req), &data, err) <
        0) /* unhealthy still shows which part */
        return data ? http_response_envelope(resp, err->code, err->msg, data, err) : -1;
    return http_response_data(resp, data, err);
}

int api_version(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (system_version(req->ctx, api_details(req), &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

/* The OpenAPI document as JSON, not an envelope: tools read it as it is. */
int api_openapi(http_request *req, http_response *resp, gb_err *err)
{
    json_t *doc = openapi_document(req->router, err);
    if (!doc)
        return -1;
    char *body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    http_response_raw(resp, 200, "application/json", body, strlen(body));
    return 0;
}

/* docs/openapi.yaml as gpuboxd was built with it. */
int api_openapi_yaml(http_request *req, http_response *resp, gb_err *err)
{
    (void)req;
    (void)err;
    size_t len = 0;
    const char *yaml = openapi_yaml(&len);
    char *body = xmalloc(len + 1);
    memcpy(body, yaml, len + 1);
    http_response_raw(resp, 200, "application/yaml", body, len);
    return 0;
}

/* Prometheus text: the application's gauges and operation counters, then
 * the HTTP server's own request counters. */
int api_metrics(http_request *req, http_response *resp, gb_err *err)
{
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f)
        return err_set(err, ERR_INTERNAL, "out of memory building the metrics");
    int rc = metrics_write(req->ctx, f, err);
    if (rc == 0)
        http_metrics_write(req->metrics, f);
    if (fclose(f) != 0 && rc == 0)
        rc = err_set(err, ERR_INTERNAL, "out of memory building the metrics");
    if (rc < 0) {
        free(body);
        return -1;
    }
    app *a = req->ctx;
    if (a->fleet) { /* every sample says which node it is from */
        size_t tagged_len = 0;
        char *tagged = prom_add_label(body, len, "node", nodes_self(a), &tagged_len);
        free(body);
        body = tagged;
        len = tagged_len;
    }
    http_response_raw(resp, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
    return 0;
}
