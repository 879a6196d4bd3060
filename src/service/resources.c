/*
 * resources.c - what GPUs and host ports exist and which are held.
 *
 * These answers come from memory only (the inventory read at start-up and
 * the pools, which mirror the store), so a monitoring loop polling them
 * costs neither a store read nor a Docker call.
 */
#include "util/xalloc.h"
#include "service/service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/gpus.h"
#include "service/cores.h"
#include "service/monitor/monitor.h"
#include "service/replicaset/record.h"
#include "service/users/caller.h"
#include "util/cleanup.h"

/* The GPU answer's serialized data, and the pool snapshot it was built
 * from. Monitors poll this route; comparing a snapshot costs far less than
 * building and serializing the JSON again, so it is rebuilt only when the
 * snapshot differs. */
struct resources_cache {
    pthread_mutex_t lock;
    gpus_status snapshot;
    uint64_t usage_generation; /* monitor_generation() of the snapshot */
    char *text;
    size_t len;
};

/* Whether the memory limits of a device's tenants are enforced in their
 * containers: whole cards (and free ones) need nothing; shares only with
 * gpubox's CUDA limiter or HAMi-core (docs/gpus.md, "What is enforced"). */
static bool resources_enforced(const app *a, const gpus_device_status *st)
{
    bool share = st->mode == GPUS_MODE_MEMORY || st->mode == GPUS_MODE_TIMESLICE;
    return !share || (a->cfg.hami_core && *a->cfg.hami_core) ||
           (a->cfg.cuda_limiter && *a->cfg.cuda_limiter);
}

/* {name, memoryMiB, replica (time-slice only)} for each tenant. */
static json_t *resources_allocations(const gpus_device_status *st)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < st->ntenants; i++) {
        const gpus_tenant *t = &st->tenants[i];
        json_t *e =
            json_pack("{s:s, s:I}", "name", t->owner, "memoryMiB", (json_int_t)t->memory_mib);
        if (e && t->replica >= 0)
            json_object_set_new(e, "replica", json_integer(t->replica));
        json_array_append_new(list, e);
    }
    return list;
}

/* One device. "tenants" stays the list of names it always was; the
 * sharing details are the fields after "healthy". */
static json_t *resources_device(app *a, const gpus_device_status *st)
{
    const gpu_device *d = &st->device;
    json_t *tenants = json_array();
    for (size_t i = 0; tenants && i < st->ntenants; i++)
        json_array_append_new(tenants, json_string(st->tenants[i].owner));
    json_t *j = json_pack(
        "{s:s, s:i, s:s, s:I, s:I, s:o, s:s, s:b, s:I, s:I, s:o, s:{s:i, s:i}, "
        "s:i, s:b, s:b, s:b}",
        "uuid", d->uuid, "index", d->index, "model", d->model, "memoryMiB",
        (json_int_t)d->memory_mib, "allocatedMemoryMiB", (json_int_t)st->allocated_memory_mib,
        "tenants", tenants, "mode", gpus_mode_name(st->mode), "healthy", d->healthy, "capacityMiB",
        (json_int_t)st->capacity_mib, "freeMemoryMiB", (json_int_t)st->free_memory_mib,
        "allocations", resources_allocations(st), "replicas", "total", (int)st->replicas_total,
        "used", (int)st->replicas_used, "maxTenants", (int)st->max_tenants, "excluded",
        st->excluded, "shareable", st->shareable, "enforced", resources_enforced(a, st));
    /* Live usage and run-time health (service/monitor/monitor.h). */
    if (j)
        monitor_device_json(a, d->uuid, j);
    return j;
}

/* {uuid: 0|1} from a snapshot; 1 when anyone holds the device. */
static json_t *resources_gpu_map(const gpus_status *st)
{
    json_t *map = json_object();
    for (size_t i = 0; map && i < st->n; i++)
        json_object_set_new(map, st->devices[i].device.uuid,
                            json_integer(st->devices[i].ntenants > 0));
    return map;
}

