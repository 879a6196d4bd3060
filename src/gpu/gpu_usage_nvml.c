/*
 * gpu_usage_nvml.c - usage readings from NVML, one session (nvmlInit at
 * open, nvmlShutdown at close) for the sampler's life.
 *
 * At open, NVML's devices are enumerated once and matched to the inventory
 * by UUID (NVML's indices need not match an inventory read earlier; UUIDs
 * do), MIG instances through their card's MIG handles. A device NVML does
 * not list then is reported as not answering at every read. An event set
 * is registered for XID errors on every card (MIG instances cannot be
 * registered: their XIDs arrive on the card).
 *
 * Each read asks, per device: memory (nvmlDeviceGetMemoryInfo), the card's
 * utilization, the compute processes (_v2, else the plain name), the
 * processes' SM utilization from the driver's samples newer than the last
 * ones seen on that device; then drains the XID events without waiting.
 *
 * Which failures make a device "not answering" (present == false): any
 * failure of the memory query, and any of the others but "Not Supported"
 * and "Insufficient Permissions", which say what the driver will not tell
 * (a value -1, no process list), not that the card is in trouble;
 * marking a card unhealthy for them would stop it being scheduled for
 * good. Those are logged once per device and query.
 *
 * Devices queried for processes: cards and MIG instances, except a card in
 * MIG mode, whose list would repeat its instances' processes.
 */
#include "gpu/gpu_nvml_abi.h"
#include "gpu/gpu_usage.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/xalloc.h"

#define NVML_MIB (1024ULL * 1024ULL)
/* Events drained at one read at most, so a library that never says
 * "timeout" cannot hold the sampler forever. */
#define NVML_XID_DRAIN_MAX 256
/* A list query asks again when processes started between counting and
 * listing; this many times at most. */
#define NVML_LIST_ATTEMPTS 4
/* Room left for processes started between the count and the list. */
#define NVML_LIST_SLACK 8

/* The queries whose refusals are logged once per device. */
enum nvml_query { NVML_Q_UTILIZATION = 1, NVML_Q_PROCESSES = 2, NVML_Q_PROCESS_SAMPLES = 4 };

/* What the sampler keeps per inventory device (same order). */
struct nvml_tracked {
    nvmlDevice_t handle;          /* NULL: NVML did not list it at open */
    unsigned long long last_seen; /* newest process sample read, microseconds */
    unsigned warned;              /* enum nvml_query bits already logged */
};

struct nvml_sampler {
    struct gpu_nvml_api api;
    const gpu_inventory *inv;
    struct nvml_tracked *devs;
    nvmlEventSet_t events; /* NULL: no XID events */
    bool events_failing;   /* the last drain failed (logged once) */
};

/* A compute process as either list version reports it. */
struct nvml_proc {
    unsigned int pid;
    unsigned long long bytes;
};

/* ---- open: handles and the event set ----------------------------------- */

