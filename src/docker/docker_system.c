/*
 * docker_system.c - calls about the daemon and its images: ping, version,
 * info, image inspect. Each builds one Engine API path and lets the
 * transport (docker_transport.c) send it and map the answer.
 */
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/cleanup.h"

/* A health check should fail fast rather than hang a caller for a minute. */
#define DOCKER_PING_TIMEOUT_S 10L

int docker_ping(docker_client *c, gb_err *err)
{
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "GET", "/_ping", NULL, DOCKER_PING_TIMEOUT_S, &status, &resp, err) < 0)
        return -1;
    if (status != 200)
        return docker_status_err(status, resp, err, "pinging Docker at %s", docker_client_host(c));
    return 0;
}

int docker_version(docker_client *c, json_t **out, gb_err *err)
{
    return docker_get(c, "/version", out, err, "asking Docker at %s for its version",
                      docker_client_host(c));
}

int docker_info(docker_client *c, json_t **out, gb_err *err)
{
    return docker_get(c, "/info", out, err, "asking Docker at %s for its configuration",
                      docker_client_host(c));
}

int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err)
{
    *out = NULL;
    if (!image || !*image)
        return err_set(err, ERR_IMAGE_EMPTY, "image name is empty");
    /* A reference keeps its '/' (registry/repo) and ':'/'@' (tag, digest) as
     * the docker CLI sends them; anything else is escaped. */
    _cleanup_free_ char *ref = docker_escape(image, "/:@");
    _cleanup_free_ char *path = NULL;
    if (!ref || asprintf(&path, "/images/%s/json", ref) < 0) {
        path = NULL;
        return err_set(err, ERR_INTERNAL, "out of memory");
    }
    gb_err inner = GB_ERR_INIT;
    if (docker_get(c, path, out, &inner, "inspecting image '%s'", image) == 0)
        return 0;
    if (inner.code == ERR_NOT_FOUND)
        return err_set(err, ERR_IMAGE_NOT_FOUND,
                       "image '%s' is not present locally; pull or import it first "
                       "(docker pull %s)",
                       image, image);
    return err_set(err, inner.code, "%s", inner.msg);
}
