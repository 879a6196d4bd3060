/*
 * query.c - reading replica sets: list, info, history, and
 * resolving the older routes' "foo-N" names. Nothing here changes state, so
 * nothing takes the name lock; each answer is one consistent read of the
 * store plus Docker's live view.
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/container_watch.h"
#include "service/keys.h"
#include "service/replicaset/gpu_env.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/replicaset/services.h"
#include "util/cleanup.h"

/* Docker's live status of r's container: "running", "exited", ...,
 * "missing" when Docker has no such container, "unknown" when Docker did not
 * answer; Docker's inspect stays in *inspect (NULL when Docker has no
 * answer) for what else the caller reads of it. */
static const char *replicaset_container_inspect(app *a, const replicaset_record *r,
                                                json_t **inspect, char *buf, size_t size)
{
    *inspect = NULL;
    if (r->state == RS_STATE_DELETED)
        return "deleted";
    if (r->state == RS_STATE_QUEUED)
        return "queued";
    gb_err e = GB_ERR_INIT;
    if (docker_container_inspect(a->docker, r->container_name, inspect, &e) < 0)
        return e.code == ERR_NOT_FOUND ? "missing" : "unknown";
    docker_container_state st;
    docker_container_state_of(*inspect, &st);
    snprintf(buf, size, "%s", st.status[0] ? st.status : "unknown");
    return buf;
}

/* {mode, enforced, enforcedBy}: whether the container's GPU limits hold
 * (docs/gpus.md, "What is enforced"), read from the container itself. */
static json_t *replicaset_gpu_limits(app *a, const replicaset_record *r, const json_t *inspect)
{
    const char *mode = replicaset_record_gpu_mode(r);
    bool whole = strcmp(mode, "whole") == 0, none = strcmp(mode, "none") == 0;
    const char *by = none ? NULL : replicaset_gpu_enforced_by(a, r, inspect);
    bool enforced = whole || none || by != NULL;
    by = whole ? "exclusive cards" : by;
    json_t *limits =
        json_pack("{s:s, s:b, s:s?}", "mode", mode, "enforced", enforced, "enforcedBy", by);
    /* The compute share the limiter's limits file gives each card
     * (gpuCores, or an equal one for time-slice replicas): only when there
     * is one and gpubox's limiter holds it. */
    bool limiter = by && strcmp(by, "gpubox") == 0;
    int cores = limiter ? replicaset_cuda_card_cores(a, r, 0) : 0;
    if (limits && cores)
        json_object_set_new(limits, "cores", json_integer(cores));
    return limits;
}

static json_t *replicaset_summary(const replicaset_record *r, const char *status)
{
    json_t *j = json_pack(
        "{s:s, s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:s}", "name", r->name, "version",
        r->version, "state", replicaset_state_name(r->state), "status", status, "containerName",
        r->container_name, "gpus", replicaset_record_gpus_json(r), "gpuShares",
        replicaset_record_gpu_shares_json(r), "ports", replicaset_record_ports_json(r),
        "createTime", r->create_time, "updateTime", r->update_time, "owner", r->owner);
    if (j) {
        json_object_set_new(j, "cpuset", replicaset_record_cpuset_json(r)); /* docs/cpus.md */
        json_object_set_new(j, "gpuCores", replicaset_record_gpu_cores_json(r));
    }
    return j;
}

/* The summary with the set's web services and their URLs (services.h);
 * a NULL: another node's records, read from the store (their URLs are that
 * node's to say: null). */
static json_t *replicaset_summary_of(app *a, const replicaset_record *r, const char *status)
{
    json_t *j = replicaset_summary(r, status);
    if (j)
        json_object_set_new(
            j, "services",
            replicaset_services_answer(a ? &a->cfg : NULL, r->name, r->owner, r->services));
    return j;
}

/* Docker's status of every gpubox container, by container name: the
 * container cache's (container_watch.h) when it can be trusted, else
 * Docker's list asked now. */
static json_t *replicaset_docker_states(app *a, bool *docker_ok, bool *cached)
{
    json_t *states = NULL;
    *cached = container_watch_states(a, &states) == 0;
    if (*cached) {
        *docker_ok = true;
        return states;
    }
    _cleanup_(docker_container_briefs_free) docker_container_briefs list = {0};
    gb_err e = GB_ERR_INIT;
    states = json_object();
    *docker_ok =
        docker_container_list_briefs(a->docker, DOCKER_LABEL_REPLICASET, NULL, &list, &e) == 0;
    for (size_t i = 0; i < list.n; i++)
        if (list.items[i].name && list.items[i].status)
            json_object_set_new(states, list.items[i].name, json_string(list.items[i].status));
    return states;
}

/* "NVIDIA A100-SXM4-80GB", the model of r's cards as the inventory names it
 * ("NVIDIA T4, NVIDIA L4" when they differ);
 * NULL without cards or without the inventory that knows them. */
