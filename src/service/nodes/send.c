/*
 * send.c - requests to other nodes of the fleet, as the API forwards them:
 * signed as sent by this node (fleet/fleet_auth.h), carrying the caller's
 * Authorization, and the check of a request another node sent here.
 */
#include "util/xalloc.h"
#include "service/nodes/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(NODES_NAME_MAX == FLEET_NODE_MAX, "a node's name, as fleet.h bounds it");
_Static_assert(NODES_URL_MAX == FLEET_URL_MAX, "a node's address, as fleet.h bounds it");

static fleet_request fleet_request_of(const nodes_request *r)
{
    return (fleet_request){.method = r->method,
                           .path_query = r->path_query,
                           .authorization = r->authorization,
                           .body = r->body,
                           .body_len = r->body_len,
                           .timeout_ms = r->timeout_ms};
}

/* Takes the fleet answer's body. */
static void answer_of(fleet_answer *fa, nodes_answer *out)
{
    out->status = fa->status;
    snprintf(out->content_type, sizeof(out->content_type), "%s", fa->content_type);
    out->body = fa->body;
    out->body_len = fa->body_len;
    out->err = fa->err;
    fa->body = NULL;
    fa->body_len = 0;
}

int nodes_verify(app *a, const char *proof, const char *forwarded_by, const nodes_request *req,
                 gb_err *err)
{
    fleet_request fr = fleet_request_of(req);
    return fleet_request_verify(a->fleet, proof, forwarded_by, &fr, err);
}

int nodes_reach(app *a, const char *node, char *advertise, size_t size, gb_err *err)
{
    int alive = fleet_member_reach(a->fleet, node, advertise, size, err);
    if (alive < 0)
        return -1;
    if (!alive)
        return err_set(err, ERR_NODE_UNAVAILABLE,
                       "node %s, which holds it, is unreachable (no heartbeat within its lease); "
                       "nothing it holds is given to another node",
                       node);
    return 0;
}

int nodes_send(app *a, const char *advertise, const nodes_request *req, nodes_answer *out,
               gb_err *err)
{
    fleet_request fr = fleet_request_of(req);
    fleet_answer fa;
    int rc = fleet_send(a->fleet, advertise, &fr, &fa, err);
    answer_of(&fa, out);
    fleet_answer_clear(&fa);
    return rc;
}

int nodes_send_to_sink(app *a, const char *advertise, const nodes_request *req,
                       int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                       _Atomic uint64_t *bytes, nodes_answer *out, gb_err *err)
{
    fleet_request fr = fleet_request_of(req);
    fleet_answer fa;
    int rc = fleet_send_to_sink(a->fleet, advertise, &fr, sink, ctx, bytes, &fa, err);
    answer_of(&fa, out);
    fleet_answer_clear(&fa);
    return rc;
}

void nodes_send_many(app *a, const char *const *advertise, size_t n, const nodes_request *req,
                     nodes_answer *answers)
{
    fleet_request fr = fleet_request_of(req);
    fleet_answer *fa = xcalloc(n ? n : 1, sizeof(*fa));
    fleet_send_many(a->fleet, advertise, n, &fr, fa);
    for (size_t i = 0; i < n; i++) {
        answer_of(&fa[i], &answers[i]);
        fleet_answer_clear(&fa[i]);
    }
    free(fa);
}

void nodes_answer_clear(nodes_answer *ans)
{
    free(ans->body);
    ans->body = NULL;
    ans->body_len = 0;
}

int nodes_upgrade(app *a, const char *advertise, const nodes_request *req,
                  const char *extra_headers, int *fd, long *status, char *head, size_t head_size,
                  gb_err *err)
{
    fleet_request fr = fleet_request_of(req);
    return fleet_upgrade(a->fleet, advertise, &fr, extra_headers, fd, status, head, head_size, err);
}
