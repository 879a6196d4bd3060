/*
 * fake_nvml.c - test double for NVIDIA's NVML library (libnvidia-ml.so.1),
 * built by CMake as build/<dir>/fakes/libnvidia-ml.so.1 and dlopen'ed by
 * gpubox exactly as the real library is (DESIGN.md section 5).
 *
 * It answers from the GPU description file named by GPUBOX_FAKE_GPUS, the
 * same file the fake nvidia-smi (tests/fakes/nvidia-smi) reads, so both
 * sources can be checked against one another. Format, one item a line,
 * blank lines and '#' comments ignored:
 *
 *     driver_version 535.104.05
 *     INDEX UUID MEMORY_MIB STATE NAME...
 *
 *   INDEX       the card's NVML index, 0..n-1 (lines may come in any order);
 *               "C.S" is a MIG instance in MIG slot S (0-6) of card C, and
 *               a card with any MIG instance is in MIG mode
 *   UUID        "GPU-..." for cards, "MIG-..." for MIG instances
 *   MEMORY_MIB  total memory in MiB
 *   STATE       "ok", or "lost": only the UUID can be read, the name and
 *               memory queries fail with "GPU is lost" (nvidia-smi prints
 *               "[Unknown Error]" for them)
 *   NAME        the rest of the line, spaces allowed
 *
 * Without the driver_version line the driver version query answers "Not
 * Supported". Without the file (or with GPUBOX_FAKE_GPUS unset) nvmlInit
 * fails with "Driver Not Loaded", as on a host without the driver.
 *
 * Fault injection: GPUBOX_FAKE_NVML_FAIL is a comma-separated list of
 * "init" (nvmlInit fails), "count" (nvmlDeviceGetCount fails). When
 * GPUBOX_FAKE_NVML_LOG names a file, the entry points that start and end a
 * session (init, count, shutdown) append their names to it, one a line, so
 * tests can see that the versioned names were used and that every init was
 * matched by a shutdown.
 *
 * The NVML ABI facts used (return codes, buffer sizes, nvmlMemory_t) are
 * NVML's documented ones, declared here rather than taken from nvml.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;
typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

#define FAKE_MIG_SLOTS 7

struct fake_dev {
    int index;    /* card index; for MIG instances the card's */
    int mig_slot; /* -1 for cards */
    char uuid[96];
    char name[96];
    unsigned long long memory_mib;
    int lost;
};

static struct fake_dev *fake_devs;
static size_t fake_ndevs, fake_ncards;
static char fake_driver[80];
static int fake_init_count;

static void fake_log(const char *what)
{
    const char *path = getenv("GPUBOX_FAKE_NVML_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s\n", what);
        fclose(f);
    }
}

