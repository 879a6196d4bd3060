/*
 * docker_spec.c - turn a docker_run_spec (how gpubox's services describe a
 * container) into the Engine API ContainerConfig with HostConfig inside.
 *
 * The JSON is built in one pass: top-level fields (Image, Cmd, Env, Labels,
 * ExposedPorts, Tty, Hostname), then HostConfig (Mounts, PortBindings, the
 * GPU fields of the attach mode, limits, the network, and the safety
 * defaults, which no spec field can turn off), then NetworkingConfig (the
 * container's other name on its network). Every input is checked here, so a bad spec
 * fails with the field named before Docker sees anything.
 *
 * Binds become HostConfig.Mounts rather than the "src:dest:ro" strings of
 * HostConfig.Binds: a Mounts bind of a host path that does not exist is an
 * error, where Binds would quietly create an empty directory owned by root;
 * and a path holding ':' cannot be misread.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/cleanup.h"

/* Docker's rule for volume names: [a-zA-Z0-9][a-zA-Z0-9_.-]+ */
static bool docker_spec_volume_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 2 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
                   (s[0] >= '0' && s[0] <= '9')))
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int docker_spec_strings(json_t *obj, const char *key, const char *const *items, size_t n,
                               const char *what, gb_err *err)
{
    if (n == 0)
        return 0;
    if (!items)
        return err_set(err, ERR_INVALID_PARAMS, "run spec: %s has %zu entries but no array", what,
                       n);
    json_t *arr = json_array();
    json_object_set_new(obj, key, arr);
    for (size_t i = 0; i < n; i++) {
        if (!items[i])
            return err_set(err, ERR_INVALID_PARAMS, "run spec: %s entry %zu is NULL", what, i);
        json_array_append_new(arr, json_string(items[i]));
    }
    return 0;
}

static int docker_spec_env(json_t *cfg, const docker_run_spec *spec, gb_err *err)
{
    if (docker_spec_strings(cfg, "Env", spec->env, spec->nenv, "env", err) < 0)
        return -1;
    for (size_t i = 0; i < spec->nenv; i++) {
        const char *var = spec->env[i];
        if (var[0] == '\0' || var[0] == '=')
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: env entry '%s' has no name; write NAME=value", var);
        /* Which GPUs a container sees is gpubox's call, never the user's. */
        size_t name_len = strcspn(var, "=");
        if (name_len == strlen("NVIDIA_VISIBLE_DEVICES") &&
            strncmp(var, "NVIDIA_VISIBLE_DEVICES", name_len) == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: env may not set NVIDIA_VISIBLE_DEVICES; gpubox sets it from "
                           "the GPUs it allocates");
    }
    return 0;
}

static int docker_spec_labels(json_t *cfg, json_t *labels, gb_err *err)
{
    json_t *copy = json_object();
    json_object_set_new(cfg, "Labels", copy);
    if (!labels)
        return 0;
    if (!json_is_object(labels))
        return err_set(err, ERR_INVALID_PARAMS, "run spec: labels must be a JSON object");
    const char *key;
    json_t *value;
    json_object_foreach(labels, key, value)
    {
        if (!json_is_string(value))
            return err_set(err, ERR_INVALID_PARAMS, "run spec: label '%s' is not a string", key);
        json_object_set(copy, key, value);
    }
    return 0;
}

