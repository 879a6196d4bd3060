/*
 * health.c - cards marked unhealthy at run time: by a critical XID or by
 * no longer answering. A mark is kept in the store (keys_health), so it
 * holds across restarts until an admin clears it: a card that fell off the
 * bus once is not trusted again on its own. The pool (sched/gpus.h) then
 * places nothing new on it; its tenants keep it and see the mark.
 */
#include "service/monitor/internal.h"

#include <stdio.h>
#include <string.h>

#include "sched/gpus.h"
#include "service/keys.h"
#include "service/records.h"
#include "service/users/caller.h"
#include "util/cleanup.h"
#include "util/log.h"

int monitor_health_load(app *a, gb_err *err)
{
    struct monitor *m = a->monitor;
    store_kvs kvs = {0};
    if (store_range(a->store, KEYS_HEALTH, &kvs, err) < 0)
        return err_prefix(err, "reading the cards' health marks");
    for (size_t i = 0; i < kvs.n; i++) {
        const char *uuid = kvs.items[i].key + strlen(KEYS_HEALTH);
        long dev = monitor_device_index(a, uuid);
        _cleanup_json_ json_t *v = json_loads(kvs.items[i].value, 0, NULL);
        if (dev < 0 || !json_is_object(v)) {
            log_warn("health mark %s: %s; left alone", kvs.items[i].key,
                     dev < 0 ? "no such card on this server" : "not JSON");
            continue;
        }
        struct monitor_mark *mk = &m->marks[dev];
        mk->marked = true;
        snprintf(mk->reason, sizeof(mk->reason), "%s",
                 json_string_value(json_object_get(v, "reason")) ?: "xid");
        mk->xid = (unsigned long long)json_integer_value(json_object_get(v, "xid"));
        snprintf(mk->since, sizeof(mk->since), "%s",
                 json_string_value(json_object_get(v, "since")) ?: "");
        snprintf(mk->detail, sizeof(mk->detail), "%s",
                 json_string_value(json_object_get(v, "detail")) ?: "");
        gpus_pool_set_health(a->gpu_pool, uuid, false);
        log_warn("GPU %s is marked unhealthy since %s (%s); clear it with PATCH "
                 "/api/v1/resources/gpus/%s/healthy once it is repaired",
                 uuid, mk->since, mk->detail, uuid);
    }
    store_kvs_free(&kvs);
    return 0;
}

void monitor_health_mark(app *a, size_t i, const char *reason, unsigned long long xid,
                         const char *detail)
{
    struct monitor *m = a->monitor;
    const char *uuid = a->gpus.devices[i].uuid;
    struct monitor_mark mk = {.marked = true, .xid = xid};
    snprintf(mk.reason, sizeof(mk.reason), "%s", reason);
    snprintf(mk.detail, sizeof(mk.detail), "%s", detail);
    time_iso_now(mk.since, sizeof(mk.since));
    pthread_mutex_lock(&m->lock);
    bool was = m->marks[i].marked;
    m->marks[i] = mk;
    m->generation++;
    pthread_mutex_unlock(&m->lock);
    gpus_pool_set_health(a->gpu_pool, uuid, false);

    char key[STORE_KEY_MAX];
    _cleanup_json_ json_t *v = json_pack("{s:s, s:I, s:s, s:s}", "reason", reason, "xid",
                                         (json_int_t)xid, "since", mk.since, "detail", detail);
    _cleanup_free_ char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    gb_err e = GB_ERR_INIT;
    if (!keys_health(key, sizeof(key), uuid) || !text ||
        store_put(a->store, key, text, NULL, &e) < 0)
        log_error("GPU %s: the unhealthy mark is not kept in the store (%s); it holds until "
                  "gpuboxd restarts",
                  uuid, e.msg[0] ? e.msg : "out of memory");
    log_warn("GPU %s (index %d) is unhealthy: %s; no new tenant is placed on it until an admin "
             "clears it (PATCH /api/v1/resources/gpus/%s/healthy)",
             uuid, a->gpus.devices[i].index, detail, uuid);
    if (!was)
        monitor_event(a, "gpu.unhealthy", NULL, NULL, uuid, reason, detail, "gpubox");
}

int monitor_clear_health(app *a, const char *uuid, gb_err *err)
{
    struct monitor *m = a->monitor;
    long dev = monitor_device_index(a, uuid);
    if (dev < 0 || !m)
        return err_set(err, ERR_NOT_FOUND,
                       "no GPU %.96s on this server (the list of GPUs shows its cards)", uuid);
    char key[STORE_KEY_MAX];
    if (!keys_health(key, sizeof(key), uuid))
        return err_set(err, ERR_INVALID_PARAMS, "GPU UUID is too long");
    if (store_delete(a->store, key, err) < 0)
        return err_prefix(err, "clearing GPU %s's unhealthy mark", uuid);
    pthread_mutex_lock(&m->lock);
    bool was = m->marks[dev].marked;
    memset(&m->marks[dev], 0, sizeof(m->marks[dev]));
    m->generation++;
    pthread_mutex_unlock(&m->lock);
    /* A card the inventory found unhealthy at start-up stays so. */
    if (a->gpus.devices[dev].healthy)
        gpus_pool_set_health(a->gpu_pool, uuid, true);
    log_info("audit: GPU %s cleared as healthy by %s%s", uuid, users_caller_owner(),
             was ? "" : " (it was not marked)");
    if (was)
        monitor_event(a, "gpu.healthy", NULL, NULL, uuid, "cleared", "an admin cleared the mark",
                      users_caller_owner());
    return 0;
}
