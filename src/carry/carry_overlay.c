/*
 * carry_overlay.c - the overlay way: move the entries of one overlay upper
 * directory into another with rename(2), merging directories both have.
 *
 * An overlay2 container's writable layer is a plain directory tree (its
 * UpperDir) in which whiteouts (character devices 0/0) mark files deleted
 * from the image and the xattr trusted.overlay.opaque=y (user.overlay.opaque
 * for rootless Docker) marks directories that hide the image's. Two
 * containers of one image have the same lower layers, so the tree means the
 * same thing in either: moving it moves the system disk, deletions and all.
 *
 * The invariant that makes the move crash-safe and idempotent:
 *   every entry of the user's layer is, at every instant, in exactly one of
 *   the two upper directories, under the same relative path.
 * Each step is one rename(2) on one filesystem, which the kernel makes
 * atomic; nothing is copied. A directory both sides have is merged: its
 * entries are moved one by one, then its own metadata is copied, then the
 * emptied source is removed with rmdir (which fails on anything left). So
 * a run stopped anywhere has moved some entries and left the rest; running
 * again moves what is left and touches nothing already moved (it has no
 * counterpart in the old directory any more).
 *
 * Moving entries out of a directory changes its times, so before the first
 * one goes, the directory's times are stored in the xattr CARRY_MARK_XATTR
 * on it; a later run reads them from there. The old upper directory itself
 * keeps that mark until Docker removes the old container.
 *
 * Where the new upper directory already has an entry (Docker made it, or
 * the new container ran), the user's version wins, except for Docker's own
 * per-container files (carry_docker_own_files), which stay the new
 * container's. An entry of the new side replaced by the user's is removed
 * only when it cannot be the user's: by the invariant, anything already
 * moved has no counterpart left in the old directory.
 */
#include "util/xalloc.h"
#include "carry/carry_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

const char *const carry_docker_own_files[] = {"etc/hostname", "etc/hosts", "etc/resolv.conf",
                                              ".dockerenv"};
const size_t carry_docker_own_files_count = ARRAY_SIZE(carry_docker_own_files);

struct mover {
    long moves;
    long stop_after; /* < 0: no limit */
    gb_err *err;
};

/* "<rel>/<name>" (or "<name>" at the root) into buf. */
static const char *join_rel(char *buf, size_t size, const char *rel, const char *name)
{
    if (!rel[0])
        snprintf(buf, size, "%s", name);
    else
        snprintf(buf, size, "%s/%s", rel, name);
    return buf;
}

static int sys_err(gb_err *err, const char *what, const char *rel)
{
    int saved = errno;
    return err_set(err, ERR_INTERNAL, "carrying the system disk: %s '/%s': %s", what, rel,
                   strerror(saved));
}

static bool is_docker_own(const char *rel)
{
    for (size_t i = 0; i < carry_docker_own_files_count; i++)
        if (strcmp(rel, carry_docker_own_files[i]) == 0)
            return true;
    return false;
}

/* ---- Directory times kept across moves ---- */

