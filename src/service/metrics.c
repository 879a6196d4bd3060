/*
 * metrics.c - the application's metrics (see metrics.h): operation
 * counters kept in the app, and the gauges computed at scrape time from
 * the pools (memory only) and the store (replica-set records by state,
 * and a revision read as the health check).
 */
#include "util/xalloc.h"
#include "service/metrics.h"
#include "service/queue/queue.h"
#include "service/monitor/monitor.h"

#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "sched/gpus.h"
#include "service/keys.h"
#include "service/records.h"
#include "service/volumes/volumes.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/prom.h"
#include "util/time.h"

struct ops_metrics {
    prom_family *total;
    prom_family *duration;
};

/* Seconds: a stop takes Docker's stop timeout at most, a create or a
 * restart carrying a large system disk can take minutes. */
static const double ops_buckets[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

ops_metrics *ops_metrics_new(void)
{
    static const char *const total_labels[] = {"kind", "result", NULL};
    static const char *const dur_labels[] = {"kind", NULL};
    ops_metrics *m = xcalloc(1, sizeof(*m));
    m->total = prom_counter_new("gpubox_operations_total",
                                "Operations the services ran, by kind and result (ok, or the "
                                "error's name)",
                                total_labels);
    m->duration =
        prom_histogram_new("gpubox_operation_duration_seconds", "How long operations took, by kind",
                           dur_labels, ops_buckets, sizeof(ops_buckets) / sizeof(ops_buckets[0]));
    return m;
}

void ops_metrics_free(ops_metrics *m)
{
    if (!m)
        return;
    prom_family_free(m->total);
    prom_family_free(m->duration);
    free(m);
}

void ops_metrics_observe(ops_metrics *m, const char *kind, const char *result, double seconds)
{
    if (!m)
        return;
    const char *total_values[] = {kind, result};
    const char *dur_values[] = {kind};
    prom_counter_inc(m->total, total_values);
    prom_histogram_observe(m->duration, dur_values, seconds);
}

/* GPU gauges from the pool: totals and, per card, memory held and tenants. */
static void metrics_gpus(app *a, FILE *out)
{
    _cleanup_(gpus_status_free) gpus_status st = {0};
    gpus_pool_status(a->gpu_pool, &st);
    size_t held = 0;
    for (size_t i = 0; i < st.n; i++)
        held += st.devices[i].ntenants > 0;
    /* Not "gpubox_gpus_total": the suffix is for counters, and promtool
     * refuses it on a gauge. */
    prom_write_header(out, "gpubox_gpus", "gauge", "GPU devices gpubox schedules");
    prom_write_sample(out, "gpubox_gpus", NULL, NULL, (double)st.n);
    prom_write_header(out, "gpubox_gpus_allocated", "gauge",
                      "GPU devices held by at least one replica set (whole or shared)");
    prom_write_sample(out, "gpubox_gpus_allocated", NULL, NULL, (double)held);
    prom_write_header(out, "gpubox_gpus_free", "gauge", "GPU devices nobody holds");
    prom_write_sample(out, "gpubox_gpus_free", NULL, NULL, (double)(st.n - held));

    static const char *const labels[] = {"uuid", "index", "model", NULL};
    static const struct {
        const char *name, *help;
    } per_card[] = {
        {"gpubox_gpu_memory_mib", "The card's memory in MiB"},
        {"gpubox_gpu_memory_reserved_mib", "Memory held by the card's tenants in MiB"},
        {"gpubox_gpu_tenants", "Replica sets holding the card or a share of it"},
    };
    for (size_t k = 0; k < sizeof(per_card) / sizeof(per_card[0]); k++) {
        prom_write_header(out, per_card[k].name, "gauge", per_card[k].help);
        for (size_t i = 0; i < st.n; i++) {
            const gpus_device_status *d = &st.devices[i];
            char index[16];
            snprintf(index, sizeof(index), "%d", d->device.index);
            const char *values[] = {d->device.uuid, index, d->device.model};
            double v = k == 0   ? (double)d->device.memory_mib
                       : k == 1 ? (double)d->allocated_memory_mib
                                : (double)d->ntenants;
            prom_write_sample(out, per_card[k].name, labels, values, v);
        }
    }
}

static void metrics_ports(app *a, FILE *out)
{
    _cleanup_free_ uint16_t *used = NULL;
    size_t n = 0;
    ports_pool_used(a->ports, &used, &n);
    prom_write_header(out, "gpubox_ports_capacity", "gauge", "Host ports in the --port-range");
    prom_write_sample(out, "gpubox_ports_capacity", NULL, NULL,
                      (double)(ports_pool_end(a->ports) - ports_pool_start(a->ports) + 1));
    prom_write_header(out, "gpubox_ports_free", "gauge", "Host ports of the range nobody holds");
    prom_write_sample(out, "gpubox_ports_free", NULL, NULL, (double)ports_pool_available(a->ports));
    prom_write_header(out, "gpubox_ports_used", "gauge",
                      "Host ports held by replica sets (explicit ones outside the range too)");
    prom_write_sample(out, "gpubox_ports_used", NULL, NULL, (double)n);
}

static const char *const metrics_rs_states[] = {"creating", "running", "paused",
                                                "stopped",  "deleted", "queued"};

/* Count one record by its state (records_fn); ctx is the counts. */
static int metrics_rs_count(void *ctx, const char *key, json_t *value, int64_t mod_revision,
                            gb_err *err)
{
    double *count = ctx;
    (void)key, (void)mod_revision, (void)err;
    const char *state = json_string_value(json_object_get(value, "state"));
    for (size_t s = 0; state && s < ARRAY_SIZE(metrics_rs_states); s++)
        if (strcmp(state, metrics_rs_states[s]) == 0)
            count[s]++;
    return 0;
}

/* Replica sets by state, from their records; every state is shown, 0
 * included, so a dashboard's series never vanish. */
static int metrics_replicasets(app *a, FILE *out, gb_err *err)
{
    double count[ARRAY_SIZE(metrics_rs_states)] = {0};
    if (records_scan(a->store, KEYS_REPLICASETS, keys_is_replicaset_record, metrics_rs_count, count,
                     err) < 0)
        return err_prefix(err, "counting replica sets");
    static const char *const labels[] = {"state", NULL};
    prom_write_header(out, "gpubox_replicasets", "gauge", "Replica sets by gpubox state");
    for (size_t s = 0; s < ARRAY_SIZE(metrics_rs_states); s++) {
        const char *values[] = {metrics_rs_states[s]};
        prom_write_sample(out, "gpubox_replicasets", labels, values, count[s]);
    }
    return 0;
}

/* Volumes: how many, and each one's size and bytes used. */
static int metrics_volumes(app *a, FILE *out, gb_err *err)
{
    _cleanup_json_ json_t *vols = NULL;
    if (volumes_usage_all(a, &vols, err) < 0)
        return err_prefix(err, "measuring volumes");
    prom_write_header(out, "gpubox_volumes", "gauge", "Volumes gpubox made");
    prom_write_sample(out, "gpubox_volumes", NULL, NULL, (double)json_array_size(vols));
    static const char *const labels[] = {"name", "backend", NULL};
    static const struct {
        const char *metric, *field, *help;
    } per_volume[] = {
        {"gpubox_volume_size_bytes", "size", "The volume's size"},
        {"gpubox_volume_used_bytes", "used",
         "Bytes the volume's data takes (absent when it "
         "cannot be measured now)"},
    };
    for (size_t k = 0; k < sizeof(per_volume) / sizeof(per_volume[0]); k++) {
        prom_write_header(out, per_volume[k].metric, "gauge", per_volume[k].help);
        size_t i;
        json_t *v;
        json_array_foreach(vols, i, v)
        {
            json_t *n = json_object_get(v, per_volume[k].field);
            if (!json_is_integer(n))
                continue;
            const char *values[] = {json_string_value(json_object_get(v, "name")),
                                    json_string_value(json_object_get(v, "backend"))};
            prom_write_sample(out, per_volume[k].metric, labels, values,
                              (double)json_integer_value(n));
        }
    }
    return 0;
}

/* Per user, what this node's sets used and hold (users/users.h). */
static int metrics_users(app *a, FILE *out, gb_err *err)
{
    _cleanup_json_ json_t *users = NULL;
    if (users_metrics_usage(a, &users, err) < 0)
        return err_prefix(err, "reading the accounting");
    static const char *const labels[] = {"user", NULL};
    static const struct {
        const char *metric, *type, *field, *help;
    } per_user[] = {
        {"gpubox_user_card_seconds_total", "counter", "cardSeconds",
         "Whole cards held times seconds, by the owner of this node's replica sets"},
        {"gpubox_user_share_mib_seconds_total", "counter", "shareMiBSeconds",
         "GPU share memory (MiB) held times seconds, by owner"},
        {"gpubox_user_cards", "gauge", "cards", "Whole cards the owner's sets hold here now"},
        {"gpubox_user_share_mib", "gauge", "shareMiB",
         "GPU share memory (MiB) the owner's sets hold here now"},
    };
    for (size_t k = 0; k < sizeof(per_user) / sizeof(per_user[0]); k++) {
        prom_write_header(out, per_user[k].metric, per_user[k].type, per_user[k].help);
        const char *name;
        json_t *u;
        json_object_foreach(users, name, u)
        {
            json_t *v = json_object_get(u, per_user[k].field);
            const char *values[] = {name};
            prom_write_sample(out, per_user[k].metric, labels, values, json_number_value(v));
        }
    }
    return 0;
}

/* The fleet's nodes by state, as this node sees them (the same on every
 * node; left out when the fleet's store does not answer). */
static void metrics_fleet(app *a, FILE *out)
{
    if (!a->fleet)
        return;
    fleet_member *ms = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    if (fleet_members(a->fleet, false, &ms, &n, &e) < 0)
        return;
    double count[3] = {0};
    for (size_t i = 0; i < n; i++)
        count[ms[i].state]++;
    fleet_members_free(ms, n);
    static const char *const labels[] = {"state", NULL};
    prom_write_header(out, "gpubox_fleet_nodes", "gauge", "The fleet's nodes by state");
    for (int s = FLEET_NODE_READY; s <= FLEET_NODE_UNREACHABLE; s++) {
        const char *values[] = {fleet_node_state_name((enum fleet_node_state)s)};
        prom_write_sample(out, "gpubox_fleet_nodes", labels, values, count[s]);
    }
}

int metrics_write(app *a, FILE *out, gb_err *err)
{
    gb_err store_err = GB_ERR_INIT;
    int64_t rev = 0;
    bool store_up = store_revision(a->store, &rev, &store_err) == 0;
    static const char *const backend_label[] = {"backend", NULL};
    const char *backend[] = {store_backend_name(a->store)};
    prom_write_header(out, "gpubox_store_up", "gauge",
                      "1 when the state store answers, 0 when it does not");
    prom_write_sample(out, "gpubox_store_up", backend_label, backend, store_up);

    static const char *const version_label[] = {"version", NULL};
    static const char *const version[] = {GPUBOX_VERSION};
    prom_write_header(out, "gpubox_build_info", "gauge", "gpuboxd's version (always 1)");
    prom_write_sample(out, "gpubox_build_info", version_label, version, 1);

    metrics_gpus(a, out);
    monitor_metrics(a, out);
    metrics_ports(a, out);
    /* Without the store the record counts are unknown: leave them out
     * rather than report zeros a dashboard would believe. */
    if (store_up && (metrics_replicasets(a, out, err) < 0 || metrics_volumes(a, out, err) < 0 ||
                     metrics_users(a, out, err) < 0))
        return -1;
    metrics_fleet(a, out);
    queue_metrics_write(a, out);
    if (a->ops) {
        prom_family_write(a->ops->total, out);
        prom_family_write(a->ops->duration, out);
    }
    return 0;
}
