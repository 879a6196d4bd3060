/*
 * record.c - replica-set records: JSON form, store load/save, and the
 * lifecycle table (see replicaset/record.h).
 */
#include "util/xalloc.h"
#include "service/replicaset/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/records.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/time.h"

static const char *const replicaset_state_names[] = {
    [RS_STATE_CREATING] = "creating", [RS_STATE_RUNNING] = "running", [RS_STATE_PAUSED] = "paused",
    [RS_STATE_STOPPED] = "stopped",   [RS_STATE_DELETED] = "deleted", [RS_STATE_QUEUED] = "queued",
};

static const char *const replicaset_op_names[] = {
    [RS_OP_STOP] = "stop",       [RS_OP_PAUSE] = "pause",        [RS_OP_CONTINUE] = "continue",
    [RS_OP_EXECUTE] = "execute", [RS_OP_COMMIT] = "commit",      [RS_OP_DELETE] = "delete",
    [RS_OP_PATCH] = "patch",     [RS_OP_ROLLBACK] = "roll back", [RS_OP_RESTART] = "restart",
};

/* allowed[op] is a bit set of states (replicaset/record.h has the table). */
#define S(x) (1u << RS_STATE_##x)
static const unsigned replicaset_allowed[] = {
    [RS_OP_STOP] = S(RUNNING) | S(PAUSED),
    [RS_OP_PAUSE] = S(RUNNING),
    [RS_OP_CONTINUE] = S(PAUSED),
    [RS_OP_EXECUTE] = S(RUNNING),
    [RS_OP_COMMIT] = S(RUNNING) | S(PAUSED) | S(STOPPED),
    [RS_OP_DELETE] = S(CREATING) | S(RUNNING) | S(PAUSED) | S(STOPPED) | S(QUEUED),
    /* Stopped: the change waits for the next start (record.h, pendingSpec). */
    [RS_OP_PATCH] = S(RUNNING) | S(PAUSED) | S(STOPPED),
    [RS_OP_ROLLBACK] = S(RUNNING) | S(PAUSED) | S(STOPPED),
    [RS_OP_RESTART] = S(RUNNING) | S(PAUSED) | S(STOPPED),
};
#undef S

const char *replicaset_state_name(enum replicaset_state s)
{
    return s <= RS_STATE_QUEUED ? replicaset_state_names[s] : "unknown";
}

static int replicaset_state_parse(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(replicaset_state_names); i++)
        if (strcmp(s, replicaset_state_names[i]) == 0)
            return (int)i;
    return -1;
}

int replicaset_lifecycle_check(enum replicaset_op op, const replicaset_record *r, gb_err *err)
{
    if (replicaset_allowed[op] & (1u << r->state))
        return 0;
    if (r->state == RS_STATE_DELETED)
        return err_set(err, ERR_NOT_FOUND, "replica set '%s' was deleted", r->name);
    const char *hint = "";
    switch (op) {
    case RS_OP_CONTINUE:
        hint = r->state == RS_STATE_STOPPED ? "; a stopped set gave back its GPUs and ports: "
                                              "restart it instead"
                                            : "; only a paused set can continue";
        break;
    case RS_OP_STOP:
        hint = "; it is already stopped";
        break;
    case RS_OP_PAUSE:
        hint = "; only a running set can be paused";
        break;
    case RS_OP_EXECUTE:
        hint = "; commands run only in a running set";
        break;
    default:
        break;
    }
    if (r->state == RS_STATE_QUEUED)
        hint = "; it waits in the queue and holds nothing yet (GET /api/v1/queue says why; "
               "DELETE cancels it)";
    return err_set(err, ERR_STATE_CONFLICT, "cannot %s replica set '%s': it is %s%s",
                   replicaset_op_names[op], r->name, replicaset_state_name(r->state), hint);
}

static json_t *replicaset_gpu_list_json(char (*gpus)[GPU_UUID_MAX], size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(gpus[i]));
    return a;
}

