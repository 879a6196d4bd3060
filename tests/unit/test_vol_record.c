/*
 * test_vol_record.c - volume records in a real SQLite store: the JSON form
 * survives a save and a load (resize mark included), saves are
 * compare-and-swap, a delete takes the whole size history with it and
 * nothing of another volume, and broken records are refused with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "service/keys.h"
#include "service/volumes/record.h"
#include "store_test_util.h"
#include "util/cleanup.h"

typedef struct fixture {
    char *dir;
    store *s;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = store_test_mkdtemp();
    char url[512];
    snprintf(url, sizeof(url), "sqlite://%s/state.db", f->dir);
    gb_err err = GB_ERR_INIT;
    if (store_open(url, &f->s, &err) < 0)
        fail_msg("store_open: %s", err.msg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    store_close(f->s);
    store_test_rmdir(f->dir);
    free(f);
    return 0;
}

static void fill(volumes_record *r, const char *name)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->state = VOL_STATE_READY;
    r->version = 1;
    r->size = 20ULL << 30;
    snprintf(r->size_text, sizeof(r->size_text), "20GB");
    snprintf(r->backend, sizeof(r->backend), "loop");
    r->enforced = true;
    snprintf(r->docker_volume, sizeof(r->docker_volume), "gpubox_%s", name);
    r->docker_options = json_pack("{s:s, s:s, s:s}", "type", "none", "o", "bind", "device",
                                  "/var/lib/gpubox/volumes/data");
    snprintf(r->docker_mountpoint, sizeof(r->docker_mountpoint),
             "/var/lib/docker/volumes/gpubox_%s/_data", name);
}

static void put_history(store *s, const volumes_record *r)
{
    char key[STORE_KEY_MAX];
    keys_volume_history(key, sizeof(key), r->name, r->version);
    json_t *h = volumes_history_entry(r);
    char *text = json_dumps(h, JSON_COMPACT);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(store_put(s, key, text, NULL, &err), 0);
    free(text);
    json_decref(h);
}

static void test_round_trip_through_the_store(void **state)
{
    fixture *f = *state;
    gb_err err = GB_ERR_INIT;
    _cleanup_(volumes_record_free) volumes_record r, back = {0};
    fill(&r, "data");
    r.resizing_to = 40ULL << 30;
    snprintf(r.resizing_text, sizeof(r.resizing_text), "40GB");
    assert_int_equal(volumes_record_save(f->s, NULL, &r, NULL, 0, &err), 0);
    assert_true(r.mod_revision > 0);
    assert_string_not_equal(r.create_time, "");

    assert_int_equal(volumes_record_load(f->s, "data", &back, &err), 1);
    assert_string_equal(back.name, "data");
    assert_int_equal(back.state, VOL_STATE_READY);
    assert_int_equal(back.version, 1);
    assert_true(back.size == 20ULL << 30);
    assert_string_equal(back.size_text, "20GB");
    assert_string_equal(back.backend, "loop");
    assert_true(back.enforced);
    assert_string_equal(back.docker_volume, "gpubox_data");
    assert_true(json_equal(back.docker_options, r.docker_options));
    assert_string_equal(back.docker_mountpoint, r.docker_mountpoint);
    assert_true(back.resizing_to == 40ULL << 30);
    assert_string_equal(back.resizing_text, "40GB");
    assert_string_equal(back.create_time, r.create_time);
    assert_true(back.mod_revision == r.mod_revision);

    volumes_record absent = {0};
    assert_int_equal(volumes_record_load(f->s, "nothing", &absent, &err), 0);
}

static void test_saves_are_compare_and_swap(void **state)
{
    fixture *f = *state;
    gb_err err = GB_ERR_INIT;
    _cleanup_(volumes_record_free) volumes_record a, b = {0};
    fill(&a, "data");
    assert_int_equal(volumes_record_save(f->s, NULL, &a, NULL, 0, &err), 0);

    /* A second create of the same name loses: "exists". */
    fill(&b, "data");
    assert_int_equal(volumes_record_save(f->s, NULL, &b, NULL, 0, &err), -1);
    assert_int_equal(err.code, ERR_VOLUME_EXISTS);

    /* A writer holding an old revision loses: "changed meanwhile". */
    b.mod_revision = a.mod_revision;
    a.version = 2;
    assert_int_equal(volumes_record_save(f->s, NULL, &a, NULL, 0, &err), 0);
    b.version = 7;
    assert_int_equal(volumes_record_save(f->s, NULL, &b, NULL, 0, &err), -1);
    assert_int_equal(err.code, ERR_CONFLICT);
    _cleanup_(volumes_record_free) volumes_record now = {0};
    assert_int_equal(volumes_record_load(f->s, "data", &now, &err), 1);
    assert_int_equal(now.version, 2);
}

