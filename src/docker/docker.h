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
 * Thread-safe: each call borrows a curl handle from a small pool and gives
 * it back, so connections are reused across calls and threads
 * (docs/docker.md). Every call has a total timeout; response bodies are
 * capped at 64 MiB.
 *
 * Errors: ERR_DOCKER_UNAVAILABLE when the daemon cannot be reached or does
 * not answer in time, ERR_NOT_FOUND for 404s (no such container),
 * ERR_IMAGE_NOT_FOUND for an absent image, ERR_CONFLICT for 409s (name in
 * use, container running), ERR_INVALID_PARAMS for bad arguments,
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

/* host: "unix:///path" or "tcp://host:port"; NULL or "" = $DOCKER_HOST if
 * set, else unix:///var/run/docker.sock. Other schemes are refused with
 * ERR_INVALID_PARAMS. Nothing is contacted yet (see docker_ping). */
docker_client *docker_client_new(const char *host, gb_err *err);
/* Only when no call is running on c. */
void docker_client_free(docker_client *c);
const char *docker_client_host(const docker_client *c);
/* Connections opened so far: stays low while keep-alive works (metrics). */
unsigned long docker_client_connects(const docker_client *c);

/* Generic request: method "GET"/"POST"/..., path such as "/containers/json?all=1"
 * (the version prefix is added), body may be NULL. On any HTTP answer returns
 * 0 with *status set and *resp the parsed JSON body (NULL if empty or not
 * JSON); -1 only when the daemon could not be reached or did not answer in
 * time, or its answer was larger than 64 MiB. */
int docker_request(docker_client *c, const char *method, const char *path, json_t *body,
                   long *status, json_t **resp, gb_err *err);
/* docker_request takes up to 600 s (it serves slow calls such as commit);
 * this one takes at most timeout_s (0 = no limit). */
int docker_request_timeout(docker_client *c, const char *method, const char *path, json_t *body,
                           long timeout_s, long *status, json_t **resp, gb_err *err);

int docker_ping(docker_client *c, gb_err *err);
/* GET /version and GET /info; caller decrefs *out. */
int docker_version(docker_client *c, json_t **out, gb_err *err);
int docker_info(docker_client *c, json_t **out, gb_err *err);

/* GET /images/{name}/json. ERR_IMAGE_NOT_FOUND (naming the image) when absent. */
int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err);

/* POST /containers/create?name=... (name NULL: Docker picks one); config is
 * the Engine API ContainerConfig with HostConfig inside. *id_out is malloc'd.
 * Name in use -> ERR_CONFLICT; image absent -> ERR_IMAGE_NOT_FOUND. */
int docker_container_create(docker_client *c, const char *name, json_t *config, char **id_out,
                            gb_err *err);
/* Starting a running container is success. */
int docker_container_start(docker_client *c, const char *id_or_name, gb_err *err);
/* timeout_s: seconds before SIGKILL (< 0: Docker's default). Stopping a
 * stopped container is success. */
int docker_container_stop(docker_client *c, const char *id_or_name, int timeout_s, gb_err *err);
int docker_container_inspect(docker_client *c, const char *id_or_name, json_t **out, gb_err *err);
/* Removing an absent container is success. force kills a running one
 * (without it, a running container gives ERR_CONFLICT). Anonymous volumes
 * are kept (v=0): they may hold data a later version takes over. */
int docker_container_remove(docker_client *c, const char *id_or_name, bool force, gb_err *err);
/* GET /containers/json?all=1&filters={"label":[label]}; label is "k" or "k=v"
 * (NULL: every container). *out is the JSON array Docker returns. */
int docker_container_list(docker_client *c, const char *label, json_t **out, gb_err *err);

/* POST /containers/{id}/wait?condition=not-running: blocks until the
 * container is not running (at once if it already exited) and sets
 * *exit_code. No time limit: the container decides how long it runs. */
int docker_container_wait(docker_client *c, const char *id_or_name, long *exit_code, gb_err *err);
/* The same, giving up with ERR_INTERNAL after timeout_s (0 = no limit). */
int docker_container_wait_timeout(docker_client *c, const char *id_or_name, long timeout_s,
                                  long *exit_code, gb_err *err);

/* GET /containers/{id}/logs?stdout=1&stderr=1: everything the container
 * wrote so far, split into two malloc'd strings (a TTY container's output is
 * all stdout). cap bounds each (0 = 64 MiB); more is ERR_INTERNAL. */
int docker_container_logs(docker_client *c, const char *id_or_name, char **out_stdout,
                          char **out_stderr, size_t cap, gb_err *err);

#endif
