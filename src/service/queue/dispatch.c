/*
 * dispatch.c - the queue's dispatcher: one thread per gpuboxd, woken by
 * queue_kick (a request queued or cancelled), queue_capacity_freed, another
 * node's tell (queue_told), or every QUEUE_TICK_MS, that runs passes
 * (queue_wake says which node reads what); the moves the dispatcher
 * decided, each on a thread of its own; the status of the last pass for
 * GET /replicaSet/{name}; the queue's metrics.
 *
 * Passes are serialized by pass_lock, so the thread and a pass asked for
 * by a submit never decide on the same snapshot twice; and a start is the
 * create compared against the queued record's revision (queued.c), so even
 * two gpuboxd on one store (which the store's claim already forbids) could
 * not start a request twice.
 */
#include "util/xalloc.h"
#include "service/queue/queue_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/monitor/monitor.h"
#include "service/replicaset/replicaset.h"
#include "service/users/caller.h"
#include "service/nodes/nodes.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/prom.h"

/* The fleet's role of the one dispatcher (fleet_lead). */
#define QUEUE_ROLE "queue-dispatcher"
/* How long a request moved to a node is left to that node before the
 * dispatcher may send it elsewhere (a few of the node's passes). */
#define QUEUE_ASSIGN_GRACE_MS (3 * QUEUE_TICK_MS)

struct queue {
    app *a;
    pthread_t thread;
    bool running, stopping, kicked;
    bool freed;         /* room went back here since the last wake */
    bool told_assigned; /* another node assigned something here */
    pthread_mutex_t mu; /* kicked, freed, told_assigned, stopping, status, length */
    pthread_cond_t cv;
    pthread_mutex_t pass_lock; /* one pass at a time */
    json_t *status;            /* name -> {position, why, head} of the last pass */
    size_t length;
    prom_family *wait;     /* gpubox_queue_wait_seconds */
    prom_family *decide;   /* gpubox_queue_dispatch_seconds */
    prom_family *outcomes; /* gpubox_queue_outcomes_total */
    json_t *moving;        /* names of this node's sets whose waited move runs now (mu) */
    pthread_cond_t moved;  /* signalled as each of them ends */
};

static const double queue_wait_buckets[] = {1,    5,    15,    60,    300,   900,
                                            1800, 3600, 14400, 43200, 86400, 604800};
static const double queue_decide_buckets[] = {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1};

/* ---- status and metrics ---- */

json_t *queue_status(app *a, const char *name)
{
    queue *q = a->queue;
    if (!q)
        return NULL;
    pthread_mutex_lock(&q->mu);
    json_t *s = json_object_get(q->status, name);
    json_t *copy = s ? json_deep_copy(s) : NULL;
    pthread_mutex_unlock(&q->mu);
    return copy;
}

bool queue_waiting(app *a)
{
    queue *q = a->queue;
    if (!q)
        return false;
    pthread_mutex_lock(&q->mu);
    bool any = q->length > 0;
    pthread_mutex_unlock(&q->mu);
    return any;
}

void queue_metrics_write(app *a, FILE *out)
{
    queue *q = a->queue;
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    size_t n = q->length;
    pthread_mutex_unlock(&q->mu);
    static const char *const none[] = {NULL};
    prom_write_header(out, "gpubox_queue_length", "gauge",
                      "Replica sets waiting in the queue (state queued)");
    prom_write_sample(out, "gpubox_queue_length", none, NULL, (double)n);
    prom_family_write(q->wait, out);
    prom_family_write(q->decide, out);
    prom_family_write(q->outcomes, out);
}

static void queue_outcome(queue *q, const char *what)
{
    const char *v[] = {what};
    prom_counter_inc(q->outcomes, v);
}

/* ---- one pass ---- */

/* Whether the queued set s->sets[i] is among this node's records (always
 * on a single server). */
static bool queue_is_here(app *a, const queue_snapshot *s, size_t i)
{
    const char *self = nodes_self(a);
    return !self || !s->set_node[i] || strcmp(s->set_node[i], self) == 0;
}

/* Another node's request past its timeout, dropped by the dispatcher: its
 * record rewritten as dropped in one transaction with its name entry,
 * compared against the revision read (that node may be down: its
 * requests must not wait for it to come back). 0 done, -1 (ERR_CONFLICT:
 * it changed meanwhile, its node dropped or started it). */
