/*
 * gpu_usage.h - what the host's cards are doing right now: memory used and
 * utilization per card, memory (and utilization, where the driver keeps
 * it) per process, and the XID error events since the last reading.
 *
 * A sampler is opened once over the inventory (gpu.h) and read again and
 * again (once a second by default: the service's monitor, DESIGN.md
 * section 9). Where the readings come from follows the inventory's source:
 *   "nvml"        one NVML session kept open for the sampler's life
 *                 (gpu_usage_nvml.c): nvmlDeviceGetMemoryInfo,
 *                 nvmlDeviceGetUtilizationRates,
 *                 nvmlDeviceGetComputeRunningProcesses,
 *                 nvmlDeviceGetProcessUtilization, and an event set
 *                 registered for nvmlEventTypeXidCriticalError on every card,
 *                 drained without waiting at each read;
 *   "nvidia-smi"  two runs of nvidia-smi a reading (gpu_usage_smi.c):
 *                 --query-gpu=uuid,memory.used,utilization.gpu and
 *                 --query-compute-apps=gpu_uuid,pid,used_memory; no XID
 *                 events and no per-process utilization (nvidia-smi has
 *                 neither in CSV);
 *   "simulated", "none"  idle cards: no memory used, 0 %, no process.
 *
 * A card that stops answering (NVML: GPU is lost, or no longer listed; for
 * nvidia-smi: missing from the CSV) is reported with present == false and
 * why; the caller decides what that means (the monitor marks it unhealthy).
 * Processes are host PIDs, as the driver reports them; which container
 * each belongs to is the caller's business.
 *
 * A sampler is used by one thread at a time.
 */
#ifndef GPUBOX_GPU_GPU_USAGE_H
#define GPUBOX_GPU_GPU_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "util/err.h"

#define GPU_USAGE_PROBLEM_MAX 128

typedef struct gpu_card_usage {
    char uuid[GPU_UUID_MAX];
    bool present;                        /* false: the card did not answer */
    char problem[GPU_USAGE_PROBLEM_MAX]; /* when !present: why ("GPU is lost") */
    uint64_t memory_used_mib;
    int utilization; /* percent, 0..100; -1 when the source cannot say (MIG) */
} gpu_card_usage;

typedef struct gpu_proc_usage {
    char uuid[GPU_UUID_MAX]; /* the device it runs on (card or MIG instance) */
    int pid;                 /* host PID */
    uint64_t memory_mib;     /* used on that device */
    int utilization;         /* SM percent from the driver's process samples; -1 unknown */
} gpu_proc_usage;

typedef struct gpu_xid {
    char uuid[GPU_UUID_MAX];
    unsigned long long xid; /* the XID number, as in the kernel log's "Xid (...): 79" */
} gpu_xid;

typedef struct gpu_usage {
    gpu_card_usage *cards; /* one per inventory device, in inventory order */
    size_t ncards;
    gpu_proc_usage *procs; /* every compute process on any device */
    size_t nprocs;
    gpu_xid *xids; /* XID events since the previous read, oldest first */
    size_t nxids;
} gpu_usage;

typedef struct gpu_sampler gpu_sampler;

/* A sampler over inv's devices from inv->source, with cfg's library or
 * nvidia-smi paths (cfg may be NULL: the defaults). inv must outlive it.
 * ERR_INTERNAL naming the cause when NVML cannot be opened again. */
int gpu_sampler_open(const gpu_config *cfg, const gpu_inventory *inv, gpu_sampler **out,
                     gb_err *err);
/* One reading into *out (free with gpu_usage_free). A card that does not
 * answer is a card with present == false, not an error; -1 only when
 * nothing could be read at all (nvidia-smi failed or timed out). */
int gpu_sampler_read(gpu_sampler *s, gpu_usage *out, gb_err *err);
void gpu_sampler_close(gpu_sampler *s);
void gpu_usage_free(gpu_usage *u);

/* The nvidia-smi CSV parsers (noheader, nounits), exported for tests and
 * fuzzing. Cards: "uuid, memory.used, utilization.gpu" lines; a card of
 * the inventory missing from them is !present. Apps: "gpu_uuid, pid,
 * used_memory" lines, appended to out->procs. */
int gpu_smi_parse_card_usage(const char *csv, const gpu_inventory *inv, gpu_usage *out,
                             gb_err *err);
int gpu_smi_parse_apps(const char *csv, gpu_usage *out, gb_err *err);
/* (On error, gpu_smi_parse_card_usage leaves *out empty and
 * gpu_smi_parse_apps leaves it as it was.) */

/* ---- Internal to src/gpu/: the samplers behind gpu_sampler_open ----
 * One per source, the caller never knows which it has: gpu_usage.c
 * ("simulated", "none"), gpu_usage_nvml.c, gpu_usage_smi.c. read gets *out
 * zeroed; on -1 the caller frees whatever it holds. */
struct gpu_sampler_backend {
    int (*open)(const gpu_config *cfg, const gpu_inventory *inv, void **state, gb_err *err);
    int (*read)(void *state, gpu_usage *out, gb_err *err);
    void (*close)(void *state);
};
extern const struct gpu_sampler_backend gpu_sampler_nvml;
extern const struct gpu_sampler_backend gpu_sampler_smi;

/* A reading's start: one present, idle card per inventory device. */
void gpu_usage_start(gpu_usage *u, const gpu_inventory *inv);
/* Mark a card as not answering, saying why. */
void gpu_card_usage_absent(gpu_card_usage *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A new zeroed process entry (utilization -1) at the end of u->procs. */
gpu_proc_usage *gpu_usage_add_proc(gpu_usage *u);
void gpu_usage_add_xid(gpu_usage *u, const char *uuid, unsigned long long xid);

#endif
