/*
 * compat.c - a replica set's version as gpu-docker-api keeps it, so its
 * clients find the fields they read: GET /replicaSet/{name} answers its
 * record under "info" (and "Info", the key its router really sends), and
 * each history entry carries it as "status":
 *
 *   {version, createTime, config, hostConfig, networkingConfig, platform,
 *    containerName}
 *
 * config and hostConfig are the Engine API's create body for the version,
 * built from the record by the same code that makes the container
 * (replicaset_run_spec_base, docker_run_spec_view), with the user's binds as
 * "src:dest[:ro]" strings as gpu-docker-api shows them.
 *
 * gpu-docker-api stores the create body Docker's client filled in, so its
 * API description (api/gpu-docker-api-en.openapi.json) lists about a
 * hundred fields of config and hostConfig that gpubox's spec never sets
 * (Domainname, User, OnBuild, LogConfig, CgroupnsMode, ...). Those come
 * from the container as Docker reports it (docker_container_config_view of
 * the caller's inspect: the current version's container), and where there
 * is none (an old version, a container gone) or Docker leaves one out, the
 * field still appears with the type the description gives: "", 0, false,
 * null, [] or {} (the tables below). What the spec sets stays the
 * version's own. Nothing here asks Docker or writes anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The JSON type gpu-docker-api's description gives a field, and so the
 * value it has when nothing else gives one. RS_COMPAT_ANY: shown as null in
 * the description; whatever Docker reports is kept. */
typedef enum {
    RS_COMPAT_STR,
    RS_COMPAT_INT,
    RS_COMPAT_BOOL,
    RS_COMPAT_ANY,
    RS_COMPAT_OBJ,
    RS_COMPAT_ARR,
    RS_COMPAT_SIZE, /* [height, width]; [0, 0] when unset, as Docker shows it */
} replicaset_compat_kind;

typedef struct replicaset_compat_field {
    const char *key;
    replicaset_compat_kind kind;
} replicaset_compat_field;

/* The fields of config, hostConfig and what lies inside them, as
 * gpu-docker-api's description lists them (in its order). */
static const replicaset_compat_field replicaset_compat_config[] = {
    {"Hostname", RS_COMPAT_STR},      {"Domainname", RS_COMPAT_STR},
    {"User", RS_COMPAT_STR},          {"AttachStdin", RS_COMPAT_BOOL},
    {"AttachStdout", RS_COMPAT_BOOL}, {"AttachStderr", RS_COMPAT_BOOL},
    {"ExposedPorts", RS_COMPAT_OBJ},  {"Tty", RS_COMPAT_BOOL},
    {"OpenStdin", RS_COMPAT_BOOL},    {"StdinOnce", RS_COMPAT_BOOL},
    {"Env", RS_COMPAT_ARR},           {"Cmd", RS_COMPAT_ANY},
    {"Image", RS_COMPAT_STR},         {"Volumes", RS_COMPAT_ANY},
    {"WorkingDir", RS_COMPAT_STR},    {"Entrypoint", RS_COMPAT_ANY},
    {"OnBuild", RS_COMPAT_ANY},       {"Labels", RS_COMPAT_ANY},
};

