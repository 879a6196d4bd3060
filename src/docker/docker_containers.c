/*
 * docker_containers.c - the container calls: create, start, stop, inspect,
 * remove, list, wait, rename (logs are docker_logs.c's).
 *
 * The calls that a retried operation journal step repeats are idempotent
 * here: starting a running container, stopping a stopped one and removing
 * an absent one all succeed.
 *
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"

/* Docker's own grace for a stop is the container's; a stop waits that long
 * and then for the kill to land. */
#define DOCKER_STOP_MARGIN_S 30L

char *docker_container_path(const char *id, const char *rest, gb_err *err)
{
    if (!id || !*id) {
        err_set(err, ERR_INVALID_PARAMS, "container name or id is empty");
        return NULL;
    }
    _cleanup_free_ char *esc = docker_escape(id, NULL);
    return xasprintf("/containers/%s%s", esc, rest);
}

static int docker_container_create_call(docker_client *c, const char *name, json_t *config,
                                        char **id_out, gb_err *err)
{
    *id_out = NULL;
    if (!json_is_object(config))
        return err_set(err, ERR_INVALID_PARAMS, "container config must be a JSON object");
    _cleanup_free_ char *esc = docker_escape(name ? name : "", NULL);
    _cleanup_free_ char *path = xasprintf("/containers/create%s%s", *esc ? "?name=" : "", esc);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, config, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "creating container '%s'", name ? name : "");

    const char *image = json_string_value(json_object_get(config, "Image"));
    if (status == 404 && strstr(docker_message(resp), "No such image"))
        return err_set(err, ERR_IMAGE_NOT_FOUND,
                       "creating container '%s': image '%s' is not on this server; pull it "
                       "first",
                       name ? name : "", image ? image : "");
    if (status != 201)
        return docker_status_err(status, resp, err, "creating container '%s'", name ? name : "");
    const char *id = json_string_value(json_object_get(resp, "Id"));
    if (!id)
        return err_set(err, ERR_INTERNAL, "creating container '%s': Docker's answer has no Id",
                       name ? name : "");
    size_t i;
    json_t *warning;
    json_array_foreach(json_object_get(resp, "Warnings"), i, warning)
        log_warn("creating container '%s': Docker warns: %s", name ? name : "",
                 json_string_value(warning) ? json_string_value(warning) : "?");
    *id_out = xstrdup(id);
    return 0;
}

int docker_container_create(docker_client *c, const char *name, json_t *config, char **id_out,
                            gb_err *err)
{
    int rc = docker_container_create_call(c, name, config, id_out, err);
    docker_note_change(c, name);
    return rc;
}

/* POST with no body, for start and stop: 204 done, 304 nothing to do. */
static int docker_container_post_call(docker_client *c, const char *id, const char *rest,
                                      long timeout_s, const char *what, gb_err *err)
{
    _cleanup_free_ char *path = docker_container_path(id, rest, err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, NULL, timeout_s, &status, &resp, err) < 0)
        return err_prefix(err, "%s container '%s'", what, id);
    if (status == 204 || status == 304)
        return 0;
    return docker_status_err(status, resp, err, "%s container '%s'", what, id);
}

static int docker_container_post(docker_client *c, const char *id, const char *rest, long timeout_s,
                                 const char *what, gb_err *err)
{
    int rc = docker_container_post_call(c, id, rest, timeout_s, what, err);
    docker_note_change(c, id);
    return rc;
}

int docker_container_start(docker_client *c, const char *id_or_name, gb_err *err)
{
    return docker_container_post(c, id_or_name, "/start", DOCKER_TIMEOUT_S, "starting", err);
}

int docker_container_stop(docker_client *c, const char *id_or_name, int timeout_s, gb_err *err)
{
    char rest[32] = "/stop";
    if (timeout_s >= 0)
        snprintf(rest, sizeof(rest), "/stop?t=%d", timeout_s);
    long total = (timeout_s > 0 ? timeout_s : 10) + DOCKER_STOP_MARGIN_S;
    return docker_container_post(c, id_or_name, rest, total, "stopping", err);
}

int docker_container_inspect(docker_client *c, const char *id_or_name, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = docker_container_path(id_or_name, "/json", err);
    if (!path)
        return -1;
    return docker_get(c, path, out, err, "inspecting container '%s'", id_or_name);
}

int docker_container_size_rw(docker_client *c, const char *id_or_name, uint64_t *bytes, gb_err *err)
{
    *bytes = 0;
    _cleanup_free_ char *path = docker_container_path(id_or_name, "/json?size=1", err);
    if (!path)
        return -1;
    _cleanup_json_ json_t *inspect = NULL;
    if (docker_get(c, path, &inspect, err, "measuring container '%s'", id_or_name) < 0)
        return -1;
    json_int_t v = json_integer_value(json_object_get(inspect, "SizeRw"));
    *bytes = v > 0 ? (uint64_t)v : 0;
    return 0;
}

