/*
 * system.c - handlers of the system routes: /healthz, /version and
 * /openapi.json.
 */
#include "api/api.h"

#include <string.h>

#include "http/openapi.h"
#include "service/service.h"

int api_healthz(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (system_health(req->ctx, &data, err) < 0) /* unhealthy still shows which part */
        return data ? http_response_envelope(resp, err->code, err->msg, data, err) : -1;
    return http_response_data(resp, data, err);
}

int api_version(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (system_version(req->ctx, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

/* The bare OpenAPI document, not an envelope: tools read it as it is. */
int api_openapi(http_request *req, http_response *resp, gb_err *err)
{
    json_t *doc = openapi_document(req->router, "gpubox", GPUBOX_VERSION);
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!body)
        return err_set(err, ERR_INTERNAL, "out of memory building the OpenAPI document");
    http_response_raw(resp, 200, "application/json", body, strlen(body));
    return 0;
}
