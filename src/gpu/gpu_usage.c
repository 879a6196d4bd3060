/*
 * gpu_usage.c - the sampler's front: picks the backend that matches the
 * inventory's source, and builds readings for all of them. Simulated
 * inventories (and "none", which has no device) get the idle sampler
 * below: every device present, nothing used, nothing running.
 *
 * A reading's arrays grow as gpu_inventory's does: the capacity is implied
 * by the count (8, then doubling at each power of two), so gpu_usage needs
 * no capacity fields.
 */
#include "gpu/gpu_usage.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

struct gpu_sampler {
    const struct gpu_sampler_backend *backend;
    void *state;
};

/* ---- building a reading ------------------------------------------------- */

void gpu_usage_start(gpu_usage *u, const gpu_inventory *inv)
{
    memset(u, 0, sizeof(*u));
    if (inv->n == 0)
        return;
    u->cards = xcalloc(inv->n, sizeof(*u->cards));
    u->ncards = inv->n;
    for (size_t i = 0; i < inv->n; i++) {
        snprintf(u->cards[i].uuid, sizeof(u->cards[i].uuid), "%s", inv->devices[i].uuid);
        u->cards[i].present = true;
    }
}

void gpu_card_usage_absent(gpu_card_usage *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->problem, sizeof(c->problem), fmt, ap);
    va_end(ap);
    c->present = false;
    c->memory_used_mib = 0;
    c->utilization = -1;
}

/* Room for one more element in an array holding n. */
static void *gpu_usage_grow(void *array, size_t n, size_t size)
{
    if (n == 0 || (n >= 8 && (n & (n - 1)) == 0))
        return xreallocarray(array, n ? n * 2 : 8, size);
    return array;
}

gpu_proc_usage *gpu_usage_add_proc(gpu_usage *u)
{
    u->procs = gpu_usage_grow(u->procs, u->nprocs, sizeof(*u->procs));
    gpu_proc_usage *p = &u->procs[u->nprocs++];
    memset(p, 0, sizeof(*p));
    p->utilization = -1;
    return p;
}

void gpu_usage_add_xid(gpu_usage *u, const char *uuid, unsigned long long xid)
{
    u->xids = gpu_usage_grow(u->xids, u->nxids, sizeof(*u->xids));
    gpu_xid *x = &u->xids[u->nxids++];
    memset(x, 0, sizeof(*x));
    snprintf(x->uuid, sizeof(x->uuid), "%s", uuid);
    x->xid = xid;
}

void gpu_usage_free(gpu_usage *u)
{
    if (!u)
        return;
    free(u->cards);
    free(u->procs);
    free(u->xids);
    memset(u, 0, sizeof(*u));
}

/* ---- the idle sampler ("simulated", "none") ---------------------------- */

static int gpu_sampler_idle_open(const gpu_config *cfg, const gpu_inventory *inv, void **state,
                                 gb_err *err)
{
    (void)cfg;
    (void)err;
    *state = (void *)inv;
    return 0;
}

static int gpu_sampler_idle_read(void *state, gpu_usage *out, gb_err *err)
{
    (void)err;
    gpu_usage_start(out, state);
    return 0;
}

static void gpu_sampler_idle_close(void *state)
{
    (void)state;
}

static const struct gpu_sampler_backend gpu_sampler_idle = {
    .open = gpu_sampler_idle_open,
    .read = gpu_sampler_idle_read,
    .close = gpu_sampler_idle_close,
};

/* ---- the front ---------------------------------------------------------- */

static const struct gpu_sampler_backend *gpu_sampler_backend_for(const char *source)
{
    static const struct {
        const char *source;
        const struct gpu_sampler_backend *backend;
    } backends[] = {
        {"nvml", &gpu_sampler_nvml},
        {"nvidia-smi", &gpu_sampler_smi},
        {"simulated", &gpu_sampler_idle},
        {"none", &gpu_sampler_idle},
    };
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (strcmp(source, backends[i].source) == 0)
            return backends[i].backend;
    return NULL;
}

int gpu_sampler_open(const gpu_config *cfg, const gpu_inventory *inv, gpu_sampler **out,
                     gb_err *err)
{
    static const gpu_config defaults = {.source = GPU_SOURCE_AUTO};
    *out = NULL;
    if (!cfg)
        cfg = &defaults;
    const struct gpu_sampler_backend *backend = gpu_sampler_backend_for(inv->source);
    if (!backend)
        return err_set(err, ERR_INTERNAL, "no usage sampler for GPU source '%s'", inv->source);
    void *state = NULL;
    if (backend->open(cfg, inv, &state, err) < 0)
        return -1;
    gpu_sampler *s = xmalloc(sizeof(*s));
    s->backend = backend;
    s->state = state;
    *out = s;
    return 0;
}

int gpu_sampler_read(gpu_sampler *s, gpu_usage *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (s->backend->read(s->state, out, err) < 0) {
        gpu_usage_free(out);
        return -1;
    }
    return 0;
}

void gpu_sampler_close(gpu_sampler *s)
{
    if (!s)
        return;
    s->backend->close(s->state);
    free(s);
}
