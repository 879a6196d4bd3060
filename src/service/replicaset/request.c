/*
 * request.c - one parser for every create body (replicaset/request.h).
 *
 * The order of the checks is the order the routes have always answered
 * in: for the older family its own field names first (then its body is
 * rewritten into the /replicaSet form), then the placement fields, the
 * name, the pull policy and credentials, the other unknown fields, the
 * spec and last the run limits.
 */
#include "util/xalloc.h"
#include "service/replicaset/request.h"
#include "service/replicaset/services.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "service/replicaset/record.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/names.h"
#include "util/time.h"

/* Every field of a create body. The older family's fields come first, in
 * the order its messages list them. */
const replicaset_create_field replicaset_create_fields[] = {
    /* the spec (replicaset/spec.c); the older family has some of it */
    {"imageName", "imageName"},
    {"replicaSetName", "containerName"},
    {"gpuCount", "gpuCount"},
    {"binds", "binds"},
    {"env", "env"},
    {"cmd", "cmd"},
    {"ports", "Ports"},
    {"containerPorts", "containerPorts"},
    {"gpuMemory", NULL},
    {"gpuCores", NULL},
    {"gpuShared", NULL},
    {"gpuPolicy", NULL},
    {"gpuUUIDs", NULL},
    {"gpuModel", NULL},
    {"cpus", NULL},
    {"cpuCount", NULL},
    {"memory", NULL},
    {"shmSize", NULL},
    {"restartPolicy", NULL},
    {"labels", NULL},
    {"sshKeys", NULL},
    /* the request around the spec */
    {"idleStop", NULL},
    {"maxDuration", NULL},
    {"services", NULL},
    {"pull", NULL},
    {"registryAuth", NULL},
    /* the queue (service/queue/queue.h) */
    {"queue", "queue"},
    {"queueTimeout", "queueTimeout"},
    {"priority", "priority"},
    /* placement in a fleet */
    {"node", NULL},
    {"nodeSelector", NULL},
    {"placement", NULL},
    {NULL, NULL},
};

#define NFIELDS (ARRAY_SIZE(replicaset_create_fields) - 1)

/* "a, b, c": the older family's fields, for its unknown-field message. */
static void older_fields_list(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NFIELDS && used < size; i++) {
        if (!replicaset_create_fields[i].older)
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                         replicaset_create_fields[i].older);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static bool field_known(const char *key, enum replicaset_create_family family)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *n = family == RS_CREATE_CONTAINERS ? replicaset_create_fields[i].older
                                                       : replicaset_create_fields[i].name;
        if (n && strcmp(key, n) == 0)
            return true;
    }
    return false;
}

static int check_fields(const json_t *body, enum replicaset_create_family family, gb_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (field_known(key, family))
            continue;
        if (family == RS_CREATE_REPLICASET)
            return err_set(err, ERR_INVALID_PARAMS,
                           "unknown field '%.64s'; see docs/api.md for the fields of a replica "
                           "set",
                           key);
        char list[256];
        older_fields_list(list, sizeof(list));
        return err_set(err, ERR_INVALID_PARAMS, "unknown field '%.64s'; this route takes: %s", key,
                       list);
    }
    return 0;
}

/* ---- placement ------------------------------------------------------------------ */