static int queue_drop_elsewhere(app *a, const replicaset_record *r, const char *node,
                                const char *detail, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record d = {0};
    replicaset_record_copy(r, &d);
    replicaset_queued_mark_dropped(&d, "queueTimeout", detail);
    _cleanup_json_ json_t *j = replicaset_record_to_json(&d);
    _cleanup_free_ char *value = j ? json_dumps(j, JSON_COMPACT) : NULL;
    int moved = value ? nodes_move_queued(a, r->name, node, node, r->mod_revision, value, err) : -1;
    if (moved == 0)
        return err_set(err, ERR_CONFLICT, "queued replica set '%s' changed meanwhile", r->name);
    return moved < 0 ? -1 : 0;
}

/* Whether this node dispatches (a single server always); holder: who does
 * when another node (may be NULL). */
static bool queue_leads(app *a, char *holder, size_t size)
{
    if (holder && size)
        holder[0] = '\0';
    if (!a->fleet)
        return true;
    gb_err le = GB_ERR_INIT;
    char who[NODES_NAME_MAX];
    int l = nodes_lead(a, QUEUE_ROLE, who, sizeof(who), &le);
    if (l < 0)
        log_warn("queue: who dispatches: %s", le.msg);
    if (l == 0 && holder)
        snprintf(holder, size, "%s", who);
    return l == 1;
}

/* The nodes a pass assigned something to (names, keys of tell) act at once
 * instead of at their next tick; this node acts at the end of the pass. */
static void queue_tell_assigned(app *a, json_t *tell)
{
    const char *node;
    json_t *v;
    json_object_foreach(tell, node, v)
    {
        (void)v;
        gb_err e = GB_ERR_INIT;
        if (strcmp(node, nodes_self(a)) != 0 && nodes_queue_tell(a, node, "assigned", &e) < 0)
            log_info("queue: telling node %s of its requests: %s (it finds them within %dms)", node,
                     e.msg, QUEUE_TICK_MS);
    }
}

/* Drop the requests past their queueTimeout; the others stay in s. In a
 * fleet each node drops its own, and the dispatcher (leads) any node's. */
static void queue_drop_expired(app *a, queue_snapshot *s, int64_t now, bool leads)
{
    for (size_t i = 0; i < s->n;) {
        replicaset_record *r = &s->sets[i];
        int64_t t = queue_timeout_s_of(r);
        bool here = queue_is_here(a, s, i);
        if (!t || queue_submit_ms_of(r) + t * 1000 > now || (!here && !leads)) {
            i++;
            continue;
        }
        char detail[160];
        snprintf(detail, sizeof(detail), "waited %llds, its queueTimeout", (long long)t);
        gb_err e = GB_ERR_INIT;
        /* A move that waited too long: the set stays as and where it is. */
        int dropped;
        if (!here)
            dropped = queue_drop_elsewhere(a, r, s->set_node[i], detail, &e);
        else if (replicaset_move_waits(r))
            dropped =
                replicaset_move_wait_end(a, r->name, r->mod_revision, "queueTimeout", detail, &e);
        else
            dropped =
                replicaset_drop_queued(a, r->name, r->mod_revision, "queueTimeout", detail, &e);
        if (dropped == 0) {
            monitor_event(a, "queue.timeout", r->name, r->owner, NULL, "queueTimeout", detail,
                          NULL);
            queue_outcome(a->queue, "timeout");
        } else if (e.code != ERR_CONFLICT) {
            log_warn("queue: dropping %s after its timeout: %s", r->name, e.msg);
        }
        replicaset_record_free(r);
        free(s->set_node[i]);
        memmove(r, r + 1, (s->n - i - 1) * sizeof(*r));
        memmove(&s->set_node[i], &s->set_node[i + 1], (s->n - i - 1) * sizeof(*s->set_node));
        s->n--;
    }
}

/* why[size] = prefix and msg: a short explanation for the queue's list,
 * where a message cut at its end (marked "...") still says enough. */
static void queue_why_set(char *why, size_t size, const char *prefix, const char *msg)
{
    int n = snprintf(why, size, "%s%s", prefix, msg);
    if (n >= (int)size && size > 4)
        memcpy(why + size - 4, "...", 4);
}

