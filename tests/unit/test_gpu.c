/*
 * test_gpu.c - the GPU inventory: NVML through the real dlopen of the fake
 * libnvidia-ml.so.1, nvidia-smi through the fake script, both answering from
 * one description file this test writes; the CSV parser's edge cases (and a
 * mutation run over it); simulated specs; AUTO's fallbacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "util/log.h"

static char tmpdir[64];
static char gpus_file[128], nvml_log[128], smi_output[128];
static char fake_nvml[1024], fake_smi[1100], fake_dir[1024];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole file, or "" when absent; static buffer. */
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
    snprintf(fake_dir, sizeof(fake_dir), "%s/tests/fakes", source);
    snprintf(fake_smi, sizeof(fake_smi), "%s/nvidia-smi", fake_dir);
    strcpy(tmpdir, "/tmp/gpubox-test-gpu-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(gpus_file, sizeof(gpus_file), "%s/gpus.txt", tmpdir);
    snprintf(nvml_log, sizeof(nvml_log), "%s/nvml.log", tmpdir);
    snprintf(smi_output, sizeof(smi_output), "%s/smi.out", tmpdir);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    unlink(gpus_file);
    unlink(nvml_log);
    unlink(smi_output);
    rmdir(tmpdir);
    return 0;
}

/* Every test starts from the same environment: the description file named,
 * no fault injected, an empty call log. */
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

static const char four_cards[] =
    "# a host with four A100s, listed out of order, one of them lost\n"
    "driver_version 535.104.05\n"
    "\n"
    "2 GPU-cccccccc-2222-4000-8000-000000000002 81920 ok NVIDIA A100-SXM4-80GB\n"
    "0 GPU-aaaaaaaa-0000-4000-8000-000000000000 81920 ok NVIDIA A100-SXM4-80GB\n"
    "3 GPU-dddddddd-3333-4000-8000-000000000003 40960 lost NVIDIA A100-PCIE-40GB\n"
    "1 GPU-bbbbbbbb-1111-4000-8000-000000000001 40960 ok NVIDIA A100-PCIE-40GB\n";

static void assert_same_devices(const gpu_inventory *a, const gpu_inventory *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const gpu_device *x = &a->devices[i], *y = &b->devices[i];
        assert_string_equal(x->uuid, y->uuid);
        assert_int_equal(x->index, y->index);
        assert_string_equal(x->model, y->model);
        assert_int_equal(x->memory_mib, y->memory_mib);
        assert_int_equal(x->healthy, y->healthy);
        assert_int_equal(x->is_mig, y->is_mig);
        assert_int_equal(x->mig_enabled, y->mig_enabled);
    }
    assert_string_equal(a->driver_version, b->driver_version);
}

static void test_nvml_and_smi_agree(void **state)
{
    (void)state;
    write_file(gpus_file, four_cards);
    gpu_inventory nvml, smi;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_nvml_load(fake_nvml, &nvml, &e), 0);
    assert_int_equal(gpu_smi_load(fake_smi, &smi, &e), 0);
    assert_string_equal(nvml.source, "nvml");
    assert_string_equal(smi.source, "nvidia-smi");
    assert_false(nvml.simulated);

    assert_int_equal(nvml.n, 4);
    for (size_t i = 0; i < nvml.n; i++)
        assert_int_equal(nvml.devices[i].index, (int)i);
    const gpu_device *d0 = &nvml.devices[0], *d3 = &nvml.devices[3];
    assert_string_equal(d0->uuid, "GPU-aaaaaaaa-0000-4000-8000-000000000000");
    assert_string_equal(d0->model, "NVIDIA A100-SXM4-80GB");
    assert_int_equal(d0->memory_mib, 81920);
    assert_true(d0->healthy);
    assert_false(d0->is_mig);
    /* The lost card is listed, unhealthy, not dropped. */
    assert_string_equal(d3->uuid, "GPU-dddddddd-3333-4000-8000-000000000003");
    assert_false(d3->healthy);
    assert_int_equal(d3->memory_mib, 0);
    assert_string_equal(nvml.driver_version, "535.104.05");

    assert_same_devices(&nvml, &smi);

    /* Versioned entry points were used and the session was closed. */
    assert_string_equal(read_file(nvml_log), "nvmlInit_v2\nnvmlDeviceGetCount_v2\nnvmlShutdown\n");
    gpu_inventory_free(&nvml);
    gpu_inventory_free(&smi);
    assert_null(nvml.devices);
    assert_int_equal(nvml.n, 0);
}

