/*
 * spec.c - parsing, validating and printing replica-set specs (see
 * replicaset/spec.h). Each field has one small parser; replicaset_spec_from_json walks the
 * object once, refusing unknown fields, and calls them.
 */
#include "util/xalloc.h"
#include "service/replicaset/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"
#include "util/size.h"

static const char *const replicaset_spec_fields[] = {
    "imageName", "gpuCount", "gpuMemory",     "gpuCores", "gpuShared",      "gpuPolicy", "gpuUUIDs",
    "gpuModel",  "binds",    "env",           "cmd",      "containerPorts", "ports",     "cpus",
    "memory",    "shmSize",  "restartPolicy", "labels",   "sshKeys",        "cpuCount",
};

static const char *const replicaset_restart_policies[] = {"no", "always", "unless-stopped",
                                                          "on-failure"};

/* A printable string of bounded length with no control characters. */
static int check_text(const char *what, const char *s, size_t max, gb_err *err)
{
    size_t len = strlen(s);
    if (len > max)
        return err_set(err, ERR_INVALID_PARAMS, "%s is %zu characters long; at most %zu allowed",
                       what, len, max);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            return err_set(err, ERR_INVALID_PARAMS,
                           "%s contains a control character (0x%02x) at position %zu", what,
                           (unsigned char)s[i], i);
    return 0;
}

static int parse_image(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    const char *image = NULL;
    if (json_field_string(obj, NULL, "imageName", &image, false, err) < 0)
        return -1;
    if (!image || !*image)
        return err_set(err, ERR_IMAGE_EMPTY,
                       "imageName is empty; name a local image such as "
                       "\"ubuntu:22.04\"");
    if (check_text("imageName", image, RS_MAX_IMAGE, err) < 0)
        return -1;
    if (strpbrk(image, " \t"))
        return err_set(err, ERR_INVALID_PARAMS, "imageName '%s' contains whitespace", image);
    out->image = xstrdup(image);
    return 0;
}

/* Environment names gpubox sets itself: which GPUs a container sees and
 * the share limits it is told. A user's value would be refused by the
 * Docker layer only after GPUs were allocated (and reported as a failed
 * run); refusing it here makes it the input error it is. */
