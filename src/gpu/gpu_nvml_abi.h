/*
 * gpu_nvml_abi.h - the part of NVML's ABI gpubox uses, and loading it
 * (internal to src/gpu/: the inventory in gpu_nvml.c, the usage sampler in
 * gpu_usage_nvml.c).
 *
 * The types and constants are declared here from NVML's documented ABI
 * rather than taken from nvml.h, which is not installed on build hosts
 * without the CUDA toolkit. Only the fields gpubox reads are named, but
 * every struct has NVML's full layout, since NVML writes all of it.
 *
 * The library is opened with dlopen so gpuboxd starts (and can simulate
 * GPUs) on hosts without the driver. The entry points every NVML since
 * the first gpubox supports are required; the rest are optional (NULL when
 * the library lacks them) and their callers say what they do without.
 * Versioned names (_v2) are preferred, as NVML's own header maps the plain
 * names to them; the plain names remain for old drivers.
 */
#ifndef GPUBOX_GPU_GPU_NVML_ABI_H
#define GPUBOX_GPU_GPU_NVML_ABI_H

#include "util/err.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

/* nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it: only busId is read. */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32]; /* "00000000:3B:00.0" */
} nvmlPciInfo_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef struct nvmlMemory_st {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu, memory; /* percent over the last sample period */
} nvmlUtilization_t;

/* What nvmlDeviceGetComputeRunningProcesses (no suffix) fills. */
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE_ULL */
} nvmlProcessInfo_v1_t;

/* What nvmlDeviceGetComputeRunningProcesses_v2 fills. */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId; /* MIG only */
} nvmlProcessInfo_v2_t;

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU time of the sample, microseconds */
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlEventSetWait (no suffix) of old drivers fills only the first three
 * fields, so the same struct serves both names. */
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the XID for nvmlEventTypeXidCriticalError */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_DEVICE_MIG_ENABLE 1
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xffffffffffffffffULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

#define GPU_NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* The entry points gpubox uses; the optional ones may be NULL. */
struct gpu_nvml_api {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*get_count)(unsigned int *);
    nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*get_uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t *);
    /* optional: the inventory */
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*get_mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*get_max_mig)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*get_mig_handle)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    /* optional: usage sampling */
    nvmlReturn_t (*get_utilization)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*get_procs_v2)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);
    nvmlReturn_t (*get_procs_v1)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
    nvmlReturn_t (*get_pci_info)(nvmlDevice_t, nvmlPciInfo_t *); /* optional */
    nvmlReturn_t (*get_proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                                  unsigned long long);
    nvmlReturn_t (*event_set_create)(nvmlEventSet_t *);
    nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
    nvmlReturn_t (*event_set_free)(nvmlEventSet_t);
};

/* dlopen library (NULL or "": the default) and look up every entry point.
 * ERR_INTERNAL naming the library and what is wrong with it, with a hint
 * for the operator. Nothing is initialized: the caller calls api->init. */
int gpu_nvml_api_open(struct gpu_nvml_api *api, const char *library, gb_err *err);
void gpu_nvml_api_close(struct gpu_nvml_api *api);
/* NVML's text for r ("GPU is lost"), or "NVML error N". */
const char *gpu_nvml_strerror(const struct gpu_nvml_api *api, nvmlReturn_t r);

#endif
