/*
 * container_watch.h - Docker's status of every gpubox container, kept from
 * Docker's event stream, so the replica-set list answers without asking
 * Docker for its container list on every request (docs/daemon.md, "The
 * container cache").
 *
 * A thread lists gpubox's containers (label gpubox.replicaset) once, then
 * follows Docker's container events from a little before that list on
 * (Docker replays them, so nothing between the list and the stream is
 * lost): create, start, die, pause, unpause, destroy and rename move the
 * status of the container they name. When the stream breaks (dockerd
 * restarted, the socket closed) the cache is not used until the thread has
 * listed again and follows a new stream. So after gpuboxd starts, after a
 * container is stopped or started by hand, and after a reconnect the cache
 * says what Docker says.
 *
 * gpuboxd's own calls (create, start, stop, remove, rename) are seen at
 * once, before their event arrives: for CONTAINER_WATCH_FRESH_MS after such a
 * call the list asks Docker for that container itself
 * (container_watch_recent).
 */
#ifndef GPUBOX_SERVICE_CONTAINER_WATCH_H
#define GPUBOX_SERVICE_CONTAINER_WATCH_H

#include <stdbool.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

#define CONTAINER_WATCH_FRESH_MS 2000

/* Start following Docker (a thread); nothing is cached until its first
 * list answered. Call after a->docker exists; it registers itself as the
 * client's change observer. */
void container_watch_start(app *a);
void container_watch_stop(app *a);

/* A copy of the cache, {container name: Docker's status}, into *out, or -1
 * when there is none to trust now (not listed yet, the stream broken): the
 * caller lists Docker itself. */
int container_watch_states(app *a, json_t **out);

/* Whether gpuboxd itself changed name's (or id's) container in the last
 * CONTAINER_WATCH_FRESH_MS: its event may not have arrived yet. */
bool container_watch_recent(app *a, const char *name, const char *id);

#endif
