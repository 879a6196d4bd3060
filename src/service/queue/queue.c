/*
 * queue.c - submitting to the queue, reading it, and one dispatch pass
 * (queue.h is the specification; dispatch.c runs the passes in a thread).
 *
 * A pass works on a snapshot: the queued records, and when the sets that
 * hold cards with a maxDuration give them back (the head's due time). The
 * snapshot is turned into sched/placement_queue.h's entries, this node's
 * capacity into its one node (nodes_capacity, the record a fleet node
 * publishes), and the plan says who starts. GET /api/v1/queue is the same
 * pass without the starts.
 */
#include "util/xalloc.h"
#include "service/queue/queue_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/placement_queue.h"
#include "service/monitor/monitor.h"
#include "service/nodes/nodes.h"
#include "service/replicaset/record.h"
#include "service/replicaset/replicaset.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

int64_t queue_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the snapshot ---- */

void queue_snapshot_free(queue_snapshot *s)
{
    for (size_t i = 0; i < s->n; i++) {
        replicaset_record_free(&s->sets[i]);
        free(s->set_node[i]);
    }
    for (size_t i = 0; i < s->nrel; i++)
        free(s->rel_node[i]);
    free(s->sets);
    free(s->set_node);
    free(s->rel_at);
    free(s->rel_cards);
    free(s->rel_node);
    memset(s, 0, sizeof(*s));
}

static int queue_snapshot_one(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    queue_snapshot *s = ctx;
    /* A move that waits, unless it landed here (this node ends the wait)
     * or its move is under way (the record names the operation). */
    bool move = replicaset_move_waits(r) && !r->operation[0];
    const char *to = json_string_value(json_object_get(r->queue, "assigned"));
    if (move && to && s->reading && strcmp(to, s->reading) == 0)
        move = false;
    if (r->state == RS_STATE_QUEUED || move) {
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 16;
            s->sets = xrealloc(s->sets, s->cap * sizeof(*s->sets));
            s->set_node = xrealloc(s->set_node, s->cap * sizeof(*s->set_node));
        }
        s->set_node[s->n] = s->reading ? xstrdup(s->reading) : NULL;
        replicaset_record_copy(r, &s->sets[s->n]);
        s->sets[s->n].mod_revision = r->mod_revision;
        s->n++;
        if (!move)
            return 0;
    }
    /* A set that holds cards and has a maxDuration gives them back by then. */
    if ((r->state == RS_STATE_RUNNING || r->state == RS_STATE_PAUSED) && r->max_duration_s &&
        r->ngpus && r->running_since[0]) {
        time_t since = time_iso_parse(r->running_since);
        if (since) {
            if (s->nrel == s->relcap) {
                s->relcap = s->relcap ? s->relcap * 2 : 16;
                s->rel_at = xrealloc(s->rel_at, s->relcap * sizeof(*s->rel_at));
                s->rel_cards = xrealloc(s->rel_cards, s->relcap * sizeof(*s->rel_cards));
                s->rel_node = xrealloc(s->rel_node, s->relcap * sizeof(*s->rel_node));
            }
            s->rel_node[s->nrel] = s->reading ? xstrdup(s->reading) : NULL;
            s->rel_at[s->nrel] = ((int64_t)since + r->max_duration_s) * 1000;
            s->rel_cards[s->nrel] = (unsigned)r->ngpus;
            s->nrel++;
        }
    }
    return 0;
}

/* A fleet: every registered node's records (this node's through its own
 * handle, the others' read-only), each set tagged with its node. */