static bool mark_read(int fd, struct timespec times[2])
{
    char buf[128];
    ssize_t n = fgetxattr(fd, CARRY_MARK_XATTR, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    long long as, an, ms, mn;
    if (sscanf(buf, "v1 %lld %lld %lld %lld", &as, &an, &ms, &mn) != 4)
        return false;
    times[0] = (struct timespec){.tv_sec = as, .tv_nsec = an};
    times[1] = (struct timespec){.tv_sec = ms, .tv_nsec = mn};
    return true;
}

/* The times of the source directory fd as they were before this or an
 * earlier run moved anything out of it. */
static int mark_get_or_set(int fd, const char *rel, struct timespec times[2], gb_err *err)
{
    if (mark_read(fd, times))
        return 0;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sys_err(err, "reading", rel);
    times[0] = st.st_atim;
    times[1] = st.st_mtim;
    char buf[128];
    int n = snprintf(buf, sizeof(buf), "v1 %lld %lld %lld %lld", (long long)st.st_atim.tv_sec,
                     (long long)st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec,
                     (long long)st.st_mtim.tv_nsec);
    if (fsetxattr(fd, CARRY_MARK_XATTR, buf, (size_t)n, 0) < 0) {
        /* Without trusted xattrs (no CAP_SYS_ADMIN) the move still works; only
         * a re-run after a crash may then give this directory later times. */
        log_debug("carry: cannot mark '/%s' (%s); its times survive only an unbroken run", rel,
                  strerror(errno));
    }
    return 0;
}

/* ---- Metadata of a merged directory ---- */

/* The names of fd's xattrs as one buffer of NUL-terminated strings. */
static ssize_t list_xattrs(int fd, char **out)
{
    *out = NULL;
    for (;;) {
        ssize_t size = flistxattr(fd, NULL, 0);
        if (size <= 0)
            return size;
        char *buf = xmalloc((size_t)size);
        ssize_t n = flistxattr(fd, buf, (size_t)size);
        if (n >= 0) {
            *out = buf;
            return n;
        }
        free(buf);
        if (errno != ERANGE)
            return -1;
    }
}

static bool names_contain(const char *names, ssize_t len, const char *name)
{
    for (ssize_t i = 0; i < len; i += (ssize_t)strlen(names + i) + 1)
        if (strcmp(names + i, name) == 0)
            return true;
    return false;
}

static int copy_one_xattr(int src, int dst, const char *name, const char *rel, gb_err *err)
{
    for (;;) {
        ssize_t size = fgetxattr(src, name, NULL, 0);
        if (size < 0)
            return errno == ENODATA ? 0 : sys_err(err, "reading xattrs of", rel);
        _cleanup_free_ char *value = xmalloc(size ? (size_t)size : 1);
        ssize_t n = fgetxattr(src, name, value, (size_t)size);
        if (n < 0 && errno == ERANGE)
            continue; /* it grew meanwhile */
        if (n < 0)
            return sys_err(err, "reading xattrs of", rel);
        if (fsetxattr(dst, name, value, (size_t)n, 0) == 0)
            return 0;
        /* security.* belongs to the LSM of this host and may be refused. */
        if (strncmp(name, "security.", 9) == 0 && (errno == EPERM || errno == ENOTSUP)) {
            log_warn("carry: '/%s' loses xattr %s: %s", rel, name, strerror(errno));
            return 0;
        }
        return sys_err(err, "setting xattrs of", rel);
    }
}

/* dst gets src's owner, mode, xattrs (exactly src's set, but the mark) and
 * the given times. */
static int copy_dir_metadata(int src, int dst, const char *rel, const struct timespec times[2],
                             gb_err *err)
{
    struct stat st;
    if (fstat(src, &st) < 0)
        return sys_err(err, "reading", rel);
    /* chown before chmod: chown clears setgid on some filesystems. */
    if (fchown(dst, st.st_uid, st.st_gid) < 0 || fchmod(dst, st.st_mode & 07777) < 0)
        return sys_err(err, "setting the owner and mode of", rel);

    _cleanup_free_ char *src_names = NULL, *dst_names = NULL;
    ssize_t src_len = list_xattrs(src, &src_names);
    if (src_len < 0 && errno != ENOTSUP)
        return sys_err(err, "listing xattrs of", rel);
    ssize_t dst_len = list_xattrs(dst, &dst_names);
    if (dst_len < 0 && errno != ENOTSUP)
        return sys_err(err, "listing xattrs of", rel);
    for (ssize_t i = 0; i < src_len; i += (ssize_t)strlen(src_names + i) + 1) {
        const char *name = src_names + i;
        if (strcmp(name, CARRY_MARK_XATTR) != 0 && copy_one_xattr(src, dst, name, rel, err) < 0)
            return -1;
    }
    for (ssize_t i = 0; i < dst_len; i += (ssize_t)strlen(dst_names + i) + 1) {
        const char *name = dst_names + i;
        bool stale = strcmp(name, CARRY_MARK_XATTR) == 0 || !src_names ||
                     !names_contain(src_names, src_len, name);
        if (stale && fremovexattr(dst, name) < 0 && errno != ENODATA)
            return sys_err(err, "removing xattrs of", rel);
    }
    if (futimens(dst, times) < 0)
        return sys_err(err, "setting the times of", rel);
    return 0;
}

/* ---- Removing what Docker made where the user's version goes ---- */

static int remove_tree(int parent, const char *name, const char *rel, gb_err *err)
{
    if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return sys_err(err, "removing", rel);
    _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return sys_err(err, "opening", rel);
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return sys_err(err, "reading", rel);
    }
    struct dirent *de;
    int rc = 0;
    char child[PATH_MAX];
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = remove_tree(fd, de->d_name, join_rel(child, sizeof(child), rel, de->d_name), err);
    }
    closedir(d);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return sys_err(err, "removing", rel);
    return rc;
}

/* ---- The move ---- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The entries of directory fd, sorted so runs are repeatable. */
static int read_names(int fd, const char *rel, char ***out, size_t *count, gb_err *err)
{
    *out = NULL;
    *count = 0;
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return sys_err(err, "reading", rel);
    }
    rewinddir(d);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **grown = xrealloc(names, cap * sizeof(*names));
            names = grown;
        }
        names[n] = xstrdup(de->d_name);
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof(*names), cmp_names);
    *out = names;
    *count = n;
    return 0;
}

/* One rename; 1 when the test hook says stop here. */
static int move_one(struct mover *m, int old_fd, int new_fd, const char *name, const char *rel,
                    bool replace)
{
    if (m->stop_after >= 0 && m->moves >= m->stop_after)
        return 1;
    int rc = renameat2(old_fd, name, new_fd, name, replace ? 0 : RENAME_NOREPLACE);
    if (rc < 0 && errno == EINVAL && !replace) {
        /* A filesystem without RENAME_NOREPLACE: the caller saw no entry. */
        rc = renameat(old_fd, name, new_fd, name);
    }
    if (rc < 0)
        return sys_err(m->err, "moving", rel);
    m->moves++;
    return 0;
}

