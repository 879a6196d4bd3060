/*
 * patch_request.c - one parser for every patch body
 * (replicaset/patch_request.h).
 *
 * The older routes' bodies are checked against their fields and rewritten
 * into the /replicaSet form ({gpuCount} -> {gpuPatch: {gpuCount}},
 * {type, oldBind, newBind} -> {volumePatch: {oldBind, newBind}}, with
 * gpu-docker-api's "foo-N" volume names made "foo"); then every body is
 * read the same way: unknown fields, the type of each value, the run
 * limits.
 */
#include "service/replicaset/patch_request.h"

#include <stdio.h>
#include <string.h>

#include "service/replicaset/record.h"
#include "service/replicaset/request.h"
#include "util/cleanup.h"
#include "util/json.h"

#define AT(member) offsetof(replicaset_patch_request, member)
#define NONE ((size_t)-1)

/* Every field of a patch. The /replicaSet fields come in the order its
 * unknown-field message lists them; each older route's in its own order. */
const replicaset_patch_field replicaset_patch_fields[] = {
    {"imageName", NULL, 0, RS_PT_STRING, "a string", AT(image)},
    {"gpuPatch", NULL, 0, RS_PT_OBJECT, "an object {gpuCount, gpuMemory, ...}", AT(gpu)},
    {"volumePatch", NULL, 0, RS_PT_OBJECT | RS_PT_ARRAY,
     "an object {oldBind, newBind} (or a list of them)", AT(volumes)},
    {"envPatch", NULL, 0, RS_PT_ARRAY | RS_PT_OBJECT,
     "the new environment [\"K=V\", ...] or {\"set\": [\"K=V\"], \"unset\": [\"K\"]}", AT(env)},
    {"containerPorts", NULL, 0, RS_PT_ARRAY, "an array", AT(container_ports)},
    {"ports", NULL, 0, RS_PT_ARRAY, "an array", AT(ports)},
    {"cpus", NULL, 0, RS_PT_NUMBER, "a number such as 2 or 0.5", AT(cpus)},
    {"memory", NULL, 0, RS_PT_STRING | RS_PT_INTEGER, "a size such as \"8GB\" or a number of bytes",
     AT(memory)},
    {"shmSize", NULL, 0, RS_PT_STRING | RS_PT_INTEGER,
     "a size such as \"8GB\" or a number of bytes", AT(shm_size)},
    {"restartPolicy", NULL, 0, RS_PT_STRING, "a string", AT(restart_policy)},
    {"idleStop", NULL, 0, RS_PT_STRING, "a duration such as \"30m\"", AT(idle_stop)},
    {"maxDuration", NULL, 0, RS_PT_STRING, "a duration such as \"30m\"", AT(max_duration)},
    {"sshKeys", NULL, 0, RS_PT_ARRAY, "an array of strings", AT(ssh_keys)},
    {"cpuCount", NULL, 0, RS_PT_INTEGER, "a whole number of logical CPUs such as 4", AT(cpu_count)},
    {"services", NULL, 0, RS_PT_ARRAY, "a list such as [{\"name\": \"jupyter\", \"port\": 8888}]",
     AT(services)},
    /* PATCH /containers/{name}/gpu */
    {"gpuPatch.gpuCount", "gpuCount", RS_PATCH_CONTAINERS_GPU, RS_PT_INTEGER, "an integer", NONE},
    /* PATCH /containers/{name}/volume */
    {NULL, "type", RS_PATCH_CONTAINERS_VOLUME, RS_PT_STRING, "a string", NONE},
    {"volumePatch.oldBind", "oldBind", RS_PATCH_CONTAINERS_VOLUME, RS_PT_OBJECT | RS_PT_STRING,
     "a bind {src, dest} or a string \"src:dest\"", NONE},
    {"volumePatch.newBind", "newBind", RS_PATCH_CONTAINERS_VOLUME, RS_PT_OBJECT | RS_PT_STRING,
     "a bind {src, dest} or a string \"src:dest\"", NONE},
    {NULL, NULL, 0, 0, NULL, NONE},
};

#define NFIELDS (ARRAY_SIZE(replicaset_patch_fields) - 1)

/* The field's name in family; NULL where family lacks it. A /replicaSet
 * field is one without a '.' (the dotted names say where an older field
 * goes). */
static const char *field_name(const replicaset_patch_field *f, enum replicaset_patch_family family)
{
    if (family != RS_PATCH_REPLICASET)
        return f->older && f->older_family == family ? f->older : NULL;
    return f->name && !strchr(f->name, '.') ? f->name : NULL;
}

static const replicaset_patch_field *field_find(const char *key,
                                                enum replicaset_patch_family family)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *n = field_name(&replicaset_patch_fields[i], family);
        if (n && strcmp(n, key) == 0)
            return &replicaset_patch_fields[i];
    }
    return NULL;
}

static bool type_allowed(const json_t *v, unsigned types)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        return true;
    case JSON_STRING:
        return types & RS_PT_STRING;
    case JSON_INTEGER:
        return types & RS_PT_INTEGER;
    case JSON_REAL:
        return types & RS_PT_REAL;
    case JSON_OBJECT:
        return types & RS_PT_OBJECT;
    case JSON_ARRAY:
        return types & RS_PT_ARRAY;
    default:
        return false;
    }
}

