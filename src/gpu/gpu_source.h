/*
 * gpu_source.h - what each inventory source implements, and the helpers
 * they share (internal to src/gpu/).
 *
 * A source fills a gpu_inventory from its own view of the host: NVML
 * (gpu_nvml.c), nvidia-smi (gpu_smi.c) or a spec (gpu_sim.c). gpu.c picks
 * one through this table and never looks inside; a source never decides
 * what happens when it finds nothing (AUTO's fallback lives in gpu.c).
 */
#ifndef GPUBOX_GPU_GPU_SOURCE_H
#define GPUBOX_GPU_GPU_SOURCE_H

#include "gpu/gpu.h"

struct gpu_source {
    const char *name; /* as it appears in gpu_inventory.source */
    /* arg: library path, nvidia-smi path or simulate spec; NULL = default.
     * On success *out is a fresh inventory sorted by index; on failure it is
     * left empty (safe to gpu_inventory_free). */
    int (*load)(const char *arg, gpu_inventory *out, gb_err *err);
};

extern const struct gpu_source gpu_source_nvml;
extern const struct gpu_source gpu_source_smi;
extern const struct gpu_source gpu_source_sim;

/* Append a copy of *d (growing the array). */
void gpu_inventory_add(gpu_inventory *inv, const gpu_device *d);
/* Order by index, each card before its MIG instances, those by mig_index. */
void gpu_inventory_sort(gpu_inventory *inv);

#endif