static json_t *replicaset_port_list_json(const replicaset_held_port *ports, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:i, s:i, s:s}", "hostPort", ports[i].host_port,
                                           "containerPort", ports[i].container_port, "protocol",
                                           ports[i].protocol));
    return a;
}

json_t *replicaset_record_gpus_json(const replicaset_record *r)
{
    return replicaset_gpu_list_json(r->gpus, r->ngpus);
}

const char *replicaset_record_gpu_mode(const replicaset_record *r)
{
    if (r->ngpus == 0)
        return "none";
    if (r->grant.n != r->ngpus)
        return "whole";
    return gpus_mode_name(r->grant.cards[0].mode);
}

json_t *replicaset_record_gpu_shares_json(const replicaset_record *r)
{
    _cleanup_json_ json_t *tmp = json_object();
    if (!tmp || r->grant.n != r->ngpus || gpus_grant_to_json(&r->grant, tmp, NULL) < 0)
        return json_array();
    json_t *shares = json_object_get(tmp, "gpuShares");
    return shares ? json_incref(shares) : json_array();
}

json_t *replicaset_record_gpu_cores_json(const replicaset_record *r)
{
    return r->spec.gpu_cores ? json_integer(r->spec.gpu_cores) : json_null();
}

int replicaset_record_set_grant(replicaset_record *r, gpus_grant *g, gb_err *err)
{
    (void)err; /* cannot fail: kept for its callers, which chain it */
    char(*gpus)[GPU_UUID_MAX] = xcalloc(g->n + 1, sizeof(*gpus));
    for (size_t i = 0; i < g->n; i++)
        memcpy(gpus[i], g->cards[i].uuid, GPU_UUID_MAX);
    free(r->gpus);
    gpus_grant_free(&r->grant);
    r->gpus = gpus;
    r->ngpus = g->n;
    r->grant = *g;
    *g = (gpus_grant){0};
    return 0;
}

json_t *replicaset_record_ports_json(const replicaset_record *r)
{
    return replicaset_port_list_json(r->ports, r->nports);
}

