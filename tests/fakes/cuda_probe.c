/*
 * cuda_probe.c - a CUDA program for the tests and the benchmark of
 * libgpubox-cuda (src/cuda/): it reaches the driver the ways real programs
 * do and allocates each kind of device memory, printing one line a step.
 * Built to <build>/fakes/cuda_probe; it runs against whichever
 * libcuda.so.1 the loader finds (the fake one in the tests).
 *
 * Usage: cuda_probe [--via procaddr|procaddr_v1|dlsym] [--device N] STEP...
 *   --via procaddr     dlsym(driver, "cuGetProcAddress_v2"), then every
 *                      entry point through it, as libcudart 12 does
 *                      (default)
 *   --via procaddr_v1  the same through "cuGetProcAddress" (CUDA 11.3-11.8)
 *   --via dlsym        every entry point by its versioned name with dlsym
 *   --device N         the card to make current (default 0)
 * Steps, run in order:
 *   alloc KIND MIB   one allocation      -> "alloc ok" | "alloc oom" | "alloc error N"
 *   fill KIND MIB    MIB at a time until refused -> "fill TOTAL_MIB"
 *   free             frees everything allocated so far -> "free ok" | "free error N"
 *   info             cuMemGetInfo_v2     -> "info free=MIB total=MIB"
 *   total            cuDeviceTotalMem_v2 -> "total MIB"
 *   wait             prints "waiting", then reads one line of stdin
 *   bench KIND N     N alloc+free pairs of 1 MiB -> "bench NS_PER_PAIR" (the
 *                    process's CPU time, so that other work on a shared
 *                    machine does not count)
 *   launch LKIND MS  kernel launches for MS milliseconds -> "launch COUNT"
 *   bench_launch LKIND N  N launches -> "bench_launch NS_PER_LAUNCH" (CPU time)
 *   nvml             NVML's memory info of the card (the probe's --device as
 *                    NVML index), looked up with dlsym as NVML users do ->
 *                    "nvml total=MIB used=MIB free=MIB" and the same for
 *                    nvmlDeviceGetMemoryInfo_v2 as "nvml_v2 ..."
 *   init             (first) the wall time from loading the driver to the
 *                    end of the first 1 MiB allocation, free and launch:
 *                    "init NS" (what a program waits for its first calls)
 * KIND: mem, pitch, managed, async, async_ptsz, pool, pool_ptsz, create,
 * array, array3d, mipmap. LKIND: kernel, kernel_ptsz, ex, ex_ptsz, coop,
 * coop_ptsz (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel).
 * Exit status 0, or 1 on a usage or set-up error.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_api.h"

typedef CUresult (*proc_v2_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);
typedef CUresult (*proc_v1_fn)(const char *, void **, int, cuuint64_t);

static void *driver;
static const char *via = "procaddr";
static proc_v2_fn get_proc_v2;
static proc_v1_fn get_proc_v1;

/* An entry point: base name for cuGetProcAddress, versioned for dlsym. */
static void *entry(const char *base, const char *versioned, int per_thread)
{
    void *fn = NULL;
    cuuint64_t flags =
        per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    if (strcmp(via, "dlsym") == 0)
        fn = dlsym(driver, versioned);
    else if (get_proc_v2) {
        CUdriverProcAddressQueryResult status;
        if (get_proc_v2(base, &fn, 12040, flags, &status) != CUDA_SUCCESS)
            fn = NULL;
    } else if (get_proc_v1(base, &fn, 11080, flags) != CUDA_SUCCESS) {
        fn = NULL;
    }
    if (!fn) {
        fprintf(stderr, "cuda_probe: no entry point %s\n", versioned);
        exit(1);
    }
    return fn;
}

#define ENTRY(var, base, versioned, pt) var = (typeof(var))entry(base, versioned, pt)

