/*
 * fake_cuda.c - test double for NVIDIA's CUDA driver (libcuda.so.1), built
 * by CMake as <build>/fakes/libcuda.so.1 beside the fake NVML. It is what
 * libgpubox-cuda (src/cuda/) interposes in the tests and the benchmark.
 *
 * Its cards are those of the file named by GPUBOX_FAKE_GPUS, the fake
 * NVML's format (tests/fakes/fake_nvml.c): "INDEX UUID MEMORY_MIB STATE
 * NAME" lines are cards (MIG lines "C.S ..." and the usage, process, xid
 * and driver_version lines are skipped); the file is read once, by cuInit.
 *
 * Memory is bookkeeping: each card has its size, allocations hand out
 * fake device addresses (never dereferenced) and fail with
 * CUDA_ERROR_OUT_OF_MEMORY past the card's size, counting this process
 * only. Contexts are one per card (cuCtxCreate_v2 and
 * cuDevicePrimaryCtxRetain give the same one); the current one is per
 * thread. cuGetProcAddress and cuGetProcAddress_v2 answer from a table of
 * base names, with the _v2 and _ptsz entry points chosen by version and
 * flags as the real driver does. Kernel launches (cuLaunchKernel,
 * cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz forms) run
 * nothing: they check for a current context and count.
 *
 * gpubox_fake_cuda_usage(uuid, &bytes) tells the fake NVML whether this
 * process holds a context on a card (made by cuCtxCreate_v2 or
 * cuDevicePrimaryCtxRetain) and what it holds there, so the fake NVML's
 * per-process list can show the process as the real driver would.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_api.h"

#define EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_CARDS 16

typedef struct {
    unsigned char uuid[16];
    uint64_t total;
    uint64_t used;
    uint64_t next_addr;
    bool has_ctx; /* this process made or retained a context on it */
} fake_card;

typedef struct {
    uint64_t key;
    uint64_t bytes;
    int card;
} fake_alloc;

struct CUctx_st {
    int card;
};

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fake_ready;
static int fake_ncards;
static fake_card fake_cards[FAKE_MAX_CARDS];
static struct CUctx_st fake_ctx[FAKE_MAX_CARDS];
static fake_alloc *fake_allocs;
static size_t fake_nallocs, fake_cap;
static __thread int fake_current = -1;

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static bool parse_uuid(const char *s, unsigned char out[16])
{
    if (strncmp(s, "GPU-", 4) != 0)
        return false;
    int n = 0;
    for (const char *p = s + 4; *p && n < 16; p++) {
        if (*p == '-')
            continue;
        int hi = hexval(p[0]), lo = p[1] ? hexval(p[1]) : -1;
        if (hi < 0 || lo < 0)
            return false;
        out[n++] = (unsigned char)(hi << 4 | lo);
        p++;
    }
    return n == 16;
}

static void fake_load(void)
{
    const char *path = getenv("GPUBOX_FAKE_GPUS");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f) && fake_ncards < FAKE_MAX_CARDS) {
        char index[32], uuid[128];
        unsigned long long mib;
        if (sscanf(line, "%31s %127s %llu", index, uuid, &mib) != 3 || strchr(index, '.'))
            continue;
        int i = atoi(index);
        if (index[0] < '0' || index[0] > '9' || i != fake_ncards)
            continue;
        fake_card *c = &fake_cards[fake_ncards];
        if (!parse_uuid(uuid, c->uuid))
            continue;
        c->total = mib << 20;
        c->next_addr = (uint64_t)(i + 1) << 40;
        fake_ctx[i].card = i;
        fake_ncards++;
    }
    fclose(f);
}

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&fake_lock);
    if (!fake_ready) {
        fake_load();
        fake_ready = true;
    }
    pthread_mutex_unlock(&fake_lock);
    return fake_ncards > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    *version = 12040;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!fake_ready)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = fake_ncards;
    return CUDA_SUCCESS;
}

static bool card_ok(int dev)
{
    return fake_ready && dev >= 0 && dev < fake_ncards;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!card_ok(ordinal))
        return fake_ready ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    if (!card_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, fake_cards[dev].uuid, 16);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!card_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)fake_cards[dev].total;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!card_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &fake_ctx[dev];
    fake_cards[dev].has_ctx = true;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    if (!card_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &fake_ctx[dev];
    fake_cards[dev].has_ctx = true;
    fake_current = dev;
    return CUDA_SUCCESS;
}

