/*
 * volume_loop.c - the loop backend (default): one sparse image file with a
 * filesystem (ext4 by default, XFS with --volume-fs xfs) per volume, on a
 * loop device, mounted under the data dir; Docker's local driver binds the
 * mountpoint into containers, so the size is the filesystem's and writing
 * past it fails with ENOSPC inside the container while nothing else on the
 * host fills up.
 *
 * On disk, under <data-dir>/volumes/:
 *   <name>.img        the image: a sparse file, size = the volume's size
 *                     (rounded down to 4 KiB). ext4: 4 KiB blocks, no
 *                     reserved blocks (-m 0); XFS: mkfs.xfs's defaults.
 *                     Labelled with the name.
 *   <name>.img.tmp    an image being made; renamed to <name>.img once mkfs
 *                     succeeded, so a crash never leaves a half-made image
 *                     under the real name
 *   <name>/           the mountpoint (mounted nosuid,nodev); the directory
 *                     itself is immutable, so nothing can be written into
 *                     it while the volume is not mounted there
 *   <name>.img-shrink, <name>-shrink/
 *                     only while an XFS volume shrinks: the smaller copy
 *                     and where it is mounted (volume_loop_xfs.c). The '-'
 *                     no volume name may contain keeps them apart from
 *                     other volumes' files.
 * Nothing else is kept: the loop device is found again through sysfs
 * (volume_loopdev.c), "mounted" is read from the mountpoint itself, and
 * the filesystem from the image's superblock - so volumes made before
 * --volume-fs changed keep theirs.
 *
 * Resizing lives in volume_loop_resize.c; this file makes, attaches,
 * measures and removes.
 */
#include "volume/volume_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/size.h"

int volume_loop_paths(const volume_env *env, const char *name, struct loop_paths *p, gb_err *err)
{
    p->name = name;
    p->fs = LOOP_FS_EXT4;
    if (volume_path(env, name, ".img", p->image, sizeof(p->image), err) < 0 ||
        volume_path(env, name, ".img.tmp", p->tmp, sizeof(p->tmp), err) < 0 ||
        volume_path(env, name, "", p->mnt, sizeof(p->mnt), err) < 0 ||
        volume_path(env, name, ".img-shrink", p->copy, sizeof(p->copy), err) < 0 ||
        volume_path(env, name, "-shrink", p->copy_mnt, sizeof(p->copy_mnt), err) < 0)
        return -1;
    return 0;
}

const char *volume_loop_fs_name(enum loop_fs fs)
{
    return fs == LOOP_FS_XFS ? "xfs" : "ext4";
}

int volume_loop_probe_fs(const char *image, enum loop_fs *fs, gb_err *err)
{
    _cleanup_close_ int fd = open(image, O_RDONLY | O_CLOEXEC);
    unsigned char head[1084];
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, "cannot open %s: %s",
                       image, strerror(errno));
    if (pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head))
        return err_set(err, ERR_INTERNAL, "cannot read the superblock of %s", image);
    if (memcmp(head, "XFSB", 4) == 0) /* XFS: at 0, big-endian */
        return *fs = LOOP_FS_XFS, 0;
    if (head[1080] == 0x53 && head[1081] == 0xEF) /* ext4: at 1024 + 56 */
        return *fs = LOOP_FS_EXT4, 0;
    return err_set(err, ERR_INTERNAL, "%s holds neither ext4 nor XFS; was it replaced?", image);
}

int volume_loop_check_size(enum loop_fs fs, const char *name, uint64_t size, gb_err *err)
{
    if (fs != LOOP_FS_XFS || size >= LOOP_XFS_MIN_BYTES)
        return 0;
    char asked[32];
    size_format(size, asked, sizeof(asked));
    return err_set(err, ERR_INVALID_PARAMS,
                   "volume size %s is too small: xfs loop volumes are at least 300MB (mkfs.xfs "
                   "makes none smaller); ask for 300MB or more%s",
                   asked, name ? "" : ", or make the volume ext4 (--volume-fs ext4)");
}

