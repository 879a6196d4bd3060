/*
 * gpu_nvml.c - the inventory from NVML, loaded at run time with dlopen so
 * gpuboxd starts (and can simulate GPUs) on hosts without the driver.
 *
 * The NVML types, constants and entry points are declared in
 * gpu_nvml_abi.h, shared with the usage sampler (gpu_usage_nvml.c), which
 * loads the library through gpu_nvml_api_open too.
 *
 * A card in MIG mode is listed with mig_enabled and followed by its MIG
 * instances (is_mig, parent_uuid, the card's index): those are what gets
 * scheduled. A device whose queries fail is listed unhealthy as long as its
 * UUID can be read; without a UUID nothing could refer to it, so it is
 * logged and left out.
 */
#include "gpu/gpu_source.h"
#include "gpu/gpu_nvml_abi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

/* The first of the names the library exports, or NULL. */
static void *nvml_sym(void *lib, const char *name, const char *fallback)
{
    void *f = dlsym(lib, name);
    if (!f && fallback)
        f = dlsym(lib, fallback);
    return f;
}

const char *gpu_nvml_strerror(const struct gpu_nvml_api *api, nvmlReturn_t r)
{
    static _Thread_local char buf[32];
    const char *s = api->error_string ? api->error_string(r) : NULL;
    if (s)
        return s;
    snprintf(buf, sizeof(buf), "NVML error %d", r);
    return buf;
}

