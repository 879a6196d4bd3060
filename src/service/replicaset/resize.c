/*
 * resize.c - a share changed in place: a patch that asks only for
 * another gpuMemory on the cards the set holds, when those cards have
 * room, and/or another gpuCores (the compute share, for memory shares and
 * time-slice replicas alike), makes no new version. The container keeps
 * running; the CUDA limiter (src/cuda/) reads the new share from its
 * limits file at its processes' next allocation (the compute share
 * within 50 ms of launches).
 *
 * Order, and why it is crash-safe without a journal entry:
 *   1. the pool exchanges the set's tenancies for ones of the new size on
 *      the same cards (gpus_pool_realloc, pinned; one step under the
 *      pool's mutex, so nothing else can take the room in between); a
 *      change of gpuCores alone leaves the pool as it is;
 *   2. one store transaction writes the record (spec and gpuShares) and
 *      the current version's history entry (its spec): the store's word
 *      on what the set holds changes at once or not at all; if it does
 *      not, the pool takes the old grant back;
 *   3. the limits file is rewritten from the record (temporary file and
 *      rename: replicaset_cuda_limits_rewrite).
 * A gpuboxd that dies between 2 and 3 rebuilds its pools from the record
 * at start-up and rewrites every running set's limits file from it
 * (replicaset_reconcile), so the file follows the record; one that dies
 * before 2 has changed nothing that outlives it.
 *
 * A shrink below what the container's processes hold now is applied: what
 * they hold stays theirs and every allocation fails until the container
 * is back under the new share (docs/gpus.md, "Changing a share").
 *
 * Not in place (replicaset_patch makes a new version as before): anything
 * else in the patch, whole cards, another gpuMemory of time-slice
 * replicas (they have none of their own), no CUDA limiter
 * in the container (its environment variables cannot change), or a card
 * without room for the new share (the share moves to another card).
 */
#include "service/replicaset/replicaset.h"

#include <stdlib.h>
#include <string.h>

#include "sched/gpus.h"
#include "service/keys.h"
#include "service/records.h"
#include "service/replicaset/gpu_env.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/xalloc.h"

/* Does spec differ from r's only in the size of a memory share r holds
 * and/or in the compute share (gpuCores) of the shares r holds? */
static bool replicaset_resize_applies(const replicaset_record *r, const replicaset_spec *spec)
{
    if (r->grant.n == 0 || r->grant.cards[0].mode == GPUS_MODE_WHOLE ||
        spec->gpu_shared != r->spec.gpu_shared)
        return false;
    bool memory = spec->gpu_memory_mib != r->spec.gpu_memory_mib;
    bool cores = spec->gpu_cores != r->spec.gpu_cores;
    if (!memory && !cores)
        return false;
    if (memory && (r->grant.cards[0].mode != GPUS_MODE_MEMORY || spec->gpu_memory_mib == 0))
        return false;
    replicaset_spec same = *spec; /* shallow: only compared, never freed */
    same.gpu_memory_mib = r->spec.gpu_memory_mib;
    same.gpu_cores = r->spec.gpu_cores;
    _cleanup_json_ json_t *x = replicaset_spec_to_json(&same);
    _cleanup_json_ json_t *y = replicaset_spec_to_json(&r->spec);
    return x && y && json_equal(x, y);
}

/* The pool's tenancies of r, of the new size on the same cards, into g;
 * -1 (logged) when a card has no room. */
static int replicaset_resize_realloc(app *a, const replicaset_record *r,
                                     const replicaset_spec *spec, gpus_grant *g)
{
    gpus_request req;
    replicaset_spec_gpu_request(spec, &req);
    _cleanup_free_ const char **pins = xcalloc(r->grant.n + 1, sizeof(*pins));
    for (size_t i = 0; i < r->grant.n; i++)
        pins[i] = r->grant.cards[i].uuid;
    req.pin_uuids = pins;
    req.npin = r->grant.n;
    req.count = r->grant.n;
    gb_err no_room = GB_ERR_INIT;
    if (gpus_pool_realloc(a->gpu_pool, &r->grant, &req, r->name, g, &no_room) < 0) {
        log_info("replica set %s: gpuMemory %llu MiB does not fit on its cards (%s); a new "
                 "version moves it",
                 r->name, (unsigned long long)spec->gpu_memory_mib, no_room.msg);
        return -1;
    }
    return 0;
}

