/*
 * cpus.h - exclusive CPU cores as the services see them (docs/cpus.md):
 * the pool made from the host's (or a simulated) topology, the NUMA nodes
 * of a set's cards, and the cpuset a container is given.
 */
#ifndef GPUBOX_SERVICE_CORES_H
#define GPUBOX_SERVICE_CORES_H

#include <stddef.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

/* a->cpus from --simulate-cpus or sysfs, less --reserved-cpus. A host whose
 * sysfs cannot be read gets an empty pool (cpuCount is then refused). */
int cores_make_pool(app *a, gb_err *err);
/* The NUMA nodes of these cards (each once, in card order) into out[]
 * (room for n); how many. Simulated cards are spread evenly over the CPU
 * pool's nodes; a real card's node is read from sysfs by its PCI bus id. */
size_t cores_nodes_of_cards(const app *a, char (*uuids)[GPU_UUID_MAX], size_t n, int *out);
/* The cpuset Docker is given for these logical CPUs ("0-1,32-33"); with a
 * simulated topology each id is mapped onto the host's online CPUs (id
 * modulo their number), so Docker accepts it. Caller frees; "" for none. */
char *cores_docker_cpuset(const app *a, const int *ids, size_t n);
/* GET /resources/cpus: the pool's status plus "enforced". */
json_t *cores_resources_json(const app *a);

#endif