int replicaset_placement_from_json(const json_t *body, bool in_fleet, replicaset_placement *out,
                                   gb_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *node = NULL, *placement = NULL;
    json_t *selector = NULL;
    int r1 = json_field_string(body, NULL, "node", &node, false, err);
    if (r1 < 0)
        return -1;
    int r2 = json_field_object(body, NULL, "nodeSelector", &selector, false, err);
    if (r2 < 0)
        return -1;
    int r3 = json_field_string(body, NULL, "placement", &placement, false, err);
    if (r3 < 0)
        return -1;
    out->given = r1 + r2 + r3 > 0;
    if (out->given && !in_fleet)
        return err_set(err, ERR_INVALID_PARAMS,
                       "node, nodeSelector and placement choose a node of a fleet; this gpuboxd "
                       "is a single server (started without --node)");
    if (node && fleet_node_name_check(node, err) < 0)
        return -1;
    out->node = node;
    if (placement) {
        int policy = gpus_policy_parse(placement);
        if (policy < 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "placement '%s' is not binpack or spread (which node: the fullest that "
                           "fits, or the emptiest)",
                           placement);
        out->has_policy = true;
        out->policy = (enum gpus_policy)policy;
    }
    if (selector) {
        if (json_object_size(selector) > RS_MAX_SELECTOR)
            return err_set(err, ERR_INVALID_PARAMS, "nodeSelector has more than %d labels",
                           RS_MAX_SELECTOR);
        const char *k;
        json_t *v;
        json_object_foreach(selector, k, v)
        {
            if (!json_is_string(v))
                return err_set(err, ERR_INVALID_PARAMS, "nodeSelector.%s must be a string, not %s",
                               k, json_type_name(v));
            out->selector[out->nselector++] = (replicaset_label){k, json_string_value(v)};
        }
    }
    return 0;
}

/* ---- the older family's body ------------------------------------------------------ */

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
        const char *key;
        json_t *v;
        json_object_foreach(entry, key, v)
        {
            if (strcmp(key, "hostPort") != 0 && strcmp(key, "containerPort") != 0 &&
                strcmp(key, "protocol") != 0) {
                err_set(err, ERR_INVALID_PARAMS,
                        "unknown field '%.64s'; this route takes: hostPort, containerPort, "
                        "protocol",
                        key);
                return err_prefix(err, "%s", where);
            }
        }
        if (legacy_port(entry, where, "hostPort", err) < 0 ||
            legacy_port(entry, where, "containerPort", err) < 0)
            return -1;
    }
    *out = steal_ptr(&copy);
    return 0;
}

/* gpu-docker-api made a new volume "foo-N" at each resize, so its clients
 * bind "foo-2"; gpubox resizes "foo" in place. A volume name has no '-',
 * so a source of the form <name>-<digits> (not a host path) can only mean
 * that volume: it becomes "foo". Binds are objects {src, dest, ...} or
 * strings "src:dest[:ro]"; anything else is left for the spec checks. */
json_t *replicaset_legacy_volume_ref(json_t *bind)
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

/* Every bind of an array through replicaset_legacy_volume_ref; a non-array as it is. */
static json_t *legacy_volume_refs(json_t *binds)
{
    if (!json_is_array(binds))
        return json_incref(binds);
    json_t *out = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        json_array_append_new(out, replicaset_legacy_volume_ref(b));
    }
    return out;
}

/* The older body in the /replicaSet form: each field under its name there. */
static int legacy_to_create_body(const json_t *body, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *spec = json_object();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (strcmp(key, "Ports") == 0) {
            json_t *ports = NULL;
            if (json_is_null(v))
                continue;
            if (legacy_ports(v, &ports, err) < 0)
                return -1;
            json_object_set_new(spec, "ports", ports);
            continue;
        }
        if (strcmp(key, "binds") == 0) {
            json_object_set_new(spec, key, legacy_volume_refs(v));
            continue;
        }
        const char *name = key;
        for (size_t i = 0; i < NFIELDS; i++)
            if (replicaset_create_fields[i].older &&
                strcmp(key, replicaset_create_fields[i].older) == 0)
                name = replicaset_create_fields[i].name;
        json_object_set(spec, name, v);
    }
    *out = steal_ptr(&spec);
    return 0;
}

/* ---- the queue's fields ------------------------------------------------------------- */