/* Start the queued set r; *why set when it keeps waiting. 1 started. */
static int queue_start_one(app *a, const replicaset_record *r, int64_t now, char *why,
                           size_t why_size)
{
    _cleanup_json_ json_t *data = NULL;
    gb_err e = GB_ERR_INIT;
    bool restart = json_is_true(json_object_get(r->queue, "restart"));
    if ((restart ? replicaset_restart_queued(a, r, &data, &e)
                 : replicaset_start_queued(a, r, &data, &e)) == 0) {
        double waited = (double)(now - queue_submit_ms_of(r)) / 1000.0;
        prom_histogram_observe(a->queue->wait, NULL, waited < 0 ? 0 : waited);
        queue_outcome(a->queue, "started");
        char detail[128];
        snprintf(detail, sizeof(detail), "started after waiting %.0fs (priority %d)", waited,
                 queue_priority_of(r));
        monitor_event(a, "queue.start", r->name, r->owner, NULL, "queue", detail, NULL);
        log_info("queue: started %s for %s after %.1fs", r->name, r->owner, waited);
        queue_notify_started(a, r, waited, data);
        return 1;
    }
    if (e.code == ERR_CONFLICT) {
        queue_why_set(why, why_size, "", e.msg);
        return 0; /* cancelled, or changed meanwhile: the next pass sees it */
    }
    if (queue_waitable(e.code)) {
        queue_why_set(why, why_size, e.code == ERR_QUOTA_EXCEEDED ? "quota: " : "", e.msg);
        return 0;
    }
    /* A wait cannot cure it (image gone, volume deleted, Docker refused). */
    gb_err d = GB_ERR_INIT;
    if (replicaset_drop_queued(a, r->name, 0, "startFailed", e.msg, &d) == 0) {
        monitor_event(a, "queue.drop", r->name, r->owner, NULL, "startFailed", e.msg, NULL);
        queue_outcome(a->queue, "dropped");
    } else {
        log_warn("queue: %s could not start (%s), nor be dropped: %s", r->name, e.msg, d.msg);
    }
    queue_why_set(why, why_size, "could not start: ", e.msg);
    return 0;
}

/* A fleet's dispatcher decided that r, waiting on node home, starts on
 * node target: it moves there (one transaction with the name entry,
 * compared against its revision), marked queue.assigned, and the target
 * starts it (queue_start_assigned). A dispatcher killed before the move
 * leaves it waiting where it was; after, the target starts it alone. 1
 * moved, 0 it changed meanwhile. */
static int queue_assign(app *a, const replicaset_record *r, const char *home, const char *target)
{
    /* A waiting move stays on its node, told where it goes: that node
     * moves it (queue_start_assigned). */
    bool move = replicaset_move_waits(r);
    fault_point("queue.dispatch.decided");
    _cleanup_json_ json_t *j = replicaset_record_to_json(r);
    json_t *qj = json_object_get(j, "queue");
    if (!qj)
        return 0;
    json_object_set_new(qj, "assigned", json_string(target));
    json_object_set_new(qj, "assignedMs", json_integer((json_int_t)queue_now_ms()));
    _cleanup_free_ char *value = json_dumps(j, JSON_COMPACT);
    gb_err e = GB_ERR_INIT;
    int moved = value ? nodes_move_queued(a, r->name, home, move ? home : target, r->mod_revision,
                                          value, &e)
                      : -1;
    if (moved < 0)
        log_warn("queue: moving %s from node %s to %s: %s", r->name, home, target, e.msg);
    else if (moved)
        log_info("queue: %s (queued on node %s) goes to node %s", r->name, home, target);
    if (moved == 1)
        fault_point("queue.dispatch.moved");
    return moved == 1;
}

/* This node's queued sets that a dispatcher assigned to it. */
typedef struct queue_assigned {
    const char *self;
    replicaset_record *sets;
    size_t n, cap;
    size_t waiting; /* this node's records that wait (queued, or a move) */
} queue_assigned;

