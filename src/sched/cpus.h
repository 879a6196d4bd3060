/*
 * cpus.h - the CPU-core allocator: which logical CPUs a replica set gets
 * for its own (docs/cpus.md).
 *
 * The host's logical CPUs are grouped as physical cores (SMT siblings share
 * one) and NUMA nodes: the topology, read from sysfs (cpus_topology_read)
 * or made up for tests (cpus_topology_simulate, "2x16x2" = 2 nodes x 16
 * cores x 2 threads). The pool hands out logical CPUs exclusively: one
 * owner each. A reserved set (the host's) is never handed out.
 *
 * Allocation (cpus_pool_alloc) fills the preferred NUMA nodes first (those
 * of the set's cards), then the other nodes, most free first; within a node
 * it takes whole free cores (every sibling) first, then single threads of
 * cores already partly held, and only then splits a whole core. All or
 * nothing. As with ports, which CPUs are held is derived from the store's
 * records at start-up (cpus_pool_take) and changes only through this pool.
 *
 * Thread-safe: one mutex guards the pool.
 */
#ifndef GPUBOX_SCHED_CPUS_H
#define GPUBOX_SCHED_CPUS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

#define CPUS_MAX 4096 /* logical CPU ids are below this */

typedef struct cpus_cpu {
    int id;      /* logical CPU number, as in /sys/devices/system/cpu/cpuN */
    int core;    /* physical core: unique per (package, core_id) on the host */
    int node;    /* NUMA node; 0 when the host has no NUMA information */
    int package; /* physical_package_id (socket) */
} cpus_cpu;

typedef struct cpus_topology {
    cpus_cpu *cpus; /* sorted by id */
    size_t n;
    bool simulated;
} cpus_topology;

void cpus_topology_free(cpus_topology *t);

/* A kernel cpulist, "0-3,8-11" or "5" or "" (none), into ascending unique
 * ids (caller frees *out). ERR_INVALID_PARAMS saying what is wrong. */
int cpus_list_parse(const char *s, int **out, size_t *n, gb_err *err);
/* Ascending ids as a cpulist ("0-3,8"); caller frees. */
char *cpus_list_format(const int *ids, size_t n);

/* "NODESxCORESxTHREADS" ("2x16x2"): logical ids numbered as Linux does on
 * most hosts: the first thread of every core first (node 0's cores, then
 * node 1's), then the second threads in the same order. */
int cpus_topology_simulate(const char *spec, cpus_topology *out, gb_err *err);
/* The host's topology under root ("" for the real /sys; a directory laid
 * out like /sys for tests): online CPUs, their core_id and
 * physical_package_id, and each node's cpulist. */
int cpus_topology_read(const char *root, cpus_topology *out, gb_err *err);
/* The NUMA node of a PCI device from its bus id as NVML gives it
 * ("00000000:3B:00.0" or "0000:3b:00.0"), under root as above; -1 unknown. */
int cpus_pci_numa_node(const char *root, const char *bus_id);

typedef struct cpus_pool cpus_pool;

/* reserved: ids never handed out (ids not in t are ignored). t is copied. */
cpus_pool *cpus_pool_new(const cpus_topology *t, const int *reserved, size_t nreserved);
void cpus_pool_free(cpus_pool *p);

/* Take n free logical CPUs for owner into out[] (ascending), preferring
 * the nodes in prefer[] (in that order). All or nothing;
 * ERR_CPU_NOT_ENOUGH saying how many are free on each node. */
int cpus_pool_alloc(cpus_pool *p, size_t n, const int *prefer, size_t nprefer, const char *owner,
                    int *out, gb_err *err);
/* Take exactly these ids for owner; all or nothing. Refused (ERR_CPU_NOT_ENOUGH)
 * when one is held by someone, unknown, or reserved, unless recover (at
 * start-up the record's word is taken; an unknown id is still refused). */
int cpus_pool_take(cpus_pool *p, const int *ids, size_t n, const char *owner, bool recover,
                   gb_err *err);
/* Order ids so that siblings of one core sit together, by node then core
 * (a prefix of the result keeps whole cores: what a shrink keeps). */
void cpus_pool_order(const cpus_pool *p, int *ids, size_t n);
/* Give back those of ids that owner holds. */
void cpus_pool_release(cpus_pool *p, const int *ids, size_t n, const char *owner);

size_t cpus_pool_size(const cpus_pool *p);       /* logical CPUs, reserved included */
size_t cpus_pool_free_count(const cpus_pool *p); /* neither held nor reserved */
size_t cpus_pool_usable(const cpus_pool *p);     /* not reserved */
bool cpus_pool_simulated(const cpus_pool *p);
int cpus_pool_nodes(const cpus_pool *p); /* NUMA nodes: highest node + 1 */
/* {"simulated", "nodes", "cores", "threadsPerCore", "total", "reserved",
 *  "free", "held", "cpus": [{"id", "core", "node", "state": "free" |
 *  "reserved" | "held", "owner"?}], "nodes": [{"node", "cpus": "0-7,16-23",
 *  "free"}]} */
json_t *cpus_pool_status(const cpus_pool *p);

#endif
