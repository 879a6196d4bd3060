/*
 * test_fuzz_replay.c - every libFuzzer target (tests/fuzz/fuzz_*.c) run
 * once on each checked-in input: the seed corpus (tests/fuzz/corpus/<t>/)
 * and every input fuzzing ever found (tests/fuzz/regressions/<t>/).
 *
 * This runs with ctest in the ordinary gcc build with ASan and UBSan, so a
 * bug fuzzing found stays fixed even where clang is not installed. Each
 * target's entry points are renamed as its source is included, so all the
 * targets share one program; a target's own property checks abort, and
 * the sanitizers report, exactly as under libFuzzer.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define LLVMFuzzerTestOneInput fuzz_one_auth
#include "../fuzz/fuzz_auth.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_fleet_auth
#include "../fuzz/fuzz_fleet_auth.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_gpu_smi
#define LLVMFuzzerInitialize fuzz_init_gpu_smi
#include "../fuzz/fuzz_gpu_smi.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_one_image_ref
#include "../fuzz/fuzz_image_ref.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_json_depth
#include "../fuzz/fuzz_json_depth.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_log_escape
#include "../fuzz/fuzz_log_escape.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_move_zstd
#define fuzz_file fuzz_move_file
#define fuzz_slurp fuzz_move_slurp
#include "../fuzz/fuzz_move_zstd.c"
#undef fuzz_file
#undef fuzz_slurp
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_names
#include "../fuzz/fuzz_names.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_router
#define LLVMFuzzerInitialize fuzz_init_router
#include "../fuzz/fuzz_router.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_one_origin
#include "../fuzz/fuzz_origin.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_rs_spec
#include "../fuzz/fuzz_rs_spec.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_size
#include "../fuzz/fuzz_size.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_websocket
#include "../fuzz/fuzz_websocket.c"
#undef LLVMFuzzerTestOneInput

typedef struct fuzz_target {
    const char *name;
    int (*init)(int *argc, char ***argv);
    int (*one)(const uint8_t *data, size_t size);
} fuzz_target;

static const fuzz_target targets[] = {
    {"fuzz_auth", NULL, fuzz_one_auth},
    {"fuzz_fleet_auth", NULL, fuzz_one_fleet_auth},
    {"fuzz_gpu_smi", fuzz_init_gpu_smi, fuzz_one_gpu_smi},
    {"fuzz_image_ref", NULL, fuzz_one_image_ref},
    {"fuzz_json_depth", NULL, fuzz_one_json_depth},
    {"fuzz_log_escape", NULL, fuzz_one_log_escape},
    {"fuzz_move_zstd", NULL, fuzz_one_move_zstd},
    {"fuzz_names", NULL, fuzz_one_names},
    {"fuzz_origin", NULL, fuzz_one_origin},
    {"fuzz_router", fuzz_init_router, fuzz_one_router},
    {"fuzz_rs_spec", NULL, fuzz_one_rs_spec},
    {"fuzz_size", NULL, fuzz_one_size},
    {"fuzz_websocket", NULL, fuzz_one_websocket},
};

/* Run t on every file of dir; returns how many there were. */
static size_t replay_dir(const fuzz_target *t, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0, got;
        uint8_t chunk[4096];
        while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            if (len + got > cap) {
                cap = (len + got) * 2;
                buf = realloc(buf, cap);
                assert_non_null(buf);
            }
            memcpy(buf + len, chunk, got);
            len += got;
        }
        fclose(f);
        /* an exact-size copy, so reading past the input is caught */
        uint8_t *exact = malloc(len ? len : 1);
        if (len)
            memcpy(exact, buf, len);
        free(buf);
        t->one(exact, len);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

static void test_replay_every_checked_in_input(void **state)
{
    (void)state;
    const char *src = getenv("GPUBOX_SOURCE_DIR");
    assert_non_null(src);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        const fuzz_target *t = &targets[i];
        if (t->init)
            t->init(NULL, NULL);
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", src, t->name);
        size_t seeds = replay_dir(t, dir);
        if (seeds == 0)
            fail_msg("%s has no seed corpus in %s", t->name, dir);
        snprintf(dir, sizeof(dir), "%s/tests/fuzz/regressions/%s", src, t->name);
        replay_dir(t, dir);
        t->one((const uint8_t *)"", 0); /* the empty input too */
    }
    router_free(router); /* fuzz_router's table, built by its init */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_every_checked_in_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