static int queue_collect_assigned(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    queue_assigned *q = ctx;
    if (r->state == RS_STATE_QUEUED || replicaset_move_waits(r))
        q->waiting++;
    const char *to = json_string_value(json_object_get(r->queue, "assigned"));
    /* Queued sets sent here to start; sets here whose move was decided
     * (to another node: it runs from here; to this node: it landed). */
    bool move = replicaset_move_waits(r) && !r->operation[0];
    if (!to || (!move && (r->state != RS_STATE_QUEUED || strcmp(to, q->self) != 0)))
        return 0;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 8;
        q->sets = xrealloc(q->sets, q->cap * sizeof(*q->sets));
    }
    replicaset_record_copy(r, &q->sets[q->n]);
    q->sets[q->n].mod_revision = r->mod_revision;
    q->n++;
    return 0;
}

static int queue_start_one(app *a, const replicaset_record *r, int64_t now, char *why,
                           size_t why_size);

/* An assigned request that did not start here (the dispatcher's view of
 * this node was stale): back to the dispatcher, which places it again
 * (compared against its revision; a change meanwhile wins). */
static void queue_unassign(app *a, const char *name, const char *why)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    gb_err e = GB_ERR_INIT;
    if (replicaset_record_load(a->store, name, &r, &e) <= 0 ||
        (r.state != RS_STATE_QUEUED && !replicaset_move_waits(&r)) ||
        !json_object_get(r.queue, "assigned"))
        return;
    json_object_del(r.queue, "assigned");
    json_object_del(r.queue, "assignedMs");
    json_object_set_new(r.queue, "refused",
                        json_pack("{s:s, s:s, s:I}", "node", nodes_self(a), "why", why, "ms",
                                  (json_int_t)queue_now_ms()));
    _cleanup_json_ json_t *j = replicaset_record_to_json(&r);
    _cleanup_free_ char *value = json_dumps(j, JSON_COMPACT);
    const char *self = nodes_self(a);
    if (value && nodes_move_queued(a, name, self, self, r.mod_revision, value, &e) < 0)
        log_warn("queue: giving %s back to the dispatcher: %s", name, e.msg);
    else
        log_info("queue: %s did not start on this node (%s); back to the dispatcher", name, why);
}

/* ---- a waiting move, decided ---- */

typedef struct queue_move_job {
    app *a;
    replicaset_record r; /* as assigned */
    char target[NODES_NAME_MAX];
    int64_t now;
} queue_move_job;

static void queue_move_done(queue *q, const char *name)
{
    pthread_mutex_lock(&q->mu);
    json_object_del(q->moving, name);
    pthread_cond_broadcast(&q->moved);
    pthread_mutex_unlock(&q->mu);
}

/* The move the dispatcher decided, journalled as any move (move.c), on a
 * thread of its own: the copy may take minutes. Refused there (the view
 * was stale): back to the dispatcher. A failure a wait cannot cure (the
 * set changed, a volume is bound by another set): the wait ends, saying
 * why. A crash during it is settled as any move's; one undone leaves the
 * wait assigned, and the next pass here runs it again. */
static void *queue_move_thread(void *arg)
{
    queue_move_job *j = arg;
    app *a = j->a;
    const replicaset_record *r = &j->r;
    replicaset_move_request rq = {.node = j->target, .wait = true};
    _cleanup_json_ json_t *out = NULL;
    gb_err e = GB_ERR_INIT;
    if (replicaset_move(a, r->name, &rq, &out, &e) == 0) {
        double waited = (double)(j->now - queue_submit_ms_of(r)) / 1000.0;
        prom_histogram_observe(a->queue->wait, NULL, waited < 0 ? 0 : waited);
        queue_outcome(a->queue, "started");
        char detail[192];
        snprintf(detail, sizeof(detail), "moved to node %s after waiting %.0fs (priority %d)",
                 j->target, waited, queue_priority_of(r));
        monitor_event(a, "queue.start", r->name, r->owner, NULL, "queue", detail, NULL);
        log_info("queue: %s", detail);
        /* The node it landed on ends the wait now, not at its tick. */
        gb_err te = GB_ERR_INIT;
        if (nodes_queue_tell(a, j->target, "assigned", &te) < 0)
            log_info("queue: telling node %s that %s landed: %s", j->target, r->name, te.msg);
    } else if (queue_waitable(e.code) || e.code == ERR_NODE_UNAVAILABLE) {
        queue_unassign(a, r->name, e.msg);
    } else {
        gb_err d = GB_ERR_INIT;
        if (replicaset_move_wait_end(a, r->name, 0, "startFailed", e.msg, &d) == 0) {
            monitor_event(a, "queue.drop", r->name, r->owner, NULL, "startFailed", e.msg, NULL);
            queue_outcome(a->queue, "dropped");
        }
        log_warn("queue: the move of %s to node %s failed: %s", r->name, j->target, e.msg);
    }
    queue_move_done(a->queue, r->name);
    replicaset_record_free(&j->r);
    free(j);
    return NULL;
}

