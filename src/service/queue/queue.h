/*
 * queue.h - requests that wait for room (docs/queue.md, DESIGN.md 12).
 *
 * A create (or a stopped set's restart) with "queue": true that cannot be
 * placed now - too few cards or shares (1013), host ports (1014), CPU
 * cores (1118), or its owner's quota (1115) - becomes a queued set: a
 * replica-set record in state "queued" holding nothing
 * (service/replicaset/queued.c). The queue is those records: in the store,
 * so it survives kill -9 and restarts, and nothing else needs saving.
 *
 * In a fleet the queue is every node's queued records, read from etcd by
 * every node (the list and positions are the fleet's), and one node at a
 * time dispatches: the one that leads the role "queue-dispatcher" (on its
 * claim's lease, nodes_lead). A start on another node than the one whose
 * records hold the request is a move first (nodes_move_queued: record and
 * name in one transaction, marked queue.assigned), then that node's
 * ordinary start; an assigned request that does not start there goes back
 * to the dispatcher. docs/queue.md, "In a fleet", says what a crash at
 * each step leaves.
 *
 * One dispatcher thread per gpuboxd serves it. A pass (queue_pass) reads the queued
 * records, drops those past their queueTimeout (record and event say so),
 * orders the rest - priority, then the owner's fair-share usage
 * (users_fairshare_usage, --fairshare-half-life), then submit time - and
 * asks sched/placement_queue.h which start now (the head's reservation
 * and backfill are decided there). Each start is the ordinary journalled
 * create (replicaset_start_queued), its owner's quota checked at that
 * moment, compared against the queued record's revision: a start either
 * happens once or not at all, and a crash in between is finished or undone
 * by the journal, an undone start putting the queued record back.
 *
 * When a start fails:
 *   - for room or quota (1013, 1014, 1118, 1115): it keeps waiting, its
 *     why saying what the create said (a quota that does not allow it now
 *     may allow it once the owner's other sets stop);
 *   - for anything else (its image gone, a volume deleted): it is dropped,
 *     the reason in its record and an event, as a wait cannot cure it.
 *
 * A pass runs when cards, ports or cores go back to the pools (app_hooks.
 * capacity_freed, called by every stop, delete, patch and failed create),
 * after a request is queued, and every QUEUE_TICK_MS otherwise (timeouts,
 * maxDuration reservations falling due, other nodes' changes).
 */
#ifndef GPUBOX_SERVICE_QUEUE_QUEUE_H
#define GPUBOX_SERVICE_QUEUE_QUEUE_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "service/app.h"
#include "service/replicaset/request.h"
#include "util/err.h"

#define QUEUE_TICK_MS 2000
#define QUEUE_PRIORITY_DEFAULT 50
#define QUEUE_HALF_LIFE_DEFAULT_S (7.0 * 86400)

typedef struct queue queue;

/* Start the dispatcher (a->queue); queue_stop ends its thread (a kick
 * after it is harmless: the threads still running at shutdown may give
 * back cards), queue_free (after every such thread) frees it. */
int queue_start(app *a, gb_err *err);
void queue_stop(app *a);
void queue_free(app *a);

/* POST /api/v1/replicaSet (and /containers): the create, or, when req
 * asks to queue and it cannot be placed now, a queued set: *queued true,
 * data {name, state: "queued", position, why}. A priority above the
 * caller's quota maxPriority: ERR_PRIORITY_NOT_ALLOWED (admins: any). */
int queue_create(app *a, replicaset_create_request *req, json_t **out, bool *queued, gb_err *err);

/* PATCH .../restart with "queue": true for a stopped set that cannot start
 * now: the set is queued again with its current spec (its earlier version
 * kept). data as queue_create's. */
int queue_restart(app *a, const char *name, bool no_gpu, int priority, int64_t timeout_s,
                  json_t **out, bool *queued, gb_err *err);

/* In a fleet, after placement found no node for req (err says why): may
 * it wait in the fleet's queue (its record on this node, which received
 * it)? Yes for room or quota (1013, 1014, 1118, 1115); its node and
 * nodeSelector are kept in the queued record for the dispatcher. */
bool queue_may_wait_here(app *a, const replicaset_create_request *req, const gb_err *err);

/* GET /api/v1/queue: {queue: [{position, name, owner, priority, asks,
 * fairShareUsage, submitTime, waitedSeconds, queueTimeout, head, why}],
 * length}; in serving order. A `user` sees others' entries without name,
 * owner or what they ask. */
int queue_list(app *a, json_t **out, gb_err *err);

/* One pass now (the dispatcher's; tests and benchmarks call it too). */
int queue_pass(app *a, gb_err *err);

/* Wake the dispatcher (app_hooks.capacity_freed). */
void queue_kick(app *a);
/* {position, why, head} of queued set name from the last pass, or NULL
 * (app_hooks.queue_status). */
json_t *queue_status(app *a, const char *name);

/* The queue's part of GET /metrics: gpubox_queue_length, the wait-time
 * histogram gpubox_queue_wait_seconds, gpubox_queue_dispatch_seconds. */
void queue_metrics_write(app *a, FILE *out);

#endif
