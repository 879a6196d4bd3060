/*
 * volume.c - the backend-independent face of the volume layer: picks a
 * backend by name, checks names and sizes once for every backend, then
 * forwards each call through the backend's function table. A backend's
 * ERR_INTERNAL becomes the envelope code of the operation that failed
 * (create 1023, destroy 1025, usage 1033, resize 1035); more precise codes
 * (used too large, in use, not found, exists) pass through unchanged.
 */
#include "volume/volume.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/names.h"
#include "util/size.h"

#define VOLUME_DEFAULT_BACKEND "loop"
#define VOLUME_DEFAULT_DOCKER_ROOT "/var/lib/docker"

static const struct volume_backend *const volume_backends[] = {
    &volume_backend_loop,
    &volume_backend_xfsquota,
    &volume_backend_plain,
};

/* A path with symlinks resolved, made (one level) if missing. */
static int volume_resolve_dir(const char *dir, mode_t mode, char *out, size_t len, gb_err *err)
{
    if (mkdir(dir, mode) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    _cleanup_free_ char *real = realpath(dir, NULL);
    if (!real)
        return err_set(err, ERR_INTERNAL, "cannot resolve %s: %s", dir, strerror(errno));
    if (strlen(real) + sizeof("/volumes/") + NAME_MAX_LEN + 8 > len)
        return err_set(err, ERR_INVALID_PARAMS, "data dir %s: path too long", real);
    snprintf(out, len, "%s", real);
    return 0;
}

int volume_env_open(volume_env *env, const char *backend, const char *data_dir,
                    const char *docker_root, gb_err *err)
{
    memset(env, 0, sizeof(*env));
    if (!backend)
        backend = VOLUME_DEFAULT_BACKEND;
    for (size_t i = 0; i < ARRAY_SIZE(volume_backends); i++)
        if (strcmp(volume_backends[i]->name, backend) == 0)
            env->backend = volume_backends[i];
    if (!env->backend)
        return err_set(err, ERR_INVALID_PARAMS,
                       "unknown volume backend '%s'; known: loop, xfsquota, plain", backend);
    if (!data_dir || !*data_dir)
        return err_set(err, ERR_INVALID_PARAMS, "volume backend: no data dir given");
    if (volume_resolve_dir(data_dir, 0755, env->data_dir, sizeof(env->data_dir), err) < 0)
        return -1;
    char volumes[VOLUME_PATH_MAX + 16];
    snprintf(volumes, sizeof(volumes), "%s/volumes", env->data_dir);
    if (volume_resolve_dir(volumes, 0700, env->volumes_dir, sizeof(env->volumes_dir), err) < 0)
        return -1;
    if (!docker_root || !*docker_root)
        docker_root = VOLUME_DEFAULT_DOCKER_ROOT;
    _cleanup_free_ char *root = realpath(docker_root, NULL);
    snprintf(env->docker_root, sizeof(env->docker_root), "%s", root ? root : docker_root);
    snprintf(env->fs, sizeof(env->fs), "ext4");
    return env->backend->check(env, err);
}

int volume_env_set_fs(volume_env *env, const char *fs, gb_err *err)
{
    if (!fs || (strcmp(fs, "ext4") != 0 && strcmp(fs, "xfs") != 0))
        return err_set(err, ERR_INVALID_PARAMS, "unknown volume filesystem '%s'; known: ext4, xfs",
                       fs ? fs : "");
    if (env->backend->set_fs)
        return env->backend->set_fs(env, fs, err);
    if (strcmp(fs, "ext4") == 0)
        return 0; /* the default, meaningless here */
    return err_set(err, ERR_INVALID_PARAMS,
                   "--volume-fs %s needs --volume-backend loop (the %s backend makes no "
                   "filesystem)",
                   fs, env->backend->name);
}

const char *volume_fs(const volume_env *env)
{
    return env->backend->set_fs ? env->fs : NULL;
}

const char *volume_backend_name(const volume_env *env)
{
    return env->backend->name;
}

bool volume_enforced(const volume_env *env)
{
    return env->backend->enforced;
}

bool volume_grows_online(const volume_env *env, const char *name)
{
    return !env->backend->grows_online || env->backend->grows_online(env, name);
}

const char *volume_docker_opt(const volume_docker_opts *opts, const char *key)
{
    for (size_t i = 0; i < opts->n; i++)
        if (strcmp(opts->items[i].key, key) == 0)
            return opts->items[i].value;
    return NULL;
}

static int volume_check_size(const volume_env *env, uint64_t size, gb_err *err)
{
    char have[32], min[32];
    size_format(size, have, sizeof(have));
    if (size > SIZE_MAX_BYTES)
        return err_set(err, ERR_INVALID_PARAMS, "volume size %s is absurd; at most 1PB", have);
    if (size < env->backend->min_bytes) {
        size_format(env->backend->min_bytes, min, sizeof(min));
        return err_set(err, ERR_INVALID_PARAMS,
                       "volume size %s is too small: %s volumes are at least %s", have,
                       env->backend->name, min);
    }
    return 0;
}

/* ERR_INTERNAL from a backend becomes the operation's envelope code. */
static int volume_result(int rc, int code, gb_err *err)
{
    if (rc < 0 && err && err->code == ERR_INTERNAL)
        err->code = code;
    return rc;
}

int volume_create(const volume_env *env, const char *name, uint64_t size, volume_docker_opts *opts,
                  gb_err *err)
{
    if (name_check_volume(name, err) < 0 || volume_check_size(env, size, err) < 0)
        return -1;
    memset(opts, 0, sizeof(*opts));
    return volume_result(env->backend->create(env, name, size, opts, err), ERR_VOLUME_CREATE_FAILED,
                         err);
}

int volume_attach(const volume_env *env, const char *name, gb_err *err)
{
    if (name_check_volume(name, err) < 0)
        return -1;
    return volume_result(env->backend->attach(env, name, err), ERR_INTERNAL, err);
}

int volume_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                  uint64_t new_size, bool in_use, gb_err *err)
{
    if (name_check_volume(name, err) < 0 || volume_check_size(env, new_size, err) < 0)
        return -1;
    return volume_result(env->backend->resize(env, name, docker_mountpoint, new_size, in_use, err),
                         ERR_VOLUME_PATCH_FAILED, err);
}

int volume_usage(const volume_env *env, const char *name, const char *docker_mountpoint,
                 uint64_t *used, uint64_t *size, gb_err *err)
{
    *used = *size = 0;
    if (name_check_volume(name, err) < 0)
        return -1;
    return volume_result(env->backend->usage(env, name, docker_mountpoint, used, size, err),
                         ERR_VOLUME_INFO_FAILED, err);
}

int volume_destroy(const volume_env *env, const char *name, gb_err *err)
{
    if (name_check_volume(name, err) < 0)
        return -1;
    return volume_result(env->backend->destroy(env, name, err), ERR_VOLUME_DELETE_FAILED, err);
}
