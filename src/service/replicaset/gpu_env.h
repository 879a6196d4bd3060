/*
 * gpu_env.h - the GPU limits a replica set's container gets besides its
 * cards: environment variables, the read-only file GPUS_ENV_FILE_PATH, and
 * HAMi-core when the host has it (replicaset/gpu_env.c says how and why).
 * Not for use outside src/service/.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_GPU_ENV_H
#define GPUBOX_SERVICE_REPLICASET_GPU_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "docker/docker.h"
#include "service/app.h"
#include "service/binds.h"
#include "service/replicaset/record.h"
#include "util/err.h"

typedef struct rs_gpu_env {
    char **env; /* "KEY=VALUE" to add after the spec's env */
    size_t nenv;
    docker_bind mounts[2]; /* the env file; HAMi-core */
    size_t nmounts;
    char *file; /* host path of the env file; NULL when none */
} rs_gpu_env;

/* For r's grant: the env lines, the host env file written (replacing one of
 * the same container name) and the mounts. A grant without cards gives
 * nothing. A user bind on one of gpubox's paths is ERR_INVALID_PARAMS. */
int rs_gpu_env_prepare(app *a, const rs_record *r, const binds_resolved *binds, rs_gpu_env *out,
                       gb_err *err);
void rs_gpu_env_free(rs_gpu_env *e);

/* Remove the host env file of a container (after the container is gone). */
void rs_gpu_env_remove(app *a, const char *container);
/* Start-up: remove every host env file whose container is not a key of
 * containers (an object whose keys are the containers records name). */
void rs_gpu_env_sweep(app *a, const json_t *containers);

/* Whether r's GPU limits are enforced inside its container: whole cards
 * (or none) always; a share only when HAMi-core is preloaded - read from
 * the container's inspect when given (the last LD_PRELOAD in Config.Env,
 * and the library among its Mounts), else from today's host setting. */
bool rs_gpu_enforced(const app *a, const rs_record *r, const json_t *inspect);

#endif
