/*
 * rs_alloc.c - a replica set's GPUs and host ports: asking sched/ for them
 * all at once, and giving them back.
 *
 * The GPUs come as a grant (sched/gpus.h): whole cards, or a memory share
 * or a time-slice replica on each card, as the spec asks. The record keeps
 * the grant, so giving back frees exactly the tenancies it holds.
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
    free(r->ports);
    r->ports = NULL;
    r->nports = 0;
    gpus_request req;
    rs_spec_gpu_request(&r->spec, &req);
    _cleanup_(gpus_grant_free) gpus_grant grant = {0};
    if (gpus_pool_alloc(a->gpu_pool, &req, r->name, &grant, err) < 0)
        return -1;
    if (rs_record_set_grant(r, &grant, err) < 0) {
        gpus_pool_release_grant(a->gpu_pool, &grant, r->name);
        return -1;
    }
    if (rs_alloc_ports(a, r, err) < 0) {
        rs_alloc_give_back(a, r);
        rs_record_clear_holdings(r);
        return -1;
    }
    return 0;
}

void rs_alloc_give_back(app *a, const rs_record *r)
{
    if (r->ngpus && r->grant.n == r->ngpus) {
        gpus_pool_release_grant(a->gpu_pool, &r->grant, r->name);
    } else if (r->ngpus) {
        /* gpus set without a grant: whole cards, released by UUID */
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
