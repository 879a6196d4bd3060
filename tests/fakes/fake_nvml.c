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
 *     usage INDEX MEMORY_USED_MIB UTILIZATION_PCT
 *     process INDEX PID MEMORY_MIB [SM_PCT]
 *     context INDEX MEMORY_MIB
 *     hostpids PATH
 *     xid INDEX XID
 *
 *   INDEX       the card's NVML index, 0..n-1 (lines may come in any order);
 *               "C.S" is a MIG instance in MIG slot S (0-6) of card C, and
 *               a card with any MIG instance is in MIG mode
 *   UUID        "GPU-..." for cards, "MIG-..." for MIG instances
 *   MEMORY_MIB  total memory in MiB
 *   STATE       "ok", or "lost": only the UUID can be read, every other
 *               query fails with "GPU is lost" (nvidia-smi prints
 *               "[Unknown Error]" for them)
 *   NAME        the rest of the line, spaces allowed
 *   usage       the device's memory used and (cards only) utilization.
 *               Without it: memory used is total/100 (the driver's own
 *               reservation) plus its processes' memory, utilization 0
 *   process     a compute process (a host PID) on the device, with the SM
 *               percent of its utilization sample; without SM_PCT the
 *               driver has no sample for it
 *   context     each process that asks for the device's compute processes
 *               and holds a context on it in the fake CUDA driver
 *               (tests/fakes/fake_cuda.c, already loaded; its exported
 *               gpubox_fake_cuda_usage) is listed too, under its own PID,
 *               with MEMORY_MIB of context memory plus what it holds
 *               through the fake driver: as the real NVML counts a
 *               process's context with its allocations
 *   hostpids    the caller runs in a PID namespace of its own (a
 *               container), and the real NVML lists every process under
 *               its host PID: the context lines list the caller under the
 *               host PID that PATH gives for its own PID (lines
 *               "PID HOSTPID", which a test writes from the host side),
 *               or, when PATH does not name it, under its PID + 4194304
 *               (above any PID the kernel gives: it matches no process).
 *               Without it they list the caller under its own PID (no
 *               PID namespace, or docker --pid=host)
 *   xid         an XID error on the device (on a MIG instance: reported on
 *               its card); each xid line is delivered once per NVML
 *               session, in file order, through the event set API
 *
 * usage, process and xid lines name devices of the same file.
 *
 * The file is read again whenever its mtime or size changes, checked at
 * every sampling entry point (memory, utilization, processes, process
 * samples, event waits), so tests rewrite it while gpuboxd runs. Device
 * handles stay valid across re-reads: devices live in a fixed table keyed
 * by UUID. A device whose line disappears is "gone" (every query answers
 * "GPU is lost") until its line comes back. A file removed or malformed
 * meanwhile changes nothing (a malformed one is reported on stderr). Enumeration (count, handle by
 * index) lists the devices of the file as last read.
 *
 * Without the driver_version line the driver version query answers "Not
 * Supported". Without the file (or with GPUBOX_FAKE_GPUS unset) nvmlInit
 * fails with "Driver Not Loaded", as on a host without the driver.
 *
 * Fault injection: GPUBOX_FAKE_NVML_FAIL is a comma-separated list of
 * "init" (nvmlInit fails), "count" (nvmlDeviceGetCount fails), "procs_v2"
 * (nvmlDeviceGetComputeRunningProcesses_v2 answers "Function Not Found",
 * as old drivers do). When GPUBOX_FAKE_NVML_LOG names a file, the entry
 * points that start and end a session (init, count, shutdown) append
 * their names to it, one a line, so tests can see that the versioned names
 * were used and that every init was matched by a shutdown.
 *
 * Every entry point holds one lock, so a daemon's threads may share it.
 *
 * The NVML ABI facts used (return codes, buffer sizes, struct layouts) are
 * NVML's documented ones, declared here rather than taken from nvml.h.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;