static int docker_spec_mounts(json_t *host, const docker_run_spec *spec, gb_err *err)
{
    if (spec->nbinds == 0)
        return 0;
    if (!spec->binds)
        return err_set(err, ERR_INVALID_PARAMS, "run spec: %zu binds but no array", spec->nbinds);
    json_t *mounts = json_array();
    json_object_set_new(host, "Mounts", mounts);
    for (size_t i = 0; i < spec->nbinds; i++) {
        const docker_bind *b = &spec->binds[i];
        if (b->tmpfs_bytes && b->dest && b->dest[0] == '/') {
            /* memory, not the host's disk: what the container writes there
             * is capped and goes with it */
            json_array_append_new(mounts, json_pack("{s:s, s:s, s:{s:I, s:i}}", "Type", "tmpfs",
                                                    "Target", b->dest, "TmpfsOptions", "SizeBytes",
                                                    (json_int_t)b->tmpfs_bytes, "Mode", 01777));
            continue;
        }
        if (!b->src || !b->dest || b->dest[0] != '/')
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: bind %zu needs a source and an absolute destination, got "
                           "'%s' -> '%s'",
                           i, b->src ? b->src : "(null)", b->dest ? b->dest : "(null)");
        bool host_path = b->src[0] == '/';
        if (!host_path && !docker_spec_volume_name_ok(b->src))
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: bind source '%s' is neither an absolute host path nor a "
                           "volume name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)",
                           b->src);
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "Type",
                                                host_path ? "bind" : "volume", "Source", b->src,
                                                "Target", b->dest, "ReadOnly", b->read_only));
    }
    return 0;
}

