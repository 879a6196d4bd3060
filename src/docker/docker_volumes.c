/*
 * docker_volumes.c - the volume calls: create, inspect, remove, list.
 *
 * gpubox's volume backends (src/volume/) hand their storage to Docker as
 * named volumes, often a local volume bound to a directory the backend
 * mounted (driver_opts type=none, o=bind, device=<dir>); these calls are
 * how they do it. Volumes carry gpubox's labels (gpubox.volume) so the
 * start-up reconciliation can list them.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* "/volumes/<escaped name><rest>"; NULL when the name is empty (err says so). */
static char *docker_volume_path(const char *name, const char *rest, gb_err *err)
{
    if (!name || !*name) {
        err_set(err, ERR_INVALID_PARAMS, "volume name is empty");
        return NULL;
    }
    _cleanup_free_ char *esc = docker_escape(name, NULL);
    return xasprintf("/volumes/%s%s", esc, rest);
}

/* Add obj[key] = a copy of strings (an object of strings, or NULL: nothing). */
static int docker_volume_strings(json_t *obj, const char *key, json_t *strings, const char *what,
                                 gb_err *err)
{
    if (!strings)
        return 0;
    const char *k;
    json_t *v;
    bool ok = json_is_object(strings);
    json_object_foreach(strings, k, v) ok = ok && json_is_string(v);
    if (!ok)
        return err_set(err, ERR_INVALID_PARAMS, "volume %s must be an object of strings", what);
    json_object_set_new(obj, key, json_deep_copy(strings));
    return 0;
}

int docker_volume_create(docker_client *c, const char *name, const char *driver,
                         json_t *driver_opts, json_t *labels, json_t **out, gb_err *err)
{
    if (out)
        *out = NULL;
    if (!name || !*name)
        return err_set(err, ERR_INVALID_PARAMS, "volume name is empty");
    /* json_pack refuses a name or driver that is not UTF-8 */
    _cleanup_json_ json_t *body =
        json_pack("{s:s, s:s}", "Name", name, "Driver", driver && *driver ? driver : "local");
    if (!body)
        return err_set(err, ERR_INTERNAL, "creating a volume: the name or driver is not UTF-8");
    if (docker_volume_strings(body, "DriverOpts", driver_opts, "driver options", err) < 0 ||
        docker_volume_strings(body, "Labels", labels, "labels", err) < 0)
        return err_prefix(err, "creating volume '%s'", name);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", "/volumes/create", body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "creating volume '%s'", name);
    /* Docker answers 400 (API >= 1.42) or 500 (20.10) for a name it will
     * not take; the message says why either way. */
    if (status != 201)
        return docker_status_err(status, resp, err, "creating volume '%s'", name);
    if (!json_is_object(resp))
        return err_set(err, ERR_INTERNAL, "creating volume '%s': Docker's answer is not JSON",
                       name);
    if (out)
        *out = steal_ptr(&resp);
    return 0;
}

int docker_volume_inspect(docker_client *c, const char *name, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = docker_volume_path(name, "", err);
    if (!path)
        return -1;
    return docker_get(c, path, out, err, "inspecting volume '%s'", name);
}

int docker_volume_remove(docker_client *c, const char *name, bool force, gb_err *err)
{
    _cleanup_free_ char *path = docker_volume_path(name, force ? "?force=1" : "?force=0", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "DELETE", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "removing volume '%s'", name);
    if (status == 204 || status == 404)
        return 0;
    return docker_status_err(status, resp, err, "removing volume '%s'", name);
}

int docker_volume_list(docker_client *c, const char *label, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = NULL;
    if (label && *label) {
        /* json_pack refuses a label that is not UTF-8 */
        _cleanup_json_ json_t *filters = json_pack("{s:[s]}", "label", label);
        if (!filters)
            return err_set(err, ERR_INTERNAL, "listing volumes: the label is not UTF-8");
        _cleanup_free_ char *text = json_dumps(filters, JSON_COMPACT);
        _cleanup_free_ char *esc = docker_escape(text, NULL);
        path = xasprintf("/volumes?filters=%s", esc);
    } else {
        path = xstrdup("/volumes");
    }
    _cleanup_json_ json_t *resp = NULL;
    if (docker_get(c, path, &resp, err, "listing volumes labelled '%s'", label ? label : "") < 0)
        return -1;
    json_t *volumes = json_object_get(resp, "Volumes");
    if (json_is_null(volumes) || !volumes) /* Docker sends null for none */
        *out = json_array();
    else if (json_is_array(volumes))
        *out = json_incref(volumes);
    else
        return err_set(err, ERR_INTERNAL, "listing volumes: Docker's answer has no list");
    return 0;
}