typedef struct fake_event_set *nvmlEventSet_t;
typedef struct nvmlMemory_st {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct nvmlUtilization_st {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

#define NVML_EVENT_TYPE_XID 0x0000000000000008ULL
#define NVML_NO_INSTANCE 0xffffffffU
#define FAKE_MIB (1024ULL * 1024ULL)
#define FAKE_MIG_SLOTS 7
#define FAKE_MAX_DEVS 64
#define FAKE_MAX_PROCS 256
#define FAKE_MAX_XIDS 256
#define FAKE_MAX_SETS 8
#define FAKE_POLL_MS 50

struct fake_dev {
    int listed;   /* in the file as last read; otherwise gone */
    int index;    /* card index; for MIG instances the card's */
    int mig_slot; /* -1 for cards */
    char uuid[96];
    char name[96];
    unsigned long long memory_mib;
    int lost;
    int has_usage; /* a usage line gives memory used and utilization */
    unsigned long long used_mib;
    unsigned int util;
    int has_context; /* a context line: the caller's own process is listed */
    unsigned long long context_mib;
};

struct fake_proc {
    int dev; /* the device's slot */
    unsigned int pid;
    unsigned long long mib;
    int sm; /* -1: no utilization sample */
};

struct fake_xid {
    int dev;
    unsigned long long xid;
};

struct fake_event_set {
    int in_use;
    unsigned long long registered; /* bit per device slot */
};

/* One reading of the file, devices in file order (slot numbers come when
 * it is applied). */
struct fake_desc {
    struct fake_dev devs[FAKE_MAX_DEVS];
    size_t ndevs;
    struct fake_proc procs[FAKE_MAX_PROCS];
    size_t nprocs;
    struct fake_xid xids[FAKE_MAX_XIDS];
    size_t nxids;
    char driver[80];
    char hostpids[256]; /* "": the caller's PIDs are the host's */
};

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_dev fake_devs[FAKE_MAX_DEVS]; /* the handles: never moved */
static size_t fake_nslots;
static struct fake_proc fake_procs[FAKE_MAX_PROCS];
static size_t fake_nprocs;
static struct fake_xid fake_xids[FAKE_MAX_XIDS];
static size_t fake_nxids, fake_xids_delivered;
static struct fake_event_set fake_sets[FAKE_MAX_SETS];
static char fake_driver[80];
static char fake_hostpids[256]; /* the hostpids line's PATH; "": none */
static int fake_init_count;
static struct timespec fake_mtime; /* of the file as last read */
static off_t fake_size;

/* Run an entry point's body under the lock. */
#define FAKE_LOCKED(call)                                                                          \
    do {                                                                                           \
        pthread_mutex_lock(&fake_mu);                                                              \
        nvmlReturn_t locked_r_ = (call);                                                           \
        pthread_mutex_unlock(&fake_mu);                                                            \
        return locked_r_;                                                                          \
    } while (0)

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

/* ---- reading the description file --------------------------------------- */

/* "C" or "C.S" -> card index and MIG slot (-1 for a card); -1 if neither. */
static int fake_parse_index(const char *s, int *index, int *slot)
{
    char *end = NULL;
    long c = strtol(s, &end, 10);
    if (end == s || c < 0 || c > 9999)
        return -1;
    *index = (int)c;
    *slot = -1;
    if (*end == '\0')
        return 0;
    if (*end != '.' || end[1] < '0' || end[1] >= '0' + FAKE_MIG_SLOTS || end[2] != '\0')
        return -1;
    *slot = end[1] - '0';
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
    if (fake_parse_index(index, &d->index, &d->mig_slot) < 0)
        return -1;
    if (strcmp(state, "ok") != 0 && strcmp(state, "lost") != 0)
        return -1;
    d->lost = strcmp(state, "lost") == 0;
    d->listed = 1;
    return 0;
}

/* The position in desc of the device INDEX names, or -1. */
static int fake_desc_find(const struct fake_desc *desc, const char *index)
{
    int c, slot;
    if (fake_parse_index(index, &c, &slot) < 0)
        return -1;
    for (size_t i = 0; i < desc->ndevs; i++)
        if (desc->devs[i].index == c && desc->devs[i].mig_slot == slot)
            return (int)i;
    return -1;
}

static int fake_parse_usage(const char *p, struct fake_desc *desc)
{
    char index[16];
    unsigned long long used;
    unsigned int util;
    if (sscanf(p, "usage %15s %llu %u", index, &used, &util) != 3 || util > 100)
        return -1;
    int at = fake_desc_find(desc, index);
    if (at < 0)
        return -1;
    desc->devs[at].has_usage = 1;
    desc->devs[at].used_mib = used;
    desc->devs[at].util = util;
    return 0;
}

static int fake_parse_process(const char *p, struct fake_desc *desc)
{
    char index[16];
    struct fake_proc pr = {.sm = -1};
    int n = sscanf(p, "process %15s %u %llu %d", index, &pr.pid, &pr.mib, &pr.sm);
    if (n < 3 || pr.pid == 0 || pr.sm > 100 || (n == 4 && pr.sm < 0))
        return -1;
    pr.dev = fake_desc_find(desc, index);
    if (pr.dev < 0 || desc->nprocs == FAKE_MAX_PROCS)
        return -1;
    desc->procs[desc->nprocs++] = pr;
    return 0;
}

static int fake_parse_context(const char *p, struct fake_desc *desc)
{
    char index[16];
    unsigned long long mib;
    if (sscanf(p, "context %15s %llu", index, &mib) != 2)
        return -1;
    int at = fake_desc_find(desc, index);
    if (at < 0)
        return -1;
    desc->devs[at].has_context = 1;
    desc->devs[at].context_mib = mib;
    return 0;
}

static int fake_parse_xid(const char *p, struct fake_desc *desc)
{
    char index[16];
    struct fake_xid x;
    if (sscanf(p, "xid %15s %llu", index, &x.xid) != 2)
        return -1;
    x.dev = fake_desc_find(desc, index);
    if (x.dev < 0 || desc->nxids == FAKE_MAX_XIDS)
        return -1;
    desc->xids[desc->nxids++] = x;
    return 0;
}

/* One line of a pass: devices in pass 1, what refers to them in pass 2. */
static int fake_parse_line(const char *p, int pass, struct fake_desc *desc)
{
    static const struct {
        const char *word;
        int (*parse)(const char *, struct fake_desc *);
    } refs[] = {
        {"usage ", fake_parse_usage},
        {"process ", fake_parse_process},
        {"context ", fake_parse_context},
        {"xid ", fake_parse_xid},
    };
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++)
        if (strncmp(p, refs[i].word, strlen(refs[i].word)) == 0)
            return pass == 2 ? refs[i].parse(p, desc) : 0;
    if (pass == 2)
        return 0;
    if (strncmp(p, "hostpids ", 9) == 0) {
        snprintf(desc->hostpids, sizeof(desc->hostpids), "%s", p + 9);
        desc->hostpids[strcspn(desc->hostpids, " \t\r\n")] = '\0';
        return 0;
    }
    if (strncmp(p, "driver_version ", 15) == 0) {
        snprintf(desc->driver, sizeof(desc->driver), "%s", p + 15);
        desc->driver[strcspn(desc->driver, " \t\r\n")] = '\0';
        return 0;
    }
    if (desc->ndevs == FAKE_MAX_DEVS)
        return -1;
    return fake_parse_device(p, &desc->devs[desc->ndevs++]);
}

/* The file as a description; NVML_SUCCESS, DRIVER_NOT_LOADED without it,
 * UNKNOWN (said on stderr) when a line is malformed. */
static nvmlReturn_t fake_read(const char *path, struct fake_desc *desc)
{
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    char line[512];
    for (int pass = 1; pass <= 2; pass++) {
        rewind(f);
        for (int line_no = 1; fgets(line, sizeof(line), f); line_no++) {
            char *p = line + strspn(line, " \t");
            if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
                continue;
            if (fake_parse_line(p, pass, desc) < 0) {
                fprintf(stderr,
                        "fake NVML: %s line %d is none of INDEX UUID MEMORY_MIB ok|lost NAME, "
                        "usage INDEX MIB PCT, process INDEX PID MIB [PCT], context INDEX MIB, "
                        "xid INDEX XID (of "
                        "a device in the file)\n",
                        path, line_no);
                fclose(f);
                return NVML_ERROR_UNKNOWN;
            }
        }
    }
    fclose(f);
    return NVML_SUCCESS;
}

/* The slot of the device with uuid, taking a free one if it is new; -1
 * when the table is full. */
static int fake_slot_for(const char *uuid)
{
    for (size_t i = 0; i < fake_nslots; i++)
        if (strcmp(fake_devs[i].uuid, uuid) == 0)
            return (int)i;
    if (fake_nslots == FAKE_MAX_DEVS)
        return -1;
    struct fake_dev *d = &fake_devs[fake_nslots];
    memset(d, 0, sizeof(*d));
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    return (int)fake_nslots++;
}

/* Make desc the current state: its devices keep (or get) their slots,
 * the others are gone. */
static nvmlReturn_t fake_apply(const struct fake_desc *desc)
{
    int slot_of[FAKE_MAX_DEVS] = {0};
    for (size_t i = 0; i < desc->ndevs; i++) {
        slot_of[i] = fake_slot_for(desc->devs[i].uuid);
        if (slot_of[i] < 0)
            return NVML_ERROR_UNKNOWN;
    }
    for (size_t i = 0; i < fake_nslots; i++)
        fake_devs[i].listed = 0;
    for (size_t i = 0; i < desc->ndevs; i++)
        fake_devs[slot_of[i]] = desc->devs[i];
    fake_nprocs = desc->nprocs;
    for (size_t i = 0; i < desc->nprocs; i++) {
        fake_procs[i] = desc->procs[i];
        fake_procs[i].dev = slot_of[desc->procs[i].dev];
    }
    fake_nxids = desc->nxids;
    for (size_t i = 0; i < desc->nxids; i++) {
        fake_xids[i] = desc->xids[i];
        fake_xids[i].dev = slot_of[desc->xids[i].dev];
    }
    memcpy(fake_driver, desc->driver, sizeof(fake_driver));
    memcpy(fake_hostpids, desc->hostpids, sizeof(fake_hostpids));
    return NVML_SUCCESS;
}

/* Read the file (again) and apply it; the state stays as it was when the
 * file is missing or malformed. */
static nvmlReturn_t fake_load(void)
{
    const char *path = getenv("GPUBOX_FAKE_GPUS");
    struct stat st;
    if (path && stat(path, &st) == 0) {
        fake_mtime = st.st_mtim;
        fake_size = st.st_size;
    }
    struct fake_desc *desc = calloc(1, sizeof(*desc));
    if (!desc)
        return NVML_ERROR_UNKNOWN;
    nvmlReturn_t r = fake_read(path, desc);
    if (r == NVML_SUCCESS)
        r = fake_apply(desc);
    free(desc);
    return r;
}

/* At a sampling entry point: read the file again if it changed. */
static void fake_refresh(void)
{
    const char *path = getenv("GPUBOX_FAKE_GPUS");
    struct stat st;
    if (fake_init_count == 0 || !path || stat(path, &st) < 0)
        return;
    if (st.st_size == fake_size && st.st_mtim.tv_sec == fake_mtime.tv_sec &&
        st.st_mtim.tv_nsec == fake_mtime.tv_nsec)
        return;
    fake_load();
}

static void fake_unload(void)
{
    memset(fake_devs, 0, sizeof(fake_devs));
    memset(fake_sets, 0, sizeof(fake_sets));
    fake_nslots = fake_nprocs = fake_nxids = fake_xids_delivered = 0;
    fake_driver[0] = fake_hostpids[0] = '\0';
    fake_size = 0;
    memset(&fake_mtime, 0, sizeof(fake_mtime));
}

/* ---- sessions ----------------------------------------------------------- */

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
    FAKE_LOCKED(fake_init("nvmlInit_v2"));
}