/* ExposedPorts {"8888/tcp":{}} and PortBindings {"8888/tcp":[{HostIp,HostPort}]}. */
static int docker_spec_ports(json_t *cfg, json_t *host, const docker_run_spec *spec, gb_err *err)
{
    if (spec->nports == 0)
        return 0;
    if (!spec->ports)
        return err_set(err, ERR_INVALID_PARAMS, "run spec: %zu ports but no array", spec->nports);
    json_t *exposed = json_object();
    json_t *bindings = json_object();
    json_object_set_new(cfg, "ExposedPorts", exposed);
    json_object_set_new(host, "PortBindings", bindings);
    for (size_t i = 0; i < spec->nports; i++) {
        const docker_port *p = &spec->ports[i];
        const char *proto = p->protocol ? p->protocol : "tcp";
        if (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: port protocol '%s' is not supported; use tcp or udp", proto);
        if (p->container_port == 0 || p->host_port == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: port %zu maps host port %u to container port %u; both must "
                           "be 1-65535",
                           i, p->host_port, p->container_port);
        char key[16], host_port[8];
        snprintf(key, sizeof(key), "%u/%s", p->container_port, proto);
        snprintf(host_port, sizeof(host_port), "%u", p->host_port);
        json_object_set_new(exposed, key, json_object());
        json_t *list = json_object_get(bindings, key);
        if (!list) {
            list = json_array();
            json_object_set_new(bindings, key, list);
        }
        json_array_append_new(list, json_pack("{s:s, s:s}", "HostIp", "", "HostPort", host_port));
    }
    return 0;
}

/* The GPU fields of the attach mode. With no GPU, every mode sets
 * NVIDIA_VISIBLE_DEVICES=void: CUDA images set it to "all", and on a host
 * whose default runtime is nvidia (a common setup) the container would
 * otherwise see every card. */
static void docker_spec_add_env(json_t *cfg, const char *var)
{
    json_t *env = json_object_get(cfg, "Env");
    if (!env) {
        env = json_array();
        json_object_set_new(cfg, "Env", env);
    }
    json_array_append_new(env, json_string(var));
}

static int docker_spec_gpus(json_t *cfg, json_t *host, const docker_run_spec *spec, gb_err *err)
{
    if (spec->ngpus == 0) {
        docker_spec_add_env(cfg, "NVIDIA_VISIBLE_DEVICES=void");
        return 0;
    }
    if (!spec->gpu_uuids)
        return err_set(err, ERR_INVALID_PARAMS, "run spec: %zu GPUs but no UUID array",
                       spec->ngpus);
    json_t *ids = json_array();
    size_t joined_len = 0;
    for (size_t i = 0; i < spec->ngpus; i++) {
        const char *uuid = spec->gpu_uuids[i];
        if (!uuid || !*uuid || strpbrk(uuid, ", =")) {
            json_decref(ids);
            return err_set(err, ERR_INVALID_PARAMS,
                           "run spec: GPU %zu has UUID '%s'; a UUID is not empty and has no ',', "
                           "'=' or space",
                           i, uuid ? uuid : "(null)");
        }
        joined_len += strlen(uuid) + 1;
        if (spec->gpu_attach == DOCKER_GPU_CDI) {
            char name[256];
            snprintf(name, sizeof(name), "nvidia.com/gpu=%s", uuid);
            json_array_append_new(ids, json_string(name));
        } else {
            json_array_append_new(ids, json_string(uuid));
        }
    }
    switch (spec->gpu_attach) {
    case DOCKER_GPU_NVIDIA:
        json_object_set_new(host, "DeviceRequests",
                            json_pack("[{s:s, s:o, s:[[s]]}]", "Driver", "nvidia", "DeviceIDs", ids,
                                      "Capabilities", "gpu"));
        return 0;
    case DOCKER_GPU_CDI:
        json_object_set_new(host, "DeviceRequests",
                            json_pack("[{s:s, s:o}]", "Driver", "cdi", "DeviceIDs", ids));
        return 0;
    case DOCKER_GPU_RUNTIME: {
        json_decref(ids);
        _cleanup_free_ char *var = xmalloc(sizeof("NVIDIA_VISIBLE_DEVICES=") + joined_len);
        strcpy(var, "NVIDIA_VISIBLE_DEVICES=");
        for (size_t i = 0; i < spec->ngpus; i++) {
            strcat(var, spec->gpu_uuids[i]);
            if (i + 1 < spec->ngpus)
                strcat(var, ",");
        }
        docker_spec_add_env(cfg, var);
        json_object_set_new(host, "Runtime", json_string("nvidia"));
        return 0;
    }
    }
    json_decref(ids);
    return err_set(err, ERR_INVALID_PARAMS, "run spec: unknown GPU attach mode %d",
                   (int)spec->gpu_attach);
}

static int docker_spec_limits(json_t *host, const docker_run_spec *spec, gb_err *err)
{
    if (!(spec->cpus >= 0) || spec->cpus > 1e6) /* also refuses NaN */
        return err_set(err, ERR_INVALID_PARAMS, "run spec: cpus %g is not a CPU count", spec->cpus);
    if (spec->memory_bytes < 0 || spec->shm_bytes < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "run spec: memory and shm sizes cannot be negative");
    if (spec->cpus > 0)
        json_object_set_new(host, "NanoCpus", json_integer((json_int_t)llround(spec->cpus * 1e9)));
    if (spec->cpuset_cpus && *spec->cpuset_cpus)
        json_object_set_new(host, "CpusetCpus", json_string(spec->cpuset_cpus));
    if (spec->memory_bytes > 0)
        json_object_set_new(host, "Memory", json_integer(spec->memory_bytes));
    if (spec->shm_bytes > 0)
        json_object_set_new(host, "ShmSize", json_integer(spec->shm_bytes));
    int64_t pids = spec->pids_limit == 0  ? DOCKER_DEFAULT_PIDS_LIMIT
                   : spec->pids_limit < 0 ? -1
                                          : spec->pids_limit;
    json_object_set_new(host, "PidsLimit", json_integer(pids));

    const char *policy = spec->restart_policy ? spec->restart_policy : "no";
    const char *known[] = {"no", "always", "unless-stopped", "on-failure"};
    size_t i = 0;
    while (i < ARRAY_SIZE(known) && strcmp(policy, known[i]) != 0)
        i++;
    if (i == ARRAY_SIZE(known))
        return err_set(err, ERR_INVALID_PARAMS,
                       "run spec: restart policy '%s' is not one of no, always, unless-stopped, "
                       "on-failure",
                       policy);
    json_object_set_new(host, "RestartPolicy",
                        json_pack("{s:s, s:i}", "Name", policy, "MaximumRetryCount", 0));
    return 0;
}

/* HostConfig.NetworkMode and NetworkingConfig.EndpointsConfig.<network>:
 * the container on that network only, answering to its alias there too. */
static int docker_spec_network(json_t *cfg, json_t *host, const docker_run_spec *spec, gb_err *err)
{
    if (!spec->network || !*spec->network)
        return 0;
    if (!docker_spec_volume_name_ok(spec->network))
        return err_set(err, ERR_INVALID_PARAMS,
                       "run spec: network '%s' is not a name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)",
                       spec->network);
    json_object_set_new(host, "NetworkMode", json_string(spec->network));
    json_t *endpoint = json_object();
    if (spec->network_alias && *spec->network_alias)
        json_object_set_new(endpoint, "Aliases", json_pack("[s]", spec->network_alias));
    json_object_set_new(cfg, "NetworkingConfig",
                        json_pack("{s:{s:o}}", "EndpointsConfig", spec->network, endpoint));
    return 0;
}

int docker_run_spec_to_json(const docker_run_spec *spec, json_t **config, gb_err *err)
{
    *config = NULL;
    if (!spec->image || !*spec->image)
        return err_set(err, ERR_IMAGE_EMPTY, "run spec: image name is empty");
    _cleanup_json_ json_t *cfg = json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "Image", spec->image,
                                           "Tty", spec->tty, "OpenStdin", spec->tty, "AttachStdin",
                                           false, "AttachStdout", false, "AttachStderr", false);
    if (!cfg) /* json_pack refuses an image name that is not UTF-8 */
        return err_set(err, ERR_INTERNAL, "run spec: the image name is not UTF-8");
    /* Safety defaults (docs/docker.md): no spec field reaches these. Init
     * runs docker-init as PID 1 so a shell CMD's orphans are reaped. */
    json_t *host = json_pack("{s:b, s:[s], s:b, s:s}", "Privileged", false, "SecurityOpt",
                             "no-new-privileges", "Init", true, "IpcMode", "private");
    json_object_set_new(cfg, "HostConfig", host);
    if (spec->hostname && *spec->hostname)
        json_object_set_new(cfg, "Hostname", json_string(spec->hostname));

    if (docker_spec_strings(cfg, "Cmd", spec->cmd, spec->ncmd, "cmd", err) < 0 ||
        docker_spec_env(cfg, spec, err) < 0 || docker_spec_labels(cfg, spec->labels, err) < 0 ||
        docker_spec_mounts(host, spec, err) < 0 || docker_spec_ports(cfg, host, spec, err) < 0 ||
        docker_spec_gpus(cfg, host, spec, err) < 0 || docker_spec_limits(host, spec, err) < 0 ||
        docker_spec_network(cfg, host, spec, err) < 0)
        return -1;
    *config = steal_ptr(&cfg);
    return 0;
}

