/*
 * docker_system.c - calls about the daemon: ping, version, info. Each
 * builds one Engine API path and lets the transport (docker_transport.c)
 * send it and map the answer.
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
