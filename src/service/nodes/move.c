/*
 * move.c - what a move of a replica set between nodes (replicaset/move.c)
 * asks of the fleet: the stream of its data from the other node, the
 * name index handed over at the move's point of no return, and a look at
 * the other node's journal when a move is settled after a crash.
 */
#include "util/xalloc.h"
#include "service/nodes/internal.h"

#include <stdio.h>
#include <stdlib.h>

static void answer_from(fleet_answer *fa, nodes_answer *out)
{
    out->status = fa->status;
    snprintf(out->content_type, sizeof(out->content_type), "%s", fa->content_type);
    out->body = fa->body;
    out->body_len = fa->body_len;
    out->err = fa->err;
    fa->body = NULL;
    fleet_answer_clear(fa);
}

static fleet_request request_of(const nodes_request *req)
{
    return (fleet_request){.method = req->method,
                           .path_query = req->path_query,
                           .authorization = req->authorization,
                           .body = req->body,
                           .body_len = req->body_len,
                           .timeout_ms = req->timeout_ms};
}

int nodes_send_to_sink(app *a, const char *advertise, const nodes_request *req,
                       int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                       _Atomic uint64_t *bytes, nodes_answer *out, gb_err *err)
{
    fleet_request fr = request_of(req);
    fleet_answer fa;
    int rc = fleet_send_to_sink(a->fleet, advertise, &fr, sink, ctx, bytes, &fa, err);
    answer_from(&fa, out);
    return rc;
}

int nodes_name_owner(app *a, enum nodes_kind kind, const char *name, char *node, size_t size,
                     gb_err *err)
{
    return fleet_name_owner(a->fleet, nodes_fleet_kind(kind), name, node, size, err);
}

int nodes_names_move(app *a, const enum nodes_kind *kinds, const char *const *names, size_t n,
                     const char *from, const char *to, gb_err *err)
{
    enum fleet_name_kind *fk = xcalloc(n ? n : 1, sizeof(*fk));
    for (size_t i = 0; i < n; i++)
        fk[i] = nodes_fleet_kind(kinds[i]);
    int rc = fleet_names_move(a->fleet, fk, names, n, from, to, err);
    free(fk);
    return rc;
}

struct store *nodes_peer_store(app *a, const char *node, gb_err *err)
{
    return fleet_node_store(a->fleet, node, err);
}