/* The platform gpubox's containers run on, in the OCI image spec's words. */
static const char *docker_spec_arch(void)
{
#if defined(__x86_64__)
    return "amd64";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__powerpc64__)
    return "ppc64le";
#else
    return "";
#endif
}

int docker_run_spec_view(const docker_run_spec *spec, const char *const *bind_strings,
                         size_t nbind_strings, json_t **view, gb_err *err)
{
    *view = NULL;
    _cleanup_json_ json_t *cfg = NULL;
    if (docker_run_spec_to_json(spec, &cfg, err) < 0)
        return -1;
    json_t *host = json_incref(json_object_get(cfg, "HostConfig"));
    json_object_del(cfg, "HostConfig");
    json_t *net = json_incref(json_object_get(cfg, "NetworkingConfig"));
    json_object_del(cfg, "NetworkingConfig");
    if (!net)
        net = json_pack("{s:n}", "EndpointsConfig");
    if (nbind_strings &&
        docker_spec_strings(host, "Binds", bind_strings, nbind_strings, "binds", err) < 0) {
        json_decref(host);
        json_decref(net);
        return -1;
    }
    *view = json_pack("{s:O, s:o, s:o, s:{s:s, s:s}}", "config", cfg, "hostConfig", host,
                      "networkingConfig", net, "platform", "architecture", docker_spec_arch(), "os",
                      "linux");
    return 0;
}

json_t *docker_container_config_view(const json_t *inspect)
{
    json_t *cfg = json_object_get(inspect, "Config");
    json_t *host = json_object_get(inspect, "HostConfig");
    return json_pack("{s:o, s:o}", "config",
                     json_is_object(cfg) ? json_deep_copy(cfg) : json_object(), "hostConfig",
                     json_is_object(host) ? json_deep_copy(host) : json_object());
}