/* The inventory index of the device with h's UUID, or -1. */
static int nvml_match(struct nvml_sampler *s, nvmlDevice_t h)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    if (s->api.get_uuid(h, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return -1;
    for (size_t i = 0; i < s->inv->n; i++) {
        if (!s->devs[i].handle && strcmp(s->inv->devices[i].uuid, uuid) == 0) {
            s->devs[i].handle = h;
            return (int)i;
        }
    }
    return -1;
}

static void nvml_match_mig(struct nvml_sampler *s, nvmlDevice_t card)
{
    unsigned int max = 0;
    if (!s->api.get_max_mig || !s->api.get_mig_handle ||
        s->api.get_max_mig(card, &max) != NVML_SUCCESS)
        return;
    for (unsigned int m = 0; m < max; m++) {
        nvmlDevice_t h = NULL;
        if (s->api.get_mig_handle(card, m, &h) == NVML_SUCCESS)
            nvml_match(s, h);
    }
}

static void nvml_find_handles(struct nvml_sampler *s)
{
    unsigned int count = 0;
    nvmlReturn_t r = s->api.get_count(&count);
    if (r != NVML_SUCCESS)
        log_warn("NVML usage: cannot count the GPUs: %s", gpu_nvml_strerror(&s->api, r));
    for (unsigned int i = 0; r == NVML_SUCCESS && i < count; i++) {
        nvmlDevice_t h = NULL;
        if (s->api.get_handle(i, &h) != NVML_SUCCESS)
            continue;
        int at = nvml_match(s, h);
        if (at >= 0 && s->inv->devices[at].mig_enabled)
            nvml_match_mig(s, h);
    }
    for (size_t i = 0; i < s->inv->n; i++)
        if (!s->devs[i].handle)
            log_warn("NVML usage: %s is not listed by NVML; it is reported as not answering",
                     s->inv->devices[i].uuid);
}

static void nvml_watch_xids(struct nvml_sampler *s)
{
    const struct gpu_nvml_api *api = &s->api;
    if (!api->event_set_create || !api->register_events || !api->event_set_wait) {
        log_info("NVML usage: the library has no event API; XID errors are not watched");
        return;
    }
    nvmlReturn_t r = api->event_set_create(&s->events);
    if (r != NVML_SUCCESS) {
        log_warn("NVML usage: XID errors are not watched: nvmlEventSetCreate: %s",
                 gpu_nvml_strerror(api, r));
        s->events = NULL;
        return;
    }
    for (size_t i = 0; i < s->inv->n; i++) {
        if (s->inv->devices[i].is_mig || !s->devs[i].handle)
            continue;
        r = api->register_events(s->devs[i].handle, nvmlEventTypeXidCriticalError, s->events);
        if (r != NVML_SUCCESS)
            log_warn("NVML usage: XID errors of %s are not watched: %s", s->inv->devices[i].uuid,
                     gpu_nvml_strerror(api, r));
    }
}

static int nvml_sampler_open(const gpu_config *cfg, const gpu_inventory *inv, void **state,
                             gb_err *err)
{
    const char *library =
        cfg->nvml_library && *cfg->nvml_library ? cfg->nvml_library : GPU_NVML_DEFAULT_LIBRARY;
    struct nvml_sampler *s = xcalloc(1, sizeof(*s));
    if (gpu_nvml_api_open(&s->api, library, err) < 0) {
        free(s);
        return err_prefix(err, "GPU usage sampling");
    }
    nvmlReturn_t r = s->api.init();
    if (r != NVML_SUCCESS) {
        err_set(err, ERR_INTERNAL, "GPU usage sampling: NVML (%s) failed to initialize: %s",
                library, gpu_nvml_strerror(&s->api, r));
        gpu_nvml_api_close(&s->api);
        free(s);
        return -1;
    }
    s->inv = inv;
    s->devs = xcalloc(inv->n ? inv->n : 1, sizeof(*s->devs));
    nvml_find_handles(s);
    nvml_watch_xids(s);
    *state = s;
    return 0;
}

static void nvml_sampler_close(void *state)
{
    struct nvml_sampler *s = state;
    if (s->events && s->api.event_set_free)
        s->api.event_set_free(s->events);
    s->api.shutdown();
    gpu_nvml_api_close(&s->api);
    free(s->devs);
    free(s);
}

/* ---- read: one device --------------------------------------------------- */

/* A refusal of a secondary query: "Not Supported" and "Insufficient
 * Permissions" leave the value unknown (logged once), anything else means
 * the device is not answering. 0 = carry on, -1 = marked absent. */
static int nvml_refused(struct nvml_sampler *s, size_t i, enum nvml_query q, const char *what,
                        nvmlReturn_t r, gpu_card_usage *c)
{
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION) {
        if (!(s->devs[i].warned & q))
            log_info("NVML usage: %s of %s unknown: %s", what, c->uuid,
                     gpu_nvml_strerror(&s->api, r));
        s->devs[i].warned |= q;
        return 0;
    }
    gpu_card_usage_absent(c, "%s", gpu_nvml_strerror(&s->api, r));
    return -1;
}

static int nvml_read_utilization(struct nvml_sampler *s, size_t i, gpu_card_usage *c)
{
    const gpu_device *d = &s->inv->devices[i];
    nvmlUtilization_t u = {0};
    c->utilization = -1;
    /* NVML keeps no utilization for MIG instances, nor for a card in MIG mode. */
    if (d->is_mig || d->mig_enabled || !s->api.get_utilization)
        return 0;
    nvmlReturn_t r = s->api.get_utilization(s->devs[i].handle, &u);
    if (r != NVML_SUCCESS)
        return nvml_refused(s, i, NVML_Q_UTILIZATION, "utilization", r, c);
    c->utilization = u.gpu > 100 ? 100 : (int)u.gpu;
    return 0;
}

/* One call of whichever list version the library has, into out (cap
 * entries); *count as NVML's. */