int volume_loop_fsck(int index, bool force, gb_err *err)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    /* -p (preen) fixes only what is safe to fix unattended and replays the
     * journal after a crash; -f -y (before a shrink, which resize2fs
     * demands) checks even a clean filesystem. */
    char *const preen[] = {"e2fsck", "-p", dev, NULL};
    char *const full[] = {"e2fsck", "-f", "-y", dev, NULL};
    proc_result r;
    if (volume_run_tool(force ? full : preen, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    /* 0 clean, 1 errors fixed, 2 fixed and "reboot" (only matters for /). */
    int status = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
    int rc = 0;
    if (status < 0 || status > 2) {
        char line[200];
        rc = err_set(err, ERR_INTERNAL,
                     "e2fsck found problems it could not fix on %s (status %d: %s); "
                     "run e2fsck -f on it by hand",
                     dev, status, proc_first_line(&r, line, sizeof(line)));
    }
    proc_result_free(&r);
    return rc;
}

int volume_loop_mount(const struct loop_paths *p, int index, const char *dir, bool read_only,
                      gb_err *err)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    if (volume_dir_immutable(dir, true, err) < 0)
        return -1;
    unsigned long flags = MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0);
    if (mount(dev, dir, volume_loop_fs_name(p->fs), flags, "") == 0)
        return 0;
    if (errno == EBUSY)
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' is busy: %s is held by another program (an e2fsck or "
                       "resize2fs from an earlier run still working on it?); try again when it "
                       "is done",
                       p->name, dev);
    if (errno == EUCLEAN && p->fs == LOOP_FS_XFS) /* EFSCORRUPTED */
        return err_set(err, ERR_INTERNAL,
                       "the XFS in %s is damaged and cannot be mounted; run xfs_repair -f on it "
                       "by hand",
                       p->image);
    return err_set(err, ERR_INTERNAL, "cannot mount %s (%s) at %s: %s", dev, p->image, dir,
                   strerror(errno));
}

/* The read-only mount an interrupted XFS shrink left: writable again. */
static int loop_make_writable(const struct loop_paths *p, gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(p->mnt, &vfs) < 0 || !(vfs.f_flag & ST_RDONLY))
        return 0;
    if (mount(NULL, p->mnt, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
        return err_set(err, ERR_INTERNAL, "cannot make %s writable again: %s", p->mnt,
                       strerror(errno));
    return 0;
}

int volume_loop_attach_paths(struct loop_paths *p, gb_err *err)
{
    struct stat st;
    if (stat(p->image, &st) < 0)
        return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL,
                       "volume '%s' has no storage: %s: %s", p->name, p->image, strerror(errno));
    if (volume_loop_probe_fs(p->image, &p->fs, err) < 0 || volume_loop_copy_remove(p, err) < 0)
        return -1;
    dev_t mounted = 0, want = 0;
    int is_mounted = volume_mounted_at(p->mnt, &mounted, err);
    int index = -1;
    int found = is_mounted < 0 ? -1 : volume_loopdev_find(p->image, &index, err);
    if (found < 0)
        return -1;
    if (is_mounted) {
        if (found && volume_loopdev_devnum(index, &want, err) == 0 && want == mounted)
            return loop_make_writable(p, err); /* already attached */
        return err_set(err, ERR_INTERNAL,
                       "something other than volume '%s' is mounted at %s; unmount it", p->name,
                       p->mnt);
    }
    _cleanup_close_ int fd = -1;
    if (found) {
        /* Bound but not mounted: bound by hand, or the file grew before a
         * crash and the device was never told. */
        if (volume_loopdev_set_capacity(index, err) < 0)
            return -1;
    } else if (volume_loopdev_attach(p->image, &index, &fd, err) < 0 ||
               (p->fs == LOOP_FS_EXT4 && volume_loop_fsck(index, false, err) < 0)) {
        return -1; /* fd closes: the autoclear device unbinds itself */
    }
    /* XFS needs no check first: mounting replays its log. */
    return volume_loop_mount(p, index, p->mnt, false, err);
}

void volume_loop_reattach(struct loop_paths *p, gb_err *err)
{
    gb_err again = GB_ERR_INIT;
    if (volume_loop_attach_paths(p, &again) == 0)
        return;
    char first[sizeof(err->msg)];
    snprintf(first, sizeof(first), "%s", err ? err->msg : "");
    err_set(err, err ? err->code : ERR_INTERNAL, "%s (and attaching it again failed too: %s)",
            first, again.msg);
}