FAKE_EXPORT nvmlReturn_t nvmlInit(void)
{
    FAKE_LOCKED(fake_init("nvmlInit"));
}

static nvmlReturn_t fake_shutdown(void)
{
    fake_log("nvmlShutdown");
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--fake_init_count == 0)
        fake_unload();
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    FAKE_LOCKED(fake_shutdown());
}

/* ---- enumeration -------------------------------------------------------- */

static nvmlReturn_t fake_count(const char *name, unsigned int *count)
{
    fake_log(name);
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_fails("count"))
        return NVML_ERROR_UNKNOWN;
    *count = 0;
    for (size_t i = 0; i < fake_nslots; i++)
        if (fake_devs[i].listed && fake_devs[i].mig_slot < 0)
            (*count)++;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    FAKE_LOCKED(fake_count("nvmlDeviceGetCount_v2", count));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    FAKE_LOCKED(fake_count("nvmlDeviceGetCount", count));
}

/* The listed device with this index and MIG slot, or NULL. */
static struct fake_dev *fake_find(int index, int mig_slot)
{
    for (size_t i = 0; i < fake_nslots; i++)
        if (fake_devs[i].listed && fake_devs[i].index == index && fake_devs[i].mig_slot == mig_slot)
            return &fake_devs[i];
    return NULL;
}