static bool env_name_reserved(const char *entry)
{
    size_t len = strcspn(entry, "=");
    static const char *const exact[] = {"NVIDIA_VISIBLE_DEVICES"};
    static const char *const prefixes[] = {"GPUBOX_", "CUDA_DEVICE_MEMORY_LIMIT"};
    for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
        if (len == strlen(exact[i]) && strncmp(entry, exact[i], len) == 0)
            return true;
    for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
        if (len >= strlen(prefixes[i]) && strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* A list of strings, each checked by check_text; env entries must be K=V. */
static int parse_strings(const json_t *obj, const char *field, bool is_env, char ***out, size_t *n,
                         gb_err *err)
{
    _cleanup_free_ const char **items = NULL;
    size_t count = 0;
    if (json_field_string_array(obj, NULL, field, &items, &count, false, err) < 0)
        return -1;
    if (count > RS_MAX_LIST)
        return err_set(err, ERR_INVALID_PARAMS, "%s has %zu entries; at most %d", field, count,
                       RS_MAX_LIST);
    char what[64];
    for (size_t i = 0; i < count; i++) {
        snprintf(what, sizeof(what), "%s[%zu]", field, i);
        if (check_text(what, items[i], RS_MAX_STRING, err) < 0)
            return -1;
        if (is_env) {
            const char *eq = strchr(items[i], '=');
            if (!eq || eq == items[i])
                return err_set(err, ERR_INVALID_PARAMS,
                               "%s is '%.64s'; environment entries look like NAME=value", what,
                               items[i]);
            if (env_name_reserved(items[i]))
                return err_set(err, ERR_INVALID_PARAMS,
                               "%s sets %.*s, which gpubox sets itself (NVIDIA_VISIBLE_DEVICES, "
                               "GPUBOX_*, CUDA_DEVICE_MEMORY_LIMIT*); leave it out",
                               what, (int)strcspn(items[i], "="), items[i]);
        }
    }
    if (count == 0)
        return 0;
    *out = xcalloc(count, sizeof(char *));
    for (size_t i = 0; i < count; i++)
        (*out)[i] = xstrdup(items[i]);
    *n = count;
    return 0;
}

static int check_container_path(const char *what, const char *path, gb_err *err)
{
    if (check_text(what, path, RS_MAX_STRING, err) < 0)
        return -1;
    if (path[0] != '/')
        return err_set(err, ERR_INVALID_PARAMS, "%s '%.64s' must be an absolute path", what, path);
    if (strcmp(path, "/") == 0)
        return err_set(err, ERR_INVALID_PARAMS, "%s cannot be '/'", what);
    for (const char *p = path; (p = strstr(p, "..")) != NULL; p += 2) {
        bool starts = p[-1] == '/';
        bool ends = p[2] == '/' || p[2] == '\0';
        if (starts && ends)
            return err_set(err, ERR_INVALID_PARAMS, "%s '%.64s' contains '..'", what, path);
    }
    if (strchr(path, ':') || strchr(path, ','))
        return err_set(err, ERR_INVALID_PARAMS, "%s '%.64s' contains ':' or ','", what, path);
    return 0;
}

/* The directories gpubox mounts its own files in (the GPU limits, HAMi-core):
 * a user bind there would hide them or collide with them. */
static int check_not_gpubox_path(const char *what, const char *dest, gb_err *err)
{
    static const char *const reserved[] = {RS_GPUBOX_ETC_DIR, RS_GPUBOX_LIB_DIR, RS_GPUBOX_RUN_DIR,
                                           RS_LD_SO_PRELOAD_PATH};
    for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
        size_t n = strlen(reserved[i]);
        if (strncmp(dest, reserved[i], n) == 0 && (dest[n] == '\0' || dest[n] == '/'))
            return err_set(err, ERR_INVALID_PARAMS,
                           "%s '%.64s' is under %s, where gpubox mounts its own files; pick "
                           "another path",
                           what, dest, reserved[i]);
    }
    return 0;
}

static int parse_binds(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    json_t *binds = json_object_get(obj, "binds");
    if (!binds || json_is_null(binds))
        return 0;
    if (!json_is_array(binds))
        return err_set(err, ERR_WRONG_TYPE, "binds must be an array of {src, dest}, not %s",
                       json_type_name(binds));
    size_t n = json_array_size(binds);
    if (n > RS_MAX_BINDS)
        return err_set(err, ERR_INVALID_PARAMS, "binds has %zu entries; at most %d", n,
                       RS_MAX_BINDS);
    if (n == 0)
        return 0;
    out->binds = xcalloc(n, sizeof(replicaset_bind));
    char where[32];
    for (size_t i = 0; i < n; i++) {
        json_t *b = json_array_get(binds, i);
        snprintf(where, sizeof(where), "binds[%zu]", i);
        if (!json_is_object(b))
            return err_set(err, ERR_WRONG_TYPE, "%s must be an object {src, dest}, not %s", where,
                           json_type_name(b));
        const char *src = NULL, *dest = NULL;
        bool ro = false;
        if (json_field_string(b, where, "src", &src, true, err) < 0 ||
            json_field_string(b, where, "dest", &dest, true, err) < 0 ||
            json_field_bool(b, where, "readOnly", &ro, false, err) < 0)
            return -1;
        char what[48];
        snprintf(what, sizeof(what), "%s.dest", where);
        if (check_container_path(what, dest, err) < 0 || check_not_gpubox_path(what, dest, err) < 0)
            return -1;
        snprintf(what, sizeof(what), "%s.src", where);
        if (src[0] == '/') {
            if (check_container_path(what, src, err) < 0)
                return -1;
        } else if (name_check_volume(src, err) < 0) {
            return err_prefix(err, "%s is neither an absolute host path nor a volume name", what);
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(out->binds[j].dest, dest) == 0)
                return err_set(err, ERR_INVALID_PARAMS,
                               "binds[%zu] and binds[%zu] both mount "
                               "on '%.64s'",
                               j, i, dest);
        out->binds[i].src = xstrdup(src);
        out->binds[i].dest = xstrdup(dest);
        out->binds[i].read_only = ro;
        out->nbinds = i + 1;
    }
    return 0;
}

static int port_number(const char *what, long long v, bool zero_ok, uint16_t *out, gb_err *err)
{
    if (v < (zero_ok ? 0 : 1) || v > 65535)
        return err_set(err, ERR_INVALID_PARAMS, "%s is %lld; a port is 1-65535", what, v);
    *out = (uint16_t)v;
    return 0;
}

static int protocol_parse(const char *what, const char *s, char proto[4], gb_err *err)
{
    if (!s || !*s || strcmp(s, "tcp") == 0)
        strcpy(proto, "tcp");
    else if (strcmp(s, "udp") == 0)
        strcpy(proto, "udp");
    else
        return err_set(err, ERR_INVALID_PARAMS, "%s is '%.16s'; use \"tcp\" or \"udp\"", what, s);
    return 0;
}

/* "22", "8888/udp" or the number 22. */
static int parse_container_port(const json_t *v, size_t i, replicaset_port *p, gb_err *err)
{
    char what[40];
    snprintf(what, sizeof(what), "containerPorts[%zu]", i);
    if (json_is_integer(v)) {
        if (port_number(what, json_integer_value(v), false, &p->container_port, err) < 0)
            return -1;
        return protocol_parse(what, NULL, p->protocol, err);
    }
    if (!json_is_string(v))
        return err_set(err, ERR_WRONG_TYPE,
                       "%s must be a string such as \"22\" or \"53/udp\", "
                       "not %s",
                       what, json_type_name(v));
    const char *s = json_string_value(v);
    char *end = NULL;
    long long n = strtoll(s, &end, 10);
    if (end == s || (*end && *end != '/') || s[0] == '+' || s[0] == '-' || s[0] == ' ')
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s is '%.32s'; give a port such as \"22\" or "
                       "\"53/udp\"",
                       what, s);
    if (port_number(what, n, false, &p->container_port, err) < 0)
        return -1;
    return protocol_parse(what, *end == '/' ? end + 1 : NULL, p->protocol, err);
}

