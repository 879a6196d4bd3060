/*
 * volume_loop_resize.c - growing and shrinking a loop volume without losing
 * a byte. Every resize first attaches the volume (which completes whatever
 * a crashed resize left), then compares the asked size with the image
 * file's: larger or equal grows, smaller shrinks. So running the same
 * resize again after a crash at any step finishes it. The file is always
 * at least as large as the filesystem in it: a grow extends the file
 * before the filesystem, a shrink shrinks the filesystem before the file.
 *
 * Grow online - the volume may be in use; no copy, no unmount:
 *   1. extend the image file (ftruncate: sparse, instant) and fsync it, so
 *      the host filesystem has the new size on disk before the filesystem
 *      inside starts relying on it;
 *   2. LOOP_SET_CAPACITY: the loop device takes the new file size;
 *   3. the filesystem grows, mounted: resize2fs on the device (the kernel
 *      grows ext4 through its journal), or xfs_growfs on the mountpoint
 *      (one transaction). Every mount of the filesystem - the containers'
 *      binds included - shows the new size at once.
 *   If 2 or 3 fails, the filesystem did not grow (its block count is as
 *   before): the file and the device go back to the old size, and the
 *   volume is exactly as it was. If it did grow part-way (an ext4 online
 *   resize adds groups in steps), the file stays at the new size, larger
 *   than the filesystem: consistent, and the message says so. A crash
 *   after 1 or 2 leaves such a larger file too: harmless (the filesystem
 *   ignores the tail), and the same resize run again finishes the job.
 *   The kernel lets only a process with CAP_SYS_RESOURCE resize a mounted
 *   ext4 (XFS asks only CAP_SYS_ADMIN). A daemon without it (a restricted
 *   container) grows detached ext4 volumes offline as below (step 1 first,
 *   then 2-4 and 7 without the shrink's checks), and refuses to grow one
 *   in use (ERR_STATE_CONFLICT). XFS grows only mounted: always online.
 *
 * Shrink an ext4 volume - ext4 cannot shrink while mounted, so only
 * detached:
 *   0. refuse when the data would not fit (statvfs, with a margin), or
 *      while in use: nothing changed;
 *   1. unmount and unbind; if the filesystem is still mounted elsewhere (a
 *      container's mount namespace), mount ours back and refuse;
 *   2. bind the image to a loop device held open through steps 3-5: if the
 *      daemon dies, the tools it started go on holding the device
 *      exclusively, so a restarted daemon cannot mount the volume under
 *      them (attach says busy until they finish);
 *   3. e2fsck -f -y (resize2fs demands a freshly checked filesystem);
 *   4. resize2fs -P: its own estimate of the smallest size; refuse below;
 *   5. resize2fs to the new size: the filesystem shrinks first, inside the
 *      old, larger file;
 *   6. only then truncate the file (and fsync it);
 *   7. attach again: bind, e2fsck -p, mount.
 *   A failure at steps 1-5 attaches the untouched file again at the old
 *   size (resize2fs checks everything before it moves a block; a refused
 *   resize changed nothing). Between 5 and 6 the filesystem is already
 *   small inside a larger file, which is consistent; the next resize
 *   finishes the truncate. The one window no ordering can close is a power
 *   loss while resize2fs moves blocks in step 5 (it keeps no journal of
 *   its own): the next attach's e2fsck -p then refuses to mount with a
 *   message, and the operator runs e2fsck -f.
 *
 * Shrink an XFS volume - XFS cannot shrink at all: step 0 as above, then
 * a copy into a new, smaller image (volume_loop_xfs.c).
 */
#include "volume/volume_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/size.h"

/* Set the image file's length and make it durable. */
static int loop_set_file_size(const struct loop_paths *p, uint64_t size, gb_err *err)
{
    _cleanup_close_ int fd = open(p->image, O_RDWR | O_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0 || fsync(fd) < 0)
        return err_set(err, ERR_INTERNAL, "cannot set the length of %s: %s", p->image,
                       strerror(errno));
    return 0;
}

