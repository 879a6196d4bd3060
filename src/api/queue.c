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

/* Only another node of the fleet reaches it (SCOPE_NODE: its proof is
 * checked before this runs), as itself (api_node_acting): it only wakes a
 * pass. */
int api_queue_tell(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"what", NULL};
    json_t *body = NULL;
    const char *what = NULL;
    if (api_body(req, fields, true, &body, err) < 0 ||
        json_field_string(body, NULL, "what", &what, true, err) < 0 ||
        queue_told(req->ctx, what, err) < 0)
        return -1;
    return http_response_data(resp, json_object(), err);
}
