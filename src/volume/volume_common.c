/*
 * volume_common.c - helpers every backend uses: paths under the volumes
 * directory, Docker bind options, "is something mounted here", running
 * e2fsprogs, and the two space checks (room on the host for a sparse
 * image, room in a volume for its data).
 */
#include "volume/volume_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "util/cleanup.h"
#include "util/size.h"

int volume_path(const volume_env *env, const char *name, const char *suffix, char *buf, size_t len,
                gb_err *err)
{
    int n = snprintf(buf, len, "%s/%s%s", env->volumes_dir, name, suffix);
    if (n < 0 || (size_t)n >= len)
        return err_set(err, ERR_INVALID_PARAMS, "path of volume '%s' under %s is too long", name,
                       env->volumes_dir);
    return 0;
}

static void volume_opt_set(volume_docker_opts *opts, const char *key, const char *value)
{
    struct volume_docker_opt *o = &opts->items[opts->n++];
    snprintf(o->key, sizeof(o->key), "%s", key);
    snprintf(o->value, sizeof(o->value), "%s", value);
}

void volume_opts_bind(volume_docker_opts *opts, const char *dir)
{
    memset(opts, 0, sizeof(*opts));
    volume_opt_set(opts, "type", "none");
    volume_opt_set(opts, "o", "bind");
    volume_opt_set(opts, "device", dir);
}

int volume_mounted_at(const char *dir, dev_t *dev, gb_err *err)
{
    struct stat here, parent;
    char up[VOLUME_PATH_MAX + 4];
    snprintf(up, sizeof(up), "%s/..", dir);
    if (stat(dir, &here) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_set(err, ERR_INTERNAL, "cannot read %s: %s", dir, strerror(errno));
    }
    if (stat(up, &parent) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read %s: %s", up, strerror(errno));
    if (dev)
        *dev = here.st_dev;
    return here.st_dev != parent.st_dev;
}

int volume_dir_immutable(const char *dir, bool on, gb_err *err)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT
                   ? 0
                   : err_set(err, ERR_INTERNAL, "cannot open %s: %s", dir, strerror(errno));
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
        return 0; /* a filesystem without inode flags: no safety net there */
    int want = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    if (want == flags || ioctl(fd, FS_IOC_SETFLAGS, &want) == 0 || on)
        return 0;
    return err_set(err, ERR_INTERNAL, "cannot make %s writable again: %s", dir, strerror(errno));
}

int volume_run_tool(char *const argv[], int timeout_ms, proc_result *r, int code, gb_err *err)
{
    char path[VOLUME_PATH_MAX];
    if (proc_resolve(argv[0], VOLUME_TOOL_DIRS, path, sizeof(path), err) < 0) {
        if (err)
            err->code = code;
        const char *package = strstr(argv[0], "xfs")       ? "xfsprogs"
                              : strcmp(argv[0], "cp") == 0 ? "coreutils"
                                                           : "e2fsprogs";
        return err_prefix(err, "loop volumes need %s", package);
    }
    char *args[16];
    size_t n = 0;
    args[n++] = path;
    for (size_t i = 1; argv[i] && n < ARRAY_SIZE(args) - 1; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    char *const env[] = {"PATH=" VOLUME_TOOL_DIRS ":/usr/local/bin:/usr/bin:/bin", "LC_ALL=C",
                         NULL};
    if (proc_run(args, env, timeout_ms, r, err) < 0) {
        if (err)
            err->code = code;
        return -1;
    }
    return 0;
}

int volume_check_space(const volume_env *env, const char *name, uint64_t grow, gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(env->volumes_dir, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the free space of %s: %s", env->volumes_dir,
                       strerror(errno));
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (grow <= avail)
        return 0;
    char want[32], have[32];
    size_format(grow, want, sizeof(want));
    size_format(avail, have, sizeof(have));
    return err_set(err, ERR_INVALID_PARAMS,
                   "volume '%s' would need %s more on the filesystem of %s, which has %s "
                   "available; free some space or ask for less",
                   name, want, env->volumes_dir, have);
}

int volume_check_fits(const char *name, uint64_t used, uint64_t usable, uint64_t asked, gb_err *err)
{
    uint64_t margin = usable / 20;
    if (margin < 4ULL << 20)
        margin = 4ULL << 20;
    if (used + margin <= usable)
        return 0;
    char u[32], a[32], need[32];
    size_format(used, u, sizeof(u));
    size_format(asked, a, sizeof(a));
    /* What to ask for instead: scale the need by the asked/usable ratio,
     * which is the filesystem's overhead at that size. */
    uint64_t min = usable ? (uint64_t)((double)(used + margin) * (double)asked / (double)usable)
                          : used + margin;
    size_format(min + (1ULL << 20), need, sizeof(need));
    return err_set(err, ERR_VOLUME_USED_TOO_LARGE,
                   "volume '%s' holds %s of data, which does not fit in %s (with the "
                   "filesystem's overhead and a safety margin it needs about %s); delete some "
                   "data or ask for more",
                   name, u, a, need);
}
