/*
 * rs_alloc.c - a replica set's GPUs and host ports: asking sched/ for them
 * all at once, and giving them back.
 */
#include "service/rs_internal.h"

#include <stdlib.h>
#include <string.h>

#include "sched/gpus.h"
#include "sched/ports.h"
#include "util/cleanup.h"

static int rs_alloc_ports(app *a, rs_record *r, gb_err *err)
{
    const rs_spec *spec = &r->spec;
    size_t nexplicit = 0, nauto = rs_spec_ports_to_allocate(spec);
    _cleanup_free_ uint16_t *explicit_ports = calloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ uint16_t *auto_ports = calloc(nauto + 1, sizeof(uint16_t));
    if (!explicit_ports || !auto_ports)
        return err_set(err, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < spec->nports; i++)
        if (spec->ports[i].host_port)
            explicit_ports[nexplicit++] = spec->ports[i].host_port;
    if (nexplicit && ports_pool_take(a->ports, explicit_ports, nexplicit, true, err) < 0)
        return -1;
    if (nauto && ports_pool_alloc(a->ports, nauto, auto_ports, err) < 0) {
        ports_pool_release(a->ports, explicit_ports, nexplicit);
        return -1;
    }
    r->ports = calloc(spec->nports + 1, sizeof(*r->ports));
    if (!r->ports) {
        ports_pool_release(a->ports, explicit_ports, nexplicit);
        ports_pool_release(a->ports, auto_ports, nauto);
        return err_set(err, ERR_INTERNAL, "out of memory");
    }
    size_t next_auto = 0;
    for (size_t i = 0; i < spec->nports; i++) {
        const rs_port *p = &spec->ports[i];
        r->ports[i].container_port = p->container_port;
        r->ports[i].host_port = p->host_port ? p->host_port : auto_ports[next_auto++];
        memcpy(r->ports[i].protocol, p->protocol, sizeof(r->ports[i].protocol));
    }
    r->nports = spec->nports;
    return 0;
}

int rs_alloc_take(app *a, rs_record *r, gb_err *err)
{
    free(r->gpus);
    free(r->ports);
    r->gpus = NULL;
    r->ports = NULL;
    r->ngpus = r->nports = 0;
    size_t n = (size_t)r->spec.gpu_count;
    r->gpus = calloc(n + 1, sizeof(*r->gpus));
    if (!r->gpus)
        return err_set(err, ERR_INTERNAL, "out of memory");
    if (n && gpus_pool_alloc_whole(a->gpu_pool, n, r->name, r->gpus, err) < 0)
        return -1;
    r->ngpus = n;
    if (rs_alloc_ports(a, r, err) < 0) {
        rs_alloc_give_back(a, r);
        r->ngpus = 0;
        return -1;
    }
    return 0;
}

void rs_alloc_give_back(app *a, const rs_record *r)
{
    if (r->ngpus) {
        _cleanup_free_ const char **uuids = calloc(r->ngpus, sizeof(*uuids));
        if (uuids) {
            for (size_t i = 0; i < r->ngpus; i++)
                uuids[i] = r->gpus[i];
            gpus_pool_release(a->gpu_pool, uuids, r->ngpus, r->name);
        }
    }
    if (r->nports) {
        _cleanup_free_ uint16_t *ports = calloc(r->nports, sizeof(*ports));
        if (ports) {
            for (size_t i = 0; i < r->nports; i++)
                ports[i] = r->ports[i].host_port;
            ports_pool_release(a->ports, ports, r->nports);
        }
    }
}

/* Ports for to->spec: a port `held` already holds is kept when to->spec
 * still asks for it (the same explicit host port, or an allocated port for
 * the same container port and protocol, so a user's ssh port survives a
 * patch); the rest are taken from the pool. All or nothing. */
