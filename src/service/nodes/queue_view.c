/*
 * queue_view.c - what the queue needs of the fleet (docs/queue.md, "In a
 * fleet"): every node as placement sees it, each node's records, the
 * dispatcher's role, and a queued set moving to the node it starts on.
 */
#include "util/xalloc.h"
#include "service/nodes/nodes.h"

#include <stdlib.h>
#include <string.h>

#include "service/nodes/internal.h"
#include "util/cleanup.h"

#define VIEW_MAX_LABELS 16

void nodes_view_free(nodes_view *v)
{
    for (size_t i = 0; i < v->n; i++)
        placement_node_free(&v->nodes[i]);
    free(v->nodes);
    free(v->labels);
    fleet_members_free(v->members, v->n);
    memset(v, 0, sizeof(*v));
}

int nodes_view_read(app *a, nodes_view *v, gb_err *err)
{
    memset(v, 0, sizeof(*v));
    fleet_member *m = NULL;
    size_t n = 0;
    if (fleet_members(a->fleet, true, &m, &n, err) < 0)
        return -1;
    v->members = m;
    v->n = n;
    v->nodes = xcalloc(n ? n : 1, sizeof(*v->nodes));
    v->labels = xcalloc(n * VIEW_MAX_LABELS + 1, sizeof(*v->labels));
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *cap = m[i].capacity ? json_dumps(m[i].capacity, JSON_COMPACT) : NULL;
        gb_err ignored = GB_ERR_INIT;
        placement_node_parse(m[i].name, cap, &v->nodes[i], &ignored);
        v->nodes[i].alive = m[i].alive;
        v->nodes[i].cordoned = m[i].cordoned;
        v->nodes[i].labels = &v->labels[i * VIEW_MAX_LABELS];
        const char *k;
        json_t *val;
        json_object_foreach(m[i].labels, k, val)
        {
            if (v->nodes[i].nlabels < VIEW_MAX_LABELS)
                v->labels[i * VIEW_MAX_LABELS + v->nodes[i].nlabels++] =
                    (placement_label){k, json_string_value(val)};
        }
    }
    return 0;
}

store *nodes_store_of(app *a, const char *node, gb_err *err)
{
    const char *self = nodes_self(a);
    if (!self || strcmp(node, self) == 0)
        return a->store;
    return fleet_node_store(a->fleet, node, err);
}

int nodes_lead(app *a, const char *role, char *holder, size_t size, gb_err *err)
{
    if (!a->fleet)
        return 1;
    return fleet_lead(a->fleet, role, holder, size, err);
}

int nodes_queue_tell(app *a, const char *node, const char *what, gb_err *err)
{
    if (strcmp(what, "freed") == 0 && fleet_publish_now(a->fleet, err) < 0)
        return -1;
    char advertise[NODES_URL_MAX];
    if (nodes_reach(a, node, advertise, sizeof(advertise), err) < 0)
        return -1;
    _cleanup_json_ json_t *body = json_pack("{s:s}", "what", what);
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    nodes_request rq = {.method = "POST",
                        .path_query = NODES_QUEUE_TELL_PATH,
                        .body = text,
                        .body_len = text ? strlen(text) : 0,
                        .timeout_ms = 2000};
    nodes_answer ans = {0};
    int rc = nodes_send(a, advertise, &rq, &ans, err);
    if (rc == 0 && ans.status / 100 != 2)
        rc = err_set(err, ERR_NODE_UNAVAILABLE, "node %s answered %d to %s", node, ans.status,
                     NODES_QUEUE_TELL_PATH);
    nodes_answer_clear(&ans);
    return rc;
}

int nodes_move_queued(app *a, const char *name, const char *from, const char *to, int64_t rev,
                      const char *value, gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (!nodes_record_key(NODES_REPLICASET, name, key, sizeof(key)))
        return err_set(err, ERR_INVALID_PARAMS, "'%s' is not a valid name", name);
    return fleet_name_move(a->fleet, name, from, to, key, rev, value, err);
}
