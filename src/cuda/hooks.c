/*
 * hooks.c - libgpubox-cuda.so: the CUDA driver API calls that allocate,
 * free and report device memory, counted against the container's share;
 * NVML's memory info, answered with the share; kernel launches, slowed to
 * the card's compute share (docs/gpus.md, "The CUDA limiter").
 *
 * How a call reaches these functions:
 *   - a program linked with libcuda calls the exported names directly
 *     (the library is preloaded, so its definitions come first);
 *   - a program that dlopens the driver and looks names up with dlsym
 *     gets them from the dlsym below, which answers with the hook instead
 *     of the driver's function and remembers the driver's;
 *   - a program that takes entry points from cuGetProcAddress (libcudart
 *     since CUDA 11.3, which itself finds cuGetProcAddress with dlsym)
 *     gets them from the hooks of cuGetProcAddress and
 *     cuGetProcAddress_v2, which map the base name, version and stream
 *     flags they ask for to the versioned name ("cuMemAlloc" at 3020 or
 *     later is cuMemAlloc_v2; the per-thread stream asks the _ptsz
 *     variants) and answer with that name's hook.
 * Each hook calls the driver's function it stands for (real_fn[], found
 * as above or, when first needed, by dlsym on the loaded libcuda.so.1;
 * NVML's on the loaded libnvidia-ml.so.1).
 *
 * The limits come from the file gpuboxd mounts read-only at
 * /run/gpubox/limits/limits (limits.h), checked at every allocation; the
 * container's use from the budget at /run/gpubox/budget/budget
 * (budget.h); the host PIDs of the container's processes, to find this
 * one in NVML's per-process list, at /run/gpubox/limits/pids (pids.h).
 * GPUBOX_CUDA_DIR replaces /run/gpubox only where
 * /run/gpubox/limits does not exist (tests and benchmarks; in a
 * container gpuboxd mounts it, so the variable cannot undo the limits).
 *
 * An allocation is charged before the driver is called (so two processes
 * cannot both take the last bytes) and refunded when the driver fails;
 * one that would pass the share returns CUDA_ERROR_OUT_OF_MEMORY without
 * calling the driver. A card the limits file does not name is not
 * counted at all.
 */
#include "glibc_compat.h" /* first: binds glibc versions (see there) */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "context.h"
#include "cuda_api.h"
#include "limits.h"
#include "pids.h"
#include "rate.h"
#include "track.h"

#define GPUCUDA_EXPORT __attribute__((visibility("default")))
#define GPUCUDA_DEFAULT_DIR "/run/gpubox"
#define GPUCUDA_MAX_ORDINALS 64

/* ---- the hooks and the driver functions they stand for ---- */

GPUCUDA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags);
GPUCUDA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus);
GPUCUDA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
GPUCUDA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                           size_t Height, unsigned int ElementSizeBytes);
GPUCUDA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
GPUCUDA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
GPUCUDA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
GPUCUDA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags);
GPUCUDA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
GPUCUDA_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle,
                                         const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);
GPUCUDA_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);
GPUCUDA_EXPORT CUresult cuArrayDestroy(CUarray hArray);
GPUCUDA_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                               const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                               unsigned int numMipmapLevels);
GPUCUDA_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);
GPUCUDA_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
GPUCUDA_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
GPUCUDA_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                       CUstream stream, void **params, void **extra);
GPUCUDA_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                            CUstream stream, void **params, void **extra);
GPUCUDA_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                         void **extra);
GPUCUDA_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                              void **params, void **extra);
GPUCUDA_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy,
                                                  unsigned gz, unsigned bx, unsigned by,
                                                  unsigned bz, unsigned shmem, CUstream stream,
                                                  void **params);
GPUCUDA_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                       unsigned gz, unsigned bx, unsigned by,
                                                       unsigned bz, unsigned shmem, CUstream stream,
                                                       void **params);

