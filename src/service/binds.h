/*
 * binds.h - turning a spec's binds into what Docker mounts, safely.
 *
 * A bind's src is either a gpubox volume name or an absolute host path.
 *   - Volume names must name a gpubox volume that is ready and attached
 *     (volumes_bind_source); the bind mounts its Docker volume. Docker is
 *     never left to create an unknown volume silently.
 *   - Host paths must exist, lie under one of --bind-prefixes (none by
 *     default, so none allowed) and contain no symlink: they are opened
 *     from the prefix one component at a time, refusing any symlink
 *     (binds.c). Whatever the prefixes, "/", /proc, /sys, /dev, /etc,
 *     /boot, the Docker socket and root (/var/lib/docker), and gpubox's own
 *     data dir are refused.
 *   - Docker never gets a host path a user can change. Docker resolves a
 *     bind's source again at every start of the container (gpuboxd's,
 *     its restart policy's, its own after a dockerd restart), following
 *     symlinks; so the directory or file opened is bind-mounted onto a
 *     staging path, <data-dir>/binds/<container>/<index>, that only
 *     gpuboxd writes, and Docker gets that path (binds_stage.c). The
 *     mount holds the very directory opened: a later rename or symlink in
 *     the user's tree changes nothing the container sees.
 */
#ifndef GPUBOX_SERVICE_BINDS_H
#define GPUBOX_SERVICE_BINDS_H

#include <stdbool.h>
#include <stddef.h>

#include "docker/docker.h"
#include "service/app.h"
#include "service/replicaset/spec.h"
#include "util/err.h"

typedef struct binds_resolved {
    docker_bind *binds; /* what to hand Docker */
    char **owned;       /* strings the binds point into */
    size_t n;
} binds_resolved;

/* Would every bind of spec be given to a container made now? Changes
 * nothing. ERR_FORBIDDEN (not allowed, a system path, a symlink on the
 * way) or ERR_INVALID_PARAMS (missing, not a directory or file) else. */
int binds_check(app *a, const replicaset_spec *spec, gb_err *err);

/* The host source src opened (O_PATH, close-on-exec) by the rules above;
 * -1 with err set when refused. */
int binds_open_host(app *a, const char *src, gb_err *err);

/* For container (about to be created): what was staged for it before is
 * unmounted, then each host bind of spec is opened and mounted on its
 * staging path; out gets what Docker mounts (staging paths, Docker
 * volumes). On failure nothing stays mounted. */
int binds_stage(app *a, const char *container, const replicaset_spec *spec, binds_resolved *out,
                gb_err *err);
/* Before container starts: each staging mount of spec that is missing
 * (a host reboot) is made again, by the same rules. 1 when one was made
 * again, 0 when all were there, -1 with err set. */
int binds_ensure(app *a, const char *container, const replicaset_spec *spec, gb_err *err);
/* After container is removed: its staging mounts are unmounted and their
 * mount points removed (never what they held). */
void binds_unstage(app *a, const char *container);
/* Start-up: the staging of every container Docker no longer has goes. */
void binds_sweep(app *a);
/* Start-up: does container give Docker its host binds as staging paths?
 * False, with a warning each, for one made by a gpuboxd from before the
 * staging, which gives Docker the user's path (or when Docker does not
 * answer). */
bool binds_pinned(app *a, const char *container, const replicaset_spec *spec);

void binds_resolved_free(binds_resolved *b);

#endif
