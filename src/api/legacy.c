/*
 * legacy.c - gpu-docker-api's older route family (/api/v1/containers...),
 * mapped onto the same replica-set service functions as /replicaSet.
 *
 * The older routes name a set by its container ("foo-3") or by the set
 * ("foo"); replicaset_resolve_name turns either into the set's name. The
 * create body uses the older field names (containerName, Ports with
 * hostPort and containerPort given as numbers or as strings of digits);
 * it is rewritten into a replica-set spec and then goes the same way as
 * POST /replicaSet, so both families accept and refuse the same things.
 * The gpu and volume patches become a replica-set patch body (gpuPatch,
 * volumePatch) the same way.
 */
#include "api/api.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "service/replicaset/replicaset.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"

/* {name} of an older route: "foo" or "foo-N", resolved to the set's name. */
static int legacy_name(http_request *req, char base[NAME_MAX_LEN + 1], gb_err *err)
{
    const char *name = http_request_param(req, "name");
    char split[NAME_MAX_LEN + 1];
    int version = 0;
    if (name_check_replicaset(name, NULL) < 0 && name_split_versioned(name, split, &version) < 0)
        return name_check_replicaset(name, err); /* says what is wrong with it */
    return replicaset_resolve_name(req->ctx, name, base, err);
}

/* A port given as 22 or "22" (gpu-docker-api's documents show both). */
static int legacy_port(json_t *entry, const char *where, const char *field, gb_err *err)
{
    json_t *v = json_object_get(entry, field);
    if (!v || json_is_null(v) || json_is_integer(v))
        return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    size_t len = s ? strlen(s) : 0;
    if (!s || len == 0 || len > 5 || strspn(s, "0123456789") != len)
        return err_set(err, ERR_WRONG_TYPE,
                       "field '%s.%s' must be a port number such as 22 or \"22\", got %s", where,
                       field, s ? "a string that is not a number" : json_type_name(v));
    json_object_set_new(entry, field, json_integer(strtol(s, NULL, 10)));
    return 0;
}

/* Ports:[{hostPort, containerPort}] -> ports:[{hostPort, containerPort}]. */
static int legacy_ports(const json_t *ports, json_t **out, gb_err *err)
{
    if (!json_is_array(ports))
        return err_set(err, ERR_WRONG_TYPE,
                       "field 'Ports' must be an array of {hostPort, containerPort}, got %s",
                       json_type_name(ports));
    _cleanup_json_ json_t *copy = json_deep_copy(ports);
    static const char *const port_fields[] = {"hostPort", "containerPort", "protocol", NULL};
    size_t i;
    json_t *entry;
    json_array_foreach(copy, i, entry)
    {
        char where[32];
        snprintf(where, sizeof(where), "Ports[%zu]", i);
        if (!json_is_object(entry))
            return err_set(err, ERR_WRONG_TYPE,
                           "field '%s' must be an object {hostPort, containerPort}, got %s", where,
                           json_type_name(entry));
        if (api_check_fields(entry, port_fields, err) < 0)
            return err_prefix(err, "%s", where);
        if (legacy_port(entry, where, "hostPort", err) < 0 ||
            legacy_port(entry, where, "containerPort", err) < 0)
            return -1;
    }
    *out = steal_ptr(&copy);
    return 0;
}

/* The older create body as a replica-set create body. */
/* gpu-docker-api made a new volume "foo-N" at each resize, so its clients
 * bind "foo-2"; gpubox resizes "foo" in place. A volume name has no '-',
 * so a source of the form <name>-<digits> (not a host path) can only mean
 * that volume: it becomes "foo". Binds are objects {src, dest, ...} or
 * strings "src:dest[:ro]"; anything else is left for the spec checks. */
static json_t *legacy_volume_ref(json_t *bind)
{
    bool is_obj = json_is_object(bind);
    const char *text =
        is_obj ? json_string_value(json_object_get(bind, "src")) : json_string_value(bind);
    char ref[NAME_MAX_LEN + PATH_MAX + 8];
    if (!text || text[0] == '/' || strlen(text) >= sizeof(ref))
        return json_incref(bind);
    size_t len = strcspn(text, ":");
    const char *dash = memchr(text, '-', len);
    size_t digits = dash ? strspn(dash + 1, "0123456789") : 0;
    if (!dash || dash == text || digits == 0 || dash + 1 + digits != text + len ||
        memchr(dash + 1, '-', digits))
        return json_incref(bind);
    snprintf(ref, sizeof(ref), "%.*s%s", (int)(dash - text), text, is_obj ? "" : text + len);
    if (!is_obj)
        return json_string(ref);
    json_t *copy = json_copy(bind);
    json_object_set_new(copy, "src", json_string(ref));
    return copy;
}

/* Every bind of an array through legacy_volume_ref; a non-array as it is. */
static json_t *legacy_volume_refs(json_t *binds)
{
    if (!json_is_array(binds))
        return json_incref(binds);
    json_t *out = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        json_array_append_new(out, legacy_volume_ref(b));
    }
    return out;
}

static int legacy_to_create_body(const json_t *body, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *spec = json_object();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (strcmp(key, "containerName") == 0) {
            json_object_set(spec, "replicaSetName", v);
        } else if (strcmp(key, "Ports") == 0) {
            json_t *ports = NULL;
            if (json_is_null(v))
                continue;
            if (legacy_ports(v, &ports, err) < 0)
                return -1;
            json_object_set_new(spec, "ports", ports);
        } else if (strcmp(key, "binds") == 0) {
            json_object_set_new(spec, key, legacy_volume_refs(v));
        } else {
            json_object_set(spec, key, v);
        }
    }
    *out = steal_ptr(&spec);
    return 0;
}