int volume_loop_detach_paths(struct loop_paths *p, gb_err *err)
{
    int is_mounted = volume_mounted_at(p->mnt, NULL, err);
    if (is_mounted < 0)
        return -1;
    if (is_mounted && umount2(p->mnt, UMOUNT_NOFOLLOW) < 0) {
        if (errno == EBUSY)
            return err_set(err, ERR_STATE_CONFLICT,
                           "volume '%s' is busy: a process on the host has files open under %s",
                           p->name, p->mnt);
        return err_set(err, ERR_INTERNAL, "cannot unmount %s: %s", p->mnt, strerror(errno));
    }
    if (volume_loopdev_release(p->image, err) == 0)
        return 0;
    /* Mounted elsewhere still (a container's namespace): put ours back so
     * the volume stays as it was, and report why. */
    if (is_mounted)
        volume_loop_reattach(p, err);
    return -1;
}

static int loop_check(const volume_env *env, gb_err *err)
{
    (void)env;
    if (access("/dev/loop-control", R_OK | W_OK) < 0)
        return err_set(err, ERR_INTERNAL,
                       "the loop volume backend needs /dev/loop-control (the loop module, and "
                       "root): %s; use --volume-backend plain",
                       strerror(errno));
    char path[VOLUME_PATH_MAX];
    gb_err missing = GB_ERR_INIT;
    const char *tools[] = {"mkfs.ext4", "e2fsck", "resize2fs"};
    for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
        if (proc_resolve(tools[i], VOLUME_TOOL_DIRS, path, sizeof(path), &missing) < 0)
            return err_set(err, ERR_INTERNAL,
                           "the loop volume backend needs e2fsprogs (%s); install it or use "
                           "--volume-backend plain",
                           missing.msg);
    /* Said once, at start-up: whether ext4 volumes grow while in use. */
    if (volume_loop_has_sys_resource())
        log_info("volumes: gpuboxd has CAP_SYS_RESOURCE: ext4 loop volumes grow while in use");
    else
        log_warn("volumes: gpuboxd lacks CAP_SYS_RESOURCE: ext4 loop volumes grow only while no "
                 "running container uses them (the kernel resizes a mounted ext4 only for a "
                 "process with it); XFS ones (--volume-fs xfs) grow in use without it");
    return 0;
}

static int loop_set_fs(volume_env *env, const char *fs, gb_err *err)
{
    if (strcmp(fs, "xfs") == 0 && volume_loop_xfs_check(err) < 0)
        return -1;
    snprintf(env->fs, sizeof(env->fs), "%s", fs);
    return 0;
}

int volume_loop_mkfs(const char *path, const char *label, enum loop_fs fs, uint64_t size,
                     gb_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot create %s: %s", path, strerror(errno));
    if (ftruncate(fd, (off_t)size) < 0)
        return err_set(err, ERR_INTERNAL, "cannot size %s: %s", path, strerror(errno));
    char short_label[13];
    snprintf(short_label, sizeof(short_label), "%s", label); /* XFS labels hold 12 bytes */
    /* ext4: -T default, since the "small" type mke2fs picks under 512MB
     * would keep 1 KiB blocks and 128-byte inodes forever, however far it
     * grows. XFS: -K, no discard (a sparse file has nothing to discard). */
    char *const ext4[] = {"mkfs.ext4", "-F",      "-q", "-m",          "0",          "-b", "4096",
                          "-T",        "default", "-L", (char *)label, (char *)path, NULL};
    char *const xfs[] = {"mkfs.xfs", "-f", "-q", "-K", "-L", short_label, (char *)path, NULL};
    char *const *argv = fs == LOOP_FS_XFS ? xfs : ext4;
    proc_result r;
    if (volume_run_tool(argv, VOLUME_MKFS_TIMEOUT_MS, &r, ERR_INTERNAL, err) < 0)
        return -1;
    int rc = proc_check_exit(argv[0], &r, ERR_INTERNAL, err);
    proc_result_free(&r);
    if (rc < 0)
        return -1;
    if (fsync(fd) < 0)
        return err_set(err, ERR_INTERNAL, "cannot sync %s: %s", path, strerror(errno));
    return 0;
}

/* mkfs into the .tmp file, then rename: only a finished image ever
 * carries the real name. */
