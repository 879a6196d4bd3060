/*
 * fleet.h - several gpuboxd behind one API: membership, capacity, the
 * fleet-wide name index, and requests to other nodes (docs/fleet.md).
 *
 * A node is one gpuboxd started with --node NAME on an etcd store. Its own
 * records (replica sets, history, volumes, journal) live under
 * <prefix>/nodes/<node>/ through a store handle it has claimed (today's
 * claim, one per node). What the nodes share lives under <prefix>/fleet/,
 * through a second, unclaimed handle that this module owns:
 *
 *   registry/<node>             {node, advertise, labels, cordoned, joined}
 *                               kept after the node goes: a registered node
 *                               without a member key is unreachable
 *   members/<node>              {node, advertise, labels, version, started,
 *                               heartbeat}   on the node's claim lease
 *   capacity/<node>             {node, updated, devices, ports, volumes}
 *                               on the node's claim lease
 *   names/replicasets/<name>    {node, since}: which node owns a name;
 *   names/volumes/<name>        written by "absent -> put", so a name is
 *                               unique in the fleet
 *   leaders/<role>              {node, lease, since}: the node that leads
 *                               role (the queue's dispatcher), on its
 *                               claim's lease (fleet_lead)
 *   secret                      {secret, created}: the key that signs
 *                               requests between nodes (fleet_auth.h);
 *                               made at random by the first node that
 *                               finds none ("absent -> put"), read by
 *                               every node when it joins. Not used by a
 *                               node given --fleet-secret-file
 *
 * The member and capacity keys hang on the lease of the node's own claim:
 * when a node dies (kill -9, host down, cut off from etcd) etcd deletes
 * them at most STORE_CLAIM_TTL_S after its last keepalive, and the node is
 * unreachable to everyone else at the moment it may no longer write its
 * own records either. A thread re-publishes both every heartbeat (2 s) and
 * soon after fleet_poke, with whatever lease the claim holds then (a claim
 * taken again after an outage has a new one).
 *
 * A name entry whose node holds no record of that name and that is older
 * than FLEET_NAME_GRACE_S is stale (a create that failed half-way on a node
 * that then died) and may be claimed again.
 *
 * Thread-safe: every function may be called from any request thread.
 */
#ifndef GPUBOX_FLEET_FLEET_H
#define GPUBOX_FLEET_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "store/store.h"
#include "util/err.h"

#define FLEET_NODE_MAX 64
#define FLEET_URL_MAX 256
/* The header a forwarded request carries: the node that forwarded it. A
 * request with it is answered by the node that receives it, alone - when
 * FLEET_AUTH_HEADER proves that node sent it (fleet_auth.h). */
#define FLEET_FORWARDED_HEADER "X-Gpubox-Forwarded-By"
#define FLEET_AUTH_HEADER "X-Gpubox-Fleet-Auth"
#define FLEET_HEARTBEAT_MS 2000
#define FLEET_NAME_GRACE_S 60

typedef struct fleet fleet;

typedef struct fleet_config {
    const char *node;      /* this node's name */
    const char *advertise; /* "http://10.0.0.5:2378": where the others reach it */
    const char *labels;    /* "zone=a,rack=3" or NULL */
    const char *version;   /* gpubox's */
    const char *root_url;  /* the --store URL: the fleet's prefix */
    store *node_store;     /* this node's records, claimed: its lease carries membership */
    /* A file holding the fleet's secret (--fleet-secret-file); NULL: the
     * one in etcd, made by the first node that finds none. */
    const char *secret_file;
    /* This node's capacity record, without "node" and "updated"
     * (service/nodes/node.c: nodes_capacity); called from the heartbeat thread. */
    json_t *(*capacity)(void *ctx);
    void *capacity_ctx;
} fleet_config;

enum fleet_name_kind { FLEET_NAME_REPLICASET, FLEET_NAME_VOLUME };

enum fleet_node_state { FLEET_NODE_READY, FLEET_NODE_CORDONED, FLEET_NODE_UNREACHABLE };