int api_container_create(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"imageName", "containerName", "gpuCount", "binds",
                                         "env",       "cmd",           "Ports",    "containerPorts",
                                         NULL};
    json_t *body = NULL;
    if (api_body(req, fields, true, &body, err) < 0)
        return -1;
    _cleanup_json_ json_t *create = NULL;
    if (legacy_to_create_body(body, &create, err) < 0)
        return -1;
    return api_replicaset_create_from(req, create, resp, err);
}

/* Stop always gives the GPUs and ports back; gpu-docker-api's later
 * clients say so with restoreGpus/restorePorts true. */
int api_container_stop(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"restoreGpus", "restorePorts", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    bool gpus = true, ports = true;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body && (json_field_bool(body, NULL, "restoreGpus", &gpus, false, err) < 0 ||
                  json_field_bool(body, NULL, "restorePorts", &ports, false, err) < 0)))
        return -1;
    if (!gpus || !ports)
        return err_set(err, ERR_INVALID_PARAMS,
                       "stop always releases the GPUs and ports; to stop and keep them use PATCH "
                       "/api/v1/replicaSet/{name}/pause");
    if (legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_stop(req->ctx, name, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

/* force is accepted for gpu-docker-api's clients: gpubox always stops the
 * container before removing it. delEtcdInfoAndVersionRecord is purge. */
int api_container_delete(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"force", "delEtcdInfoAndVersionRecord", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    bool force = false, purge = false;
    if (api_body(req, fields, false, &body, err) < 0 ||
        (body &&
         (json_field_bool(body, NULL, "force", &force, false, err) < 0 ||
          json_field_bool(body, NULL, "delEtcdInfoAndVersionRecord", &purge, false, err) < 0)))
        return -1;
    if (legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_delete(req->ctx, name, purge, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}

int api_container_commit(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"newImageName", "overwrite", "keepEnv", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, fields, true, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    return api_commit_from(req, name, body, resp, err);
}

int api_container_execute(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"cmd", "workDir", "timeoutSeconds", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, fields, true, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    return api_execute_from(req, name, body, resp, err);
}

/* {gpuCount} -> a patch's gpuPatch. */
int api_container_gpu(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"gpuCount", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    long long count = 0;
    if (api_body(req, fields, true, &body, err) < 0 ||
        json_field_int(body, NULL, "gpuCount", &count, true, err) < 0 ||
        legacy_name(req, name, err) < 0)
        return -1;
    _cleanup_json_ json_t *patch =
        json_pack("{s:{s:O}}", "gpuPatch", "gpuCount", json_object_get(body, "gpuCount"));
    return api_patch_from(req, name, patch, resp, err);
}

/* {type, oldBind, newBind} -> a patch's volumePatch. type "volume" says the
 * binds name gpubox volumes, "bind" host paths; it is checked against
 * them, then dropped. */
static int legacy_bind_type(const json_t *bind, const char *type, const char *what, gb_err *err)
{
    const char *src = json_is_object(bind) ? json_string_value(json_object_get(bind, "src"))
                                           : json_string_value(bind);
    if (!type || !src || !*src)
        return 0;
    bool path = src[0] == '/';
    if (strcmp(type, "volume") == 0 && path)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s.src is the host path %.64s, but type is \"volume\"; use \"bind\"", what,
                       src);
    if (strcmp(type, "bind") == 0 && !path)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s.src %.64s is a volume name, but type is \"bind\"; use \"volume\"", what,
                       src);
    return 0;
}

int api_container_volume(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const fields[] = {"type", "oldBind", "newBind", NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    const char *type = NULL;
    if (api_body(req, fields, true, &body, err) < 0 ||
        json_field_string(body, NULL, "type", &type, false, err) < 0)
        return -1;
    if (type && strcmp(type, "volume") != 0 && strcmp(type, "bind") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "type is '%.32s'; use \"volume\" or \"bind\"",
                       type);
    json_t *old_bind = json_object_get(body, "oldBind"),
           *new_bind = json_object_get(body, "newBind");
    if (legacy_bind_type(old_bind, type, "oldBind", err) < 0 ||
        legacy_bind_type(new_bind, type, "newBind", err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    _cleanup_json_ json_t *old_ref = old_bind ? legacy_volume_ref(old_bind) : NULL;
    _cleanup_json_ json_t *new_ref = new_bind ? legacy_volume_ref(new_bind) : NULL;
    _cleanup_json_ json_t *patch =
        json_pack("{s:{s:O?, s:O?}}", "volumePatch", "oldBind", old_ref, "newBind", new_ref);
    return api_patch_from(req, name, patch, resp, err);
}

int api_container_restart(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const no_fields[] = {NULL};
    char name[NAME_MAX_LEN + 1];
    json_t *body = NULL;
    if (api_body(req, no_fields, false, &body, err) < 0 || legacy_name(req, name, err) < 0)
        return -1;
    json_t *data = NULL;
    if (replicaset_restart(req->ctx, name, false, &data, err) < 0)
        return -1;
    return http_response_data(resp, data, err);
}
