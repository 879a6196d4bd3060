/*
 * binds.c - resolving and policing bind sources (see binds.h); the staging
 * mounts that pin them for Docker are binds_stage.c.
 *
 * A host source is opened, never just named: binds_open_host walks it from
 * an fd of the allowed prefix it lies under, one component at a time, and
 * refuses any symbolic link on the way (openat2 with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, or an O_NOFOLLOW walk where the kernel has no
 * openat2). The fd it returns is the directory or file the container will
 * see, whatever a user does to the path afterwards.
 */
#include "util/xalloc.h"
#include "service/binds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "service/volumes/volumes.h"
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

/* path without "//", "." components or a trailing '/', into out; -1 when
 * it has a ".." component (the spec refuses those) or is too long. */
static int path_normalize(const char *path, char *out, size_t n)
{
    size_t len = 0;
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t c = strcspn(p, "/");
        if (c == 0)
            break;
        if (c == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        if (!(c == 1 && p[0] == '.')) {
            if (len + 1 + c + 1 > n)
                return -1;
            out[len++] = '/';
            memcpy(out + len, p, c);
            len += c;
        }
        p += c;
    }
    if (len == 0) {
        if (n < 2)
            return -1;
        out[len++] = '/';
    }
    out[len] = '\0';
    return 0;
}

/* The allowed prefix path lies under: an O_PATH fd of the prefix (opened by
 * its real path: the operator's prefix may itself go through a symlink)
 * and, in *rest, what follows it in path ("" for the prefix itself). -1
 * when path is under none. Each prefix is matched as written and as its
 * real path. */
static int prefix_open(const char *prefixes, const char *path, const char **rest)
{
    if (!prefixes || !*prefixes)
        return -1;
    _cleanup_free_ char *list = xstrdup(prefixes);
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char written[PATH_MAX], real[PATH_MAX];
        if (p[0] != '/' || !realpath(p, real))
            continue;
        if (path_normalize(p, written, sizeof(written)) < 0)
            snprintf(written, sizeof(written), "%s", real);
        const char *under = path_is_under(path, written) ? written
                            : path_is_under(path, real)  ? real
                                                         : NULL;
        if (!under)
            continue;
        size_t n = strlen(under) == 1 ? 0 : strlen(under);
        *rest = path + n + (path[n] == '/');
        return open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    return -1;
}

/* The same as openat2 RESOLVE_NO_SYMLINKS for a path with no "..": one
 * component at a time, each opened O_NOFOLLOW relative to the last. */
static int open_walk(int dirfd, const char *rest)
{
    int fd = dup(dirfd);
    _cleanup_free_ char *copy = xstrdup(rest);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
        int next = openat(fd, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        close(fd);
        fd = next;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
            close(fd);
            fd = -1;
            saved = ELOOP;
        }
        errno = saved;
    }
    return fd;
}

/* rest opened beneath dirfd with no symlink followed (errno ELOOP when one
 * is on the way, ENOENT or ENOTDIR when a component is missing). */
static int open_beneath(int dirfd, const char *rest)
{
    if (!*rest)
        return fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    for (int tries = 0; tries < 8; tries++) {
        long fd = syscall(SYS_openat2, dirfd, rest, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno == ENOSYS || errno == EPERM) /* no openat2, or a seccomp filter */
            return open_walk(dirfd, rest);
        if (errno != EAGAIN && errno != EINTR)
            return -1;
    }
    return -1;
}

static int err_not_allowed(app *a, const char *src, gb_err *err)
{
    return err_set(err, ERR_FORBIDDEN,
                   "bind source %.200s is not under an allowed host directory; the operator "
                   "allows: %.200s",
                   src,
                   a->cfg.bind_prefixes && *a->cfg.bind_prefixes
                       ? a->cfg.bind_prefixes
                       : "none (use gpubox volumes, or start gpuboxd with --bind-prefixes)");
}

static int err_missing(const char *src, gb_err *err)
{
    return err_set(err, ERR_INVALID_PARAMS,
                   "bind source %.200s does not exist on the host; create it first (gpubox "
                   "never lets Docker create host directories)",
                   src);
}

static int err_symlink(const char *src, gb_err *err)
{
    return err_set(err, ERR_FORBIDDEN,
                   "bind source %.200s goes through a symlink; a host bind's path must not "
                   "contain symlinks: give the real path of a directory or file",
                   src);
}

/* src is under no prefix as written: say why, as precisely as is safe. */
static int host_path_refused(app *a, const char *src, gb_err *err)
{
    char resolved[PATH_MAX];
    if (!realpath(src, resolved))
        return err_missing(src, err);
    if (path_forbidden(a, resolved))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s (%.200s) is a host system path "
                       "and can never be mounted",
                       src, resolved);
    _cleanup_free_ char *list = xstrdup(a->cfg.bind_prefixes ? a->cfg.bind_prefixes : "");
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char real[PATH_MAX];
        if (realpath(p, real) && path_is_under(resolved, real))
            return err_symlink(src, err);
    }
    return err_not_allowed(a, src, err);
}

int binds_open_host(app *a, const char *src, gb_err *err)
{
    char path[PATH_MAX];
    /* A system path is refused as written too, whether or not it exists
     * on this host (a Docker socket, say, where no daemon runs yet). */
    if (path_forbidden(a, src))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s is a host system path and can never be mounted", src);
    if (src[0] != '/' || path_normalize(src, path, sizeof(path)) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "bind source %.200s must be an absolute path without '..'", src);
    if (path_forbidden(a, path))
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s is a host system path and can never be mounted", src);
    const char *rest = NULL;
    _cleanup_close_ int prefix = prefix_open(a->cfg.bind_prefixes, path, &rest);
    if (prefix < 0)
        return host_path_refused(a, src, err);
    int fd = open_beneath(prefix, rest);
    if (fd < 0) {
        if (errno == ELOOP || errno == EXDEV)
            return err_symlink(src, err);
        if (errno == ENOENT || errno == ENOTDIR)
            return err_missing(src, err);
        return err_set(err, ERR_INVALID_PARAMS, "bind source %.200s cannot be opened: %s", src,
                       strerror(errno));
    }
    /* What was opened, by its own name: a system path under a prefix the
     * operator chose badly is still refused. */
    char self[64], real[PATH_MAX];
    struct stat st;
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, real, sizeof(real) - 1);
    if (n <= 0 || fstat(fd, &st) < 0) {
        close(fd);
        return err_set(err, ERR_INTERNAL, "bind source %.200s: cannot read what was opened", src);
    }
    real[n] = '\0';
    if (path_forbidden(a, real)) {
        close(fd);
        return err_set(err, ERR_FORBIDDEN,
                       "bind source %.200s (%.200s) is a host system path "
                       "and can never be mounted",
                       src, real);
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, ERR_INVALID_PARAMS,
                       "bind source %.200s is neither a directory nor a regular file", src);
    }
    return fd;
}

int binds_check(app *a, const replicaset_spec *spec, gb_err *err)
{
    for (size_t i = 0; i < spec->nbinds; i++) {
        const replicaset_bind *b = &spec->binds[i];
        if (b->src[0] == '/') {
            int fd = binds_open_host(a, b->src, err);
            if (fd < 0)
                return -1;
            close(fd);
        } else {
            _cleanup_free_ char *volume = NULL;
            if (volumes_bind_source(a, b->src, &volume, err) < 0)
                return -1;
        }
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
