/*
 * volume_plain.c - the plain backend, for hosts with neither loop devices
 * nor XFS project quotas: a directory <data-dir>/volumes/<name>/ that
 * Docker's local driver binds into containers. Nothing enforces the size:
 * the caller records it, a resize only checks that a shrink is not below
 * what is stored, and usage reports size 0 ("not enforced").
 *
 * Usage is measured like du: the st_blocks of everything under the
 * directory, symlinks not followed, other filesystems not entered, a file
 * with several hard links counted once. The walk stops after
 * PLAIN_DU_MAX_ENTRIES entries or PLAIN_DU_MAX_MS milliseconds, whichever
 * comes first; the figure is then a lower bound, and a warning is logged.
 */
#include "util/xalloc.h"
#include "volume/volume_internal.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/size.h"
#include "util/time.h"

#define PLAIN_DU_MAX_ENTRIES 1000000
#define PLAIN_DU_MAX_MS 10000
#define PLAIN_NFTW_FDS 32

/* A file with more than one link: counted once, after the walk. */
struct plain_inode {
    dev_t dev;
    ino_t ino;
    uint64_t bytes;
};

/* nftw's callback takes no argument; the walk's state lives here, one per
 * thread (walks of different volumes may run in parallel). */
struct plain_walk {
    uint64_t bytes;
    size_t entries;
    int64_t deadline_ms;
    bool truncated;
    struct plain_inode *linked;
    size_t nlinked, cap;
    int error; /* errno of a failed removal (destroy) */
    char failed[VOLUME_PATH_MAX];
};

static __thread struct plain_walk *plain_walk_now;

static int plain_du_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)path, (void)type, (void)ftw;
    struct plain_walk *w = plain_walk_now;
    if (++w->entries > PLAIN_DU_MAX_ENTRIES ||
        ((w->entries & 1023) == 0 && time_mono_ms() > w->deadline_ms)) {
        w->truncated = true;
        return FTW_STOP;
    }
    uint64_t bytes = (uint64_t)st->st_blocks * 512;
    if (S_ISDIR(st->st_mode) || st->st_nlink <= 1) {
        w->bytes += bytes;
        return FTW_CONTINUE;
    }
    if (w->nlinked == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        struct plain_inode *grown = xrealloc(w->linked, cap * sizeof(*grown));
        w->linked = grown;
        w->cap = cap;
    }
    w->linked[w->nlinked++] = (struct plain_inode){st->st_dev, st->st_ino, bytes};
    return FTW_CONTINUE;
}

static int plain_inode_cmp(const void *a, const void *b)
{
    const struct plain_inode *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* du of dir, in bytes. */
static int plain_du(const char *name, const char *dir, uint64_t *used, gb_err *err)
{
    struct plain_walk w = {.deadline_ms = time_mono_ms() + PLAIN_DU_MAX_MS};
    plain_walk_now = &w;
    int rc = nftw(dir, plain_du_entry, PLAIN_NFTW_FDS, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
    int saved = w.error ? w.error : errno;
    plain_walk_now = NULL;
    if (rc < 0 || w.error) {
        free(w.linked);
        return err_set(err, saved == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL,
                       "cannot measure volume '%s' (%s): %s", name, dir, strerror(saved));
    }
    if (w.nlinked > 1)
        qsort(w.linked, w.nlinked, sizeof(*w.linked), plain_inode_cmp);
    for (size_t i = 0; i < w.nlinked; i++)
        if (i == 0 || plain_inode_cmp(&w.linked[i], &w.linked[i - 1]) != 0)
            w.bytes += w.linked[i].bytes;
    free(w.linked);
    if (w.truncated)
        log_warn("volume '%s': usage counted over the first %zu entries only (limits: %d "
                 "entries, %d ms); the real figure is higher",
                 name, w.entries - 1, PLAIN_DU_MAX_ENTRIES, PLAIN_DU_MAX_MS);
    *used = w.bytes;
    return 0;
}

static int plain_remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    struct plain_walk *w = plain_walk_now;
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT)
        return FTW_CONTINUE;
    w->error = errno;
    snprintf(w->failed, sizeof(w->failed), "%s", path);
    return FTW_STOP;
}