/* resize2fs /dev/loop<index> [size]: to the device's size when size is 0. */
static int loop_resize2fs(const struct loop_paths *p, int index, uint64_t size, gb_err *err)
{
    char dev[32], kib[32];
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    snprintf(kib, sizeof(kib), "%lluK", (unsigned long long)(size / 1024));
    char *const argv[] = {"resize2fs", dev, size ? kib : NULL, NULL};
    proc_result r;
    if (volume_run_tool(argv, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    int rc = proc_check_exit("resize2fs", &r, ERR_INTERNAL, err);
    proc_result_free(&r);
    if (rc < 0)
        return err_prefix(err, "volume '%s' keeps its old size", p->name);
    return 0;
}

static uint32_t loop_le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The mounted filesystem's own size (it may be smaller than the file after
 * a crash), from its superblock. Read through the device: a mounted ext4
 * keeps its live superblock in the device's page cache, so this sees a
 * size changed a moment ago. */
static int loop_fs_bytes(const struct loop_paths *p, uint64_t *bytes, gb_err *err)
{
    int index = -1;
    unsigned char sb[1024];
    if (volume_loopdev_find(p->image, &index, err) <= 0)
        return err_set(err, ERR_INTERNAL, "volume '%s' has no loop device", p->name);
    _cleanup_close_ int fd = volume_loopdev_open(index, O_RDONLY, err);
    if (fd < 0)
        return -1;
    if (pread(fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb) || sb[56] != 0x53 || sb[57] != 0xEF)
        return err_set(err, ERR_INTERNAL, "no ext4 superblock on /dev/loop%d (%s)", index,
                       p->image);
    uint64_t blocks = loop_le32(sb + 4);
    if (loop_le32(sb + 96) & 0x80) /* INCOMPAT_64BIT: the high half counts */
        blocks |= (uint64_t)loop_le32(sb + 0x150) << 32;
    *bytes = blocks << (10 + loop_le32(sb + 24));
    return 0;
}

/* Step 4: resize2fs -P's estimate of the smallest size, in blocks. */
static int loop_check_min(const struct loop_paths *p, int index, uint64_t new_size, gb_err *err)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    char *const argv[] = {"resize2fs", "-P", dev, NULL};
    proc_result r;
    if (volume_run_tool(argv, PROC_NO_TIMEOUT, &r, ERR_INTERNAL, err) < 0)
        return -1;
    const char *at = strstr(r.out, "minimum size of the filesystem:");
    unsigned long long min_blocks = 0;
    int rc = proc_check_exit("resize2fs -P", &r, ERR_INTERNAL, err);
    if (rc == 0 && (!at || sscanf(strchr(at, ':') + 1, "%llu", &min_blocks) != 1))
        rc = err_set(err, ERR_INTERNAL, "resize2fs -P printed no minimum size: %.100s", r.out);
    proc_result_free(&r);
    if (rc < 0 || new_size / LOOP_BLOCK_SIZE >= min_blocks)
        return rc;
    char asked[32], min[32];
    size_format(new_size, asked, sizeof(asked));
    size_format(min_blocks * LOOP_BLOCK_SIZE, min, sizeof(min));
    return err_set(err, ERR_VOLUME_USED_TOO_LARGE,
                   "volume '%s' cannot shrink to %s: its data and metadata need at least %s "
                   "(resize2fs's estimate); delete some data or ask for more",
                   p->name, asked, min);
}

/* Steps 2-6 on a detached volume, for a shrink; for an offline grow
 * (the file already extended) the same without the checks and the
 * truncate. Whatever happens, no loop device is left on the image when
 * this returns (the caller attaches again). */
static int loop_resize_detached(const struct loop_paths *p, uint64_t new_size, bool shrink,
                                gb_err *err)
{
    int index = -1, fd = -1;
    if (volume_loopdev_attach(p->image, &index, &fd, err) < 0)
        return -1;
    int rc = volume_loop_fsck(index, true, err);
    if (rc == 0 && shrink)
        rc = loop_check_min(p, index, new_size, err);
    if (rc == 0)
        rc = loop_resize2fs(p, index, shrink ? new_size : 0, err);
    close(fd); /* the autoclear device unbinds once the tools are done too */
    gb_err release = GB_ERR_INIT;
    if (volume_loopdev_release(p->image, rc < 0 ? &release : err) < 0 && rc == 0)
        return -1;
    if (rc < 0 || !shrink)
        return rc;
    return loop_set_file_size(p, new_size, err);
}