static nvmlReturn_t nvml_procs_call(const struct gpu_nvml_api *api, nvmlDevice_t h,
                                    unsigned int cap, unsigned int *count, struct nvml_proc *out)
{
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (api->get_procs_v2) {
        nvmlProcessInfo_v2_t *buf = cap ? xcalloc(cap, sizeof(*buf)) : NULL;
        *count = cap;
        r = api->get_procs_v2(h, count, buf);
        for (unsigned int k = 0; r == NVML_SUCCESS && k < *count && k < cap; k++)
            out[k] = (struct nvml_proc){buf[k].pid, buf[k].usedGpuMemory};
        free(buf);
    }
    /* Old drivers export the _v2 name but answer that it is not there. */
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND && api->get_procs_v1) {
        nvmlProcessInfo_v1_t *buf = cap ? xcalloc(cap, sizeof(*buf)) : NULL;
        *count = cap;
        r = api->get_procs_v1(h, count, buf);
        for (unsigned int k = 0; r == NVML_SUCCESS && k < *count && k < cap; k++)
            out[k] = (struct nvml_proc){buf[k].pid, buf[k].usedGpuMemory};
        free(buf);
    }
    return r;
}

/* The compute processes on h: counted first, then listed (again when more
 * started in between). *procs is malloc'd. */
static nvmlReturn_t nvml_list_procs(const struct gpu_nvml_api *api, nvmlDevice_t h,
                                    struct nvml_proc **procs, unsigned int *n)
{
    unsigned int cap = 0;
    *procs = NULL;
    *n = 0;
    for (int attempt = 0; attempt < NVML_LIST_ATTEMPTS; attempt++) {
        unsigned int count = 0;
        struct nvml_proc *buf = cap ? xcalloc(cap, sizeof(*buf)) : NULL;
        nvmlReturn_t r = nvml_procs_call(api, h, cap, &count, buf);
        if (r == NVML_SUCCESS && count > cap)
            r = NVML_ERROR_INSUFFICIENT_SIZE; /* a count query answered as a success */
        if (r == NVML_SUCCESS) {
            *procs = buf;
            *n = count < cap ? count : cap;
            return r;
        }
        free(buf);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            return r;
        cap = count + NVML_LIST_SLACK;
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

/* The driver's process samples on device i newer than the last read ones.
 * false when it keeps none for the device (process utilization unknown). */
static bool nvml_proc_samples(struct nvml_sampler *s, size_t i,
                              nvmlProcessUtilizationSample_t **samples, unsigned int *n)
{
    const struct gpu_nvml_api *api = &s->api;
    struct nvml_tracked *t = &s->devs[i];
    unsigned int cap = 0;
    *samples = NULL;
    *n = 0;
    if (s->inv->devices[i].is_mig || !api->get_proc_util)
        return false;
    for (int attempt = 0; attempt < NVML_LIST_ATTEMPTS; attempt++) {
        unsigned int count = cap;
        nvmlProcessUtilizationSample_t *buf = cap ? xcalloc(cap, sizeof(*buf)) : NULL;
        nvmlReturn_t r = api->get_proc_util(t->handle, buf, &count, t->last_seen);
        /* Drivers answer the count query (no buffer) with a success. */
        if (r == NVML_SUCCESS && count > cap)
            r = NVML_ERROR_INSUFFICIENT_SIZE;
        if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND) {
            /* NOT_FOUND: no sample since the last one, every process idle. */
            *samples = buf;
            *n = r == NVML_SUCCESS ? count : 0;
            for (unsigned int k = 0; k < *n; k++)
                if (buf[k].timeStamp > t->last_seen)
                    t->last_seen = buf[k].timeStamp;
            return true;
        }
        free(buf);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
            if (!(t->warned & NVML_Q_PROCESS_SAMPLES))
                log_info("NVML usage: process utilization on %s unknown: %s",
                         s->inv->devices[i].uuid, gpu_nvml_strerror(api, r));
            t->warned |= NVML_Q_PROCESS_SAMPLES;
            return false;
        }
        cap = count + NVML_LIST_SLACK;
    }
    return false;
}