/* The history entry of r's version with r's spec now; NULL when there is
 * none (nothing to change). */
static char *replicaset_resize_history(app *a, const replicaset_record *r, char *key, size_t size,
                                       gb_err *err)
{
    keys_replicaset_history(key, size, r->name, r->version);
    _cleanup_json_ json_t *entry = NULL;
    if (records_get_json(a->store, key, "a replica set's history", &entry, NULL, err) <= 0)
        return NULL;
    json_object_set_new(entry, "spec", replicaset_spec_to_json(&r->spec));
    json_object_set_new(entry, "gpus", replicaset_record_gpus_json(r));
    return json_dumps(entry, JSON_COMPACT);
}

static json_t *replicaset_resize_answer(const replicaset_record *r)
{
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:b, s:b}", "name", r->container_name,
        "replicaSetName", r->name, "containerName", r->container_name, "containerId",
        r->container_id, "version", r->version, "state", replicaset_state_name(r->state), "gpus",
        replicaset_record_gpus_json(r), "gpuShares", replicaset_record_gpu_shares_json(r), "ports",
        replicaset_record_ports_json(r), "changed", true, "inPlace", true);
    if (out) {
        json_object_set_new(out, "gpuCores", replicaset_record_gpu_cores_json(r));
        replicaset_record_limits_json(r, out);
    }
    return out;
}

int replicaset_share_resize(app *a, replicaset_record *r, const replicaset_spec *spec, json_t **out,
                            gb_err *err)
{
    if ((r->state != RS_STATE_RUNNING && r->state != RS_STATE_PAUSED) || r->operation[0] ||
        !replicaset_resize_applies(r, spec) || !replicaset_cuda_limits_present(a, r))
        return 0;
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    if (spec->gpu_memory_mib == r->spec.gpu_memory_mib) {
        /* the compute share alone: the pool's grant stays as it is */
        g.cards = xcalloc(r->grant.n, sizeof(*g.cards));
        memcpy(g.cards, r->grant.cards, r->grant.n * sizeof(*g.cards));
        g.n = r->grant.n;
    } else if (replicaset_resize_realloc(a, r, spec, &g) < 0)
        return 0;
    /* From here the pool holds g; the record must say so or the pool goes back. */
    _cleanup_(replicaset_record_free) replicaset_record held = {0};
    replicaset_record_copy(r, &held);
    replicaset_spec_free(&r->spec);
    replicaset_spec_copy(spec, &r->spec);
    replicaset_record_set_grant(r, &g, err); /* cannot fail; r->grant is the pool's now */
    char hkey[STORE_KEY_MAX];
    gb_err herr = GB_ERR_INIT;
    _cleanup_free_ char *htext = replicaset_resize_history(a, r, hkey, sizeof(hkey), &herr);
    store_op hop = {.kind = STORE_OP_PUT, .key = hkey, .value = htext};
    if (replicaset_record_save(a, r, htext ? &hop : NULL, htext ? 1 : 0, err) < 0) {
        gpus_pool_release_grant(a->gpu_pool, &r->grant, r->name);
        gb_err e = GB_ERR_INIT;
        if (gpus_pool_take_grant(a->gpu_pool, &held.grant, held.name, &e) < 0)
            log_error("replica set %s: could not take its share back after an undone change: %s",
                      held.name, e.msg);
        return err_prefix(err, "changing the share of %s", held.name);
    }
    gb_err ferr = GB_ERR_INIT;
    if (replicaset_cuda_limits_rewrite(a, r, &ferr) < 0)
        /* The record holds the new share; the next start-up writes the file. */
        log_error("replica set %s: the new share is recorded but its limits file is not "
                  "rewritten: %s",
                  r->name, ferr.msg);
    log_info("replica set %s: share now %llu MiB, compute %d%% (0: no limit) on each of its %zu "
             "card(s), in place (version %d, container %s)",
             r->name, (unsigned long long)r->grant.cards[0].memory_mib, spec->gpu_cores, r->grant.n,
             r->version, r->container_name);
    *out = replicaset_resize_answer(r);
    return *out ? 1 : err_set(err, ERR_INTERNAL, "out of memory");
}
