/*
 * volume.h - the storage under gpubox's sized volumes: block devices,
 * filesystems and quotas. This layer never talks to Docker; the volume
 * service creates the Docker volume with the local-driver options a backend
 * returns here, and calls back for attach, resize, usage and destroy.
 *
 * Backends (one file each, docs/volumes.md):
 *   loop      the default: <data-dir>/volumes/<name>.img, a sparse file with
 *             ext4 or XFS (volume_env_set_fs; each volume keeps the one it
 *             was made with), on a loop device, mounted at
 *             <data-dir>/volumes/<name>/; Docker binds that directory. Size
 *             enforced; grows online (ext4 when the daemon has
 *             CAP_SYS_RESOURCE, XFS always: see volume_grows_online),
 *             shrinks only detached (XFS by copying into a smaller image).
 *   xfsquota  Docker's own `size` option on an XFS Docker root mounted with
 *             prjquota; resized by changing the project quota. UNTESTED on
 *             the machine gpubox is developed on (no quota support there).
 *   plain     a directory <data-dir>/volumes/<name>/ Docker binds; the size
 *             is only recorded by the caller, never enforced.
 *
 * Callers open a volume_env once (it picks the backend and checks the host
 * can use it) and call the volume_* functions, never the backend directly;
 * those check names and sizes once for every backend and give failures the
 * envelope code of the operation (1023 create, 1025 destroy, 1033 usage,
 * 1035 resize) unless a backend chose a more precise one. Every operation
 * is idempotent where it can be, so the service's journal can re-run a step
 * after a crash: attach and destroy always are, and a resize re-run with
 * the same size completes whatever the crashed one left half done.
 *
 * Operations on one volume name must not run concurrently (the service
 * serializes per name); different names may run in parallel.
 */
#ifndef GPUBOX_VOLUME_VOLUME_H
#define GPUBOX_VOLUME_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define VOLUME_PATH_MAX 1024
#define VOLUME_DOCKER_OPTS_MAX 4

/* The host a backend works on. Filled by volume_env_open. */
typedef struct volume_env {
    const struct volume_backend *backend;
    char data_dir[VOLUME_PATH_MAX];    /* absolute, symlinks resolved */
    char volumes_dir[VOLUME_PATH_MAX]; /* <data_dir>/volumes, made by volume_env_open */
    char docker_root[VOLUME_PATH_MAX]; /* Docker's root dir (xfsquota): /var/lib/docker */
    char fs[8]; /* loop: the filesystem new volumes get, "ext4" (default) or "xfs" */
} volume_env;

/* The Docker local-driver options (`docker volume create --opt k=v`) the
 * service must create the Docker volume with. */
typedef struct volume_docker_opts {
    size_t n;
    struct volume_docker_opt {
        char key[16];
        char value[VOLUME_PATH_MAX];
    } items[VOLUME_DOCKER_OPTS_MAX];
} volume_docker_opts;

/* What a backend provides. All return 0 or -1 with *err. Names and sizes
 * arrive checked (volume.c). docker_mountpoint is the Docker volume's
 * Mountpoint as inspect shows it (/var/lib/docker/volumes/<name>/_data);
 * only xfsquota needs it, and derives it from docker_root when NULL. */
