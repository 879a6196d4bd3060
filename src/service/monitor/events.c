/*
 * events.c - what gpubox did on its own or saw happen to the cards: a set
 * stopped by its run limits, a card marked unhealthy, a mark cleared. Each
 * is a store key (keys_event: time-ordered), so GET /api/v1/events lists
 * them across restarts; the newest MON_EVENTS_KEEP are kept.
 */
#include "service/monitor/internal.h"

#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

#define MON_EVENTS_KEEP 1000
#define MON_EVENTS_PRUNE_EVERY 64

/* Drop the oldest events beyond MON_EVENTS_KEEP. */
static void monitor_events_prune(app *a)
{
    store_kvs kvs = {0};
    gb_err e = GB_ERR_INIT;
    if (store_range(a->store, KEYS_EVENTS, &kvs, &e) < 0)
        return;
    for (size_t i = 0; kvs.n > MON_EVENTS_KEEP && i < kvs.n - MON_EVENTS_KEEP; i++)
        if (store_delete(a->store, kvs.items[i].key, &e) < 0)
            break;
    store_kvs_free(&kvs);
}

void monitor_event(app *a, const char *kind, const char *set, const char *owner, const char *gpu,
                   const char *reason, const char *detail, const char *by)
{
    struct monitor *m = a->monitor;
    char now[TIME_ISO_MAX], key[STORE_KEY_MAX];
    time_iso_now(now, sizeof(now));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    unsigned seq = __atomic_add_fetch(&m->event_seq, 1, __ATOMIC_RELAXED);
    _cleanup_json_ json_t *v =
        json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s, s:s, s:s}", "time", now, "kind", kind,
                  "replicaSet", set, "owner", owner && *owner ? owner : NULL, "gpu", gpu, "reason",
                  reason, "detail", detail ? detail : "", "by", by ? by : "gpubox");
    _cleanup_free_ char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    gb_err e = GB_ERR_INIT;
    if (!text || !keys_event(key, sizeof(key), ms, seq % 1000000) ||
        store_put(a->store, key, text, NULL, &e) < 0) {
        log_warn("event %s (%s) not kept: %s", kind, detail ? detail : "",
                 e.msg[0] ? e.msg : "out of memory");
        return;
    }
    if (seq % MON_EVENTS_PRUNE_EVERY == 0)
        monitor_events_prune(a);
}

int monitor_events(app *a, long limit, json_t **out, gb_err *err)
{
    if (limit <= 0 || limit > MON_EVENTS_KEEP)
        return err_set(err, ERR_INVALID_PARAMS, "limit is %ld; give 1 to %d", limit,
                       MON_EVENTS_KEEP);
    store_kvs kvs = {0};
    if (store_range(a->store, KEYS_EVENTS, &kvs, err) < 0)
        return err_prefix(err, "reading the events");
    json_t *list = json_array();
    /* A user sees the cards' events and their own sets', from when they
     * were made: an earlier user of their name's are not theirs. */
    const caller *c = users_caller_current();
    time_t born = users_caller_is_user() ? (time_t)(users_created_ms(a->users, c->name) / 1000) : 0;
    for (size_t i = kvs.n; i-- > 0 && json_array_size(list) < (size_t)limit;) {
        json_t *ev = json_loads(kvs.items[i].value, 0, NULL);
        const char *owner = json_string_value(json_object_get(ev, "owner"));
        bool theirs =
            users_caller_sees(owner ? owner : "") &&
            (!born || time_iso_parse(json_string_value(json_object_get(ev, "time"))) >= born);
        if (ev && (!json_object_get(ev, "replicaSet") || theirs))
            json_array_append_new(list, ev);
        else
            json_decref(ev);
    }
    store_kvs_free(&kvs);
    *out = json_pack("{s:o}", "events", list);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
