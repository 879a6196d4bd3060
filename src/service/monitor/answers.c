/*
 * answers.c - the last reading as the API and /metrics show it
 * (docs/usage.md has every field). Each answer copies what it needs under
 * the monitor's lock and builds JSON or text after.
 */
#include "service/monitor/internal.h"

#include <stdio.h>
#include <string.h>

#include "service/replicaset/record.h"
#include "util/prom.h"

#define MIB (1024.0 * 1024.0)

static json_t *monitor_card_usage_json(const struct monitor *m, const struct monitor_card *c)
{
    return json_pack("{s:I, s:i, s:I, s:i, s:s}", "memoryUsedMiB", (json_int_t)c->used_mib,
                     "utilization", c->util, "foreignMemoryMiB", (json_int_t)c->foreign_mib,
                     "processes", (int)c->nprocs, "sampledAt", m->sampled_at);
}

static json_t *monitor_mark_json(const struct monitor_mark *mk)
{
    json_t *j = json_pack("{s:s, s:s, s:s}", "reason", mk->reason, "since", mk->since, "detail",
                          mk->detail);
    if (j && strcmp(mk->reason, "xid") == 0)
        json_object_set_new(j, "xid", json_integer((json_int_t)mk->xid));
    return j;
}

/* The set's use of device dev, or NULL. */
static const struct monitor_use *monitor_use_of(const struct monitor *m, const char *set,
                                                size_t dev)
{
    for (size_t i = 0; i < m->nsets; i++) {
        if (strcmp(m->sets[i].name, set) != 0)
            continue;
        for (size_t k = 0; k < m->sets[i].nuses; k++)
            if (m->sets[i].uses[k].dev == dev)
                return &m->sets[i].uses[k];
    }
    return NULL;
}

void monitor_device_json(app *a, const char *uuid, json_t *device)
{
    struct monitor *m = a->monitor;
    long dev = monitor_device_index(a, uuid);
    if (!m || dev < 0)
        return;
    pthread_mutex_lock(&m->lock);
    const struct monitor_card *c = &m->cards[dev];
    json_object_set_new(device, "usage", c->sampled ? monitor_card_usage_json(m, c) : json_null());
    if (m->marks[dev].marked) {
        json_object_set_new(device, "unhealthy", monitor_mark_json(&m->marks[dev]));
        json_object_set_new(device, "healthy", json_false());
    }
    json_t *allocs = json_object_get(device, "allocations");
    for (size_t i = 0; c->sampled && i < json_array_size(allocs); i++) {
        json_t *al = json_array_get(allocs, i);
        const struct monitor_use *u =
            monitor_use_of(m, json_string_value(json_object_get(al, "name")) ?: "", (size_t)dev);
        json_object_set_new(al, "memoryUsedMiB", json_integer(u ? (json_int_t)u->used_mib : 0));
        json_object_set_new(al, "utilization", json_integer(u ? u->util : -1));
    }
    pthread_mutex_unlock(&m->lock);
}

json_t *monitor_set_json(app *a, const replicaset_record *r)
{
    struct monitor *m = a->monitor;
    if (!m)
        return NULL;
    json_t *out = NULL;
    pthread_mutex_lock(&m->lock);
    const struct monitor_set *s = NULL;
    for (size_t i = 0; i < m->nsets && !s; i++)
        if (strcmp(m->sets[i].name, r->name) == 0 &&
            strcmp(m->sets[i].container_id, r->container_id) == 0)
            s = &m->sets[i];
    if (s && m->sampled_at[0]) {
        json_t *cards = json_array();
        int busiest = -1; /* the busiest card's utilization; -1: none known */
        uint64_t used = 0;
        for (size_t k = 0; k < s->nuses; k++) {
            const struct monitor_use *u = &s->uses[k];
            const gpu_device *d = &a->gpus.devices[u->dev];
            busiest = u->util > busiest ? u->util : busiest;
            used += u->used_mib;
            json_array_append_new(
                cards, json_pack("{s:s, s:i, s:I, s:i, s:I, s:b, s:b}", "uuid", u->uuid, "index",
                                 d->index, "memoryUsedMiB", (json_int_t)u->used_mib, "utilization",
                                 u->util, "shareMiB", (json_int_t)u->share_mib, "overShare",
                                 u->used_mib > u->share_mib, "healthy",
                                 d->healthy && !m->marks[u->dev].marked));
        }
        char since[TIME_ISO_MAX] = "";
        if (s->idle_since)
            time_iso_format(s->idle_since, since, sizeof(since));
        out = json_pack("{s:s, s:s?, s:o, s:i, s:I}", "sampledAt", m->sampled_at, "idleSince",
                        since[0] ? since : NULL, "cards", cards, "utilization", busiest,
                        "memoryUsedMiB", (json_int_t)used);
    }
    pthread_mutex_unlock(&m->lock);
    return out;
}

static void monitor_card_labels(const gpu_device *d, char *index, size_t size, const char **values)
{
    snprintf(index, size, "%d", d->index);
    values[0] = d->uuid;
    values[1] = index;
    values[2] = d->model;
    values[3] = NULL;
}