struct volume_backend {
    const char *name;   /* "loop" | "xfsquota" | "plain" */
    bool enforced;      /* does the filesystem refuse writes past the size? */
    uint64_t min_bytes; /* smallest size it can make */
    /* Can volume `name` (NULL: the volumes create makes now) grow while a
     * running container uses it? NULL = yes. (loop: the kernel lets only a
     * process with CAP_SYS_RESOURCE grow a mounted ext4; without it, ext4
     * volumes grow only detached. XFS grows mounted with CAP_SYS_ADMIN.) */
    bool (*grows_online)(const volume_env *env, const char *name);
    /* Pick the filesystem of new volumes ("ext4" or "xfs", checked by the
     * caller) and check this host can make it. NULL: the backend has no
     * choice (only "ext4", the default, is then accepted, and ignored). */
    int (*set_fs)(volume_env *env, const char *fs, gb_err *err);
    /* At start-up: can this host use the backend? A refusal says why and
     * what to use instead. */
    int (*check)(const volume_env *env, gb_err *err);
    /* Make the storage (ERR_VOLUME_EXISTS when some is there already) and
     * say which Docker options to create the Docker volume with. */
    int (*create)(const volume_env *env, const char *name, uint64_t size, volume_docker_opts *opts,
                  gb_err *err);
    /* Make existing storage usable again (after a reboot or a daemon
     * restart): ERR_NOT_FOUND when there is none. Idempotent. */
    int (*attach)(const volume_env *env, const char *name, gb_err *err);
    /* Change the size to new_size. in_use: a running container uses the
     * volume. Shrinking below the data gives ERR_VOLUME_USED_TOO_LARGE, a
     * shrink the backend cannot do while in use ERR_STATE_CONFLICT; both
     * change nothing. */
    int (*resize)(const volume_env *env, const char *name, const char *docker_mountpoint,
                  uint64_t new_size, bool in_use, gb_err *err);
    /* Bytes used, and the size the filesystem offers (df's "size", a little
     * under the asked size: the filesystem's own overhead); *size is 0 when
     * the backend does not enforce one. */
    int (*usage)(const volume_env *env, const char *name, const char *docker_mountpoint,
                 uint64_t *used, uint64_t *size, gb_err *err);
    /* Remove the storage and its data, after the Docker volume is gone.
     * Refuses (ERR_STATE_CONFLICT) while something still has it mounted.
     * Idempotent: nothing there is success. */
    int (*destroy)(const volume_env *env, const char *name, gb_err *err);
};

extern const struct volume_backend volume_backend_loop;
extern const struct volume_backend volume_backend_xfsquota;
extern const struct volume_backend volume_backend_plain;

/* Pick the backend by name (NULL = "loop"), resolve data_dir, make
 * <data_dir>/volumes (mode 0700), and run the backend's check. docker_root
 * NULL = /var/lib/docker. Unknown names give ERR_INVALID_PARAMS listing the
 * known ones. */
int volume_env_open(volume_env *env, const char *backend, const char *data_dir,
                    const char *docker_root, gb_err *err);
/* The filesystem new loop volumes get: "ext4" (what volume_env_open
 * sets) or "xfs". Refused (ERR_INVALID_PARAMS, saying what to do) for
 * another name, xfs with a backend other than loop, or xfs on a host
 * without XFS in its kernel or xfsprogs. Existing volumes keep theirs
 * (the loop backend reads it from each image). */
int volume_env_set_fs(volume_env *env, const char *fs, gb_err *err);
const char *volume_backend_name(const volume_env *env);
bool volume_enforced(const volume_env *env);
/* The filesystem volume_create makes now ("ext4", "xfs"); NULL for the
 * backends without a choice (xfsquota, plain). */
const char *volume_fs(const volume_env *env);
/* false: a grow of `name` (NULL: of a volume made now) while in use gives
 * ERR_STATE_CONFLICT; the caller must detach the volume (stop its
 * containers) to grow it. */
bool volume_grows_online(const volume_env *env, const char *name);

int volume_create(const volume_env *env, const char *name, uint64_t size, volume_docker_opts *opts,
                  gb_err *err);
int volume_attach(const volume_env *env, const char *name, gb_err *err);
int volume_resize(const volume_env *env, const char *name, const char *docker_mountpoint,
                  uint64_t new_size, bool in_use, gb_err *err);
int volume_usage(const volume_env *env, const char *name, const char *docker_mountpoint,
                 uint64_t *used, uint64_t *size, gb_err *err);
int volume_destroy(const volume_env *env, const char *name, gb_err *err);

/* The value of one Docker option ("device"), or NULL. */
const char *volume_docker_opt(const volume_docker_opts *opts, const char *key);

#endif
