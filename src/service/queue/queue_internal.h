/*
 * queue_internal.h - what the queue's files share (queue.c: snapshot,
 * plan, submit, list; dispatch.c: the thread, the starts, status and
 * metrics; notify.c: the webhook). Not for use outside src/service/queue/.
 */
#ifndef GPUBOX_SERVICE_QUEUE_INTERNAL_H
#define GPUBOX_SERVICE_QUEUE_INTERNAL_H

#include <stdint.h>

#include "sched/placement_queue.h"
#include "service/nodes/nodes.h"
#include "service/queue/queue.h"
#include "service/replicaset/record.h"

/* The queued records and the cards the running sets give back by their
 * maxDuration, read in one scan. */
typedef struct queue_snapshot {
    /* state queued, or a set whose move waits (replicaset_move_waits), with
     * their revisions */
    replicaset_record *sets;
    char **set_node; /* the node whose records hold sets[i] (a fleet); NULL entries alone */
    size_t n, cap;
    int64_t *rel_at; /* Unix ms */
    unsigned *rel_cards;
    char **rel_node;
    size_t nrel, relcap;
    const char *reading; /* the node being read (a fleet), while reading */
} queue_snapshot;

int queue_snapshot_read(app *a, queue_snapshot *s, gb_err *err);
void queue_snapshot_free(queue_snapshot *s);
const replicaset_record *queue_snapshot_find(const queue_snapshot *s, const char *name);

/* The plan of one pass over a snapshot (sched/placement_queue.h): a
 * single server as its one node, a fleet's nodes as nodes_view reads
 * them. entries[] in serving order; their names point into the snapshot. */
typedef struct queue_plan {
    placement_queue_entry *entries;
    size_t n;
    double *usage;
    placement_queue_release *rel;
    placement_label *labels; /* the entries' nodeSelectors, RS_MAX_SELECTOR each */
    const char **allowed;    /* a waiting move's nodes (all but its own), nnodes each */
    placement_node node;     /* a single server */
    nodes_view view;         /* a fleet */
    placement_node *nodes;   /* &node, or view.nodes */
    size_t nnodes;
    placement_queue_reservation res;
} queue_plan;

int queue_plan_make(app *a, const queue_snapshot *s, int64_t now_ms, size_t max_starts,
                    queue_plan *p, gb_err *err);
void queue_plan_free(queue_plan *p);
/* Entry i of the plan as GET /api/v1/queue shows it; named false: only
 * position, priority and head. */
json_t *queue_entry_json(const queue_plan *p, size_t i, const queue_snapshot *s, int64_t now_ms,
                         bool named);

/* The node whose records hold the queued set named (NULL: a single server). */
const char *queue_snapshot_node(const queue_snapshot *s, const char *name);

/* A fleet: how long a node's refusal of a request sent to it (queue.refused
 * {node, why, ms}: its owner's quota, or a view of the node that was
 * stale) keeps the dispatcher from sending it again, and is its why. */
#define QUEUE_REFUSED_FOR_MS 10000
/* The why of a refusal within QUEUE_REFUSED_FOR_MS of now_ms, or NULL. */
const char *queue_refused_why(const replicaset_record *r, int64_t now_ms);

int queue_priority_of(const replicaset_record *r);
int64_t queue_submit_ms_of(const replicaset_record *r);
int64_t queue_timeout_s_of(const replicaset_record *r);
bool queue_waitable(int code);
/* Whether the last pass left anything waiting. */
bool queue_waiting(app *a);
int64_t queue_now_ms(void);

/* --queue-webhook: post {event, name, owner, ...} (notify.c); never blocks
 * the dispatcher for more than a few seconds. */
void queue_notify_started(app *a, const replicaset_record *r, double waited_s, const json_t *data);

#endif