static nvmlReturn_t fake_handle(unsigned int index, nvmlDevice_t *device)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!device)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = index < 10000 ? fake_find((int)index, -1) : NULL;
    return *device ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    FAKE_LOCKED(fake_handle(index, device));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    FAKE_LOCKED(fake_handle(index, device));
}

/* ---- device queries ----------------------------------------------------- */

/* *d = the device behind a handle this library gave out. INVALID_ARGUMENT
 * for anything else, GPU_IS_LOST when it is gone, or lost and
 * lost_matters. */
static nvmlReturn_t fake_dev_of(nvmlDevice_t device, int lost_matters, struct fake_dev **d)
{
    *d = NULL;
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    for (size_t i = 0; i < fake_nslots; i++)
        if (&fake_devs[i] == device)
            *d = device;
    if (!*d)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!(*d)->listed || ((*d)->lost && lost_matters))
        return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
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

static nvmlReturn_t fake_uuid(nvmlDevice_t device, char *uuid, unsigned int len)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 0, &d);
    return r == NVML_SUCCESS ? fake_copy(d->uuid, uuid, len) : r;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int len)
{
    FAKE_LOCKED(fake_uuid(device, uuid, len));
}

static nvmlReturn_t fake_name(nvmlDevice_t device, char *name, unsigned int len)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    return r == NVML_SUCCESS ? fake_copy(d->name, name, len) : r;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int len)
{
    FAKE_LOCKED(fake_name(device, name, len));
}

