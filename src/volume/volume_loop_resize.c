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
 *      the host filesystem has the new size on disk before the ext4 inside
 *      starts relying on it;
 *   2. LOOP_SET_CAPACITY: the loop device takes the new file size;
 *   3. resize2fs on the mounted device: the kernel grows ext4 online,
 *      through its journal. Every mount of the filesystem - the containers'
 *      binds included - shows the new size at once.
 *   A failure or crash after 1 or 2 leaves a file larger than the
 *   filesystem in it: harmless (ext4 ignores the tail), the volume works at
 *   the old size, and the next resize takes it from there.
 *   The kernel lets only a process with CAP_SYS_RESOURCE resize a mounted
 *   ext4. A daemon without it (a restricted container) grows detached
 *   volumes offline as below (step 1 first, then 2-4 and 7 without the
 *   shrink's checks), and refuses to grow one in use (ERR_STATE_CONFLICT).
 *
 * Shrink - ext4 cannot shrink while mounted, so only detached:
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
static int loop_resize_offline(const struct loop_paths *p, uint64_t new_size, bool shrink,
                               gb_err *err)
{
    if (volume_loop_detach_paths(p, err) < 0)
        return -1;
    if (loop_resize_detached(p, new_size, shrink, err) < 0) {
        volume_loop_reattach(p, err);
        return -1;
    }
    return volume_loop_attach_paths(p, err);
}

bool volume_loop_grows_online(const volume_env *env)
{
    (void)env;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct caps[2] = {0};
    if (syscall(SYS_capget, &hdr, caps) < 0)
        return false;
    return caps[CAP_SYS_RESOURCE / 32].effective & (1U << (CAP_SYS_RESOURCE % 32));
}

static int loop_grow(const volume_env *env, const struct loop_paths *p, const struct stat *st,
                     uint64_t new_size, bool in_use, gb_err *err)
{
    /* The image may end up fully allocated: the host must have room. */
    uint64_t allocated = (uint64_t)st->st_blocks * 512;
    if (new_size > allocated && volume_check_space(env, p->name, new_size - allocated, err) < 0)
        return -1;
    bool online = volume_loop_grows_online(env);
    if (!online && in_use) {
        char asked[32];
        size_format(new_size, asked, sizeof(asked));
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' cannot grow to %s while a running container uses it: "
                       "growing a mounted ext4 needs CAP_SYS_RESOURCE, which gpuboxd does not "
                       "have on this host; detach the volume first, or run gpuboxd with that "
                       "capability",
                       p->name, asked);
    }
    if (loop_set_file_size(p, new_size, err) < 0)
        return -1;
    if (!online)
        return loop_resize_offline(p, new_size, false, err);
    int index = -1;
    int found = volume_loopdev_find(p->image, &index, err);
    if (found < 0)
        return -1;
    if (!found) /* attach just made sure of it */
        return err_set(err, ERR_INTERNAL, "volume '%s' lost its loop device", p->name);
    if (volume_loopdev_set_capacity(index, err) < 0)
        return -1;
    return loop_resize2fs(p, index, 0, err);
}

/* The data first (a shrink that can never fit is refused whatever the
 * state, so the caller need not detach the volume to hear it), then the
 * use. */
static int loop_shrink(const struct loop_paths *p, uint64_t new_size, bool in_use, gb_err *err)
{
    struct statvfs vfs;
    if (statvfs(p->mnt, &vfs) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the usage of %s: %s", p->mnt,
                       strerror(errno));
    uint64_t used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, fs_bytes = 0;
    if (loop_fs_bytes(p, &fs_bytes, err) < 0)
        return -1;
    /* What the filesystem will offer at the new size: the same share of
     * it as now (the rest is journal and inode tables). */
    uint64_t usable = (uint64_t)((double)new_size * (double)vfs.f_blocks * (double)vfs.f_frsize /
                                 (double)fs_bytes);
    if (volume_check_fits(p->name, used, usable, new_size, err) < 0)
        return -1;
    char asked[32];
    size_format(new_size, asked, sizeof(asked));
    if (in_use)
        return err_set(err, ERR_STATE_CONFLICT,
                       "volume '%s' cannot shrink to %s while a running container uses it: "
                       "ext4 shrinks only unmounted, so the volume must be detached first "
                       "(growing works while in use)",
                       p->name, asked);
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
    if (new_size >= (uint64_t)st.st_size)
        return loop_grow(env, &p, &st, new_size, in_use, err);
    return loop_shrink(&p, new_size, in_use, err);
}
