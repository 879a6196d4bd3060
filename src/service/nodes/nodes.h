/*
 * nodes.h - the fleet's decisions (docs/fleet.md): which node answers a
 * request for a name, where a create is placed, when this node gives a
 * name up, and this gpuboxd as a node (joining, its capacity record).
 *
 * The API (src/api/fleet_*.c) does HTTP only: it re-encodes the path,
 * forwards with the caller's identity (nodes_send), passes answers back
 * and merges lists. Everything it asks the fleet goes through here, so it
 * knows no key layout, no placement and no name index:
 *
 *   nodes_route_name     where a request for a name goes: here, to the
 *                        node that owns it, or placement (a create)
 *   nodes_place_create   rank the candidates, claim the name for each in
 *                        turn, create through the caller's callbacks (a
 *                        forward, or a create here); the next candidate
 *                        when a node refused for lack of room (its
 *                        capacity record was stale) or did not answer;
 *                        the claim released after such a failed create
 *   nodes_release_unheld after a create or delete here (a purge): the
 *                        name is given up when this node keeps no record
 *
 * Without --node every function answers as a single server would: the
 * route is "here", nothing is claimed or released.
 */
#ifndef GPUBOX_SERVICE_NODES_NODES_H
#define GPUBOX_SERVICE_NODES_NODES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "sched/placement.h"
#include "service/app.h"
#include "store/store.h"
#include "util/err.h"

/* As fleet/fleet.h's FLEET_NODE_MAX and FLEET_URL_MAX, and its headers
 * (tests/unit/test_nodes_place.c checks that they agree). */
#define NODES_NAME_MAX 64
#define NODES_URL_MAX 256
#define NODES_FORWARDED_HEADER "X-Gpubox-Forwarded-By"
#define NODES_AUTH_HEADER "X-Gpubox-Fleet-Auth"

/* Which of the fleet's name indexes a name lives in. */
enum nodes_kind { NODES_REPLICASET, NODES_VOLUME };

/* ---- this node (node.c) ------------------------------------------------------- */

/* Move a single server's records (at the fleet prefix's root) under this
 * node; run after the node's claim, before anything reads the records. */
int nodes_migrate(app *a, gb_err *err);
/* Join the fleet and claim the names of this node's records. */
int nodes_join(app *a, gb_err *err);
/* This node's capacity record (fleet_config.capacity). */
json_t *nodes_capacity(void *app);
/* This node's name; NULL on a single server. */
const char *nodes_self(const app *a);
/* Does this node keep a record of name (1), or not (0)? -1 on error. */
int nodes_holds(app *a, enum nodes_kind kind, const char *name, gb_err *err);
/* 0 when this node takes new sets or volumes; -1 while it is cordoned
 * (as placement refuses it: ERR_GPU_NOT_ENOUGH "... cordoned: NODE", or
 * ERR_VOLUME_CREATE_FAILED for a volume), or on a store error. A create
 * that reaches the node by any way - a forward from a node whose view of
 * the cordon was stale, a name this node already holds - checks it here.
 * When it refuses, name (if not NULL) is given up as after a failed create. */
int nodes_check_uncordoned(app *a, enum nodes_kind kind, const char *name, gb_err *err);
/* Before a create here: claim name for this node. Another node's name is
 * refused (ERR_EXISTS / ERR_VOLUME_EXISTS naming that node). */
int nodes_claim_here(app *a, enum nodes_kind kind, const char *name, gb_err *err);
/* After a change here: publish the capacity record soon. */
void nodes_poke(app *a);
/* After a create or delete here (a failed create, a purge): give name up
 * unless this node still keeps a record of it. */
void nodes_release_unheld(app *a, enum nodes_kind kind, const char *name);

/* ---- where a request goes (route.c) ---------------------------------------------- */

enum nodes_where {
    NODES_HERE,    /* this node answers */
    NODES_FORWARD, /* node answers: forward the request to it */
    NODES_PLACE,   /* a create of a name nobody (alive) holds: nodes_place_create */
};

typedef struct nodes_route {
    enum nodes_where where;
    /* FORWARD: the owner; PLACE: the owner that is gone (or ""), which
     * answers "unreachable" when no other node can take the name */
    char node[NODES_NAME_MAX];
    /* FORWARD of a create: where the owner is reached (read with its
     * liveness); "" otherwise: nodes_send reaches node itself */
    char advertise[NODES_URL_MAX];
} nodes_route;