static json_t *replicaset_int_list_json(const int *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

json_t *replicaset_record_cpuset_json(const replicaset_record *r)
{
    return replicaset_int_list_json(r->cpuset, r->ncpuset);
}

json_t *replicaset_record_to_json(const replicaset_record *r)
{
    json_t *j = json_pack("{s:s, s:i, s:s, s:o, s:s, s:s, s:o, s:o, s:s, s:s}", "name", r->name,
                          "version", r->version, "state", replicaset_state_name(r->state), "spec",
                          replicaset_spec_to_json(&r->spec), "containerName", r->container_name,
                          "containerId", r->container_id, "gpus", replicaset_record_gpus_json(r),
                          "ports", replicaset_record_ports_json(r), "createTime", r->create_time,
                          "updateTime", r->update_time);
    /* The grant adds gpuShares; a record whose gpus were set without one
     * holds whole cards, which "gpus" alone already says. */
    if (j && r->ngpus && r->grant.n == r->ngpus && gpus_grant_to_json(&r->grant, j, NULL) < 0) {
        json_decref(j);
        return NULL;
    }
    /* Optional fields appear only when set, so records stay as they were
     * for sets that never used them. */
    if (j && r->operation[0])
        json_object_set_new(j, "operation", json_string(r->operation));
    if (j && r->owner[0])
        json_object_set_new(j, "owner", json_string(r->owner));
    if (j && (r->nlast_gpus || r->nlast_ports)) {
        json_object_set_new(j, "lastGpus", replicaset_gpu_list_json(r->last_gpus, r->nlast_gpus));
        json_object_set_new(j, "lastPorts",
                            replicaset_port_list_json(r->last_ports, r->nlast_ports));
    }
    if (j && r->ncpuset)
        json_object_set_new(j, "cpuset", replicaset_record_cpuset_json(r));
    if (j && r->nlast_cpuset)
        json_object_set_new(j, "lastCpuset",
                            replicaset_int_list_json(r->last_cpuset, r->nlast_cpuset));
    if (j && r->idle_stop_s)
        json_object_set_new(j, "idleStopSeconds", json_integer(r->idle_stop_s));
    if (j && r->max_duration_s)
        json_object_set_new(j, "maxDurationSeconds", json_integer(r->max_duration_s));
    if (j && r->running_since[0])
        json_object_set_new(j, "runningSince", json_string(r->running_since));
    if (j && r->stop_reason[0])
        json_object_set_new(j, "stopped",
                            json_pack("{s:s, s:s, s:s}", "reason", r->stop_reason, "at",
                                      r->stopped_at, "detail", r->stop_detail));
    if (j && r->gpus_aside)
        json_object_set_new(j, "gpusAside", json_deep_copy(r->gpus_aside));
    if (j && r->pending_spec)
        json_object_set_new(j, "pendingSpec", json_deep_copy(r->pending_spec));
    if (j && r->queue)
        json_object_set_new(j, "queue", json_deep_copy(r->queue));
    if (j && r->services && json_array_size(r->services))
        json_object_set_new(j, "services", json_deep_copy(r->services));
    const char *key;
    json_t *value;
    json_object_foreach(r->unknown, key, value)
    {
        if (j && !json_object_get(j, key))
            json_object_set(j, key, value);
    }
    return j;
}

/* Every field replicaset_record_to_json may write: the others are kept in
 * r->unknown. */
static const char *const record_known_fields[] = {"name",
                                                  "version",
                                                  "state",
                                                  "spec",
                                                  "containerName",
                                                  "containerId",
                                                  "gpus",
                                                  "gpuShares",
                                                  "ports",
                                                  "createTime",
                                                  "updateTime",
                                                  "operation",
                                                  "owner",
                                                  "lastGpus",
                                                  "lastPorts",
                                                  "cpuset",
                                                  "lastCpuset",
                                                  "idleStopSeconds",
                                                  "maxDurationSeconds",
                                                  "runningSince",
                                                  "stopped",
                                                  "gpusAside",
                                                  "pendingSpec",
                                                  "gpuMode",
                                                  "queue",
                                                  "services",
                                                  NULL};

static json_t *record_unknown_fields(const json_t *j)
{
    json_t *unknown = NULL;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)j, key, value)
    {
        bool known = false;
        for (size_t i = 0; record_known_fields[i] && !known; i++)
            known = strcmp(key, record_known_fields[i]) == 0;
        if (known)
            continue;
        if (!unknown)
            unknown = json_object();
        json_object_set(unknown, key, value);
    }
    return unknown;
}

static int copy_field(const json_t *j, const char *field, char *dst, size_t size, gb_err *err);

/* The optional run-limit fields of a stored record. */
static int replicaset_limits_from_json(const json_t *j, replicaset_record *out, gb_err *err)
{
    long long idle = 0, max = 0;
    json_t *stopped = json_object_get(j, "stopped");
    if (json_field_int(j, "record", "idleStopSeconds", &idle, false, err) < 0 ||
        json_field_int(j, "record", "maxDurationSeconds", &max, false, err) < 0 ||
        copy_field(j, "runningSince", out->running_since, sizeof(out->running_since), err) < 0)
        return -1;
    if (idle < 0 || max < 0 || idle > RS_LIMIT_MAX_S || max > RS_LIMIT_MAX_S)
        return err_set(err, ERR_INTERNAL, "record of %s has run limits %lld, %lld", out->name, idle,
                       max);
    out->idle_stop_s = idle;
    out->max_duration_s = max;
    if (json_is_object(stopped) &&
        (copy_field(stopped, "reason", out->stop_reason, sizeof(out->stop_reason), err) < 0 ||
         copy_field(stopped, "at", out->stopped_at, sizeof(out->stopped_at), err) < 0 ||
         copy_field(stopped, "detail", out->stop_detail, sizeof(out->stop_detail), err) < 0))
        return -1;
    return 0;
}

