/*
 * spec_patch.c - the spec a patch asks for: the current spec with the
 * patch's changes applied, validated exactly as a create's spec is.
 *
 * The change is made on the spec's normalized JSON form (replicaset_spec_to_json)
 * and the result parsed again with replicaset_spec_from_json, so a patch can never
 * produce a spec a create would refuse, and "nothing changed" is simply the
 * two normalized forms being equal. The fields (docs/api.md):
 *   gpuPatch    {gpuCount, gpuMemory,         the GPU fields, read by the rules of
 *                gpuShared, gpuPolicy,         replicaset_spec_gpu_from_json for a patch
 *                gpuUUIDs, gpuModel}           (absent ones keep their values)
 *   volumePatch {oldBind, newBind}            replace a bind; only oldBind:
 *                                             remove it; only newBind: add it.
 *                                             A bind is {src, dest, readOnly?}
 *                                             or "src:dest[:ro]". An array of
 *                                             them: each in turn (gpubox
 *                                             update -v ... --volume-rm ...)
 *   envPatch    ["K=V", ...]                  the whole new environment, or
 *               {set: ["K=V"], unset: ["K"]}  changes to it
 *   containerPorts, ports                     the new port list (either or
 *                                             both; what is absent is empty)
 *   cpus, memory, shmSize, restartPolicy      the new limits (null: none)
 *   imageName                                 another image: the new version
 *                                             starts from it, without the
 *                                             system disk (version.c)
 *   sshKeys                                   the new key list (null, []: none)
 *   cpuCount                                  exclusive cores (0 or null: none)
 */
#include "service/replicaset/patch_request.h"

#include <stdio.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/json.h"

/* gpuPatch's fields (replicaset/spec_gpu.c reads them). */
static const char *const replicaset_patch_gpu_fields[] = {
    "gpuCount", "gpuMemory", "gpuCores", "gpuShared", "gpuPolicy", "gpuUUIDs", "gpuModel", NULL};

static bool replicaset_patch_listed(const char *const *list, const char *key)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0)
            return true;
    return false;
}

static int replicaset_patch_check_fields(const json_t *obj, const char *where,
                                         const char *const *allowed, gb_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (replicaset_patch_listed(allowed, key))
            continue;
        char list[256] = "";
        for (size_t i = 0; allowed[i]; i++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                     allowed[i]);
        return err_set(err, ERR_INVALID_PARAMS, "unknown field '%s%s%.64s'; %s takes %s",
                       where ? where : "", where ? "." : "", key, where ? where : "a patch", list);
    }
    return 0;
}

/* gpuPatch onto the parsed spec: absent fields keep their values. Errors
 * name the field under gpuPatch. */
static int replicaset_patch_gpu(replicaset_spec *spec, const json_t *gp, gb_err *err)
{
    if (!json_is_object(gp))
        return err_set(err, ERR_WRONG_TYPE,
                       "gpuPatch must be an object {gpuCount, gpuMemory, ...}, not %s",
                       json_type_name(gp));
    long long count = 0;
    if (replicaset_patch_check_fields(gp, "gpuPatch", replicaset_patch_gpu_fields, err) < 0 ||
        json_field_int(gp, "gpuPatch", "gpuCount", &count, false, err) < 0)
        return -1;
    if (replicaset_spec_gpu_from_json(gp, true, spec, err) < 0)
        return err_prefix(err, "gpuPatch");
    return 0;
}

/* A bind as {src, dest, readOnly} from either form; NULL with err set. */
static json_t *replicaset_patch_bind(const json_t *b, const char *what, gb_err *err)
{
    if (json_is_object(b)) {
        static const char *const fields[] = {"src", "dest", "readOnly", NULL};
        const char *src = NULL, *dest = NULL;
        bool ro = false;
        if (replicaset_patch_check_fields(b, what, fields, err) < 0 ||
            json_field_string(b, what, "src", &src, true, err) < 0 ||
            json_field_string(b, what, "dest", &dest, true, err) < 0 ||
            json_field_bool(b, what, "readOnly", &ro, false, err) < 0)
            return NULL;
        return json_pack("{s:s, s:s, s:b}", "src", src, "dest", dest, "readOnly", ro);
    }
    if (!json_is_string(b)) {
        err_set(err, ERR_WRONG_TYPE,
                "%s must be a bind {src, dest} or a string \"src:dest\", not %s", what,
                json_type_name(b));
        return NULL;
    }
    /* "src:dest" or "src:dest:ro" / ":rw", as docker run -v writes them. */
    char text[2 * RS_MAX_STRING + 8];
    if (strlen(json_string_value(b)) >= sizeof(text)) {
        err_set(err, ERR_INVALID_PARAMS, "%s is too long", what);
        return NULL;
    }
    snprintf(text, sizeof(text), "%s", json_string_value(b));
    char *dest = strchr(text, ':');
    char *mode = dest ? strchr(dest + 1, ':') : NULL;
    if (!dest || dest == text || !dest[1] || (mode && strcmp(mode, ":ro") && strcmp(mode, ":rw"))) {
        err_set(err, ERR_INVALID_PARAMS,
                "%s is '%.64s'; write a bind as \"src:dest\" or \"src:dest:ro\"", what,
                json_string_value(b));
        return NULL;
    }
    *dest++ = '\0';
    if (mode)
        *mode++ = '\0';
    return json_pack("{s:s, s:s, s:b}", "src", text, "dest", dest, "readOnly",
                     mode && strcmp(mode, "ro") == 0);
}