static void test_nvml_mig(void **state)
{
    (void)state;
    write_file(gpus_file,
               "0 GPU-aaaaaaaa-0000-4000-8000-000000000000 81920 ok NVIDIA A100-SXM4-80GB\n"
               "1 GPU-bbbbbbbb-1111-4000-8000-000000000001 81920 ok NVIDIA A100-SXM4-80GB\n"
               "1.3 MIG-33333333-1111-4000-8000-000000000003 19968 ok NVIDIA A100-SXM4-80GB "
               "MIG 2g.20gb\n"
               "1.0 MIG-00000000-1111-4000-8000-000000000000 9856 ok NVIDIA A100-SXM4-80GB "
               "MIG 1g.10gb\n");
    gpu_inventory inv, smi;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_nvml_load(fake_nvml, &inv, &e), 0);
    assert_int_equal(inv.n, 4);
    assert_false(inv.devices[0].mig_enabled);
    const gpu_device *card = &inv.devices[1], *m0 = &inv.devices[2], *m3 = &inv.devices[3];
    assert_true(card->mig_enabled);
    assert_false(card->is_mig);
    assert_true(m0->is_mig && m3->is_mig);
    assert_string_equal(m0->uuid, "MIG-00000000-1111-4000-8000-000000000000");
    assert_string_equal(m3->uuid, "MIG-33333333-1111-4000-8000-000000000003");
    assert_int_equal(m0->mig_index, 0);
    assert_int_equal(m3->mig_index, 3);
    assert_int_equal(m0->index, 1);
    assert_string_equal(m0->parent_uuid, card->uuid);
    assert_string_equal(m3->parent_uuid, card->uuid);
    assert_int_equal(m0->memory_mib, 9856);
    assert_string_equal(m3->model, "NVIDIA A100-SXM4-80GB MIG 2g.20gb");
    assert_ptr_equal(gpu_inventory_find(&inv, m3->uuid), m3);
    assert_null(gpu_inventory_find(&inv, "GPU-nope"));
    assert_string_equal(inv.driver_version, "");

    /* nvidia-smi lists the cards only, but knows card 1 is in MIG mode. */
    assert_int_equal(gpu_smi_load(fake_smi, &smi, &e), 0);
    assert_int_equal(smi.n, 2);
    assert_false(smi.devices[0].mig_enabled);
    assert_true(smi.devices[1].mig_enabled);
    gpu_inventory_free(&inv);
    gpu_inventory_free(&smi);
}

static void test_nvml_failures(void **state)
{
    (void)state;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;

    assert_int_equal(gpu_nvml_load("/nonexistent/libnvidia-ml.so.1", &inv, &e), -1);
    assert_non_null(strstr(e.msg, "cannot load /nonexistent/libnvidia-ml.so.1"));
    assert_non_null(strstr(e.msg, "is the NVIDIA driver installed?"));
    assert_non_null(strstr(e.msg, "--gpu-source simulated"));
    assert_int_equal(inv.n, 0);
    assert_null(inv.devices);

    /* A library that is not NVML at all. */
    assert_int_equal(gpu_nvml_load("libc.so.6", &inv, &e), -1);
    assert_non_null(strstr(e.msg, "not a usable NVML library"));
    assert_non_null(strstr(e.msg, "nvmlInit_v2"));

    /* No description file: the fake behaves like a host without the driver. */
    assert_int_equal(gpu_nvml_load(fake_nvml, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "failed to initialize: Driver Not Loaded"));

    write_file(gpus_file, four_cards);
    setenv("GPUBOX_FAKE_NVML_FAIL", "init", 1);
    unlink(nvml_log);
    assert_int_equal(gpu_nvml_load(fake_nvml, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "Driver Not Loaded"));
    assert_string_equal(read_file(nvml_log), "nvmlInit_v2\n"); /* no shutdown without init */

    setenv("GPUBOX_FAKE_NVML_FAIL", "count", 1);
    unlink(nvml_log);
    assert_int_equal(gpu_nvml_load(fake_nvml, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "nvmlDeviceGetCount"));
    assert_non_null(strstr(e.msg, "Unknown Error"));
    assert_string_equal(read_file(nvml_log), "nvmlInit_v2\nnvmlDeviceGetCount_v2\nnvmlShutdown\n");
    assert_int_equal(inv.n, 0);
}

