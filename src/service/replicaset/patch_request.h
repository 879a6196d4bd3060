/*
 * patch_request.h - a patch request, parsed once.
 *
 * Every way a replica set is patched - PATCH /api/v1/replicaSet/{name} and
 * the older PATCH /api/v1/containers/{name}/gpu and .../volume - reads the
 * body through replicaset_patch_request_parse into one typed
 * replicaset_patch_request, which replicaset_patch (replicaset.h) takes.
 * The fields a patch takes are listed once (replicaset_patch_fields in
 * patch_request.c): each field's name in a /replicaSet patch, its name in
 * the older route that carries it, and the JSON types its value may have.
 * Unknown fields and values of the wrong type are refused there, before
 * the set is looked up; the values themselves (a bind that must be one of
 * the set's, cpus in range, a size, an image name) are checked when the
 * patch is applied to the set's spec, by the same rules as a create
 * (replicaset_spec_patch; docs/architecture.md, "A patch request").
 */
#ifndef GPUBOX_SERVICE_REPLICASET_PATCH_REQUEST_H
#define GPUBOX_SERVICE_REPLICASET_PATCH_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "service/replicaset/spec.h"
#include "util/err.h"

/* Which route the body comes from: PATCH /replicaSet/{name}, or one of the
 * older family's: /containers/{name}/gpu {gpuCount} (a gpuPatch) and
 * /containers/{name}/volume {type, oldBind, newBind} (a volumePatch). */
enum replicaset_patch_family {
    RS_PATCH_REPLICASET,
    RS_PATCH_CONTAINERS_GPU,
    RS_PATCH_CONTAINERS_VOLUME,
};

/* The JSON types a field's value may have (bits; null is "given as null"
 * and always passes to the rules of the field, as it always has). */
enum {
    RS_PT_STRING = 1 << 0,
    RS_PT_INTEGER = 1 << 1,
    RS_PT_REAL = 1 << 2,
    RS_PT_OBJECT = 1 << 3,
    RS_PT_ARRAY = 1 << 4,
    RS_PT_NUMBER = RS_PT_INTEGER | RS_PT_REAL,
};

/* A patch: each field's value, NULL when the body lacks it (JSON null when
 * it was given as null). Every value has a type its field allows. */
typedef struct replicaset_patch_request {
    const json_t *image;           /* imageName: string */
    const json_t *gpu;             /* gpuPatch: {gpuCount, gpuMemory, ...} */
    const json_t *volumes;         /* volumePatch: {oldBind, newBind} or a list of them */
    const json_t *env;             /* envPatch: ["K=V"] or {set, unset} */
    const json_t *container_ports; /* containerPorts: array */
    const json_t *ports;           /* ports: array */
    const json_t *cpus;            /* number */
    const json_t *memory;          /* "8GB" or bytes */
    const json_t *shm_size;        /* shmSize: "8GB" or bytes */
    const json_t *restart_policy;  /* restartPolicy: string */
    const json_t *ssh_keys;        /* sshKeys: array */
    const json_t *cpu_count;       /* cpuCount: integer */
    const json_t *idle_stop;       /* idleStop: duration string (read below) */
    const json_t *max_duration;    /* maxDuration: duration string */
    const json_t *services;        /* services: array (replicaset/services.h), read by the patch */
    /* The run limits, read: given, and their seconds (0: none). */
    bool idle_stop_given, max_duration_given;
    int64_t idle_stop_s, max_duration_s;
    size_t nfields; /* how many fields the patch gives */
    json_t *body;   /* the patch in the /replicaSet form; the values point into it */
} replicaset_patch_request;

/* Parse and check a patch body of family (NULL: an empty patch). Errors
 * are those each route answered before: an unknown field (naming what the
 * route takes), a value of the wrong type or a run limit that is not a
 * duration, each naming the field. On error *out is empty. */
int replicaset_patch_request_parse(const json_t *body, enum replicaset_patch_family family,
                                   replicaset_patch_request *out, gb_err *err);
void replicaset_patch_request_free(replicaset_patch_request *req);

/* Whether the patch gives the run limits or the services and nothing
 * else (they belong to the set, not to a version: they change the record
 * in place, in any state but deleted). */
bool replicaset_patch_request_limits_only(const replicaset_patch_request *req);

/* The fields of a patch: the name in a /replicaSet patch ("gpuPatch"; a
 * field of the older family only has NULL), the name in the older route
 * `older_family` (NULL: none), the types of its value and, for the
 * message, what it must be. NULL-terminated (name and older both NULL). */
typedef struct replicaset_patch_field {
    const char *name;
    const char *older;
    enum replicaset_patch_family older_family;
    unsigned types;
    const char *expect;
    size_t offset; /* of its value in replicaset_patch_request; (size_t)-1: none */
} replicaset_patch_field;
extern const replicaset_patch_field replicaset_patch_fields[];

/* replicaset/spec_patch.c: the spec the patch asks for: cur with the
 * patch's changes, checked as a create's spec is. changed: it differs
 * from cur. Errors name the field ("volumePatch.oldBind ..."). */
int replicaset_spec_patch(const replicaset_spec *cur, const replicaset_patch_request *patch,
                          replicaset_spec *out, bool *changed, gb_err *err);

#endif