/* Unknown fields (naming what the route takes) and each value's type. */
static int check_fields(const json_t *body, enum replicaset_patch_family family, gb_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        const replicaset_patch_field *f = field_find(key, family);
        if (f)
            continue;
        char list[256] = "";
        for (size_t i = 0; i < NFIELDS; i++) {
            const char *n = field_name(&replicaset_patch_fields[i], family);
            if (n)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                         list[0] ? ", " : "", n);
        }
        return err_set(err, ERR_INVALID_PARAMS, "unknown field '%.64s'; this route takes: %s", key,
                       list);
    }
    for (size_t i = 0; i < NFIELDS; i++) {
        const replicaset_patch_field *f = &replicaset_patch_fields[i];
        const char *n = field_name(f, family);
        json_t *value = n ? json_object_get(body, n) : NULL;
        if (!value || type_allowed(value, f->types))
            continue;
        if (family == RS_PATCH_REPLICASET)
            return err_set(err, ERR_WRONG_TYPE, "%s must be %s, not %s", n, f->expect,
                           json_type_name(value));
        return err_set(err, ERR_WRONG_TYPE, "field '%s' must be %s, got %s", n, f->expect,
                       json_type_name(value));
    }
    return 0;
}

/* ---- the older family's bodies ----------------------------------------------------- */

/* {gpuCount} -> {gpuPatch: {gpuCount}}. */
static int legacy_gpu_body(const json_t *body, json_t **out, gb_err *err)
{
    long long count = 0;
    if (json_field_int(body, NULL, "gpuCount", &count, true, err) < 0)
        return -1;
    *out = json_pack("{s:{s:O}}", "gpuPatch", "gpuCount", json_object_get(body, "gpuCount"));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

/* type "volume" says the binds name gpubox volumes, "bind" host paths; it
 * is checked against them, then dropped. */
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

/* {type, oldBind, newBind} -> {volumePatch: {oldBind, newBind}}. */
static int legacy_volume_body(const json_t *body, json_t **out, gb_err *err)
{
    const char *type = NULL;
    if (json_field_string(body, NULL, "type", &type, false, err) < 0)
        return -1;
    if (type && strcmp(type, "volume") != 0 && strcmp(type, "bind") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "type is '%.32s'; use \"volume\" or \"bind\"",
                       type);
    json_t *old_bind = json_object_get(body, "oldBind"),
           *new_bind = json_object_get(body, "newBind");
    if (legacy_bind_type(old_bind, type, "oldBind", err) < 0 ||
        legacy_bind_type(new_bind, type, "newBind", err) < 0)
        return -1;
    _cleanup_json_ json_t *old_ref = old_bind ? replicaset_legacy_volume_ref(old_bind) : NULL;
    _cleanup_json_ json_t *new_ref = new_bind ? replicaset_legacy_volume_ref(new_bind) : NULL;
    *out = json_pack("{s:{s:O?, s:O?}}", "volumePatch", "oldBind", old_ref, "newBind", new_ref);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

/* ---- the request ------------------------------------------------------------------- */

int replicaset_patch_request_parse(const json_t *body, enum replicaset_patch_family family,
                                   replicaset_patch_request *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    _cleanup_json_ json_t *b = NULL;
    if (!body && family == RS_PATCH_REPLICASET)
        body = b = json_object();
    else if (!body)
        return err_set(err, ERR_INVALID_PARAMS, "this route needs a JSON body");
    if (!json_is_object(body))
        return err_set(err, ERR_WRONG_TYPE, "a patch must be a JSON object, not %s",
                       json_type_name(body));
    if (check_fields(body, family, err) < 0)
        return -1;
    json_t *form = NULL;
    if (family == RS_PATCH_CONTAINERS_GPU && legacy_gpu_body(body, &form, err) < 0)
        return -1;
    if (family == RS_PATCH_CONTAINERS_VOLUME && legacy_volume_body(body, &form, err) < 0)
        return -1;
    if (family != RS_PATCH_REPLICASET && check_fields(form, RS_PATCH_REPLICASET, err) < 0) {
        json_decref(form);
        return -1;
    }
    out->body = form ? form : json_incref((json_t *)body);
    for (size_t i = 0; i < NFIELDS; i++) {
        const replicaset_patch_field *f = &replicaset_patch_fields[i];
        const char *n = field_name(f, RS_PATCH_REPLICASET);
        json_t *v = n ? json_object_get(out->body, n) : NULL;
        if (!v || f->offset == NONE)
            continue;
        *(const json_t **)((char *)out + f->offset) = v;
        out->nfields++;
    }
    if (replicaset_run_limits_parse(out->body, &out->idle_stop_s, &out->max_duration_s, NULL, err) <
        0) {
        replicaset_patch_request_free(out);
        return -1;
    }
    out->idle_stop_given = out->idle_stop != NULL;
    out->max_duration_given = out->max_duration != NULL;
    return 0;
}

void replicaset_patch_request_free(replicaset_patch_request *req)
{
    if (!req)
        return;
    json_decref(req->body);
    memset(req, 0, sizeof(*req));
}

bool replicaset_patch_request_limits_only(const replicaset_patch_request *req)
{
    return req->nfields > 0 && req->nfields == (size_t)req->idle_stop_given +
                                                   (size_t)req->max_duration_given +
                                                   (size_t)(req->services != NULL);
}