static int rs_alloc_next_ports(app *a, const rs_record *held, rs_record *to, gb_err *err)
{
    const rs_spec *spec = &to->spec;
    _cleanup_free_ bool *used = calloc(held->nports + 1, sizeof(bool));
    _cleanup_free_ uint16_t *take = calloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ uint16_t *got = calloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ size_t *auto_at = calloc(spec->nports + 1, sizeof(size_t));
    free(to->ports);
    to->ports = calloc(spec->nports + 1, sizeof(*to->ports));
    to->nports = 0;
    if (!used || !take || !got || !auto_at || !to->ports)
        return err_set(err, ERR_INTERNAL, "out of memory");
    size_t ntake = 0, nauto = 0;
    for (size_t i = 0; i < spec->nports; i++) {
        const rs_port *p = &spec->ports[i];
        to->ports[i] =
            (rs_held_port){.container_port = p->container_port, .host_port = p->host_port};
        memcpy(to->ports[i].protocol, p->protocol, sizeof(p->protocol));
        if (!p->host_port)
            continue;
        bool kept = false;
        for (size_t j = 0; j < held->nports && !kept; j++)
            if (!used[j] && held->ports[j].host_port == p->host_port)
                used[j] = kept = true;
        if (!kept)
            take[ntake++] = p->host_port;
    }
    for (size_t i = 0; i < spec->nports; i++) {
        const rs_port *p = &spec->ports[i];
        if (p->host_port)
            continue;
        for (size_t j = 0; j < held->nports && !to->ports[i].host_port; j++) {
            const rs_held_port *h = &held->ports[j];
            if (!used[j] && h->container_port == p->container_port &&
                strcmp(h->protocol, p->protocol) == 0) {
                used[j] = true;
                to->ports[i].host_port = h->host_port;
            }
        }
        if (!to->ports[i].host_port)
            auto_at[nauto++] = i;
    }
    if (ntake && ports_pool_take(a->ports, take, ntake, true, err) < 0)
        return -1;
    if (nauto && ports_pool_alloc(a->ports, nauto, got, err) < 0) {
        ports_pool_release(a->ports, take, ntake);
        return -1;
    }
    for (size_t k = 0; k < nauto; k++)
        to->ports[auto_at[k]].host_port = got[k];
    to->nports = spec->nports;
    return 0;
}

int rs_alloc_next(app *a, const rs_record *held, rs_record *to, gb_err *err)
{
    size_t want = (size_t)to->spec.gpu_count;
    size_t keep = want < held->ngpus ? want : held->ngpus;
    free(to->gpus);
    to->gpus = calloc(want + 1, sizeof(*to->gpus));
    to->ngpus = 0;
    if (!to->gpus)
        return err_set(err, ERR_INTERNAL, "out of memory");
    /* Growing keeps every card and adds; shrinking keeps the first ones. */
    if (keep)
        memcpy(to->gpus, held->gpus, keep * sizeof(*to->gpus));
    if (want > keep &&
        gpus_pool_alloc_whole(a->gpu_pool, want - keep, to->name, to->gpus + keep, err) < 0)
        return -1;
    to->ngpus = want;
    if (rs_alloc_next_ports(a, held, to, err) < 0) {
        rs_alloc_give_back_except(a, to, held);
        to->ngpus = 0;
        return -1;
    }
    return 0;
}

static bool rs_has_gpu(const rs_record *r, const char *uuid)
{
    for (size_t i = 0; i < r->ngpus; i++)
        if (strcmp(r->gpus[i], uuid) == 0)
            return true;
    return false;
}

static bool rs_has_port(const rs_record *r, uint16_t port)
{
    for (size_t i = 0; i < r->nports; i++)
        if (r->ports[i].host_port == port)
            return true;
    return false;
}

int rs_alloc_union(const rs_record *x, const rs_record *y, rs_record *out, gb_err *err)
{
    free(out->gpus);
    free(out->ports);
    out->gpus = calloc(x->ngpus + y->ngpus + 1, sizeof(*out->gpus));
    out->ports = calloc(x->nports + y->nports + 1, sizeof(*out->ports));
    out->ngpus = out->nports = 0;
    if (!out->gpus || !out->ports)
        return err_set(err, ERR_INTERNAL, "out of memory");
    const rs_record *both[] = {x, y};
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < both[k]->ngpus; i++)
            if (!rs_has_gpu(out, both[k]->gpus[i]))
                memcpy(out->gpus[out->ngpus++], both[k]->gpus[i], GPU_UUID_MAX);
        for (size_t i = 0; i < both[k]->nports; i++)
            if (!rs_has_port(out, both[k]->ports[i].host_port))
                out->ports[out->nports++] = both[k]->ports[i];
    }
    return 0;
}