static void test_smi_failures(void **state)
{
    (void)state;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;

    assert_int_equal(gpu_smi_load("/nonexistent/nvidia-smi", &inv, &e), -1);
    assert_non_null(strstr(e.msg, "cannot run /nonexistent/nvidia-smi: No such file"));
    assert_non_null(strstr(e.msg, "--gpu-source simulated"));
    assert_int_equal(gpu_smi_load(tmpdir, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "not a file"));

    /* A bare name is looked up on PATH. */
    char *saved = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", tmpdir, 1);
    assert_int_equal(gpu_smi_load("nvidia-smi", &inv, &e), -1);
    assert_non_null(strstr(e.msg, "nvidia-smi not found on PATH"));
    char path[2048];
    snprintf(path, sizeof(path), "%s:%s", fake_dir, saved);
    setenv("PATH", path, 1);
    write_file(gpus_file, four_cards);
    assert_int_equal(gpu_smi_load(NULL, &inv, &e), 0);
    assert_int_equal(inv.n, 4);
    gpu_inventory_free(&inv);
    setenv("PATH", saved, 1);
    free(saved);

    /* The tool runs but cannot reach the driver: its own words come back. */
    unlink(gpus_file);
    assert_int_equal(gpu_smi_load(fake_smi, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "exited with status 9"));
    assert_non_null(strstr(e.msg, "NVIDIA-SMI has failed"));
    assert_non_null(strstr(e.msg, "and running; is the NVIDIA driver installed?"));
    assert_int_equal(inv.n, 0);

    /* Garbled output is refused, naming the line. */
    write_file(smi_output, "0, GPU-aaaaaaaa-0000-4000-8000-000000000000, A100, 81920\n"
                           "Segmentation fault\n");
    setenv("GPUBOX_FAKE_SMI_OUTPUT", smi_output, 1);
    assert_int_equal(gpu_smi_load(fake_smi, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "line 2"));
    assert_non_null(strstr(e.msg, "Segmentation fault"));
    unsetenv("GPUBOX_FAKE_SMI_OUTPUT");

    /* A hung tool is killed at the time limit. */
    setenv("GPUBOX_FAKE_SMI_HANG", "1", 1);
    time_t start = time(NULL);
    assert_int_equal(gpu_smi_load_timeout(fake_smi, 300, &inv, &e), -1);
    assert_true(time(NULL) - start < 5);
    assert_non_null(strstr(e.msg, "did not finish within 300 ms; killed it"));
    assert_int_equal(inv.n, 0);
}