static int parse_explicit_port(const json_t *v, size_t i, replicaset_port *p, gb_err *err)
{
    char where[32];
    snprintf(where, sizeof(where), "ports[%zu]", i);
    if (!json_is_object(v))
        return err_set(err, ERR_WRONG_TYPE,
                       "%s must be an object {hostPort, containerPort, "
                       "protocol}, not %s",
                       where, json_type_name(v));
    long long host = 0, container = 0;
    const char *proto = NULL;
    if (json_field_int(v, where, "containerPort", &container, true, err) < 0 ||
        json_field_int(v, where, "hostPort", &host, false, err) < 0 ||
        json_field_string(v, where, "protocol", &proto, false, err) < 0)
        return -1;
    char what[48];
    snprintf(what, sizeof(what), "%s.containerPort", where);
    if (port_number(what, container, false, &p->container_port, err) < 0)
        return -1;
    snprintf(what, sizeof(what), "%s.hostPort", where);
    if (port_number(what, host, true, &p->host_port, err) < 0)
        return -1;
    snprintf(what, sizeof(what), "%s.protocol", where);
    return protocol_parse(what, proto, p->protocol, err);
}

static int parse_ports(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    json_t *cports = json_object_get(obj, "containerPorts");
    json_t *ports = json_object_get(obj, "ports");
    if (cports && json_is_null(cports))
        cports = NULL;
    if (ports && json_is_null(ports))
        ports = NULL;
    if (cports && !json_is_array(cports))
        return err_set(err, ERR_WRONG_TYPE, "containerPorts must be an array, not %s",
                       json_type_name(cports));
    if (ports && !json_is_array(ports))
        return err_set(err, ERR_WRONG_TYPE, "ports must be an array, not %s",
                       json_type_name(ports));
    size_t nc = cports ? json_array_size(cports) : 0, np = ports ? json_array_size(ports) : 0;
    if (nc + np > RS_MAX_PORTS)
        return err_set(err, ERR_INVALID_PARAMS, "%zu ports asked; at most %d", nc + np,
                       RS_MAX_PORTS);
    if (nc + np == 0)
        return 0;
    out->ports = xcalloc(nc + np, sizeof(replicaset_port));
    for (size_t i = 0; i < nc + np; i++) {
        replicaset_port *p = &out->ports[i];
        int rc = i < nc ? parse_container_port(json_array_get(cports, i), i, p, err)
                        : parse_explicit_port(json_array_get(ports, i - nc), i - nc, p, err);
        if (rc < 0)
            return -1;
        for (size_t j = 0; j < i; j++) {
            const replicaset_port *q = &out->ports[j];
            if (q->container_port == p->container_port && !strcmp(q->protocol, p->protocol))
                return err_set(err, ERR_INVALID_PARAMS, "container port %u/%s is asked twice",
                               p->container_port, p->protocol);
            if (p->host_port && q->host_port == p->host_port && !strcmp(q->protocol, p->protocol))
                return err_set(err, ERR_INVALID_PARAMS, "host port %u/%s is asked twice",
                               p->host_port, p->protocol);
        }
        out->nports = i + 1;
    }
    return 0;
}