/* pid's SM percent in the newest of the samples; 0 when it has none. */
static int nvml_sm_percent(const nvmlProcessUtilizationSample_t *samples, unsigned int n,
                           unsigned int pid)
{
    const nvmlProcessUtilizationSample_t *newest = NULL;
    for (unsigned int k = 0; k < n; k++)
        if (samples[k].pid == pid && (!newest || samples[k].timeStamp >= newest->timeStamp))
            newest = &samples[k];
    if (!newest)
        return 0;
    return newest->smUtil > 100 ? 100 : (int)newest->smUtil;
}

static int nvml_read_procs(struct nvml_sampler *s, size_t i, gpu_card_usage *c, gpu_usage *out)
{
    const gpu_device *d = &s->inv->devices[i];
    struct nvml_proc *procs = NULL;
    unsigned int n = 0;
    if (d->mig_enabled)
        return 0;
    nvmlReturn_t r = nvml_list_procs(&s->api, s->devs[i].handle, &procs, &n);
    if (r != NVML_SUCCESS)
        return nvml_refused(s, i, NVML_Q_PROCESSES, "the process list", r, c);
    nvmlProcessUtilizationSample_t *samples = NULL;
    unsigned int nsamples = 0;
    bool sampled = n > 0 && nvml_proc_samples(s, i, &samples, &nsamples);
    for (unsigned int k = 0; k < n; k++) {
        gpu_proc_usage *p = gpu_usage_add_proc(out);
        snprintf(p->uuid, sizeof(p->uuid), "%s", d->uuid);
        p->pid = (int)procs[k].pid;
        p->memory_mib =
            procs[k].bytes == NVML_VALUE_NOT_AVAILABLE_ULL ? 0 : procs[k].bytes / NVML_MIB;
        p->utilization = sampled ? nvml_sm_percent(samples, nsamples, procs[k].pid) : -1;
    }
    free(samples);
    free(procs);
    return 0;
}

static void nvml_read_device(struct nvml_sampler *s, size_t i, gpu_usage *out)
{
    gpu_card_usage *c = &out->cards[i];
    nvmlMemory_t mem = {0};
    if (!s->devs[i].handle) {
        gpu_card_usage_absent(c, "not listed by NVML");
        return;
    }
    nvmlReturn_t r = s->api.get_memory(s->devs[i].handle, &mem);
    if (r != NVML_SUCCESS) {
        gpu_card_usage_absent(c, "%s", gpu_nvml_strerror(&s->api, r));
        return;
    }
    c->memory_used_mib = mem.used / NVML_MIB;
    if (nvml_read_utilization(s, i, c) < 0)
        return;
    size_t procs_before = out->nprocs;
    if (nvml_read_procs(s, i, c, out) < 0)
        out->nprocs = procs_before;
}

/* ---- read: XID events --------------------------------------------------- */

static const char *nvml_uuid_of(const struct nvml_sampler *s, nvmlDevice_t h)
{
    for (size_t i = 0; h && i < s->inv->n; i++)
        if (s->devs[i].handle == h)
            return s->inv->devices[i].uuid;
    return NULL;
}

static void nvml_drain_xids(struct nvml_sampler *s, gpu_usage *out)
{
    for (int k = 0; s->events && k < NVML_XID_DRAIN_MAX; k++) {
        nvmlEventData_t e;
        memset(&e, 0, sizeof(e));
        nvmlReturn_t r = s->api.event_set_wait(s->events, &e, 0);
        if (r == NVML_ERROR_TIMEOUT) {
            s->events_failing = false;
            return;
        }
        if (r != NVML_SUCCESS) {
            if (!s->events_failing)
                log_warn("NVML usage: reading XID events failed: %s",
                         gpu_nvml_strerror(&s->api, r));
            s->events_failing = true;
            return;
        }
        if (!(e.eventType & (unsigned long long)nvmlEventTypeXidCriticalError))
            continue;
        const char *uuid = nvml_uuid_of(s, e.device);
        if (uuid)
            gpu_usage_add_xid(out, uuid, e.eventData);
        else
            log_warn("NVML usage: XID %llu on a device gpubox does not know", e.eventData);
    }
}

static int nvml_sampler_read(void *state, gpu_usage *out, gb_err *err)
{
    struct nvml_sampler *s = state;
    (void)err;
    gpu_usage_start(out, s->inv);
    for (size_t i = 0; i < s->inv->n; i++)
        nvml_read_device(s, i, out);
    nvml_drain_xids(s, out);
    return 0;
}

const struct gpu_sampler_backend gpu_sampler_nvml = {
    .open = nvml_sampler_open,
    .read = nvml_sampler_read,
    .close = nvml_sampler_close,
};