static int fake_fails(const char *what)
{
    const char *list = getenv("GPUBOX_FAKE_NVML_FAIL");
    size_t n = strlen(what);
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += (*p == ',')) {
        if (strncmp(p, what, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* One device line; 0 on success, -1 if malformed. */
static int fake_parse_device(const char *line, struct fake_dev *d)
{
    char index[16], state[16];
    int name_at = 0;
    memset(d, 0, sizeof(*d));
    if (sscanf(line, "%15s %95s %llu %15s %n", index, d->uuid, &d->memory_mib, state, &name_at) <
            4 ||
        name_at == 0)
        return -1;
    snprintf(d->name, sizeof(d->name), "%s", line + name_at);
    d->name[strcspn(d->name, "\r\n")] = '\0';
    char *dot = strchr(index, '.');
    d->mig_slot = dot ? atoi(dot + 1) : -1;
    d->index = atoi(index);
    if (strcmp(state, "ok") != 0 && strcmp(state, "lost") != 0)
        return -1;
    d->lost = strcmp(state, "lost") == 0;
    if (d->index < 0 || (dot && (d->mig_slot < 0 || d->mig_slot >= FAKE_MIG_SLOTS)))
        return -1;
    return 0;
}

static nvmlReturn_t fake_load(void)
{
    const char *path = getenv("GPUBOX_FAKE_GPUS");
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    char line[512];
    int line_no = 0;
    while (fgets(line, sizeof(line), f)) {
        line_no++;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
            continue;
        if (strncmp(p, "driver_version ", 15) == 0) {
            snprintf(fake_driver, sizeof(fake_driver), "%s", p + 15);
            fake_driver[strcspn(fake_driver, " \t\r\n")] = '\0';
            continue;
        }
        struct fake_dev *grown = realloc(fake_devs, (fake_ndevs + 1) * sizeof(*grown));
        if (!grown || fake_parse_device(p, &grown[fake_ndevs]) < 0) {
            fprintf(stderr, "fake NVML: %s line %d is not INDEX UUID MEMORY_MIB ok|lost NAME\n",
                    path, line_no);
            fake_devs = grown ? grown : fake_devs;
            fclose(f);
            return NVML_ERROR_UNKNOWN;
        }
        fake_devs = grown;
        if (grown[fake_ndevs].mig_slot < 0)
            fake_ncards++;
        fake_ndevs++;
    }
    fclose(f);
    return NVML_SUCCESS;
}

static void fake_unload(void)
{
    free(fake_devs);
    fake_devs = NULL;
    fake_ndevs = fake_ncards = 0;
    fake_driver[0] = '\0';
}

static nvmlReturn_t fake_init(const char *name)
{
    fake_log(name);
    if (fake_fails("init"))
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (fake_init_count > 0) {
        fake_init_count++;
        return NVML_SUCCESS;
    }
    nvmlReturn_t r = fake_load();
    if (r != NVML_SUCCESS) {
        fake_unload();
        return r;
    }
    fake_init_count = 1;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return fake_init("nvmlInit_v2");
}

FAKE_EXPORT nvmlReturn_t nvmlInit(void)
{
    return fake_init("nvmlInit");
}

FAKE_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    fake_log("nvmlShutdown");
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--fake_init_count == 0)
        fake_unload();
    return NVML_SUCCESS;
}

static nvmlReturn_t fake_count(const char *name, unsigned int *count)
{
    fake_log(name);
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_fails("count"))
        return NVML_ERROR_UNKNOWN;
    *count = (unsigned int)fake_ncards;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    return fake_count("nvmlDeviceGetCount_v2", count);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return fake_count("nvmlDeviceGetCount", count);
}

static nvmlReturn_t fake_handle(unsigned int index, nvmlDevice_t *device)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < fake_ndevs; i++) {
        if (fake_devs[i].mig_slot < 0 && fake_devs[i].index == (int)index) {
            *device = &fake_devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return fake_handle(index, device);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return fake_handle(index, device);
}

/* A handle this library gave out, or NULL. */
static struct fake_dev *fake_dev_of(nvmlDevice_t device)
{
    for (size_t i = 0; fake_init_count > 0 && i < fake_ndevs; i++)
        if (&fake_devs[i] == device)
            return device;
    return NULL;
}

static nvmlReturn_t fake_copy(const char *s, char *buf, unsigned int len)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int len)
{
    struct fake_dev *d = fake_dev_of(device);
    return d ? fake_copy(d->uuid, uuid, len) : NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int len)
{
    struct fake_dev *d = fake_dev_of(device);
    if (!d)
        return NVML_ERROR_INVALID_ARGUMENT;
    return d->lost ? NVML_ERROR_GPU_IS_LOST : fake_copy(d->name, name, len);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct fake_dev *d = fake_dev_of(device);
    if (!d || !memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->lost)
        return NVML_ERROR_GPU_IS_LOST;
    memory->total = d->memory_mib * 1024 * 1024;
    memory->used = memory->total / 100; /* the driver's own reservation */
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return fake_driver[0] ? fake_copy(fake_driver, version, len) : NVML_ERROR_NOT_SUPPORTED;
}

static int fake_has_mig(const struct fake_dev *card)
{
    for (size_t i = 0; i < fake_ndevs; i++)
        if (fake_devs[i].mig_slot >= 0 && fake_devs[i].index == card->index)
            return 1;
    return 0;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                              unsigned int *pending)
{
    struct fake_dev *d = fake_dev_of(device);
    if (!d || !current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig_slot >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)fake_has_mig(d);
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    struct fake_dev *d = fake_dev_of(device);
    if (!d || !count || d->mig_slot >= 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = fake_has_mig(d) ? FAKE_MIG_SLOTS : 0;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                             unsigned int index, nvmlDevice_t *mig)
{
    struct fake_dev *d = fake_dev_of(device);
    if (!d || !mig || d->mig_slot >= 0 || index >= FAKE_MIG_SLOTS)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < fake_ndevs; i++) {
        if (fake_devs[i].mig_slot == (int)index && fake_devs[i].index == d->index) {
            *mig = &fake_devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

FAKE_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}
