/*
 * test_rs_patch.c - the spec a patch asks for (replicaset_patch_request_parse,
 * then replicaset_spec_patch): each patch
 * field, "nothing changed", and that a bad patch is refused naming the
 * field, exactly as a create with that spec would be.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "service/replicaset/patch_request.h"
#include "util/cleanup.h"

static const char *const base_text =
    "{\"imageName\":\"ubuntu:22.04\",\"gpuCount\":2,"
    "\"binds\":[{\"src\":\"data\",\"dest\":\"/root/data\"},{\"src\":\"/srv/x\",\"dest\":\"/x\","
    "\"readOnly\":true}],"
    "\"env\":[\"A=1\",\"B=2\",\"A=3\"],\"cmd\":[\"sleep\",\"10\"],"
    "\"containerPorts\":[\"22\"],\"ports\":[{\"hostPort\":41000,\"containerPort\":80}],"
    "\"cpus\":1.5,\"memory\":\"2GB\"}";

typedef struct fixture {
    replicaset_spec base;
    replicaset_spec out;
    bool changed;
    gb_err err;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof(f));
    _cleanup_json_ json_t *j = json_loads(base_text, 0, NULL);
    assert_non_null(j);
    assert_int_equal(replicaset_spec_from_json(j, NULL, &f.base, NULL), 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    replicaset_spec_free(&f->base);
    replicaset_spec_free(&f->out);
    return 0;
}

/* Apply patch text; returns the error code (ERR_OK on success). */
static int patch(fixture *f, const char *text)
{
    json_error_t jerr;
    _cleanup_json_ json_t *p = json_loads(text, 0, &jerr);
    assert_non_null(p);
    replicaset_spec_free(&f->out);
    f->err = (gb_err)GB_ERR_INIT;
    f->changed = false;
    replicaset_patch_request req;
    if (replicaset_patch_request_parse(p, RS_PATCH_REPLICASET, &req, &f->err) < 0)
        return f->err.code;
    int rc = replicaset_spec_patch(&f->base, &req, &f->out, &f->changed, &f->err);
    replicaset_patch_request_free(&req);
    return rc < 0 ? f->err.code : ERR_OK;
}

static void test_empty_patch_changes_nothing(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{}"), ERR_OK);
    assert_false(f->changed);
    assert_int_equal(f->out.gpu_count, 2);
    /* Asking for what is already there is not a change either. */
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":2},\"cpus\":1.5,\"memory\":2147483648,"
                              "\"envPatch\":{\"set\":[\"B=2\"]}}"),
                     ERR_OK);
    assert_false(f->changed);
}

static void test_gpu_patch_up_down_zero(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":4}}"), ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.gpu_count, 4);
    /* Everything else stays as it was. */
    assert_int_equal(f->out.nbinds, 2);
    assert_int_equal(f->out.nenv, 3);
    assert_int_equal(f->out.nports, 2);
    assert_string_equal(f->out.image, "ubuntu:22.04");
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":0}}"), ERR_OK);
    assert_int_equal(f->out.gpu_count, 0);
    assert_int_equal(patch(f, "{\"gpuPatch\":{}}"), ERR_OK);
    assert_false(f->changed);
}

static void test_gpu_patch_errors(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":-1}}"), ERR_GPU_COUNT_NEGATIVE);
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":\"2\"}}"), ERR_WRONG_TYPE);
    assert_non_null(strstr(f->err.msg, "gpuPatch.gpuCount"));
    assert_int_equal(patch(f, "{\"gpuPatch\":3}"), ERR_WRONG_TYPE);
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":1,\"cards\":2}}"), ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "gpuPatch.cards"));
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":100000}}"), ERR_INVALID_PARAMS);
}