static unsigned long long fake_procs_mib(const struct fake_dev *d)
{
    unsigned long long mib = 0;
    for (size_t i = 0; i < fake_nprocs; i++)
        if (&fake_devs[fake_procs[i].dev] == d)
            mib += fake_procs[i].mib;
    return mib;
}

static nvmlReturn_t fake_memory(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct fake_dev *d;
    fake_refresh();
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = d->memory_mib * FAKE_MIB;
    if (d->has_usage)
        memory->used = d->used_mib * FAKE_MIB;
    else /* the driver's own reservation, and the processes' */
        memory->used = memory->total / 100 + fake_procs_mib(d) * FAKE_MIB;
    if (memory->used > memory->total)
        memory->used = memory->total;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    FAKE_LOCKED(fake_memory(device, memory));
}

/* The _v2 form: a version field first, and the driver's reservation
 * (reported as 0 here: the fake's "used" already includes it). */
typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

static nvmlReturn_t fake_memory_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlMemory_t m;
    nvmlReturn_t r = fake_memory(device, &m);
    if (r == NVML_SUCCESS) {
        memory->total = m.total;
        memory->reserved = 0;
        memory->free = m.free;
        memory->used = m.used;
    }
    return r;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    FAKE_LOCKED(fake_memory_v2(device, memory));
}

static nvmlReturn_t fake_driver_version(char *version, unsigned int len)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return fake_driver[0] ? fake_copy(fake_driver, version, len) : NVML_ERROR_NOT_SUPPORTED;
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    FAKE_LOCKED(fake_driver_version(version, len));
}

static int fake_has_mig(const struct fake_dev *card)
{
    for (size_t i = 0; i < fake_nslots; i++)
        if (fake_devs[i].listed && fake_devs[i].mig_slot >= 0 && fake_devs[i].index == card->index)
            return 1;
    return 0;
}

static nvmlReturn_t fake_mig_mode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 0, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig_slot >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)fake_has_mig(d);
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                              unsigned int *pending)
{
    FAKE_LOCKED(fake_mig_mode(device, current, pending));
}

static nvmlReturn_t fake_max_mig(nvmlDevice_t device, unsigned int *count)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 0, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!count || d->mig_slot >= 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = fake_has_mig(d) ? FAKE_MIG_SLOTS : 0;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    FAKE_LOCKED(fake_max_mig(device, count));
}

static nvmlReturn_t fake_mig_handle(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 0, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!mig || d->mig_slot >= 0 || index >= FAKE_MIG_SLOTS)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mig = fake_find(d->index, (int)index);
    return *mig ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                             unsigned int index, nvmlDevice_t *mig)
{
    FAKE_LOCKED(fake_mig_handle(device, index, mig));
}

/* ---- usage -------------------------------------------------------------- */

static nvmlReturn_t fake_utilization(nvmlDevice_t device, nvmlUtilization_t *util)
{
    struct fake_dev *d;
    fake_refresh();
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!util)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* As the driver: no utilization for MIG instances nor cards in MIG mode. */
    if (d->mig_slot >= 0 || fake_has_mig(d))
        return NVML_ERROR_NOT_SUPPORTED;
    util->gpu = d->has_usage ? d->util : 0;
    util->memory = 0;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
    FAKE_LOCKED(fake_utilization(device, util));
}