static json_t *replicaset_gpu_model(const app *a, const replicaset_record *r)
{
    char buf[256] = "";
    const char *seen[16];
    size_t nseen = 0;
    for (size_t i = 0; a && i < r->ngpus; i++)
        for (size_t k = 0; k < a->gpus.n; k++) {
            const char *model = a->gpus.devices[k].model;
            if (strcmp(a->gpus.devices[k].uuid, r->gpus[i]) != 0 || !model[0])
                continue;
            bool dup = false;
            for (size_t j = 0; j < nseen && !dup; j++)
                dup = strcmp(seen[j], model) == 0;
            if (dup || nseen == ARRAY_SIZE(seen))
                continue;
            seen[nseen++] = model;
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", buf[0] ? ", " : "",
                     model);
        }
    return buf[0] ? json_string(buf) : json_null();
}

/* A queued set's queue fields (record.h), with its position and why now
 * from the queue (app_hooks.queue_status); a set dropped from the queue
 * keeps them too, saying why. */
static void replicaset_queue_json(app *a, const replicaset_record *r, json_t *item)
{
    if (!r->queue)
        return;
    json_t *q = json_deep_copy(r->queue);
    json_t *now = a && a->hooks.queue_status && r->state == RS_STATE_QUEUED
                      ? a->hooks.queue_status(a, r->name)
                      : NULL;
    if (now)
        json_object_update(q, now);
    json_decref(now);
    json_object_set_new(item, "queue", q);
}

/* What a list item carries beside the summary (docs/api.md): the image,
 * the cards' model, the live usage and the ssh command; a is NULL for
 * another node's records (no inventory, no usage). */
static void replicaset_list_extras(app *a, const replicaset_record *r, json_t *item)
{
    json_object_set_new(item, "image", json_string(r->spec.image ? r->spec.image : ""));
    json_object_set_new(item, "cardModel", replicaset_gpu_model(a, r));
    json_t *usage = a && a->hooks.set_usage ? a->hooks.set_usage(a, r) : NULL;
    json_object_set_new(item, "usage", usage ? usage : json_null());
    _cleanup_free_ char *ssh = a ? replicaset_ssh_command(a, r) : NULL;
    json_object_set_new(item, "sshCommand", ssh ? json_string(ssh) : json_null());
    replicaset_queue_json(a, r, item);
}

struct replicaset_list_ctx {
    app *a; /* NULL: another node's records */
    bool include_deleted;
    bool docker_ok;
    bool cached;    /* states is the container cache's */
    json_t *states; /* Docker's status by container name */
    json_t *list;
};

static int replicaset_list_one(void *ctx, replicaset_record *r, gb_err *err)
{
    struct replicaset_list_ctx *l = ctx;
    (void)err;
    if ((r->state == RS_STATE_DELETED && !l->include_deleted) ||
        replicaset_record_is_tombstone(r) || !users_caller_sees(r->owner))
        return 0;
    if (l->a && move_out_left(l->a, r))
        return 0; /* the target's now: its old copy here is being removed */
    const char *status = json_string_value(json_object_get(l->states, r->container_name));
    char buf[32];
    if (r->state != RS_STATE_DELETED && l->cached &&
        container_watch_recent(l->a, r->container_name, r->container_id)) {
        /* gpuboxd changed it a moment ago: its event may still be on its
         * way, so Docker is asked. */
        _cleanup_json_ json_t *inspect = NULL;
        const char *now = replicaset_container_inspect(l->a, r, &inspect, buf, sizeof(buf));
        if (strcmp(now, "unknown") != 0)
            status = now;
    }
    if (r->state == RS_STATE_DELETED || r->state == RS_STATE_QUEUED)
        status = replicaset_state_name(r->state);
    else if (!status)
        status = l->docker_ok ? "missing" : "unknown";
    json_t *item = replicaset_summary_of(l->a, r, status);
    replicaset_list_extras(l->a, r, item);
    json_array_append_new(l->list, item);
    return 0;
}

int replicaset_list(app *a, bool include_deleted, json_t **out, gb_err *err)
{
    struct replicaset_list_ctx l = {.a = a, .include_deleted = include_deleted};
    _cleanup_json_ json_t *states = l.states = replicaset_docker_states(a, &l.docker_ok, &l.cached);
    _cleanup_json_ json_t *list = l.list = json_array();
    if (replicaset_records_each(a->store, replicaset_list_one, &l, err) < 0)
        return err_prefix(err, "listing replica sets");
    *out = json_pack("{s:O}", "replicaSets", list);
    return 0;
}

int replicaset_list_offline(store *s, bool include_deleted, json_t **out, gb_err *err)
{
    struct replicaset_list_ctx l = {.include_deleted = include_deleted, .docker_ok = false};
    _cleanup_json_ json_t *states = l.states = json_object();
    _cleanup_json_ json_t *list = l.list = json_array();
    if (replicaset_records_each(s, replicaset_list_one, &l, err) < 0)
        return err_prefix(err, "listing replica sets");
    *out = json_incref(list);
    return 0;
}

