/*
 * test_resources.c - the resource services and the start-up derivation of
 * the pools: answers follow the pools (the cached GPU answer is rebuilt when
 * the pool changes), and replica-set records in a real SQLite store mark
 * their GPUs and ports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sched/gpus.h"
#include "service/keys.h"
#include "service/service.h"
#include "util/cleanup.h"

typedef struct fixture {
    app app;
    char dir[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(gpu_sim_load("2xA100-80GB,1xT4-16GB", &f->app.gpus, &err), 0);
    f->app.gpu_pool = gpus_pool_new(&f->app.gpus);
    f->app.ports = ports_pool_new(41000, 41009);
    f->app.gpus_cache = resources_cache_new();
    assert_non_null(f->app.gpu_pool);
    assert_non_null(f->app.ports);
    assert_non_null(f->app.gpus_cache);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->app.store)
        store_close(f->app.store);
    if (f->dir[0]) {
        char path[128];
        snprintf(path, sizeof(path), "%s/state.db", f->dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/state.db-wal", f->dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/state.db-shm", f->dir);
        unlink(path);
        rmdir(f->dir);
    }
    resources_cache_free(f->app.gpus_cache);
    gpus_pool_free(f->app.gpu_pool);
    ports_pool_free(f->app.ports);
    gpu_inventory_free(&f->app.gpus);
    free(f);
    return 0;
}

static json_t *gpus_answer(app *a)
{
    char *text = NULL;
    size_t len = 0;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(resources_gpus_text(a, &text, &len, &err), 0);
    assert_int_equal(len, strlen(text));
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    free(text);
    assert_non_null(v);
    return v;
}

static void test_gpus_answer_follows_the_pool(void **state)
{
    fixture *f = *state;
    app *a = &f->app;
    _cleanup_json_ json_t *before = gpus_answer(a);
    json_t *devices = json_object_get(before, "devices");
    assert_int_equal(json_array_size(devices), 3);
    assert_true(json_is_true(json_object_get(before, "simulated")));
    assert_string_equal(json_string_value(json_object_get(before, "source")), "simulated");
    const char *uuid1 = json_string_value(json_object_get(json_array_get(devices, 1), "uuid"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(before, "gpus"), uuid1)),
                     0);

    /* a second answer comes from the cache and is the same */
    _cleanup_json_ json_t *again = gpus_answer(a);
    assert_true(json_equal(before, again));

    /* a take shows at once: the cache notices the pool changed */
    gb_err err = GB_ERR_INIT;
    const char *uuids[] = {uuid1};
    assert_int_equal(gpus_pool_take(a->gpu_pool, uuids, 1, "foo", &err), 0);
    _cleanup_json_ json_t *held = gpus_answer(a);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(held, "gpus"), uuid1)), 1);
    json_t *dev = json_array_get(json_object_get(held, "devices"), 1);
    assert_string_equal(json_string_value(json_object_get(dev, "mode")), "whole");
    assert_int_equal(json_integer_value(json_object_get(dev, "allocatedMemoryMiB")), 81920);
    assert_string_equal(json_string_value(json_array_get(json_object_get(dev, "tenants"), 0)),
                        "foo");

    /* the json_t form and the older route agree */
    _cleanup_json_ json_t *direct = NULL;
    assert_int_equal(resources_gpus(a, &direct, &err), 0);
    assert_true(json_equal(direct, held));
    _cleanup_json_ json_t *legacy = NULL;
    assert_int_equal(resources_gpu_status(a, &legacy, &err), 0);
    assert_true(json_equal(json_object_get(legacy, "gpuStatus"), json_object_get(held, "gpus")));

    assert_int_equal(gpus_pool_release(a->gpu_pool, uuids, 1, "foo"), 1);
    _cleanup_json_ json_t *after = gpus_answer(a);
    assert_true(json_equal(after, before));
}

/* A grant of one card from JSON text. */
static void grant_of(const char *text, gpus_grant *g)
{
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(gpus_grant_from_json(j, g, &err), 0);
}

