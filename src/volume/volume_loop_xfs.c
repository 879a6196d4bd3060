/*
 * volume_loop_xfs.c - what only XFS loop volumes need (--volume-fs xfs):
 * the host check, the online grow, and the shrink XFS cannot do in place.
 * Making, attaching and growing otherwise follow the ext4 path of
 * volume_loop.c and volume_loop_resize.c.
 *
 * Grow: xfs_growfs on the mountpoint, after the image file and the loop
 * device took the new size. XFS grows only mounted, with CAP_SYS_ADMIN
 * (no CAP_SYS_RESOURCE), in one transaction: either the whole new size or
 * none of it.
 *
 * Shrink, of a volume no running container uses (the caller checked that
 * the data fits). XFS cannot shrink, so the data moves into a new image:
 *   1. room on the host for the copy (the bytes in use);
 *   2. mkfs.xfs the copy <name>.img-shrink at the new size, bind it to a
 *      loop device, mount it at <name>-shrink/;
 *   3. detach the volume (refused, mounted back, when a host process or
 *      another mount namespace still has it), then mount it again,
 *      read-only: from here nothing can change it under the copy;
 *   4. cp -a: owners, modes, times, hard links, xattrs (ACLs with them),
 *      sparse files. Running out of space says VOLUME_USED_TOO_LARGE;
 *   5. check the copy: as many inodes in use as in the volume; unmounted,
 *      xfs_repair -n finds nothing wrong;
 *   6. unmount the volume, then rename the copy over the image (atomic;
 *      the directory fsync'd): the swap;
 *   7. attach: the smaller image is the volume, mounted writable.
 * A failure at 2-6 removes the copy and attaches the untouched image again,
 * writable: nothing changed. A crash before the rename leaves the old image
 * whole (perhaps mounted read-only) and the copy beside it: the next attach
 * removes the copy and makes the mount writable, and the same resize run
 * again starts over. A crash after the rename leaves the new image under
 * the real name: the same resize run again finds it at the asked size and
 * only attaches it. Fault points (GPUBOX_FAULT): volume.shrink.copied
 * (after 5), volume.shrink.swapped (after 6).
 */
#include "volume/volume_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fault.h"
#include "util/size.h"

int volume_loop_xfs_check(gb_err *err)
{
    char path[VOLUME_PATH_MAX], have[4096];
    gb_err missing = GB_ERR_INIT;
    const char *tools[] = {"mkfs.xfs", "xfs_growfs", "xfs_repair"};
    for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
        if (proc_resolve(tools[i], VOLUME_TOOL_DIRS, path, sizeof(path), &missing) < 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "--volume-fs xfs needs xfsprogs (%s); install it (apt-get install "
                           "xfsprogs) or use --volume-fs ext4",
                           missing.msg);
    _cleanup_close_ int fd = open("/proc/filesystems", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, have, sizeof(have) - 1);
    have[n > 0 ? n : 0] = '\0';
    if (!strstr(have, "\txfs\n"))
        return err_set(err, ERR_INVALID_PARAMS,
                       "--volume-fs xfs needs XFS in the kernel, and /proc/filesystems lacks it; "
                       "load it (modprobe xfs) or use --volume-fs ext4");
    return 0;
}

