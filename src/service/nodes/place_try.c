/*
 * place_try.c - trying the ranked candidates of a create in turn (place.h
 * says the rules). It knows no fleet and no HTTP: the name index and the
 * create come as callbacks, so a test can drive it.
 */
#include "service/nodes/place.h"

#include <stdio.h>
#include <string.h>

bool nodes_is_refusal(int code)
{
    return code == ERR_GPU_NOT_ENOUGH || code == ERR_PORT_NOT_ENOUGH;
}

int nodes_forward_to_holder(const nodes_index *ix, const char *node,
                            const nodes_create_calls *calls, gb_err *err)
{
    char advertise[NODES_URL_MAX];
    int alive = ix->reach(ix->ctx, node, advertise, sizeof(advertise), err);
    if (alive < 0)
        return -1;
    if (!alive)
        return err_set(err, ERR_NODE_UNAVAILABLE,
                       "node %s, which holds it, is unreachable (no heartbeat within its lease); "
                       "nothing it holds is given to another node",
                       node);
    gb_err answer = GB_ERR_INIT;
    if (calls->forward(calls->ctx, node, advertise, &answer, err) < 0)
        return err_prefix(err, "forwarding to node %s", node);
    calls->pass(calls->ctx);
    return 0;
}

static void note_refusal(char *refusals, size_t size, const char *node, const char *msg)
{
    size_t used = strlen(refusals);
    snprintf(refusals + used, size - used, "%snode %s: %s", used ? "; " : "", node,
             msg && *msg ? msg : "refused");
}

int nodes_try_candidates(const nodes_candidate *c, size_t n, const char *self,
                         const nodes_index *ix, const nodes_create_calls *calls, int fail_code,
                         gb_err *err)
{
    char refusals[1024] = "";
    for (size_t i = 0; i < n; i++) {
        bool last = i + 1 == n;
        char holder[NODES_NAME_MAX] = "";
        int claimed = ix->claim(ix->ctx, c[i].name, holder, sizeof(holder), err);
        if (claimed < 0)
            return -1;
        if (claimed == 0) /* another create won the name: its node answers */
            return nodes_forward_to_holder(ix, holder, calls, err);
        if (strcmp(c[i].name, self) == 0) {
            /* a create here gives up a name it did not keep itself */
            if (calls->here(calls->ctx, err) == 0)
                return 0;
            if (!nodes_is_refusal(err->code) || last)
                return -1;
            note_refusal(refusals, sizeof(refusals), c[i].name, err->msg);
            err_clear(err);
            continue;
        }
        gb_err answer = GB_ERR_INIT;
        gb_err send_err = GB_ERR_INIT;
        int sent = calls->forward(calls->ctx, c[i].name, c[i].advertise, &answer, &send_err);
        if (sent == 0 && !(nodes_is_refusal(answer.code) && !last)) {
            calls->pass(calls->ctx);
            return 0;
        }
        note_refusal(refusals, sizeof(refusals), c[i].name, sent == 0 ? answer.msg : send_err.msg);
        ix->release(ix->ctx, c[i].name);
    }
    return err_set(err, fail_code, "no node of the fleet took it: %s", refusals);
}
