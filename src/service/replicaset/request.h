/*
 * request.h - a create request, parsed once.
 *
 * Every way a replica set is created - POST /api/v1/replicaSet, the older
 * POST /api/v1/containers, and a fleet's placement of either - reads the
 * body through replicaset_create_request_parse into one typed replicaset_create_request:
 * the name, the spec, the run limits, how the image is pulled, and the
 * placement fields. The fields a create takes are listed once
 * (replicaset_create_fields in request.c) with the older family's name of each
 * field it shares; the unknown-field check of both families and the
 * placement both come from that list, so a new field is added in one place
 * and travels through every path (docs/architecture.md, "A create
 * request").
 */
#ifndef GPUBOX_SERVICE_REPLICASET_REQUEST_H
#define GPUBOX_SERVICE_REPLICASET_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sched/gpus.h"
#include "service/images/images.h"
#include "service/replicaset/spec.h"
#include "util/err.h"

/* When and with which credentials the image is pulled: a request option,
 * not part of the spec (history and spec comparisons never see it). */
typedef struct replicaset_create_image {
    enum images_pull_policy pull;
    images_auth auth;
} replicaset_create_image;

#define RS_MAX_SELECTOR 32

typedef struct replicaset_label {
    const char *key; /* borrowed from the body */
    const char *value;
} replicaset_label;

/* Which node of a fleet: node, nodeSelector, placement (docs/fleet.md). */
typedef struct replicaset_placement {
    bool given;       /* any of the three was in the body */
    const char *node; /* NULL: any; borrowed from the body */
    bool has_policy;
    enum gpus_policy policy; /* placement: binpack or spread */
    replicaset_label selector[RS_MAX_SELECTOR];
    size_t nselector;
} replicaset_placement;

/* Which route family the body comes from: /replicaSet or the older
 * /containers (containerName, Ports with ports as numbers or strings,
 * binds naming gpu-docker-api's "foo-N" volumes). */
enum replicaset_create_family { RS_CREATE_REPLICASET, RS_CREATE_CONTAINERS };

typedef struct replicaset_create_request {
    const char *name; /* replicaSetName / containerName, checked */
    replicaset_spec spec;
    int64_t idle_stop_s; /* run limits; 0: none */
    int64_t max_duration_s;
    json_t *services; /* the record's services (replicaset/services.h); NULL: none */
    replicaset_create_image image;
    replicaset_placement placement;
    /* The queue (service/queue/queue.h): wait when it does not fit now. */
    bool queue;
    int64_t queue_timeout_s; /* drop after waiting this long; 0: never */
    int priority;            /* 0-100; -1: not given (the default, 50) */
    /* Set by the queue's dispatcher (service/queue), never by a body: the
     * set's owner (NULL: the caller), and the mod revision of the queued
     * record this create starts (0: a new name or a deleted one). */
    const char *owner;
    int64_t queued_rev;
    json_t *body; /* the body in the /replicaSet form; the strings above point into it */
} replicaset_create_request;

/* Parse and check a create body. in_fleet: whether this gpuboxd is a node
 * of a fleet (the placement fields are refused on a single server). Errors
 * are those each route answered before: an unknown field, a wrong type or
 * value, each naming the field. On error *out is empty (free it anyway or
 * not: both are fine). */
int replicaset_create_request_parse(const json_t *body, enum replicaset_create_family family,
                                    bool in_fleet, replicaset_create_request *out, gb_err *err);
void replicaset_create_request_free(replicaset_create_request *req);

/* Only the queue's fields of body (queue, queueTimeout, priority) into
 * out's (a restart takes them too). */
int replicaset_queue_fields_parse(const json_t *body, replicaset_create_request *out, gb_err *err);

/* Only the placement fields of body (a volume create takes `node` too). */
int replicaset_placement_from_json(const json_t *body, bool in_fleet, replicaset_placement *out,
                                   gb_err *err);

/* The create fields: their names in the /replicaSet family, then in the
 * older one (NULL where that family lacks the field); NULL-terminated. */
typedef struct replicaset_create_field {
    const char *name;
    const char *older;
} replicaset_create_field;
extern const replicaset_create_field replicaset_create_fields[];

/* A bind of the older routes: "foo-2" (gpu-docker-api made a new volume at
 * each resize) names gpubox's volume "foo"; a new reference, or bind
 * itself with one more reference. */
json_t *replicaset_legacy_volume_ref(json_t *bind);

#endif
