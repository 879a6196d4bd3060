/*
 * monitor.h - live usage, card health and run limits (DESIGN.md section 9,
 * docs/usage.md): the one owner of what the cards are doing right now.
 *
 * A thread reads the GPU sampler (gpu/gpu_usage.h) every --usage-interval
 * (1 s by default), maps each GPU process's host PID to its container
 * through /proc/<pid>/cgroup and so to a replica set of this server, and
 * keeps the last reading for the answers (resources, replica sets,
 * metrics). From each reading it also
 *   - tells the GPU pool how much memory processes outside gpubox use on
 *     each card ("foreign"), so memory shares are placed beside it;
 *   - marks a card unhealthy on a critical XID (--xid-critical) or when it
 *     stops answering: no new placement lands on it until an admin clears
 *     the mark (kept in the store, so it survives restarts);
 *   - stops sets past their run limits (replicaset/record.h): idleStop,
 *     every card under --idle-threshold percent and no exec for that long,
 *     and maxDuration since the run began. The stop is replicaset_stop's
 *     (through monitor_actions, below), with the reason in the record, the
 *     audit log and an event. Since
 *     when a set is idle is kept in the store, so the clock survives a
 *     restart or a crash of gpuboxd.
 * With --usage-interval 0 nothing is sampled; the thread still ticks once a
 * second for maxDuration, and idleStop is not enforced (logged).
 */
#ifndef GPUBOX_SERVICE_MONITOR_MONITOR_H
#define GPUBOX_SERVICE_MONITOR_MONITOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

struct replicaset_record;

#define MONITOR_XID_DEFAULT "48,61,62,63,64,74,79,92,95,119,120"
#define MONITOR_IDLE_THRESHOLD_DEFAULT 5

/* What the monitor does to replica sets, through the interface the
 * replica-set code offers (replicaset.h: replicaset_stop_because), handed
 * over by app_open. The monitor names no replica-set function, and the
 * replica-set code names no monitor function: it hears from the monitor
 * through a->hooks (set_usage, set_exec, app.h). */
typedef struct monitor_actions {
    /* Stop set name past a run limit, the reason ("idle", "maxDuration")
     * and its detail kept (replicaset_stop_because). */
    int (*stop_set)(app *a, const char *name, const char *reason, const char *detail, json_t **out,
                    gb_err *err);
} monitor_actions;

/* Load the health marks, open the sampler and start the thread; the
 * monitor acts through act (kept, not copied). */
int monitor_start(app *a, const monitor_actions *act, gb_err *err);
void monitor_stop(app *a);

/* Changes whenever an answer built from the monitor would change (a new
 * reading, a mark set or cleared): resources.c caches by it. */
uint64_t monitor_generation(app *a);

/* Add "usage" (null before a reading) and, for a marked card, "unhealthy"
 * to a device object of GET /resources/gpus; add memoryUsedMiB and
 * utilization to each of its "allocations" entries. */
void monitor_device_json(app *a, const char *uuid, json_t *device);
/* The set's usage for GET /replicaSet/{name} and each item of the list:
 * {sampledAt, idleSince, cards:[...], utilization (its busiest card's, -1
 * when none is known), memoryUsedMiB (on all its cards)} (cards [] for a
 * set without cards), or NULL (sampling off, no reading yet, not running). */
json_t *monitor_set_json(app *a, const struct replicaset_record *r);
/* The usage and health gauges of GET /metrics. */
void monitor_metrics(app *a, FILE *out);

/* An exec in name's container: it is not idle. */
void monitor_note_exec(app *a, const char *name);

/* An admin clears uuid's unhealthy mark (resources_gpu_clear_health
 * answers with the device). ERR_NOT_FOUND for a card this server lacks. */
int monitor_clear_health(app *a, const char *uuid, gb_err *err);

/* Events (events.c): autostops and health changes, newest first. */
void monitor_event(app *a, const char *kind, const char *set, const char *owner, const char *gpu,
                   const char *reason, const char *detail, const char *by);
int monitor_events(app *a, long limit, json_t **out, gb_err *err);

/* "48,79" into a bitmap of XIDs below MONITOR_XID_LIMIT; -1 naming the bad
 * entry. */
#define MONITOR_XID_LIMIT 1024
int monitor_parse_xids(const char *list, uint8_t *bits, gb_err *err);

#endif
