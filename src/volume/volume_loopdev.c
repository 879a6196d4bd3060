/*
 * volume_loopdev.c - loop devices for the loop backend, through the kernel's
 * ioctls rather than losetup.
 *
 * Why ioctls: binding a file is two calls (LOOP_CTL_GET_FREE, then
 * LOOP_CONFIGURE on that device), and doing them here lets us handle the
 * race that matters - another process (another test run, a concurrent
 * losetup) taking the same free device between the two calls, which the
 * kernel reports as EBUSY - by simply asking again; the errors come back as
 * errno values instead of text to parse; and nothing depends on the
 * installed util-linux version. Kernels before 5.8 lack LOOP_CONFIGURE:
 * there LOOP_SET_FD + LOOP_SET_STATUS64 do the same in two steps.
 *
 * Every device is bound with LO_FLAGS_AUTOCLEAR: it unbinds itself when its
 * last user (the mount) goes away, so an unmounted or deleted volume never
 * leaves a device behind, even if the daemon dies. The kernel's view is the
 * truth: /sys/block/loop<N>/loop/backing_file names the file each bound
 * device uses, and is how a volume finds its device again after a restart.
 */
#include "volume/volume_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/time.h"

#define LOOPDEV_ATTACH_TRIES 32
#define LOOPDEV_RELEASE_WAIT_MS 5000

/* One line of a sysfs file, without its newline; -1 when absent. */
static int loopdev_read_sys(int index, const char *file, char *buf, size_t len)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/block/loop%d/%s", index, file);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

int volume_loopdev_find(const char *image, int *index, gb_err *err)
{
    DIR *dir = opendir("/sys/block");
    if (!dir)
        return err_set(err, ERR_INTERNAL, "cannot list loop devices in /sys/block: %s",
                       strerror(errno));
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(dir));) {
        char *end = NULL;
        if (strncmp(e->d_name, "loop", 4) != 0)
            continue;
        long n = strtol(e->d_name + 4, &end, 10);
        if (end == e->d_name + 4 || *end || n < 0 || n > 1 << 20)
            continue;
        char backing[VOLUME_PATH_MAX + 16];
        /* Unbound devices have no backing_file; a deleted image reads
         * "<path> (deleted)" and so never matches. */
        if (loopdev_read_sys((int)n, "loop/backing_file", backing, sizeof(backing)) == 0 &&
            strcmp(backing, image) == 0) {
            *index = (int)n;
            found = 1;
        }
    }
    closedir(dir);
    return found;
}

int volume_loopdev_devnum(int index, dev_t *dev, gb_err *err)
{
    char buf[32];
    unsigned maj = 0, min = 0;
    if (loopdev_read_sys(index, "dev", buf, sizeof(buf)) < 0 ||
        sscanf(buf, "%u:%u", &maj, &min) != 2)
        return err_set(err, ERR_INTERNAL, "cannot read the device number of /dev/loop%d", index);
    *dev = makedev(maj, min);
    return 0;
}

int volume_loopdev_open(int index, int flags, gb_err *err)
{
    char path[32];
    snprintf(path, sizeof(path), "/dev/loop%d", index);
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* A /dev without devtmpfs (some containers) lacks new nodes. */
        dev_t dev = 0;
        if (volume_loopdev_devnum(index, &dev, err) < 0)
            return -1;
        if (mknod(path, S_IFBLK | 0660, dev) < 0 && errno != EEXIST)
            return err_set(err, ERR_INTERNAL, "cannot create %s: %s", path, strerror(errno));
        fd = open(path, flags | O_CLOEXEC);
    }
    if (fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot open %s: %s", path, strerror(errno));
    return fd;
}

/* Bind on a kernel without LOOP_CONFIGURE. */
static int loopdev_bind_old(int fd, int image_fd, const struct loop_info64 *info)
{
    if (ioctl(fd, LOOP_SET_FD, image_fd) < 0)
        return -1;
    if (ioctl(fd, LOOP_SET_STATUS64, info) < 0) {
        int saved = errno;
        ioctl(fd, LOOP_CLR_FD, 0);
        errno = saved;
        return -1;
    }
    return 0;
}