static CUresult (*p_init)(unsigned);
static CUresult (*p_device_get)(CUdevice *, int);
static CUresult (*p_ctx_create)(CUcontext *, unsigned, CUdevice);
static CUresult (*p_mem_get_info)(size_t *, size_t *);
static CUresult (*p_total_mem)(size_t *, CUdevice);
static CUresult (*p_alloc)(CUdeviceptr *, size_t);
static CUresult (*p_alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
static CUresult (*p_alloc_managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*p_alloc_async)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_alloc_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult (*p_alloc_pool_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult (*p_free)(CUdeviceptr);
static CUresult (*p_free_async)(CUdeviceptr, CUstream);
static CUresult (*p_free_async_ptsz)(CUdeviceptr, CUstream);
static CUresult (*p_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                            unsigned long long);
static CUresult (*p_release)(CUmemGenericAllocationHandle);
static CUresult (*p_array)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
static CUresult (*p_array3d)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
static CUresult (*p_array_destroy)(CUarray);
static CUresult (*p_mipmap)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
static CUresult (*p_mipmap_destroy)(CUmipmappedArray);
static CUresult (*p_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void **, void **);
static CUresult (*p_launch_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, CUstream, void **, void **);
static CUresult (*p_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*p_launch_ex_ptsz)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*p_launch_coop)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, CUstream, void **);
static CUresult (*p_launch_coop_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, CUstream, void **);