static const replicaset_compat_field replicaset_compat_host[] = {
    {"Binds", RS_COMPAT_ARR},
    {"ContainerIDFile", RS_COMPAT_STR},
    {"LogConfig", RS_COMPAT_OBJ},
    {"NetworkMode", RS_COMPAT_STR},
    {"PortBindings", RS_COMPAT_OBJ},
    {"RestartPolicy", RS_COMPAT_OBJ},
    {"AutoRemove", RS_COMPAT_BOOL},
    {"VolumeDriver", RS_COMPAT_STR},
    {"VolumesFrom", RS_COMPAT_ANY},
    {"ConsoleSize", RS_COMPAT_SIZE},
    {"CapAdd", RS_COMPAT_ANY},
    {"CapDrop", RS_COMPAT_ANY},
    {"CgroupnsMode", RS_COMPAT_STR},
    {"Dns", RS_COMPAT_ANY},
    {"DnsOptions", RS_COMPAT_ANY},
    {"DnsSearch", RS_COMPAT_ANY},
    {"ExtraHosts", RS_COMPAT_ANY},
    {"GroupAdd", RS_COMPAT_ANY},
    {"IpcMode", RS_COMPAT_STR},
    {"Cgroup", RS_COMPAT_STR},
    {"Links", RS_COMPAT_ANY},
    {"OomScoreAdj", RS_COMPAT_INT},
    {"PidMode", RS_COMPAT_STR},
    {"Privileged", RS_COMPAT_BOOL},
    {"PublishAllPorts", RS_COMPAT_BOOL},
    {"ReadonlyRootfs", RS_COMPAT_BOOL},
    {"SecurityOpt", RS_COMPAT_ANY},
    {"UTSMode", RS_COMPAT_STR},
    {"UsernsMode", RS_COMPAT_STR},
    {"ShmSize", RS_COMPAT_INT},
    {"Isolation", RS_COMPAT_STR},
    {"CpuShares", RS_COMPAT_INT},
    {"Memory", RS_COMPAT_INT},
    {"NanoCpus", RS_COMPAT_INT},
    {"CgroupParent", RS_COMPAT_STR},
    {"BlkioWeight", RS_COMPAT_INT},
    {"BlkioWeightDevice", RS_COMPAT_ANY},
    {"BlkioDeviceReadBps", RS_COMPAT_ANY},
    {"BlkioDeviceWriteBps", RS_COMPAT_ANY},
    {"BlkioDeviceReadIOps", RS_COMPAT_ANY},
    {"BlkioDeviceWriteIOps", RS_COMPAT_ANY},
    {"CpuPeriod", RS_COMPAT_INT},
    {"CpuQuota", RS_COMPAT_INT},
    {"CpuRealtimePeriod", RS_COMPAT_INT},
    {"CpuRealtimeRuntime", RS_COMPAT_INT},
    {"CpusetCpus", RS_COMPAT_STR},
    {"CpusetMems", RS_COMPAT_STR},
    {"Devices", RS_COMPAT_ANY},
    {"DeviceCgroupRules", RS_COMPAT_ANY},
    {"DeviceRequests", RS_COMPAT_ARR},
    {"MemoryReservation", RS_COMPAT_INT},
    {"MemorySwap", RS_COMPAT_INT},
    {"MemorySwappiness", RS_COMPAT_ANY},
    {"OomKillDisable", RS_COMPAT_ANY},
    {"PidsLimit", RS_COMPAT_ANY},
    {"Ulimits", RS_COMPAT_ANY},
    {"CpuCount", RS_COMPAT_INT},
    {"CpuPercent", RS_COMPAT_INT},
    {"IOMaximumIOps", RS_COMPAT_INT},
    {"IOMaximumBandwidth", RS_COMPAT_INT},
    {"MaskedPaths", RS_COMPAT_ANY},
    {"ReadonlyPaths", RS_COMPAT_ANY},
};

static const replicaset_compat_field replicaset_compat_log_config[] = {
    {"Type", RS_COMPAT_STR},
    {"Config", RS_COMPAT_ANY},
};

static const replicaset_compat_field replicaset_compat_restart_policy[] = {
    {"Name", RS_COMPAT_STR},
    {"MaximumRetryCount", RS_COMPAT_INT},
};

static const replicaset_compat_field replicaset_compat_device_request[] = {
    {"Driver", RS_COMPAT_STR},       {"Count", RS_COMPAT_INT},   {"DeviceIDs", RS_COMPAT_ARR},
    {"Capabilities", RS_COMPAT_ARR}, {"Options", RS_COMPAT_ANY},
};

#define RS_COMPAT_N(t) (sizeof(t) / sizeof((t)[0]))

static bool replicaset_compat_kind_ok(const json_t *v, replicaset_compat_kind kind)
{
    switch (kind) {
    case RS_COMPAT_STR:
        return json_is_string(v);
    case RS_COMPAT_INT:
        return json_is_integer(v);
    case RS_COMPAT_BOOL:
        return json_is_boolean(v);
    case RS_COMPAT_OBJ:
        return json_is_object(v);
    case RS_COMPAT_ARR:
        return json_is_array(v);
    case RS_COMPAT_SIZE:
        return json_is_array(v) && json_array_size(v) == 2;
    case RS_COMPAT_ANY:
        return v != NULL;
    }
    return false;
}

static json_t *replicaset_compat_default(replicaset_compat_kind kind)
{
    switch (kind) {
    case RS_COMPAT_STR:
        return json_string("");
    case RS_COMPAT_INT:
        return json_integer(0);
    case RS_COMPAT_BOOL:
        return json_false();
    case RS_COMPAT_OBJ:
        return json_object();
    case RS_COMPAT_ARR:
        return json_array();
    case RS_COMPAT_SIZE:
        return json_pack("[i, i]", 0, 0);
    case RS_COMPAT_ANY:
        break;
    }
    return json_null();
}

/* Each field of obj that fields lists and obj lacks (or holds with another
 * type) gets live's value of it when that has the type, else the default. */
