/*
 * context.h - a process's context memory on a limited card, counted in
 * the container's budget (docs/gpus.md, "Context memory").
 *
 * A CUDA context takes device memory of its own (code, stacks, the
 * driver's heaps: hundreds of MiB on a real card) that no allocation call
 * asks for. NVML's per-process list (nvmlDeviceGetComputeRunningProcesses)
 * reports each process's whole use of the card, context included; what
 * it reports beyond what the process allocated through the library is
 * its context memory, and the library charges that to the process's slot
 * of the budget like an allocation (so it returns with the process, even
 * after kill -9). The budget then covers what NVML reports.
 *
 * NVML is asked at the process's first allocation or memory query on the
 * card (after the context exists) and again at most once every
 * GPUCUDA_CONTEXT_PERIOD_NS, never per allocation: the contexts grow
 * rarely (a new module, a larger stack), and an NVML query costs tens of
 * microseconds on a real driver.
 *
 * Pure: NVML's answer, the slot's bytes and the time come in as
 * arguments; the library does the asking (hooks.c).
 */
#ifndef GPUBOX_CUDA_CONTEXT_H
#define GPUBOX_CUDA_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#define GPUCUDA_CONTEXT_PERIOD_NS 1000000000ULL /* NVML asked again at most once a second */

typedef struct {
    uint64_t charged; /* context bytes in the process's slot on the card */
    uint64_t next_ns; /* when NVML may be asked again; 0: at the next call */
} gpucuda_context;

/* Whether NVML should be asked now. */
bool gpucuda_context_due(const gpucuda_context *c, uint64_t now_ns);

/* NVML's answer for this process on the card (listed false: the process
 * is not in NVML's list, say before its context exists, or in a
 * container before gpuboxd's pids file names it (pids.h): then nothing
 * is counted) and what the
 * process's slot holds on the card now (c->charged included). Sets the
 * new charge and the next time to ask; returns how much to charge (> 0)
 * or refund (< 0). */
int64_t gpucuda_context_update(gpucuda_context *c, bool listed, uint64_t nvml_used,
                               uint64_t slot_bytes, uint64_t now_ns);

#endif
