/*
 * gpu_env.h - the GPU limits a replica set's container gets besides its
 * cards: environment variables, the read-only file GPUS_ENV_FILE_PATH, and
 * for shares the library that enforces them (gpubox's CUDA limiter, or
 * HAMi-core when the host names it) (replicaset/gpu_env.c says how and why).
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

typedef struct replicaset_gpu_env {
    char **env; /* "KEY=VALUE" to add after the spec's env */
    size_t nenv;
    docker_bind mounts[5]; /* the env file; HAMi-core, or the CUDA limiter's four */
    size_t nmounts;
    char *file; /* host path of the env file; NULL when none */
    /* The CUDA limiter's host paths (the limits directory, the preload
     * file); NULL when it is not used. */
    char *limits_dir, *preload_file;
} replicaset_gpu_env;

/* For r's grant: the env lines, the host env file written (replacing one of
 * the same container name) and the mounts. A grant without cards gives
 * nothing. A user bind on one of gpubox's paths is ERR_INVALID_PARAMS. */
int replicaset_gpu_env_prepare(app *a, const replicaset_record *r, const binds_resolved *binds,
                               replicaset_gpu_env *out, gb_err *err);
void replicaset_gpu_env_free(replicaset_gpu_env *e);

/* Remove the host files of a container (env file, CUDA limits directory)
 * after the container is gone. */
void replicaset_gpu_env_remove(app *a, const char *container);
/* Rewrite the CUDA limiter's limits file of r's container from r's grant
 * and gpuCores (a temporary file and a rename: the library re-reads it at the next
 * allocation). 1 when written; 0 when r holds no share or its container
 * has no limits file (no limiter); -1 when it cannot be written. */
int replicaset_cuda_limits_rewrite(const app *a, const replicaset_record *r, gb_err *err);
/* The header of the pids file (src/cuda/pids.h) gpuboxd writes beside the
 * limits: at the container's creation with no process, then by the
 * monitor (service/monitor/hostpids.c). */
#define RS_CUDA_PIDS_HEADER "# gpubox: host PIDs of the container's GPU processes: HOSTPID PID\n"
/* Replace the pids file of container with text (a temporary file and a
 * rename). 1 when written; 0 when the container has no limits directory
 * (no limiter); -1 when it cannot be written. */
int replicaset_cuda_pids_write(const app *a, const char *container, const char *text, gb_err *err);
/* The compute share (percent, 1-100; 0: none) of r's card i in its limits
 * file: the spec's gpuCores, else for a time-slice replica with
 * --timeslice-equal-compute 100 / the replicas a card offers. */
int replicaset_cuda_card_cores(const app *a, const replicaset_record *r, size_t i);
/* Does r hold a share whose container has the limiter's limits file? */
bool replicaset_cuda_limits_present(const app *a, const replicaset_record *r);
/* Start-up: remove every such host file whose container is not a key of
 * containers (an object whose keys are the containers records name). */
void replicaset_gpu_env_sweep(app *a, const json_t *containers);

/* What enforces r's GPU limits inside its container: "exclusive cards" for
 * whole cards; for a share "gpubox" (the CUDA limiter) or "HAMi-core" when
 * it is in place - read from the container's inspect when given (the
 * limiter's preload file and limits among its Mounts; HAMi-core's last
 * LD_PRELOAD in Config.Env and its library among the Mounts), else from
 * today's host setting; NULL when nothing does (or no cards). */
const char *replicaset_gpu_enforced_by(const app *a, const replicaset_record *r,
                                       const json_t *inspect);

#endif