int replicaset_record_load_named(app *a, const char *name, replicaset_record *r, gb_err *err)
{
    if (name_check_replicaset(name, err) < 0)
        return -1;
    int found = replicaset_record_load_visible(a->store, name, r, err);
    if (found < 0)
        return err_prefix(err, "reading replica set '%s'", name);
    if (!found || replicaset_record_is_tombstone(r))
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    return 0;
}

int replicaset_info(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_record_load_named(a, name, &r, err) < 0)
        return -1;
    char buf[32];
    _cleanup_json_ json_t *inspect = NULL;
    json_t *info = replicaset_summary_of(
        a, &r, replicaset_container_inspect(a, &r, &inspect, buf, sizeof(buf)));
    json_object_set_new(info, "containerId", json_string(r.container_id));
    json_object_set_new(info, "spec", replicaset_spec_to_json(&r.spec));
    json_object_set_new(info, "gpuLimits", replicaset_gpu_limits(a, &r, inspect));
    json_object_set_new(info, "ssh", replicaset_ssh_info(a, &r));
    /* The run limits beside the spec: they belong to the set, not to a
     * version (replicaset/record.h). */
    replicaset_record_limits_json(&r, info);
    if (r.gpus_aside)
        json_object_set_new(info, "gpusAside", json_deep_copy(r.gpus_aside));
    /* A change made while stopped: the spec its next start applies. */
    json_object_set_new(info, "pending", json_boolean(r.pending_spec != NULL));
    if (r.pending_spec)
        json_object_set_new(info, "pendingSpec", json_deep_copy(r.pending_spec));
    replicaset_queue_json(a, &r, info);
    json_t *usage = a->hooks.set_usage ? a->hooks.set_usage(a, &r) : NULL;
    json_object_set_new(info, "usage", usage ? usage : json_null());
    /* What the set takes on this node's data disk beside its containers:
     * its old versions' kept logs (logs.c), bounded by --kept-logs-mib. */
    json_object_set_new(info, "keptLogsBytes",
                        json_integer((json_int_t)replicaset_logs_kept_bytes(a, name)));
    if (r.operation[0])
        json_object_set_new(info, "operation", json_string(r.operation));
    /* gpu-docker-api's record of the version beside gpubox's fields; its
     * router answers it as "Info", its API description as "info". */
    json_t *compat = replicaset_compat_version(a, &r, inspect);
    if (compat)
        json_object_update_missing(info, compat);
    *out = json_pack("{s:o, s:o*}", "info", info, "Info", compat);
    return 0;
}

int replicaset_history(app *a, const char *name, json_t **out, gb_err *err)
{
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    int found = replicaset_record_load_visible(a->store, name, &r, err);
    if (found < 0)
        return err_prefix(err, "reading the history of %s", name);
    if (!found && users_caller_is_user())
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    /* The current version's container shows what Docker filled in of its
     * configuration; older versions' containers are gone. */
    char buf[32];
    _cleanup_json_ json_t *inspect = NULL;
    if (found)
        replicaset_container_inspect(a, &r, &inspect, buf, sizeof(buf));
    char prefix[STORE_KEY_MAX];
    keys_replicaset_history_prefix(prefix, sizeof(prefix), name);
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0)
        return err_prefix(err, "reading the history of %s", name);
    if (kvs.n == 0)
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    json_t *history = json_array();
    /* Keys sort by zero-padded version: walk backwards for newest first. */
    for (size_t i = kvs.n; i-- > 0;) {
        json_t *entry = json_loads(kvs.items[i].value, 0, NULL);
        if (!entry)
            continue;
        json_t *version = json_object_get(entry, "version");
        bool current = found && json_integer_value(version) == r.version;
        json_t *status = replicaset_compat_history_status(a, name, entry, current ? inspect : NULL);
        if (status)
            json_object_set_new(entry, "status", status);
        json_array_append_new(history, entry);
    }
    *out = json_pack("{s:o}", "history", history);
    return 0;
}

int replicaset_resolve_name(app *a, const char *name_or_container, char *base, gb_err *err)
{
    if (name_check_replicaset(name_or_container, NULL) == 0) {
        snprintf(base, NAME_MAX_LEN + 1, "%s", name_or_container);
        return 0;
    }
    int version = 0;
    if (name_split_versioned(name_or_container, base, &version) == 0) {
        /* "foo-N" names a container: only the current version's exists. */
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        int found = replicaset_record_load_visible(a->store, base, &r, err);
        if (found < 0)
            return -1;
        if (found && r.version == version && r.state != RS_STATE_DELETED)
            return 0;
        if (found)
            return err_set(err, ERR_NOT_FOUND,
                           "no container named '%.80s'; replica set '%s' is %s at version %d (%s)",
                           name_or_container, base, replicaset_state_name(r.state), r.version,
                           r.container_name);
    }
    return err_set(err, ERR_NOT_FOUND, "no replica set or container named '%.80s'",
                   name_or_container);
}
