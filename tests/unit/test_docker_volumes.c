/*
 * test_docker_volumes.c - the volume calls against the real dockerd: a
 * local volume bound to a host directory (as gpubox's loop backend hands
 * its mounts to Docker), used by a container; inspect, list by label, and
 * removal, which Docker refuses while any container uses the volume.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "docker_test_util.h"

static int group_setup(void **state)
{
    (void)state;
    return dtu_setup("volumes");
}

static json_t *bind_opts(const char *dir)
{
    json_t *opts = json_pack("{s:s, s:s, s:s}", "type", "none", "o", "bind", "device", dir);
    assert_non_null(opts);
    return opts;
}

static void test_bound_volume_in_use(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *dir = dtu_temp_dir("data");
    char name[160];
    dtu_name(name, sizeof(name), "data");
    _cleanup_json_ json_t *opts = bind_opts(dir);
    _cleanup_json_ json_t *labels = dtu_labels();
    json_object_set_new(labels, "gpubox.volume", json_string(name));
    _cleanup_json_ json_t *vol = NULL;
    if (docker_volume_create(dtu_client, name, NULL, opts, labels, &vol, &e) != 0)
        fail_msg("%s", e.msg);
    assert_string_equal(json_string_value(json_object_get(vol, "Name")), name);
    assert_string_equal(json_string_value(json_object_get(vol, "Driver")), "local");

    _cleanup_json_ json_t *seen = NULL;
    assert_int_equal(docker_volume_inspect(dtu_client, name, &seen, &e), 0);
    json_t *options = json_object_get(seen, "Options");
    assert_string_equal(json_string_value(json_object_get(options, "device")), dir);
    assert_string_equal(json_string_value(json_object_get(options, "o")), "bind");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(seen, "Labels"), "gpubox.volume")), name);

    /* A container writes through the volume; the file lands in the directory. */
    static const char *const cmd[] = {"sh", "-c", "echo from-container > /data/out.txt"};
    docker_bind bind = {.src = name, .dest = "/data"};
    _cleanup_json_ json_t *spec_labels = dtu_labels();
    docker_run_spec spec = {.image = dtu_image,
                            .cmd = cmd,
                            .ncmd = 3,
                            .labels = spec_labels,
                            .binds = &bind,
                            .nbinds = 1};
    json_t *cfg = NULL;
    assert_int_equal(docker_run_spec_to_json(&spec, &cfg, &e), 0);
    _cleanup_free_ char *id = dtu_create("writer", cfg);
    assert_int_equal(docker_container_start(dtu_client, id, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(dtu_client, id, &code, &e), 0);
    assert_int_equal(code, 0);
    char path[256], text[64] = "";
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof(text), f));
    fclose(f);
    assert_string_equal(text, "from-container\n");

    /* In use by a container, even a stopped one: refused, force or not, and
     * the data stays. */
    assert_int_equal(docker_volume_remove(dtu_client, name, false, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "volume is in use"));
    assert_int_equal(docker_volume_remove(dtu_client, name, true, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    assert_int_equal(docker_container_remove(dtu_client, id, false, &e), 0);
    assert_int_equal(docker_volume_remove(dtu_client, name, false, &e), 0);
    assert_int_equal(docker_volume_remove(dtu_client, name, false, &e), 0); /* already gone */
    json_t *gone = NULL;
    assert_int_equal(docker_volume_inspect(dtu_client, name, &gone, &e), -1);
    assert_null(gone);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    /* Removing a bound volume leaves the directory's files alone. */
    assert_int_equal(stat(path, &st), 0);
}

static bool list_has(json_t *list, const char *name)
{
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "Name")), name) == 0)
            return true;
    }
    return false;
}

static void test_create_list_and_idempotence(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char a[160], b[160], label_a[200];
    dtu_name(a, sizeof(a), "a");
    dtu_name(b, sizeof(b), "b");
    snprintf(label_a, sizeof(label_a), "gbtest.dk.which=%s", a);
    _cleanup_json_ json_t *labels_a = dtu_labels();
    json_object_set_new(labels_a, "gbtest.dk.which", json_string(a));
    _cleanup_json_ json_t *labels_b = dtu_labels();
    assert_int_equal(docker_volume_create(dtu_client, a, "local", NULL, labels_a, NULL, &e), 0);
    assert_int_equal(docker_volume_create(dtu_client, b, NULL, NULL, labels_b, NULL, &e), 0);

    _cleanup_json_ json_t *ours = NULL;
    assert_int_equal(docker_volume_list(dtu_client, dtu_label, &ours, &e), 0);
    assert_int_equal(json_array_size(ours), 2);
    assert_true(list_has(ours, a) && list_has(ours, b));
    _cleanup_json_ json_t *only_a = NULL;
    assert_int_equal(docker_volume_list(dtu_client, label_a, &only_a, &e), 0);
    assert_int_equal(json_array_size(only_a), 1);
    assert_true(list_has(only_a, a));
    _cleanup_json_ json_t *none = NULL;
    assert_int_equal(docker_volume_list(dtu_client, "gbtest.dk.nobody=none", &none, &e), 0);
    assert_true(json_is_array(none));
    assert_int_equal(json_array_size(none), 0);
    _cleanup_json_ json_t *all = NULL;
    assert_int_equal(docker_volume_list(dtu_client, NULL, &all, &e), 0);
    assert_true(list_has(all, a) && list_has(all, b));

    /* Creating it again returns the volume that exists (Docker's rule), with
     * its first labels. */
    _cleanup_json_ json_t *again = NULL;
    assert_int_equal(docker_volume_create(dtu_client, a, NULL, NULL, labels_b, &again, &e), 0);
    assert_string_equal(json_string_value(json_object_get(again, "Name")), a);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(again, "Labels"), "gbtest.dk.which")), a);
}

static void test_volume_errors(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    json_t *out = NULL;
    assert_int_equal(docker_volume_create(dtu_client, "", NULL, NULL, NULL, &out, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(docker_volume_create(dtu_client, "a/b", NULL, NULL, NULL, &out, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "invalid characters"));
    assert_null(out);

    _cleanup_json_ json_t *bad_opts = json_pack("{s:i}", "size", 5);
    char name[160];
    dtu_name(name, sizeof(name), "bad");
    assert_int_equal(docker_volume_create(dtu_client, name, NULL, bad_opts, NULL, &out, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "driver options"));
    assert_int_equal(
        docker_volume_create(dtu_client, name, "gbtest-no-such-driver", NULL, NULL, &out, &e), -1);
    assert_non_null(strstr(e.msg, "gbtest-no-such-driver"));

    assert_int_equal(docker_volume_inspect(dtu_client, "", &out, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(docker_volume_remove(dtu_client, NULL, false, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_bound_volume_in_use, dtu_cleanup),
        cmocka_unit_test_teardown(test_create_list_and_idempotence, dtu_cleanup),
        cmocka_unit_test_teardown(test_volume_errors, dtu_cleanup),
    };
    return cmocka_run_group_tests(tests, group_setup, dtu_teardown);
}
