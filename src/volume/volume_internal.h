/*
 * volume_internal.h - what the volume backends share (internal to
 * src/volume/): paths, mount checks, the e2fsprogs runner, space checks,
 * and the loop-device primitives of volume_loopdev.c.
 */
#ifndef GPUBOX_VOLUME_VOLUME_INTERNAL_H
#define GPUBOX_VOLUME_VOLUME_INTERNAL_H

#include <sys/types.h>

#include "util/proc.h"
#include "volume/volume.h"

/* System tools live in sbin, which a daemon's PATH may lack. */
#define VOLUME_TOOL_DIRS "/usr/local/sbin:/usr/sbin:/sbin"
/* mkfs of a sparse file takes seconds; e2fsck and resize2fs get no limit:
 * killing them half-way could damage the filesystem they work on. */
#define VOLUME_MKFS_TIMEOUT_MS (10 * 60 * 1000)

/* <volumes_dir>/<name><suffix> into buf; -1 (ERR_INVALID_PARAMS) if too long. */
int volume_path(const volume_env *env, const char *name, const char *suffix, char *buf, size_t len,
                gb_err *err);

/* type=none, o=bind, device=<dir>: Docker's local driver binds dir. */
void volume_opts_bind(volume_docker_opts *opts, const char *dir);

/* 1 when something is mounted at dir (its device differs from its parent
 * directory's; *dev gets it), 0 when not, -1 when dir cannot be read. */
int volume_mounted_at(const char *dir, dev_t *dev, gb_err *err);

/* Set (best effort) or clear the immutable flag of a directory with
 * nothing mounted on it. A mountpoint is kept immutable so that, should a
 * container ever bind it while the volume is not mounted, its writes fail
 * instead of filling the host's disk. */
int volume_dir_immutable(const char *dir, bool on, gb_err *err);

/* Run a tool (e2fsprogs, xfsprogs, cp): argv[0] is a bare name looked up on PATH and in
 * VOLUME_TOOL_DIRS, the environment is PATH and LC_ALL=C only (its output
 * is parsed). 0 once it ran (whatever its exit status), *r filled. */
int volume_run_tool(char *const argv[], int timeout_ms, proc_result *r, int code, gb_err *err);

/* Refuse (ERR_INVALID_PARAMS) when `grow` more bytes would not fit in what
 * the data dir's filesystem has available now: sparse images could be
 * overcommitted, and a loop device whose host filesystem fills up turns
 * writes inside the volume into I/O errors. */
int volume_check_space(const volume_env *env, const char *name, uint64_t grow, gb_err *err);

/* Does `used` bytes of data fit in a volume whose filesystem offers
 * `usable` bytes? Leaves a margin of 5% (at least 4 MiB) for metadata and
 * writes in flight. Refuses with ERR_VOLUME_USED_TOO_LARGE naming both
 * sizes. */
int volume_check_fits(const char *name, uint64_t used, uint64_t usable, uint64_t asked,
                      gb_err *err);

/* ---- loop devices (volume_loopdev.c) ----------------------------------- */

/* The loop device backed by image (an absolute, resolved path): 1 with
 * *index set, 0 when there is none. */
int volume_loopdev_find(const char *image, int *index, gb_err *err);
/* Bind image to a free loop device with LO_FLAGS_AUTOCLEAR; *fd holds the
 * device open (close it once mounted, or the device frees itself at
 * once). */
int volume_loopdev_attach(const char *image, int *index, int *fd, gb_err *err);
/* Open /dev/loop<index> (made with mknod if devtmpfs lacks it). */
int volume_loopdev_open(int index, int flags, gb_err *err);
/* The device number of /dev/loop<index>, as st_dev of its mounted fs. */
int volume_loopdev_devnum(int index, dev_t *dev, gb_err *err);
/* The size /dev/loop<index> has now, in bytes (sysfs). */
int volume_loopdev_size(int index, uint64_t *bytes, gb_err *err);
/* Tell the loop device its backing file changed size (LOOP_SET_CAPACITY). */
int volume_loopdev_set_capacity(int index, gb_err *err);
/* After an unmount: make sure no loop device is left on image. A device
 * that some other mount still holds (another mount namespace: a
 * container) is left alone: ERR_STATE_CONFLICT. */
int volume_loopdev_release(const char *image, gb_err *err);

#endif
