/*
 * queue.c - GET /api/v1/queue: the waiting requests in serving order
 * (service/queue/queue.h); DELETE /api/v1/queue/{name}: one taken out.
 * Creates that queue go through the create handlers (replicasets.c,
 * legacy.c), moves through moves.c.
 */
#include "api/api.h"

#include "service/queue/queue.h"

int api_queue_list(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    if (queue_list(req->ctx, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_queue_cancel(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = NULL;
    json_t *data = NULL;
    if (api_path_name(req, &name, err) < 0 || queue_cancel(req->ctx, name, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}