/* r, a set of this node whose move the dispatcher decided: landed here
 * (its wait ends), or to run from here (unless it runs already). */
static void queue_move_assigned(app *a, const replicaset_record *r, int64_t now)
{
    const char *to = json_string_value(json_object_get(r->queue, "assigned"));
    gb_err e = GB_ERR_INIT;
    if (strcmp(to, nodes_self(a)) == 0) {
        if (replicaset_move_wait_end(a, r->name, r->mod_revision, NULL, NULL, &e) < 0 &&
            e.code != ERR_CONFLICT)
            log_warn("queue: %s moved here; ending its wait: %s", r->name, e.msg);
        return;
    }
    queue *q = a->queue;
    pthread_mutex_lock(&q->mu);
    bool busy = q->stopping || json_object_get(q->moving, r->name);
    if (!busy)
        json_object_set_new(q->moving, r->name, json_true());
    pthread_mutex_unlock(&q->mu);
    if (busy)
        return;
    queue_move_job *j = xcalloc(1, sizeof(*j));
    j->a = a;
    j->now = now;
    replicaset_record_copy(r, &j->r);
    snprintf(j->target, sizeof(j->target), "%s", to);
    pthread_t t;
    if (pthread_create(&t, NULL, queue_move_thread, j) != 0) {
        log_warn("queue: cannot start a thread for the move of %s (tried again next pass)",
                 r->name);
        replicaset_record_free(&j->r);
        free(j);
        queue_move_done(q, r->name);
        return;
    }
    pthread_detach(t);
}

/* Start what the dispatcher assigned to this node (moved here for it):
 * the ordinary start, compared against the record's revision. One that
 * does not fit after all keeps waiting here, and the dispatcher may send
 * it elsewhere. Returns how many of this node's records wait. */
static size_t queue_start_assigned(app *a, int64_t now)
{
    queue_assigned q = {.self = nodes_self(a)};
    gb_err e = GB_ERR_INIT;
    if (replicaset_records_each(a->store, queue_collect_assigned, &q, &e) < 0)
        log_warn("queue: reading the sets assigned to this node: %s", e.msg);
    for (size_t i = 0; i < q.n; i++) {
        char why[512];
        if (replicaset_move_waits(&q.sets[i]))
            queue_move_assigned(a, &q.sets[i], now);
        else if (queue_start_one(a, &q.sets[i], now, why, sizeof(why)) == 0)
            queue_unassign(a, q.sets[i].name, why);
        replicaset_record_free(&q.sets[i]);
    }
    free(q.sets);
    return q.waiting;
}

static bool queue_node_alive(const queue_plan *p, const char *node)
{
    for (size_t i = 0; i < p->nnodes; i++)
        if (strcmp(p->nodes[i].name, node) == 0)
            return p->nodes[i].alive;
    return false;
}

static int queue_pass_locked(app *a, queue *q, gb_err *err);

int queue_pass(app *a, gb_err *err)
{
    queue *q = a->queue;
    if (!q)
        return 0;
    /* A pass serves everyone's requests: it runs as the daemon itself, not
     * as the caller of a request that asked for it (queue_create), whose
     * view of others' sets would make their starts fail. */
    caller saved;
    const caller *c = users_caller_current();
    if (c) {
        saved = *c;
        users_caller_leave();
    }
    pthread_mutex_lock(&q->pass_lock);
    int rc = queue_pass_locked(a, q, err);
    pthread_mutex_unlock(&q->pass_lock);
    if (c)
        users_caller_enter(&saved);
    return rc;
}