/* Detach, resize, attach again; on failure attach at the old size. */
static int loop_resize_offline(struct loop_paths *p, uint64_t new_size, bool shrink, gb_err *err)
{
    if (volume_loop_detach_paths(p, err) < 0)
        return -1;
    if (loop_resize_detached(p, new_size, shrink, err) < 0) {
        volume_loop_reattach(p, err);
        return -1;
    }
    return volume_loop_attach_paths(p, err);
}

bool volume_loop_has_sys_resource(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct caps[2] = {0};
    if (syscall(SYS_capget, &hdr, caps) < 0)
        return false;
    return caps[CAP_SYS_RESOURCE / 32].effective & (1U << (CAP_SYS_RESOURCE % 32));
}

bool volume_loop_grows_online(const volume_env *env, const char *name)
{
    struct loop_paths p;
    enum loop_fs fs = strcmp(env->fs, "xfs") == 0 ? LOOP_FS_XFS : LOOP_FS_EXT4;
    if (name && volume_loop_paths(env, name, &p, NULL) == 0)
        volume_loop_probe_fs(p.image, &fs, NULL); /* no image: as made now */
    return fs == LOOP_FS_XFS || volume_loop_has_sys_resource();
}

/* The filesystem's block count as statfs sees it: it changes exactly when
 * the filesystem grew, however little. */
static int loop_fs_blocks(const struct loop_paths *p, uint64_t *blocks, gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(p->mnt, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the size of %s: %s", p->mnt,
                       strerror(errno));
    *blocks = (uint64_t)vfs.f_blocks;
    return 0;
}

/* After a failed grow (the volume attached again): put the file and the
 * device back to old_size if the filesystem did not grow, and say in *err
 * what the volume looks like now. */
static void loop_grow_undo(const struct loop_paths *p, uint64_t old_size, uint64_t blocks_before,
                           gb_err *err)
{
    uint64_t blocks = 0;
    int index = -1;
    gb_err e = GB_ERR_INIT;
    char first[sizeof(err->msg)], old[32];
    snprintf(first, sizeof(first), "%s", err ? err->msg : "");
    size_format(old_size, old, sizeof(old));
    if (loop_fs_blocks(p, &blocks, &e) < 0) {
        err_set(err, err ? err->code : ERR_INTERNAL,
                "%s (and its size cannot be read now: %s; the next resize settles it)", first,
                e.msg);
        return;
    }
    if (blocks != blocks_before) {
        err_set(err, err ? err->code : ERR_INTERNAL,
                "%s (the filesystem grew part of the way; its image keeps the asked size, which "
                "is consistent; resize again to finish)",
                first);
        return;
    }
    uint64_t device = 0;
    int found = volume_loopdev_find(p->image, &index, &e);
    if (loop_set_file_size(p, old_size, &e) == 0 &&
        (found <= 0 || (volume_loopdev_size(index, &device, &e) == 0 && device == old_size) ||
         volume_loopdev_set_capacity(index, &e) == 0))
        return; /* exactly as before */
    err_set(err, err ? err->code : ERR_INTERNAL,
            "%s (and putting its image back to %s failed: %s; the image is larger than its "
            "filesystem, which is harmless)",
            first, old, e.msg);
}

/* Steps 1-3 of an online grow on the attached volume. */
static int loop_grow_online(const struct loop_paths *p, uint64_t new_size, gb_err *err)
{
    int index = -1;
    int found = volume_loopdev_find(p->image, &index, err);
    if (found < 0)
        return -1;
    if (!found) /* attach just made sure of it */
        return err_set(err, ERR_INTERNAL, "volume '%s' lost its loop device", p->name);
    if (loop_set_file_size(p, new_size, err) < 0 || volume_loopdev_set_capacity(index, err) < 0)
        return -1;
    if (p->fs == LOOP_FS_XFS)
        return volume_loop_xfs_grow(p, err);
    return loop_resize2fs(p, index, 0, err);
}

