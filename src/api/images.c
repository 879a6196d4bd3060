/*
 * images.c - handlers of the image routes: GET /api/v1/images (?name=),
 * POST /api/v1/images/pull {image, registryAuth?, wait?} and DELETE
 * /api/v1/images?name=REF (docs/api.md, "Images"). The service
 * (service/images/images.h) checks the reference; the handlers check the
 * body's fields and their types.
 */
#include "api/api.h"

#include <string.h>

#include "service/images/images.h"
#include "util/json.h"

int api_images_list(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = http_request_query(req, "name");
    if (name && (!*name || strlen(name) > 512))
        return err_set(err, ERR_INVALID_PARAMS,
                       "query parameter name must be 1-512 characters: a repository or repo:tag");
    json_t *data = NULL;
    if (images_list(req->ctx, name, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_image_pull(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const allowed[] = {"image", "registryAuth", "wait", NULL};
    json_t *body = NULL;
    const char *image = NULL;
    bool wait = true;
    images_auth auth;
    if (api_body(req, allowed, true, &body, err) < 0 ||
        json_field_string(body, NULL, "image", &image, true, err) < 0 ||
        json_field_bool(body, NULL, "wait", &wait, false, err) < 0 ||
        images_auth_from_json(body, "registryAuth", &auth, err) < 0)
        return -1;
    json_t *data = NULL;
    if (images_pull(req->ctx, image, &auth, wait, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_image_delete(http_request *req, http_response *resp, gb_err *err)
{
    const char *name = http_request_query(req, "name");
    if (!name || !*name || strlen(name) > 512)
        return err_set(err, ERR_INVALID_PARAMS,
                       "give the image to remove as ?name=repo:tag (1-512 characters)");
    json_t *data = NULL;
    if (images_remove(req->ctx, name, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}