static bool replicaset_patch_same_bind(const json_t *a, const json_t *b)
{
    return json_equal(json_object_get(a, "src"), json_object_get(b, "src")) &&
           json_equal(json_object_get(a, "dest"), json_object_get(b, "dest"));
}

static int replicaset_patch_volume(json_t *spec, const json_t *vp, gb_err *err)
{
    static const char *const fields[] = {"oldBind", "newBind", NULL};
    if (!json_is_object(vp))
        return err_set(err, ERR_WRONG_TYPE,
                       "volumePatch must be an object {oldBind, newBind} (or a list of "
                       "them), not %s",
                       json_type_name(vp));
    if (replicaset_patch_check_fields(vp, "volumePatch", fields, err) < 0)
        return -1;
    json_t *old_in = json_object_get(vp, "oldBind"), *new_in = json_object_get(vp, "newBind");
    if (json_is_null(old_in))
        old_in = NULL;
    if (json_is_null(new_in))
        new_in = NULL;
    if (!old_in && !new_in)
        return err_set(err, ERR_INVALID_PARAMS,
                       "volumePatch needs oldBind (the bind to change or remove), newBind (the "
                       "bind to add or put in its place), or both");
    _cleanup_json_ json_t *old_bind =
        old_in ? replicaset_patch_bind(old_in, "volumePatch.oldBind", err) : NULL;
    _cleanup_json_ json_t *new_bind =
        new_in ? replicaset_patch_bind(new_in, "volumePatch.newBind", err) : NULL;
    if ((old_in && !old_bind) || (new_in && !new_bind))
        return -1;
    json_t *binds = json_object_get(spec, "binds");
    if (!old_bind)
        return json_array_append(binds, new_bind) == 0
                   ? 0
                   : err_set(err, ERR_INTERNAL, "out of memory");
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        if (!replicaset_patch_same_bind(b, old_bind))
            continue;
        return (new_bind ? json_array_set(binds, i, new_bind) : json_array_remove(binds, i)) == 0
                   ? 0
                   : err_set(err, ERR_INTERNAL, "out of memory");
    }
    return err_set(err, ERR_INVALID_PARAMS,
                   "volumePatch.oldBind %s:%s is not one of the replica set's binds (%zu bind(s); "
                   "inspect the replica set to see them)",
                   json_string_value(json_object_get(old_bind, "src")),
                   json_string_value(json_object_get(old_bind, "dest")), json_array_size(binds));
}

/* volumePatch: one change, or an array of them applied in order (so one
 * new version can add, replace and remove several binds). */
static int replicaset_patch_volumes(json_t *spec, const json_t *vp, gb_err *err)
{
    if (!json_is_array(vp))
        return replicaset_patch_volume(spec, vp, err);
    if (json_array_size(vp) == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "volumePatch is an empty list; give one or more {oldBind, newBind}");
    size_t i;
    json_t *one;
    json_array_foreach(vp, i, one)
    {
        if (replicaset_patch_volume(spec, one, err) < 0)
            return err_prefix(err, "volumePatch[%zu]", i);
    }
    return 0;
}

/* Remove every entry of env named `key` (the part before '='). */
static void replicaset_patch_env_remove(json_t *env, const char *key, size_t keylen)
{
    for (size_t i = json_array_size(env); i-- > 0;) {
        const char *e = json_string_value(json_array_get(env, i));
        if (e && strncmp(e, key, keylen) == 0 && e[keylen] == '=')
            json_array_remove(env, i);
    }
}

