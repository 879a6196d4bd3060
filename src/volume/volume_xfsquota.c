/*
 * volume_xfsquota.c - the xfsquota backend: the Docker local driver's own
 * `size` option, which works when the Docker root is on XFS mounted with
 * prjquota. Docker then gives the volume's directory
 * (<docker-root>/volumes/<name>/_data) an XFS project id and sets that
 * project's block limit. gpubox resizes by changing the same limit
 * (quotactl Q_XSETQLIM): in place, online, both ways, no copy. Usage comes
 * from the quota's own count (Q_XGETQUOTA). Nothing lives in the data dir
 * except the device node below.
 *
 * UNTESTED HERE: the machine gpubox is developed and tested on has no XFS
 * with project quotas (its Docker root is ext4), so the tests exercise
 * only check()'s refusal. Everything else follows the kernel's documented
 * interface (quotactl(2), linux/dqblk_xfs.h, FS_IOC_FSGETXATTR) and is kept
 * as small as possible; try it on a real XFS host before relying on it.
 *
 * quotactl names a filesystem by a block device. The Docker root's real
 * device may have no node where the daemon runs (a container, a dm name),
 * so, as Docker does, a node for the filesystem's st_dev is made at
 * <data-dir>/volumes/.xfsquota-dev.
 */
#include "volume/volume_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"

#define XFSQ_HINT "use --volume-backend loop"

/* A name for what the Docker root is on, for the refusal message. */
static const char *xfsq_fs_name(long type)
{
    switch ((unsigned long)type) {
    case EXT4_SUPER_MAGIC: /* ext2 and ext3 share it */
        return "ext4";
    case BTRFS_SUPER_MAGIC:
        return "btrfs";
    case TMPFS_MAGIC:
        return "tmpfs";
    case OVERLAYFS_SUPER_MAGIC:
        return "overlayfs";
    default:
        return "a filesystem other than XFS";
    }
}

/* The device node for quotactl (see the file comment). */
static int xfsq_device(const volume_env *env, char *node, size_t len, gb_err *err)
{
    struct stat root, have;
    if (stat(env->docker_root, &root) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the Docker root %s: %s", env->docker_root,
                       strerror(errno));
    if (snprintf(node, len, "%s/.xfsquota-dev", env->volumes_dir) >= (int)len)
        return err_set(err, ERR_INTERNAL, "%s: path too long", env->volumes_dir);
    if (lstat(node, &have) == 0 && S_ISBLK(have.st_mode) && have.st_rdev == root.st_dev)
        return 0;
    unlink(node);
    if (mknod(node, S_IFBLK | 0600, root.st_dev) < 0)
        return err_set(err, ERR_INTERNAL, "cannot make the quota device node %s: %s", node,
                       strerror(errno));
    return 0;
}

static int xfsq_quotactl(const char *node, int cmd, uint32_t id, void *addr)
{
    return (int)syscall(SYS_quotactl, QCMD(cmd, PRJQUOTA), node, id, addr);
}

static int xfsq_check(const volume_env *env, gb_err *err)
{
    struct statfs fs;
    if (statfs(env->docker_root, &fs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the Docker root %s: %s; " XFSQ_HINT,
                       env->docker_root, strerror(errno));
    if ((unsigned long)fs.f_type != XFS_SUPER_MAGIC)
        return err_set(err, ERR_INVALID_PARAMS,
                       "the xfsquota volume backend needs the Docker root on XFS mounted with "
                       "prjquota; %s is on %s; " XFSQ_HINT,
                       env->docker_root, xfsq_fs_name(fs.f_type));
    char node[VOLUME_PATH_MAX];
    struct fs_quota_stat qs = {.qs_version = FS_QSTAT_VERSION};
    if (xfsq_device(env, node, sizeof(node), err) < 0)
        return -1;
    if (xfsq_quotactl(node, Q_XGETQSTAT, 0, &qs) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "the xfsquota volume backend cannot read the quota state of %s (%s): the "
                       "kernel may lack XFS quota support; " XFSQ_HINT,
                       env->docker_root, strerror(errno));
    if (!(qs.qs_flags & FS_QUOTA_PDQ_ACCT) || !(qs.qs_flags & FS_QUOTA_PDQ_ENFD))
        return err_set(err, ERR_INVALID_PARAMS,
                       "the xfsquota volume backend needs project quotas enforced on %s; mount "
                       "it with prjquota (or " XFSQ_HINT ")",
                       env->docker_root);
    return 0;
}

/* The project id Docker gave the volume's directory. */
static int xfsq_project(const volume_env *env, const char *name, const char *docker_mountpoint,
                        uint32_t *projid, gb_err *err)
{
    char dir[VOLUME_PATH_MAX + 96];
    if (docker_mountpoint)
        snprintf(dir, sizeof(dir), "%s", docker_mountpoint);
    else
        snprintf(dir, sizeof(dir), "%s/volumes/%s/_data", env->docker_root, name);
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct fsxattr fsx = {0};
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL,
                       "cannot open the directory of volume '%s' (%s): %s", name, dir,
                       strerror(errno));
    if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the project id of %s: %s", dir,
                       strerror(errno));
    if (fsx.fsx_projid == 0)
        return err_set(err, ERR_INTERNAL,
                       "%s has no project id: was the Docker volume '%s' created with the size "
                       "option?",
                       dir, name);
    *projid = fsx.fsx_projid;
    return 0;
}