int replicaset_queue_fields_parse(const json_t *b, replicaset_create_request *out, gb_err *err)
{
    json_t *q = json_object_get(b, "queue");
    if (q && !json_is_boolean(q) && !json_is_null(q))
        return err_set(err, ERR_WRONG_TYPE, "queue must be true or false, not %s",
                       json_type_name(q));
    out->queue = json_is_true(q);
    out->priority = -1;
    json_t *p = json_object_get(b, "priority");
    if (p && !json_is_null(p)) {
        if (!json_is_integer(p))
            return err_set(err, ERR_WRONG_TYPE, "priority must be a whole number 0-100, not %s",
                           json_type_name(p));
        json_int_t v = json_integer_value(p);
        if (v < 0 || v > 100)
            return err_set(err, ERR_INVALID_PARAMS,
                           "priority is %lld; give 0-100 (default 50; higher is served first)",
                           (long long)v);
        out->priority = (int)v;
    }
    json_t *t = json_object_get(b, "queueTimeout");
    if (t && !json_is_null(t)) {
        int64_t s = 0;
        if (!json_is_string(t))
            return err_set(err, ERR_WRONG_TYPE,
                           "queueTimeout must be a duration such as \"2h\", not %s",
                           json_type_name(t));
        if (*json_string_value(t) &&
            (time_duration_parse(json_string_value(t), &s) < 0 || s < 1 || s > 366 * 86400))
            return err_set(err, ERR_INVALID_PARAMS,
                           "queueTimeout is '%.32s'; give a duration from 1s to 366d such as "
                           "\"30m\" or \"2h\" (\"\" for none)",
                           json_string_value(t));
        out->queue_timeout_s = s;
    }
    if (out->queue_timeout_s && !out->queue)
        return err_set(err, ERR_INVALID_PARAMS,
                       "queueTimeout needs \"queue\": true (how long a queued request may wait)");
    return 0;
}

/* ---- the request ------------------------------------------------------------------ */

int replicaset_create_request_parse(const json_t *body, enum replicaset_create_family family,
                                    bool in_fleet, replicaset_create_request *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    out->image.pull = IMAGE_PULL_MISSING;
    if (family == RS_CREATE_CONTAINERS) {
        if (check_fields(body, family, err) < 0 || legacy_to_create_body(body, &out->body, err) < 0)
            return -1;
    } else {
        out->body = json_incref((json_t *)body);
    }
    const json_t *b = out->body;
    const char *pull = NULL;
    const char *names[NFIELDS + 1];
    for (size_t i = 0; i <= NFIELDS; i++)
        names[i] = replicaset_create_fields[i].name;
    if (replicaset_placement_from_json(b, in_fleet, &out->placement, err) < 0 ||
        json_field_string(b, NULL, "replicaSetName", &out->name, false, err) < 0 ||
        name_check_replicaset(out->name, err) < 0 ||
        json_field_string(b, NULL, "pull", &pull, false, err) < 0 ||
        (pull && images_pull_policy_parse(pull, &out->image.pull, err) < 0) ||
        images_auth_from_json(b, "registryAuth", &out->image.auth, err) < 0 ||
        check_fields(b, RS_CREATE_REPLICASET, err) < 0)
        goto fail;
    if (replicaset_queue_fields_parse(b, out, err) < 0 ||
        replicaset_spec_from_json(b, names, &out->spec, err) < 0)
        goto fail;
    if (replicaset_run_limits_parse(b, &out->idle_stop_s, &out->max_duration_s, NULL, err) < 0 ||
        (json_object_get(b, "services") &&
         replicaset_services_parse(json_object_get(b, "services"), NULL, &out->services, err) <
             0)) {
        replicaset_spec_free(&out->spec);
        goto fail;
    }
    return 0;
fail:
    json_decref(out->body);
    memset(out, 0, sizeof(*out));
    return -1;
}

void replicaset_create_request_free(replicaset_create_request *req)
{
    if (!req)
        return;
    replicaset_spec_free(&req->spec);
    json_decref(req->services);
    json_decref(req->body);
    memset(req, 0, sizeof(*req));
}
