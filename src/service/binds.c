/*
 * binds.c - resolving and policing bind mounts (see binds.h).
 */
#include "util/xalloc.h"
#include "service/binds.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "service/volume/volumes.h"
#include "util/cleanup.h"

/* Paths no bind may mount, whatever the prefixes say: the host itself. The
 * first entry must match exactly ("/"); the others also refuse what is
 * under them. */
static const char *const binds_forbidden[] = {
    "/",
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/boot",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/var/lib/docker",
    "/run/containerd",
    "/var/lib/containerd",
};

static bool path_is_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return true;
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool path_forbidden(app *a, const char *path)
{
    if (strcmp(path, "/") == 0)
        return true;
    for (size_t i = 1; i < ARRAY_SIZE(binds_forbidden); i++)
        if (path_is_under(path, binds_forbidden[i]))
            return true;
    char data_dir[PATH_MAX];
    if (a->cfg.data_dir && realpath(a->cfg.data_dir, data_dir) &&
        (path_is_under(path, data_dir) || path_is_under(data_dir, path)))
        return true;
    return false;
}

/* Is the resolved path under one of the comma-separated prefixes? */
static bool path_allowed(const char *prefixes, const char *path)
{
    if (!prefixes || !*prefixes)
        return false;
    _cleanup_free_ char *list = xstrdup(prefixes);
    char *save = NULL;
    for (char *p = list ? strtok_r(list, ",", &save) : NULL; p; p = strtok_r(NULL, ",", &save)) {
        char resolved[PATH_MAX];
        if (realpath(p, resolved) && path_is_under(path, resolved))
            return true;
    }
    return false;
}

static int bind_host_path(app *a, const char *src, char **out, gb_err *err)
{
    char resolved[PATH_MAX];
    /* A system path is refused as written too, whether or not it exists
     * on this host (a Docker socket, say, where no daemon runs yet). */
    if (path_forbidden(a, src))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s is a host system path and can never be mounted", src);
    if (!realpath(src, resolved))
        return err_set(err, ERR_INVALID_PARAMS,
                       "bind source %.200s does not exist on the host; create it first (gpubox "
                       "never lets Docker create host directories)",
                       src);
    if (path_forbidden(a, resolved))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s (%.200s) is a host system path "
                       "and can never be mounted",
                       src, resolved);
    if (!path_allowed(a->cfg.bind_prefixes, resolved))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s is not under an allowed host directory; the operator "
                       "allows: %.200s",
                       src,
                       a->cfg.bind_prefixes && *a->cfg.bind_prefixes
                           ? a->cfg.bind_prefixes
                           : "none (use gpubox volumes, or start gpuboxd with "
                             "--bind-prefixes)");
    *out = xstrdup(resolved);
    return 0;
}

/* A gpubox volume: the volume service says which Docker volume holds it,
 * and refuses one that is not ready to be mounted. */
static int bind_volume(app *a, const char *name, char **out, gb_err *err)
{
    return volumes_bind_source(a, name, out, err);
}

int binds_resolve(app *a, const rs_spec *spec, binds_resolved *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (spec->nbinds == 0)
        return 0;
    out->binds = xcalloc(spec->nbinds, sizeof(*out->binds));
    out->owned = xcalloc(spec->nbinds, sizeof(*out->owned));
    for (size_t i = 0; i < spec->nbinds; i++) {
        const rs_bind *b = &spec->binds[i];
        int rc = b->src[0] == '/' ? bind_host_path(a, b->src, &out->owned[i], err)
                                  : bind_volume(a, b->src, &out->owned[i], err);
        out->n = i + 1;
        if (rc < 0) {
            binds_resolved_free(out);
            return -1;
        }
        out->binds[i] =
            (docker_bind){.src = out->owned[i], .dest = b->dest, .read_only = b->read_only};
    }
    return 0;
}

void binds_resolved_free(binds_resolved *b)
{
    for (size_t i = 0; b->owned && i < b->n; i++)
        free(b->owned[i]);
    free(b->owned);
    free(b->binds);
    memset(b, 0, sizeof(*b));
}