static void load_driver(void)
{
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
        fprintf(stderr, "cuda_probe: %s\n", dlerror());
        exit(1);
    }
    if (strcmp(via, "procaddr") == 0)
        get_proc_v2 = (proc_v2_fn)dlsym(driver, "cuGetProcAddress_v2");
    else if (strcmp(via, "procaddr_v1") == 0)
        get_proc_v1 = (proc_v1_fn)dlsym(driver, "cuGetProcAddress");
    else if (strcmp(via, "dlsym") != 0) {
        fprintf(stderr, "cuda_probe: --via procaddr, procaddr_v1 or dlsym\n");
        exit(1);
    }
    if (strcmp(via, "dlsym") != 0 && !get_proc_v1 && !get_proc_v2) {
        fprintf(stderr, "cuda_probe: the driver has no cuGetProcAddress\n");
        exit(1);
    }
    ENTRY(p_init, "cuInit", "cuInit", 0);
    ENTRY(p_device_get, "cuDeviceGet", "cuDeviceGet", 0);
    ENTRY(p_ctx_create, "cuCtxCreate", "cuCtxCreate_v2", 0);
    ENTRY(p_mem_get_info, "cuMemGetInfo", "cuMemGetInfo_v2", 0);
    ENTRY(p_total_mem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2", 0);
    ENTRY(p_alloc, "cuMemAlloc", "cuMemAlloc_v2", 0);
    ENTRY(p_alloc_pitch, "cuMemAllocPitch", "cuMemAllocPitch_v2", 0);
    ENTRY(p_alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged", 0);
    ENTRY(p_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync", 0);
    ENTRY(p_alloc_async_ptsz, "cuMemAllocAsync", "cuMemAllocAsync_ptsz", 1);
    ENTRY(p_alloc_pool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 0);
    ENTRY(p_alloc_pool_ptsz, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 1);
    ENTRY(p_free, "cuMemFree", "cuMemFree_v2", 0);
    ENTRY(p_free_async, "cuMemFreeAsync", "cuMemFreeAsync", 0);
    ENTRY(p_free_async_ptsz, "cuMemFreeAsync", "cuMemFreeAsync_ptsz", 1);
    ENTRY(p_create, "cuMemCreate", "cuMemCreate", 0);
    ENTRY(p_release, "cuMemRelease", "cuMemRelease", 0);
    ENTRY(p_array, "cuArrayCreate", "cuArrayCreate_v2", 0);
    ENTRY(p_array3d, "cuArray3DCreate", "cuArray3DCreate_v2", 0);
    ENTRY(p_array_destroy, "cuArrayDestroy", "cuArrayDestroy", 0);
    ENTRY(p_mipmap, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 0);
    ENTRY(p_mipmap_destroy, "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 0);
    ENTRY(p_launch, "cuLaunchKernel", "cuLaunchKernel", 0);
    ENTRY(p_launch_ptsz, "cuLaunchKernel", "cuLaunchKernel_ptsz", 1);
    ENTRY(p_launch_ex, "cuLaunchKernelEx", "cuLaunchKernelEx", 0);
    ENTRY(p_launch_ex_ptsz, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", 1);
    ENTRY(p_launch_coop, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 0);
    ENTRY(p_launch_coop_ptsz, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", 1);
}

static const char *const lkinds[] = {"kernel", "kernel_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz"};

static int lkind_of(const char *s)
{
    for (size_t i = 0; i < sizeof(lkinds) / sizeof(lkinds[0]); i++)
        if (strcmp(s, lkinds[i]) == 0)
            return (int)i;
    fprintf(stderr, "cuda_probe: unknown launch kind %s\n", s);
    exit(1);
}

static CUresult launch_one(int lkind)
{
    CUfunction f = (CUfunction)(uintptr_t)0x1000;
    switch (lkind) {
    case 0:
        return p_launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    case 1:
        return p_launch_ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    case 2:
        return p_launch_ex((const CUlaunchConfig *)(uintptr_t)0x2000, f, NULL, NULL);
    case 3:
        return p_launch_ex_ptsz((const CUlaunchConfig *)(uintptr_t)0x2000, f, NULL, NULL);
    case 4:
        return p_launch_coop(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL);
    default:
        return p_launch_coop_ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL);
    }
}

/* NVML's view of the card, as nvidia-smi reads it. */
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvml_memory_v2;

static int nvml_step(int index)
{
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml) {
        printf("nvml missing\n");
        return 0;
    }
    int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
    int (*by_index)(unsigned, void **) =
        (int (*)(unsigned, void **))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
    int (*mem)(void *, nvml_memory *) =
        (int (*)(void *, nvml_memory *))dlsym(nvml, "nvmlDeviceGetMemoryInfo");
    int (*mem2)(void *, nvml_memory_v2 *) =
        (int (*)(void *, nvml_memory_v2 *))dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2");
    void *dev = NULL;
    nvml_memory m = {0};
    nvml_memory_v2 m2 = {.version = (unsigned)sizeof(nvml_memory_v2) | 2u << 24};
    if (!init || !by_index || !mem || !mem2 || init() != 0 ||
        by_index((unsigned)index, &dev) != 0 || mem(dev, &m) != 0 || mem2(dev, &m2) != 0) {
        printf("nvml error\n");
        return 0;
    }
    printf("nvml total=%llu used=%llu free=%llu\n", m.total >> 20, m.used >> 20, m.free >> 20);
    printf("nvml_v2 total=%llu used=%llu free=%llu\n", m2.total >> 20, m2.used >> 20,
           m2.free >> 20);
    return 0;
}

/* What was allocated, to free it by the matching call. */
typedef struct {
    int kind;
    uint64_t key;
} held;
static held *helds;
static size_t nheld, capheld;

enum {
    K_MEM,
    K_PITCH,
    K_MANAGED,
    K_ASYNC,
    K_ASYNC_PTSZ,
    K_POOL,
    K_POOL_PTSZ,
    K_CREATE,
    K_ARRAY,
    K_ARRAY3D,
    K_MIPMAP
};
static const char *const kinds[] = {"mem",        "pitch",   "managed",   "async",
                                    "async_ptsz", "pool",    "pool_ptsz", "create",
                                    "array",      "array3d", "mipmap"};
static int device;

static int kind_of(const char *s)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(s, kinds[i]) == 0)
            return (int)i;
    fprintf(stderr, "cuda_probe: unknown kind %s\n", s);
    exit(1);
}

static CUresult alloc_one(int kind, uint64_t mib, uint64_t *key)
{
    size_t bytes = (size_t)(mib << 20);
    CUdeviceptr p = 0;
    CUresult rc;
    switch (kind) {
    case K_MEM:
        rc = p_alloc(&p, bytes);
        break;
    case K_PITCH: {
        size_t pitch; /* rows of 1 MiB - 100 bytes: the pitch pads them to 1 MiB */
        rc = p_alloc_pitch(&p, &pitch, (1 << 20) - 100, (size_t)mib, 4);
        break;
    }
    case K_MANAGED:
        rc = p_alloc_managed(&p, bytes, 1);
        break;
    case K_ASYNC:
        rc = p_alloc_async(&p, bytes, NULL);
        break;
    case K_ASYNC_PTSZ:
        rc = p_alloc_async_ptsz(&p, bytes, NULL);
        break;
    case K_POOL:
        rc = p_alloc_pool(&p, bytes, NULL, NULL);
        break;
    case K_POOL_PTSZ:
        rc = p_alloc_pool_ptsz(&p, bytes, NULL, NULL);
        break;
    case K_CREATE: {
        CUmemAllocationProp prop = {
            .type = 1, .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device}};
        CUmemGenericAllocationHandle h = 0;
        rc = p_create(&h, bytes, &prop, 0);
        p = h;
        break;
    }
    case K_ARRAY: { /* 1024 x 256 floats: 1 MiB a row of 256 */
        CUDA_ARRAY_DESCRIPTOR d = {
            .Width = 1024, .Height = 256 * mib, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
        CUarray a = NULL;
        rc = p_array(&a, &d);
        p = (uint64_t)(uintptr_t)a;
        break;
    }
    case K_ARRAY3D: {
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 1024,
                                     .Height = 256,
                                     .Depth = mib,
                                     .Format = CU_AD_FORMAT_FLOAT,
                                     .NumChannels = 1};
        CUarray a = NULL;
        rc = p_array3d(&a, &d);
        p = (uint64_t)(uintptr_t)a;
        break;
    }
    default: { /* mipmap: one level, as large as asked */
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 1024,
                                     .Height = 256,
                                     .Depth = mib,
                                     .Format = CU_AD_FORMAT_FLOAT,
                                     .NumChannels = 1};
        CUmipmappedArray a = NULL;
        rc = p_mipmap(&a, &d, 1);
        p = (uint64_t)(uintptr_t)a;
        break;
    }
    }
    *key = p;
    return rc;
}