void rs_alloc_give_back_except(app *a, const rs_record *held, const rs_record *keep)
{
    _cleanup_free_ const char **uuids = calloc(held->ngpus + 1, sizeof(*uuids));
    _cleanup_free_ uint16_t *ports = calloc(held->nports + 1, sizeof(*ports));
    if (!uuids || !ports)
        return;
    size_t ng = 0, np = 0;
    for (size_t i = 0; i < held->ngpus; i++)
        if (!rs_has_gpu(keep, held->gpus[i]))
            uuids[ng++] = held->gpus[i];
    for (size_t i = 0; i < held->nports; i++)
        if (!rs_has_port(keep, held->ports[i].host_port))
            ports[np++] = held->ports[i].host_port;
    if (ng)
        gpus_pool_release(a->gpu_pool, uuids, ng, held->name);
    if (np)
        ports_pool_release(a->ports, ports, np);
}

int rs_alloc_retake_last(app *a, rs_record *r, gb_err *err)
{
    _cleanup_free_ const char **uuids = calloc(r->nlast_gpus + 1, sizeof(*uuids));
    _cleanup_free_ uint16_t *ports = calloc(r->nlast_ports + 1, sizeof(*ports));
    if (!uuids || !ports)
        return err_set(err, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < r->nlast_gpus; i++)
        uuids[i] = r->last_gpus[i];
    for (size_t i = 0; i < r->nlast_ports; i++)
        ports[i] = r->last_ports[i].host_port;
    if (r->nlast_gpus && gpus_pool_take(a->gpu_pool, uuids, r->nlast_gpus, r->name, err) < 0)
        return -1;
    if (r->nlast_ports && ports_pool_take(a->ports, ports, r->nlast_ports, true, err) < 0) {
        gpus_pool_release(a->gpu_pool, uuids, r->nlast_gpus, r->name);
        return -1;
    }
    free(r->gpus);
    free(r->ports);
    r->gpus = calloc(r->nlast_gpus + 1, sizeof(*r->gpus));
    r->ports = calloc(r->nlast_ports + 1, sizeof(*r->ports));
    if (!r->gpus || !r->ports) {
        gpus_pool_release(a->gpu_pool, uuids, r->nlast_gpus, r->name);
        ports_pool_release(a->ports, ports, r->nlast_ports);
        r->ngpus = r->nports = 0;
        return err_set(err, ERR_INTERNAL, "out of memory");
    }
    if (r->nlast_gpus)
        memcpy(r->gpus, r->last_gpus, r->nlast_gpus * sizeof(*r->gpus));
    if (r->nlast_ports)
        memcpy(r->ports, r->last_ports, r->nlast_ports * sizeof(*r->ports));
    r->ngpus = r->nlast_gpus;
    r->nports = r->nlast_ports;
    return 0;
}

int rs_alloc_take_preferring_last(app *a, rs_record *r, gb_err *err)
{
    /* The last host ports that are still free are taken first and then
     * kept by rs_alloc_next like a patch keeps its ports. */
    rs_record pref = {0};
    memcpy(pref.name, r->name, sizeof(pref.name));
    _cleanup_free_ rs_held_port *ports = calloc(r->nlast_ports + 1, sizeof(*ports));
    if (!ports)
        return err_set(err, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < r->nlast_ports; i++) {
        gb_err ignored = GB_ERR_INIT;
        if (ports_pool_take(a->ports, &r->last_ports[i].host_port, 1, true, &ignored) == 0)
            ports[pref.nports++] = r->last_ports[i];
    }
    pref.ports = ports;
    int rc = rs_alloc_next(a, &pref, r, err);
    /* What was taken for preference and not kept goes back (all of it on failure). */
    rs_record none = {0};
    rs_alloc_give_back_except(a, &pref, rc == 0 ? r : &none);
    return rc;
}
