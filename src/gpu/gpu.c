/*
 * gpu.c - loading the GPU inventory from the configured source, and the
 * inventory's own small operations (find, free, sort).
 *
 * The inventory is a plain array of gpu_device sorted by index (MIG
 * instances right after their card); it is read once at start-up, so lookups
 * are linear scans over at most a few dozen entries.
 */
#include "util/xalloc.h"
#include "gpu/gpu_source.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

int gpu_source_parse(const char *s)
{
    static const struct {
        const char *name;
        enum gpu_source_kind kind;
    } names[] = {
        {"auto", GPU_SOURCE_AUTO},
        {"nvml", GPU_SOURCE_NVML},
        {"nvidia-smi", GPU_SOURCE_SMI},
        {"simulated", GPU_SOURCE_SIMULATED},
    };
    for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(s, names[i].name) == 0)
            return (int)names[i].kind;
    return -1;
}

/* AUTO: the first source that finds at least one GPU wins. A failure here is
 * normal on a host without NVIDIA hardware, so the reasons are only logged
 * and the caller gets an empty inventory with source "none". */
static int gpu_inventory_load_auto(const gpu_config *cfg, gpu_inventory *out)
{
    const struct {
        const struct gpu_source *source;
        const char *arg;
    } tries[] = {
        {&gpu_source_nvml, cfg->nvml_library},
        {&gpu_source_smi, cfg->nvidia_smi},
    };
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        gb_err e = GB_ERR_INIT;
        if (tries[i].source->load(tries[i].arg, out, &e) < 0) {
            log_info("GPU source %s: %s", tries[i].source->name, e.msg);
            continue;
        }
        if (out->n > 0)
            return 0;
        log_info("GPU source %s: no GPU found", tries[i].source->name);
        gpu_inventory_free(out);
    }
    memset(out, 0, sizeof(*out));
    strcpy(out->source, "none");
    return 0;
}

int gpu_inventory_load(const gpu_config *cfg, gpu_inventory *out, gb_err *err)
{
    static const gpu_config defaults = {.source = GPU_SOURCE_AUTO};
    if (!cfg)
        cfg = &defaults;
    memset(out, 0, sizeof(*out));
    switch (cfg->source) {
    case GPU_SOURCE_AUTO:
        return gpu_inventory_load_auto(cfg, out);
    case GPU_SOURCE_NVML:
        return gpu_source_nvml.load(cfg->nvml_library, out, err);
    case GPU_SOURCE_SMI:
        return gpu_source_smi.load(cfg->nvidia_smi, out, err);
    case GPU_SOURCE_SIMULATED:
        if (!cfg->simulate_spec || !*cfg->simulate_spec)
            return err_set(
                err, ERR_INVALID_PARAMS,
                "GPU source 'simulated' needs a spec, as in --simulate-gpus 8xA100-80GB");
        return gpu_source_sim.load(cfg->simulate_spec, out, err);
    }
    return err_set(err, ERR_INVALID_PARAMS,
                   "unknown GPU source %d; use auto, nvml, nvidia-smi or simulated",
                   (int)cfg->source);
}

void gpu_inventory_free(gpu_inventory *inv)
{
    if (!inv)
        return;
    free(inv->devices);
    memset(inv, 0, sizeof(*inv));
}

const gpu_device *gpu_inventory_find(const gpu_inventory *inv, const char *uuid)
{
    for (size_t i = 0; inv && uuid && i < inv->n; i++)
        if (strcmp(inv->devices[i].uuid, uuid) == 0)
            return &inv->devices[i];
    return NULL;
}

void gpu_inventory_add(gpu_inventory *inv, const gpu_device *d)
{
    /* The capacity is implied by n (8, then doubling at each power of two),
     * so the public struct needs no capacity field. */
    if (inv->n == 0 || (inv->n >= 8 && (inv->n & (inv->n - 1)) == 0)) {
        size_t cap = inv->n ? inv->n * 2 : 8;
        inv->devices = xrealloc(inv->devices, cap * sizeof(*inv->devices));
    }
    inv->devices[inv->n++] = *d;
}

static int gpu_device_cmp(const void *a, const void *b)
{
    const gpu_device *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    if (x->is_mig != y->is_mig)
        return x->is_mig ? 1 : -1;
    if (x->mig_index != y->mig_index)
        return x->mig_index < y->mig_index ? -1 : 1;
    return strcmp(x->uuid, y->uuid);
}

void gpu_inventory_sort(gpu_inventory *inv)
{
    if (inv->n > 1)
        qsort(inv->devices, inv->n, sizeof(inv->devices[0]), gpu_device_cmp);
}