/* Where a request for name goes: the owner answers a read or change of a
 * name (here when this node owns it or nobody does); a create goes to the
 * owner when it is alive, else to placement. */
int nodes_route_name(app *a, enum nodes_kind kind, const char *name, bool create, nodes_route *out,
                     gb_err *err);

/* Where the service proxy sends a request for replica set `set`: 0 this
 * node answers (it owns the set, nobody does, or there is no fleet); 1
 * another node does, whose proxy is at addr ("10.0.0.5:2380"); -1 with
 * ERR_NODE_UNAVAILABLE when that node is unreachable or runs no proxy. */
int nodes_proxy_of(app *a, const char *set, char *addr, size_t size, gb_err *err);

/* ---- requests to other nodes (send.c) ------------------------------------------------ */

typedef struct nodes_request {
    const char *method;
    const char *path_query;    /* encoded: "/api/v1/replicaSet/foo?purge=true" */
    const char *authorization; /* the caller's header, passed on; NULL: none */
    const char *body;
    size_t body_len;
    long timeout_ms; /* 0: none (a change runs as long as it runs) */
} nodes_request;

typedef struct nodes_answer {
    int status; /* 0: no answer (err says why) */
    char content_type[128];
    char *body;
    size_t body_len;
    gb_err err;
} nodes_answer;

/* Whether proof (NODES_AUTH_HEADER's value, NULL when absent) shows that a
 * node of this fleet sent req; forwarded_by is NODES_FORWARDED_HEADER's. 0
 * yes; -1 with ERR_FORBIDDEN saying why not. */
int nodes_verify(app *a, const char *proof, const char *forwarded_by, const nodes_request *req,
                 gb_err *err);
/* Where node, which holds a name, is reached now: 0 with advertise
 * filled; -1 with ERR_NODE_UNAVAILABLE when it is not alive. */
int nodes_reach(app *a, const char *node, char *advertise, size_t size, gb_err *err);
/* Send req to the node at advertise, signed as forwarded by this node.
 * -1 when no answer came (err says why). */
int nodes_send(app *a, const char *advertise, const nodes_request *req, nodes_answer *out,
               gb_err *err);
/* Send req to n nodes at once; answers[i] for advertise[i]. */
void nodes_send_many(app *a, const char *const *advertise, size_t n, const nodes_request *req,
                     nodes_answer *answers);
void nodes_answer_clear(nodes_answer *ans);
/* Send req to the node at advertise as nodes_send does, with
 * extra_headers, keeping the connection (fleet_upgrade): for an answer
 * that switches protocols (a terminal). */
int nodes_upgrade(app *a, const char *advertise, const nodes_request *req,
                  const char *extra_headers, int *fd, long *status, char *head, size_t head_size,
                  gb_err *err);

/* ---- the nodes (members.c) -------------------------------------------------------- */

typedef struct nodes_peer {
    char name[NODES_NAME_MAX];
    char advertise[NODES_URL_MAX];
    bool alive;
} nodes_peer;

/* Every other registered node, sorted by name; free *out. */
int nodes_peers(app *a, nodes_peer **out, size_t *n, gb_err *err);
/* The sets of node (one that does not answer), from its records, each
 * with status "unknown". */
int nodes_offline_sets(app *a, const char *node, bool all, json_t **items, gb_err *err);
/* GET /api/v1/nodes: every node as the API shows it. */
int nodes_list(app *a, json_t **nodes, gb_err *err);
/* Cordon or uncordon node; *out is the node as the API shows it. */
int nodes_cordon(app *a, const char *node, bool cordoned, json_t **out, gb_err *err);

/* ---- placement (place.c) ------------------------------------------------------------ */