/* One duration field of a body: 1 set (0 = none), 0 absent, -1 refused. */
static int replicaset_limit_field(const json_t *body, const char *field, int64_t *out, gb_err *err)
{
    json_t *v = json_object_get(body, field);
    if (!v)
        return 0;
    if (json_is_null(v) || (json_is_string(v) && !*json_string_value(v))) {
        *out = 0;
        return 1;
    }
    if (!json_is_string(v))
        return err_set(err, ERR_WRONG_TYPE, "%s must be a duration such as \"30m\", not %s", field,
                       json_type_name(v));
    int64_t s = 0;
    if (time_duration_parse(json_string_value(v), &s) < 0 || s < RS_LIMIT_MIN_S ||
        s > RS_LIMIT_MAX_S)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s is '%.32s'; give a duration from 10s to 366d such as \"30m\", "
                       "\"1h30m\" or \"2d\" (\"\" for none)",
                       field, json_string_value(v));
    *out = s;
    return 1;
}

int replicaset_run_limits_parse(const json_t *body, int64_t *idle_s, int64_t *max_s, bool *given,
                                gb_err *err)
{
    int64_t idle = *idle_s, max = *max_s;
    int gi = replicaset_limit_field(body, "idleStop", &idle, err);
    int gm = gi < 0 ? -1 : replicaset_limit_field(body, "maxDuration", &max, err);
    if (gi < 0 || gm < 0)
        return -1;
    *idle_s = idle;
    *max_s = max;
    if (given)
        *given = gi || gm;
    return 0;
}

void replicaset_record_limits_json(const replicaset_record *r, json_t *obj)
{
    char idle[32] = "", max[32] = "";
    if (r->idle_stop_s)
        time_duration_format(r->idle_stop_s, idle, sizeof(idle));
    if (r->max_duration_s)
        time_duration_format(r->max_duration_s, max, sizeof(max));
    json_object_set_new(obj, "idleStop", json_string(idle));
    json_object_set_new(obj, "maxDuration", json_string(max));
    if (r->running_since[0])
        json_object_set_new(obj, "runningSince", json_string(r->running_since));
    time_t since = time_iso_parse(r->running_since);
    char at[RS_TIME_MAX];
    if (r->max_duration_s && since &&
        time_iso_format(since + (time_t)r->max_duration_s, at, sizeof(at)) == 0)
        json_object_set_new(obj, "stopAt", json_string(at));
    if (r->stop_reason[0])
        json_object_set_new(obj, "stopped",
                            json_pack("{s:s, s:s, s:s}", "reason", r->stop_reason, "at",
                                      r->stopped_at, "detail", r->stop_detail));
}

json_t *replicaset_record_history_entry(const replicaset_record *r, const char *reason)
{
    /* The cards and ports the version was made with, so the history can
     * show its container as it was (gpu-docker-api's "status"). */
    return json_pack("{s:i, s:s, s:s, s:o, s:s, s:o, s:o}", "version", r->version, "createTime",
                     r->update_time, "containerName", r->container_name, "spec",
                     replicaset_spec_to_json(&r->spec), "reason", reason, "gpus",
                     replicaset_record_gpus_json(r), "ports", replicaset_record_ports_json(r));
}