static void test_gpus_answer_shows_shares(void **state)
{
    fixture *f = *state;
    app *a = &f->app;
    gb_err err = GB_ERR_INIT;
    gpus_request req = {.count = 1, .memory_mib = 8192};
    _cleanup_(gpus_grant_free) gpus_grant foo = {0};
    assert_int_equal(gpus_pool_alloc(a->gpu_pool, &req, "foo", &foo, &err), 0);
    _cleanup_json_ json_t *v = gpus_answer(a);
    /* binpack: the T4 (index 2) is the fitting card with the least left */
    json_t *dev = json_array_get(json_object_get(v, "devices"), 2);
    assert_string_equal(json_string_value(json_object_get(dev, "uuid")), foo.cards[0].uuid);
    assert_string_equal(json_string_value(json_object_get(dev, "mode")), "memory");
    assert_int_equal(json_integer_value(json_object_get(dev, "allocatedMemoryMiB")), 8192);
    assert_int_equal(json_integer_value(json_object_get(dev, "freeMemoryMiB")), 16384 - 8192);
    assert_int_equal(json_integer_value(json_object_get(dev, "capacityMiB")), 16384);
    assert_string_equal(json_string_value(json_array_get(json_object_get(dev, "tenants"), 0)),
                        "foo");
    json_t *alloc = json_array_get(json_object_get(dev, "allocations"), 0);
    assert_string_equal(json_string_value(json_object_get(alloc, "name")), "foo");
    assert_int_equal(json_integer_value(json_object_get(alloc, "memoryMiB")), 8192);
    assert_null(json_object_get(alloc, "replica"));
    assert_true(json_is_true(json_object_get(dev, "shareable")));
    assert_true(json_is_false(json_object_get(dev, "excluded")));
    /* no HAMi-core: the share is scheduled but not enforced, and says so */
    assert_true(json_is_false(json_object_get(dev, "enforced")));
    assert_true(json_is_false(json_object_get(json_object_get(v, "sharing"), "enforced")));
    assert_true(json_is_true(
        json_object_get(json_array_get(json_object_get(v, "devices"), 0), "enforced")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(v, "gpus"), foo.cards[0].uuid)), 1);

    /* the share grows in place: only its memory changes, and the answer too */
    req.memory_mib = 12288;
    _cleanup_(gpus_grant_free) gpus_grant grown = {0};
    assert_int_equal(gpus_pool_realloc(a->gpu_pool, &foo, &req, "foo", &grown, &err), 0);
    assert_string_equal(grown.cards[0].uuid, foo.cards[0].uuid);
    _cleanup_json_ json_t *v2 = gpus_answer(a);
    dev = json_array_get(json_object_get(v2, "devices"), 2);
    alloc = json_array_get(json_object_get(dev, "allocations"), 0);
    assert_int_equal(json_integer_value(json_object_get(alloc, "memoryMiB")), 12288);

    /* the setting is fixed for a daemon's life; ask past the cache */
    a->cfg.hami_core = "/opt/hami/libvgpu.so";
    _cleanup_json_ json_t *v3 = NULL;
    assert_int_equal(resources_gpus(a, &v3, &err), 0);
    dev = json_array_get(json_object_get(v3, "devices"), 2);
    assert_true(json_is_true(json_object_get(dev, "enforced")));
    json_t *sharing = json_object_get(v3, "sharing");
    assert_string_equal(json_string_value(json_object_get(sharing, "enforcedBy")), "HAMi-core");
}

