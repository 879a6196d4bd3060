/*
 * fleet_merge.c - the lists of a fleet (docs/fleet.md, "One API"): this
 * node answers, every other node that is alive is asked the same at once
 * (FLEET_LIST_TIMEOUT_MS), and the answers are merged into this node's,
 * each item with its "node":
 *
 *   GET /replicaSet         replicaSets concatenated; the sets of a node that
 *                           is unreachable or did not answer are read from
 *                           the store, with status "unknown"
 *   GET /volumes            volumes concatenated
 *   GET /resources/gpus     devices concatenated, the gpus map merged (card
 *                           UUIDs are unique), simulated if any is
 *   GET /gpus               gpuStatus merged
 *   GET /images             images concatenated (an image on two nodes is
 *                           listed twice, once with each node)
 *   GET /resources/ports    ports stays this node's (host ports belong to a
 *                           host); nodes lists every node's
 */
#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/nodes/nodes.h"
#include "util/cleanup.h"

#define FLEET_LIST_TIMEOUT_MS 3000

static void tag_items(json_t *items, const char *node)
{
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        if (json_is_object(item) && !json_object_get(item, "node"))
            json_object_set_new(item, "node", json_string(node));
    }
}

static void append_items(json_t *dst, json_t *src, const char *node)
{
    tag_items(src, node);
    json_array_extend(dst, src);
}

/* Add one node's data to the merged data, as the route wants. */
static void merge_data(const char *pattern, json_t *into, json_t *from, const char *node)
{
    if (strcmp(pattern, "/api/v1/replicaSet") == 0) {
        append_items(json_object_get(into, "replicaSets"), json_object_get(from, "replicaSets"),
                     node);
    } else if (strcmp(pattern, "/api/v1/volumes") == 0) {
        append_items(json_object_get(into, "volumes"), json_object_get(from, "volumes"), node);
    } else if (strcmp(pattern, "/api/v1/resources/gpus") == 0) {
        append_items(json_object_get(into, "devices"), json_object_get(from, "devices"), node);
        json_object_update(json_object_get(into, "gpus"), json_object_get(from, "gpus"));
        if (json_is_true(json_object_get(from, "simulated")))
            json_object_set_new(into, "simulated", json_true());
    } else if (strcmp(pattern, "/api/v1/images") == 0) {
        append_items(json_object_get(into, "images"), json_object_get(from, "images"), node);
    } else if (strcmp(pattern, "/api/v1/gpus") == 0) {
        json_object_update(json_object_get(into, "gpuStatus"), json_object_get(from, "gpuStatus"));
    } else if (strcmp(pattern, "/api/v1/resources/ports") == 0) {
        json_t *ports = json_deep_copy(json_object_get(from, "ports"));
        json_object_set_new(ports, "node", json_string(node));
        json_array_append_new(json_object_get(into, "nodes"), ports);
    }
}

/* The sets of a node that does not answer, from its records. */
static void merge_offline(app *a, http_request *req, json_t *data, const char *node)
{
    bool all = false;
    const char *q = http_request_query(req, "all");
    all = q && strcmp(q, "true") == 0;
    gb_err e = GB_ERR_INIT;
    json_t *items = NULL;
    if (nodes_offline_sets(a, node, all, &items, &e) == 0) {
        append_items(json_object_get(data, "replicaSets"), items, node);
        json_decref(items);
    }
}

int api_fleet_merge(app *a, http_request *req, const http_route *route, http_response *resp,
                    gb_err *err)
{
    if (route->handler(req, resp, err) < 0)
        return -1;
    _cleanup_json_ json_t *env = json_loadb(resp->body, resp->body_len, 0, NULL);
    json_t *data = json_object_get(env, "data");
    if (!json_is_object(data))
        return 0; /* an answer that is not a list: as it is */
    const char *me = nodes_self(a);
    const char *pattern = route->pattern;
    bool ports = strcmp(pattern, "/api/v1/resources/ports") == 0;
    bool sets = strcmp(pattern, "/api/v1/replicaSet") == 0;
    _cleanup_json_ json_t *local = ports ? json_deep_copy(data) : NULL; /* ports: the own entry */
    if (ports)
        json_object_set_new(data, "nodes", json_array());
    else
        tag_items(json_object_get(data, sets                                      ? "replicaSets"
                                        : strcmp(pattern, "/api/v1/volumes") == 0 ? "volumes"
                                        : strcmp(pattern, "/api/v1/images") == 0  ? "images"
                                                                                  : "devices"),
                  me);
    if (ports)
        merge_data(pattern, data, local, me);

    nodes_peer *peers = NULL;
    size_t n = 0;
    if (nodes_peers(a, &peers, &n, err) < 0)
        return -1;
    const char **urls = xcalloc(n ? n : 1, sizeof(*urls));
    size_t *which = xcalloc(n ? n : 1, sizeof(*which));
    size_t nurls = 0;
    for (size_t i = 0; i < n; i++) {
        if (peers[i].alive) {
            which[nurls] = i;
            urls[nurls++] = peers[i].advertise;
        } else if (sets) {
            merge_offline(a, req, data, peers[i].name);
        }
    }
    nodes_answer *answers = xcalloc(nurls ? nurls : 1, sizeof(*answers));
    _cleanup_free_ char *pq = api_fleet_path_query(req);
    nodes_request nr = api_fleet_request_of(req, pq, FLEET_LIST_TIMEOUT_MS);
    nodes_send_many(a, urls, nurls, &nr, answers);
    for (size_t j = 0; j < nurls; j++) {
        const char *node = peers[which[j]].name;
        _cleanup_json_ json_t *other =
            answers[j].status == 200
                ? json_loadb(answers[j].body ? answers[j].body : "", answers[j].body_len, 0, NULL)
                : NULL;
        json_t *odata = json_object_get(other, "data");
        if (json_is_object(odata))
            merge_data(pattern, data, odata, node);
        else if (sets)
            merge_offline(a, req, data, node);
        nodes_answer_clear(&answers[j]);
    }
    free(answers);
    free(urls);
    free(which);
    free(peers);
    return http_response_data(resp, json_incref(data), err);
}
