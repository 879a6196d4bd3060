/*
 * allocations.c - derive the in-memory pools from the store at start-up.
 *
 * The store is the one source of truth for who holds which GPU and port:
 * each replica-set record (keys.h) lists what it holds, and the pools are
 * rebuilt from those lists whenever gpuboxd starts. Nothing about the pools
 * is ever saved on its own.
 *
 * GPUs are re-marked from the record's grant (gpus_grant_from_json: "gpus"
 * and, for shares, "gpuShares"; a record with "gpus" only holds whole
 * cards), so each share comes back on the card, with the memory and the
 * replica slot, it had.
 *
 * A record that cannot be parsed stops start-up: guessing would risk handing
 * one card to two replica sets. A record naming a GPU this host no longer
 * has (a card was removed) or a port another record also claims is logged
 * and left for the replica-set reconciliation to settle.
 */
#include "util/xalloc.h"
#include "service/service.h"

#include <stdlib.h>
#include <string.h>

#include "sched/cpus.h"
#include "sched/gpus.h"
#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/log.h"

/* "ports" entries may be bare numbers or {"hostPort": n, ...} objects. */
static int allocations_port(json_t *entry, uint16_t *port)
{
    json_t *v = json_is_object(entry) ? json_object_get(entry, "hostPort") : entry;
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
    if (n < 1 || n > 65535)
        return -1;
    *port = (uint16_t)n;
    return 0;
}

static int allocations_mark(app *a, const char *name, json_t *record, gb_err *err)
{
    json_t *ports = json_object_get(record, "ports");
    size_t nports = json_array_size(ports);
    _cleanup_free_ uint16_t *held = xcalloc(nports + 1, sizeof(*held));
    _cleanup_(gpus_grant_free) gpus_grant grant = {0};
    if (gpus_grant_from_json(record, &grant, err) < 0) {
        err->code = ERR_INTERNAL;
        return err_prefix(err, "replica set %s", name);
    }
    for (size_t i = 0; i < nports; i++)
        if (allocations_port(json_array_get(ports, i), &held[i]) < 0)
            return err_set(err, ERR_INTERNAL, "replica set %s: ports[%zu] is not a port", name, i);

    gb_err take = GB_ERR_INIT;
    if (grant.n && gpus_pool_take_grant(a->gpu_pool, &grant, name, &take) < 0)
        log_warn("allocations: replica set %s holds GPUs that cannot be marked: %s", name,
                 take.msg);
    if (nports && ports_pool_take(a->ports, held, nports, false, &take) < 0)
        log_warn("allocations: replica set %s holds ports that cannot be marked: %s", name,
                 take.msg);
    /* Cores: the record's word, even on CPUs reserved since (recover). */
    json_t *cpuset = json_object_get(record, "cpuset");
    size_t ncpus = json_array_size(cpuset);
    _cleanup_free_ int *cpus = xcalloc(ncpus + 1, sizeof(*cpus));
    for (size_t i = 0; i < ncpus; i++) {
        json_t *v = json_array_get(cpuset, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= 65536)
            return err_set(err, ERR_INTERNAL, "replica set %s: cpuset[%zu] is not a CPU", name, i);
        cpus[i] = (int)json_integer_value(v);
    }
    if (ncpus && cpus_pool_take(a->cpus, cpus, ncpus, name, true, &take) < 0)
        log_warn("allocations: replica set %s holds CPUs that cannot be marked: %s", name,
                 take.msg);
    return 0;
}

struct allocations_ctx {
    app *a;
    size_t records;
};

/* Mark what one record holds (records_fn). */
static int allocations_mark_record(void *ctx, const char *key, json_t *record, int64_t mod_revision,
                                   gb_err *err)
{
    struct allocations_ctx *c = ctx;
    (void)mod_revision;
    if (!json_is_object(record))
        return err_set(err, ERR_INTERNAL, "not a JSON object");
    if (allocations_mark(c->a, key + strlen(KEYS_REPLICASETS), record, err) < 0)
        return -1;
    c->records++;
    return 0;
}

int allocations_derive(app *a, gb_err *err)
{
    struct allocations_ctx c = {.a = a};
    if (records_scan(a->store, KEYS_REPLICASETS, keys_is_replicaset_record, allocations_mark_record,
                     &c, err) < 0)
        return err_prefix(err, "reading replica sets to rebuild the GPU and port pools, refusing "
                               "to guess which GPUs and ports they hold");
    log_info("allocations: %zu replica set(s) in the store; %zu of %zu GPU(s) free", c.records,
             gpus_pool_free_count(a->gpu_pool), gpus_pool_size(a->gpu_pool));
    return 0;
}