static int loop_grow(const volume_env *env, struct loop_paths *p, const struct stat *st,
                     uint64_t new_size, bool in_use, gb_err *err)
{
    /* The image may end up fully allocated: the host must have room. */
    uint64_t allocated = (uint64_t)st->st_blocks * 512, blocks_before = 0;
    if (new_size > allocated && volume_check_space(env, p->name, new_size - allocated, err) < 0)
        return -1;
    bool online = p->fs == LOOP_FS_XFS || volume_loop_has_sys_resource();
    if (!online && in_use) {
        char asked[32];
        size_format(new_size, asked, sizeof(asked));
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' cannot grow to %s while a running container uses it: "
                       "growing a mounted ext4 needs CAP_SYS_RESOURCE, which gpuboxd does not "
                       "have on this host; stop or pause what uses it first, or run gpuboxd "
                       "with that capability",
                       p->name, asked);
    }
    if (loop_fs_blocks(p, &blocks_before, err) < 0)
        return -1;
    int rc;
    if (online) {
        rc = loop_grow_online(p, new_size, err);
    } else {
        rc = loop_set_file_size(p, new_size, err);
        if (rc == 0)
            rc = loop_resize_offline(p, new_size, false, err);
    }
    if (rc < 0 && volume_mounted_at(p->mnt, NULL, NULL) == 1)
        loop_grow_undo(p, (uint64_t)st->st_size, blocks_before, err);
    return rc;
}

/* What the filesystem will offer at new_size, from what it offers now. */
static int loop_usable_at(const struct loop_paths *p, const struct statvfs *vfs, uint64_t file_size,
                          uint64_t new_size, uint64_t *usable, gb_err *err)
{
    uint64_t offers = (uint64_t)vfs->f_blocks * vfs->f_frsize, fs_bytes = 0;
    if (p->fs == LOOP_FS_XFS) {
        /* Mostly its log, whose size mkfs fixed: the same bytes come off.
         * (After a crashed grow the file is larger than the filesystem,
         * which only makes this more careful.) */
        uint64_t overhead = file_size > offers ? file_size - offers : 0;
        *usable = new_size > overhead ? new_size - overhead : 0;
        return 0;
    }
    if (loop_fs_bytes(p, &fs_bytes, err) < 0)
        return -1;
    /* ext4: the same share of it as now (the rest is journal and inode
     * tables, which scale with the size). */
    *usable = (uint64_t)((double)new_size * (double)offers / (double)fs_bytes);
    return 0;
}

/* The data first (a shrink that can never fit is refused whatever the
 * state, so the caller need not detach the volume to hear it), then the
 * use. */
static int loop_shrink(const volume_env *env, struct loop_paths *p, uint64_t file_size,
                       uint64_t new_size, bool in_use, gb_err *err)
{
    /* syncfs first: XFS frees the blocks of files just deleted in the
     * background, and statfs may not count them as free until then. */
    struct statvfs vfs;
    int fd = open(p->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : syncfs(fd) < 0 ? -1 : fstatvfs(fd, &vfs);
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the usage of %s: %s", p->mnt,
                       strerror(saved));
    uint64_t used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, usable = 0;
    if (loop_usable_at(p, &vfs, file_size, new_size, &usable, err) < 0 ||
        volume_check_fits(p->name, used, usable, new_size, err) < 0)
        return -1;
    char asked[32];
    size_format(new_size, asked, sizeof(asked));
    if (in_use)
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' cannot shrink to %s while a running container uses it: %s, "
                       "so the volume must be detached first (growing works while in use)",
                       p->name, asked,
                       p->fs == LOOP_FS_XFS
                           ? "XFS cannot shrink; it is copied into a smaller image instead"
                           : "ext4 shrinks only unmounted");
    if (p->fs == LOOP_FS_XFS)
        return volume_loop_xfs_shrink(env, p, new_size, err);
    return loop_resize_offline(p, new_size, true, err);
}

int volume_loop_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                       uint64_t new_size, bool in_use, gb_err *err)
{
    (void)docker_mountpoint;
    struct loop_paths p;
    struct stat st;
    if (volume_loop_paths(env, name, &p, err) < 0 || volume_loop_attach_paths(&p, err) < 0)
        return -1;
    if (stat(p.image, &st) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read %s: %s", p.image, strerror(errno));
    new_size &= ~(uint64_t)(LOOP_BLOCK_SIZE - 1);
    if (volume_loop_check_size(p.fs, name, new_size, err) < 0)
        return -1;
    if (new_size >= (uint64_t)st.st_size)
        return loop_grow(env, &p, &st, new_size, in_use, err);
    return loop_shrink(env, &p, (uint64_t)st.st_size, new_size, in_use, err);
}
