/*
 * cpus.c - exclusive CPU cores as the services see them (see cpus.h).
 */
#include "util/xalloc.h"
#include "service/cores.h"

#include <stdlib.h>
#include <string.h>

#include "sched/cpus.h"
#include "util/cleanup.h"
#include "util/log.h"

int cores_make_pool(app *a, gb_err *err)
{
    cpus_topology t = {0};
    if (a->cfg.simulate_cpus) {
        if (cpus_topology_simulate(a->cfg.simulate_cpus, &t, err) < 0)
            return err_prefix(err, "--simulate-cpus");
        log_warn("* SIMULATED CPU topology (--simulate-cpus %s): %zu logical CPU(s); containers "
                 "get their cores mapped onto this host's real CPUs.",
                 a->cfg.simulate_cpus, t.n);
    } else {
        gb_err why = GB_ERR_INIT;
        if (cpus_topology_read("", &t, &why) < 0) {
            log_warn("CPU topology unknown, cpuCount will be refused: %s", why.msg);
            t = (cpus_topology){0};
        }
    }
    _cleanup_free_ int *reserved = NULL;
    size_t nreserved = 0;
    if (a->cfg.reserved_cpus &&
        cpus_list_parse(a->cfg.reserved_cpus, &reserved, &nreserved, err) < 0) {
        cpus_topology_free(&t);
        return err_prefix(err, "--reserved-cpus");
    }
    a->cpus = cpus_pool_new(&t, reserved, nreserved);
    cpus_topology_free(&t);
    return 0;
}

static int cpus_node_of_card(const app *a, const char *uuid)
{
    const gpu_device *d = gpu_inventory_find(&a->gpus, uuid);
    if (!d)
        return -1;
    if (d->is_mig && d->parent_uuid[0])
        d = gpu_inventory_find(&a->gpus, d->parent_uuid)
                ? gpu_inventory_find(&a->gpus, d->parent_uuid)
                : d;
    int nodes = cpus_pool_nodes(a->cpus);
    if (cpus_pool_simulated(a->cpus) || strcmp(a->gpus.source, "simulated") == 0) {
        /* Cards spread evenly: of 8 cards on 2 nodes, 0-3 on node 0. */
        size_t at = 0, cards = 0;
        for (size_t i = 0; i < a->gpus.n; i++)
            if (!a->gpus.devices[i].is_mig) {
                if (&a->gpus.devices[i] == d)
                    at = cards;
                cards++;
            }
        return nodes > 0 && cards ? (int)(at * (size_t)nodes / cards) : -1;
    }
    return cpus_pci_numa_node("", d->pci_bus_id);
}

size_t cores_nodes_of_cards(const app *a, char (*uuids)[GPU_UUID_MAX], size_t n, int *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int node = cpus_node_of_card(a, uuids[i]);
        bool seen = node < 0;
        for (size_t j = 0; j < k && !seen; j++)
            seen = out[j] == node;
        if (!seen)
            out[k++] = node;
    }
    return k;
}

char *cores_docker_cpuset(const app *a, const int *ids, size_t n)
{
    if (!n)
        return xstrdup("");
    if (!cpus_pool_simulated(a->cpus))
        return cpus_list_format(ids, n);
    cpus_topology real = {0};
    gb_err ignored = GB_ERR_INIT;
    _cleanup_free_ int *mapped = xcalloc(n, sizeof(int));
    if (cpus_topology_read("", &real, &ignored) < 0 || real.n == 0) {
        cpus_topology_free(&real);
        return xstrdup("0");
    }
    for (size_t i = 0; i < n; i++)
        mapped[i] = real.cpus[(size_t)ids[i] % real.n].id;
    cpus_topology_free(&real);
    /* Mapped ids may repeat; the list format wants each once. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < k && !dup; j++)
            dup = mapped[j] == mapped[i];
        if (!dup)
            mapped[k++] = mapped[i];
    }
    return cpus_list_format(mapped, k);
}

json_t *cores_resources_json(const app *a)
{
    json_t *j = cpus_pool_status(a->cpus);
    /* Simulated cores are recorded and answered, but the containers run on
     * the host's real CPUs mapped from them: not exclusive. */
    json_object_set_new(j, "enforced", json_boolean(!cpus_pool_simulated(a->cpus)));
    return j;
}