static int queue_snapshot_read_fleet(app *a, queue_snapshot *s, gb_err *err)
{
    nodes_peer *peers = NULL;
    size_t npeers = 0;
    if (nodes_peers(a, &peers, &npeers, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i <= npeers && rc == 0; i++) {
        const char *node = i < npeers ? peers[i].name : nodes_self(a);
        store *st = nodes_store_of(a, node, err);
        s->reading = node;
        rc = st ? replicaset_records_each(st, queue_snapshot_one, s, err) : -1;
        if (rc < 0)
            err_prefix(err, "node %s", node);
    }
    s->reading = NULL;
    free(peers);
    return rc;
}

int queue_snapshot_read(app *a, queue_snapshot *s, gb_err *err)
{
    memset(s, 0, sizeof(*s));
    if ((a->fleet ? queue_snapshot_read_fleet(a, s, err)
                  : replicaset_records_each(a->store, queue_snapshot_one, s, err)) < 0) {
        queue_snapshot_free(s);
        return err_prefix(err, "reading the queue");
    }
    return 0;
}

/* ---- a queued set's fields ---- */

int queue_priority_of(const replicaset_record *r)
{
    json_t *p = json_object_get(r->queue, "priority");
    return json_is_integer(p) ? (int)json_integer_value(p) : QUEUE_PRIORITY_DEFAULT;
}

int64_t queue_submit_ms_of(const replicaset_record *r)
{
    return (int64_t)json_integer_value(json_object_get(r->queue, "submitMs"));
}

int64_t queue_timeout_s_of(const replicaset_record *r)
{
    return (int64_t)json_integer_value(json_object_get(r->queue, "timeoutSeconds"));
}

static double queue_half_life(const app *a)
{
    return a->cfg.fairshare_half_life_s > 0 ? a->cfg.fairshare_half_life_s
                                            : QUEUE_HALF_LIFE_DEFAULT_S;
}

/* The owner's fair-share usage; each owner read once per pass (usage[] by
 * entry, owners looked up among the entries before). */
static void queue_usages(app *a, const queue_snapshot *s, double *usage, int64_t now_ms)
{
    for (size_t i = 0; i < s->n; i++) {
        usage[i] = -1;
        for (size_t k = 0; k < i && usage[i] < 0; k++)
            if (strcmp(s->sets[k].owner, s->sets[i].owner) == 0)
                usage[i] = usage[k];
        if (usage[i] >= 0)
            continue;
        gb_err e = GB_ERR_INIT;
        double u = 0;
        if (users_fairshare_usage(a, s->sets[i].owner, queue_half_life(a), (double)now_ms / 1000.0,
                                  &u, &e) < 0) {
            log_warn("queue: fair share of %s: %s (counted as 0)", s->sets[i].owner, e.msg);
            u = 0;
        }
        usage[i] = u;
    }
}

const char *queue_refused_why(const replicaset_record *r, int64_t now_ms)
{
    json_t *ref = json_object_get(r->queue, "refused");
    int64_t at = (int64_t)json_integer_value(json_object_get(ref, "ms"));
    if (!ref || now_ms - at >= QUEUE_REFUSED_FOR_MS)
        return NULL;
    return json_string_value(json_object_get(ref, "why"));
}

/* ---- the plan ---- */

void queue_plan_free(queue_plan *p)
{
    free(p->entries);
    free(p->usage);
    free(p->rel);
    free(p->labels);
    free(p->allowed);
    placement_node_free(&p->node);
    nodes_view_free(&p->view);
    memset(p, 0, sizeof(*p));
}

/* This node as placement's one node. */
static int queue_local_node(app *a, placement_node *out, gb_err *err)
{
    _cleanup_json_ json_t *cap = nodes_capacity(a);
    const char *self = a->cfg.node ? a->cfg.node : "local";
    json_object_set_new(cap, "node", json_string(self));
    json_object_set_new(cap, "updated", json_integer(queue_now_ms()));
    _cleanup_free_ char *text = json_dumps(cap, JSON_COMPACT);
    if (placement_node_parse(self, text, out, err) < 0)
        return -1;
    out->alive = true;
    return 0;
}

int queue_plan_make(app *a, const queue_snapshot *s, int64_t now_ms, size_t max_starts,
                    queue_plan *p, gb_err *err)
{
    memset(p, 0, sizeof(*p));
    p->entries = xcalloc(s->n ? s->n : 1, sizeof(*p->entries));
    p->usage = xcalloc(s->n ? s->n : 1, sizeof(*p->usage));
    p->rel = xcalloc(s->nrel ? s->nrel : 1, sizeof(*p->rel));
    p->labels = xcalloc(s->n ? s->n * RS_MAX_SELECTOR : 1, sizeof(*p->labels));
    if (a->fleet) {
        if (nodes_view_read(a, &p->view, err) < 0) {
            queue_plan_free(p);
            return err_prefix(err, "reading the fleet's nodes");
        }
        p->nodes = p->view.nodes;
        p->nnodes = p->view.n;
    } else {
        if (queue_local_node(a, &p->node, err) < 0) {
            queue_plan_free(p);
            return -1;
        }
        p->nodes = &p->node;
        p->nnodes = 1;
    }
    p->allowed = xcalloc(s->n * p->nnodes + 1, sizeof(*p->allowed));
    queue_usages(a, s, p->usage, now_ms);
    for (size_t i = 0; i < s->n; i++) {
        const replicaset_record *r = &s->sets[i];
        const replicaset_spec *sp = &r->spec;
        placement_queue_entry *e = &p->entries[i];
        e->name = r->name;
        e->priority = queue_priority_of(r);
        e->usage = p->usage[i];
        e->submit_ms = queue_submit_ms_of(r);
        e->max_duration_s = r->max_duration_s;
        bool no_gpu = json_is_true(json_object_get(r->queue, "noGpu"));
        const char *home = s->set_node[i];
        /* A queued restart keeps its container, and a set binding a named
         * volume needs that volume's node: they start where they wait. */
        bool restart = json_is_true(json_object_get(r->queue, "restart"));
        bool move = replicaset_move_waits(r);
        for (size_t b = 0; b < sp->nbinds && !restart && !move; b++)
            restart = sp->binds[b].src[0] != '/';
        e->req = (placement_request){
            .gpu_count =
                no_gpu ? 0 : (unsigned)(sp->gpu_count ? sp->gpu_count : (int)sp->ngpu_uuids),
            .memory_mib = sp->gpu_memory_mib,
            .timeslice = sp->gpu_shared && !sp->gpu_memory_mib,
            .model = sp->gpu_model,
            .ports_needed = (unsigned)sp->nports,
            .policy = GPUS_POLICY_BINPACK,
            .node = restart ? home : json_string_value(json_object_get(r->queue, "node")),
        };
        /* A move goes to any node but its own (its volumes go with it). */
        if (move && home) {
            const char **allowed = &p->allowed[i * p->nnodes];
            for (size_t k = 0; k < p->nnodes; k++)
                if (strcmp(p->nodes[k].name, home) != 0)
                    allowed[e->req.nallowed++] = p->nodes[k].name;
            e->req.allowed_nodes = allowed;
        }
        json_t *sel = json_object_get(r->queue, "nodeSelector");
        if (json_object_size(sel)) {
            placement_label *l = &p->labels[i * RS_MAX_SELECTOR];
            const char *k;
            json_t *v;
            json_object_foreach(sel, k, v)
            {
                if (e->req.nselector < RS_MAX_SELECTOR)
                    l[e->req.nselector++] = (placement_label){k, json_string_value(v)};
            }
            e->req.selector = l;
        }
    }
    size_t nrel = 0;
    for (size_t i = 0; i < s->nrel; i++) {
        size_t node = 0;
        if (a->fleet) {
            while (node < p->nnodes && strcmp(p->nodes[node].name, s->rel_node[i]) != 0)
                node++;
            if (node == p->nnodes)
                continue;
        }
        p->rel[nrel++] = (placement_queue_release){
            .node = node, .at_ms = s->rel_at[i], .cards = s->rel_cards[i]};
    }
    placement_queue_sort(p->entries, s->n);
    p->n = s->n;
    if (placement_queue_plan(p->entries, s->n, p->nodes, p->nnodes, p->rel, nrel, now_ms,
                             max_starts, &p->res, err) < 0) {
        queue_plan_free(p);
        return -1;
    }
    return 0;
}

const char *queue_snapshot_node(const queue_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->sets[i].name, name) == 0)
            return s->set_node[i];
    return NULL;
}