/* A size as "8GB" or a number of bytes; 0 means unset. */
static int parse_size_field(const json_t *obj, const char *field, int64_t min, int64_t *out,
                            gb_err *err)
{
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v))
        return 0;
    uint64_t bytes = 0;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > SIZE_MAX_BYTES)
            return err_set(err, ERR_INVALID_PARAMS, "%s is %lld bytes; it must be 0 to 1PB", field,
                           (long long)json_integer_value(v));
        bytes = (uint64_t)json_integer_value(v);
    } else if (json_is_string(v)) {
        if (size_parse(json_string_value(v), &bytes, err) < 0)
            return err_prefix(err, "%s", field);
    } else {
        return err_set(err, ERR_WRONG_TYPE,
                       "%s must be a size such as \"8GB\" or a number of "
                       "bytes, not %s",
                       field, json_type_name(v));
    }
    if (bytes != 0 && (int64_t)bytes < min)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s is %llu bytes; at least %lld (or 0 for no "
                       "limit)",
                       field, (unsigned long long)bytes, (long long)min);
    *out = (int64_t)bytes;
    return 0;
}

static int parse_limits(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    json_t *cpus = json_object_get(obj, "cpus");
    if (cpus && !json_is_null(cpus)) {
        if (!json_is_number(cpus))
            return err_set(err, ERR_WRONG_TYPE, "cpus must be a number such as 2 or 0.5, not %s",
                           json_type_name(cpus));
        double c = json_number_value(cpus);
        if (!isfinite(c) || c < 0 || c > 1024 || (c > 0 && c < 0.01))
            return err_set(err, ERR_INVALID_PARAMS,
                           "cpus is %g; give 0.01 to 1024 (0 = no "
                           "limit)",
                           c);
        out->cpus = c;
    }
    json_t *count = json_object_get(obj, "cpuCount");
    if (count && !json_is_null(count)) {
        if (!json_is_integer(count))
            return err_set(err, ERR_WRONG_TYPE,
                           "cpuCount must be a whole number of logical CPUs such as 4, not %s",
                           json_type_name(count));
        json_int_t n = json_integer_value(count);
        if (n < 0 || n > RS_CPU_COUNT_MAX)
            return err_set(err, ERR_INVALID_PARAMS,
                           "cpuCount is %lld; give 0 (no cores of its own) to %d", (long long)n,
                           RS_CPU_COUNT_MAX);
        out->cpu_count = (int)n;
    }
    /* Docker refuses memory limits under 6 MB. */
    if (parse_size_field(obj, "memory", 6 * 1024 * 1024, &out->memory_bytes, err) < 0 ||
        parse_size_field(obj, "shmSize", 4096, &out->shm_bytes, err) < 0)
        return -1;
    const char *policy = NULL;
    if (json_field_string(obj, NULL, "restartPolicy", &policy, false, err) < 0)
        return -1;
    if (policy && *policy) {
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(replicaset_restart_policies); i++)
            known |= strcmp(policy, replicaset_restart_policies[i]) == 0;
        if (!known)
            return err_set(err, ERR_INVALID_PARAMS,
                           "restartPolicy '%.32s' is unknown; use no, "
                           "always, unless-stopped or on-failure",
                           policy);
        out->restart_policy = xstrdup(policy);
    }
    return 0;
}