static int resources_gpus_from(app *a, const gpus_status *st, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *devices = json_array();
    for (size_t i = 0; devices && i < st->n; i++)
        if (json_array_append_new(devices, resources_device(a, &st->devices[i])) < 0)
            return err_set(err, ERR_INTERNAL, "out of memory");
    /* HAMi-core, when named, is used instead of gpubox's CUDA limiter. */
    bool hami = a->cfg.hami_core && *a->cfg.hami_core;
    bool limiter = !hami && a->cfg.cuda_limiter && *a->cfg.cuda_limiter;
    *out = json_pack("{s:o, s:O, s:b, s:s, s:{s:b, s:s?}}", "gpus", resources_gpu_map(st),
                     "devices", devices, "simulated", a->gpus.simulated, "source", a->gpus.source,
                     "sharing", "enforced", hami || limiter, "enforcedBy",
                     hami      ? "HAMi-core"
                     : limiter ? "gpubox"
                               : NULL);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

int resources_gpus(app *a, json_t **out, gb_err *err)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    gpus_pool_status(a->gpu_pool, &st);
    return resources_gpus_from(a, &st, out, err);
}

/* Same answer iff every field the JSON shows is the same: the device's
 * health and mode, the totals, and each tenant's name, memory and replica
 * (a share that grows in place changes only its memory). */
static bool resources_same_device(const gpus_device_status *p, const gpus_device_status *q)
{
    if (strcmp(p->device.uuid, q->device.uuid) || p->device.healthy != q->device.healthy ||
        p->mode != q->mode || p->allocated_memory_mib != q->allocated_memory_mib ||
        p->free_memory_mib != q->free_memory_mib || p->capacity_mib != q->capacity_mib ||
        p->replicas_total != q->replicas_total || p->replicas_used != q->replicas_used ||
        p->max_tenants != q->max_tenants || p->excluded != q->excluded ||
        p->shareable != q->shareable || p->ntenants != q->ntenants ||
        p->foreign_memory_mib != q->foreign_memory_mib)
        return false;
    for (size_t t = 0; t < p->ntenants; t++)
        if (strcmp(p->tenants[t].owner, q->tenants[t].owner) ||
            p->tenants[t].memory_mib != q->tenants[t].memory_mib ||
            p->tenants[t].replica != q->tenants[t].replica)
            return false;
    return true;
}

static bool resources_same(const gpus_status *x, const gpus_status *y)
{
    if (x->n != y->n)
        return false;
    for (size_t i = 0; i < x->n; i++)
        if (!resources_same_device(&x->devices[i], &y->devices[i]))
            return false;
    return true;
}

resources_cache *resources_cache_new(void)
{
    resources_cache *c = xcalloc(1, sizeof(*c));
    if (c)
        pthread_mutex_init(&c->lock, NULL);
    return c;
}

void resources_cache_free(resources_cache *c)
{
    if (!c)
        return;
    gpus_status_free(&c->snapshot);
    free(c->text);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Keep the caller's own sets by name (replicaset_record_fn). */
static int resources_own_one(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    if (users_caller_sees(r->owner))
        json_object_set_new(ctx, r->name, json_true());
    return 0;
}

/* The name of a tenant the caller may not see becomes RESOURCES_OTHER. */
#define RESOURCES_OTHER "(other)"
static void resources_redact(gpus_status *st, const json_t *own)
{
    for (size_t i = 0; i < st->n; i++)
        for (size_t t = 0; t < st->devices[i].ntenants; t++) {
            gpus_tenant *tn = &st->devices[i].tenants[t];
            if (!json_object_get(own, tn->owner))
                snprintf(tn->owner, sizeof(tn->owner), RESOURCES_OTHER);
        }
}

/* A user's view (users/caller.h): the cards as everyone sees them, other
 * users' sets unnamed. Not cached: it depends on who asks. */
static int resources_gpus_text_for_user(app *a, char **out, size_t *len, gb_err *err)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    gpus_pool_status(a->gpu_pool, &st);
    _cleanup_json_ json_t *own = json_object();
    if (replicaset_records_each(a->store, resources_own_one, own, err) < 0)
        return err_prefix(err, "listing the GPUs' tenants");
    resources_redact(&st, own);
    _cleanup_json_ json_t *data = NULL;
    if (resources_gpus_from(a, &st, &data, err) < 0)
        return -1;
    *out = json_dumps(data, JSON_COMPACT);
    *len = strlen(*out);
    return 0;
}