static int loop_make_image(const struct loop_paths *p, uint64_t size, gb_err *err)
{
    char label[17];
    snprintf(label, sizeof(label), "%s", p->name); /* ext4 labels hold 16 bytes */
    if (volume_loop_mkfs(p->tmp, label, p->fs, size, err) < 0)
        return -1;
    if (rename(p->tmp, p->image) < 0)
        return err_set(err, ERR_INTERNAL, "cannot finish %s: %s", p->image, strerror(errno));
    return 0;
}

static int loop_create(const volume_env *env, const char *name, uint64_t size,
                       volume_docker_opts *opts, gb_err *err)
{
    struct loop_paths p;
    if (volume_loop_paths(env, name, &p, err) < 0)
        return -1;
    struct stat st;
    if (stat(p.image, &st) == 0 || volume_mounted_at(p.mnt, NULL, NULL) == 1)
        return err_set(err, ERR_VOLUME_EXISTS,
                       "storage for volume '%s' already exists (%s); remove the volume first", name,
                       p.image);
    size &= ~(uint64_t)(LOOP_BLOCK_SIZE - 1);
    p.fs = strcmp(env->fs, "xfs") == 0 ? LOOP_FS_XFS : LOOP_FS_EXT4;
    if (volume_loop_check_size(p.fs, NULL, size, err) < 0 ||
        volume_check_space(env, name, size, err) < 0)
        return -1;
    if (loop_make_image(&p, size, err) < 0) {
        unlink(p.tmp);
        return -1;
    }
    if (volume_loop_attach_paths(&p, err) < 0) {
        gb_err ignored = GB_ERR_INIT;
        volume_loop_detach_paths(&p, &ignored);
        unlink(p.image);
        volume_dir_immutable(p.mnt, false, &ignored);
        rmdir(p.mnt);
        return -1;
    }
    volume_opts_bind(opts, p.mnt);
    return 0;
}

static int loop_attach(const volume_env *env, const char *name, gb_err *err)
{
    struct loop_paths p;
    if (volume_loop_paths(env, name, &p, err) < 0)
        return -1;
    return volume_loop_attach_paths(&p, err);
}

static int loop_usage(const volume_env *env, const char *name, const char *docker_mountpoint,
                      uint64_t *used, uint64_t *size, gb_err *err)
{
    (void)docker_mountpoint;
    struct loop_paths p;
    struct stat st;
    struct statvfs vfs;
    if (volume_loop_paths(env, name, &p, err) < 0)
        return -1;
    int is_mounted = volume_mounted_at(p.mnt, NULL, err);
    if (is_mounted < 0)
        return -1;
    if (!is_mounted)
        return err_set(err, stat(p.image, &st) == 0 ? ERR_VOLUME_INFO_FAILED : ERR_NOT_FOUND,
                       "volume '%s' is not attached (nothing mounted at %s)", name, p.mnt);
    if (statvfs(p.mnt, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the size of %s: %s", p.mnt, strerror(errno));
    *used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    *size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    return 0;
}

static int loop_destroy(const volume_env *env, const char *name, gb_err *err)
{
    struct loop_paths p;
    if (volume_loop_paths(env, name, &p, err) < 0 || volume_loop_copy_remove(&p, err) < 0 ||
        volume_loop_detach_paths(&p, err) < 0)
        return -1;
    const char *files[] = {p.image, p.tmp};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        if (unlink(files[i]) < 0 && errno != ENOENT)
            return err_set(err, ERR_INTERNAL, "cannot remove %s: %s", files[i], strerror(errno));
    if (volume_dir_immutable(p.mnt, false, err) < 0)
        return -1;
    if (rmdir(p.mnt) < 0 && errno != ENOENT)
        return err_set(err, ERR_INTERNAL, "cannot remove %s: %s", p.mnt, strerror(errno));
    return 0;
}

const struct volume_backend volume_backend_loop = {
    .name = "loop",
    .enforced = true,
    .min_bytes = LOOP_MIN_BYTES,
    .grows_online = volume_loop_grows_online,
    .set_fs = loop_set_fs,
    .check = loop_check,
    .create = loop_create,
    .attach = loop_attach,
    .resize = volume_loop_resize,
    .usage = loop_usage,
    .destroy = loop_destroy,
};