int volume_loopdev_attach(const char *image, int *index, int *fd, gb_err *err)
{
    _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return err_set(err, ERR_INTERNAL,
                       "cannot open /dev/loop-control: %s; the loop volume backend needs the "
                       "loop module and root (or use --volume-backend plain)",
                       strerror(errno));
    _cleanup_close_ int image_fd = open(image, O_RDWR | O_CLOEXEC);
    if (image_fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot open %s: %s", image, strerror(errno));
    struct loop_config cfg = {.fd = (uint32_t)image_fd};
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", image);
    for (int attempt = 0; attempt < LOOPDEV_ATTACH_TRIES; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "no free loop device: %s", strerror(errno));
        int dev = volume_loopdev_open(n, O_RDWR, err);
        if (dev < 0)
            return -1;
        int rc = ioctl(dev, LOOP_CONFIGURE, &cfg);
        if (rc < 0 && (errno == EINVAL || errno == ENOTTY))
            rc = loopdev_bind_old(dev, image_fd, &cfg.info);
        if (rc == 0) {
            *index = n;
            *fd = dev;
            return 0;
        }
        int saved = errno;
        close(dev);
        if (saved != EBUSY) /* EBUSY: someone took it first; ask again */
            return err_set(err, ERR_INTERNAL, "cannot bind %s to /dev/loop%d: %s", image, n,
                           strerror(saved));
    }
    return err_set(err, ERR_INTERNAL,
                   "cannot bind %s to a loop device: every free one was taken by someone else "
                   "%d times in a row",
                   image, LOOPDEV_ATTACH_TRIES);
}

int volume_loopdev_size(int index, uint64_t *bytes, gb_err *err)
{
    char buf[32];
    unsigned long long sectors = 0;
    if (loopdev_read_sys(index, "size", buf, sizeof(buf)) < 0 || sscanf(buf, "%llu", &sectors) != 1)
        return err_set(err, ERR_INTERNAL, "cannot read the size of /dev/loop%d", index);
    *bytes = (uint64_t)sectors * 512;
    return 0;
}

int volume_loopdev_set_capacity(int index, gb_err *err)
{
    _cleanup_close_ int fd = volume_loopdev_open(index, O_RDONLY, err);
    if (fd < 0)
        return -1;
    if (ioctl(fd, LOOP_SET_CAPACITY, 0) < 0)
        return err_set(err, ERR_INTERNAL, "cannot refresh the size of /dev/loop%d: %s", index,
                       strerror(errno));
    return 0;
}

/* Loop until no device is bound to image. An exclusive open fails with
 * EBUSY exactly while a filesystem on the device is mounted anywhere, in
 * any mount namespace; once we hold it exclusively, nothing is mounted, and
 * LOOP_CLR_FD unbinds it (or, while a plain open() elsewhere lingers, marks
 * it to unbind on that last close, which we wait for). */
int volume_loopdev_release(const char *image, gb_err *err)
{
    int64_t deadline = time_mono_ms() + LOOPDEV_RELEASE_WAIT_MS;
    int index = -1;
    for (;;) {
        int found = volume_loopdev_find(image, &index, err);
        if (found <= 0)
            return found;
        char path[32];
        snprintf(path, sizeof(path), "/dev/loop%d", index);
        int fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
        int saved = errno;
        if (fd >= 0) {
            ioctl(fd, LOOP_CLR_FD, 0); /* ENXIO: it unbound itself meanwhile */
            close(fd);
        } else if (saved != EBUSY && saved != ENXIO && saved != ENOENT && saved != ENODEV) {
            return err_set(err, ERR_INTERNAL, "cannot open %s: %s", path, strerror(saved));
        }
        if (time_mono_ms() >= deadline)
            break;
        usleep(20 * 1000);
    }
    return err_set(err, ERR_STATE_CONFLICT,
                   "/dev/loop%d (on %s) is still in use after its unmount: a container or another "
                   "mount namespace still has the volume mounted, or a process holds the device "
                   "open; stop it and try again",
                   index, image);
}