int resources_gpus_text(app *a, char **out, size_t *len, gb_err *err)
{
    if (users_caller_is_user())
        return resources_gpus_text_for_user(a, out, len, err);
    resources_cache *c = a->gpus_cache;
    _cleanup_(gpus_status_free) gpus_status st = {0};
    uint64_t usage = monitor_generation(a);
    gpus_pool_status(a->gpu_pool, &st);
    pthread_mutex_lock(&c->lock);
    if (c->text && usage == c->usage_generation && resources_same(&c->snapshot, &st)) {
        *out = xmalloc(c->len + 1);
        memcpy(*out, c->text, c->len + 1);
        *len = c->len;
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    pthread_mutex_unlock(&c->lock);

    _cleanup_json_ json_t *data = NULL;
    if (resources_gpus_from(a, &st, &data, err) < 0)
        return -1;
    _cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
    _cleanup_free_ char *copy = xstrdup(text);
    pthread_mutex_lock(&c->lock);
    gpus_status_free(&c->snapshot);
    free(c->text);
    c->snapshot = st;
    c->usage_generation = usage;
    st = (gpus_status){0}; /* the cache owns it now */
    c->len = strlen(text);
    c->text = steal_ptr(&text);
    pthread_mutex_unlock(&c->lock);
    *len = strlen(copy);
    *out = steal_ptr(&copy);
    return 0;
}

int resources_gpu_clear_health(app *a, const char *uuid, json_t **out, gb_err *err)
{
    if (monitor_clear_health(a, uuid, err) < 0)
        return -1;
    _cleanup_json_ json_t *all = NULL;
    if (resources_gpus(a, &all, err) < 0)
        return -1;
    json_t *devices = json_object_get(all, "devices");
    for (size_t i = 0; i < json_array_size(devices); i++) {
        json_t *d = json_array_get(devices, i);
        if (strcmp(json_string_value(json_object_get(d, "uuid")) ?: "", uuid) == 0) {
            *out = json_incref(d);
            return 0;
        }
    }
    return err_set(err, ERR_INTERNAL, "GPU %s is missing from the answer", uuid);
}

int resources_gpu_status(app *a, json_t **out, gb_err *err)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    gpus_pool_status(a->gpu_pool, &st);
    *out = json_pack("{s:o}", "gpuStatus", resources_gpu_map(&st));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

int resources_cpus(app *a, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *data = cores_resources_json(a);
    if (!data)
        return err_set(err, ERR_INTERNAL, "out of memory");
    if (users_caller_is_user()) {
        /* Other users' sets stay unnamed, as on GET /resources/gpus. */
        _cleanup_json_ json_t *own = json_object();
        if (replicaset_records_each(a->store, resources_own_one, own, err) < 0)
            return err_prefix(err, "listing the CPUs' holders");
        size_t i;
        json_t *cpu;
        json_array_foreach(json_object_get(data, "cpus"), i, cpu)
        {
            const char *o = json_string_value(json_object_get(cpu, "owner"));
            if (o && !json_object_get(own, o))
                json_object_set_new(cpu, "owner", json_string(RESOURCES_OTHER));
        }
    }
    *out = steal_ptr(&data);
    return 0;
}

int resources_ports(app *a, json_t **out, gb_err *err)
{
    _cleanup_free_ uint16_t *used = NULL;
    size_t n = 0;
    ports_pool_used(a->ports, &used, &n);
    _cleanup_json_ json_t *list = json_array();
    _cleanup_json_ json_t *set = json_object();
    for (size_t i = 0; list && set && i < n; i++) {
        char port[8];
        snprintf(port, sizeof(port), "%u", (unsigned)used[i]);
        json_array_append_new(list, json_integer(used[i]));
        json_object_set_new(set, port, json_object());
    }
    int start = (int)ports_pool_start(a->ports), end = (int)ports_pool_end(a->ports);
    json_int_t available = (json_int_t)ports_pool_available(a->ports);
    /* gpu-docker-api's fields (StartPort, ..., UsedPortSet: an object whose
     * keys are the ports in use) beside gpubox's own. */
    *out = json_pack("{s:{s:i, s:i, s:I, s:O, s:i, s:i, s:I, s:O}}", "ports", "startPort", start,
                     "endPort", end, "availableCount", available, "usedPorts", list, "StartPort",
                     start, "EndPort", end, "AvailableCount", available, "UsedPortSet", set);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
