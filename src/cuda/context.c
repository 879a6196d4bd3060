/*
 * context.c - a process's context memory from NVML's per-process memory
 * (context.h).
 */
#include "context.h"

bool gpucuda_context_due(const gpucuda_context *c, uint64_t now_ns)
{
    return c->next_ns == 0 || now_ns >= c->next_ns;
}

int64_t gpucuda_context_update(gpucuda_context *c, bool listed, uint64_t nvml_used,
                               uint64_t slot_bytes, uint64_t now_ns)
{
    /* What the process allocated through the library: its slot less the
     * context charged before. */
    uint64_t allocated = slot_bytes > c->charged ? slot_bytes - c->charged : 0;
    uint64_t context = listed && nvml_used > allocated ? nvml_used - allocated : 0;
    int64_t delta = (int64_t)context - (int64_t)c->charged;
    c->charged = context;
    c->next_ns = now_ns + GPUCUDA_CONTEXT_PERIOD_NS;
    return delta;
}
