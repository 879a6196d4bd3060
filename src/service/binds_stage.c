/*
 * binds_stage.c - the staging mounts that pin each host bind of a
 * container (binds.h says why).
 *
 * Layout, written by gpuboxd alone:
 *   <data-dir>/binds/                  0700, root's
 *   <data-dir>/binds/<container>/      0700, one per container (<set>-<version>)
 *   <data-dir>/binds/<container>/<i>   the mount point of the spec's bind i (an
 *                                      empty directory, or an empty file for a
 *                                      file bind), with a bind mount of the
 *                                      source binds_open_host opened
 * Docker's Mounts name <data-dir>/binds/<container>/<i>; Docker follows no
 * link there, because there is none, and the mount is the directory the
 * user named at creation, not whatever the path names today.
 *
 * Life cycle, every step idempotent:
 *   binds_stage    when the container is created: leftovers of a crash under
 *                  that name unmounted, then a mount per host bind;
 *   binds_ensure   before gpuboxd starts it: a mount that is gone (a host
 *                  reboot), or whose source was removed (Docker cannot mount
 *                  a removed directory), is made again from the spec, by the
 *                  same rules; one still there is kept as it is;
 *   binds_unstage  once the container is removed (delete, the old version
 *                  of a patch, rollback or restart, an undone create);
 *   binds_sweep    at start-up: containers Docker no longer has lose theirs.
 * Removing is unmounting (MNT_DETACH) and rmdir/unlink of the empty mount
 * point: never a recursive delete, which would reach through a mount into
 * the user's files.
 */
#include "util/xalloc.h"
#include "service/binds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"

#define BINDS_STAGE_DIR "binds"

/* <data-dir>/binds, made (0700) when create; -1 when too long or not made. */
static int stage_root(const app *a, char *out, size_t n, bool create, gb_err *err)
{
    char data[PATH_MAX];
    if (!a->cfg.data_dir || !realpath(a->cfg.data_dir, data))
        return err_set(err, ERR_INTERNAL, "the data dir %s cannot be resolved",
                       a->cfg.data_dir ? a->cfg.data_dir : "(none)");
    if (snprintf(out, n, "%s/" BINDS_STAGE_DIR, data) >= (int)n)
        return err_set(err, ERR_INTERNAL, "the data dir's path is too long");
    if (!create)
        return 0;
    struct stat st;
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "cannot make %s: %s", out, strerror(errno));
    if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode) || chmod(out, 0700) < 0)
        return err_set(err, ERR_INTERNAL, "%s must be a directory only gpuboxd writes", out);
    return 0;
}

/* <data-dir>/binds/<container>; the name is a container name gpubox made. */
static int stage_dir(const app *a, const char *container, char *out, size_t n, bool create,
                     gb_err *err)
{
    char root[PATH_MAX];
    if (!container[0] || strchr(container, '/') || container[0] == '.')
        return err_set(err, ERR_INTERNAL, "container name %.100s cannot name a directory",
                       container);
    if (stage_root(a, root, sizeof(root), create, err) < 0)
        return -1;
    if (snprintf(out, n, "%s/%s", root, container) >= (int)n)
        return err_set(err, ERR_INTERNAL, "the data dir's path is too long");
    if (create && mkdir(out, 0700) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "cannot make %s: %s", out, strerror(errno));
    return 0;
}

/* 1 when path is the root of a mount whose directory or file still has a
 * name on the host, 0 when not (absent, a bare mount point, or the source
 * was removed: Docker cannot mount a removed directory), -1 when the
 * kernel cannot say (before Linux 5.8). */
static int stage_is_live_mount(const char *path)
{
    struct statx sx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &sx) < 0)
        return 0;
    if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return -1;
    return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) && sx.stx_nlink > 0 ? 1 : 0;
}

/* Every mount on path off (a crash may have stacked two), then the empty
 * mount point gone. False when something stays (logged). */
static bool stage_clear(const char *path)
{
    while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
        ;
    if (rmdir(path) == 0 || errno == ENOENT)
        return true;
    if (errno == ENOTDIR && unlink(path) == 0)
        return true;
    log_warn("binds: cannot remove the staging mount point %s: %s", path, strerror(errno));
    return false;
}

/* Bind i (host path src) opened and mounted on <dir>/<i>; the path into
 * *out (malloc'd) when out is not NULL. */
