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
 * capacity_freed, called by every stop, delete, patch and failed create;
 * in a fleet the node tells the dispatcher, which passes at once, and the
 * dispatcher tells the nodes it assigned work to), after a request is
 * queued, and every QUEUE_TICK_MS otherwise (timeouts, maxDuration
 * reservations falling due, a tell that did not arrive).
 *
 * A move can wait too (queue_move, a fleet): the set stays as it is where
 * it is, its record saying queue.move; the dispatcher writes the node it
 * goes to into that record, and the set's node moves it (replicaset_move)
 * on a thread of its own. docs/queue.md, "Moves that wait".
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

/* PATCH .../restart, decided here (the handler only parses):
 *   - a priority (0-100) above the caller's quota maxPriority:
 *     ERR_PRIORITY_NOT_ALLOWED, whatever else the request asks (admins:
 *     any);
 *   - move (a fleet): the restart, or when this node lacks the room the
 *     move to a node that has it and the restart there
 *     (replicaset_restart_or_move); with queue too, when no node can take
 *     it now, it waits as a restart with queue alone would;
 *   - queue: the restart, or when it cannot start now (1013, 1014, 1118,
 *     1115) the set is queued again with its current spec (its earlier
 *     version kept): *queued true, data as queue_create's;
 *   - neither: the restart. */
typedef struct queue_restart_request {
    bool no_gpu; /* "gpuCount": 0: start without the set's cards */
    bool move, queue;
    int priority;              /* -1: none given */
    int64_t timeout_s;         /* queueTimeout; 0: none */
    const char *authorization; /* the caller's, for the node a move goes to */
} queue_restart_request;
int queue_restart(app *a, const char *name, const queue_restart_request *rq, json_t **out,
                  bool *queued, gb_err *err);

/* POST .../move with "queue": true (a fleet; docs/queue.md, "Moves that
 * wait"): the move, or when no node (or the named one) can take the set
 * now (1013, 1014, 1118) the request waits in the fleet's queue: the set
 * stays as it is where it is (running, paused or stopped) with queue.move
 * in its record, and the dispatcher has its node move it
 * (replicaset_move) once a node can take it. *queued true with data
 * {name, state: "queued", move: true, position, why}. Without queue:
 * replicaset_move. A priority is checked as queue_restart checks it. */
typedef struct queue_move_request {
    const char *node; /* the node it goes to; NULL: any but its own */
    bool queue, wait;
    bool with_sharers; /* the sets sharing its volumes move too; not with queue */
    int priority;
    int64_t timeout_s;
    const char *authorization;
} queue_move_request;
int queue_move(app *a, const char *name, const queue_move_request *rq, json_t **out, bool *queued,
               gb_err *err);

/* DELETE /api/v1/queue/{name}: take name out of the queue. A queued create
 * or restart is cancelled as DELETE of the set cancels it; a waiting move
 * ends, the set staying as and where it is. data {name, cancelled: true,
 * move}. ERR_NOT_FOUND when name does not wait. */
int queue_cancel(app *a, const char *name, json_t **out, gb_err *err);

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

/* Wake the dispatcher. */
void queue_kick(app *a);
/* Cards, ports or cores went back here (app_hooks.capacity_freed): a pass
 * here, and in a fleet, when another node dispatches, that node told
 * (nodes_queue_tell "freed", after this node's capacity is published), so
 * a request waiting anywhere starts without waiting for a tick. */
void queue_capacity_freed(app *a);
/* Another node told this one (POST /api/v1/internal/queue/tell): "freed"
 * (room on that node: a pass if this node dispatches) or "assigned" (a
 * request assigned here: start it, or run its move). ERR_INVALID_PARAMS
 * for another word. */
int queue_told(app *a, const char *what, gb_err *err);
/* {position, why, head} of queued set name from the last pass, or NULL
 * (app_hooks.queue_status). */
json_t *queue_status(app *a, const char *name);

/* The queue's part of GET /metrics: gpubox_queue_length, the wait-time
 * histogram gpubox_queue_wait_seconds, gpubox_queue_dispatch_seconds. */
void queue_metrics_write(app *a, FILE *out);

#endif