static int copy_field(const json_t *j, const char *field, char *dst, size_t size, gb_err *err)
{
    const char *v = "";
    if (json_field_string(j, "record", field, &v, false, err) < 0)
        return -1;
    if (strlen(v) >= size)
        return err_set(err, ERR_INTERNAL, "record field %s is too long", field);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

/* A list of held ports under `field` ("ports" or "lastPorts"). */
static int replicaset_ports_from_json(const json_t *j, const char *name, const char *field,
                                      replicaset_held_port **out, size_t *n, gb_err *err)
{
    json_t *ports = json_object_get(j, field);
    size_t np = json_array_size(ports);
    replicaset_held_port *p = *out = xcalloc(np + 1, sizeof(*p));
    for (size_t i = 0; i < np; i++) {
        json_t *e = json_array_get(ports, i);
        json_int_t host = json_integer_value(json_object_get(e, "hostPort"));
        json_int_t cont = json_integer_value(json_object_get(e, "containerPort"));
        const char *proto = json_string_value(json_object_get(e, "protocol"));
        if (host < 1 || host > 65535 || cont < 1 || cont > 65535 || !proto || strlen(proto) > 3)
            return err_set(err, ERR_INTERNAL, "record of %s: %s[%zu] is malformed", name, field, i);
        p[i] =
            (replicaset_held_port){.host_port = (uint16_t)host, .container_port = (uint16_t)cont};
        strcpy(p[i].protocol, proto);
    }
    *n = np;
    return 0;
}

static int replicaset_last_gpus_from_json(const json_t *j, replicaset_record *r, gb_err *err)
{
    json_t *gpus = json_object_get(j, "lastGpus");
    size_t n = json_array_size(gpus);
    r->last_gpus = xcalloc(n + 1, sizeof(*r->last_gpus));
    for (size_t i = 0; i < n; i++) {
        const char *u = json_string_value(json_array_get(gpus, i));
        if (!u || strlen(u) >= GPU_UUID_MAX)
            return err_set(err, ERR_INTERNAL, "record of %s: lastGpus[%zu] is not a UUID", r->name,
                           i);
        strcpy(r->last_gpus[i], u);
    }
    r->nlast_gpus = n;
    return 0;
}

/* A list of logical CPUs under `field` ("cpuset" or "lastCpuset"). */
static int replicaset_cpus_from_json(const json_t *j, const char *name, const char *field,
                                     int **out, size_t *n, gb_err *err)
{
    json_t *list = json_object_get(j, field);
    size_t k = json_array_size(list);
    int *ids = *out = xcalloc(k + 1, sizeof(*ids));
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_array_get(list, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= 65536)
            return err_set(err, ERR_INTERNAL, "record of %s: %s[%zu] is not a CPU number", name,
                           field, i);
        ids[i] = (int)json_integer_value(e);
    }
    *n = k;
    return 0;
}

static int replicaset_record_holdings_from_json(const json_t *j, replicaset_record *r, gb_err *err)
{
    _cleanup_(gpus_grant_free) gpus_grant grant = {0};
    if (gpus_grant_from_json(j, &grant, err) < 0)
        return err_prefix(err, "record of %s", r->name);
    if (replicaset_record_set_grant(r, &grant, err) < 0 ||
        replicaset_ports_from_json(j, r->name, "ports", &r->ports, &r->nports, err) < 0 ||
        replicaset_ports_from_json(j, r->name, "lastPorts", &r->last_ports, &r->nlast_ports, err) <
            0 ||
        replicaset_cpus_from_json(j, r->name, "cpuset", &r->cpuset, &r->ncpuset, err) < 0 ||
        replicaset_cpus_from_json(j, r->name, "lastCpuset", &r->last_cpuset, &r->nlast_cpuset,
                                  err) < 0)
        return -1;
    return replicaset_last_gpus_from_json(j, r, err);
}

