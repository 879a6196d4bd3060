/*
 * docker.h - the Docker Engine API client: the only place that builds
 * Engine API requests.
 *
 * Talks HTTP over the unix socket (default /var/run/docker.sock, or
 * DOCKER_HOST / --docker-host as "unix:///path" or "tcp://host:port") with
 * libcurl, keeping connections alive; bodies are JSON (jansson). The API
 * version is pinned (DOCKER_API_VERSION) so requests mean the same on any
 * daemon that supports it (Docker 20.10 speaks 1.41).
 *
 * Thread-safe: each call borrows a curl handle from a small pool.
 * Errors: ERR_DOCKER_UNAVAILABLE when the daemon cannot be reached,
 * ERR_NOT_FOUND for 404s (no such container / image), ERR_CONFLICT for 409s,
 * ERR_INTERNAL otherwise; messages carry Docker's own "message".
 */
#ifndef GPUBOX_DOCKER_DOCKER_H
#define GPUBOX_DOCKER_DOCKER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

#define DOCKER_API_VERSION "v1.41"

typedef struct docker_client docker_client;

/* host: NULL = $DOCKER_HOST, else unix:///var/run/docker.sock. */
docker_client *docker_client_new(const char *host, gb_err *err);
void docker_client_free(docker_client *c);
const char *docker_client_host(const docker_client *c);

/* Generic request: method "GET"/"POST"/..., path such as "/containers/json?all=1"
 * (the version prefix is added), body may be NULL. On any HTTP answer returns
 * 0 with *status set and *resp the parsed JSON body (NULL if empty or not
 * JSON); -1 only when the daemon could not be reached. */
int docker_request(docker_client *c, const char *method, const char *path, json_t *body,
                   long *status, json_t **resp, gb_err *err);

int docker_ping(docker_client *c, gb_err *err);
/* GET /version and GET /info; caller decrefs *out. */
int docker_version(docker_client *c, json_t **out, gb_err *err);
int docker_info(docker_client *c, json_t **out, gb_err *err);

/* GET /images/{name}/json. ERR_IMAGE_NOT_FOUND (naming the image) when absent. */
int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err);

/* POST /containers/create?name=...; config is the Engine API ContainerConfig
 * (with HostConfig inside). *id_out is malloc'd. ERR_EXISTS-like 409 -> ERR_CONFLICT. */
int docker_container_create(docker_client *c, const char *name, json_t *config, char **id_out,
                            gb_err *err);
int docker_container_start(docker_client *c, const char *id_or_name, gb_err *err);
/* timeout_s: seconds before SIGKILL. Stopping a stopped container is success. */
int docker_container_stop(docker_client *c, const char *id_or_name, int timeout_s, gb_err *err);
int docker_container_inspect(docker_client *c, const char *id_or_name, json_t **out, gb_err *err);
/* Removing an absent container is success. force kills a running one;
 * volumes=false keeps anonymous volumes. */
int docker_container_remove(docker_client *c, const char *id_or_name, bool force, gb_err *err);
/* GET /containers/json?all=1&filters={"label":[label]}; label is "k" or "k=v".
 * *out is the JSON array Docker returns. */
int docker_container_list(docker_client *c, const char *label, json_t **out, gb_err *err);

#endif