static int parse_labels(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    json_t *labels = json_object_get(obj, "labels");
    out->labels = json_object();
    if (!labels || json_is_null(labels))
        return 0;
    if (!json_is_object(labels))
        return err_set(err, ERR_WRONG_TYPE, "labels must be an object of strings, not %s",
                       json_type_name(labels));
    if (json_object_size(labels) > RS_MAX_LABELS)
        return err_set(err, ERR_INVALID_PARAMS, "labels has %zu entries; at most %d",
                       json_object_size(labels), RS_MAX_LABELS);
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v)
    {
        if (!json_is_string(v))
            return err_set(err, ERR_WRONG_TYPE, "labels.%.64s must be a string, not %s", k,
                           json_type_name(v));
        if (!*k || strncmp(k, DOCKER_LABEL_PREFIX, strlen(DOCKER_LABEL_PREFIX)) == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "label '%.64s' is not allowed; names "
                           "starting with '" DOCKER_LABEL_PREFIX "' are gpubox's own",
                           k);
        if (check_text("label name", k, 255, err) < 0 ||
            check_text("label value", json_string_value(v), RS_MAX_STRING, err) < 0)
            return -1;
        json_object_set(out->labels, k, v);
    }
    return 0;
}

/* Whether an OpenSSH key type is one sshd and dropbear may accept:
 * ssh-ed25519, ssh-rsa, ecdsa-sha2-<curve>, sk-<...>@openssh.com. */
static bool ssh_key_type_known(const char *type, size_t len)
{
    static const char *const exact[] = {"ssh-ed25519", "ssh-rsa"};
    static const char *const prefixes[] = {"ecdsa-sha2-", "sk-"};
    for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
        if (len == strlen(exact[i]) && strncmp(type, exact[i], len) == 0)
            return true;
    for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (len <= n || strncmp(type, prefixes[i], n) != 0)
            continue;
        for (size_t k = n; k < len; k++)
            if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789-@.", type[k]))
                return false;
        return true;
    }
    return false;
}

/* One authorized_keys line: TYPE BASE64 [COMMENT], the base64 being a key
 * blob that names TYPE itself (as ssh-keygen writes it), no options. */
static int ssh_key_check(const char *what, const char *key, gb_err *err)
{
    if (check_text(what, key, RS_MAX_SSH_KEY_LEN, err) < 0)
        return -1;
    size_t tlen = strcspn(key, " \t");
    const char *body = key + tlen + strspn(key + tlen, " \t");
    size_t blen = strcspn(body, " \t");
    if (!ssh_key_type_known(key, tlen))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s starts with '%.*s'; give an OpenSSH public key line such as "
                       "\"ssh-ed25519 AAAAC3... you@laptop\" (types ssh-ed25519, ssh-rsa, "
                       "ecdsa-sha2-*, sk-*; no options), the contents of a .pub file",
                       what, (int)(tlen < 40 ? tlen : 40), key);
    _cleanup_free_ char *blob = NULL;
    size_t n = 0;
    if (blen == 0 || base64_decode(body, blen, &blob, &n) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the key after '%.*s' is not base64; copy the whole line of the .pub "
                       "file",
                       what, (int)tlen, key);
    /* The blob begins with the type as an SSH string: uint32 length, bytes. */
    uint32_t named =
        n >= 4 ? ((uint32_t)(unsigned char)blob[0] << 24 | (uint32_t)(unsigned char)blob[1] << 16 |
                  (uint32_t)(unsigned char)blob[2] << 8 | (unsigned char)blob[3])
               : 0;
    if (named != tlen || n < 4 + tlen || memcmp(blob + 4, key, tlen) != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the key data is not a %.*s key; copy the whole line of the .pub file",
                       what, (int)tlen, key);
    return 0;
}