static void test_gpus_answer_follows_a_replica_slot(void **state)
{
    fixture *f = *state;
    app *a = &f->app;
    const char *uuid = a->gpus.devices[0].uuid;
    char text[512];
    gb_err err = GB_ERR_INIT;
    snprintf(text, sizeof(text),
             "{\"gpus\":[\"%s\"],\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":20480,"
             "\"mode\":\"timeslice\",\"replica\":0}]}",
             uuid, uuid);
    _cleanup_(gpus_grant_free) gpus_grant slot0 = {0};
    grant_of(text, &slot0);
    assert_int_equal(gpus_pool_take_grant(a->gpu_pool, &slot0, "foo", &err), 0);
    _cleanup_json_ json_t *v = gpus_answer(a);
    json_t *dev = json_array_get(json_object_get(v, "devices"), 0);
    assert_string_equal(json_string_value(json_object_get(dev, "mode")), "timeslice");
    json_t *replicas = json_object_get(dev, "replicas");
    assert_int_equal(json_integer_value(json_object_get(replicas, "total")), 4);
    assert_int_equal(json_integer_value(json_object_get(replicas, "used")), 1);
    assert_int_equal(json_integer_value(json_object_get(dev, "freeMemoryMiB")), 0);

    /* the same tenant and memory on another slot: only the replica differs,
     * and the cached answer must still change */
    assert_int_equal(gpus_pool_release_grant(a->gpu_pool, &slot0, "foo"), 1);
    snprintf(text, sizeof(text),
             "{\"gpus\":[\"%s\"],\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":20480,"
             "\"mode\":\"timeslice\",\"replica\":3}]}",
             uuid, uuid);
    _cleanup_(gpus_grant_free) gpus_grant slot3 = {0};
    grant_of(text, &slot3);
    assert_int_equal(gpus_pool_take_grant(a->gpu_pool, &slot3, "foo", &err), 0);
    _cleanup_json_ json_t *v2 = gpus_answer(a);
    dev = json_array_get(json_object_get(v2, "devices"), 0);
    json_t *alloc = json_array_get(json_object_get(dev, "allocations"), 0);
    assert_int_equal(json_integer_value(json_object_get(alloc, "replica")), 3);
}

static void test_ports_answer(void **state)
{
    fixture *f = *state;
    gb_err err = GB_ERR_INIT;
    uint16_t held[] = {41003, 50000};
    assert_int_equal(ports_pool_take(f->app.ports, held, 2, false, &err), 0);
    _cleanup_json_ json_t *v = NULL;
    assert_int_equal(resources_ports(&f->app, &v, &err), 0);
    _cleanup_json_ json_t *want = json_pack(
        "{s:{s:i, s:i, s:i, s:[i,i], s:i, s:i, s:i, s:{s:{}, s:{}}}}", "ports", "startPort", 41000,
        "endPort", 41009, "availableCount", 9, "usedPorts", 41003, 50000, "StartPort", 41000,
        "EndPort", 41009, "AvailableCount", 9, "UsedPortSet", "41003", "50000");
    assert_true(json_equal(v, want));
}

static void put(store *s, const char *key, const char *value)
{
    gb_err err = GB_ERR_INIT;
    assert_int_equal(store_put(s, key, value, NULL, &err), 0);
}

static void open_store(fixture *f)
{
    strcpy(f->dir, "/tmp/gpubox-test-resources-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char url[128];
    snprintf(url, sizeof(url), "sqlite://%s/state.db", f->dir);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(store_open(url, &f->app.store, &err), 0);
}

static void test_derive_marks_what_records_hold(void **state)
{
    fixture *f = *state;
    app *a = &f->app;
    open_store(f);
    const char *uuid0 = a->gpus.devices[0].uuid, *uuid2 = a->gpus.devices[2].uuid;
    char key[256], value[512];
    snprintf(value, sizeof(value),
             "{\"gpus\":[\"%s\",\"%s\"],\"ports\":[{\"hostPort\":41001},41002]}", uuid0, uuid2);
    put(a->store, keys_replicaset(key, sizeof(key), "foo"), value);
    /* history entries and other prefixes are not current records */
    snprintf(value, sizeof(value), "{\"gpus\":[\"%s\"]}", a->gpus.devices[1].uuid);
    put(a->store, keys_replicaset_history(key, sizeof(key), "foo", 1), value);
    put(a->store, keys_volume(key, sizeof(key), "data"), "{\"ports\":[41005]}");
    /* a record naming a card this host lacks is logged, not fatal */
    put(a->store, keys_replicaset(key, sizeof(key), "bar"), "{\"gpus\":[\"GPU-gone\"]}");

    gb_err err = GB_ERR_INIT;
    assert_int_equal(allocations_derive(a, &err), 0);
    assert_int_equal(gpus_pool_free_count(a->gpu_pool), 1);
    _cleanup_json_ json_t *gpus = gpus_answer(a);
    json_t *dev0 = json_array_get(json_object_get(gpus, "devices"), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(dev0, "tenants"), 0)),
                        "foo");
    _cleanup_free_ uint16_t *used = NULL;
    size_t n = 0;
    ports_pool_used(a->ports, &used, &n);
    assert_int_equal(n, 2);
    assert_int_equal(used[0], 41001);
    assert_int_equal(used[1], 41002);
}

