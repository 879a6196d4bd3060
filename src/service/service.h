/*
 * service.h - the service functions the API handlers call: one call per
 * request, each answering with a JSON value (data of the envelope) or an
 * error value. Handlers never reach past these into the store, Docker or
 * the pools.
 */
#ifndef GPUBOX_SERVICE_SERVICE_H
#define GPUBOX_SERVICE_SERVICE_H

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

/* GET /api/v1/resources/gpus: {gpus:{uuid:0|1}, devices:[...], simulated, source}.
 * Answered from memory (inventory + pool), no store or Docker call. */
int resources_gpus(app *a, json_t **out, gb_err *err);
/* PATCH /resources/gpus/{uuid}/healthy: an admin clears the card's
 * unhealthy mark (monitor_clear_health); *out is the device as GET
 * /resources/gpus shows it. */
int resources_gpu_clear_health(app *a, const char *uuid, json_t **out, gb_err *err);
/* The same data already serialized (malloc'd, *len bytes), served from a
 * cache that is rebuilt only when the pool has changed: the hot path. */
int resources_gpus_text(app *a, char **out, size_t *len, gb_err *err);
resources_cache *resources_cache_new(void);
void resources_cache_free(resources_cache *c);
/* GET /api/v1/gpus (gpu-docker-api's older route): {gpuStatus:{uuid:0|1}}. */
int resources_gpu_status(app *a, json_t **out, gb_err *err);
/* GET /api/v1/resources/ports: {ports:{startPort, endPort, availableCount, usedPorts}}. */
int resources_ports(app *a, json_t **out, gb_err *err);
/* GET /api/v1/resources/cpus: the core pool (docs/cpus.md): topology, who
 * holds each logical CPU (other users' sets as "(other)"), totals, enforced. */
int resources_cpus(app *a, json_t **out, gb_err *err);

/* GET /healthz: {status, store:{ok,...}, docker:{ok,...}, gpus:{...}}. When the
 * store or Docker cannot be reached, returns -1 with that error AND *out
 * filled, so the answer still shows which part is down. Without details
 * (a caller with no token, docs/security.md "Without a token") only
 * {status}, and an error that names the part down and nothing of how it
 * is reached. */
int system_health(app *a, bool details, json_t **out, gb_err *err);
/* GET /version: gpubox's version, its API version, Docker's version; without
 * details only gpubox's two. */
int system_version(app *a, bool details, json_t **out, gb_err *err);

/* GET /api/v1/operations/{id}: a pull's record (service/images/images.h)
 * or a journalled operation's (replicaset_operation). */
int operation_get(app *a, const char *id, json_t **out, gb_err *err);

/* Start-up: mark in the pools what the store's replica-set records hold
 * (keys.h), so the pools never disagree with the store. */
int allocations_derive(app *a, gb_err *err);
/* Give records made before users their owner, and make this node's ledger
 * entries agree with its records (ownership.c). */
int ownership_settle(app *a, gb_err *err);
/* DELETE /api/v1/users/{name}: refused (ERR_STATE_CONFLICT, naming each)
 * while the user has anything left on any node of the fleet: a replica set,
 * a volume, or a deleted set not yet purged, whose history, specs and kept
 * logs the next user of that name would read (docs/users.md); then
 * users_api_delete. */
int ownership_user_delete(app *a, const char *name, json_t **out, gb_err *err);

#endif
