/*
 * place.h - the part of placement that decides, without the fleet: trying
 * the ranked candidates in turn (place_try.c). nodes_place_create ranks the
 * fleet's nodes and hands them here with the fleet's name index; a unit
 * test (tests/unit/test_nodes_place.c) hands fakes.
 *
 * For each candidate in order: claim the name for it (a node that claimed
 * it first in a race wins, and the create goes there), make the create
 * (here, or forwarded) and answer with it - unless the node refused for
 * lack of room (1013, 1014: its capacity record was stale) while another
 * candidate is left, or did not answer: then the claim is released and the
 * next candidate tried. None could: fail_code naming every refusal.
 */
#ifndef GPUBOX_SERVICE_NODES_PLACE_H
#define GPUBOX_SERVICE_NODES_PLACE_H

#include <stddef.h>

#include "service/nodes/nodes.h"

typedef struct nodes_candidate {
    const char *name;
    const char *advertise;
} nodes_candidate;

/* The fleet's name index for one name, as placement uses it. */
typedef struct nodes_index {
    void *ctx;
    /* Take the name for node: 1 taken, 0 another node holds it (holder
     * filled), -1 error. */
    int (*claim)(void *ctx, const char *node, char *holder, size_t size, gb_err *err);
    /* Give the name up if node holds it. */
    void (*release)(void *ctx, const char *node);
    /* Where node is reached: 1 alive (advertise filled), 0 unreachable, -1
     * error. */
    int (*reach)(void *ctx, const char *node, char *advertise, size_t size, gb_err *err);
} nodes_index;

/* Whether a node's answer refuses for lack of room: placement read a stale
 * capacity record, and the next candidate may take it. */
bool nodes_is_refusal(int code);

/* Forward to node, which holds the name, and pass its answer on; it is
 * unreachable: ERR_NODE_UNAVAILABLE. */
int nodes_forward_to_holder(const nodes_index *ix, const char *node,
                            const nodes_create_calls *calls, gb_err *err);

/* Try the candidates c[0..n) in order (see above); self is this node's
 * name. 0 when the client has its answer, -1 with err. */
int nodes_try_candidates(const nodes_candidate *c, size_t n, const char *self,
                         const nodes_index *ix, const nodes_create_calls *calls, int fail_code,
                         gb_err *err);

#endif