const replicaset_record *queue_snapshot_find(const queue_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->sets[i].name, name) == 0)
            return &s->sets[i];
    return NULL;
}

/* ---- submitting ---- */

/* Codes a wait may cure. */
bool queue_waitable(int code)
{
    return code == ERR_GPU_NOT_ENOUGH || code == ERR_PORT_NOT_ENOUGH ||
           code == ERR_CPU_NOT_ENOUGH || code == ERR_QUOTA_EXCEEDED;
}

/* The caller may ask priority (a `user`: up to their quota's maxPriority). */
static int queue_priority_check(app *a, int priority, gb_err *err)
{
    const caller *c = users_caller_current();
    if (!c || c->role != USER_ROLE_USER || !a->users)
        return 0;
    users_info ui;
    int64_t max = QUOTA_PRIORITY_DEFAULT;
    if (users_find(a->users, c->name, &ui))
        max = ui.quota.max_priority == QUOTA_UNLIMITED ? 100 : ui.quota.max_priority;
    if (priority <= max)
        return 0;
    return err_set(err, ERR_PRIORITY_NOT_ALLOWED,
                   "priority %d is above %s's maxPriority %lld; ask for %lld or less, or ask an "
                   "admin to raise quota.maxPriority (docs/queue.md)",
                   priority, c->name, (long long)max, (long long)max);
}

