/*
 * binds.h - turning a spec's binds into what Docker mounts, safely.
 *
 * A bind's src is either a gpubox volume name or an absolute host path.
 *   - Volume names must name a gpubox volume that is ready and attached
 *     (volumes_bind_source); the bind mounts its Docker volume. Docker is
 *     never left to create an unknown volume silently.
 *   - Host paths are resolved (realpath: "..", symlinks) and must exist and
 *     lie under one of --bind-prefixes (none by default, so none allowed).
 *     Whatever the prefixes, "/", /proc, /sys, /dev, /etc, /boot, the Docker
 *     socket and root (/var/lib/docker), and gpubox's own data dir are
 *     refused.
 */
#ifndef GPUBOX_SERVICE_BINDS_H
#define GPUBOX_SERVICE_BINDS_H

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

int binds_resolve(app *a, const rs_spec *spec, binds_resolved *out, gb_err *err);
void binds_resolved_free(binds_resolved *b);

#endif
