/*
 * volume_loop.h - what the three files of the loop backend share
 * (volume_loop.c: create, attach, usage, destroy; volume_loop_resize.c:
 * grow and shrink; volume_loop_xfs.c: what only XFS volumes need). Internal
 * to src/volume/.
 */
#ifndef GPUBOX_VOLUME_VOLUME_LOOP_H
#define GPUBOX_VOLUME_VOLUME_LOOP_H

#include "volume/volume_internal.h"

/* 4 KiB blocks; sizes are rounded down to whole blocks. */
#define LOOP_BLOCK_SIZE 4096
/* A 4 MiB journal is the smallest mke2fs makes with 4 KiB blocks: below
 * 16 MiB it would take most of the volume. */
#define LOOP_MIN_BYTES (16ULL << 20)
/* mkfs.xfs (xfsprogs 5.19 and later) makes no XFS smaller than 300 MiB:
 * its log alone is at least 64 MiB. */
#define LOOP_XFS_MIN_BYTES (300ULL << 20)

/* The filesystem in an image. Each volume keeps the one it was made with;
 * the image's superblock says which (volume_loop_probe_fs). */
enum loop_fs { LOOP_FS_EXT4, LOOP_FS_XFS };

/* The paths of one volume (see volume_loop.c for the layout). */
struct loop_paths {
    const char *name;
    enum loop_fs fs; /* set by volume_loop_attach_paths (and create) */
    char image[VOLUME_PATH_MAX];
    char tmp[VOLUME_PATH_MAX];
    char mnt[VOLUME_PATH_MAX];
    char copy[VOLUME_PATH_MAX];     /* <name>.img-shrink: an XFS shrink's new image */
    char copy_mnt[VOLUME_PATH_MAX]; /* <name>-shrink/: where it is mounted meanwhile */
};

int volume_loop_paths(const volume_env *env, const char *name, struct loop_paths *p, gb_err *err);

const char *volume_loop_fs_name(enum loop_fs fs);
/* Which filesystem image holds, from its superblock's magic number. */
int volume_loop_probe_fs(const char *image, enum loop_fs *fs, gb_err *err);
/* Refuse (ERR_INVALID_PARAMS) a size the filesystem cannot have. */
int volume_loop_check_size(enum loop_fs fs, const char *name, uint64_t size, gb_err *err);
/* Create path (replacing what is there) as a sparse file of size bytes,
 * make the filesystem in it and fsync it. */
int volume_loop_mkfs(const char *path, const char *label, enum loop_fs fs, uint64_t size,
                     gb_err *err);

/* e2fsck /dev/loop<index>: -p (force false), or -f -y. Fails when it
 * leaves errors unfixed. */
int volume_loop_fsck(int index, bool force, gb_err *err);

/* Mount /dev/loop<index> (a p->fs filesystem) at dir, nosuid,nodev (and
 * ro); dir is made and kept immutable while nothing is mounted on it. */
int volume_loop_mount(const struct loop_paths *p, int index, const char *dir, bool read_only,
                      gb_err *err);

/* Bind (if no device is bound yet: then e2fsck -p first on ext4) and
 * mount; sets p->fs. Idempotent; ERR_NOT_FOUND without an image. Also
 * removes what an interrupted XFS shrink left (the copy) and makes a
 * mount it left read-only writable again. */
int volume_loop_attach_paths(struct loop_paths *p, gb_err *err);

/* Unmount and unbind. ERR_STATE_CONFLICT, with the volume mounted again as
 * before, when a host process or another mount namespace still uses it. */
int volume_loop_detach_paths(struct loop_paths *p, gb_err *err);

/* After a failed step: attach again (at whatever size the image has), and
 * if that fails too, add why to *err, which keeps its code. */
void volume_loop_reattach(struct loop_paths *p, gb_err *err);

/* Does this process hold CAP_SYS_RESOURCE in its effective set (what the
 * kernel asks of whoever grows a mounted ext4)? */
bool volume_loop_has_sys_resource(void);
/* XFS volumes always; ext4 ones with CAP_SYS_RESOURCE. */
bool volume_loop_grows_online(const volume_env *env, const char *name);

int volume_loop_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                       uint64_t new_size, bool in_use, gb_err *err);

/* ---- XFS (volume_loop_xfs.c) ------------------------------------------- */

/* Can this host make XFS volumes: XFS in the kernel, xfsprogs installed? */
int volume_loop_xfs_check(gb_err *err);
/* xfs_growfs on the mounted volume: the filesystem takes the device's
 * size. */
int volume_loop_xfs_grow(const struct loop_paths *p, gb_err *err);
/* Shrink a mounted, unused XFS volume by copying it into a new image of
 * new_size and swapping the images (the steps are in the file). */
int volume_loop_xfs_shrink(const volume_env *env, struct loop_paths *p, uint64_t new_size,
                           gb_err *err);
/* Remove what an interrupted shrink left: the copy's mount, device, image
 * and mountpoint. Nothing there is success. */
int volume_loop_copy_remove(const struct loop_paths *p, gb_err *err);

#endif