int replicaset_record_from_json(const json_t *j, replicaset_record *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *state = NULL;
    long long version = 0;
    json_t *spec = NULL;
    if (!json_is_object(j) || copy_field(j, "name", out->name, sizeof(out->name), err) < 0 ||
        json_field_int(j, "record", "version", &version, true, err) < 0 ||
        json_field_string(j, "record", "state", &state, true, err) < 0 ||
        json_field_object(j, "record", "spec", &spec, true, err) < 0 ||
        copy_field(j, "containerName", out->container_name, sizeof(out->container_name), err) < 0 ||
        copy_field(j, "containerId", out->container_id, sizeof(out->container_id), err) < 0 ||
        copy_field(j, "createTime", out->create_time, sizeof(out->create_time), err) < 0 ||
        copy_field(j, "updateTime", out->update_time, sizeof(out->update_time), err) < 0 ||
        copy_field(j, "operation", out->operation, sizeof(out->operation), err) < 0 ||
        copy_field(j, "owner", out->owner, sizeof(out->owner), err) < 0 ||
        replicaset_limits_from_json(j, out, err) < 0)
        goto fail;
    json_t *aside = json_object_get(j, "gpusAside");
    if (aside && !json_is_object(aside)) {
        err_set(err, ERR_INTERNAL, "record of %s has gpusAside that is not an object", out->name);
        goto fail;
    }
    out->gpus_aside = aside ? json_deep_copy(aside) : NULL;
    json_t *pending = json_object_get(j, "pendingSpec");
    if (pending && !json_is_object(pending)) {
        err_set(err, ERR_INTERNAL, "record of %s has pendingSpec that is not an object", out->name);
        goto fail;
    }
    out->pending_spec = pending ? json_deep_copy(pending) : NULL;
    json_t *queue = json_object_get(j, "queue");
    if (queue && !json_is_object(queue)) {
        err_set(err, ERR_INTERNAL, "record of %s has queue that is not an object", out->name);
        goto fail;
    }
    out->queue = queue ? json_deep_copy(queue) : NULL;
    json_t *services = json_object_get(j, "services");
    if (services && !json_is_array(services)) {
        err_set(err, ERR_INTERNAL, "record of %s has services that are not a list", out->name);
        goto fail;
    }
    out->services = services ? json_deep_copy(services) : NULL;
    out->unknown = record_unknown_fields(j);
    int s = replicaset_state_parse(state);
    if (s < 0 || version < 0 || version > 1000000000) {
        err_set(err, ERR_INTERNAL, "record of %s has state '%s', version %lld", out->name, state,
                version);
        goto fail;
    }
    out->state = (enum replicaset_state)s;
    out->version = (int)version;
    if (replicaset_spec_from_json(spec, NULL, &out->spec, err) < 0 ||
        replicaset_record_holdings_from_json(j, out, err) < 0)
        goto fail;
    return 0;
fail:
    if (err)
        err->code = ERR_INTERNAL;
    replicaset_record_free(out);
    return -1;
}

STORE_RECORD_KIND(replicaset_record, replicaset_record_from_json, .noun = "replica set",
                  .key = keys_replicaset);

int replicaset_record_load(store *s, const char *name, replicaset_record *out, gb_err *err)
{
    return records_load(s, &replicaset_record_kind, name, out, err);
}

struct replicaset_records_each_ctx {
    replicaset_record_fn fn;
    void *ctx;
};

/* Parse one record of the scan and hand it to the caller's fn. */
static int replicaset_records_each_one(void *ctx, const char *key, json_t *value,
                                       int64_t mod_revision, gb_err *err)
{
    const struct replicaset_records_each_ctx *each = ctx;
    (void)key;
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_record_parse(&r, value, mod_revision, err) < 0)
        return -1;
    return each->fn(each->ctx, &r, err);
}

int replicaset_records_each(store *s, replicaset_record_fn fn, void *ctx, gb_err *err)
{
    struct replicaset_records_each_ctx each = {.fn = fn, .ctx = ctx};
    return records_scan(s, KEYS_REPLICASETS, keys_is_replicaset_record, replicaset_records_each_one,
                        &each, err);
}

bool replicaset_record_is_tombstone(const replicaset_record *r)
{
    /* A request dropped from the queue keeps its record to say why. */
    return r->state == RS_STATE_DELETED && r->version == 0 && !r->queue;
}

void replicaset_record_clear_holdings(replicaset_record *r)
{
    r->ngpus = 0;
    r->grant.n = 0;
    r->nports = 0;
    r->ncpuset = 0;
}