static CUresult free_one(int kind, uint64_t key)
{
    switch (kind) {
    case K_ASYNC:
        return p_free_async(key, NULL);
    case K_ASYNC_PTSZ:
    case K_POOL_PTSZ:
        return p_free_async_ptsz(key, NULL);
    case K_POOL:
        return p_free_async(key, NULL);
    case K_CREATE:
        return p_release(key);
    case K_ARRAY:
    case K_ARRAY3D:
        return p_array_destroy((CUarray)(uintptr_t)key);
    case K_MIPMAP:
        return p_mipmap_destroy((CUmipmappedArray)(uintptr_t)key);
    default:
        return p_free(key);
    }
}

static void hold(int kind, uint64_t key)
{
    if (nheld == capheld) {
        capheld = capheld ? capheld * 2 : 64;
        helds = realloc(helds, capheld * sizeof(*helds));
        if (!helds)
            exit(1);
    }
    helds[nheld++] = (held){kind, key};
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--via") == 0)
            via = argv[i + 1];
        else if (strcmp(argv[i], "--device") == 0)
            device = atoi(argv[i + 1]);
        else
            break;
    }
    double t_start = wall_ns();
    load_driver();
    CUdevice dev;
    CUcontext ctx;
    if (p_init(0) != CUDA_SUCCESS || p_device_get(&dev, device) != CUDA_SUCCESS ||
        p_ctx_create(&ctx, 0, dev) != CUDA_SUCCESS) {
        fprintf(stderr, "cuda_probe: no card %d\n", device);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (; i < argc; i++) {
        const char *step = argv[i];
        if ((strcmp(step, "alloc") == 0 || strcmp(step, "fill") == 0 ||
             strcmp(step, "bench") == 0) &&
            i + 2 < argc) {
            int kind = kind_of(argv[i + 1]);
            uint64_t n = strtoull(argv[i + 2], NULL, 10);
            i += 2;
            uint64_t key;
            if (step[0] == 'a') {
                CUresult rc = alloc_one(kind, n, &key);
                if (rc == CUDA_SUCCESS) {
                    hold(kind, key);
                    printf("alloc ok\n");
                } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
                    printf("alloc oom\n");
                } else {
                    printf("alloc error %d\n", rc);
                }
            } else if (step[0] == 'f') {
                uint64_t total = 0;
                while (n > 0 && alloc_one(kind, n, &key) == CUDA_SUCCESS) {
                    hold(kind, key);
                    total += n;
                }
                printf("fill %llu\n", (unsigned long long)total);
            } else {
                double t0 = now_ns();
                for (uint64_t k = 0; k < n; k++) {
                    if (alloc_one(kind, 1, &key) != CUDA_SUCCESS ||
                        free_one(kind, key) != CUDA_SUCCESS) {
                        printf("bench error\n");
                        return 1;
                    }
                }
                printf("bench %.1f\n", (now_ns() - t0) / (double)(n ? n : 1));
            }
        } else if ((strcmp(step, "launch") == 0 || strcmp(step, "bench_launch") == 0) &&
                   i + 2 < argc) {
            int lkind = lkind_of(argv[i + 1]);
            uint64_t n = strtoull(argv[i + 2], NULL, 10);
            i += 2;
            if (step[0] == 'l') {
                double end = wall_ns() + (double)n * 1e6;
                unsigned long long count = 0;
                while (wall_ns() < end) {
                    if (launch_one(lkind) != CUDA_SUCCESS) {
                        printf("launch error\n");
                        return 1;
                    }
                    count++;
                }
                printf("launch %llu\n", count);
            } else {
                double t0 = now_ns();
                for (uint64_t k = 0; k < n; k++)
                    if (launch_one(lkind) != CUDA_SUCCESS) {
                        printf("bench_launch error\n");
                        return 1;
                    }
                printf("bench_launch %.1f\n", (now_ns() - t0) / (double)(n ? n : 1));
            }
        } else if (strcmp(step, "nvml") == 0) {
            nvml_step(device);
        } else if (strcmp(step, "init") == 0) {
            uint64_t key;
            if (alloc_one(K_MEM, 1, &key) != CUDA_SUCCESS || free_one(K_MEM, key) != CUDA_SUCCESS ||
                launch_one(0) != CUDA_SUCCESS) {
                printf("init error\n");
                return 1;
            }
            printf("init %.0f\n", wall_ns() - t_start);
        } else if (strcmp(step, "free") == 0) {
            CUresult rc = CUDA_SUCCESS;
            while (nheld > 0 && rc == CUDA_SUCCESS) {
                nheld--;
                rc = free_one(helds[nheld].kind, helds[nheld].key);
            }
            if (rc == CUDA_SUCCESS)
                printf("free ok\n");
            else
                printf("free error %d\n", rc);
        } else if (strcmp(step, "info") == 0) {
            size_t free_b = 0, total_b = 0;
            CUresult rc = p_mem_get_info(&free_b, &total_b);
            printf("info free=%zu total=%zu%s\n", free_b >> 20, total_b >> 20, rc ? " error" : "");
        } else if (strcmp(step, "total") == 0) {
            size_t total_b = 0;
            p_total_mem(&total_b, dev);
            printf("total %zu\n", total_b >> 20);
        } else if (strcmp(step, "wait") == 0) {
            printf("waiting\n");
            char line[64];
            if (!fgets(line, sizeof(line), stdin))
                (void)0;
        } else {
            fprintf(stderr, "cuda_probe: unknown step %s\n", step);
            return 1;
        }
    }
    return 0;
}