typedef struct fleet_member {
    char name[FLEET_NODE_MAX];
    char advertise[FLEET_URL_MAX];
    char version[32];
    enum fleet_node_state state;
    bool alive;        /* its member key exists (lease alive) */
    bool cordoned;     /* no new placements */
    int64_t heartbeat; /* Unix ms of its last heartbeat; 0 when unknown */
    json_t *labels;    /* object, owned */
    json_t *capacity;  /* its capacity record, owned; NULL when not alive */
} fleet_member;

/* Parse --node-labels "k=v,k=v" into an object; ERR_INVALID_PARAMS naming
 * what is wrong. Keys and values: [A-Za-z0-9_.-/], keys non-empty, at
 * most 63 characters each. */
int fleet_labels_parse(const char *text, json_t **out, gb_err *err);
/* A node name: [A-Za-z0-9][A-Za-z0-9_.-]{0,62}. */
int fleet_node_name_check(const char *name, gb_err *err);

/* Join: open the fleet handle, register (keeping a cordon set earlier),
 * publish membership and capacity once, start the heartbeat thread. */
int fleet_open(const fleet_config *cfg, fleet **out, gb_err *err);
/* Stop the thread and take this node's member and capacity keys away, so
 * the others see it gone at once. NULL is a no-op. */
void fleet_close(fleet *f);
/* Publish the capacity record soon (after an allocation changed). */
void fleet_poke(fleet *f);
/* Publish this node's membership and capacity now, on the caller's thread
 * (what fleet_poke asks the heartbeat to do soon): a change another node
 * is told of at once must be in etcd before the telling. */
int fleet_publish_now(fleet *f, gb_err *err);
const char *fleet_node(const fleet *f);
const char *fleet_root_url(const fleet *f);

/* Every registered node, sorted by name; their capacity records only with
 * with_capacity (one range read more). */
int fleet_members(fleet *f, bool with_capacity, fleet_member **out, size_t *n, gb_err *err);
void fleet_members_free(fleet_member *m, size_t n);
/* Where to reach node, in one read when it is alive (forwarding): 1 alive
 * (advertise filled), 0 registered but unreachable, -1 with
 * ERR_NODE_UNAVAILABLE when it never joined, or a store error. */
int fleet_member_reach(fleet *f, const char *node, char *advertise, size_t size, gb_err *err);
/* One node; 1 found, 0 not registered. */
int fleet_member_get(fleet *f, const char *node, fleet_member *out, gb_err *err);
void fleet_member_clear(fleet_member *m);
const char *fleet_node_state_name(enum fleet_node_state s);
/* The node as the API shows it (GET /api/v1/nodes). */
json_t *fleet_member_json(const fleet_member *m);
/* Cordon (no new placements) or uncordon; ERR_NOT_FOUND for a node that
 * never joined. */
int fleet_cordon(fleet *f, const char *node, bool cordoned, gb_err *err);
/* Whether node is cordoned now (one read): 1 yes, 0 no (or never joined),
 * -1 on a store error. */
int fleet_cordoned(fleet *f, const char *node, gb_err *err);

/* ---- the name index (fleet_names.c) --------------------------------------- */

/* Which node owns name: 1 with node filled, 0 when nobody does. */
int fleet_name_owner(fleet *f, enum fleet_name_kind kind, const char *name, char *node, size_t size,
                     gb_err *err);
/* Take name for node: 1 taken (or already node's), 0 another node owns it
 * (owner filled; may be NULL), -1 error. record_key is where the owner
 * keeps that name's record (keys.h): an entry whose node has no such
 * record and is older than FLEET_NAME_GRACE_S is stale and taken over. */
int fleet_name_claim(fleet *f, enum fleet_name_kind kind, const char *name, const char *node,
                     const char *record_key, char *owner, size_t owner_size, gb_err *err);
/* Give name up if node owns it (no error when it does not). */
int fleet_name_release(fleet *f, enum fleet_name_kind kind, const char *name, const char *node,
                       gb_err *err);

/* Hand names (kinds[i] names[i], n of them) from node `from` to node `to`
 * in one transaction, only if `from` owns every one of them now (a
 * move's point of no return, service/move/): 1 moved, 0 not (some name
 * is not from's: nothing changed), -1 error. Names `to` owns already
 * count as moved. */
