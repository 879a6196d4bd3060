/*
 * container.c - a version's container: its run spec from the record, made
 * (not started) with its binds and GPU env, stopped; and whether the
 * volumes it binds can be mounted now. Shared by every operation that
 * makes, stops or starts a set's container (internal.h).
 */
#include "util/xalloc.h"
#include "service/replicaset/internal.h"
#include "service/cores.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/images/images.h"
#include "service/replicaset/gpu_env.h"
#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"

static enum docker_gpu_attach replicaset_gpu_attach(const app *a)
{
    const char *mode = a->cfg.gpu_attach ? a->cfg.gpu_attach : "nvidia";
    if (strcmp(mode, "cdi") == 0)
        return DOCKER_GPU_CDI;
    if (strcmp(mode, "runtime") == 0)
        return DOCKER_GPU_RUNTIME;
    return DOCKER_GPU_NVIDIA;
}

/* The spec's env then the GPU env, the user's binds then gpubox's mounts:
 * one array each, pointing into their owners. */
static void replicaset_run_lists(const replicaset_record *r, const binds_resolved *binds,
                                 const replicaset_gpu_env *ge, const char ***env,
                                 docker_bind **mounts)
{
    const replicaset_spec *s = &r->spec;
    *env = xcalloc(s->nenv + ge->nenv + 1, sizeof(**env));
    *mounts = xcalloc(binds->n + ge->nmounts + 1, sizeof(**mounts));
    for (size_t i = 0; i < s->nenv; i++)
        (*env)[i] = s->env[i];
    for (size_t i = 0; i < ge->nenv; i++)
        (*env)[s->nenv + i] = ge->env[i];
    for (size_t i = 0; i < binds->n; i++)
        (*mounts)[i] = binds->binds[i];
    for (size_t i = 0; i < ge->nmounts; i++)
        (*mounts)[binds->n + i] = ge->mounts[i];
}

int replicaset_run_spec_base(app *a, const replicaset_record *r, replicaset_run_spec_parts *p,
                             docker_run_spec *ds, gb_err *err)
{
    const replicaset_spec *s = &r->spec;
    p->uuids = xcalloc(r->ngpus + 1, sizeof(*p->uuids));
    p->ports = xcalloc(r->nports + 1, sizeof(*p->ports));
    p->labels = json_deep_copy(s->labels);
    if (!p->uuids || !p->ports || !p->labels)
        return err_set(err, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < r->ngpus; i++)
        p->uuids[i] = r->gpus[i];
    for (size_t i = 0; i < r->nports; i++)
        p->ports[i] = (docker_port){.container_port = r->ports[i].container_port,
                                    .host_port = r->ports[i].host_port,
                                    .protocol = r->ports[i].protocol};
    char version[16];
    snprintf(version, sizeof(version), "%d", r->version);
    json_object_set_new(p->labels, DOCKER_LABEL_REPLICASET, json_string(r->name));
    json_object_set_new(p->labels, DOCKER_LABEL_VERSION, json_string(version));
    *ds = (docker_run_spec){
        .image = s->image,
        .cmd = (const char *const *)s->cmd,
        .ncmd = s->ncmd,
        .env = (const char *const *)s->env,
        .nenv = s->nenv,
        .labels = p->labels,
        .ports = p->ports,
        .nports = r->nports,
        .gpu_attach = replicaset_gpu_attach(a),
        .gpu_uuids = p->uuids,
        .ngpus = r->ngpus,
        .cpus = s->cpus,
        .memory_bytes = s->memory_bytes,
        .shm_bytes = s->shm_bytes,
        .restart_policy = s->restart_policy,
        .tty = true,
        .hostname = r->name,
        .network = p->network,
        .network_alias = r->name,
    };
    replicaset_network_name(r->owner, p->network, sizeof(p->network));
    if (r->ncpuset) {
        p->cpuset = cores_docker_cpuset(a, r->cpuset, r->ncpuset);
        ds->cpuset_cpus = p->cpuset;
    }
    return 0;
}