/* sshKeys: each a key line (ssh_key_check), trimmed, none twice. */
static int parse_ssh_keys(const json_t *obj, replicaset_spec *out, gb_err *err)
{
    _cleanup_free_ const char **items = NULL;
    size_t count = 0;
    if (json_field_string_array(obj, NULL, "sshKeys", &items, &count, false, err) < 0)
        return -1;
    if (count > RS_MAX_SSH_KEYS)
        return err_set(err, ERR_INVALID_PARAMS, "sshKeys has %zu keys; at most %d", count,
                       RS_MAX_SSH_KEYS);
    if (count == 0)
        return 0;
    out->ssh_keys = xcalloc(count, sizeof(char *));
    char what[32];
    for (size_t i = 0; i < count; i++) {
        snprintf(what, sizeof(what), "sshKeys[%zu]", i);
        const char *k = items[i] + strspn(items[i], " \t");
        size_t len = strlen(k);
        while (len > 0 && (k[len - 1] == ' ' || k[len - 1] == '\t'))
            len--;
        _cleanup_free_ char *key = xstrndup(k, len);
        if (ssh_key_check(what, key, err) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(out->ssh_keys[j], key) == 0)
                return err_set(err, ERR_INVALID_PARAMS, "sshKeys[%zu] repeats sshKeys[%zu]", i, j);
        out->ssh_keys[i] = steal_ptr(&key);
        out->nssh_keys = i + 1;
    }
    return 0;
}

/* A spec with keys publishes 22/tcp: added when the user did not list it
 * (in containerPorts or ports). */
static int ssh_port_add(replicaset_spec *out, gb_err *err)
{
    if (out->nssh_keys == 0)
        return 0;
    for (size_t i = 0; i < out->nports; i++)
        if (out->ports[i].container_port == RS_SSH_PORT && !strcmp(out->ports[i].protocol, "tcp"))
            return 0;
    if (out->nports >= RS_MAX_PORTS)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%zu ports asked, and sshKeys needs port %d/tcp too; at most %d",
                       out->nports, RS_SSH_PORT, RS_MAX_PORTS);
    out->ports = xrealloc(out->ports, (out->nports + 1) * sizeof(*out->ports));
    out->ports[out->nports++] = (replicaset_port){.container_port = RS_SSH_PORT, .protocol = "tcp"};
    return 0;
}

static bool field_known(const char *key, const char *const *also_allowed)
{
    for (size_t i = 0; i < ARRAY_SIZE(replicaset_spec_fields); i++)
        if (strcmp(key, replicaset_spec_fields[i]) == 0)
            return true;
    for (size_t i = 0; also_allowed && also_allowed[i]; i++)
        if (strcmp(key, also_allowed[i]) == 0)
            return true;
    return false;
}

int replicaset_spec_from_json(const json_t *obj, const char *const *also_allowed,
                              replicaset_spec *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj))
        return err_set(err, ERR_WRONG_TYPE, "the spec must be a JSON object, not %s",
                       json_type_name(obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!field_known(key, also_allowed)) {
            err_set(err, ERR_INVALID_PARAMS,
                    "unknown field '%.64s'; see docs/api.md for the "
                    "fields of a replica set",
                    key);
            goto fail;
        }
    }
    if (parse_image(obj, out, err) < 0 || replicaset_spec_gpu_from_json(obj, false, out, err) < 0 ||
        parse_strings(obj, "env", true, &out->env, &out->nenv, err) < 0 ||
        parse_strings(obj, "cmd", false, &out->cmd, &out->ncmd, err) < 0 ||
        parse_binds(obj, out, err) < 0 || parse_ports(obj, out, err) < 0 ||
        parse_limits(obj, out, err) < 0 || parse_labels(obj, out, err) < 0 ||
        parse_ssh_keys(obj, out, err) < 0 || ssh_port_add(out, err) < 0)
        goto fail;
    return 0;
fail:
    replicaset_spec_free(out);
    return -1;
}