/* The quota of the volume's project: used bytes and hard limit. */
static int xfsq_get(const volume_env *env, const char *name, const char *docker_mountpoint,
                    uint32_t *projid, struct fs_disk_quota *q, char *node, gb_err *err)
{
    if (xfsq_project(env, name, docker_mountpoint, projid, err) < 0 ||
        xfsq_device(env, node, VOLUME_PATH_MAX, err) < 0)
        return -1;
    memset(q, 0, sizeof(*q));
    if (xfsq_quotactl(node, Q_XGETQUOTA, *projid, q) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the quota of volume '%s' (project %u): %s",
                       name, *projid, strerror(errno));
    return 0;
}

static int xfsq_create(const volume_env *env, const char *name, uint64_t size,
                       volume_docker_opts *opts, gb_err *err)
{
    (void)env, (void)name, (void)err;
    /* Docker makes the directory and the quota; its size parser takes a
     * plain number as bytes. */
    memset(opts, 0, sizeof(*opts));
    opts->n = 1;
    snprintf(opts->items[0].key, sizeof(opts->items[0].key), "size");
    snprintf(opts->items[0].value, sizeof(opts->items[0].value), "%llu", (unsigned long long)size);
    return 0;
}

static int xfsq_attach(const volume_env *env, const char *name, gb_err *err)
{
    (void)env, (void)name, (void)err;
    return 0; /* quotas live in the XFS filesystem and survive reboots */
}

static int xfsq_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                       uint64_t new_size, bool in_use, gb_err *err)
{
    (void)in_use; /* a quota changes online, both ways */
    uint32_t projid = 0;
    struct fs_disk_quota q;
    char node[VOLUME_PATH_MAX];
    if (xfsq_get(env, name, docker_mountpoint, &projid, &q, node, err) < 0)
        return -1;
    uint64_t used = q.d_bcount * 512;
    if (new_size < q.d_blk_hardlimit * 512 &&
        volume_check_fits(name, used, new_size, new_size, err) < 0)
        return -1;
    struct fs_disk_quota set = {
        .d_version = FS_DQUOT_VERSION,
        .d_flags = FS_PROJ_QUOTA,
        .d_fieldmask = FS_DQ_BHARD | FS_DQ_BSOFT,
        .d_id = projid,
        .d_blk_hardlimit = new_size / 512, /* basic blocks */
        .d_blk_softlimit = new_size / 512,
    };
    if (xfsq_quotactl(node, Q_XSETQLIM, projid, &set) < 0)
        return err_set(err, ERR_INTERNAL, "cannot set the quota of volume '%s' (project %u): %s",
                       name, projid, strerror(errno));
    return 0;
}

static int xfsq_usage(const volume_env *env, const char *name, const char *docker_mountpoint,
                      uint64_t *used, uint64_t *size, gb_err *err)
{
    uint32_t projid = 0;
    struct fs_disk_quota q;
    char node[VOLUME_PATH_MAX];
    if (xfsq_get(env, name, docker_mountpoint, &projid, &q, node, err) < 0)
        return -1;
    *used = q.d_bcount * 512;
    *size = q.d_blk_hardlimit * 512;
    return 0;
}

static int xfsq_destroy(const volume_env *env, const char *name, gb_err *err)
{
    (void)env, (void)name, (void)err;
    return 0; /* removing the Docker volume removed the directory */
}

const struct volume_backend volume_backend_xfsquota = {
    .name = "xfsquota",
    .enforced = true,
    .min_bytes = 1ULL << 20,
    .check = xfsq_check,
    .create = xfsq_create,
    .attach = xfsq_attach,
    .resize = xfsq_resize,
    .usage = xfsq_usage,
    .destroy = xfsq_destroy,
};