int gpu_nvml_api_open(struct gpu_nvml_api *api, const char *library, gb_err *err)
{
    memset(api, 0, sizeof(*api));
    if (!library || !*library)
        library = GPU_NVML_DEFAULT_LIBRARY;
    api->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        /* dlerror() repeats the path ("PATH: cannot open ..."); say it once. */
        const char *why = dlerror();
        size_t len = strlen(library);
        if (why && strncmp(why, library, len) == 0 && strncmp(why + len, ": ", 2) == 0)
            why += len + 2;
        return err_set(err, ERR_INTERNAL,
                       "cannot load %s: %s; is the NVIDIA driver installed? Use --gpu-source "
                       "simulated to run without GPUs",
                       library, why ? why : "unknown error");
    }
    const struct {
        void **slot;
        const char *name, *fallback;
        bool required;
    } syms[] = {
        {(void **)&api->init, "nvmlInit_v2", "nvmlInit", true},
        {(void **)&api->shutdown, "nvmlShutdown", NULL, true},
        {(void **)&api->get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", true},
        {(void **)&api->get_handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex",
         true},
        {(void **)&api->get_uuid, "nvmlDeviceGetUUID", NULL, true},
        {(void **)&api->get_name, "nvmlDeviceGetName", NULL, true},
        {(void **)&api->get_memory, "nvmlDeviceGetMemoryInfo", NULL, true},
        {(void **)&api->error_string, "nvmlErrorString", NULL, false},
        {(void **)&api->driver_version, "nvmlSystemGetDriverVersion", NULL, false},
        {(void **)&api->get_mig_mode, "nvmlDeviceGetMigMode", NULL, false},
        {(void **)&api->get_max_mig, "nvmlDeviceGetMaxMigDeviceCount", NULL, false},
        {(void **)&api->get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex", NULL, false},
        {(void **)&api->get_utilization, "nvmlDeviceGetUtilizationRates", NULL, false},
        {(void **)&api->get_procs_v2, "nvmlDeviceGetComputeRunningProcesses_v2", NULL, false},
        {(void **)&api->get_procs_v1, "nvmlDeviceGetComputeRunningProcesses", NULL, false},
        {(void **)&api->get_pci_info, "nvmlDeviceGetPciInfo_v3", NULL, false},
        {(void **)&api->get_proc_util, "nvmlDeviceGetProcessUtilization", NULL, false},
        {(void **)&api->event_set_create, "nvmlEventSetCreate", NULL, false},
        {(void **)&api->register_events, "nvmlDeviceRegisterEvents", NULL, false},
        {(void **)&api->event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait", false},
        {(void **)&api->event_set_free, "nvmlEventSetFree", NULL, false},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = nvml_sym(api->lib, syms[i].name, syms[i].fallback);
        if (!*syms[i].slot && syms[i].required) {
            dlclose(api->lib);
            api->lib = NULL;
            return err_set(err, ERR_INTERNAL,
                           "%s is not a usable NVML library: it lacks %s; is the NVIDIA driver "
                           "installed correctly?",
                           library, syms[i].name);
        }
    }
    return 0;
}

void gpu_nvml_api_close(struct gpu_nvml_api *api)
{
    if (api->lib)
        dlclose(api->lib);
    api->lib = NULL;
}

/* Fill *d from a device handle. -1 when not even the UUID can be read. */
static int nvml_read_device(const struct gpu_nvml_api *api, nvmlDevice_t h, gpu_device *d)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    nvmlMemory_t mem = {0};
    nvmlReturn_t r = api->get_uuid(h, uuid, sizeof(uuid));
    if (r != NVML_SUCCESS || !uuid[0]) {
        log_warn("NVML: GPU %d left out: cannot read its UUID: %s", d->index,
                 gpu_nvml_strerror(api, r));
        return -1;
    }
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    d->healthy = true;
    r = api->get_name(h, name, sizeof(name));
    if (r == NVML_SUCCESS) {
        snprintf(d->model, sizeof(d->model), "%s", name);
    } else {
        log_warn("NVML: GPU %s is unhealthy: cannot read its name: %s", uuid,
                 gpu_nvml_strerror(api, r));
        d->healthy = false;
    }
    r = api->get_memory(h, &mem);
    if (r == NVML_SUCCESS) {
        d->memory_mib = mem.total / (1024 * 1024);
    } else {
        log_warn("NVML: GPU %s is unhealthy: cannot read its memory: %s", uuid,
                 gpu_nvml_strerror(api, r));
        d->healthy = false;
    }
    /* The PCI bus id says which NUMA node the card sits on (docs/cpus.md). */
    nvmlPciInfo_t pci = {0};
    if (api->get_pci_info && api->get_pci_info(h, &pci) == NVML_SUCCESS)
        snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%.31s", pci.busId);
    return 0;
}

/* If the card is in MIG mode, mark it and list its MIG instances. */
static void nvml_add_mig_instances(const struct gpu_nvml_api *api, nvmlDevice_t card,
                                   gpu_device *parent, gpu_inventory *inv)
{
    unsigned int current = 0, pending = 0, max = 0;
    if (!api->get_mig_mode || !api->get_max_mig || !api->get_mig_handle)
        return;
    /* Cards without MIG answer "Not Supported": that simply means no MIG. */
    if (api->get_mig_mode(card, &current, &pending) != NVML_SUCCESS ||
        current != NVML_DEVICE_MIG_ENABLE)
        return;
    parent->mig_enabled = true;
    nvmlReturn_t r = api->get_max_mig(card, &max);
    if (r != NVML_SUCCESS) {
        log_warn("NVML: GPU %s is in MIG mode but its MIG devices cannot be counted: %s",
                 parent->uuid, gpu_nvml_strerror(api, r));
        return;
    }
    for (unsigned int m = 0; m < max; m++) {
        nvmlDevice_t h = NULL;
        r = api->get_mig_handle(card, m, &h);
        if (r == NVML_ERROR_NOT_FOUND)
            continue; /* MIG slots are sparse: no instance created there */
        gpu_device d = {.index = parent->index, .is_mig = true, .mig_index = (int)m};
        snprintf(d.parent_uuid, sizeof(d.parent_uuid), "%s", parent->uuid);
        if (r != NVML_SUCCESS) {
            log_warn("NVML: MIG device %u of GPU %s left out: %s", m, parent->uuid,
                     gpu_nvml_strerror(api, r));
            continue;
        }
        if (nvml_read_device(api, h, &d) == 0)
            gpu_inventory_add(inv, &d);
    }
}

/* Everything between nvmlInit and nvmlShutdown. */
static int nvml_list(const struct gpu_nvml_api *api, gpu_inventory *inv, gb_err *err)
{
    unsigned int count = 0;
    nvmlReturn_t r = api->get_count(&count);
    if (r != NVML_SUCCESS)
        return err_set(err, ERR_INTERNAL, "NVML cannot count the GPUs (nvmlDeviceGetCount): %s",
                       gpu_nvml_strerror(api, r));
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t h = NULL;
        gpu_device d = {.index = (int)i};
        r = api->get_handle(i, &h);
        if (r != NVML_SUCCESS) {
            log_warn("NVML: GPU %u left out: nvmlDeviceGetHandleByIndex: %s", i,
                     gpu_nvml_strerror(api, r));
            continue;
        }
        if (nvml_read_device(api, h, &d) < 0)
            continue;
        size_t at = inv->n;
        gpu_inventory_add(inv, &d);
        nvml_add_mig_instances(api, h, &d, inv);
        inv->devices[at].mig_enabled = d.mig_enabled;
    }
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
    if (api->driver_version && api->driver_version(version, sizeof(version)) == NVML_SUCCESS) {
        /* Versions are "535.104.05"; the field holds 63 characters, plenty. */
        size_t len = strnlen(version, sizeof(inv->driver_version) - 1);
        memcpy(inv->driver_version, version, len);
        inv->driver_version[len] = '\0';
    }
    return 0;
}

int gpu_nvml_load(const char *library, gpu_inventory *out, gb_err *err)
{
    struct gpu_nvml_api api;
    memset(out, 0, sizeof(*out));
    if (!library || !*library)
        library = GPU_NVML_DEFAULT_LIBRARY;
    if (gpu_nvml_api_open(&api, library, err) < 0)
        return -1;
    nvmlReturn_t r = api.init();
    if (r != NVML_SUCCESS) {
        err_set(err, ERR_INTERNAL,
                "NVML (%s) failed to initialize: %s; is the NVIDIA driver loaded? Use "
                "--gpu-source simulated to run without GPUs",
                library, gpu_nvml_strerror(&api, r));
        gpu_nvml_api_close(&api);
        return -1;
    }
    int rc = nvml_list(&api, out, err);
    api.shutdown();
    gpu_nvml_api_close(&api);
    if (rc < 0) {
        gpu_inventory_free(out);
        return -1;
    }
    gpu_inventory_sort(out);
    strcpy(out->source, "nvml");
    return 0;
}

static int gpu_nvml_source_load(const char *arg, gpu_inventory *out, gb_err *err)
{
    return gpu_nvml_load(arg, out, err);
}

const struct gpu_source gpu_source_nvml = {.name = "nvml", .load = gpu_nvml_source_load};