static int plain_check(const volume_env *env, gb_err *err)
{
    (void)env, (void)err;
    return 0; /* a directory works anywhere */
}

static int plain_dir(const volume_env *env, const char *name, char *dir, gb_err *err)
{
    return volume_path(env, name, "", dir, VOLUME_PATH_MAX, err);
}

static int plain_create(const volume_env *env, const char *name, uint64_t size,
                        volume_docker_opts *opts, gb_err *err)
{
    (void)size;
    char dir[VOLUME_PATH_MAX];
    if (plain_dir(env, name, dir, err) < 0)
        return -1;
    if (mkdir(dir, 0755) < 0)
        return err_set(err, errno == EEXIST ? ERR_VOLUME_EXISTS : ERR_INTERNAL,
                       "cannot create the directory of volume '%s' (%s): %s", name, dir,
                       strerror(errno));
    volume_opts_bind(opts, dir);
    return 0;
}

static int plain_attach(const volume_env *env, const char *name, gb_err *err)
{
    char dir[VOLUME_PATH_MAX];
    struct stat st;
    if (plain_dir(env, name, dir, err) < 0)
        return -1;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_set(err, ERR_NOT_FOUND, "volume '%s' has no directory %s", name, dir);
    return 0;
}

static int plain_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                        uint64_t new_size, bool in_use, gb_err *err)
{
    (void)docker_mountpoint, (void)in_use;
    char dir[VOLUME_PATH_MAX], u[32], a[32];
    uint64_t used = 0;
    if (plain_dir(env, name, dir, err) < 0 || plain_du(name, dir, &used, err) < 0)
        return -1;
    if (used <= new_size)
        return 0; /* nothing on disk changes: the caller records the size */
    size_format(used, u, sizeof(u));
    size_format(new_size, a, sizeof(a));
    return err_set(err, ERR_VOLUME_USED_TOO_LARGE,
                   "volume '%s' holds %s of data, more than the %s asked; delete some data or "
                   "ask for more",
                   name, u, a);
}

static int plain_usage(const volume_env *env, const char *name, const char *docker_mountpoint,
                       uint64_t *used, uint64_t *size, gb_err *err)
{
    (void)docker_mountpoint;
    char dir[VOLUME_PATH_MAX];
    *size = 0; /* not enforced: the recorded size is the caller's */
    if (plain_dir(env, name, dir, err) < 0)
        return -1;
    return plain_du(name, dir, used, err);
}

static int plain_destroy(const volume_env *env, const char *name, gb_err *err)
{
    char dir[VOLUME_PATH_MAX];
    if (plain_dir(env, name, dir, err) < 0)
        return -1;
    if (access(dir, F_OK) < 0 && errno == ENOENT)
        return 0;
    /* Depth first, symlinks removed not followed, and never into another
     * filesystem: something mounted inside makes its parent fail to go. */
    struct plain_walk w = {0};
    plain_walk_now = &w;
    int rc = nftw(dir, plain_remove_entry, PLAIN_NFTW_FDS,
                  FTW_DEPTH | FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
    plain_walk_now = NULL;
    if (rc < 0 && errno != ENOENT)
        return err_set(err, ERR_INTERNAL, "cannot remove volume '%s' (%s): %s", name, dir,
                       strerror(errno));
    if (w.error)
        return err_set(err, w.error == EBUSY ? ERR_STATE_CONFLICT : ERR_INTERNAL,
                       "cannot remove %s of volume '%s': %s", w.failed, name, strerror(w.error));
    return 0;
}

const struct volume_backend volume_backend_plain = {
    .name = "plain",
    .enforced = false,
    .min_bytes = 1,
    .check = plain_check,
    .create = plain_create,
    .attach = plain_attach,
    .resize = plain_resize,
    .usage = plain_usage,
    .destroy = plain_destroy,
};
