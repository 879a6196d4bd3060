/*
 * rs_spec.h - a replica set's spec: what the user asked for (image, GPUs,
 * binds, env, cmd, ports, limits), as one validated C value.
 *
 * The same JSON shape serves three purposes, so there is one parser and one
 * printer: the body of POST /replicaSet (plus replicaSetName), the spec kept
 * in the store for each version (history, rollback), and the spec shown by
 * GET /replicaSet/{name}. Printing then parsing gives the same spec.
 *
 * Ports come in two forms: `containerPorts` ["22", "8888/udp"] asks gpubox
 * to allocate a host port for each; `ports` [{hostPort, containerPort,
 * protocol}] names the host port. Both end up in `ports` with host_port 0
 * meaning "allocate". Which host ports a version actually holds is not part
 * of the spec; it lives in the replica-set record.
 *
 * Limits (DESIGN.md section 4, docs/api.md) are checked here, so a spec that
 * exists is always within them.
 */
#ifndef GPUBOX_SERVICE_RS_SPEC_H
#define GPUBOX_SERVICE_RS_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

#define RS_MAX_GPUS 1024
#define RS_MAX_LIST 256 /* env entries, cmd args */
#define RS_MAX_BINDS 64
#define RS_MAX_PORTS 64
#define RS_MAX_LABELS 64
#define RS_MAX_STRING 4096 /* one env entry, arg, path, label */
#define RS_MAX_IMAGE 255

typedef struct rs_bind {
    char *src; /* absolute host path, or a gpubox volume name */
    char *dest;
    bool read_only;
} rs_bind;

typedef struct rs_port {
    uint16_t container_port;
    uint16_t host_port; /* 0: allocate one from the range */
    char protocol[4];   /* "tcp" | "udp" */
} rs_port;

typedef struct rs_spec {
    char *image;
    int gpu_count;
    char **env;
    size_t nenv;
    char **cmd;
    size_t ncmd;
    rs_bind *binds;
    size_t nbinds;
    rs_port *ports;
    size_t nports;
    double cpus;          /* 0: no limit */
    int64_t memory_bytes; /* 0: no limit */
    int64_t shm_bytes;    /* 0: Docker's default */
    char *restart_policy; /* NULL: "no" */
    json_t *labels;       /* object of strings; never NULL after parsing */
} rs_spec;

/* Parse and validate a spec object. Fields not part of a spec are refused
 * (ERR_INVALID_PARAMS naming them) unless listed in also_allowed (NULL-
 * terminated; e.g. {"replicaSetName", NULL} for a create body). */
int rs_spec_from_json(const json_t *obj, const char *const *also_allowed, rs_spec *out,
                      gb_err *err);
/* The normalized JSON form (what the store keeps and GET shows). */
json_t *rs_spec_to_json(const rs_spec *spec);
void rs_spec_free(rs_spec *spec);
/* Deep copy; 0 or -1 (out of memory). */
int rs_spec_copy(const rs_spec *src, rs_spec *dst);
/* Number of ports with host_port 0 (to be allocated). */
size_t rs_spec_ports_to_allocate(const rs_spec *spec);

#endif
