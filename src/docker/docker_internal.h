/*
 * docker_internal.h - what the files of src/docker/ share and nobody else
 * sees: the transport (docker_transport.c) offers one way to send a request
 * and map its answer to a gb_err; the call files (docker_system.c,
 * docker_containers.c) build Engine API paths and bodies on top of it.
 *
 * A response body goes to a "sink", a curl write callback plus its context:
 * by default a capped growable buffer that is then parsed as JSON; the
 * container logs call plugs in a demultiplexer instead, so log bytes are
 * split into stdout and stderr as they arrive and never buffered twice.
 */
#ifndef GPUBOX_DOCKER_INTERNAL_H
#define GPUBOX_DOCKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "docker/docker.h"

/* Connecting to a local socket takes microseconds; a daemon that does not
 * accept within this is hung. */
#define DOCKER_CONNECT_TIMEOUT_S 5L
/* Total time for an ordinary call (inspect, list, create, start, remove). */
#define DOCKER_TIMEOUT_S 60L
/* docker_request's default: the generic entry point serves slow calls too
 * (commit, changes of a large container). */
#define DOCKER_LONG_TIMEOUT_S 600L
/* Largest response body buffered in memory. */
#define DOCKER_MAX_RESPONSE (64u * 1024 * 1024)

/* A growable byte buffer that refuses to grow past limit (sets overflow). The
 * data is always NUL-terminated so text can be handed out as a string. */
struct docker_buf {
    char *data;
    size_t len;
    size_t alloc;
    size_t limit;
    bool overflow;
};

/* Append n bytes; false (and overflow set) when the limit would be passed,
 * false without overflow when memory runs out. */
bool docker_buf_append(struct docker_buf *b, const char *data, size_t n);

/* curl write callback whose userdata is a struct docker_buf. */
size_t docker_buf_sink(char *data, size_t size, size_t nmemb, void *userdata);

/* Send one request. body (may be NULL) is sent as JSON; the response body is
 * fed to sink(sink_ctx); timeout_s bounds the whole exchange (0 = none).
 * Returns 0 on any HTTP answer with *status set; -1 when the daemon could not
 * be reached, timed out, or the sink refused the body (the caller knows its
 * sink, so it replaces the message with the reason it refused). */
int docker_call_raw(docker_client *c, const char *method, const char *path, json_t *body,
                    long timeout_s, size_t (*sink)(char *, size_t, size_t, void *), void *sink_ctx,
                    long *status, gb_err *err);

/* docker_call_raw into a DOCKER_MAX_RESPONSE-capped buffer, then parse it:
 * *resp is the JSON body or NULL when empty or not JSON. */
int docker_call(docker_client *c, const char *method, const char *path, json_t *body,
                long timeout_s, long *status, json_t **resp, gb_err *err);

/* GET path within DOCKER_TIMEOUT_S and expect 200 with a JSON body, which
 * *out then owns; other answers become errors as docker_status_err makes
 * them, introduced by what_fmt ("inspecting container 'foo'"). */
int docker_get(docker_client *c, const char *path, json_t **out, gb_err *err, const char *what_fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* Turn a non-2xx answer into an error: 404 -> ERR_NOT_FOUND, 409 ->
 * ERR_CONFLICT, else ERR_INTERNAL. The message is "<what>: <Docker's message>
 * (HTTP <status>)", what being printf-formatted. Always returns -1. */
int docker_status_err(long status, json_t *resp, gb_err *err, const char *what_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Docker's own "message" field of an error body, or "" when there is none. */
const char *docker_message(json_t *resp);

/* Percent-encode s for a URL; characters in keep (besides the unreserved
 * ones) stay as they are, so "/" can be kept in image references. NULL when
 * memory runs out. */
char *docker_escape(const char *s, const char *keep);

#endif