void replicaset_record_forget_last(replicaset_record *r)
{
    free(r->last_gpus);
    free(r->last_ports);
    r->last_gpus = NULL;
    r->last_ports = NULL;
    r->nlast_gpus = r->nlast_ports = 0;
    free(r->last_cpuset);
    r->last_cpuset = NULL;
    r->nlast_cpuset = 0;
}

void replicaset_record_remember_holdings(replicaset_record *r)
{
    replicaset_record_forget_last(r);
    r->last_gpus = r->gpus;
    r->nlast_gpus = r->ngpus;
    r->last_ports = r->ports;
    r->nlast_ports = r->nports;
    r->gpus = xcalloc(1, sizeof(*r->gpus));
    r->ports = xcalloc(1, sizeof(*r->ports));
    r->ngpus = r->nports = 0;
    r->last_cpuset = r->cpuset;
    r->nlast_cpuset = r->ncpuset;
    r->cpuset = xcalloc(1, sizeof(*r->cpuset));
    r->ncpuset = 0;
    gpus_grant_free(&r->grant);
}

static void *replicaset_dup(const void *p, size_t n, size_t size)
{
    void *d = xcalloc(n + 1, size);
    if (d && n)
        memcpy(d, p, n * size);
    return d;
}

void replicaset_record_copy(const replicaset_record *src, replicaset_record *dst)
{
    *dst = *src;
    dst->gpus = replicaset_dup(src->gpus, src->ngpus, sizeof(*src->gpus));
    dst->grant.cards = replicaset_dup(src->grant.cards, src->grant.n, sizeof(*src->grant.cards));
    dst->ports = replicaset_dup(src->ports, src->nports, sizeof(*src->ports));
    dst->last_gpus = replicaset_dup(src->last_gpus, src->nlast_gpus, sizeof(*src->last_gpus));
    dst->last_ports = replicaset_dup(src->last_ports, src->nlast_ports, sizeof(*src->last_ports));
    dst->gpus_aside = src->gpus_aside ? json_deep_copy(src->gpus_aside) : NULL;
    dst->pending_spec = src->pending_spec ? json_deep_copy(src->pending_spec) : NULL;
    dst->queue = src->queue ? json_deep_copy(src->queue) : NULL;
    dst->services = src->services ? json_deep_copy(src->services) : NULL;
    dst->unknown = src->unknown ? json_deep_copy(src->unknown) : NULL;
    dst->cpuset = replicaset_dup(src->cpuset, src->ncpuset, sizeof(*src->cpuset));
    dst->last_cpuset =
        replicaset_dup(src->last_cpuset, src->nlast_cpuset, sizeof(*src->last_cpuset));
    replicaset_spec_copy(&src->spec, &dst->spec);
}

void replicaset_record_free(replicaset_record *r)
{
    if (!r)
        return;
    replicaset_spec_free(&r->spec);
    gpus_grant_free(&r->grant);
    free(r->gpus);
    free(r->ports);
    free(r->cpuset);
    r->gpus = NULL;
    r->ports = NULL;
    r->cpuset = NULL;
    r->ngpus = r->nports = r->ncpuset = 0;
    json_decref(r->gpus_aside);
    r->gpus_aside = NULL;
    json_decref(r->unknown);
    r->unknown = NULL;
    json_decref(r->pending_spec);
    r->pending_spec = NULL;
    json_decref(r->queue);
    r->queue = NULL;
    json_decref(r->services);
    r->services = NULL;
    replicaset_record_forget_last(r);
}

int replicaset_record_load_visible(store *s, const char *name, replicaset_record *out, gb_err *err)
{
    int found = replicaset_record_load(s, name, out, err);
    if (found > 0 && !users_caller_sees(out->owner)) {
        replicaset_record_free(out);
        return 0;
    }
    return found;
}