static json_t *strings_to_json(char **items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

json_t *replicaset_spec_to_json(const replicaset_spec *s)
{
    json_t *binds = json_array();
    for (size_t i = 0; i < s->nbinds; i++)
        json_array_append_new(binds,
                              json_pack("{s:s, s:s, s:b}", "src", s->binds[i].src, "dest",
                                        s->binds[i].dest, "readOnly", s->binds[i].read_only));
    json_t *cports = json_array(), *ports = json_array();
    for (size_t i = 0; i < s->nports; i++) {
        const replicaset_port *p = &s->ports[i];
        if (p->host_port == 0) {
            char text[16];
            snprintf(text, sizeof(text), "%u/%s", p->container_port, p->protocol);
            json_array_append_new(cports, json_string(text));
        } else {
            json_array_append_new(ports, json_pack("{s:i, s:i, s:s}", "hostPort", p->host_port,
                                                   "containerPort", p->container_port, "protocol",
                                                   p->protocol));
        }
    }
    json_t *j = json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:f, s:I, s:I, s:s, s:o}",
                          "imageName", s->image, "gpuCount", s->gpu_count, "binds", binds, "env",
                          strings_to_json(s->env, s->nenv), "cmd", strings_to_json(s->cmd, s->ncmd),
                          "containerPorts", cports, "ports", ports, "cpus", s->cpus, "memory",
                          (json_int_t)s->memory_bytes, "shmSize", (json_int_t)s->shm_bytes,
                          "restartPolicy", s->restart_policy ? s->restart_policy : "no", "labels",
                          s->labels ? json_incref(s->labels) : json_object());
    if (j)
        json_object_set_new(j, "sshKeys", strings_to_json(s->ssh_keys, s->nssh_keys));
    if (j && s->cpu_count)
        json_object_set_new(j, "cpuCount", json_integer(s->cpu_count));
    if (j && replicaset_spec_gpu_to_json(s, j) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static void strings_free(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

void replicaset_spec_free(replicaset_spec *s)
{
    if (!s)
        return;
    free(s->image);
    replicaset_spec_gpu_free(s);
    strings_free(s->env, s->nenv);
    strings_free(s->cmd, s->ncmd);
    for (size_t i = 0; i < s->nbinds; i++) {
        free(s->binds[i].src);
        free(s->binds[i].dest);
    }
    free(s->binds);
    free(s->ports);
    free(s->restart_policy);
    json_decref(s->labels);
    strings_free(s->ssh_keys, s->nssh_keys);
    memset(s, 0, sizeof(*s));
}

static char *string_copy(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static char **strings_copy(char *const *items, size_t n)
{
    if (!items)
        return NULL;
    char **out = xcalloc(n + 1, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(items[i]);
    return out;
}

void replicaset_spec_copy(const replicaset_spec *src, replicaset_spec *dst)
{
    *dst = *src;
    dst->image = string_copy(src->image);
    dst->gpu_uuids = strings_copy(src->gpu_uuids, src->ngpu_uuids);
    dst->gpu_model = string_copy(src->gpu_model);
    dst->env = strings_copy(src->env, src->nenv);
    dst->cmd = strings_copy(src->cmd, src->ncmd);
    dst->binds = src->nbinds ? xcalloc(src->nbinds, sizeof(*dst->binds)) : NULL;
    for (size_t i = 0; i < src->nbinds; i++)
        dst->binds[i] = (replicaset_bind){.src = xstrdup(src->binds[i].src),
                                          .dest = xstrdup(src->binds[i].dest),
                                          .read_only = src->binds[i].read_only};
    dst->ports = src->nports ? xcalloc(src->nports, sizeof(*dst->ports)) : NULL;
    if (src->nports)
        memcpy(dst->ports, src->ports, src->nports * sizeof(*dst->ports));
    dst->restart_policy = string_copy(src->restart_policy);
    dst->labels = src->labels ? json_deep_copy(src->labels) : json_object();
    dst->ssh_keys = strings_copy(src->ssh_keys, src->nssh_keys);
}

size_t replicaset_spec_ports_to_allocate(const replicaset_spec *spec)
{
    size_t n = 0;
    for (size_t i = 0; i < spec->nports; i++)
        n += spec->ports[i].host_port == 0;
    return n;
}