static void test_csv_edge_cases(void **state)
{
    (void)state;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;

    /* Header, units, CRLF, padding, lines out of order, names with spaces. */
    assert_int_equal(gpu_smi_parse_csv("index, uuid, name, memory.total [MiB]\r\n"
                                       "1, GPU-b1, Tesla T4 , 15360 MiB\r\n"
                                       "  0 ,GPU-a0,NVIDIA A100 80GB PCIe,81920\r\n",
                                       &inv, &e),
                     0);
    assert_int_equal(inv.n, 2);
    assert_string_equal(inv.source, "nvidia-smi");
    assert_int_equal(inv.devices[0].index, 0);
    assert_string_equal(inv.devices[0].uuid, "GPU-a0");
    assert_string_equal(inv.devices[0].model, "NVIDIA A100 80GB PCIe");
    assert_int_equal(inv.devices[0].memory_mib, 81920);
    assert_string_equal(inv.devices[1].model, "Tesla T4");
    assert_int_equal(inv.devices[1].memory_mib, 15360);
    assert_true(inv.devices[1].healthy);
    gpu_inventory_free(&inv);

    /* No trailing newline, blank lines, tabs. */
    assert_int_equal(gpu_smi_parse_csv("\n \n0,\tGPU-a0,\tA100,\t1024", &inv, &e), 0);
    assert_int_equal(inv.n, 1);
    assert_int_equal(inv.devices[0].memory_mib, 1024);
    gpu_inventory_free(&inv);

    /* Unreadable values: the card is listed unhealthy; without a UUID it is left out. */
    assert_int_equal(gpu_smi_parse_csv("0, GPU-a0, A100, [N/A]\n"
                                       "1, GPU-b1, [Unknown Error], [Unknown Error]\n"
                                       "2, [N/A], A100, 81920\n"
                                       "3, GPU-d3, A100, 81920\n",
                                       &inv, &e),
                     0);
    assert_int_equal(inv.n, 3);
    assert_false(inv.devices[0].healthy);
    assert_string_equal(inv.devices[0].model, "A100");
    assert_int_equal(inv.devices[0].memory_mib, 0);
    assert_false(inv.devices[1].healthy);
    assert_string_equal(inv.devices[1].model, "");
    assert_true(inv.devices[2].healthy);
    assert_string_equal(inv.devices[2].uuid, "GPU-d3");
    gpu_inventory_free(&inv);

    /* No GPU at all is not an error. */
    assert_int_equal(gpu_smi_parse_csv("", &inv, &e), 0);
    assert_int_equal(inv.n, 0);
    assert_int_equal(gpu_smi_parse_csv("index, uuid, name, memory.total [MiB]\n", &inv, &e), 0);
    assert_int_equal(inv.n, 0);

    static const struct {
        const char *csv, *expect;
    } bad[] = {
        {"garbage", "line 1: expected 4 comma-separated fields"},
        {"0, GPU-a0, A100", "found 3"},
        {"0, GPU-a0, A100, 1, 2", "found 5"},
        {"0, GPU-a0, A100, 1024\nx, GPU-b1, A100, 1024", "line 2: index 'x' is not a number"},
        {"-1, GPU-a0, A100, 1024", "index '-1'"},
        {"99999999999, GPU-a0, A100, 1024", "index '99999999999'"},
        {"0, abc, A100, 1024", "'abc' is not a GPU UUID"},
        {"0, GPU-a b, A100, 1024", "is not a GPU UUID"},
        {"0, GPU-a0, A100, lots", "memory.total 'lots' is not a number of MiB"},
        {"0, GPU-a0, A100, 81920 GB", "memory.total '81920 GB'"},
        {"0, GPU-a0, A100, 9999999999", "memory.total"},
        {"0, GPU-a0, A\x01"
         "100, 1024",
         "name 'A?100' is not printable"},
        {"0, GPU-a0, A100, 1024\n0, GPU-b1, A100, 1024", "line 2: GPU index 0 listed twice"},
        {"0, GPU-a0, A100, 1024\n1, GPU-a0, A100, 1024", "line 2: GPU GPU-a0 listed twice"},
        {"0, GPU-a0, A100, 1024\nindex, uuid, name, memory.total", "line 2: index 'index'"},
        {"\n\n\nNVIDIA-SMI has failed", "line 4"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        if (gpu_smi_parse_csv(bad[i].csv, &inv, &e) != -1 || !strstr(e.msg, bad[i].expect))
            fail_msg("csv %zu: expected an error with \"%s\", got \"%s\"", i, bad[i].expect, e.msg);
        assert_int_equal(inv.n, 0);
        assert_null(inv.devices);
    }
}

/* Mutations of a valid CSV (flipped, inserted, deleted, duplicated bytes):
 * the parser must never crash, leak or read out of bounds (ASan watches),
 * and must answer either an inventory or an error with a message. */
static void test_csv_mutations(void **state)
{
    (void)state;
    static const char seed[] =
        "index, uuid, name, memory.total [MiB]\r\n"
        "0, GPU-aaaaaaaa-0000-4000-8000-000000000000, NVIDIA A100, 81920 MiB\r\n"
        "1, GPU-bbbbbbbb-1111-4000-8000-000000000001, [N/A], [N/A]\n";
    static const char alphabet[] = ",\r\n \t[]-0123456789GPUMiBNA/\x01\xff";
    uint64_t rng = 0x853c49e6748fea9bULL;
    char buf[512];
    enum log_level saved = log_get_level();
    log_set_level(LOG_ERROR); /* the parser warns about each unhealthy card */
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = sizeof(seed) - 1;
        memcpy(buf, seed, len);
        int edits = 1 + iter % 8;
        for (int k = 0; k < edits; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = (size_t)(rng >> 33) % (len + 1);
            char c = alphabet[(rng >> 20) % (sizeof(alphabet) - 1)];
            switch ((rng >> 8) % 4) {
            case 0: /* replace */
                if (at < len)
                    buf[at] = c;
                break;
            case 1: /* insert */
                if (len + 1 < sizeof(buf)) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = c;
                    len++;
                }
                break;
            case 2: /* delete */
                if (at < len) {
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                }
                break;
            default: /* truncate */
                len = at;
            }
        }
        buf[len] = '\0';
        gpu_inventory inv;
        gb_err e = GB_ERR_INIT;
        if (gpu_smi_parse_csv(buf, &inv, &e) == 0) {
            assert_true(inv.n <= 2);
            for (size_t i = 0; i < inv.n; i++)
                assert_true(strncmp(inv.devices[i].uuid, "GPU-", 4) == 0 ||
                            strncmp(inv.devices[i].uuid, "MIG-", 4) == 0);
            gpu_inventory_free(&inv);
        } else {
            assert_true(e.msg[0] != '\0');
            assert_int_equal(inv.n, 0);
        }
    }
    log_set_level(saved);
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as real cards report. */
static bool looks_like_gpu_uuid(const char *u)
{
    return strlen(u) == 40 && strncmp(u, "GPU-", 4) == 0 && is_hex(u + 4, 8) && u[12] == '-' &&
           is_hex(u + 13, 4) && u[17] == '-' && is_hex(u + 18, 4) && u[22] == '-' &&
           is_hex(u + 23, 4) && u[27] == '-' && is_hex(u + 28, 12);
}