EXPORT int gpubox_fake_cuda_usage(const char *uuid, unsigned long long *bytes)
{
    unsigned char u[16];
    if (!uuid || !parse_uuid(uuid, u))
        return 0;
    pthread_mutex_lock(&fake_lock);
    int found = 0;
    for (int i = 0; i < fake_ncards && !found; i++)
        if (memcmp(fake_cards[i].uuid, u, 16) == 0 && fake_cards[i].has_ctx) {
            *bytes = fake_cards[i].used;
            found = 1;
        }
    pthread_mutex_unlock(&fake_lock);
    return found;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    fake_current = ctx ? ctx->card : -1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (fake_current < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = fake_current;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    if (fake_current < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fake_lock);
    fake_card *c = &fake_cards[fake_current];
    *free = (size_t)(c->total - c->used);
    *total = (size_t)c->total;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* Books bytes on card, handing out an address (or, with key set, taking
 * that key: arrays and handles). */
static CUresult fake_take(int card, uint64_t bytes, uint64_t *key)
{
    if (card < 0 || card >= fake_ncards)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    fake_card *c = &fake_cards[card];
    CUresult rc = CUDA_SUCCESS;
    if (bytes > c->total - c->used) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        if (fake_nallocs == fake_cap) {
            fake_cap = fake_cap ? fake_cap * 2 : 64;
            fake_allocs = realloc(fake_allocs, fake_cap * sizeof(*fake_allocs));
            if (!fake_allocs)
                abort();
        }
        if (*key == 0) {
            *key = c->next_addr;
            c->next_addr += (bytes + 0xfffff) & ~(uint64_t)0xfffff;
        }
        fake_allocs[fake_nallocs++] = (fake_alloc){.key = *key, .bytes = bytes, .card = card};
        c->used += bytes;
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

static CUresult fake_give(uint64_t key)
{
    pthread_mutex_lock(&fake_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = fake_nallocs; i-- > 0;) {
        if (fake_allocs[i].key == key) {
            fake_cards[fake_allocs[i].card].used -= fake_allocs[i].bytes;
            fake_allocs[i] = fake_allocs[--fake_nallocs];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

static CUresult fake_alloc_ptr(CUdeviceptr *dptr, uint64_t bytes)
{
    uint64_t key = 0;
    CUresult rc = fake_take(fake_current, bytes, &key);
    if (rc == CUDA_SUCCESS)
        *dptr = key;
    return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    (void)ElementSizeBytes;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    CUresult rc = fake_alloc_ptr(dptr, (uint64_t)pitch * Height);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    (void)flags;
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    (void)s;
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    (void)s;
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s)
{
    (void)pool, (void)s;
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream s)
{
    (void)pool, (void)s;
    return fake_alloc_ptr(dptr, bytesize);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return fake_give(dptr);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return fake_give(dptr);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return fake_give(dptr);
}

static uint64_t next_handle = 0x1000;

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t key = __atomic_add_fetch(&next_handle, 1, __ATOMIC_RELAXED);
    CUresult rc = fake_take(prop->location.id, size, &key);
    if (rc == CUDA_SUCCESS)
        *handle = key;
    return rc;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return fake_give(handle);
}

static uint64_t elem_bytes(int format)
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

static uint64_t dim(size_t v)
{
    return v ? v : 1;
}

/* An array is a heap object whose address is its handle. */
static CUresult fake_array(void **handle, uint64_t bytes)
{
    void *obj = malloc(1);
    uint64_t key = (uint64_t)(uintptr_t)obj;
    CUresult rc = fake_take(fake_current, bytes, &key);
    if (rc != CUDA_SUCCESS)
        free(obj);
    else
        *handle = obj;
    return rc;
}

static CUresult fake_array_destroy(void *handle)
{
    CUresult rc = fake_give((uint64_t)(uintptr_t)handle);
    if (rc == CUDA_SUCCESS)
        free(handle);
    return rc;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    return fake_array((void **)pHandle,
                      dim(d->Width) * dim(d->Height) * dim(d->NumChannels) * elem_bytes(d->Format));
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return fake_array((void **)pHandle, dim(d->Width) * dim(d->Height) * dim(d->Depth) *
                                            dim(d->NumChannels) * elem_bytes(d->Format));
}

EXPORT CUresult cuArrayDestroy(CUarray a)
{
    return fake_array_destroy(a);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels)
{
    uint64_t sum = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    for (unsigned i = 0; i < (levels ? levels : 1); i++) {
        sum += dim(w) * dim(h) * dim(z) * dim(d->NumChannels) * elem_bytes(d->Format);
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return fake_array((void **)pHandle, sum);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a)
{
    return fake_array_destroy(a);
}

/* Kernel launches: counted, nothing runs; they need a current context. */
static unsigned long long fake_launches;

static CUresult fake_launch(void)
{
    if (fake_current < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_add_fetch(&fake_launches, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                               void **params, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
    (void)stream, (void)params, (void)extra;
    return fake_launch();
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                    CUstream stream, void **params, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                 void **extra)
{
    (void)config, (void)f, (void)params, (void)extra;
    return fake_launch();
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
    return cuLaunchKernelEx(config, f, params, extra);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                          CUstream stream, void **params)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, NULL);
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz,
                                               unsigned shmem, CUstream stream, void **params)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, NULL);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status);

/* cuGetProcAddress's table: base name, the version that introduced the
 * entry point, whether it is the per-thread default stream variant. */
static const struct {
    const char *base;
    int since;
    bool ptsz;
    void *fn;
} fake_procs[] = {
    {"cuInit", 2000, false, (void *)cuInit},
    {"cuDriverGetVersion", 2020, false, (void *)cuDriverGetVersion},
    {"cuDeviceGetCount", 2000, false, (void *)cuDeviceGetCount},
    {"cuDeviceGet", 2000, false, (void *)cuDeviceGet},
    {"cuDeviceGetUuid", 9020, false, (void *)cuDeviceGetUuid},
    {"cuDeviceTotalMem", 3020, false, (void *)cuDeviceTotalMem_v2},
    {"cuDevicePrimaryCtxRetain", 7000, false, (void *)cuDevicePrimaryCtxRetain},
    {"cuCtxCreate", 3020, false, (void *)cuCtxCreate_v2},
    {"cuCtxSetCurrent", 4000, false, (void *)cuCtxSetCurrent},
    {"cuCtxGetDevice", 2000, false, (void *)cuCtxGetDevice},
    {"cuMemGetInfo", 3020, false, (void *)cuMemGetInfo_v2},
    {"cuMemAlloc", 3020, false, (void *)cuMemAlloc_v2},
    {"cuMemAllocPitch", 3020, false, (void *)cuMemAllocPitch_v2},
    {"cuMemAllocManaged", 6000, false, (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", 11020, false, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, true, (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, false, (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync", 11020, true, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFree", 3020, false, (void *)cuMemFree_v2},
    {"cuMemFreeAsync", 11020, false, (void *)cuMemFreeAsync},
    {"cuMemFreeAsync", 11020, true, (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", 10020, false, (void *)cuMemCreate},
    {"cuMemRelease", 10020, false, (void *)cuMemRelease},
    {"cuArrayCreate", 3020, false, (void *)cuArrayCreate_v2},
    {"cuArray3DCreate", 3020, false, (void *)cuArray3DCreate_v2},
    {"cuArrayDestroy", 2000, false, (void *)cuArrayDestroy},
    {"cuMipmappedArrayCreate", 5000, false, (void *)cuMipmappedArrayCreate},
    {"cuMipmappedArrayDestroy", 5000, false, (void *)cuMipmappedArrayDestroy},
    {"cuLaunchKernel", 4000, false, (void *)cuLaunchKernel},
    {"cuLaunchKernel", 7000, true, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 11060, false, (void *)cuLaunchKernelEx},
    {"cuLaunchKernelEx", 11060, true, (void *)cuLaunchKernelEx_ptsz},
    {"cuLaunchCooperativeKernel", 9000, false, (void *)cuLaunchCooperativeKernel},
    {"cuLaunchCooperativeKernel", 9000, true, (void *)cuLaunchCooperativeKernel_ptsz},
    {"cuGetProcAddress", 11030, false, (void *)cuGetProcAddress},
    {"cuGetProcAddress", 12000, false, (void *)cuGetProcAddress_v2},
};

static CUresult fake_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          int *status)
{
    bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    bool named = false;
    void *best = NULL;
    int best_since = 0;
    for (size_t i = 0; i < sizeof(fake_procs) / sizeof(fake_procs[0]); i++) {
        if (strcmp(fake_procs[i].base, symbol) != 0)
            continue;
        named = true;
        /* a per-thread variant when asked for and there is one */
        bool has_ptsz = i + 1 < sizeof(fake_procs) / sizeof(fake_procs[0]) &&
                        fake_procs[i + 1].ptsz && strcmp(fake_procs[i + 1].base, symbol) == 0;
        if (fake_procs[i].ptsz != ptsz && (fake_procs[i].ptsz || has_ptsz))
            continue;
        if (fake_procs[i].since <= version && fake_procs[i].since >= best_since) {
            best = fake_procs[i].fn;
            best_since = fake_procs[i].since;
        }
    }
    *pfn = best;
    if (status)
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* cuGetProcAddress before CUDA 12 (no status). */
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return fake_proc(symbol, pfn, cudaVersion, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    return fake_proc(symbol, pfn, cudaVersion, flags, status);
}