/* Run a tool to its end (never killed half-way); -1 unless it exited 0. */
static int xfs_run(char *const argv[], proc_result *out, gb_err *err)
{
    proc_result r;
    if (volume_run_tool(argv, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    int rc = proc_check_exit(argv[0], &r, ERR_INTERNAL, err);
    if (out && rc == 0)
        *out = r;
    else
        proc_result_free(&r);
    return rc;
}

int volume_loop_xfs_grow(const struct loop_paths *p, gb_err *err)
{
    char *const argv[] = {"xfs_growfs", "-d", (char *)p->mnt, NULL};
    if (xfs_run(argv, NULL, err) < 0)
        return err_prefix(err, "volume '%s' keeps its old size", p->name);
    return 0;
}

int volume_loop_copy_remove(const struct loop_paths *p, gb_err *err)
{
    struct stat st;
    if (lstat(p->copy, &st) < 0 && lstat(p->copy_mnt, &st) < 0)
        return 0;
    int mounted = volume_mounted_at(p->copy_mnt, NULL, err);
    if (mounted < 0)
        return -1;
    if (mounted && umount2(p->copy_mnt, UMOUNT_NOFOLLOW) < 0)
        return err_set(err, ERR_STATE_CONFLICT, "cannot unmount %s (a shrink's copy): %s",
                       p->copy_mnt, strerror(errno));
    if (volume_loopdev_release(p->copy, err) < 0)
        return -1;
    if (unlink(p->copy) < 0 && errno != ENOENT)
        return err_set(err, ERR_INTERNAL, "cannot remove %s: %s", p->copy, strerror(errno));
    if (volume_dir_immutable(p->copy_mnt, false, err) < 0)
        return -1;
    if (rmdir(p->copy_mnt) < 0 && errno != ENOENT)
        return err_set(err, ERR_INTERNAL, "cannot remove %s: %s", p->copy_mnt, strerror(errno));
    return 0;
}

/* Bind image to a loop device and mount it at dir; the device frees
 * itself once unmounted (autoclear). */
static int xfs_mount_image(const struct loop_paths *p, const char *image, const char *dir,
                           bool read_only, gb_err *err)
{
    int index = -1, fd = -1;
    if (volume_loopdev_attach(image, &index, &fd, err) < 0)
        return -1;
    int rc = volume_loop_mount(p, index, dir, read_only, err);
    close(fd);
    return rc;
}

static int xfs_inodes_used(const char *dir, uint64_t *used, gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(dir, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read %s: %s", dir, strerror(errno));
    *used = (uint64_t)(vfs.f_files - vfs.f_ffree);
    return 0;
}

/* Steps 4 and 5: copy, count, unmount the copy, xfs_repair -n it. */
static int xfs_copy_and_check(const struct loop_paths *p, uint64_t new_size, gb_err *err)
{
    char from[VOLUME_PATH_MAX + 4], asked[32], line[200];
    snprintf(from, sizeof(from), "%s/.", p->mnt);
    size_format(new_size, asked, sizeof(asked));
    char *const cp[] = {"cp", "-a", "--preserve=xattr", from, (char *)p->copy_mnt, NULL};
    proc_result r;
    if (volume_run_tool(cp, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    bool full = strstr(r.err, "No space left") != NULL;
    int rc = proc_check_exit("cp -a", &r, ERR_INTERNAL, err);
    proc_result_free(&r);
    if (rc < 0 && full)
        return err_set(err, ERR_VOLUME_USED_TOO_LARGE,
                       "volume '%s' does not fit in %s: copying it into an XFS of that size ran "
                       "out of space (the data and XFS's own metadata need more); delete some "
                       "data or ask for more",
                       p->name, asked);
    uint64_t had = 0, copied = 0;
    if (rc < 0 || xfs_inodes_used(p->mnt, &had, err) < 0 ||
        xfs_inodes_used(p->copy_mnt, &copied, err) < 0)
        return -1;
    if (had != copied)
        return err_set(err, ERR_INTERNAL,
                       "the copy of volume '%s' has %llu files and directories, the volume %llu; "
                       "shrinking it was given up",
                       p->name, (unsigned long long)copied, (unsigned long long)had);
    if (umount2(p->copy_mnt, UMOUNT_NOFOLLOW) < 0)
        return err_set(err, ERR_INTERNAL, "cannot unmount %s: %s", p->copy_mnt, strerror(errno));
    if (volume_loopdev_release(p->copy, err) < 0)
        return -1;
    char *const repair[] = {"xfs_repair", "-n", "-f", (char *)p->copy, NULL};
    if (volume_run_tool(repair, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    rc = proc_check_exit("xfs_repair -n", &r, ERR_INTERNAL, err);
    if (rc < 0)
        err_set(err, ERR_INTERNAL,
                "the copy of volume '%s' failed its check (%s); shrinking it "
                "was given up",
                p->name, proc_first_line(&r, line, sizeof(line)));
    proc_result_free(&r);
    return rc;
}

/* Step 6: the copy takes the image's name, durably. */
static int xfs_swap(const volume_env *env, const struct loop_paths *p, gb_err *err)
{
    if (umount2(p->mnt, UMOUNT_NOFOLLOW) < 0)
        return err_set(err, ERR_STATE_CONFLICT, "cannot unmount %s: %s", p->mnt, strerror(errno));
    if (volume_loopdev_release(p->image, err) < 0)
        return -1;
    _cleanup_close_ int fd = open(p->copy, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0)
        return err_set(err, ERR_INTERNAL, "cannot sync %s: %s", p->copy, strerror(errno));
    if (rename(p->copy, p->image) < 0)
        return err_set(err, ERR_INTERNAL, "cannot rename %s to %s: %s", p->copy, p->image,
                       strerror(errno));
    _cleanup_close_ int dir = open(env->volumes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0)
        fsync(dir); /* the rename is done; this only makes it durable sooner */
    return 0;
}

int volume_loop_xfs_shrink(const volume_env *env, struct loop_paths *p, uint64_t new_size,
                           gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(p->mnt, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the usage of %s: %s", p->mnt,
                       strerror(errno));
    uint64_t used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    if (volume_check_space(env, p->name, used, err) < 0 || volume_loop_copy_remove(p, err) < 0)
        return -1;
    if (volume_loop_mkfs(p->copy, p->name, LOOP_FS_XFS, new_size, err) < 0 ||
        xfs_mount_image(p, p->copy, p->copy_mnt, false, err) < 0)
        goto fail;
    if (volume_loop_detach_paths(p, err) < 0) /* still in use: mounted back */
        goto fail;
    if (xfs_mount_image(p, p->image, p->mnt, true, err) < 0 ||
        xfs_copy_and_check(p, new_size, err) < 0)
        goto fail;
    fault_point("volume.shrink.copied");
    if (xfs_swap(env, p, err) < 0)
        goto fail;
    fault_point("volume.shrink.swapped");
    if (volume_loop_copy_remove(p, err) < 0) /* the empty mountpoint */
        return -1;
    return volume_loop_attach_paths(p, err);
fail:
    /* Attach removes the copy and makes a read-only mount writable. */
    volume_loop_reattach(p, err);
    return -1;
}