static int queue_pass_locked(app *a, queue *q, gb_err *err)
{
    int rc = -1;
    queue_snapshot s;
    queue_plan p = {0};
    if (queue_snapshot_read(a, &s, err) < 0)
        goto out;
    /* In a fleet one node decides for all (the role on its claim's lease:
     * killed, it goes to another node within the lease's TTL); the others
     * only order the queue for their answers. */
    bool leads = queue_leads(a, NULL, 0);
    int64_t now = queue_now_ms();
    queue_drop_expired(a, &s, now, leads);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (queue_plan_make(a, &s, now, 0, &p, err) < 0) {
        queue_snapshot_free(&s);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    prom_histogram_observe(
        q->decide, NULL, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    json_t *status = json_object();
    json_t *tell = json_object(); /* nodes told of what this pass assigned them */
    size_t waiting = 0;
    for (size_t i = 0; i < p.n; i++) {
        placement_queue_entry *e = &p.entries[i];
        const replicaset_record *r = queue_snapshot_find(&s, e->name);
        if (!r)
            continue;
        char why[sizeof(e->why)];
        snprintf(why, sizeof(why), "%s", e->why);
        if (e->start >= 0 && a->fleet) {
            const char *home = queue_snapshot_node(&s, r->name);
            const char *target = p.nodes[e->start].name;
            const char *assigned = json_string_value(json_object_get(r->queue, "assigned"));
            /* Sent to a node that is alive a moment ago: that node starts it
             * (or finds it does not fit) before it is sent anywhere else. */
            int64_t since = (int64_t)json_integer_value(json_object_get(r->queue, "assignedMs"));
            bool pending =
                assigned && now - since < QUEUE_ASSIGN_GRACE_MS && queue_node_alive(&p, assigned);
            /* A move's node runs it, or hands it back, however long it
             * takes (while that node lives). */
            bool move = replicaset_move_waits(r);
            if (move && assigned && home && queue_node_alive(&p, home))
                pending = true;
            /* Refused there a moment ago (its owner's quota, a stale view):
             * not sent again at once; the why is that node's. */
            const char *refused = queue_refused_why(r, now);
            if (leads && home && !pending && !refused &&
                (!assigned || strcmp(assigned, target) != 0) &&
                queue_assign(a, r, home, target) == 1) {
                /* A move is run by the set's node; a start by the target. */
                json_object_set_new(tell, move ? home : target, json_true());
                continue;
            }
            if (pending)
                target = assigned;
            if (refused)
                snprintf(why, sizeof(why), "%s", refused);
            else if (!leads || (assigned && strcmp(assigned, target) == 0))
                snprintf(why, sizeof(why), "%s node %s", move ? "moving to" : "starting on",
                         target);
        } else if (e->start >= 0 && queue_start_one(a, r, now, why, sizeof(why)) == 1) {
            continue;
        }
        waiting++;
        json_object_set_new(status, r->name,
                            json_pack("{s:I, s:s, s:b}", "position", (json_int_t)waiting, "why",
                                      why, "head", e->head));
    }
    pthread_mutex_lock(&q->mu);
    json_decref(q->status);
    q->status = status;
    q->length = waiting;
    pthread_mutex_unlock(&q->mu);
    queue_plan_free(&p);
    queue_snapshot_free(&s);
    queue_tell_assigned(a, tell);
    json_decref(tell);
    if (a->fleet)
        queue_start_assigned(a, now);
    rc = 0;
out:
    return rc;
}

/* ---- the thread ---- */

void queue_kick(app *a)
{
    queue *q = a->queue;
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->kicked = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void queue_capacity_freed(app *a)
{
    queue *q = a->queue;
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->kicked = q->freed = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int queue_told(app *a, const char *what, gb_err *err)
{
    queue *q = a->queue;
    bool freed = strcmp(what, "freed") == 0;
    if (!freed && strcmp(what, "assigned") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "what is \"freed\" or \"assigned\", not '%.32s'",
                       what);
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    if (freed)
        q->kicked = true;
    else
        q->told_assigned = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* What one wake of the thread does. A single server, and the fleet's
 * dispatcher: a pass. Another node of a fleet: room freed here is told to
 * the dispatcher (which passes at once instead of at its tick); then what
 * was assigned here starts (its own records, read alone); and only while
 * requests wait among its own records, at a tick, the fleet-wide pass that
 * keeps their position and why fresh for GET. GET /api/v1/queue reads the
 * fleet when asked (queue_list), so a node with nothing waiting does not
 * read every node's records every QUEUE_TICK_MS. */
static void queue_wake(app *a, bool freed, bool tick)
{
    gb_err e = GB_ERR_INIT;
    char holder[NODES_NAME_MAX];
    if (!a->fleet || queue_leads(a, holder, sizeof(holder))) {
        if (queue_pass(a, &e) < 0)
            log_warn("queue: a dispatch pass failed: %s (tried again in %dms)", e.msg,
                     QUEUE_TICK_MS);
        return;
    }
    if (freed && holder[0] && nodes_queue_tell(a, holder, "freed", &e) < 0)
        log_info("queue: telling node %s (it dispatches) of room freed here: %s", holder, e.msg);
    queue *q = a->queue;
    pthread_mutex_lock(&q->pass_lock);
    size_t here = queue_start_assigned(a, queue_now_ms());
    pthread_mutex_unlock(&q->pass_lock);
    if (!here) {
        pthread_mutex_lock(&q->mu);
        json_decref(q->status);
        q->status = json_object();
        q->length = 0;
        pthread_mutex_unlock(&q->mu);
    } else if (tick && queue_pass(a, &e) < 0) {
        log_warn("queue: a pass failed: %s (tried again in %dms)", e.msg, QUEUE_TICK_MS);
    }
}

static void *queue_thread(void *arg)
{
    queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += QUEUE_TICK_MS / 1000;
        until.tv_nsec += (long)(QUEUE_TICK_MS % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        bool tick = false;
        while (!q->stopping && !q->kicked && !q->told_assigned)
            if (pthread_cond_timedwait(&q->cv, &q->mu, &until) == ETIMEDOUT) {
                tick = true;
                break;
            }
        bool stop = q->stopping, freed = q->freed;
        tick = tick || q->kicked;
        q->kicked = q->freed = q->told_assigned = false;
        pthread_mutex_unlock(&q->mu);
        if (stop)
            break;
        queue_wake(q->a, freed, tick);
    }
    return NULL;
}

int queue_start(app *a, gb_err *err)
{
    queue *q = xcalloc(1, sizeof(*q));
    q->a = a;
    q->status = json_object();
    q->moving = json_object();
    pthread_mutex_init(&q->mu, NULL);
    pthread_mutex_init(&q->pass_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_cond_init(&q->moved, &ca);
    pthread_condattr_destroy(&ca);
    static const char *const none[] = {NULL};
    static const char *const outcome[] = {"outcome", NULL};
    q->wait = prom_histogram_new(
        "gpubox_queue_wait_seconds", "How long queued replica sets waited before they started",
        none, queue_wait_buckets, sizeof(queue_wait_buckets) / sizeof(queue_wait_buckets[0]));
    q->decide = prom_histogram_new(
        "gpubox_queue_dispatch_seconds", "How long one dispatch pass took to decide", none,
        queue_decide_buckets, sizeof(queue_decide_buckets) / sizeof(queue_decide_buckets[0]));
    q->outcomes = prom_counter_new("gpubox_queue_outcomes_total",
                                   "Queued replica sets that left the queue, by how "
                                   "(started, timeout, dropped)",
                                   outcome);
    a->queue = q;
    if (pthread_create(&q->thread, NULL, queue_thread, q) != 0) {
        queue_free(a);
        return err_set(err, ERR_INTERNAL, "cannot start the queue's dispatcher thread");
    }
    q->running = true;
    queue_kick(a); /* requests queued before a restart start as soon as they fit */
    return 0;
}

void queue_stop(app *a)
{
    queue *q = a->queue;
    if (!q || !q->running)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    /* The waited moves running now end first: they need the fleet. */
    pthread_mutex_lock(&q->mu);
    while (json_object_size(q->moving))
        pthread_cond_wait(&q->moved, &q->mu);
    pthread_mutex_unlock(&q->mu);
    q->running = false;
}

void queue_free(app *a)
{
    queue *q = a->queue;
    if (!q)
        return;
    queue_stop(a);
    a->queue = NULL;
    json_decref(q->status);
    json_decref(q->moving);
    prom_family_free(q->wait);
    prom_family_free(q->decide);
    prom_family_free(q->outcomes);
    pthread_mutex_destroy(&q->mu);
    pthread_mutex_destroy(&q->pass_lock);
    pthread_cond_destroy(&q->cv);
    pthread_cond_destroy(&q->moved);
    free(q);
}