static int merge_dir(struct mover *m, int old_fd, int new_fd, const char *rel);

/* Move old/name into new/name by the rules in the header comment. */
static int move_entry(struct mover *m, int old_fd, int new_fd, const char *name,
                      const char *parent_rel)
{
    char rel[PATH_MAX];
    join_rel(rel, sizeof(rel), parent_rel, name);
    struct stat so, sn;
    if (fstatat(old_fd, name, &so, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : sys_err(m->err, "reading", rel);
    if (fstatat(new_fd, name, &sn, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return sys_err(m->err, "reading", rel);
        return move_one(m, old_fd, new_fd, name, rel, false);
    }
    if (S_ISDIR(so.st_mode) && S_ISDIR(sn.st_mode)) {
        _cleanup_close_ int o =
            openat(old_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int n =
            openat(new_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (o < 0 || n < 0)
            return sys_err(m->err, "opening", rel);
        int rc = merge_dir(m, o, n, rel);
        if (rc != 0)
            return rc;
        /* Anything left (Docker's own files the new side kept) stays with the
         * old container and goes when it is removed. */
        if (unlinkat(old_fd, name, AT_REMOVEDIR) < 0 && errno != ENOTEMPTY && errno != ENOENT)
            return sys_err(m->err, "removing the emptied", rel);
        return 0;
    }
    if (!S_ISDIR(sn.st_mode) && is_docker_own(rel)) {
        log_debug("carry: '/%s' stays the new container's own", rel);
        return 0;
    }
    if (!S_ISDIR(sn.st_mode)) {
        if (!S_ISDIR(so.st_mode)) /* one atomic replace */
            return move_one(m, old_fd, new_fd, name, rel, true);
        if (unlinkat(new_fd, name, 0) < 0 && errno != ENOENT)
            return sys_err(m->err, "removing the new container's", rel);
        return move_one(m, old_fd, new_fd, name, rel, false);
    }
    /* A directory Docker made where the user has a file (or a whiteout). */
    if (remove_tree(new_fd, name, rel, m->err) < 0)
        return -1;
    return move_one(m, old_fd, new_fd, name, rel, false);
}

static int merge_dir(struct mover *m, int old_fd, int new_fd, const char *rel)
{
    struct timespec times[2];
    if (mark_get_or_set(old_fd, rel, times, m->err) < 0)
        return -1;
    char **names = NULL;
    size_t n = 0;
    if (read_names(old_fd, rel, &names, &n, m->err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = move_entry(m, old_fd, new_fd, names[i], rel);
    free_names(names, n);
    if (rc != 0)
        return rc;
    if (copy_dir_metadata(old_fd, new_fd, rel, times, m->err) < 0)
        return -1;
    /* The renames must be on disk before a journal records this step done. */
    if (fsync(new_fd) < 0 || fsync(old_fd) < 0)
        return sys_err(m->err, "syncing", rel);
    return 0;
}

int carry_overlay_move(const char *old_upper, const char *new_upper, const carry_overlay_opts *opts,
                       carry_stats *stats, gb_err *err)
{
    _cleanup_close_ int old_fd = open(old_upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (old_fd < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: opening '%s': %s", old_upper,
                       strerror(errno));
    _cleanup_close_ int new_fd = open(new_upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (new_fd < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: opening '%s': %s", new_upper,
                       strerror(errno));
    struct stat so, sn;
    if (fstat(old_fd, &so) < 0 || fstat(new_fd, &sn) < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: %s", strerror(errno));
    if (so.st_dev != sn.st_dev)
        return err_set(err, ERR_INVALID_PARAMS,
                       "carrying the system disk: '%s' and '%s' are on different filesystems",
                       old_upper, new_upper);
    if (so.st_ino == sn.st_ino)
        return err_set(err, ERR_INVALID_PARAMS,
                       "carrying the system disk: '%s' and '%s' are the same directory", old_upper,
                       new_upper);
    struct mover m = {.stop_after = opts ? opts->stop_after_moves : -1, .err = err};
    int rc = merge_dir(&m, old_fd, new_fd, "");
    if (stats)
        stats->entries += (uint64_t)m.moves;
    return rc;
}

/* ---- Is an upper directory in use? ---- */

/* Whether opts (a mount's options) names path as a whole option value or a
 * colon-separated part of one. */
static bool options_name_path(const char *opts, const char *path)
{
    size_t len = strlen(path);
    for (const char *p = strstr(opts, path); p; p = strstr(p + 1, path)) {
        char before = p == opts ? ',' : p[-1];
        char after = p[len];
        if ((before == '=' || before == ':') &&
            (after == ',' || after == ':' || after == '\0' || after == '\n' || after == ' '))
            return true;
    }
    return false;
}

bool carry_path_in_mount(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) {
        /* "... - overlay overlay rw,lowerdir=...,upperdir=...,workdir=..." */
        const char *sep = strstr(line, " - ");
        if (sep && strstr(sep, "dir=") && options_name_path(sep, path))
            found = true;
    }
    free(line);
    return found;
}