static int stage_one(app *a, const char *dir, size_t i, const char *src, char **out, gb_err *err)
{
    _cleanup_close_ int fd = binds_open_host(a, src, err);
    if (fd < 0)
        return -1;
    char path[PATH_MAX], self[64];
    struct stat st;
    if (snprintf(path, sizeof(path), "%s/%zu", dir, i) >= (int)sizeof(path) || fstat(fd, &st) < 0)
        return err_set(err, ERR_INTERNAL, "staging bind %zu: %s", i, strerror(errno));
    if (!stage_clear(path))
        return err_set(err, ERR_INTERNAL, "staging bind %s: %s is in the way", src, path);
    int made = S_ISDIR(st.st_mode)
                   ? mkdir(path, 0700)
                   : open(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (made < 0)
        return err_set(err, ERR_INTERNAL, "staging bind %s: cannot make %s: %s", src, path,
                       strerror(errno));
    if (!S_ISDIR(st.st_mode))
        close(made);
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (mount(self, path, NULL, MS_BIND | MS_REC, NULL) < 0) {
        int e = errno;
        stage_clear(path);
        return err_set(err, ERR_INTERNAL,
                       "pinning bind source %s at %s: %s (gpuboxd mounts host binds itself "
                       "and needs to run as root for them)",
                       src, path, strerror(e));
    }
    if (out)
        *out = xstrdup(path);
    return 0;
}

int binds_stage(app *a, const char *container, const replicaset_spec *spec, binds_resolved *out,
                gb_err *err)
{
    memset(out, 0, sizeof(*out));
    binds_unstage(a, container);
    if (spec->nbinds == 0)
        return 0;
    char dir[PATH_MAX] = "";
    out->binds = xcalloc(spec->nbinds, sizeof(*out->binds));
    out->owned = xcalloc(spec->nbinds, sizeof(*out->owned));
    for (size_t i = 0; i < spec->nbinds; i++) {
        const replicaset_bind *b = &spec->binds[i];
        int rc;
        if (b->src[0] != '/')
            rc = volumes_bind_source(a, b->src, &out->owned[i], err);
        else if (!dir[0] && stage_dir(a, container, dir, sizeof(dir), true, err) < 0)
            rc = -1;
        else
            rc = stage_one(a, dir, i, b->src, &out->owned[i], err);
        out->n = i + 1;
        if (rc < 0) {
            binds_resolved_free(out);
            binds_unstage(a, container);
            return -1;
        }
        out->binds[i] =
            (docker_bind){.src = out->owned[i], .dest = b->dest, .read_only = b->read_only};
    }
    return 0;
}

int binds_ensure(app *a, const char *container, const replicaset_spec *spec, gb_err *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    int remade = 0;
    for (size_t i = 0; i < spec->nbinds; i++) {
        if (spec->binds[i].src[0] != '/')
            continue;
        if (stage_dir(a, container, dir, sizeof(dir), true, err) < 0)
            return -1;
        if (snprintf(path, sizeof(path), "%s/%zu", dir, i) >= (int)sizeof(path))
            return err_set(err, ERR_INTERNAL, "the data dir's path is too long");
        if (stage_is_live_mount(path) == 1)
            continue;
        if (stage_one(a, dir, i, spec->binds[i].src, NULL, err) < 0)
            return err_prefix(err, "container %s", container);
        log_info("binds: %s: bind %s pinned again at %s (its staging mount was gone, or its "
                 "source removed)",
                 container, spec->binds[i].src, path);
        remade = 1;
    }
    return remade;
}

void binds_unstage(app *a, const char *container)
{
    char dir[PATH_MAX];
    gb_err err = GB_ERR_INIT;
    if (stage_dir(a, container, dir, sizeof(dir), false, &err) < 0)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        char path[PATH_MAX];
        if (e->d_name[0] != '.' &&
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
            stage_clear(path);
    }
    closedir(d);
    if (rmdir(dir) < 0 && errno != ENOENT)
        log_warn("binds: cannot remove %s: %s", dir, strerror(errno));
}

bool binds_pinned(app *a, const char *container, const replicaset_spec *spec)
{
    char root[PATH_MAX];
    gb_err err = GB_ERR_INIT;
    bool pinned = true;
    if (stage_root(a, root, sizeof(root), false, &err) < 0)
        return false;
    size_t n = strlen(root);
    for (size_t i = 0; i < spec->nbinds; i++) {
        _cleanup_free_ char *source = NULL;
        if (spec->binds[i].src[0] != '/')
            continue;
        int found =
            docker_container_bind_source(a->docker, container, spec->binds[i].dest, &source, &err);
        if (found < 0)
            return false;
        if (found && strncmp(source, root, n) == 0 && source[n] == '/')
            continue;
        pinned = false;
        if (!found)
            continue;
        log_warn("binds: container %s, made by an older gpuboxd, gives Docker the host path %s "
                 "itself, which Docker resolves again, following symlinks, at every start; "
                 "patch the set or restart it on other cards to pin it (docs/security.md, "
                 "\"Host binds\")",
                 container, source);
    }
    return pinned;
}

void binds_sweep(app *a)
{
    char root[PATH_MAX];
    gb_err err = GB_ERR_INIT;
    if (stage_root(a, root, sizeof(root), false, &err) < 0)
        return;
    DIR *d = opendir(root);
    if (!d)
        return;
    size_t removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        docker_container_state st;
        gb_err e2 = GB_ERR_INIT;
        if (docker_container_state_get(a->docker, e->d_name, &st, &e2) == 0 ||
            e2.code != ERR_NOT_FOUND)
            continue; /* it exists, or Docker did not answer: keep */
        binds_unstage(a, e->d_name);
        removed++;
    }
    closedir(d);
    if (removed)
        log_info("reconcile: removed the staged binds of %zu container(s) Docker no longer has",
                 removed);
}