int docker_container_address(docker_client *c, const char *id_or_name, const char *network,
                             char *addr, size_t size, gb_err *err)
{
    _cleanup_json_ json_t *inspect = NULL;
    if (docker_container_inspect(c, id_or_name, &inspect, err) < 0)
        return -1;
    json_t *nets = json_object_get(json_object_get(inspect, "NetworkSettings"), "Networks");
    const char *ip =
        network ? json_string_value(json_object_get(json_object_get(nets, network), "IPAddress"))
                : NULL;
    const char *key;
    json_t *v;
    json_object_foreach(nets, key, v)
    {
        if (ip && *ip)
            break;
        ip = json_string_value(json_object_get(v, "IPAddress"));
    }
    if (!ip || !*ip || strlen(ip) >= size)
        return err_set(err, ERR_STATE_CONFLICT, "container '%s' has no address on a network",
                       id_or_name);
    snprintf(addr, size, "%s", ip);
    return 0;
}

static int docker_container_remove_call(docker_client *c, const char *id_or_name, bool force,
                                        gb_err *err)
{
    _cleanup_free_ char *path =
        docker_container_path(id_or_name, force ? "?force=1&v=0" : "?force=0&v=0", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "DELETE", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "removing container '%s'", id_or_name);
    if (status == 204 || status == 404)
        return 0;
    return docker_status_err(status, resp, err, "removing container '%s'", id_or_name);
}

int docker_container_remove(docker_client *c, const char *id_or_name, bool force, gb_err *err)
{
    int rc = docker_container_remove_call(c, id_or_name, force, err);
    docker_note_change(c, id_or_name);
    return rc;
}

int docker_container_list(docker_client *c, const char *label, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = NULL;
    if (label && *label) {
        /* json_pack refuses a label that is not UTF-8 */
        _cleanup_json_ json_t *filters = json_pack("{s:[s]}", "label", label);
        if (!filters)
            return err_set(err, ERR_INTERNAL, "listing containers: the label is not UTF-8");
        _cleanup_free_ char *text = json_dumps(filters, JSON_COMPACT);
        _cleanup_free_ char *esc = docker_escape(text, NULL);
        path = xasprintf("/containers/json?all=1&filters=%s", esc);
    } else {
        path = xstrdup("/containers/json?all=1");
    }
    if (docker_get(c, path, out, err, "listing containers labelled '%s'", label ? label : "") < 0)
        return -1;
    if (!json_is_array(*out)) {
        json_decref(steal_ptr(out));
        return err_set(err, ERR_INTERNAL, "listing containers: Docker's answer is not a list");
    }
    return 0;
}

int docker_container_wait_timeout(docker_client *c, const char *id_or_name, long timeout_s,
                                  long *exit_code, gb_err *err)
{
    *exit_code = -1;
    /* not-running returns at once for a container that already exited, so a
     * wait right after start cannot miss a quick exit. */
    _cleanup_free_ char *path =
        docker_container_path(id_or_name, "/wait?condition=not-running", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    time_t started = time(NULL);
    if (docker_call(c, "POST", path, NULL, timeout_s, &status, &resp, err) < 0) {
        /* Running out the clock is the container's doing, not Docker's. */
        if (timeout_s > 0 && time(NULL) - started >= timeout_s)
            return err_set(err, ERR_INTERNAL, "container '%s' did not exit within %ld s",
                           id_or_name, timeout_s);
        return err_prefix(err, "waiting for container '%s'", id_or_name);
    }
    if (status != 200)
        return docker_status_err(status, resp, err, "waiting for container '%s'", id_or_name);
    const char *wait_error =
        json_string_value(json_object_get(json_object_get(resp, "Error"), "Message"));
    if (wait_error && *wait_error)
        return err_set(err, ERR_INTERNAL, "waiting for container '%s': %s", id_or_name, wait_error);
    json_t *code = json_object_get(resp, "StatusCode");
    if (!json_is_integer(code))
        return err_set(err, ERR_INTERNAL,
                       "waiting for container '%s': Docker's answer has no StatusCode", id_or_name);
    *exit_code = (long)json_integer_value(code);
    return 0;
}

int docker_container_wait(docker_client *c, const char *id_or_name, long *exit_code, gb_err *err)
{
    return docker_container_wait_timeout(c, id_or_name, 0, exit_code, err);
}

static int docker_container_rename_call(docker_client *c, const char *id_or_name,
                                        const char *new_name, gb_err *err)
{
    if (!new_name || !*new_name)
        return err_set(err, ERR_INVALID_PARAMS, "renaming container '%s': the new name is empty",
                       id_or_name ? id_or_name : "");
    _cleanup_free_ char *esc = docker_escape(new_name, NULL);
    _cleanup_free_ char *rest = xasprintf("/rename?name=%s", esc);
    _cleanup_free_ char *path = docker_container_path(id_or_name, rest, err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "renaming container '%s' to '%s'", id_or_name, new_name);
    if (status == 204)
        return 0;
    /* 409 for a taken name; 400 for one Docker cannot accept (bad
     * characters, or the container's own name). */
    return docker_status_err(status, resp, err, "renaming container '%s' to '%s'", id_or_name,
                             new_name);
}

int docker_container_rename(docker_client *c, const char *id_or_name, const char *new_name,
                            gb_err *err)
{
    int rc = docker_container_rename_call(c, id_or_name, new_name, err);
    docker_note_change(c, id_or_name);
    docker_note_change(c, new_name);
    return rc;
}