/* How a create is made once a node is picked: the API's side, HTTP. */
typedef struct nodes_create_calls {
    void *ctx;
    /* Run the create here (the name is claimed for this node): 0, or -1
     * with err (a refusal for lack of room tries the next candidate). The
     * create gives a name it did not keep up itself (nodes_release_unheld). */
    int (*here)(void *ctx, gb_err *err);
    /* Send the create to node at advertise and hold its answer: 0 when it
     * answered (answer's code ERR_OK when it made it, else the envelope's
     * code and msg), -1 when it did not (err says why). */
    int (*forward)(void *ctx, const char *node, const char *advertise, gb_err *answer, gb_err *err);
    /* Answer the client with the answer the last forward holds. */
    void (*pass)(void *ctx);
} nodes_create_calls;

struct replicaset_create_request;

typedef struct nodes_place {
    enum nodes_kind kind;
    const char *name;
    const struct replicaset_create_request *set; /* NODES_REPLICASET: the parsed create */
    const char *volume_node; /* NODES_VOLUME: the body's node and size, or NULL */
    const char *volume_size;
    const char *gone_owner; /* nodes_route.node of NODES_PLACE ("" or NULL: none) */
} nodes_place;

/* A move (replicaset/move.c): the node a set of this spec goes to,
 * pinned (pin) or placed as its create would be, its volumes going with
 * it and this node left out; node and advertise filled. Refusals as
 * placement's (1013 naming why). */
struct replicaset_spec;
int nodes_move_target(app *a, const struct replicaset_spec *spec, const char *pin, char *node,
                      size_t node_size, char *advertise, size_t advertise_size, gb_err *err);

/* ---- moves between nodes (move.c) ------------------------------------------------ */

/* nodes_send for an answer streamed to sink as it arrives (fleet_send_to_sink). */
int nodes_send_to_sink(app *a, const char *advertise, const nodes_request *req,
                       int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                       _Atomic uint64_t *bytes, nodes_answer *out, gb_err *err);
/* Which node owns name: 1 with node filled, 0 nobody. */
int nodes_name_owner(app *a, enum nodes_kind kind, const char *name, char *node, size_t size,
                     gb_err *err);
/* Hand names (kinds[i], names[i]) from node from to node to, all or none
 * (fleet_names_move): 1 moved, 0 not every one is from's, -1 error. */
int nodes_names_move(app *a, const enum nodes_kind *kinds, const char *const *names, size_t n,
                     const char *from, const char *to, gb_err *err);
/* The store of another node's records, read-only (its journal). */
struct store;
struct store *nodes_peer_store(app *a, const char *node, gb_err *err);

/* Place and create: 0 when the client has its answer (made here, or an
 * answer passed); -1 with err (1013 naming every node's refusal when none
 * took it, ERR_VOLUME_CREATE_FAILED for a volume). */
int nodes_place_create(app *a, const nodes_place *p, const nodes_create_calls *calls, gb_err *err);

/* ---- the queue in a fleet (queue_view.c) ------------------------------------------- */

/* Every registered node as placement sees it (capacity, alive, cordon,
 * labels), sorted by name. */
typedef struct nodes_view {
    placement_node *nodes;
    size_t n;
    /* owned, internal */
    struct fleet_member *members;
    placement_label *labels;
} nodes_view;

int nodes_view_read(app *a, nodes_view *v, gb_err *err);
void nodes_view_free(nodes_view *v);
/* The records of node (this node's: a->store; another's: read-only). */
store *nodes_store_of(app *a, const char *node, gb_err *err);
/* Whether this node leads role in the fleet now (fleet_lead): 1 yes (a
 * single server always), 0 no (holder filled), -1 error. */
int nodes_lead(app *a, const char *role, char *holder, size_t size, gb_err *err);
/* Move queued set name (revision rev on node from) to node to, its record
 * there becoming value, in one transaction with the name entry
 * (fleet_name_move): 1 moved, 0 it changed meanwhile, -1 error. */
/* Tell node's queue (POST QUEUE_TELL_PATH, signed as from this node) what
 * changed: "freed" (room was given back here: the dispatcher should pass)
 * or "assigned" (a request waits on that node for it to act). This node's
 * capacity record is published first, so the dispatcher reads it. */
#define NODES_QUEUE_TELL_PATH "/api/v1/internal/queue/tell"
int nodes_queue_tell(app *a, const char *node, const char *what, gb_err *err);
int nodes_move_queued(app *a, const char *name, const char *from, const char *to, int64_t rev,
                      const char *value, gb_err *err);

#endif