static void test_delete_takes_the_history_and_only_its_own(void **state)
{
    fixture *f = *state;
    gb_err err = GB_ERR_INIT;
    _cleanup_(volumes_record_free) volumes_record a, other = {0};
    fill(&a, "data");
    fill(&other, "data.old"); /* shares a prefix with "data" */
    assert_int_equal(volumes_record_save(f->s, NULL, &a, NULL, 0, &err), 0);
    assert_int_equal(volumes_record_save(f->s, NULL, &other, NULL, 0, &err), 0);
    for (int v = 1; v <= 3; v++) {
        a.version = other.version = v;
        put_history(f->s, &a);
        put_history(f->s, &other);
    }
    volumes_record *all = NULL;
    size_t n = 0;
    assert_int_equal(volumes_records_load_all(f->s, &all, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "data");
    assert_string_equal(all[1].name, "data.old");
    volumes_records_free(all, n);

    assert_int_equal(volumes_record_delete(f->s, NULL, &a, &err), 0);
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    assert_int_equal(store_range(f->s, KEYS_VOLUME_HISTORY, &kvs, &err), 0);
    assert_int_equal(kvs.n, 3);
    for (size_t i = 0; i < kvs.n; i++)
        assert_non_null(strstr(kvs.items[i].key, "/data.old/"));
    assert_string_equal(kvs.items[0].key, "/gpubox/volume-history/data.old/0000000001");
    volumes_record gone = {0};
    assert_int_equal(volumes_record_load(f->s, "data", &gone, &err), 0);

    /* A stale delete (the record changed since it was read) does nothing. */
    other.mod_revision = 1;
    assert_int_equal(volumes_record_delete(f->s, NULL, &other, &err), -1);
    assert_int_equal(err.code, ERR_CONFLICT);
}

static void test_broken_records_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {
        "{\"name\":\"x\",\"state\":\"melting\",\"version\":1,\"size\":1}",
        "{\"name\":\"x\",\"state\":\"ready\",\"version\":1}",
        "{\"name\":\"x\",\"state\":\"ready\",\"version\":1,\"size\":-5}",
        "{\"name\":\"x\",\"state\":\"ready\",\"version\":\"1\",\"size\":1}",
        "{\"name\":\"x\",\"state\":\"ready\",\"version\":1,\"size\":1,\"resizing\":{}}",
        "[1,2]",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        volumes_record r;
        gb_err err = GB_ERR_INIT;
        assert_int_equal(volumes_record_from_json(j, &r, &err), -1);
        assert_int_equal(err.code, ERR_INTERNAL);
        json_decref(j);
    }
    json_t *ok =
        json_loads("{\"name\":\"x\",\"state\":\"creating\",\"version\":1,\"size\":1}", 0, NULL);
    volumes_record r;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(volumes_record_from_json(ok, &r, &err), 0);
    assert_int_equal(r.state, VOL_STATE_CREATING);
    assert_non_null(r.docker_options);
    volumes_record_free(&r);
    json_decref(ok);
}

static void test_history_keys_sort_by_version(void **state)
{
    (void)state;
    char a[STORE_KEY_MAX], b[STORE_KEY_MAX], p[STORE_KEY_MAX];
    assert_string_equal(keys_volume_history(a, sizeof(a), "data", 9),
                        "/gpubox/volume-history/data/0000000009");
    assert_non_null(keys_volume_history(b, sizeof(b), "data", 10));
    assert_true(strcmp(a, b) < 0);
    assert_string_equal(keys_volume_history_prefix(p, sizeof(p), "data"),
                        "/gpubox/volume-history/data/");
    /* The history prefix never falls under the records' prefix. */
    assert_true(strncmp(a, KEYS_VOLUMES, strlen(KEYS_VOLUMES)) != 0);
    char tiny[8];
    assert_null(keys_volume_history(tiny, sizeof(tiny), "data", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_through_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saves_are_compare_and_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_takes_the_history_and_only_its_own, setup,
                                        teardown),
        cmocka_unit_test(test_broken_records_are_refused),
        cmocka_unit_test(test_history_keys_sort_by_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
