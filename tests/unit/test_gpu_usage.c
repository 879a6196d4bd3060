/*
 * test_gpu_usage.c - live GPU usage sampling: the idle sampler of simulated
 * inventories; the NVML sampler through the real dlopen of the fake
 * libnvidia-ml.so.1 and the nvidia-smi sampler through the fake script,
 * both answering from one description file this test rewrites between
 * readings (processes come, utilization drops, an XID arrives once, a card
 * disappears and comes back); the nvidia-smi CSV parsers on good, bad and
 * mutated input.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpu/gpu_usage.h"
#include "util/log.h"

#define UUID_A "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define UUID_B "GPU-bbbbbbbb-1111-4000-8000-000000000001"
#define UUID_C "GPU-cccccccc-2222-4000-8000-000000000002"
#define UUID_M "MIG-00000000-2222-4000-8000-000000000000"
#define UUID_D "GPU-dddddddd-3333-4000-8000-000000000003"

static char tmpdir[64];
static char gpus_file[128], nvml_log[128];
static char fake_nvml[1024], fake_smi[1100];
static int generation; /* each rewrite of the file gets its own mtime */

/* The description file, with an mtime no earlier rewrite had, so the fake
 * NVML sees the change even when the size stays the same. */
static void write_desc(const char *text)
{
    FILE *f = fopen(gpus_file, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    generation++;
    struct timespec times[2] = {{.tv_sec = 1700000000 + generation},
                                {.tv_sec = 1700000000 + generation}};
    assert_int_equal(utimensat(AT_FDCWD, gpus_file, times, 0), 0);
}

static const char *read_file(const char *path)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int group_setup(void **state)
{
    (void)state;
    const char *build = getenv("GPUBOX_BUILD_DIR"), *source = getenv("GPUBOX_SOURCE_DIR");
    if (!build || !source) {
        fprintf(stderr, "GPUBOX_BUILD_DIR and GPUBOX_SOURCE_DIR must be set (ctest sets them)\n");
        return -1;
    }
    snprintf(fake_nvml, sizeof(fake_nvml), "%s/fakes/libnvidia-ml.so.1", build);
    snprintf(fake_smi, sizeof(fake_smi), "%s/tests/fakes/nvidia-smi", source);
    strcpy(tmpdir, "/tmp/gpubox-test-usage-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(gpus_file, sizeof(gpus_file), "%s/gpus.txt", tmpdir);
    snprintf(nvml_log, sizeof(nvml_log), "%s/nvml.log", tmpdir);
    log_set_level(LOG_ERROR); /* the samplers log each card that stops answering */
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    unlink(gpus_file);
    unlink(nvml_log);
    rmdir(tmpdir);
    return 0;
}

static int test_setup(void **state)
{
    (void)state;
    setenv("GPUBOX_FAKE_GPUS", gpus_file, 1);
    setenv("GPUBOX_FAKE_NVML_LOG", nvml_log, 1);
    unsetenv("GPUBOX_FAKE_NVML_FAIL");
    unsetenv("GPUBOX_FAKE_SMI_HANG");
    unsetenv("GPUBOX_FAKE_SMI_OUTPUT");
    unlink(nvml_log);
    unlink(gpus_file);
    return 0;
}

/* ---- the scenario both real samplers go through ------------------------- */

#define DEVICES_BUT_A                                                                              \
    "driver_version 535.104.05\n"                                                                  \
    "1 " UUID_B " 40960 ok NVIDIA A100-PCIE-40GB\n"                                                \
    "2 " UUID_C " 81920 ok NVIDIA A100-SXM4-80GB\n"                                                \
    "2.0 " UUID_M " 9856 ok NVIDIA A100-SXM4-80GB MIG 1g.10gb\n"                                   \
    "3 " UUID_D " 40960 lost NVIDIA A100-PCIE-40GB\n"
#define DEVICE_A "0 " UUID_A " 81920 ok NVIDIA A100-SXM4-80GB\n"
#define PROCS_A "process 0 4242 1000 55\nprocess 0 4243 500\n"

/* Card 1 busy, two processes on card 0, one on the MIG instance. */
static const char phase1[] =
    DEVICE_A DEVICES_BUT_A "usage 1 2048 37\n" PROCS_A "process 2.0 5000 300\n";
/* Card 1 idle again, a third process on card 0, an XID on card 1. */
static const char phase2[] = DEVICE_A DEVICES_BUT_A PROCS_A "process 0 4244 700 10\n"
                                                            "process 2.0 5000 300\n"
                                                            "xid 1 79\n";
/* Card 0 gone (its line and its processes). */
static const char phase3[] = DEVICES_BUT_A "process 2.0 5000 300\nxid 1 79\n";
/* Card 0 back, with a new XID of its own. */
static const char phase4[] = DEVICE_A DEVICES_BUT_A PROCS_A "process 2.0 5000 300\n"
                                                            "xid 1 79\nxid 0 48\n";

static const gpu_card_usage *card(const gpu_usage *u, const char *uuid)
{
    for (size_t i = 0; i < u->ncards; i++)
        if (strcmp(u->cards[i].uuid, uuid) == 0)
            return &u->cards[i];
    fail_msg("no card %s in the reading", uuid);
    return NULL;
}

static const gpu_proc_usage *proc(const gpu_usage *u, int pid)
{
    for (size_t i = 0; i < u->nprocs; i++)
        if (u->procs[i].pid == pid)
            return &u->procs[i];
    return NULL;
}

static void assert_card(const gpu_usage *u, const char *uuid, uint64_t mib, int utilization)
{
    const gpu_card_usage *c = card(u, uuid);
    if (!c->present)
        fail_msg("%s not present: %s", uuid, c->problem);
    assert_int_equal(c->memory_used_mib, mib);
    assert_int_equal(c->utilization, utilization);
}

static void assert_absent(const gpu_usage *u, const char *uuid, const char *problem)
{
    const gpu_card_usage *c = card(u, uuid);
    assert_false(c->present);
    assert_string_equal(c->problem, problem);
    assert_int_equal(c->memory_used_mib, 0);
    assert_int_equal(c->utilization, -1);
}

static void assert_proc(const gpu_usage *u, int pid, const char *uuid, uint64_t mib,
                        int utilization)
{
    const gpu_proc_usage *p = proc(u, pid);
    if (!p) {
        fail_msg("no process %d in the reading", pid);
        return;
    }
    assert_string_equal(p->uuid, uuid);
    assert_int_equal(p->memory_mib, mib);
    assert_int_equal(p->utilization, utilization);
}

static void sample(gpu_sampler *s, gpu_usage *u)
{
    gb_err e = GB_ERR_INIT;
    if (gpu_sampler_read(s, u, &e) != 0)
        fail_msg("gpu_sampler_read: %s", e.msg);
}

/* ---- simulated ---------------------------------------------------------- */

static void test_simulated_sampler(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load("2xT4-16GB,1xH100-80GB", &inv, &e), 0);
    assert_int_equal(gpu_sampler_open(NULL, &inv, &s, &e), 0);
    for (int round = 0; round < 2; round++) {
        sample(s, &u);
        assert_int_equal(u.ncards, 3);
        for (size_t i = 0; i < u.ncards; i++) {
            assert_string_equal(u.cards[i].uuid, inv.devices[i].uuid);
            assert_true(u.cards[i].present);
            assert_int_equal(u.cards[i].memory_used_mib, 0);
            assert_int_equal(u.cards[i].utilization, 0);
        }
        assert_int_equal(u.nprocs, 0);
        assert_null(u.procs);
        assert_int_equal(u.nxids, 0);
        gpu_usage_free(&u);
        assert_null(u.cards);
        assert_int_equal(u.ncards, 0);
    }
    gpu_sampler_close(s);
    gpu_inventory_free(&inv);

    /* No GPU at all: a sampler with nothing to say. */
    gpu_inventory none = {.source = "none"};
    assert_int_equal(gpu_sampler_open(NULL, &none, &s, &e), 0);
    sample(s, &u);
    assert_int_equal(u.ncards, 0);
    gpu_usage_free(&u);
    gpu_sampler_close(s);
    gpu_sampler_close(NULL);
    gpu_usage_free(NULL);

    gpu_inventory odd = {.source = "carrier-pigeon"};
    assert_int_equal(gpu_sampler_open(NULL, &odd, &s, &e), -1);
    assert_null(s);
    assert_non_null(strstr(e.msg, "carrier-pigeon"));
}

/* ---- NVML --------------------------------------------------------------- */

static void open_nvml(gpu_inventory *inv, gpu_sampler **s)
{
    gb_err e = GB_ERR_INIT;
    gpu_config cfg = {.source = GPU_SOURCE_NVML, .nvml_library = fake_nvml};
    assert_int_equal(gpu_nvml_load(fake_nvml, inv, &e), 0);
    assert_int_equal(inv->n, 5);
    unlink(nvml_log);
    if (gpu_sampler_open(&cfg, inv, s, &e) != 0)
        fail_msg("gpu_sampler_open: %s", e.msg);
}

/* The phase 1 reading, as NVML gives it. */
static void check_nvml_phase1(const gpu_usage *u)
{
    assert_int_equal(u->ncards, 5);
    assert_string_equal(u->cards[3].uuid, UUID_M); /* inventory order */
    assert_card(u, UUID_A, 819 + 1000 + 500, 0);   /* reservation + processes */
    assert_card(u, UUID_B, 2048, 37);
    assert_card(u, UUID_C, 819, -1); /* MIG mode: no utilization */
    assert_card(u, UUID_M, 98 + 300, -1);
    assert_absent(u, UUID_D, "GPU is lost");
    assert_int_equal(u->nprocs, 3);
    assert_proc(u, 4242, UUID_A, 1000, 55);
    assert_proc(u, 4243, UUID_A, 500, 0); /* no sample: idle */
    assert_proc(u, 5000, UUID_M, 300, -1);
    assert_int_equal(u->nxids, 0);
}

static void test_nvml_sampler(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    write_desc(phase1);
    open_nvml(&inv, &s);
    sample(s, &u);
    check_nvml_phase1(&u);
    gpu_usage_free(&u);

    write_desc(phase2);
    sample(s, &u);
    assert_card(&u, UUID_A, 819 + 2200, 0);
    assert_card(&u, UUID_B, 409, 0);
    assert_int_equal(u.nprocs, 4);
    assert_proc(&u, 4244, UUID_A, 700, 10);
    assert_int_equal(u.nxids, 1);
    assert_string_equal(u.xids[0].uuid, UUID_B);
    assert_int_equal(u.xids[0].xid, 79);
    gpu_usage_free(&u);

    /* Nothing changed: the XID is not delivered again. */
    sample(s, &u);
    assert_int_equal(u.nxids, 0);
    assert_int_equal(u.nprocs, 4);
    gpu_usage_free(&u);

    write_desc(phase3);
    sample(s, &u);
    assert_absent(&u, UUID_A, "GPU is lost");
    assert_card(&u, UUID_B, 409, 0);
    assert_int_equal(u.nprocs, 1);
    assert_proc(&u, 5000, UUID_M, 300, -1);
    assert_int_equal(u.nxids, 0);
    gpu_usage_free(&u);

    write_desc(phase4);
    sample(s, &u);
    assert_card(&u, UUID_A, 819 + 1500, 0);
    assert_proc(&u, 4242, UUID_A, 1000, 55);
    assert_int_equal(u.nxids, 1);
    assert_string_equal(u.xids[0].uuid, UUID_A);
    assert_int_equal(u.xids[0].xid, 48);
    gpu_usage_free(&u);

    gpu_sampler_close(s);
    /* One session for the sampler's life, closed at the end. */
    assert_string_equal(read_file(nvml_log), "nvmlInit_v2\nnvmlDeviceGetCount_v2\nnvmlShutdown\n");
    gpu_inventory_free(&inv);
}

/* Old drivers: the process list through the plain name (no MIG fields). */
static void test_nvml_sampler_old_process_list(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    write_desc(phase1);
    setenv("GPUBOX_FAKE_NVML_FAIL", "procs_v2", 1);
    open_nvml(&inv, &s);
    sample(s, &u);
    check_nvml_phase1(&u);
    gpu_usage_free(&u);
    gpu_sampler_close(s);
    gpu_inventory_free(&inv);
}

static void test_nvml_sampler_failures(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    gb_err e = GB_ERR_INIT;
    write_desc(phase1);
    assert_int_equal(gpu_nvml_load(fake_nvml, &inv, &e), 0);

    gpu_config cfg = {.source = GPU_SOURCE_NVML, .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
    assert_int_equal(gpu_sampler_open(&cfg, &inv, &s, &e), -1);
    assert_null(s);
    assert_non_null(strstr(e.msg, "GPU usage sampling"));
    assert_non_null(strstr(e.msg, "cannot load /nonexistent/libnvidia-ml.so.1"));

    cfg.nvml_library = fake_nvml;
    unlink(gpus_file); /* the driver went away since the inventory was read */
    assert_int_equal(gpu_sampler_open(&cfg, &inv, &s, &e), -1);
    assert_non_null(strstr(e.msg, "failed to initialize: Driver Not Loaded"));

    /* A device of the inventory NVML no longer lists is reported, not dropped. */
    write_desc(phase3);
    assert_int_equal(gpu_sampler_open(&cfg, &inv, &s, &e), 0);
    sample(s, &u);
    assert_int_equal(u.ncards, 5);
    assert_absent(&u, UUID_A, "not listed by NVML");
    assert_card(&u, UUID_B, 409, 0);
    assert_int_equal(u.nxids, 1); /* delivered in this session, which is new */
    gpu_usage_free(&u);
    gpu_sampler_close(s);
    gpu_inventory_free(&inv);
}

/* ---- nvidia-smi --------------------------------------------------------- */

static void open_smi(gpu_inventory *inv, gpu_sampler **s)
{
    gb_err e = GB_ERR_INIT;
    gpu_config cfg = {.source = GPU_SOURCE_SMI, .nvidia_smi = fake_smi};
    assert_int_equal(gpu_smi_load(fake_smi, inv, &e), 0);
    assert_int_equal(inv->n, 4); /* cards only */
    if (gpu_sampler_open(&cfg, inv, s, &e) != 0)
        fail_msg("gpu_sampler_open: %s", e.msg);
}

static void test_smi_sampler(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    write_desc(phase1);
    open_smi(&inv, &s);
    sample(s, &u);
    assert_int_equal(u.ncards, 4);
    assert_card(&u, UUID_A, 819 + 1500, 0);
    assert_card(&u, UUID_B, 2048, 37);
    assert_card(&u, UUID_C, 819, 0);
    assert_absent(&u, UUID_D, "nvidia-smi: [Unknown Error]");
    assert_int_equal(u.nprocs, 3);
    assert_proc(&u, 4242, UUID_A, 1000, -1); /* no per-process utilization in CSV */
    assert_proc(&u, 4243, UUID_A, 500, -1);
    assert_proc(&u, 5000, UUID_C, 300, -1); /* MIG instance: on its card */
    assert_int_equal(u.nxids, 0);
    gpu_usage_free(&u);

    write_desc(phase2);
    sample(s, &u);
    assert_card(&u, UUID_A, 819 + 2200, 0);
    assert_card(&u, UUID_B, 409, 0);
    assert_int_equal(u.nprocs, 4);
    assert_proc(&u, 4244, UUID_A, 700, -1);
    assert_int_equal(u.nxids, 0);
    gpu_usage_free(&u);

    write_desc(phase3);
    sample(s, &u);
    assert_absent(&u, UUID_A, "not listed by nvidia-smi");
    assert_card(&u, UUID_B, 409, 0);
    assert_int_equal(u.nprocs, 1);
    gpu_usage_free(&u);

    write_desc(phase4);
    sample(s, &u);
    assert_card(&u, UUID_A, 819 + 1500, 0);
    assert_int_equal(u.nprocs, 3);
    gpu_usage_free(&u);
    gpu_sampler_close(s);
    gpu_inventory_free(&inv);
}

static void test_smi_sampler_failures(void **state)
{
    (void)state;
    gpu_inventory inv;
    gpu_sampler *s = NULL;
    gpu_usage u;
    gb_err e = GB_ERR_INIT;
    write_desc(phase1);

    gpu_config cfg = {.source = GPU_SOURCE_SMI, .nvidia_smi = "/nonexistent/nvidia-smi"};
    assert_int_equal(gpu_smi_load(fake_smi, &inv, &e), 0);
    assert_int_equal(gpu_sampler_open(&cfg, &inv, &s, &e), -1);
    assert_non_null(strstr(e.msg, "GPU usage sampling: cannot run /nonexistent/nvidia-smi"));
    gpu_inventory_free(&inv);

    open_smi(&inv, &s);
    /* The tool fails: nothing could be read, and *out holds nothing. */
    unlink(gpus_file);
    assert_int_equal(gpu_sampler_read(s, &u, &e), -1);
    assert_non_null(strstr(e.msg, "exited with status 9"));
    assert_null(u.cards);
    assert_int_equal(u.ncards, 0);

    /* Garbled output is an error naming the line. */
    char garbled[160];
    snprintf(garbled, sizeof(garbled), "%s/garbled.out", tmpdir);
    FILE *f = fopen(garbled, "w");
    assert_non_null(f);
    fputs(UUID_A ", 1, 2\nSegmentation fault\n", f);
    fclose(f);
    setenv("GPUBOX_FAKE_SMI_OUTPUT", garbled, 1);
    assert_int_equal(gpu_sampler_read(s, &u, &e), -1);
    assert_non_null(strstr(e.msg, "line 2"));
    assert_non_null(strstr(e.msg, "Segmentation fault"));
    unsetenv("GPUBOX_FAKE_SMI_OUTPUT");
    unlink(garbled);

    /* A hung tool is killed at the sampler's time limit (5 s). */
    write_desc(phase1);
    setenv("GPUBOX_FAKE_SMI_HANG", "1", 1);
    time_t start = time(NULL);
    assert_int_equal(gpu_sampler_read(s, &u, &e), -1);
    assert_true(time(NULL) - start < 9);
    assert_non_null(strstr(e.msg, "did not finish within"));
    unsetenv("GPUBOX_FAKE_SMI_HANG");

    sample(s, &u); /* and the next reading works again */
    assert_card(&u, UUID_B, 2048, 37);
    gpu_usage_free(&u);
    gpu_sampler_close(s);
    gpu_inventory_free(&inv);
}

/* ---- the parsers -------------------------------------------------------- */

static gpu_device two_devices[] = {
    {.uuid = "GPU-a0", .index = 0, .healthy = true},
    {.uuid = "GPU-b1", .index = 1, .healthy = true},
};
static const gpu_inventory two = {.devices = two_devices, .n = 2, .source = "nvidia-smi"};

static void test_parse_card_usage(void **state)
{
    (void)state;
    gpu_usage u;
    gb_err e = GB_ERR_INIT;

    /* Header, units, CRLF, padding, blank lines, another card ignored. */
    assert_int_equal(gpu_smi_parse_card_usage("uuid, memory.used [MiB], utilization.gpu [%]\r\n"
                                              "\n GPU-b1 , 15360 MiB , 100 %\r\n"
                                              "GPU-zz9, 1, 1\n"
                                              "GPU-a0,0,0",
                                              &two, &u, &e),
                     0);
    assert_int_equal(u.ncards, 2);
    assert_card(&u, "GPU-a0", 0, 0);
    assert_card(&u, "GPU-b1", 15360, 100);
    assert_int_equal(u.nprocs, 0);
    gpu_usage_free(&u);

    /* Unreadable values: memory -> not answering; utilization -> unknown;
     * missing -> not answering; no UUID -> nothing to say. */
    assert_int_equal(gpu_smi_parse_card_usage("GPU-a0, [Unknown Error], [Unknown Error]\n"
                                              "[N/A], 5, 5\n",
                                              &two, &u, &e),
                     0);
    assert_absent(&u, "GPU-a0", "nvidia-smi: [Unknown Error]");
    assert_absent(&u, "GPU-b1", "not listed by nvidia-smi");
    gpu_usage_free(&u);
    assert_int_equal(gpu_smi_parse_card_usage("GPU-b1, 7, [N/A]\n", &two, &u, &e), 0);
    assert_card(&u, "GPU-b1", 7, -1);
    gpu_usage_free(&u);

    static const struct {
        const char *csv, *expect;
    } bad[] = {
        {"garbage", "line 1: expected 3 comma-separated fields"},
        {"GPU-a0, 1", "found 2"},
        {"GPU-a0, 1, 2, 3", "found 4"},
        {"GPU-a0, 1, 2\nabc, 1, 2", "line 2: 'abc' is not a GPU UUID"},
        {"GPU-a 0, 1, 2", "is not a GPU UUID"},
        {"GPU-a0, lots, 2", "memory.used 'lots' is not a number of MiB"},
        {"GPU-a0, 12 GB, 2", "memory.used '12 GB'"},
        {"GPU-a0, 9999999999, 2", "memory.used"},
        {"GPU-a0, -1, 2", "memory.used '-1'"},
        {"GPU-a0, 1, 101", "utilization.gpu '101' is not a percentage"},
        {"GPU-a0, 1, 5 MiB", "utilization.gpu '5 MiB'"},
        {"GPU-a0, 1, \x01", "utilization.gpu '?'"},
        {"GPU-a0, 1, 2\nGPU-a0, 1, 2", "line 2: GPU GPU-a0 listed twice"},
        {"\n\nNVIDIA-SMI has failed", "line 3"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        if (gpu_smi_parse_card_usage(bad[i].csv, &two, &u, &e) != -1 ||
            !strstr(e.msg, bad[i].expect))
            fail_msg("csv %zu: expected an error with \"%s\", got \"%s\"", i, bad[i].expect, e.msg);
        assert_int_equal(e.code, ERR_INTERNAL);
        assert_int_equal(u.ncards, 0);
        assert_null(u.cards);
    }
}

static void test_parse_apps(void **state)
{
    (void)state;
    gpu_usage u;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_smi_parse_card_usage("GPU-a0, 1, 2\nGPU-b1, 3, 4\n", &two, &u, &e), 0);
    assert_int_equal(gpu_smi_parse_apps("", &u, &e), 0);
    assert_int_equal(gpu_smi_parse_apps("No running processes found\n", &u, &e), 0);
    assert_int_equal(u.nprocs, 0);
    assert_int_equal(gpu_smi_parse_apps("gpu_uuid, pid, used_gpu_memory [MiB]\r\n"
                                        "GPU-a0, 4242, 1000 MiB\r\n"
                                        " GPU-b1 ,1,[N/A]\n"
                                        "MIG-c2/1/0, 2147483647, 0",
                                        &u, &e),
                     0);
    assert_int_equal(u.nprocs, 3);
    assert_proc(&u, 4242, "GPU-a0", 1000, -1);
    assert_proc(&u, 1, "GPU-b1", 0, -1);
    assert_proc(&u, 2147483647, "MIG-c2/1/0", 0, -1);
    /* Appended to what is there; many of them. */
    for (int pid = 10; pid < 60; pid++) {
        char line[64];
        snprintf(line, sizeof(line), "GPU-b1, %d, %d\n", pid, pid);
        assert_int_equal(gpu_smi_parse_apps(line, &u, &e), 0);
    }
    assert_int_equal(u.nprocs, 53);
    assert_proc(&u, 59, "GPU-b1", 59, -1);

    static const struct {
        const char *csv, *expect;
    } bad[] = {
        {"garbage", "line 1: expected 3 comma-separated fields"},
        {"GPU-a0, 1", "found 2"},
        {"GPU-a0, 1, 2\nfoo, 1, 2", "line 2: 'foo' is not a GPU UUID"},
        {"[N/A], 1, 2", "'[N/A]' is not a GPU UUID"},
        {"GPU-a0, x, 2", "pid 'x' is not a PID"},
        {"GPU-a0, 0, 2", "pid '0'"},
        {"GPU-a0, -5, 2", "pid '-5'"},
        {"GPU-a0, 2147483648, 2", "pid '2147483648'"},
        {"GPU-a0, 99999999999, 2", "pid '99999999999'"},
        {"GPU-a0, 1, lots", "used_memory 'lots' is not a number of MiB"},
        {"GPU-a0, 1, 2\nGPU-a0, 1, 2, 3", "line 2: expected 3"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        if (gpu_smi_parse_apps(bad[i].csv, &u, &e) != -1 || !strstr(e.msg, bad[i].expect))
            fail_msg("csv %zu: expected an error with \"%s\", got \"%s\"", i, bad[i].expect, e.msg);
        assert_int_equal(u.nprocs, 53); /* left as it was */
    }
    gpu_usage_free(&u);

    /* Into an empty reading. */
    memset(&u, 0, sizeof(u));
    assert_int_equal(gpu_smi_parse_apps("GPU-a0, 7, 8\n", &u, &e), 0);
    assert_int_equal(u.nprocs, 1);
    gpu_usage_free(&u);
}

/* Random edits of a valid text (flipped, inserted, deleted bytes, cut
 * short): either parser must answer a reading or an error with a message,
 * never crash, leak or read out of bounds (ASan watches). */
static size_t mutate(char *buf, size_t len, size_t cap, uint64_t *rng, int edits)
{
    static const char alphabet[] = ",\r\n \t[]-0123456789GPUMiBNA/%\x01\xff";
    for (int k = 0; k < edits; k++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t at = (size_t)(*rng >> 33) % (len + 1);
        char c = alphabet[(*rng >> 20) % (sizeof(alphabet) - 1)];
        switch ((*rng >> 8) % 4) {
        case 0:
            if (at < len)
                buf[at] = c;
            break;
        case 1:
            if (len + 1 < cap) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = c;
                len++;
            }
            break;
        case 2:
            if (at < len) {
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
            }
            break;
        default:
            len = at;
        }
    }
    buf[len] = '\0';
    return len;
}

static void test_parse_mutations(void **state)
{
    (void)state;
    static const char cards_seed[] = "uuid, memory.used [MiB], utilization.gpu [%]\r\n"
                                     "GPU-a0, 1024 MiB, 37 %\r\n"
                                     "GPU-b1, [Unknown Error], [N/A]\n";
    static const char apps_seed[] = "gpu_uuid, pid, used_gpu_memory [MiB]\n"
                                    "GPU-a0, 4242, 1000 MiB\n"
                                    "GPU-b1, 17, [N/A]\n";
    uint64_t rng = 0x853c49e6748fea9bULL;
    char buf[512];
    for (int iter = 0; iter < 20000; iter++) {
        bool apps = iter % 2;
        const char *seed = apps ? apps_seed : cards_seed;
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        mutate(buf, len, sizeof(buf), &rng, 1 + iter % 8);
        gpu_usage u;
        gb_err e = GB_ERR_INIT;
        if (apps) {
            memset(&u, 0, sizeof(u));
            if (gpu_smi_parse_apps(buf, &u, &e) == 0) {
                for (size_t i = 0; i < u.nprocs; i++)
                    assert_true(u.procs[i].pid > 0);
            } else {
                assert_true(e.msg[0] != '\0');
                assert_int_equal(u.nprocs, 0);
            }
        } else if (gpu_smi_parse_card_usage(buf, &two, &u, &e) == 0) {
            assert_int_equal(u.ncards, 2);
            for (size_t i = 0; i < u.ncards; i++)
                assert_true(u.cards[i].utilization >= -1 && u.cards[i].utilization <= 100);
        } else {
            assert_true(e.msg[0] != '\0');
            assert_int_equal(u.ncards, 0);
        }
        gpu_usage_free(&u);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_simulated_sampler, test_setup),
        cmocka_unit_test_setup(test_nvml_sampler, test_setup),
        cmocka_unit_test_setup(test_nvml_sampler_old_process_list, test_setup),
        cmocka_unit_test_setup(test_nvml_sampler_failures, test_setup),
        cmocka_unit_test_setup(test_smi_sampler, test_setup),
        cmocka_unit_test_setup(test_smi_sampler_failures, test_setup),
        cmocka_unit_test_setup(test_parse_card_usage, test_setup),
        cmocka_unit_test_setup(test_parse_apps, test_setup),
        cmocka_unit_test_setup(test_parse_mutations, test_setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