static void replicaset_compat_fill(json_t *obj, const json_t *live,
                                   const replicaset_compat_field *fields, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const replicaset_compat_field *f = &fields[i];
        if (replicaset_compat_kind_ok(json_object_get(obj, f->key), f->kind))
            continue;
        json_t *lv = json_object_get(live, f->key);
        json_object_set_new(obj, f->key,
                            replicaset_compat_kind_ok(lv, f->kind)
                                ? json_deep_copy(lv)
                                : replicaset_compat_default(f->kind));
    }
}

/* view's config and hostConfig, filled from live ({config, hostConfig} of
 * the version's container, or NULL) and the defaults. */
static void replicaset_compat_fill_view(json_t *view, const json_t *live)
{
    json_t *cfg = json_object_get(view, "config");
    json_t *host = json_object_get(view, "hostConfig");
    const json_t *live_cfg = json_object_get(live, "config");
    const json_t *live_host = json_object_get(live, "hostConfig");
    replicaset_compat_fill(cfg, live_cfg, replicaset_compat_config,
                           RS_COMPAT_N(replicaset_compat_config));
    replicaset_compat_fill(host, live_host, replicaset_compat_host,
                           RS_COMPAT_N(replicaset_compat_host));
    replicaset_compat_fill(json_object_get(host, "LogConfig"),
                           json_object_get(live_host, "LogConfig"), replicaset_compat_log_config,
                           RS_COMPAT_N(replicaset_compat_log_config));
    replicaset_compat_fill(
        json_object_get(host, "RestartPolicy"), json_object_get(live_host, "RestartPolicy"),
        replicaset_compat_restart_policy, RS_COMPAT_N(replicaset_compat_restart_policy));
    const json_t *live_requests = json_object_get(live_host, "DeviceRequests");
    size_t i;
    json_t *request;
    json_array_foreach(json_object_get(host, "DeviceRequests"), i, request)
    {
        if (json_is_object(request))
            replicaset_compat_fill(request, json_array_get(live_requests, i),
                                   replicaset_compat_device_request,
                                   RS_COMPAT_N(replicaset_compat_device_request));
    }
}

json_t *replicaset_compat_version(app *a, const replicaset_record *r, const json_t *inspect)
{
    _cleanup_(replicaset_run_spec_parts_free) replicaset_run_spec_parts parts = {0};
    docker_run_spec ds;
    gb_err e = GB_ERR_INIT;
    const replicaset_spec *s = &r->spec;
    _cleanup_free_ char **binds = xcalloc(s->nbinds + 1, sizeof(*binds));
    json_t *view = NULL;
    if (replicaset_run_spec_base(a, r, &parts, &ds, &e) == 0) {
        for (size_t n = 0; n < s->nbinds; n++) {
            const replicaset_bind *b = &s->binds[n];
            binds[n] = xasprintf("%s:%s%s", b->src, b->dest, b->read_only ? ":ro" : "");
        }
        docker_run_spec_view(&ds, (const char *const *)binds, s->nbinds, &view, &e);
        for (size_t i = 0; i < s->nbinds; i++)
            free(binds[i]);
    }
    if (!view) {
        log_warn("replica set %s: version %d cannot be shown as gpu-docker-api's record: %s",
                 r->name, r->version, e.msg);
        return NULL;
    }
    _cleanup_json_ json_t *live = inspect ? docker_container_config_view(inspect) : NULL;
    replicaset_compat_fill_view(view, live);
    json_object_set_new(view, "version", json_integer(r->version));
    json_object_set_new(view, "createTime", json_string(r->update_time));
    json_object_set_new(view, "containerName", json_string(r->container_name));
    return view;
}

json_t *replicaset_compat_history_status(app *a, const char *name, const json_t *entry,
                                         const json_t *inspect)
{
    /* An entry is a record of its version but for the fields below. */
    _cleanup_json_ json_t *j = json_deep_copy(entry);
    if (!j)
        return NULL;
    json_t *time = json_object_get(j, "createTime");
    json_object_set_new(j, "name", json_string(name));
    json_object_set_new(j, "state", json_string("running"));
    json_object_set_new(j, "updateTime", time ? json_incref(time) : json_string(""));
    json_object_del(j, "reason");
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    gb_err e = GB_ERR_INIT;
    if (replicaset_record_from_json(j, &r, &e) < 0) {
        log_warn("replica set %s: a history entry cannot be shown as gpu-docker-api's record: %s",
                 name, e.msg);
        return NULL;
    }
    return replicaset_compat_version(a, &r, inspect);
}