/* The calling process's memory on d when d has a context line and the
 * process holds a context on it in the fake driver: its context memory
 * plus what it holds there. 0 when it is not listed. */
static unsigned long long fake_own_bytes(const struct fake_dev *d)
{
    typedef int (*usage_fn)(const char *, unsigned long long *);
    if (!d->has_context)
        return 0;
    /* the driver as the process loaded it (a program opens it RTLD_LOCAL) */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    usage_fn usage = driver ? (usage_fn)dlsym(driver, "gpubox_fake_cuda_usage") : NULL;
    unsigned long long held = 0;
    int has = usage && usage(d->uuid, &held);
    if (driver)
        dlclose(driver);
    if (!has)
        return 0;
    return d->context_mib * FAKE_MIB + held;
}

/* The PID NVML lists the caller under: its own, or with a hostpids line
 * the host's from that file (see the top of this file). */
static unsigned int fake_listed_pid(void)
{
    unsigned int self = (unsigned int)getpid();
    if (!fake_hostpids[0])
        return self;
    FILE *f = fopen(fake_hostpids, "r");
    unsigned int pid, host, listed = self + 4194304U;
    while (f && fscanf(f, "%u %u", &pid, &host) == 2)
        if (pid == self)
            listed = host;
    if (f)
        fclose(f);
    return listed;
}

/* The compute processes on a device into v1 or v2 entries (one of them
 * NULL): count first as NVML does. */
