/*
 * placement_queue.h - the queue's decision: in which order waiting
 * requests are served, which of them start now and where, and why the
 * others wait (docs/queue.md). service/queue/ keeps the queue in the store
 * and starts what this decides; this file only decides.
 *
 * Pure, as placement.h: no store, no HTTP, no threads, no clock (now_ms is
 * given). The nodes are placement.h's (a single server is a fleet of one,
 * its own capacity record); a start is judged by placement_rank, so the
 * queue calls a request "fits" exactly when a create would be placed.
 *
 * Order (placement_queue_sort): priority, highest first; then fair share,
 * the owner's decayed usage, least first; then submit time, oldest first;
 * then the name, so the order is total and the same on every node.
 *
 * One pass (placement_queue_plan) walks the requests in that order:
 *   - a request that fits on some node starts there (the node's view then
 *     counts what it takes: placement_queue_take), unless it would use
 *     what the head has reserved (below);
 *   - the first request that does not fit is the head: it holds a
 *     reservation on the eligible node where it is due to fit first. Due
 *     means: the node's free cards now, plus the cards that sets with a
 *     maxDuration give back by then (node_releases), reach what the head
 *     asks; a node without such sets has an unknown (infinite) due time,
 *     and among those the head takes the one with the most free cards.
 *     The head's reservation takes, in the node's view, the cards of the
 *     head's kind that are free now (up to what it asks): a whole-card
 *     head the free whole cards; a share head the cards with the most room;
 *   - a later request (backfill) then starts only if it fits without the
 *     reserved cards, or if it has a maxDuration and ends before the head
 *     is due (now + maxDuration <= due, due known): then it cannot delay
 *     the head. Otherwise it waits, its why naming the reservation.
 * Only the head holds a reservation (EASY backfill): the head cannot
 * starve, and nothing runs on cards the head is waiting for unless it
 * gives them back in time.
 *
 * Cost: requests of one shape (what they ask and where they may go) that
 * fail once fail again until a node's view changes, so each shape is
 * ranked once per change: a pass over 10,000 requests of a few shapes on
 * 1,000 nodes ranks a few times, not 10,000 (bench/queue.sh).
 */
#ifndef GPUBOX_SCHED_PLACEMENT_QUEUE_H
#define GPUBOX_SCHED_PLACEMENT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/placement.h"
#include "util/err.h"

/* One waiting request. The caller fills the inputs; the plan fills the
 * outputs. */
typedef struct placement_queue_entry {
    /* inputs */
    const char *name;       /* the replica set; the order's last key */
    int priority;           /* 0-100 */
    double usage;           /* the owner's fair-share usage (decayed card-seconds) */
    int64_t submit_ms;      /* Unix ms */
    int64_t max_duration_s; /* 0: none (it cannot backfill onto reserved cards) */
    placement_request req;  /* what it asks and where it may go */
    /* outputs of placement_queue_plan */
    int start;     /* index of the node it starts on now; -1: it waits */
    bool head;     /* it holds the reservation */
    bool backfill; /* it starts on the head's reserved cards, ending before it is due */
    char why[512]; /* while it waits: why, per node (placement_rank's refusal) */
} placement_queue_entry;

/* When a set with a maxDuration on node `node` gives its cards back. */
typedef struct placement_queue_release {
    size_t node;   /* index into the nodes */
    int64_t at_ms; /* Unix ms */
    unsigned cards;
} placement_queue_release;

/* Sort e[0..n) into the serving order (above). */
void placement_queue_sort(placement_queue_entry *e, size_t n);

/* The head's reservation, as the plan decided it. */
typedef struct placement_queue_reservation {
    bool held;
    size_t entry;   /* index of the head in e */
    size_t node;    /* where */
    unsigned cards; /* cards of the node's view it holds */
    int64_t due_ms; /* when the head is due to fit; INT64_MAX: unknown */
} placement_queue_reservation;

/* One pass over e[0..n), sorted: fills each entry's outputs and *res. The
 * nodes' views are changed as the starts take from them (the caller
 * passes copies it may spoil). At most max_starts requests start (0: no
 * limit); the rest after that wait with why "not yet looked at". */
int placement_queue_plan(placement_queue_entry *e, size_t n, placement_node *nodes, size_t nnodes,
                         const placement_queue_release *rel, size_t nrel, int64_t now_ms,
                         size_t max_starts, placement_queue_reservation *res, gb_err *err);

/* Count in node's view what r takes (the cards placement_rank judged fit,
 * taken in index order): whole cards become held, a share takes memory and
 * a tenant slot, a time-slice a replica. */
void placement_queue_take(placement_node *node, const placement_request *r);

#endif