/* NVML's memory answers (nvidia-smi and NVML users in the container): the
 * few NVML types they need, as NVML documents them. */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct { /* nvmlDeviceGetComputeRunningProcesses (v1) */
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct { /* ..._v2 */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_UUID_BUFFER 96

GPUCUDA_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
GPUCUDA_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                       nvmlMemory_v2_t *memory);
GPUCUDA_EXPORT void *dlsym(void *handle, const char *symbol);

enum hook_id {
    H_GET_PROC_ADDRESS,
    H_GET_PROC_ADDRESS_V2,
    H_MEM_ALLOC,
    H_MEM_ALLOC_PITCH,
    H_MEM_ALLOC_MANAGED,
    H_MEM_ALLOC_ASYNC,
    H_MEM_ALLOC_ASYNC_PTSZ,
    H_MEM_ALLOC_FROM_POOL_ASYNC,
    H_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ,
    H_MEM_FREE,
    H_MEM_FREE_ASYNC,
    H_MEM_FREE_ASYNC_PTSZ,
    H_MEM_CREATE,
    H_MEM_RELEASE,
    H_ARRAY_CREATE,
    H_ARRAY_3D_CREATE,
    H_ARRAY_DESTROY,
    H_MIPMAPPED_ARRAY_CREATE,
    H_MIPMAPPED_ARRAY_DESTROY,
    H_MEM_GET_INFO,
    H_DEVICE_TOTAL_MEM,
    H_LAUNCH_KERNEL,
    H_LAUNCH_KERNEL_PTSZ,
    H_LAUNCH_KERNEL_EX,
    H_LAUNCH_KERNEL_EX_PTSZ,
    H_LAUNCH_COOPERATIVE,
    H_LAUNCH_COOPERATIVE_PTSZ,
    H_NVML_FIRST, /* NVML's from here on: found in libnvidia-ml, not libcuda */
    H_NVML_MEMORY_INFO = H_NVML_FIRST,
    H_NVML_MEMORY_INFO_V2,
    H_COUNT
};

static const struct {
    const char *name;
    void *hook;
} hooks[H_COUNT] = {
    [H_GET_PROC_ADDRESS] = {"cuGetProcAddress", (void *)cuGetProcAddress},
    [H_GET_PROC_ADDRESS_V2] = {"cuGetProcAddress_v2", (void *)cuGetProcAddress_v2},
    [H_MEM_ALLOC] = {"cuMemAlloc_v2", (void *)cuMemAlloc_v2},
    [H_MEM_ALLOC_PITCH] = {"cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2},
    [H_MEM_ALLOC_MANAGED] = {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    [H_MEM_ALLOC_ASYNC] = {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    [H_MEM_ALLOC_ASYNC_PTSZ] = {"cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz},
    [H_MEM_ALLOC_FROM_POOL_ASYNC] = {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    [H_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ] = {"cuMemAllocFromPoolAsync_ptsz",
                                          (void *)cuMemAllocFromPoolAsync_ptsz},
    [H_MEM_FREE] = {"cuMemFree_v2", (void *)cuMemFree_v2},
    [H_MEM_FREE_ASYNC] = {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    [H_MEM_FREE_ASYNC_PTSZ] = {"cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz},
    [H_MEM_CREATE] = {"cuMemCreate", (void *)cuMemCreate},
    [H_MEM_RELEASE] = {"cuMemRelease", (void *)cuMemRelease},
    [H_ARRAY_CREATE] = {"cuArrayCreate_v2", (void *)cuArrayCreate_v2},
    [H_ARRAY_3D_CREATE] = {"cuArray3DCreate_v2", (void *)cuArray3DCreate_v2},
    [H_ARRAY_DESTROY] = {"cuArrayDestroy", (void *)cuArrayDestroy},
    [H_MIPMAPPED_ARRAY_CREATE] = {"cuMipmappedArrayCreate", (void *)cuMipmappedArrayCreate},
    [H_MIPMAPPED_ARRAY_DESTROY] = {"cuMipmappedArrayDestroy", (void *)cuMipmappedArrayDestroy},
    [H_MEM_GET_INFO] = {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2},
    [H_DEVICE_TOTAL_MEM] = {"cuDeviceTotalMem_v2", (void *)cuDeviceTotalMem_v2},
    [H_LAUNCH_KERNEL] = {"cuLaunchKernel", (void *)cuLaunchKernel},
    [H_LAUNCH_KERNEL_PTSZ] = {"cuLaunchKernel_ptsz", (void *)cuLaunchKernel_ptsz},
    [H_LAUNCH_KERNEL_EX] = {"cuLaunchKernelEx", (void *)cuLaunchKernelEx},
    [H_LAUNCH_KERNEL_EX_PTSZ] = {"cuLaunchKernelEx_ptsz", (void *)cuLaunchKernelEx_ptsz},
    [H_LAUNCH_COOPERATIVE] = {"cuLaunchCooperativeKernel", (void *)cuLaunchCooperativeKernel},
    [H_LAUNCH_COOPERATIVE_PTSZ] = {"cuLaunchCooperativeKernel_ptsz",
                                   (void *)cuLaunchCooperativeKernel_ptsz},
    [H_NVML_MEMORY_INFO] = {"nvmlDeviceGetMemoryInfo", (void *)nvmlDeviceGetMemoryInfo},
    [H_NVML_MEMORY_INFO_V2] = {"nvmlDeviceGetMemoryInfo_v2", (void *)nvmlDeviceGetMemoryInfo_v2},
};

/* Base names cuGetProcAddress is asked for whose current entry point is a
 * _v2, and the CUDA version that introduced it (NVIDIA's cuda.h). */
static const struct {
    const char *base;
    int since;
} v2_names[] = {
    {"cuMemAlloc", 3020},      {"cuMemAllocPitch", 3020},   {"cuMemFree", 3020},
    {"cuMemGetInfo", 3020},    {"cuDeviceTotalMem", 3020},  {"cuArrayCreate", 3020},
    {"cuArray3DCreate", 3020}, {"cuGetProcAddress", 12000},
};

/* Base names with a per-thread default stream variant (_ptsz). */
static const char *const ptsz_names[] = {"cuMemAllocAsync",  "cuMemAllocFromPoolAsync",
                                         "cuMemFreeAsync",   "cuLaunchKernel",
                                         "cuLaunchKernelEx", "cuLaunchCooperativeKernel"};

static void *real_fn[H_COUNT];
static void *driver_handle;
static void *nvml_handle; /* libnvidia-ml.so.1, as the program or this library opened it */
static void *(*real_dlsym_fn)(void *, const char *);

static int hook_find(const char *name)
{
    for (int i = 0; i < H_COUNT; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return i;
    return -1;
}

/* glibc's dlsym, found without calling dlsym (this library replaces it):
 * dlvsym by version, 2.34's first, then the older architectures' base. */
static void *(*real_dlsym(void))(void *, const char *)
{
    void *(*fn)(void *, const char *) = __atomic_load_n(&real_dlsym_fn, __ATOMIC_ACQUIRE);
    if (fn)
        return fn;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]) && !fn; i++)
        fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    __atomic_store_n(&real_dlsym_fn, fn, __ATOMIC_RELEASE);
    return fn;
}

/* A driver function by name: from the handle the program looked hooks up
 * in, else the loaded libcuda.so.1, else the next object after this one. */
static void *driver_sym(const char *name)
{
    void *(*rdlsym)(void *, const char *) = real_dlsym();
    if (!rdlsym)
        return NULL;
    void *h = __atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE);
    if (!h) {
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            void *expected = NULL;
            if (!__atomic_compare_exchange_n(&driver_handle, &expected, h, false, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                dlclose(h), h = expected;
        }
    }
    return rdlsym(h ? h : RTLD_NEXT, name);
}

/* An NVML function by name: from the handle the program looked NVML up
 * in, else the loaded libnvidia-ml.so.1 (opened here when open is true),
 * else the next object after this one. */
static void *nvml_sym(const char *name, bool open)
{
    void *(*rdlsym)(void *, const char *) = real_dlsym();
    if (!rdlsym)
        return NULL;
    void *h = __atomic_load_n(&nvml_handle, __ATOMIC_ACQUIRE);
    if (!h) {
        h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | (open ? 0 : RTLD_NOLOAD));
        if (h) {
            void *expected = NULL;
            if (!__atomic_compare_exchange_n(&nvml_handle, &expected, h, false, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                dlclose(h), h = expected;
        }
    }
    return rdlsym(h ? h : RTLD_NEXT, name);
}

static void real_set(int id, void *fn)
{
    if (!fn || fn == hooks[id].hook)
        return;
    void *expected = NULL;
    __atomic_compare_exchange_n(&real_fn[id], &expected, fn, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

static void *real_get(int id)
{
    void *fn = __atomic_load_n(&real_fn[id], __ATOMIC_ACQUIRE);
    if (fn)
        return fn;
    real_set(id, id >= H_NVML_FIRST ? nvml_sym(hooks[id].name, false) : driver_sym(hooks[id].name));
    return __atomic_load_n(&real_fn[id], __ATOMIC_ACQUIRE);
}

#define REAL(id, type) ((type)real_get(id))

/* Driver functions the hooks use but do not replace. */
static CUresult drv_ctx_get_device(CUdevice *dev)
{
    static CUresult (*fn)(CUdevice *);
    if (!fn)
        fn = (CUresult(*)(CUdevice *))driver_sym("cuCtxGetDevice");
    return fn ? fn(dev) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult drv_device_get_uuid(CUuuid *uuid, CUdevice dev)
{
    static CUresult (*fn)(CUuuid *, CUdevice);
    if (!fn)
        fn = (CUresult(*)(CUuuid *, CUdevice))driver_sym("cuDeviceGetUuid");
    return fn ? fn(uuid, dev) : CUDA_ERROR_NOT_INITIALIZED;
}

/* ---- limits and budget ---- */

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool paths_ready;
static char limits_path[PATH_MAX], budget_dir[PATH_MAX], budget_path[PATH_MAX];
static char pids_path[PATH_MAX];
static gpucuda_limits_file limits_file;
static gpucuda_budget budget;
static bool budget_ready;
static bool any_cores; /* some card of the limits has a compute share */

/* What this process knows of CUDA ordinal i. */
static struct {
    bool uuid_known;
    unsigned char uuid[16];
    bool share_known;
    unsigned generation; /* of the limits share_known was decided on */
    bool limited;
    int bidx;
    uint64_t limit;
    unsigned cores; /* the compute share, percent; 0: none */
} ordinals[GPUCUDA_MAX_ORDINALS];

static void paths_init_locked(void)
{
    if (paths_ready)
        return;
    const char *dir = GPUCUDA_DEFAULT_DIR;
    const char *env = secure_getenv("GPUBOX_CUDA_DIR");
    if (env && *env && access(GPUCUDA_DEFAULT_DIR "/limits", F_OK) != 0)
        dir = env;
    snprintf(limits_path, sizeof(limits_path), "%s/limits/limits", dir);
    snprintf(budget_dir, sizeof(budget_dir), "%s/budget", dir);
    snprintf(budget_path, sizeof(budget_path), "%s/budget/budget", dir);
    snprintf(pids_path, sizeof(pids_path), "%s/limits/pids", dir);
    limits_file.path = limits_path;
    paths_ready = true;
}

/* Re-reads the limits if they changed; whether any card is limited. The
 * file read last stays open, so this is one fstat. Without a file, the
 * path is looked for at most once a second (a process gpuboxd gave no
 * limits pays no path lookup at each allocation). */
static bool limits_any(void)
{
    static struct timespec next_lookup;
    pthread_mutex_lock(&state_lock);
    paths_init_locked();
    struct timespec now = {0};
    if (limits_file.fd == 0)
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    if (limits_file.fd != 0 || now.tv_sec > next_lookup.tv_sec ||
        (now.tv_sec == next_lookup.tv_sec && now.tv_nsec >= next_lookup.tv_nsec)) {
        gpucuda_limits_refresh(&limits_file);
        if (limits_file.fd == 0)
            next_lookup = (struct timespec){now.tv_sec + 1, now.tv_nsec};
    }
    bool any = limits_file.limits.n > 0;
    bool cores = false;
    for (int i = 0; i < limits_file.limits.n; i++)
        cores = cores || limits_file.limits.dev[i].cores > 0;
    __atomic_store_n(&any_cores, cores, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&state_lock);
    return any;
}

/* The card's limit in the limits, its budget opened and its index there
 * (-1: no budget); NULL when the card has no share. state_lock held. */
static const gpucuda_limit *uuid_share_locked(const unsigned char uuid[16], int *bidx)
{
    const gpucuda_limit *l = gpucuda_limits_find(&limits_file.limits, uuid);
    *bidx = -1;
    if (l && !budget_ready) {
        int dirfd = open(budget_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool shared = dirfd >= 0;
        if (dirfd >= 0)
            close(dirfd);
        budget_ready = gpucuda_budget_open(&budget, shared ? budget_path : NULL) == 0;
    }
    if (l && budget_ready)
        *bidx = gpucuda_budget_device(&budget, uuid);
    return l;
}

/* The share of CUDA device dev: false when it has none. */
static bool device_share(CUdevice dev, int *bidx, uint64_t *limit)
{
    if (dev < 0 || dev >= GPUCUDA_MAX_ORDINALS)
        return false;
    pthread_mutex_lock(&state_lock);
    bool limited = false;
    typeof(ordinals[0]) *o = &ordinals[dev];
    if (!o->uuid_known) {
        CUuuid u;
        if (drv_device_get_uuid(&u, dev) == CUDA_SUCCESS) {
            memcpy(o->uuid, u.bytes, 16);
            o->uuid_known = true;
        }
    }
    if (o->uuid_known && (!o->share_known || o->generation != limits_file.generation)) {
        const gpucuda_limit *l = uuid_share_locked(o->uuid, &o->bidx);
        o->limited = l != NULL;
        o->limit = l ? l->memory_bytes : 0;
        o->cores = l ? l->cores : 0;
        o->share_known = true;
        o->generation = limits_file.generation;
    }
    if (o->uuid_known && o->limited) {
        limited = true;
        *bidx = o->bidx; /* -1: no budget; every allocation is refused */
        *limit = o->limit;
    }
    pthread_mutex_unlock(&state_lock);
    return limited;
}

/* One allocation's charge, from before the driver call to its settling. */
typedef struct {
    bool counted;
    int bidx;
    uint64_t bytes;
    uint64_t limit;
} charge;

static void context_refresh(CUdevice dev, int bidx);

/* Charges bytes on CUDA device dev, the limits already refreshed. */
static CUresult charge_known_device(CUdevice dev, uint64_t bytes, charge *c)
{
    *c = (charge){0};
    if (!device_share(dev, &c->bidx, &c->limit))
        return CUDA_SUCCESS;
    context_refresh(dev, c->bidx);
    if (c->bidx < 0 || gpucuda_budget_charge(&budget, c->bidx, bytes, c->limit) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->counted = true;
    c->bytes = bytes;
    return CUDA_SUCCESS;
}

static CUresult charge_current(uint64_t bytes, charge *c)
{
    *c = (charge){0};
    CUdevice dev;
    if (!limits_any() || drv_ctx_get_device(&dev) != CUDA_SUCCESS)
        return CUDA_SUCCESS; /* no context: the driver refuses the call itself */
    return charge_known_device(dev, bytes, c);
}

static CUresult charge_device(CUdevice dev, uint64_t bytes, charge *c)
{
    *c = (charge){0};
    return limits_any() ? charge_known_device(dev, bytes, c) : CUDA_SUCCESS;
}

/* After the driver call: refund a failed allocation, track a good one. */
static void charge_settle(const charge *c, CUresult rc, uint64_t key, int kind)
{
    if (!c->counted)
        return;
    if (rc != CUDA_SUCCESS)
        gpucuda_budget_refund(&budget, c->bidx, c->bytes);
    else
        gpucuda_track_add(key, kind, c->bidx, c->bytes);
}

/* A free: untracked first (so an address the driver hands out again at
 * once is not confused with this one), refunded when the driver agrees. */
#define RELEASE(key, kind, call)                                                                   \
    do {                                                                                           \
        int dev_;                                                                                  \
        uint64_t bytes_;                                                                           \
        bool tracked_ = gpucuda_track_remove((key), (kind), &dev_, &bytes_);                       \
        CUresult rc_ = (call);                                                                     \
        if (tracked_) {                                                                            \
            if (rc_ == CUDA_SUCCESS)                                                               \
                gpucuda_budget_refund(&budget, dev_, bytes_);                                      \
            else                                                                                   \
                gpucuda_track_add((key), (kind), dev_, bytes_);                                    \
        }                                                                                          \
        return rc_;                                                                                \
    } while (0)

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t at_least_1(size_t v)
{
    return v ? v : 1;
}

/* Bytes per channel element of a CUarray_format; formats of other sizes
 * (packed, video, block-compressed) are counted at 4 bytes a channel, an
 * over-estimate for all of them. */
static uint64_t format_bytes(int format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default:
        return 4;
    }
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels)
{
    uint64_t n = mul_sat(mul_sat(at_least_1(w), at_least_1(h)), at_least_1(d));
    return mul_sat(n, mul_sat(format_bytes(format), at_least_1(channels)));
}

#define CUDA_ARRAY3D_LAYERED 0x01
#define CUDA_ARRAY3D_CUBEMAP 0x04

/* A mipmapped array: every level, each half the one before (at least 1);
 * layers and cube faces are not halved. */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    size_t w = d->Width, h = d->Height, depth = d->Depth;
    bool keep_depth = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    uint64_t sum = 0;
    for (unsigned i = 0; i < at_least_1(levels); i++) {
        uint64_t level = array_bytes(w, h, depth, d->Format, d->NumChannels);
        sum = sum + level < sum ? UINT64_MAX : sum + level;
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        if (!keep_depth)
            depth = depth > 1 ? depth / 2 : depth;
    }
    return sum;
}

/* ---- the hooks ---- */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    alloc_fn fn = REAL(H_MEM_ALLOC, alloc_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c;
    CUresult rc = charge_current(bytesize, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(dptr, bytesize);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *dptr : 0, GPUCUDA_TRACK_PTR);
    return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    typedef CUresult (*fn_t)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    fn_t fn = REAL(H_MEM_ALLOC_PITCH, fn_t);
    free_fn release = REAL(H_MEM_FREE, free_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    /* The pitch is known only after the call: charge the rows' bytes
     * first, then what the padding adds. */
    charge c;
    CUresult rc = charge_current(mul_sat(WidthInBytes, Height), &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc == CUDA_SUCCESS && c.counted && *pPitch > WidthInBytes) {
        uint64_t extra = mul_sat(*pPitch - WidthInBytes, Height);
        if (gpucuda_budget_charge(&budget, c.bidx, extra, c.limit) == 0) {
            c.bytes += extra;
        } else if (release) {
            release(*dptr);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *dptr : 0, GPUCUDA_TRACK_PTR);
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    typedef CUresult (*fn_t)(CUdeviceptr *, size_t, unsigned int);
    fn_t fn = REAL(H_MEM_ALLOC_MANAGED, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c;
    CUresult rc = charge_current(bytesize, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(dptr, bytesize, flags);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *dptr : 0, GPUCUDA_TRACK_PTR);
    return rc;
}

static CUresult alloc_async(int id, CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    alloc_async_fn fn = REAL(id, alloc_async_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c;
    CUresult rc = charge_current(bytesize, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(dptr, bytesize, stream);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *dptr : 0, GPUCUDA_TRACK_PTR);
    return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(H_MEM_ALLOC_ASYNC, dptr, bytesize, hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(H_MEM_ALLOC_ASYNC_PTSZ, dptr, bytesize, hStream);
}

static CUresult alloc_pool(int id, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           CUstream stream)
{
    alloc_pool_fn fn = REAL(id, alloc_pool_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c;
    CUresult rc = charge_current(bytesize, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(dptr, bytesize, pool, stream);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *dptr : 0, GPUCUDA_TRACK_PTR);
    return rc;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    return alloc_pool(H_MEM_ALLOC_FROM_POOL_ASYNC, dptr, bytesize, pool, hStream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    return alloc_pool(H_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ, dptr, bytesize, pool, hStream);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    free_fn fn = REAL(H_MEM_FREE, free_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE(dptr, GPUCUDA_TRACK_PTR, fn(dptr));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    free_async_fn fn = REAL(H_MEM_FREE_ASYNC, free_async_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE(dptr, GPUCUDA_TRACK_PTR, fn(dptr, hStream));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    free_async_fn fn = REAL(H_MEM_FREE_ASYNC_PTSZ, free_async_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE(dptr, GPUCUDA_TRACK_PTR, fn(dptr, hStream));
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    typedef CUresult (*fn_t)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                             unsigned long long);
    fn_t fn = REAL(H_MEM_CREATE, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c = {0};
    /* Only memory placed on a card counts (not host or NUMA locations). */
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        CUresult rc = charge_device(prop->location.id, size, &c);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = fn(handle, size, prop, flags);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? *handle : 0, GPUCUDA_TRACK_HANDLE);
    return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    typedef CUresult (*fn_t)(CUmemGenericAllocationHandle);
    fn_t fn = REAL(H_MEM_RELEASE, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE(handle, GPUCUDA_TRACK_HANDLE, fn(handle));
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    typedef CUresult (*fn_t)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    fn_t fn = REAL(H_ARRAY_CREATE, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c = {0};
    if (d) {
        CUresult rc =
            charge_current(array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), &c);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = fn(pHandle, d);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                  GPUCUDA_TRACK_ARRAY);
    return rc;
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    typedef CUresult (*fn_t)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    fn_t fn = REAL(H_ARRAY_3D_CREATE, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c = {0};
    if (d) {
        CUresult rc = charge_current(
            array_bytes(d->Width, d->Height,
                        (d->Flags & CUDA_ARRAY3D_CUBEMAP) ? 6 * at_least_1(d->Depth) : d->Depth,
                        d->Format, d->NumChannels),
            &c);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = fn(pHandle, d);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                  GPUCUDA_TRACK_ARRAY);
    return rc;
}

CUresult cuArrayDestroy(CUarray hArray)
{
    typedef CUresult (*fn_t)(CUarray);
    fn_t fn = REAL(H_ARRAY_DESTROY, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE((uint64_t)(uintptr_t)hArray, GPUCUDA_TRACK_ARRAY, fn(hArray));
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned int numMipmapLevels)
{
    typedef CUresult (*fn_t)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
    fn_t fn = REAL(H_MIPMAPPED_ARRAY_CREATE, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    charge c = {0};
    if (d) {
        CUresult rc = charge_current(mipmap_bytes(d, numMipmapLevels), &c);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = fn(pHandle, d, numMipmapLevels);
    charge_settle(&c, rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                  GPUCUDA_TRACK_MIPMAP);
    return rc;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    typedef CUresult (*fn_t)(CUmipmappedArray);
    fn_t fn = REAL(H_MIPMAPPED_ARRAY_DESTROY, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    RELEASE((uint64_t)(uintptr_t)hMipmappedArray, GPUCUDA_TRACK_MIPMAP, fn(hMipmappedArray));
}

/* The share is the card's size; what the container holds is what is used. */
CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    typedef CUresult (*fn_t)(size_t *, size_t *);
    fn_t fn = REAL(H_MEM_GET_INFO, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(free, total);
    CUdevice dev;
    int bidx;
    uint64_t limit;
    if (rc != CUDA_SUCCESS || !free || !total || !limits_any() ||
        drv_ctx_get_device(&dev) != CUDA_SUCCESS || !device_share(dev, &bidx, &limit))
        return rc;
    context_refresh(dev, bidx);
    uint64_t used = bidx >= 0 ? gpucuda_budget_used(&budget, bidx) : limit;
    uint64_t left = used < limit ? limit - used : 0;
    if (limit < *total)
        *total = (size_t)limit;
    if (left < *free)
        *free = (size_t)left; /* the card may have less left than the share */
    return rc;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    typedef CUresult (*fn_t)(size_t *, CUdevice);
    fn_t fn = REAL(H_DEVICE_TOTAL_MEM, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(bytes, dev);
    int bidx;
    uint64_t limit;
    if (rc == CUDA_SUCCESS && bytes && limits_any() && device_share(dev, &bidx, &limit) &&
        limit < *bytes)
        *bytes = (size_t)limit;
    return rc;
}

/* ---- NVML's memory answers ---- */

/* The share of the card behind an NVML handle: false when it has none. */
static bool nvml_share(nvmlDevice_t device, int *bidx, uint64_t *limit)
{
    typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);
    uuid_fn get_uuid = (uuid_fn)nvml_sym("nvmlDeviceGetUUID", false);
    char text[NVML_UUID_BUFFER];
    unsigned char uuid[16];
    if (!limits_any() || !get_uuid || get_uuid(device, text, sizeof(text)) != NVML_SUCCESS ||
        gpucuda_uuid_parse(text, strnlen(text, sizeof(text)), uuid) != 0)
        return false;
    pthread_mutex_lock(&state_lock);
    const gpucuda_limit *l = uuid_share_locked(uuid, bidx);
    if (l)
        *limit = l->memory_bytes;
    pthread_mutex_unlock(&state_lock);
    return l != NULL;
}

/* The share as the card's total, the container's use as used; free is
 * what is left of the share after `reserved` (the driver's, _v2 only),
 * never more than the card has free. */
static void nvml_apply(nvmlDevice_t device, unsigned long long *total, unsigned long long *free,
                       unsigned long long *used, unsigned long long reserved)
{
    int bidx;
    uint64_t limit;
    if (!nvml_share(device, &bidx, &limit))
        return;
    uint64_t mine = bidx >= 0 ? gpucuda_budget_used(&budget, bidx) : limit;
    if (limit < *total)
        *total = limit;
    uint64_t taken = mine + reserved;
    uint64_t left = taken < *total ? *total - taken : 0;
    *used = mine;
    if (left < *free)
        *free = left;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    typedef nvmlReturn_t (*fn_t)(nvmlDevice_t, nvmlMemory_t *);
    fn_t fn = REAL(H_NVML_MEMORY_INFO, fn_t);
    if (!fn)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = fn(device, memory);
    if (rc == NVML_SUCCESS && memory)
        nvml_apply(device, &memory->total, &memory->free, &memory->used, 0);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    typedef nvmlReturn_t (*fn_t)(nvmlDevice_t, nvmlMemory_v2_t *);
    fn_t fn = REAL(H_NVML_MEMORY_INFO_V2, fn_t);
    if (!fn)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = fn(device, memory);
    if (rc == NVML_SUCCESS && memory)
        nvml_apply(device, &memory->total, &memory->free, &memory->used, memory->reserved);
    return rc;
}

/* ---- compute shares: kernel launches through the rate limiter ---- */

static pthread_mutex_t rate_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool ready;
    gpucuda_rate r;
    bool nvml_known;
    nvmlDevice_t nvml; /* NULL: NVML cannot say how busy the card is */
} rates[GPUCUDA_MAX_ORDINALS];
static int nvml_state; /* 0: not started, 1: started, -1: cannot be */

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* NVML's handle of the card with this UUID, NVML started on first use
 * (rate_lock held). NULL when NVML is missing or does not know the card. */
static nvmlDevice_t nvml_device(const unsigned char uuid[16])
{
    typedef nvmlReturn_t (*init_fn)(void);
    typedef nvmlReturn_t (*count_fn)(unsigned int *);
    typedef nvmlReturn_t (*handle_fn)(unsigned int, nvmlDevice_t *);
    typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);
    if (nvml_state == 0) {
        init_fn init = (init_fn)nvml_sym("nvmlInit_v2", true);
        if (!init)
            init = (init_fn)nvml_sym("nvmlInit", true);
        nvml_state = init && init() == NVML_SUCCESS ? 1 : -1;
    }
    count_fn count = (count_fn)nvml_sym("nvmlDeviceGetCount_v2", false);
    handle_fn by_index = (handle_fn)nvml_sym("nvmlDeviceGetHandleByIndex_v2", false);
    uuid_fn get_uuid = (uuid_fn)nvml_sym("nvmlDeviceGetUUID", false);
    unsigned int n = 0;
    if (nvml_state < 0 || !count || !by_index || !get_uuid || count(&n) != NVML_SUCCESS)
        return NULL;
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t d;
        char text[NVML_UUID_BUFFER];
        unsigned char u[16];
        if (by_index(i, &d) == NVML_SUCCESS && get_uuid(d, text, sizeof(text)) == NVML_SUCCESS &&
            gpucuda_uuid_parse(text, strnlen(text, sizeof(text)), u) == 0 &&
            memcmp(u, uuid, 16) == 0)
            return d;
    }
    return NULL;
}

/* ---- context memory: NVML's per-process memory, counted (context.h) ---- */

static pthread_mutex_t context_lock = PTHREAD_MUTEX_INITIALIZER;
/* The host PIDs of the container's processes (pids.h), read again when
 * NVML is asked (context_lock held). */
static gpucuda_pids_file pids_file;
static struct {
    gpucuda_context c;
    uint64_t due_ns; /* c.next_ns, read without the lock */
    bool nvml_known;
    nvmlDevice_t nvml;
} contexts[GPUCUDA_MAX_ORDINALS];

/* What NVML lists for this process on the card; false when it is not
 * listed (or NVML cannot say). The _v2 list first, as gpuboxd's monitor.
 * NVML's PIDs are the host's: in a gpuboxd container they are matched
 * through the pids file, elsewhere directly (pids.h). context_lock held. */
static bool nvml_process_memory(nvmlDevice_t d, uint64_t *used)
{
    typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);
    procs_fn v2 = (procs_fn)nvml_sym("nvmlDeviceGetComputeRunningProcesses_v2", false);
    procs_fn v1 = (procs_fn)nvml_sym("nvmlDeviceGetComputeRunningProcesses", false);
    bool is_v2 = v2 != NULL;
    procs_fn fn = v2 ? v2 : v1;
    size_t size = is_v2 ? sizeof(nvmlProcessInfo_v2_t) : sizeof(nvmlProcessInfo_v1_t);
    unsigned char small[64 * sizeof(nvmlProcessInfo_v2_t)];
    unsigned char *buf = small;
    unsigned int n = 64;
    nvmlReturn_t rc = fn ? fn(d, &n, buf) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (rc == NVML_ERROR_FUNCTION_NOT_FOUND && is_v2 && v1) { /* an old driver */
        fn = v1, is_v2 = false, size = sizeof(nvmlProcessInfo_v1_t), n = 64;
        rc = fn(d, &n, buf);
    }
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE && n > 0 && n < 65536) {
        n += 16; /* room for processes that start meanwhile */
        buf = malloc((size_t)n * size);
        rc = buf ? fn(d, &n, buf) : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    bool found = false;
    unsigned int self = (unsigned int)getpid();
    for (unsigned int i = 0; rc == NVML_SUCCESS && i < n && !found; i++) {
        unsigned int pid;
        unsigned long long bytes;
        if (is_v2) {
            nvmlProcessInfo_v2_t p;
            memcpy(&p, buf + (size_t)i * size, sizeof(p));
            pid = p.pid, bytes = p.usedGpuMemory;
        } else {
            nvmlProcessInfo_v1_t p;
            memcpy(&p, buf + (size_t)i * size, sizeof(p));
            pid = p.pid, bytes = p.usedGpuMemory;
        }
        if (gpucuda_pids_is_self(&pids_file, pid, self) && bytes != NVML_VALUE_NOT_AVAILABLE) {
            *used = bytes;
            found = true;
        }
    }
    if (buf != small)
        free(buf);
    return found;
}

/* On a limited card dev (budget index bidx): charge or refund the
 * difference between what NVML lists for this process and what it
 * allocated, when due (its first call on the card, then at most once a
 * second). */
static void context_refresh(CUdevice dev, int bidx)
{
    if (bidx < 0 || dev < 0 || dev >= GPUCUDA_MAX_ORDINALS)
        return;
    uint64_t now = clock_ns(CLOCK_MONOTONIC_COARSE);
    typeof(contexts[0]) *x = &contexts[dev];
    uint64_t next = __atomic_load_n(&x->due_ns, __ATOMIC_RELAXED);
    if (next != 0 && now < next)
        return; /* not due: a clock read, no lock, on nearly every call */
    pthread_mutex_lock(&context_lock);
    if (!gpucuda_context_due(&x->c, now)) {
        pthread_mutex_unlock(&context_lock);
        return;
    }
    if (!x->nvml_known) {
        pthread_mutex_lock(&rate_lock); /* nvml_device starts NVML under it */
        x->nvml = nvml_device(ordinals[dev].uuid);
        pthread_mutex_unlock(&rate_lock);
        x->nvml_known = true;
    }
    uint64_t used = 0;
    if (x->nvml) {
        pids_file.path = pids_path; /* set before: the card has a share */
        gpucuda_pids_refresh(&pids_file);
    }
    bool listed = x->nvml && nvml_process_memory(x->nvml, &used);
    int64_t delta =
        gpucuda_context_update(&x->c, listed, used, gpucuda_budget_own(&budget, bidx), now);
    if (delta > 0 && gpucuda_budget_charge(&budget, bidx, (uint64_t)delta, UINT64_MAX) != 0)
        x->c.charged -= (uint64_t)delta; /* no slot: nothing counted */
    else if (delta < 0)
        gpucuda_budget_refund(&budget, bidx, (uint64_t)-delta);
    __atomic_store_n(&x->due_ns, x->c.next_ns, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&context_lock);
}

/* Before every kernel launch: on a card with a compute share, wait for the
 * rate limiter's token; every GPUCUDA_RATE_PERIOD_NS the card's
 * utilization (NVML) adjusts the rate. Where NVML cannot say, launches
 * are not delayed. The limits are looked at no more than every 50 ms
 * here, so a launch on a card without a compute share costs a clock read. */
static void launch_gate(void)
{
    static uint64_t next_check;
    uint64_t coarse = clock_ns(CLOCK_MONOTONIC_COARSE);
    if (coarse >= __atomic_load_n(&next_check, __ATOMIC_RELAXED)) {
        __atomic_store_n(&next_check, coarse + 50000000ULL, __ATOMIC_RELAXED);
        limits_any();
    }
    if (!__atomic_load_n(&any_cores, __ATOMIC_ACQUIRE))
        return;
    CUdevice dev;
    int bidx;
    uint64_t limit;
    if (drv_ctx_get_device(&dev) != CUDA_SUCCESS || !device_share(dev, &bidx, &limit))
        return;
    pthread_mutex_lock(&state_lock);
    unsigned cores = ordinals[dev].cores;
    unsigned char uuid[16];
    memcpy(uuid, ordinals[dev].uuid, 16);
    pthread_mutex_unlock(&state_lock);

    uint64_t now = clock_ns(CLOCK_MONOTONIC), delay = 0;
    pthread_mutex_lock(&rate_lock);
    typeof(rates[0]) *g = &rates[dev];
    if (!g->ready) {
        gpucuda_rate_init(&g->r, cores);
        g->ready = true;
    } else if (g->r.target != cores) {
        gpucuda_rate_set_target(&g->r, cores);
    }
    if (cores > 0) {
        if (gpucuda_rate_sample_due(&g->r, now)) {
            typedef nvmlReturn_t (*util_fn)(nvmlDevice_t, nvmlUtilization_t *);
            if (!g->nvml_known) {
                g->nvml = nvml_device(uuid);
                g->nvml_known = true;
                if (!g->nvml)
                    fprintf(stderr,
                            "libgpubox-cuda: NVML cannot say how busy CUDA device %d is: "
                            "its compute share is not enforced\n",
                            dev);
            }
            util_fn util = (util_fn)nvml_sym("nvmlDeviceGetUtilizationRates", false);
            nvmlUtilization_t u;
            if (g->nvml && util && util(g->nvml, &u) == NVML_SUCCESS)
                gpucuda_rate_sample(&g->r, now, u.gpu);
            else
                gpucuda_rate_sample(&g->r, now, cores); /* unknown: leave the rate as it is */
        }
        delay = gpucuda_rate_acquire(&g->r, now);
    }
    pthread_mutex_unlock(&rate_lock);
    if (delay > 0) {
        struct timespec ts = {(time_t)(delay / 1000000000ULL), (long)(delay % 1000000000ULL)};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*launch_coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);

static CUresult launch(int id, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream stream, void **params,
                       void **extra)
{
    launch_fn fn = REAL(id, launch_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    launch_gate();
    return fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream stream, void **params,
                        void **extra)
{
    return launch(H_LAUNCH_KERNEL, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                             void **params, void **extra)
{
    return launch(H_LAUNCH_KERNEL_PTSZ, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

static CUresult launch_ex(int id, const CUlaunchConfig *config, CUfunction f, void **params,
                          void **extra)
{
    launch_ex_fn fn = REAL(id, launch_ex_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    launch_gate();
    return fn(config, f, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    return launch_ex(H_LAUNCH_KERNEL_EX, config, f, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra)
{
    return launch_ex(H_LAUNCH_KERNEL_EX_PTSZ, config, f, params, extra);
}

static CUresult launch_coop(int id, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                            void **params)
{
    launch_coop_fn fn = REAL(id, launch_coop_fn);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    launch_gate();
    return fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                                   void **params)
{
    return launch_coop(H_LAUNCH_COOPERATIVE, f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream stream, void **params)
{
    return launch_coop(H_LAUNCH_COOPERATIVE_PTSZ, f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

/* ---- the two ways to the hooks ---- */

/* After the driver answered cuGetProcAddress: the hook for the entry point
 * it gave, if there is one. */
static void procaddr_wrap(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (!symbol || !pfn || !*pfn || symbol[0] != 'c' || symbol[1] != 'u')
        return;
    char name[96];
    size_t len = strlen(symbol);
    if (len + sizeof("_v2_ptsz") > sizeof(name))
        return;
    memcpy(name, symbol, len + 1);
    for (size_t i = 0; i < sizeof(v2_names) / sizeof(v2_names[0]); i++)
        if (strcmp(symbol, v2_names[i].base) == 0 && version >= v2_names[i].since)
            strcat(name, "_v2");
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        for (size_t i = 0; i < sizeof(ptsz_names) / sizeof(ptsz_names[0]); i++)
            if (strcmp(symbol, ptsz_names[i]) == 0)
                strcat(name, "_ptsz");
    int id = hook_find(name);
    if (id < 0)
        return;
    real_set(id, *pfn);
    *pfn = hooks[id].hook;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    typedef CUresult (*fn_t)(const char *, void **, int, cuuint64_t);
    fn_t fn = REAL(H_GET_PROC_ADDRESS, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS)
        procaddr_wrap(symbol, pfn, cudaVersion, flags);
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    typedef CUresult (*fn_t)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
    fn_t fn = REAL(H_GET_PROC_ADDRESS_V2, fn_t);
    if (!fn)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS)
        procaddr_wrap(symbol, pfn, cudaVersion, flags);
    return rc;
}

/* Every dlsym of the process comes here. A hooked name found in an object
 * other than this library is remembered as the driver's and answered with
 * the hook. A lookup with RTLD_NEXT is answered relative to this library
 * (glibc's answer depends on the caller, which is now this library). */
void *dlsym(void *handle, const char *symbol)
{
    void *(*rdlsym)(void *, const char *) = real_dlsym();
    if (!rdlsym)
        return NULL;
    void *fn = rdlsym(handle, symbol);
    if (!fn || !((symbol[0] == 'c' && symbol[1] == 'u') || (symbol[0] == 'n' && symbol[1] == 'v')))
        return fn;
    int id = hook_find(symbol);
    if (id < 0 || fn == hooks[id].hook)
        return fn;
    if (handle != RTLD_DEFAULT && handle != RTLD_NEXT) {
        void *expected = NULL;
        __atomic_compare_exchange_n(id >= H_NVML_FIRST ? &nvml_handle : &driver_handle, &expected,
                                    handle, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    real_set(id, fn);
    return hooks[id].hook;
}

/* ---- life cycle ---- */

static void after_fork_child(void)
{
    pthread_mutex_init(&state_lock, NULL);
    pthread_mutex_init(&rate_lock, NULL);
    pthread_mutex_init(&context_lock, NULL);
    /* the child has a slot of its own: its context is counted anew */
    for (int i = 0; i < GPUCUDA_MAX_ORDINALS; i++) {
        contexts[i].c = (gpucuda_context){0};
        contexts[i].due_ns = 0;
    }
    gpucuda_track_reset_after_fork();
}

__attribute__((constructor)) static void gpucuda_init(void)
{
    real_dlsym();
    pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((destructor)) static void gpucuda_fini(void)
{
    /* Memory the process still holds goes back with it (the driver frees
     * it with the context). The region stays mapped for threads still
     * running. */
    if (budget_ready)
        gpucuda_budget_leave(&budget);
}