/* Per card: memory used, utilization, foreign memory, health. */
static void monitor_metrics_cards(app *a, FILE *out)
{
    struct monitor *m = a->monitor;
    static const char *const labels[] = {"uuid", "index", "model", NULL};
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"gpubox_gpu_memory_used_bytes", "Memory in use on the card, by every process"},
        {"gpubox_gpu_utilization_ratio", "The card's utilization (0 to 1) in the last reading"},
        {"gpubox_gpu_foreign_memory_bytes",
         "Memory used on the card by processes in no replica set holding it"},
        {"gpubox_gpu_healthy", "1 when the card is healthy, 0 when it is marked unhealthy (a "
                               "critical XID, or it stopped answering)"},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        prom_write_header(out, fam[f].name, "gauge", fam[f].help);
        for (size_t i = 0; i < m->ncards; i++) {
            const struct monitor_card *c = &m->cards[i];
            const gpu_device *d = &a->gpus.devices[i];
            char index[16];
            const char *values[4];
            monitor_card_labels(d, index, sizeof(index), values);
            double v;
            if (f == 3)
                v = d->healthy && !m->marks[i].marked;
            else if (!c->sampled || (f == 1 && c->util < 0))
                continue;
            else
                v = f == 0   ? (double)c->used_mib * MIB
                    : f == 1 ? c->util / 100.0
                             : (double)c->foreign_mib * MIB;
            prom_write_sample(out, fam[f].name, labels, values, v);
        }
    }
}

/* Per set and card: memory used, utilization, what it holds; per set: idle seconds. */
static void monitor_metrics_sets(app *a, FILE *out, time_t now)
{
    struct monitor *m = a->monitor;
    static const char *const labels[] = {"set", "owner", "uuid", "index", NULL};
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"gpubox_instance_gpu_memory_used_bytes",
         "Memory the replica set's processes use on the card"},
        {"gpubox_instance_gpu_utilization_ratio",
         "The replica set's utilization of the card (0 to 1): its processes' samples, or the "
         "card's when the driver keeps none"},
        {"gpubox_instance_gpu_share_bytes", "Memory the replica set holds on the card (a whole "
                                            "card: all of it)"},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        prom_write_header(out, fam[f].name, "gauge", fam[f].help);
        for (size_t i = 0; i < m->nsets; i++) {
            const struct monitor_set *s = &m->sets[i];
            for (size_t k = 0; k < s->nuses; k++) {
                const struct monitor_use *u = &s->uses[k];
                if (f < 2 && !m->cards[u->dev].sampled)
                    continue;
                if (f == 1 && u->util < 0)
                    continue;
                char index[16];
                snprintf(index, sizeof(index), "%d", a->gpus.devices[u->dev].index);
                const char *values[] = {s->name, s->owner, u->uuid, index, NULL};
                double v = f == 0   ? (double)u->used_mib * MIB
                           : f == 1 ? u->util / 100.0
                                    : (double)u->share_mib * MIB;
                prom_write_sample(out, fam[f].name, labels, values, v);
            }
        }
    }
    prom_write_header(out, "gpubox_instance_gpu_share_overrun", "gauge",
                      "1 when the replica set's processes use more than its memory share on the "
                      "card in the last reading (shares and time-slice replicas only)");
    for (size_t i = 0; i < m->nsets; i++) {
        const struct monitor_set *s = &m->sets[i];
        for (size_t k = 0; k < s->nuses; k++) {
            const struct monitor_use *u = &s->uses[k];
            if (!u->share || !m->cards[u->dev].sampled)
                continue;
            char index[16];
            snprintf(index, sizeof(index), "%d", a->gpus.devices[u->dev].index);
            const char *values[] = {s->name, s->owner, u->uuid, index, NULL};
            prom_write_sample(out, "gpubox_instance_gpu_share_overrun", labels, values,
                              u->used_mib > u->share_mib);
        }
    }
    static const char *const set_labels[] = {"set", "owner", NULL};
    prom_write_header(out, "gpubox_instance_idle_seconds", "gauge",
                      "How long the replica set has been idle (0 when busy)");
    for (size_t i = 0; m->sampled_at[0] && i < m->nsets; i++) {
        const struct monitor_set *s = &m->sets[i];
        const char *values[] = {s->name, s->owner, NULL};
        prom_write_sample(out, "gpubox_instance_idle_seconds", set_labels, values,
                          s->idle_since && now > s->idle_since ? (double)(now - s->idle_since) : 0);
    }
}

void monitor_metrics(app *a, FILE *out)
{
    struct monitor *m = a->monitor;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    monitor_metrics_cards(a, out);
    monitor_metrics_sets(a, out, time(NULL));
    prom_write_header(out, "gpubox_usage_samples_total", "counter", "Readings of the GPUs taken");
    prom_write_sample(out, "gpubox_usage_samples_total", NULL, NULL, (double)m->samples);
    prom_write_header(out, "gpubox_usage_sample_seconds", "gauge",
                      "How long the last reading of the GPUs took");
    prom_write_sample(out, "gpubox_usage_sample_seconds", NULL, NULL, m->sample_seconds);
    pthread_mutex_unlock(&m->lock);
    prom_family_write(m->xid_events, out);
    prom_family_write(m->autostops, out);
    prom_family_write(m->overruns, out);
}