static void test_simulated(void **state)
{
    (void)state;
    gpu_inventory a, b, c;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load("8xA100-80GB", &a, &e), 0);
    assert_int_equal(a.n, 8);
    assert_true(a.simulated);
    assert_string_equal(a.source, "simulated");
    for (size_t i = 0; i < a.n; i++) {
        const gpu_device *d = &a.devices[i];
        assert_int_equal(d->index, (int)i);
        assert_int_equal(d->memory_mib, 80 * 1024);
        assert_string_equal(d->model, "NVIDIA A100-80GB (simulated)");
        assert_true(d->healthy);
        assert_false(d->is_mig);
        if (!looks_like_gpu_uuid(d->uuid))
            fail_msg("'%s' does not look like a GPU UUID", d->uuid);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(d->uuid, a.devices[j].uuid);
    }
    /* Stable across restarts: the same spec gives the same UUIDs. */
    assert_int_equal(gpu_sim_load("8xA100-80GB", &b, &e), 0);
    for (size_t i = 0; i < a.n; i++)
        assert_string_equal(a.devices[i].uuid, b.devices[i].uuid);
    gpu_inventory_free(&b);
    /* Growing the spec keeps the earlier cards' UUIDs. */
    assert_int_equal(gpu_sim_load("8xA100-80GB, 1xH100-80GB", &b, &e), 0);
    assert_int_equal(b.n, 9);
    for (size_t i = 0; i < a.n; i++)
        assert_string_equal(a.devices[i].uuid, b.devices[i].uuid);
    assert_string_equal(b.devices[8].model, "NVIDIA H100-80GB (simulated)");
    gpu_inventory_free(&b);

    assert_int_equal(gpu_sim_load("2xT4-16GB,1xH100-80GB", &c, &e), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.devices[1].memory_mib, 16384);
    assert_int_equal(c.devices[2].index, 2);
    assert_int_equal(c.devices[2].memory_mib, 81920);
    assert_string_not_equal(c.devices[0].uuid, a.devices[0].uuid);
    gpu_inventory_free(&c);

    assert_int_equal(gpu_sim_load("A100-SXM4-40gb", &c, &e), 0);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.devices[0].model, "NVIDIA A100-SXM4-40GB (simulated)");
    assert_int_equal(c.devices[0].memory_mib, 40960);
    gpu_inventory_free(&c);
    assert_int_equal(gpu_sim_load("1024XT4-16GB", &c, &e), 0);
    assert_int_equal(c.n, 1024);
    assert_string_not_equal(c.devices[1023].uuid, c.devices[1022].uuid);
    gpu_inventory_free(&c);
    gpu_inventory_free(&a);

    static const struct {
        const char *spec, *expect;
    } bad[] = {
        {"", "empty"},
        {"A100", "no memory size"},
        {"8xA100", "no memory size"},
        {"0xA100-80GB", "count must be 1-1024"},
        {"1025xA100-80GB", "count must be 1-1024"},
        {"99999999xA100-80GB", "count must be 1-1024"},
        {"600xA100-80GB,600xT4-16GB", "more than 1024 cards"},
        {"8xA100-80", "unit GB"},
        {"8xA100-80MB", "unit GB"},
        {"8xA100-80 GB", "unit GB"},
        {"8xA100-GB", "memory must be 1-4096 GB"},
        {"8xA100-0GB", "memory must be 1-4096 GB"},
        {"8xA100-99999GB", "memory must be 1-4096 GB"},
        {"8x-80GB", "no model name"},
        {"8xA1 00-80GB", "letters, digits"},
        {"8xA100-80GB,", "an item is empty"},
        {",8xA100-80GB", "an item is empty"},
        {"8xA100-80GB,,1xT4-16GB", "an item is empty"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        if (gpu_sim_load(bad[i].spec, &c, &e) != -1 || !strstr(e.msg, bad[i].expect))
            fail_msg("spec '%s': expected an error with \"%s\", got \"%s\"", bad[i].spec,
                     bad[i].expect, e.msg);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_int_equal(c.n, 0);
        assert_null(c.devices);
    }
    assert_int_equal(gpu_sim_load(NULL, &c, &e), -1);
}