/* The pass started name at once: answered as a create is (CreateData:
 * the container, version and holdings), from the set's info. */
static int queue_started_answer(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *got = NULL;
    if (replicaset_info(a, name, &got, err) < 0)
        return -1;
    json_t *in = json_object_get(got, "info");
    *out = json_pack("{s:O?, s:s, s:O?, s:O?, s:O?}", "name", json_object_get(in, "containerName"),
                     "replicaSetName", name, "containerName", json_object_get(in, "containerName"),
                     "containerId", json_object_get(in, "containerId"), "version",
                     json_object_get(in, "version"));
    static const char *const more[] = {"gpus", "gpuShares", "ports", "cpuset", "ssh"};
    for (size_t i = 0; *out && i < sizeof(more) / sizeof(more[0]); i++)
        if (json_object_get(in, more[i]))
            json_object_set(*out, more[i], json_object_get(in, more[i]));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

/* {name, state: "queued", position, why} after name was queued. */
static json_t *queue_answer(app *a, const char *name, const char *why)
{
    json_t *st = queue_status(a, name);
    json_t *pos = json_object_get(st, "position");
    const char *w = json_string_value(json_object_get(st, "why"));
    json_t *out = json_pack("{s:s, s:s, s:O?, s:s}", "name", name, "state", "queued", "position",
                            pos, "why", w ? w : why);
    json_decref(st);
    return out;
}

/* The queue object of a request submitted now. */
static json_t *queue_request_json(int priority, int64_t timeout_s, const char *why)
{
    char now[RS_TIME_MAX];
    time_iso_now(now, sizeof(now));
    return json_pack("{s:i, s:s, s:I, s:I, s:s}", "priority",
                     priority < 0 ? QUEUE_PRIORITY_DEFAULT : priority, "submitTime", now,
                     "submitMs", (json_int_t)queue_now_ms(), "timeoutSeconds",
                     (json_int_t)timeout_s, "firstWhy", why);
}

/* After name was queued: a pass (the answer's position, and a start if room
 * came meanwhile), then the answer. */
static int queue_after_submit(app *a, const char *name, const char *why, json_t **out, bool *queued,
                              gb_err *err)
{
    gb_err pe = GB_ERR_INIT;
    if (queue_pass(a, &pe) < 0)
        log_warn("queue: a pass after queueing %s: %s", name, pe.msg);
    _cleanup_(replicaset_record_free) replicaset_record now_r = {0};
    if (replicaset_record_load(a->store, name, &now_r, err) < 0)
        return -1;
    if (now_r.state != RS_STATE_QUEUED)
        return queue_started_answer(a, name, out, err);
    *out = queue_answer(a, name, why);
    *queued = true;
    return 0;
}

int queue_create(app *a, replicaset_create_request *req, json_t **out, bool *queued, gb_err *err)
{
    *queued = false;
    int priority = req->priority < 0 ? QUEUE_PRIORITY_DEFAULT : req->priority;
    if (req->priority >= 0 && queue_priority_check(a, priority, err) < 0)
        return -1;
    char why[sizeof(err->msg)] = "others wait before it: the queue decides when it starts";
    /* While others wait, a queued request goes through the queue even if
     * it fits now: it must not take what the head has reserved. */
    /* In a fleet, placement tried every node already; a create pinned by
     * node or nodeSelector must not be made here unless the queue puts it
     * here. */
    bool pinned = a->fleet && (req->placement.node || req->placement.nselector);
    /* In a fleet a node that does not dispatch reads the fleet's queue
     * when asked (dispatch.c, queue_wake): now. */
    gb_err fe = GB_ERR_INIT;
    if (req->queue && a->fleet && !pinned && queue_pass(a, &fe) < 0)
        log_warn("queue: reading the fleet's queue: %s", fe.msg);
    if (!req->queue || (!queue_waiting(a) && !pinned)) {
        if (replicaset_create(a, req, out, err) == 0)
            return 0;
        if (!req->queue || !queue_waitable(err->code))
            return -1;
        snprintf(why, sizeof(why), "%s", err->msg);
    }
    _cleanup_json_ json_t *q = queue_request_json(priority, req->queue_timeout_s, why);
    /* Where it may go (a fleet's dispatcher respects it). */
    if (req->placement.node)
        json_object_set_new(q, "node", json_string(req->placement.node));
    if (req->placement.nselector) {
        json_t *sel = json_object();
        for (size_t i = 0; i < req->placement.nselector; i++)
            json_object_set_new(sel, req->placement.selector[i].key,
                                json_string(req->placement.selector[i].value));
        json_object_set_new(q, "nodeSelector", sel);
    }
    err_clear(err);
    if (replicaset_enqueue(a, req, q, err) < 0)
        return -1;
    return queue_after_submit(a, req->name, why, out, queued, err);
}

/* The restart with queue of a stopped set (err: why it did not start). */
static int queue_restart_wait(app *a, const char *name, const queue_restart_request *rq,
                              json_t **out, bool *queued, gb_err *err)
{
    char why[sizeof(err->msg)];
    snprintf(why, sizeof(why), "%s", err->msg);
    _cleanup_json_ json_t *q = queue_request_json(rq->priority, rq->timeout_s, why);
    err_clear(err);
    if (replicaset_enqueue_restart(a, name, rq->no_gpu, q, err) < 0)
        return -1;
    return queue_after_submit(a, name, why, out, queued, err);
}

/* Room refusals: what a move to another node, or a wait, may cure. */
static bool queue_room_refusal(int code)
{
    return code == ERR_GPU_NOT_ENOUGH || code == ERR_PORT_NOT_ENOUGH || code == ERR_CPU_NOT_ENOUGH;
}

int queue_restart(app *a, const char *name, const queue_restart_request *rq, json_t **out,
                  bool *queued, gb_err *err)
{
    *queued = false;
    if (rq->priority >= 0 && queue_priority_check(a, rq->priority, err) < 0)
        return -1;
    if (rq->move) {
        if (replicaset_restart_or_move(a, name, rq->no_gpu, rq->authorization, out, err) == 0)
            return 0;
        /* No node can take it now: with queue it waits, as a restart with
         * queue alone would (docs/queue.md). */
        if (!rq->queue || !queue_room_refusal(err->code))
            return -1;
    } else if (replicaset_restart(a, name, rq->no_gpu, out, err) == 0) {
        return 0;
    } else if (!rq->queue || !queue_waitable(err->code)) {
        return -1;
    }
    return queue_restart_wait(a, name, rq, out, queued, err);
}

int queue_move(app *a, const char *name, const queue_move_request *rq, json_t **out, bool *queued,
               gb_err *err)
{
    *queued = false;
    if (rq->priority >= 0 && queue_priority_check(a, rq->priority, err) < 0)
        return -1;
    if (rq->queue && rq->with_sharers)
        return err_set(err, ERR_INVALID_PARAMS,
                       "a move with withSharers cannot wait in the queue (the group is moved "
                       "at once or refused): leave out queue, or withSharers");
    replicaset_move_request mr = {.node = rq->node,
                                  .authorization = rq->authorization,
                                  .wait = rq->wait,
                                  .with_sharers = rq->with_sharers};
    if (replicaset_move(a, name, &mr, out, err) == 0)
        return 0;
    if (!rq->queue || !queue_room_refusal(err->code))
        return -1;
    char why[sizeof(err->msg)];
    snprintf(why, sizeof(why), "%s", err->msg);
    _cleanup_json_ json_t *q = queue_request_json(rq->priority, rq->timeout_s, why);
    if (rq->node)
        json_object_set_new(q, "node", json_string(rq->node));
    err_clear(err);
    if (replicaset_enqueue_move(a, name, q, err) < 0)
        return -1;
    gb_err pe = GB_ERR_INIT;
    if (queue_pass(a, &pe) < 0)
        log_warn("queue: a pass after queueing the move of %s: %s", name, pe.msg);
    *out = queue_answer(a, name, why);
    json_object_set_new(*out, "move", json_true());
    *queued = true;
    return 0;
}

int queue_cancel(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    int found = replicaset_record_load_visible(a->store, name, &r, err);
    if (found < 0)
        return -1;
    if (found && r.state == RS_STATE_QUEUED)
        return replicaset_delete(a, name, false, out, err);
    if (!found || !replicaset_move_waits(&r))
        return err_set(err, ERR_NOT_FOUND,
                       "replica set '%s' does not wait in the queue; GET /api/v1/queue lists what "
                       "does",
                       name);
    if (replicaset_move_wait_end(a, name, 0, NULL, NULL, err) < 0)
        return err_prefix(err, "cancelling the move of %s", name);
    *out = json_pack("{s:s, s:b, s:b, s:s}", "name", name, "cancelled", true, "move", true, "state",
                     replicaset_state_name(r.state));
    queue_kick(a);
    return 0;
}

bool queue_may_wait_here(app *a, const replicaset_create_request *req, const gb_err *err)
{
    (void)a;
    (void)req;
    return err && queue_waitable(err->code);
}

/* ---- reading ---- */

static json_t *queue_asks_json(const replicaset_record *r)
{
    const replicaset_spec *sp = &r->spec;
    return json_pack("{s:i, s:I, s:b, s:s?, s:i, s:i}", "gpuCount",
                     sp->gpu_count ? sp->gpu_count : (int)sp->ngpu_uuids, "gpuMemoryMiB",
                     (json_int_t)sp->gpu_memory_mib, "gpuShared", sp->gpu_shared, "gpuModel",
                     sp->gpu_model, "cpuCount", sp->cpu_count, "ports", (int)sp->nports);
}

json_t *queue_entry_json(const queue_plan *p, size_t i, const queue_snapshot *s, int64_t now_ms,
                         bool named)
{
    const placement_queue_entry *e = &p->entries[i];
    const replicaset_record *r = queue_snapshot_find(s, e->name);
    json_t *j = json_pack("{s:I, s:i, s:b}", "position", (json_int_t)(i + 1), "priority",
                          e->priority, "head", e->head);
    if (!named || !r)
        return j;
    json_object_set_new(j, "name", json_string(r->name));
    json_object_set_new(j, "owner", json_string(r->owner));
    if (replicaset_move_waits(r)) {
        json_object_set_new(j, "move", json_true());
        json_object_set_new(j, "state", json_string(replicaset_state_name(r->state)));
        const char *node = queue_snapshot_node(s, r->name);
        if (node)
            json_object_set_new(j, "node", json_string(node));
    }
    json_object_set_new(j, "asks", queue_asks_json(r));
    json_object_set_new(j, "fairShareUsage", json_real(e->usage));
    json_object_set(j, "submitTime", json_object_get(r->queue, "submitTime"));
    json_object_set_new(j, "waitedSeconds",
                        json_integer((json_int_t)((now_ms - e->submit_ms) / 1000)));
    json_object_set_new(j, "queueTimeoutSeconds", json_integer((json_int_t)queue_timeout_s_of(r)));
    const char *refused = queue_refused_why(r, now_ms);
    json_object_set_new(j, "why",
                        json_string(e->start < 0 ? e->why
                                    : refused    ? refused
                                                 : "starting now"));
    if (e->head && p->res.held) {
        json_t *res =
            json_pack("{s:s, s:i}", "node", p->nodes[p->res.node].name, "cards", (int)p->res.cards);
        if (p->res.due_ms != INT64_MAX)
            json_object_set_new(res, "dueInSeconds",
                                json_integer((json_int_t)((p->res.due_ms - now_ms) / 1000)));
        json_object_set_new(j, "reservation", res);
    }
    return j;
}

int queue_list(app *a, json_t **out, gb_err *err)
{
    /* The order is everyone's: read and decided as the daemon, then shown
     * as the caller may see it. */
    caller saved = {0};
    const caller *c = users_caller_current();
    if (c) {
        saved = *c;
        users_caller_leave();
    }
    _cleanup_(queue_snapshot_free) queue_snapshot s;
    int64_t now = queue_now_ms();
    _cleanup_(queue_plan_free) queue_plan p = {0};
    int rc = queue_snapshot_read(a, &s, err);
    if (rc == 0 && (rc = queue_plan_make(a, &s, now, 0, &p, err)) < 0)
        err_prefix(err, "ordering the queue");
    if (c)
        users_caller_enter(&saved);
    if (rc < 0)
        return -1;
    json_t *list = json_array();
    for (size_t i = 0; i < p.n; i++) {
        const replicaset_record *r = queue_snapshot_find(&s, p.entries[i].name);
        bool named = r && users_caller_sees(r->owner);
        json_array_append_new(list, queue_entry_json(&p, i, &s, now, named));
    }
    *out = json_pack("{s:o, s:I, s:f}", "queue", list, "length", (json_int_t)p.n,
                     "fairShareHalfLifeSeconds", queue_half_life(a));
    return 0;
}
