/*
 * gpu.h - the host's GPU inventory: which cards (or MIG instances) exist.
 *
 * Sources (one file each, behind struct gpu_source in gpu_source.h): NVML through
 * dlopen("libnvidia-ml.so.1") (gpu_nvml.c), `nvidia-smi --query-gpu=...
 * --format=csv` (gpu_smi.c), and a simulated inventory from a spec such as
 * "8xA100-80GB" or "2xT4-16GB,1xH100-80GB" (gpu_sim.c). Whichever source
 * found them, devices look the same to the rest of gpubox.
 *
 * The inventory is read once at start-up; it says what exists, never who
 * holds what (that is sched/ and the store).
 */
#ifndef GPUBOX_GPU_GPU_H
#define GPUBOX_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define GPU_UUID_MAX 96
#define GPU_MODEL_MAX 96

typedef struct gpu_device {
    char uuid[GPU_UUID_MAX];   /* "GPU-8f6c..." or "MIG-..." */
    int index;                 /* NVML / nvidia-smi index, 0-based */
    char model[GPU_MODEL_MAX]; /* "NVIDIA A100-SXM4-80GB" */
    uint64_t memory_mib;       /* total memory */
    bool healthy;
    bool is_mig;                    /* a MIG instance rather than a whole card */
    char parent_uuid[GPU_UUID_MAX]; /* for MIG instances: the card's uuid */
    int mig_index;                  /* for MIG instances: NVML's MIG device index on the card */
    bool mig_enabled;               /* a card in MIG mode: only its MIG instances are scheduled */
    char pci_bus_id[32];            /* "00000000:3B:00.0" (NVML); "" when unknown */
} gpu_device;

/* A MIG instance carries its card's index and follows the card in the list
 * (ordered by mig_index), so "sorted by index" holds for both kinds. */
typedef struct gpu_inventory {
    gpu_device *devices; /* sorted by index */
    size_t n;
    char source[16]; /* "nvml" | "nvidia-smi" | "simulated" | "none" */
    bool simulated;
    char driver_version[64]; /* "" when unknown */
} gpu_inventory;

enum gpu_source_kind { GPU_SOURCE_AUTO, GPU_SOURCE_NVML, GPU_SOURCE_SMI, GPU_SOURCE_SIMULATED };

typedef struct gpu_config {
    enum gpu_source_kind source;
    const char *simulate_spec; /* for GPU_SOURCE_SIMULATED, e.g. "8xA100-80GB" */
    const char *nvml_library;  /* default "libnvidia-ml.so.1" */
    const char *nvidia_smi;    /* default "nvidia-smi" (found on PATH) */
} gpu_config;

/* "auto" | "nvml" | "nvidia-smi" | "simulated" -> kind; -1 if unknown. */
int gpu_source_parse(const char *s);

/* Load the inventory. AUTO tries NVML, then nvidia-smi; if neither finds a
 * GPU it returns an empty inventory with source "none" (the caller warns).
 * An explicit source that fails is an error naming why. */
int gpu_inventory_load(const gpu_config *cfg, gpu_inventory *out, gb_err *err);
void gpu_inventory_free(gpu_inventory *inv);

const gpu_device *gpu_inventory_find(const gpu_inventory *inv, const char *uuid);

/* The individual sources, used by gpu_inventory_load and by tests. */
int gpu_nvml_load(const char *library, gpu_inventory *out, gb_err *err);
int gpu_smi_load(const char *nvidia_smi, gpu_inventory *out, gb_err *err);
/* gpu_smi_load with a chosen time limit (gpu_smi_load uses GPU_SMI_TIMEOUT_MS);
 * nvidia-smi is killed when it runs longer. */
#define GPU_SMI_TIMEOUT_MS 10000
int gpu_smi_load_timeout(const char *nvidia_smi, int timeout_ms, gpu_inventory *out, gb_err *err);
/* Parse nvidia-smi's CSV (--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits
 * and with the header); exported for tests and fuzzing. */
int gpu_smi_parse_csv(const char *csv, gpu_inventory *out, gb_err *err);
/* Spec: comma-separated items [COUNTx]MODEL-MEMGB ("8xA100-80GB",
 * "2xT4-16GB,1xH100-80GB", "A100-SXM4-40GB" = one card); at most
 * GPU_SIM_MAX_DEVICES cards in all. UUIDs are derived from index and item,
 * so the same spec gives the same UUIDs on every start. */
#define GPU_SIM_MAX_DEVICES 1024
int gpu_sim_load(const char *spec, gpu_inventory *out, gb_err *err);

#endif