static void test_inventory_load(void **state)
{
    (void)state;
    gpu_inventory inv;
    gb_err e = GB_ERR_INIT;
    gpu_config cfg = {.source = GPU_SOURCE_AUTO,
                      .nvml_library = "/nonexistent/libnvidia-ml.so.1",
                      .nvidia_smi = "/nonexistent/nvidia-smi"};

    /* Nothing available: AUTO is not an error, just no GPU. */
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "none");
    assert_int_equal(inv.n, 0);
    gpu_inventory_free(&inv);

    /* Both fakes there but no description file: still "none". */
    cfg.nvml_library = fake_nvml;
    cfg.nvidia_smi = fake_smi;
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "none");

    write_file(gpus_file, four_cards);
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "nvml");
    assert_int_equal(inv.n, 4);
    gpu_inventory_free(&inv);

    /* NVML broken: AUTO falls back to nvidia-smi. */
    setenv("GPUBOX_FAKE_NVML_FAIL", "init", 1);
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "nvidia-smi");
    assert_int_equal(inv.n, 4);
    gpu_inventory_free(&inv);

    /* An explicit source that fails is an error. */
    cfg.source = GPU_SOURCE_NVML;
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "Driver Not Loaded"));
    cfg.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "cannot load /nonexistent/libnvidia-ml.so.1"));
    cfg.source = GPU_SOURCE_SMI;
    cfg.nvidia_smi = "/nonexistent/nvidia-smi";
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "/nonexistent/nvidia-smi"));
    cfg.nvidia_smi = fake_smi;
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "nvidia-smi");
    gpu_inventory_free(&inv);

    cfg.source = GPU_SOURCE_SIMULATED;
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), -1);
    assert_non_null(strstr(e.msg, "needs a spec"));
    cfg.simulate_spec = "2xT4-16GB";
    assert_int_equal(gpu_inventory_load(&cfg, &inv, &e), 0);
    assert_string_equal(inv.source, "simulated");
    assert_int_equal(inv.n, 2);
    gpu_inventory_free(&inv);
}

static void test_source_parse(void **state)
{
    (void)state;
    assert_int_equal(gpu_source_parse("auto"), GPU_SOURCE_AUTO);
    assert_int_equal(gpu_source_parse("nvml"), GPU_SOURCE_NVML);
    assert_int_equal(gpu_source_parse("nvidia-smi"), GPU_SOURCE_SMI);
    assert_int_equal(gpu_source_parse("Simulated"), GPU_SOURCE_SIMULATED);
    assert_int_equal(gpu_source_parse("smi"), -1);
    assert_int_equal(gpu_source_parse(""), -1);
    assert_int_equal(gpu_source_parse(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nvml_and_smi_agree, test_setup),
        cmocka_unit_test_setup(test_nvml_mig, test_setup),
        cmocka_unit_test_setup(test_nvml_failures, test_setup),
        cmocka_unit_test_setup(test_smi_failures, test_setup),
        cmocka_unit_test_setup(test_csv_edge_cases, test_setup),
        cmocka_unit_test_setup(test_csv_mutations, test_setup),
        cmocka_unit_test_setup(test_simulated, test_setup),
        cmocka_unit_test_setup(test_inventory_load, test_setup),
        cmocka_unit_test_setup(test_source_parse, test_setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
