/*
 * fuzz_gpu_smi.c - the nvidia-smi CSV parser: whatever a (broken, newer,
 * localized) nvidia-smi prints, gpubox reads it defensively.
 *
 * Properties: no crash or leak; every device of an accepted inventory has
 * a GPU-... or MIG-... UUID, and an inventory the parser refused is left
 * empty.
 */
#include "fuzz_util.h"

#include "gpu/gpu.h"
#include "util/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    log_set_level(LOG_ERROR); /* the parser warns about every odd card */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *csv = fuzz_cstring(data, size);
    gpu_inventory inv = {0};
    gb_err err;
    if (gpu_smi_parse_csv(csv, &inv, &err) == 0) {
        for (size_t i = 0; i < inv.n; i++)
            FUZZ_CHECK(strncmp(inv.devices[i].uuid, "GPU-", 4) == 0 ||
                           strncmp(inv.devices[i].uuid, "MIG-", 4) == 0,
                       "device %zu has UUID '%s'", i, inv.devices[i].uuid);
    } else {
        FUZZ_CHECK(inv.n == 0, "a refused parse left %zu devices", inv.n);
    }
    gpu_inventory_free(&inv);
    free(csv);
    return 0;
}