static int replicaset_patch_env_changes(json_t *env, const json_t *ep, gb_err *err)
{
    static const char *const fields[] = {"set", "unset", NULL};
    _cleanup_free_ const char **set = NULL, **unset = NULL;
    size_t nset = 0, nunset = 0;
    if (replicaset_patch_check_fields(ep, "envPatch", fields, err) < 0 ||
        json_field_string_array(ep, "envPatch", "set", &set, &nset, false, err) < 0 ||
        json_field_string_array(ep, "envPatch", "unset", &unset, &nunset, false, err) < 0)
        return -1;
    for (size_t i = 0; i < nunset; i++) {
        if (!unset[i][0] || strchr(unset[i], '='))
            return err_set(err, ERR_INVALID_PARAMS,
                           "envPatch.unset[%zu] is '%.64s'; give a variable's name, without '='", i,
                           unset[i]);
        replicaset_patch_env_remove(env, unset[i], strlen(unset[i]));
    }
    for (size_t i = 0; i < nset; i++) {
        const char *eq = strchr(set[i], '=');
        if (!eq || eq == set[i])
            return err_set(err, ERR_INVALID_PARAMS,
                           "envPatch.set[%zu] is '%.64s'; environment entries look like "
                           "NAME=value",
                           i, set[i]);
        /* The first entry of the name takes the new value in place (the
         * order the user sees stays); any later ones go. */
        size_t keylen = (size_t)(eq - set[i]);
        size_t at = json_array_size(env);
        for (size_t k = 0; k < json_array_size(env) && at == json_array_size(env); k++) {
            const char *e = json_string_value(json_array_get(env, k));
            if (e && strncmp(e, set[i], keylen) == 0 && e[keylen] == '=')
                at = k;
        }
        if (at == json_array_size(env)) {
            json_array_append_new(env, json_string(set[i]));
            continue;
        }
        json_array_set_new(env, at, json_string(set[i]));
        for (size_t k = json_array_size(env); k-- > at + 1;) {
            const char *e = json_string_value(json_array_get(env, k));
            if (e && strncmp(e, set[i], keylen) == 0 && e[keylen] == '=')
                json_array_remove(env, k);
        }
    }
    return 0;
}

static int replicaset_patch_env(json_t *spec, const json_t *ep, gb_err *err)
{
    if (json_is_array(ep))
        return json_object_set(spec, "env", (json_t *)ep) == 0
                   ? 0
                   : err_set(err, ERR_INTERNAL, "out of memory");
    if (!json_is_object(ep))
        return err_set(err, ERR_WRONG_TYPE,
                       "envPatch must be the new environment [\"K=V\", ...] or {\"set\": "
                       "[\"K=V\"], \"unset\": [\"K\"]}, not %s",
                       json_type_name(ep));
    return replicaset_patch_env_changes(json_object_get(spec, "env"), ep, err);
}

/* Every field of the patch applied to spec (the JSON form). */
static int replicaset_patch_apply(json_t *spec, const replicaset_patch_request *patch, gb_err *err)
{
    if (patch->volumes && !json_is_null(patch->volumes) &&
        replicaset_patch_volumes(spec, patch->volumes, err) < 0)
        return -1;
    if (patch->env && !json_is_null(patch->env) && replicaset_patch_env(spec, patch->env, err) < 0)
        return -1;
    if (patch->container_ports || patch->ports) {
        json_object_set_new(spec, "containerPorts",
                            patch->container_ports ? json_incref((json_t *)patch->container_ports)
                                                   : json_array());
        json_object_set_new(spec, "ports",
                            patch->ports ? json_incref((json_t *)patch->ports) : json_array());
    }
    const struct {
        const char *name;
        const json_t *value;
    } fields[] = {
        {"imageName", patch->image},
        {"cpus", patch->cpus},
        {"memory", patch->memory},
        {"shmSize", patch->shm_size},
        {"restartPolicy", patch->restart_policy},
        {"sshKeys", patch->ssh_keys},
        {"cpuCount", patch->cpu_count},
    };
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (fields[i].value)
            json_object_set(spec, fields[i].name, (json_t *)fields[i].value);
    return 0;
}

int replicaset_spec_patch(const replicaset_spec *cur, const replicaset_patch_request *patch,
                          replicaset_spec *out, bool *changed, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    _cleanup_json_ json_t *before = replicaset_spec_to_json(cur);
    _cleanup_json_ json_t *spec = json_deep_copy(before);
    if (!before || !spec)
        return err_set(err, ERR_INTERNAL, "out of memory");
    const json_t *gp = patch->gpu;
    if (replicaset_patch_apply(spec, patch, err) < 0 ||
        replicaset_spec_from_json(spec, NULL, out, err) < 0)
        return -1;
    if (gp && !json_is_null(gp) && replicaset_patch_gpu(out, gp, err) < 0) {
        replicaset_spec_free(out);
        return -1;
    }
    _cleanup_json_ json_t *after = replicaset_spec_to_json(out);
    if (!after) {
        replicaset_spec_free(out);
        return err_set(err, ERR_INTERNAL, "out of memory");
    }
    *changed = !json_equal(before, after);
    return 0;
}