static void test_derive_refuses_a_damaged_record(void **state)
{
    fixture *f = *state;
    open_store(f);
    char key[256];
    put(f->app.store, keys_replicaset(key, sizeof(key), "foo"), "{not json");
    gb_err err = GB_ERR_INIT;
    assert_int_equal(allocations_derive(&f->app, &err), -1);
    assert_non_null(strstr(err.msg, "/gpubox/replicasets/foo"));
    assert_non_null(strstr(err.msg, "refusing to guess"));
}

static void test_derive_with_an_empty_store(void **state)
{
    fixture *f = *state;
    open_store(f);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(allocations_derive(&f->app, &err), 0);
    assert_int_equal(gpus_pool_free_count(f->app.gpu_pool), 3);
    assert_int_equal(ports_pool_available(f->app.ports), 10);
}

static void test_derive_marks_shares(void **state)
{
    fixture *f = *state;
    app *a = &f->app;
    open_store(f);
    const char *uuid0 = a->gpus.devices[0].uuid;
    char key[256], value[512];
    snprintf(value, sizeof(value),
             "{\"gpus\":[\"%s\"],\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":30000,"
             "\"mode\":\"memory\"}],\"ports\":[]}",
             uuid0, uuid0);
    put(a->store, keys_replicaset(key, sizeof(key), "foo"), value);
    snprintf(value, sizeof(value),
             "{\"gpus\":[\"%s\"],\"gpuShares\":[{\"uuid\":\"%s\",\"memoryMiB\":40000,"
             "\"mode\":\"memory\"}]}",
             uuid0, uuid0);
    put(a->store, keys_replicaset(key, sizeof(key), "bar"), value);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(allocations_derive(a, &err), 0);
    _cleanup_json_ json_t *v = gpus_answer(a);
    json_t *dev = json_array_get(json_object_get(v, "devices"), 0);
    assert_string_equal(json_string_value(json_object_get(dev, "mode")), "memory");
    assert_int_equal(json_integer_value(json_object_get(dev, "allocatedMemoryMiB")), 70000);
    assert_int_equal(json_array_size(json_object_get(dev, "allocations")), 2);
    assert_int_equal(gpus_pool_free_count(a->gpu_pool), 2);

    /* the share left on the card is what is free: 81920 - 70000 */
    gpus_request req = {.count = 1, .memory_mib = 11921};
    _cleanup_(gpus_grant_free) gpus_grant none = {0};
    const char *pin[] = {uuid0};
    req.pin_uuids = pin;
    req.npin = 1;
    assert_int_equal(gpus_pool_alloc(a->gpu_pool, &req, "baz", &none, &err), -1);
    assert_int_equal(err.code, ERR_GPU_NOT_ENOUGH);
}

static void test_keys(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(keys_replicaset(buf, sizeof(buf), "foo"), "/gpubox/replicasets/foo");
    assert_string_equal(keys_replicaset_history(buf, sizeof(buf), "foo", 12),
                        "/gpubox/history/foo/0000000012");
    assert_string_equal(keys_volume(buf, sizeof(buf), "v"), "/gpubox/volumes/v");
    assert_string_equal(keys_operation(buf, sizeof(buf), "7"), "/gpubox/operations/7");
    char tiny[8];
    assert_null(keys_replicaset(tiny, sizeof(tiny), "foo"));
    assert_true(keys_is_replicaset_record("/gpubox/replicasets/foo"));
    assert_false(keys_is_replicaset_record("/gpubox/replicasets/foo/history/1"));
    assert_false(keys_is_replicaset_record("/gpubox/replicasets/"));
    assert_false(keys_is_replicaset_record("/gpubox/volumes/foo"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gpus_answer_follows_the_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpus_answer_shows_shares, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpus_answer_follows_a_replica_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_derive_marks_shares, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ports_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_derive_marks_what_records_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_derive_refuses_a_damaged_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_derive_with_an_empty_store, setup, teardown),
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