static nvmlReturn_t fake_processes(nvmlDevice_t device, unsigned int *count,
                                   nvmlProcessInfo_v1_t *v1, nvmlProcessInfo_v2_t *v2)
{
    struct fake_dev *d;
    fake_refresh();
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = 0;
    for (size_t i = 0; i < fake_nprocs; i++)
        n += &fake_devs[fake_procs[i].dev] == d;
    unsigned long long own = fake_own_bytes(d);
    n += own > 0;
    if (*count < n || (n > 0 && !v1 && !v2)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int k = 0;
    for (size_t i = 0; i < fake_nprocs; i++) {
        const struct fake_proc *p = &fake_procs[i];
        if (&fake_devs[p->dev] != d)
            continue;
        unsigned int instance = d->mig_slot >= 0 ? (unsigned int)d->mig_slot : NVML_NO_INSTANCE;
        if (v1)
            v1[k] = (nvmlProcessInfo_v1_t){p->pid, p->mib * FAKE_MIB};
        else
            v2[k] = (nvmlProcessInfo_v2_t){p->pid, p->mib * FAKE_MIB, instance,
                                           d->mig_slot >= 0 ? 0 : NVML_NO_INSTANCE};
        k++;
    }
    unsigned int listed = own ? fake_listed_pid() : 0;
    if (own && v1)
        v1[k] = (nvmlProcessInfo_v1_t){listed, own};
    else if (own)
        v2[k] = (nvmlProcessInfo_v2_t){listed, own, NVML_NO_INSTANCE, NVML_NO_INSTANCE};
    *count = n;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                 unsigned int *count,
                                                                 nvmlProcessInfo_v2_t *infos)
{
    if (fake_fails("procs_v2"))
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    FAKE_LOCKED(fake_processes(device, count, NULL, infos));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                              unsigned int *count,
                                                              nvmlProcessInfo_v1_t *infos)
{
    FAKE_LOCKED(fake_processes(device, count, infos, NULL));
}

static unsigned long long fake_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

/* One sample per process line with SM_PCT, stamped now. As the driver,
 * the count query (no buffer) succeeds; NOT_FOUND when there is none. */
static nvmlReturn_t fake_process_samples(nvmlDevice_t device,
                                         nvmlProcessUtilizationSample_t *samples,
                                         unsigned int *count, unsigned long long last_seen)
{
    struct fake_dev *d;
    fake_refresh();
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig_slot >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long now = fake_now_us();
    unsigned int n = 0;
    for (size_t i = 0; i < fake_nprocs; i++)
        n += &fake_devs[fake_procs[i].dev] == d && fake_procs[i].sm >= 0 && now > last_seen;
    if (n == 0)
        return NVML_ERROR_NOT_FOUND;
    if (!samples) {
        *count = n;
        return NVML_SUCCESS;
    }
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int k = 0;
    for (size_t i = 0; i < fake_nprocs; i++) {
        const struct fake_proc *p = &fake_procs[i];
        if (&fake_devs[p->dev] == d && p->sm >= 0)
            samples[k++] = (nvmlProcessUtilizationSample_t){
                .pid = p->pid, .timeStamp = now, .smUtil = (unsigned int)p->sm};
    }
    *count = n;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                         nvmlProcessUtilizationSample_t *samples,
                                                         unsigned int *count,
                                                         unsigned long long last_seen)
{
    FAKE_LOCKED(fake_process_samples(device, samples, count, last_seen));
}

/* ---- XID events --------------------------------------------------------- */

static nvmlReturn_t fake_set_create(nvmlEventSet_t *set)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < FAKE_MAX_SETS; i++) {
        if (!fake_sets[i].in_use) {
            fake_sets[i] = (struct fake_event_set){.in_use = 1};
            *set = &fake_sets[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_UNKNOWN;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    FAKE_LOCKED(fake_set_create(set));
}

static int fake_set_valid(nvmlEventSet_t set)
{
    return set >= fake_sets && set < fake_sets + FAKE_MAX_SETS && set->in_use;
}

static nvmlReturn_t fake_set_free(nvmlEventSet_t set)
{
    if (fake_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!fake_set_valid(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    set->in_use = 0;
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    FAKE_LOCKED(fake_set_free(set));
}

static nvmlReturn_t fake_register(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set)
{
    struct fake_dev *d;
    nvmlReturn_t r = fake_dev_of(device, 1, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (!fake_set_valid(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    /* The driver registers cards only: MIG instances' events come on them. */
    if (d->mig_slot >= 0 || (types & ~NVML_EVENT_TYPE_XID))
        return NVML_ERROR_NOT_SUPPORTED;
    set->registered |= 1ULL << (d - fake_devs);
    return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                  nvmlEventSet_t set)
{
    FAKE_LOCKED(fake_register(device, types, set));
}

/* The next undelivered xid line for a card registered in set, into data
 * (all of it with full != 0, else the old three fields); xid lines of
 * unregistered cards pass by, as the driver would never report them. */
static int fake_next_xid(nvmlEventSet_t set, nvmlEventData_t *data, int full)
{
    while (fake_xids_delivered < fake_nxids) {
        const struct fake_xid *x = &fake_xids[fake_xids_delivered++];
        const struct fake_dev *on = &fake_devs[x->dev];
        struct fake_dev *card = on->mig_slot >= 0 ? fake_find(on->index, -1) : &fake_devs[x->dev];
        if (!card || !(set->registered & (1ULL << (card - fake_devs))))
            continue;
        data->device = card;
        data->eventType = NVML_EVENT_TYPE_XID;
        data->eventData = x->xid;
        if (full) {
            data->gpuInstanceId = on->mig_slot >= 0 ? (unsigned int)on->mig_slot : NVML_NO_INSTANCE;
            data->computeInstanceId = on->mig_slot >= 0 ? 0 : NVML_NO_INSTANCE;
        }
        return 1;
    }
    return 0;
}

static long long fake_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait at most timeout_ms for an event, looking at the file every
 * FAKE_POLL_MS. Called with the lock held; it is let go while sleeping. */
static nvmlReturn_t fake_wait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms,
                              int full)
{
    long long deadline = fake_now_ms() + timeout_ms;
    for (;;) {
        if (fake_init_count == 0)
            return NVML_ERROR_UNINITIALIZED;
        if (!data || !fake_set_valid(set))
            return NVML_ERROR_INVALID_ARGUMENT;
        fake_refresh();
        if (fake_next_xid(set, data, full))
            return NVML_SUCCESS;
        long long left = deadline - fake_now_ms();
        if (left <= 0)
            return NVML_ERROR_TIMEOUT;
        long long nap = left < FAKE_POLL_MS ? left : FAKE_POLL_MS;
        struct timespec ts = {.tv_sec = nap / 1000, .tv_nsec = (nap % 1000) * 1000000};
        pthread_mutex_unlock(&fake_mu);
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&fake_mu);
    }
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                             unsigned int timeout_ms)
{
    FAKE_LOCKED(fake_wait(set, data, timeout_ms, 1));
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                          unsigned int timeout_ms)
{
    FAKE_LOCKED(fake_wait(set, data, timeout_ms, 0));
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
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}