static void test_volume_patch_replace_remove_add(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"volumePatch\":{\"oldBind\":{\"src\":\"data\",\"dest\":"
                              "\"/root/data\"},\"newBind\":{\"src\":\"data2\",\"dest\":"
                              "\"/root/data\"}}}"),
                     ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.nbinds, 2);
    assert_string_equal(f->out.binds[0].src, "data2");
    assert_string_equal(f->out.binds[1].src, "/srv/x");
    /* gpu-docker-api's string form, and :ro. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"oldBind\":\"/srv/x:/x\",\"newBind\":"
                              "\"/srv/y:/y:ro\"}}"),
                     ERR_OK);
    assert_string_equal(f->out.binds[1].src, "/srv/y");
    assert_string_equal(f->out.binds[1].dest, "/y");
    assert_true(f->out.binds[1].read_only);
    /* Only oldBind: removed. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"oldBind\":\"data:/root/data\"}}"), ERR_OK);
    assert_int_equal(f->out.nbinds, 1);
    assert_string_equal(f->out.binds[0].src, "/srv/x");
    /* Only newBind: added. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":{\"src\":\"more\",\"dest\":\"/m\"}}}"),
                     ERR_OK);
    assert_int_equal(f->out.nbinds, 3);
    assert_string_equal(f->out.binds[2].dest, "/m");
    /* The same bind in place of itself: nothing changed. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"oldBind\":\"data:/root/data\",\"newBind\":"
                              "\"data:/root/data\"}}"),
                     ERR_OK);
    assert_false(f->changed);
}

/* A list of changes, applied in order (gpubox update -v ... --volume-rm ...):
 * the dest a removal frees is taken by a later addition. */
static void test_volume_patch_list(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"volumePatch\":[{\"oldBind\":\"/srv/x:/x\"},"
                              "{\"newBind\":\"more:/x:ro\"},{\"oldBind\":\"data:/root/data\","
                              "\"newBind\":\"data2:/root/data\"}]}"),
                     ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.nbinds, 2);
    assert_string_equal(f->out.binds[0].src, "data2");
    assert_string_equal(f->out.binds[1].src, "more");
    assert_string_equal(f->out.binds[1].dest, "/x");
    assert_true(f->out.binds[1].read_only);
    /* The failing change is named by its place in the list. */
    assert_int_equal(patch(f, "{\"volumePatch\":[{\"newBind\":\"a:/a\"},{\"oldBind\":"
                              "\"nope:/nope\"}]}"),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "volumePatch[1]"));
    assert_int_equal(patch(f, "{\"volumePatch\":[]}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"volumePatch\":[7]}"), ERR_WRONG_TYPE);
}

static void test_volume_patch_errors(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"volumePatch\":{\"oldBind\":\"nope:/nope\",\"newBind\":"
                              "\"a:/a\"}}"),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "nope:/nope"));
    assert_int_equal(patch(f, "{\"volumePatch\":{}}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":\"justonepart\"}}"),
                     ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":\"a:/a:rx\"}}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":7}}"), ERR_WRONG_TYPE);
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":{\"src\":\"a\"}}}"),
                     ERR_INVALID_PARAMS);
    /* A new bind on a dest already mounted: refused as a create would be. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":\"other:/x\"}}"), ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "both mount"));
    /* A path the spec rules refuse. */
    assert_int_equal(patch(f, "{\"volumePatch\":{\"newBind\":\"a:relative\"}}"),
                     ERR_INVALID_PARAMS);
}

static void test_env_patch(void **state)
{
    fixture *f = *state;
    /* set replaces every entry of the name in place; unset removes all. */
    assert_int_equal(patch(f, "{\"envPatch\":{\"set\":[\"A=9\",\"C=x=y\"],\"unset\":[\"B\"]}}"),
                     ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.nenv, 2);
    assert_string_equal(f->out.env[0], "A=9");
    assert_string_equal(f->out.env[1], "C=x=y");
    /* A list is the whole new environment. */
    assert_int_equal(patch(f, "{\"envPatch\":[\"ONLY=1\"]}"), ERR_OK);
    assert_int_equal(f->out.nenv, 1);
    assert_string_equal(f->out.env[0], "ONLY=1");
    assert_int_equal(patch(f, "{\"envPatch\":[]}"), ERR_OK);
    assert_int_equal(f->out.nenv, 0);
    /* Unsetting what is not there is no change. */
    assert_int_equal(patch(f, "{\"envPatch\":{\"unset\":[\"NOPE\"]}}"), ERR_OK);
    assert_false(f->changed);
}

static void test_env_patch_errors(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"envPatch\":{\"set\":[\"NOEQUALS\"]}}"), ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "envPatch.set[0]"));
    assert_int_equal(patch(f, "{\"envPatch\":{\"unset\":[\"A=1\"]}}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"envPatch\":{\"add\":[\"A=1\"]}}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"envPatch\":\"A=1\"}"), ERR_WRONG_TYPE);
    assert_int_equal(patch(f, "{\"envPatch\":[\"=1\"]}"), ERR_INVALID_PARAMS);
}

