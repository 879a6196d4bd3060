/*
 * resources.c - what GPUs and host ports exist and which are held.
 *
 * These answers come from memory only (the inventory read at start-up and
 * the pools, which mirror the store), so a monitoring loop polling them
 * costs neither a store read nor a Docker call.
 */
#include "service/service.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sched/gpus.h"
#include "util/cleanup.h"

/* The GPU answer's serialized data, and the pool snapshot it was built
 * from. Monitors poll this route; comparing a snapshot costs far less than
 * building and serializing the JSON again, so it is rebuilt only when the
 * snapshot differs. */
struct resources_cache {
    pthread_mutex_t lock;
    gpus_status snapshot;
    char *text;
    size_t len;
};

static json_t *resources_device(const gpus_device_status *st)
{
    const gpu_device *d = &st->device;
    json_t *tenants = json_array();
    for (size_t i = 0; tenants && i < st->ntenants; i++)
        json_array_append_new(tenants, json_string(st->tenants[i].owner));
    return json_pack("{s:s, s:i, s:s, s:I, s:I, s:o, s:s, s:b}", "uuid", d->uuid, "index", d->index,
                     "model", d->model, "memoryMiB", (json_int_t)d->memory_mib,
                     "allocatedMemoryMiB", (json_int_t)st->allocated_memory_mib, "tenants", tenants,
                     "mode", gpus_mode_name(st->mode), "healthy", d->healthy);
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
        if (json_array_append_new(devices, resources_device(&st->devices[i])) < 0)
            return err_set(err, ERR_INTERNAL, "out of memory");
    *out = json_pack("{s:o, s:O, s:b, s:s}", "gpus", resources_gpu_map(st), "devices", devices,
                     "simulated", a->gpus.simulated, "source", a->gpus.source);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

int resources_gpus(app *a, json_t **out, gb_err *err)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    if (gpus_pool_status(a->gpu_pool, &st, err) < 0)
        return -1;
    return resources_gpus_from(a, &st, out, err);
}

/* Same answer iff every field the JSON shows is the same. */
static bool resources_same(const gpus_status *x, const gpus_status *y)
{
    if (x->n != y->n)
        return false;
    for (size_t i = 0; i < x->n; i++) {
        const gpus_device_status *p = &x->devices[i], *q = &y->devices[i];
        if (strcmp(p->device.uuid, q->device.uuid) || p->device.healthy != q->device.healthy ||
            p->mode != q->mode || p->allocated_memory_mib != q->allocated_memory_mib ||
            p->ntenants != q->ntenants)
            return false;
        for (size_t t = 0; t < p->ntenants; t++)
            if (strcmp(p->tenants[t].owner, q->tenants[t].owner))
                return false;
    }
    return true;
}

resources_cache *resources_cache_new(void)
{
    resources_cache *c = calloc(1, sizeof(*c));
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

int resources_gpus_text(app *a, char **out, size_t *len, gb_err *err)
{
    resources_cache *c = a->gpus_cache;
    _cleanup_(gpus_status_free) gpus_status st = {0};
    if (gpus_pool_status(a->gpu_pool, &st, err) < 0)
        return -1;
    pthread_mutex_lock(&c->lock);
    if (c->text && resources_same(&c->snapshot, &st)) {
        *out = malloc(c->len + 1);
        if (*out) {
            memcpy(*out, c->text, c->len + 1);
            *len = c->len;
        }
        pthread_mutex_unlock(&c->lock);
        return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
    }
    pthread_mutex_unlock(&c->lock);

    _cleanup_json_ json_t *data = NULL;
    if (resources_gpus_from(a, &st, &data, err) < 0)
        return -1;
    _cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
    _cleanup_free_ char *copy = text ? strdup(text) : NULL;
    if (!copy)
        return err_set(err, ERR_INTERNAL, "out of memory");
    pthread_mutex_lock(&c->lock);
    gpus_status_free(&c->snapshot);
    free(c->text);
    c->snapshot = st;
    st = (gpus_status){0}; /* the cache owns it now */
    c->len = strlen(text);
    c->text = steal_ptr(&text);
    pthread_mutex_unlock(&c->lock);
    *len = strlen(copy);
    *out = steal_ptr(&copy);
    return 0;
}

int resources_gpu_status(app *a, json_t **out, gb_err *err)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    if (gpus_pool_status(a->gpu_pool, &st, err) < 0)
        return -1;
    *out = json_pack("{s:o}", "gpuStatus", resources_gpu_map(&st));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

int resources_ports(app *a, json_t **out, gb_err *err)
{
    _cleanup_free_ uint16_t *used = NULL;
    size_t n = 0;
    if (ports_pool_used(a->ports, &used, &n) < 0)
        return err_set(err, ERR_INTERNAL, "out of memory listing used ports");
    _cleanup_json_ json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        json_array_append_new(list, json_integer(used[i]));
    *out =
        json_pack("{s:{s:i, s:i, s:I, s:O}}", "ports", "startPort", (int)ports_pool_start(a->ports),
                  "endPort", (int)ports_pool_end(a->ports), "availableCount",
                  (json_int_t)ports_pool_available(a->ports), "usedPorts", list);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