void replicaset_record_hold(const replicaset_record *r, const gpu_inventory *inv,
                            users_ledger_hold *h)
{
    /* A queued create holds nothing, not even an instance of the quota:
     * the quota is checked when it starts (service/queue/queue.h). A
     * queued restart is a stopped set still: an instance. */
    *h = (users_ledger_hold){.exists = r->state != RS_STATE_DELETED &&
                                       !(r->state == RS_STATE_QUEUED && !r->container_name[0]) &&
                                       !replicaset_record_is_tombstone(r)};
    snprintf(h->owner, sizeof(h->owner), "%s", r->owner);
    snprintf(h->name, sizeof(h->name), "%s", r->name);
    bool known = true; /* every shared card's memory found: share_cards is exact */
    for (size_t i = 0; i < r->ngpus; i++) {
        bool whole = r->grant.n != r->ngpus || r->grant.cards[i].mode == GPUS_MODE_WHOLE;
        if (whole) {
            h->cards++;
            continue;
        }
        h->share_mib += (int64_t)r->grant.cards[i].memory_mib;
        const gpu_device *d = inv ? gpu_inventory_find(inv, r->gpus[i]) : NULL;
        if (d && d->memory_mib)
            h->share_cards += (double)r->grant.cards[i].memory_mib / (double)d->memory_mib;
        else
            known = false;
    }
    if (!known) /* accounting then values the share by this node's cards (docs/users.md) */
        h->share_cards = 0;
    h->cores = (int64_t)r->ncpuset;
}

/* runningSince and stopped follow the state (record.h). */
static void replicaset_record_stamp_run(replicaset_record *r)
{
    bool runs = r->state == RS_STATE_RUNNING || r->state == RS_STATE_PAUSED ||
                r->state == RS_STATE_CREATING;
    if (runs && !r->running_since[0])
        snprintf(r->running_since, sizeof(r->running_since), "%s", r->update_time);
    if (!runs)
        r->running_since[0] = '\0';
    if (r->state != RS_STATE_STOPPED)
        r->stop_reason[0] = r->stopped_at[0] = r->stop_detail[0] = '\0';
    else if (!r->stop_reason[0])
        snprintf(r->stop_reason, sizeof(r->stop_reason), "request");
    if (r->state == RS_STATE_STOPPED && !r->stopped_at[0])
        snprintf(r->stopped_at, sizeof(r->stopped_at), "%s", r->update_time);
}

int replicaset_record_save(app *a, replicaset_record *r, const store_op *extra, size_t nextra,
                           gb_err *err)
{
    records_stamp(r->create_time, r->update_time, sizeof(r->update_time));
    replicaset_record_stamp_run(r);
    _cleanup_json_ json_t *j = replicaset_record_to_json(r);
    users_ledger_hold h, check;
    replicaset_record_hold(r, &a->gpus, &h);
    if (r->quota_as)
        replicaset_record_hold(r->quota_as, &a->gpus, &check);
    int rc = users_ledger_record_save(a, &replicaset_record_kind, r->name, j, &r->mod_revision,
                                      extra, nextra, &h, r->quota_as ? &check : NULL, err);
    __atomic_add_fetch(&a->records_generation, 1, __ATOMIC_RELEASE);
    return rc;
}

int replicaset_record_save_unledgered(app *a, replicaset_record *r, gb_err *err)
{
    records_stamp(r->create_time, r->update_time, sizeof(r->update_time));
    _cleanup_json_ json_t *j = replicaset_record_to_json(r);
    int rc = records_save_plain(a->store, &replicaset_record_kind, r->name, j, &r->mod_revision,
                                NULL, 0, err);
    __atomic_add_fetch(&a->records_generation, 1, __ATOMIC_RELEASE);
    return rc;
}

int replicaset_record_remove_txn(app *a, const replicaset_record *gone, const store_cmp *cmps,
                                 size_t ncmps, store_op *ops, size_t nops, bool *landed,
                                 gb_err *err)
{
    users_ledger_hold h;
    replicaset_record_hold(gone, &a->gpus, &h);
    h.exists = false;
    return users_ledger_txn(a, &h, NULL, cmps, ncmps, ops, nops, landed, NULL, err);
}