static void test_ports_replace_the_list(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"containerPorts\":[\"22\",\"8888\"]}"), ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.nports, 2); /* the explicit 41000 went: the list is replaced */
    assert_int_equal(f->out.ports[1].container_port, 8888);
    assert_int_equal(f->out.ports[1].host_port, 0);
    assert_int_equal(patch(f, "{\"ports\":[{\"hostPort\":41001,\"containerPort\":22}]}"), ERR_OK);
    assert_int_equal(f->out.nports, 1);
    assert_int_equal(f->out.ports[0].host_port, 41001);
    assert_int_equal(patch(f, "{\"containerPorts\":[],\"ports\":[]}"), ERR_OK);
    assert_int_equal(f->out.nports, 0);
    assert_int_equal(patch(f, "{\"containerPorts\":[\"22/tcp\"],\"ports\":[{\"hostPort\":41000,"
                              "\"containerPort\":80}]}"),
                     ERR_OK);
    assert_false(f->changed);
    assert_int_equal(patch(f, "{\"containerPorts\":[\"22\",\"22\"]}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"containerPorts\":[\"99999\"]}"), ERR_INVALID_PARAMS);
}

static void test_limits(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"cpus\":4,\"memory\":\"8GB\",\"shmSize\":\"1GB\","
                              "\"restartPolicy\":\"always\"}"),
                     ERR_OK);
    assert_true(f->changed);
    assert_true(f->out.cpus == 4.0);
    assert_int_equal(f->out.memory_bytes, 8LL << 30);
    assert_int_equal(f->out.shm_bytes, 1LL << 30);
    assert_string_equal(f->out.restart_policy, "always");
    /* null takes a limit away. */
    assert_int_equal(patch(f, "{\"cpus\":null,\"memory\":null}"), ERR_OK);
    assert_true(f->out.cpus == 0);
    assert_int_equal(f->out.memory_bytes, 0);
    assert_int_equal(patch(f, "{\"cpus\":-1}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"memory\":\"1KB\"}"), ERR_INVALID_PARAMS);
    assert_int_equal(patch(f, "{\"restartPolicy\":\"sometimes\"}"), ERR_INVALID_PARAMS);
}

static void test_unknown_fields_and_types(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"imageName\":\"\"}"), ERR_IMAGE_EMPTY);
    assert_int_equal(patch(f, "{\"imageName\":5}"), ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "imageName"));
    assert_int_equal(patch(f, "{\"gpuCount\":3}"), ERR_INVALID_PARAMS);
    assert_non_null(strstr(f->err.msg, "gpuCount"));
    assert_int_equal(patch(f, "[]"), ERR_WRONG_TYPE);
    /* A failed patch leaves nothing to free and nothing changed. */
    assert_null(f->out.image);
}

/* Another image is a patch like any other: the new spec names it, and
 * nothing else changes. */
static void test_image(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"imageName\":\"other:v2\"}"), ERR_OK);
    assert_true(f->changed);
    assert_string_equal(f->out.image, "other:v2");
    assert_int_equal(f->out.gpu_count, f->base.gpu_count);
    assert_int_equal(f->out.nbinds, f->base.nbinds);
    assert_int_equal(f->out.nenv, f->base.nenv);
}

static void test_patch_combined(void **state)
{
    fixture *f = *state;
    assert_int_equal(patch(f, "{\"gpuPatch\":{\"gpuCount\":1},\"volumePatch\":{\"oldBind\":"
                              "\"data:/root/data\"},\"envPatch\":{\"set\":[\"D=4\"]},"
                              "\"cpus\":2}"),
                     ERR_OK);
    assert_true(f->changed);
    assert_int_equal(f->out.gpu_count, 1);
    assert_int_equal(f->out.nbinds, 1);
    assert_int_equal(f->out.nenv, 4);
    assert_true(f->out.cpus == 2.0);
    /* The patched spec prints and parses back to itself. */
    _cleanup_json_ json_t *j = replicaset_spec_to_json(&f->out);
    replicaset_spec again;
    assert_int_equal(replicaset_spec_from_json(j, NULL, &again, NULL), 0);
    _cleanup_json_ json_t *j2 = replicaset_spec_to_json(&again);
    assert_true(json_equal(j, j2));
    replicaset_spec_free(&again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty_patch_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_patch_up_down_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_patch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_volume_patch_replace_remove_add, setup, teardown),
        cmocka_unit_test_setup_teardown(test_volume_patch_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_volume_patch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_patch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ports_replace_the_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_fields_and_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_combined, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