void replicaset_run_spec_parts_free(replicaset_run_spec_parts *p)
{
    free(p->uuids);
    free(p->ports);
    json_decref(p->labels);
    free(p->cpuset);
    *p = (replicaset_run_spec_parts){0};
}

int replicaset_container_create(app *a, const replicaset_record *r, char **id, gb_err *err)
{
    /* Every container a user's request makes (create, patch, rollback,
     * restart) starts from an image that user may use: owners.c. */
    if (images_use_check(a, r->spec.image, err) < 0)
        return -1;
    _cleanup_(replicaset_run_spec_parts_free) replicaset_run_spec_parts parts = {0};
    docker_run_spec ds;
    if (replicaset_run_spec_base(a, r, &parts, &ds, err) < 0)
        return -1;
    _cleanup_(binds_resolved_free) binds_resolved binds = {0};
    _cleanup_(replicaset_gpu_env_free) replicaset_gpu_env gpu_env = {0};
    _cleanup_free_ const char **env = NULL;
    _cleanup_free_ docker_bind *mounts = NULL;
    if (binds_stage(a, r->container_name, &r->spec, &binds, err) < 0)
        return -1;
    if (replicaset_gpu_env_prepare(a, r, &binds, &gpu_env, err) < 0) {
        binds_unstage(a, r->container_name);
        return -1;
    }
    replicaset_run_lists(r, &binds, &gpu_env, &env, &mounts);
    ds.env = env;
    ds.nenv = r->spec.nenv + gpu_env.nenv;
    ds.binds = mounts;
    ds.nbinds = binds.n + gpu_env.nmounts;
    _cleanup_json_ json_t *config = NULL;
    _cleanup_free_ char *cid = NULL;
    if (docker_run_spec_to_json(&ds, &config, err) < 0) {
        replicaset_container_forget(a, r->container_name);
        return -1;
    }
    /* The owner's network first; made again and the create tried once
     * more when the owner's last other set took it away meanwhile. */
    char network[RS_NETWORK_NAME_MAX];
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        if (replicaset_network_ensure(a, r->owner, network, sizeof(network), err) < 0)
            break;
        rc = docker_container_create(a->docker, r->container_name, config, &cid, err);
        /* gone meanwhile, or made twice at once (network.c) */
        if (rc < 0 && !(err->code == ERR_NOT_FOUND && strstr(err->msg, "network")) &&
            !strstr(err->msg, "ambiguous"))
            break;
    }
    if (rc < 0) {
        replicaset_container_forget(a, r->container_name);
        return err_prefix(err, "creating container %s", r->container_name);
    }
    *id = steal_ptr(&cid);
    return 0;
}

int replicaset_container_start(app *a, const replicaset_record *r, gb_err *err)
{
    if (binds_ensure(a, r->container_name, &r->spec, err) < 0)
        return -1;
    if (replicaset_network_attach(a, r, err) < 0)
        return err_prefix(err, "starting %s", r->container_name);
    return docker_container_start(a->docker, r->container_name, err);
}

void replicaset_container_forget(app *a, const char *container)
{
    replicaset_gpu_env_remove(a, container);
    binds_unstage(a, container);
}

int replicaset_container_stop(app *a, const char *container, gb_err *err)
{
    return docker_container_stop_promptly(a->docker, container, RS_STOP_TIMEOUT_S, err);
}

bool replicaset_volumes_ready(app *a, const replicaset_record *r)
{
    for (size_t i = 0; i < r->spec.nbinds; i++) {
        if (r->spec.binds[i].src[0] == '/')
            continue;
        char *docker_name = NULL;
        gb_err err = GB_ERR_INIT;
        int rc = volumes_bind_source(a, r->spec.binds[i].src, &docker_name, &err);
        free(docker_name);
        if (rc < 0) {
            log_error("reconcile: %s: not starting %s: %s", r->name, r->container_name, err.msg);
            return false;
        }
    }
    return true;
}
