/*
 * volume_loop.h - what the two files of the loop backend share
 * (volume_loop.c: create, attach, usage, destroy; volume_loop_resize.c:
 * grow and shrink). Internal to src/volume/.
 */
#ifndef GPUBOX_VOLUME_VOLUME_LOOP_H
#define GPUBOX_VOLUME_VOLUME_LOOP_H

#include "volume/volume_internal.h"

/* ext4 with 4 KiB blocks; sizes are rounded down to whole blocks. */
#define LOOP_BLOCK_SIZE 4096
/* A 4 MiB journal is the smallest mke2fs makes with 4 KiB blocks: below
 * 16 MiB it would take most of the volume. */
#define LOOP_MIN_BYTES (16ULL << 20)

/* The paths of one volume (see volume_loop.c for the layout). */
struct loop_paths {
    const char *name;
    char image[VOLUME_PATH_MAX];
    char tmp[VOLUME_PATH_MAX];
    char mnt[VOLUME_PATH_MAX];
};

int volume_loop_paths(const volume_env *env, const char *name, struct loop_paths *p, gb_err *err);

/* e2fsck /dev/loop<index>: -p (force false), or -f -y. Fails when it
 * leaves errors unfixed. */
int volume_loop_fsck(int index, bool force, gb_err *err);

/* Bind (if no device is bound yet: then e2fsck -p first) and mount.
 * Idempotent; ERR_NOT_FOUND without an image. */
int volume_loop_attach_paths(const struct loop_paths *p, gb_err *err);

/* Unmount and unbind. ERR_STATE_CONFLICT, with the volume mounted again as
 * before, when a host process or another mount namespace still uses it. */
int volume_loop_detach_paths(const struct loop_paths *p, gb_err *err);

/* After a failed step: attach again (at whatever size the image has), and
 * if that fails too, add why to *err, which keeps its code. */
void volume_loop_reattach(const struct loop_paths *p, gb_err *err);

/* Does this process hold CAP_SYS_RESOURCE (see volume_loop_resize.c)? */
bool volume_loop_grows_online(const volume_env *env);

int volume_loop_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                       uint64_t new_size, bool in_use, gb_err *err);

#endif