int fleet_names_move(fleet *f, const enum fleet_name_kind *kinds, const char *const *names,
                     size_t n, const char *from, const char *to, gb_err *err);
/* The queued replica set name (its record at record_key, revision
 * from_rev on node from, which owns the name) moves to node to, its record
 * there becoming value: in one transaction the name entry goes to `to`, the
 * record is put there and deleted on from (from == to: only the record is
 * put). 1 moved; 0 when the name entry or the record changed meanwhile
 * (nothing done); -1 error. */
int fleet_name_move(fleet *f, const char *name, const char *from, const char *to,
                    const char *record_key, int64_t from_rev, const char *value, gb_err *err);

/* ---- roles (fleet_names.c) -------------------------------------------------- */

/* Lead role (leaders/<role>, on the lease of this node's claim): 1 this
 * node leads it now (taken when nobody did), 0 another node does (holder
 * filled) or this node has no lease, -1 error. The key goes with the
 * lease, so a node killed hands the role over within STORE_CLAIM_TTL_S. */
int fleet_lead(fleet *f, const char *role, char *holder, size_t size, gb_err *err);

/* A read-only handle on another node's records (to list the sets of an
 * unreachable node); cached, owned by the fleet. */
store *fleet_node_store(fleet *f, const char *node, gb_err *err);

/* ---- requests to other nodes (fleet_http.c) -------------------------------- */

typedef struct fleet_request {
    const char *method;
    const char *path_query;    /* "/api/v1/replicaSet/foo?purge=true", encoded */
    const char *authorization; /* the caller's header, passed on; NULL: none */
    const char *body;
    size_t body_len;
    long timeout_ms; /* 0: none (a change runs as long as it runs) */
} fleet_request;

typedef struct fleet_answer {
    int status; /* 0: no answer (err says why) */
    char content_type[128];
    char *body;
    size_t body_len;
    gb_err err;
} fleet_answer;

/* Whether proof (FLEET_AUTH_HEADER's value, NULL when absent) shows that a
 * node of this fleet sent req (fleet_auth_check with the fleet's secret and
 * this node's clock); forwarded_by is FLEET_FORWARDED_HEADER's. 0 yes; -1
 * with ERR_FORBIDDEN saying why not. */
int fleet_request_verify(fleet *f, const char *proof, const char *forwarded_by,
                         const fleet_request *req, gb_err *err);

/* Send req to the node at advertise, signed as fleet_send does, with
 * extra_headers ("Name: value\r\n" lines) on a connection of its own,
 * and read the answer's head (into head, NUL-terminated) and status. 0
 * with *fd the connection, positioned just after the head (a 101's
 * switched stream, or an error's body); -1 (ERR_NODE_UNAVAILABLE) when
 * the node did not answer (fleet_upgrade.c). */
int fleet_upgrade(fleet *f, const char *advertise, const fleet_request *req,
                  const char *extra_headers, int *fd, long *status, char *head, size_t head_size,
                  gb_err *err);

/* Send req to the node at advertise, as forwarded by this node (signed:
 * fleet_auth.h). */
int fleet_send(fleet *f, const char *advertise, const fleet_request *req, fleet_answer *out,
               gb_err *err);
/* Send req to n nodes at once; answers[i] for advertise[i]. Never fails as
 * a whole: each answer says what happened. */
void fleet_send_many(fleet *f, const char *const *advertise, size_t n, const fleet_request *req,
                     fleet_answer *answers);
void fleet_answer_clear(fleet_answer *a);
/* fleet_send for an answer that is a stream (a move's data): a 200's body
 * is handed to sink(ctx, data, n) as it arrives, on the calling thread
 * (sink < 0 ends the transfer), *bytes (may be NULL) counting it as it
 * goes, for progress; any other status's body is kept in out->body, as
 * fleet_send's. -1 when no whole answer came. */
int fleet_send_to_sink(fleet *f, const char *advertise, const fleet_request *req,
                       int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                       _Atomic uint64_t *bytes, fleet_answer *out, gb_err *err);

#endif
