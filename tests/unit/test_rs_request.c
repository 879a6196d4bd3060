/*
 * test_rs_request.c - the one create parser (service/replicaset/request.h):
 * every field of both route families into the typed request, unknown
 * fields refused as the routes always did, and the list of create fields
 * covering everything a spec prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "service/replicaset/request.h"
#include "util/cleanup.h"

#define ED_KEY "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMBOOVpKl70aWpC9CI0pjknieNF6kuIECYx9bPT5lyhH"

/* Parse text of family; the error code (ERR_OK on success), its message in msg. */
static int parse(const char *text, enum replicaset_create_family family, bool in_fleet,
                 replicaset_create_request *out, char *msg, size_t msg_size)
{
    json_error_t jerr;
    _cleanup_json_ json_t *j = json_loads(text, 0, &jerr);
    assert_non_null(j);
    gb_err e = GB_ERR_INIT;
    int rc = replicaset_create_request_parse(j, family, in_fleet, out, &e);
    if (msg)
        snprintf(msg, msg_size, "%s", e.msg);
    return rc == 0 ? ERR_OK : e.code;
}

static void test_every_field(void **state)
{
    (void)state;
    replicaset_create_request r;
    char msg[512];
    int code = parse("{\"replicaSetName\":\"web\",\"imageName\":\"img:1\",\"gpuCount\":2,"
                     "\"gpuMemory\":\"4GB\",\"gpuPolicy\":\"spread\",\"gpuModel\":\"T4\","
                     "\"binds\":[{\"src\":\"vol\",\"dest\":\"/data\"}],\"env\":[\"A=1\"],"
                     "\"cmd\":[\"sleep\",\"1\"],\"containerPorts\":[\"8080\"],"
                     "\"ports\":[{\"hostPort\":40001,\"containerPort\":81}],\"cpus\":1.5,"
                     "\"cpuCount\":2,\"memory\":\"256MB\",\"shmSize\":\"64MB\","
                     "\"restartPolicy\":\"always\",\"labels\":{\"team\":\"x\"},"
                     "\"sshKeys\":[\"" ED_KEY "\"],\"idleStop\":\"30m\",\"maxDuration\":\"2h\","
                     "\"pull\":\"never\",\"registryAuth\":{\"username\":\"u\",\"password\":\"p\"},"
                     "\"node\":\"b\",\"nodeSelector\":{\"zone\":\"z1\",\"disk\":\"ssd\"},"
                     "\"placement\":\"spread\"}",
                     RS_CREATE_REPLICASET, true, &r, msg, sizeof(msg));
    assert_int_equal(code, ERR_OK);
    assert_string_equal(r.name, "web");
    assert_string_equal(r.spec.image, "img:1");
    assert_int_equal(r.spec.gpu_count, 2);
    assert_int_equal(r.spec.gpu_memory_mib, 4096);
    assert_string_equal(r.spec.gpu_model, "T4");
    assert_int_equal(r.spec.nbinds, 1);
    assert_string_equal(r.spec.binds[0].src, "vol");
    assert_int_equal(r.spec.nenv, 1);
    assert_int_equal(r.spec.ncmd, 2);
    assert_int_equal(r.spec.nports, 3); /* 8080, 81 and 22 for the keys */
    assert_true(r.spec.cpus > 1.4 && r.spec.cpus < 1.6);
    assert_int_equal(r.spec.cpu_count, 2);
    assert_int_equal(r.spec.memory_bytes, 256LL << 20);
    assert_int_equal(r.spec.shm_bytes, 64LL << 20);
    assert_string_equal(r.spec.restart_policy, "always");
    assert_string_equal(json_string_value(json_object_get(r.spec.labels, "team")), "x");
    assert_int_equal(r.spec.nssh_keys, 1);
    assert_int_equal(r.idle_stop_s, 1800);
    assert_int_equal(r.max_duration_s, 7200);
    assert_int_equal(r.image.pull, IMAGE_PULL_NEVER);
    assert_string_equal(r.image.auth.username, "u");
    assert_true(r.placement.given);
    assert_string_equal(r.placement.node, "b");
    assert_true(r.placement.has_policy);
    assert_int_equal(r.placement.policy, GPUS_POLICY_SPREAD);
    assert_int_equal(r.placement.nselector, 2);
    assert_string_equal(r.placement.selector[0].key, "zone");
    assert_string_equal(r.placement.selector[0].value, "z1");
    replicaset_create_request_free(&r);

    /* the least: a name and an image; defaults everywhere else */
    code = parse("{\"replicaSetName\":\"min\",\"imageName\":\"img\"}", RS_CREATE_REPLICASET, false,
                 &r, msg, sizeof(msg));
    assert_int_equal(code, ERR_OK);
    assert_int_equal(r.image.pull, IMAGE_PULL_MISSING);
    assert_null(r.image.auth.username);
    assert_false(r.placement.given);
    assert_null(r.placement.node);
    assert_int_equal(r.idle_stop_s, 0);
    assert_int_equal(r.max_duration_s, 0);
    replicaset_create_request_free(&r);
}

static void test_the_older_family(void **state)
{
    (void)state;
    replicaset_create_request r;
    char msg[512];
    int code = parse(
        "{\"containerName\":\"old\",\"imageName\":\"img\",\"gpuCount\":1,"
        "\"binds\":[{\"src\":\"foo-2\",\"dest\":\"/data\"},{\"src\":\"bar-3\",\"dest\":\"/b\"},"
        "{\"src\":\"/host\",\"dest\":\"/h\"}],\"env\":[\"A=1\"],\"cmd\":[\"true\"],"
        "\"Ports\":[{\"hostPort\":\"40002\",\"containerPort\":\"22\"},"
        "{\"containerPort\":8888}],\"containerPorts\":[\"9000\"]}",
        RS_CREATE_CONTAINERS, false, &r, msg, sizeof(msg));
    if (code != ERR_OK)
        fail_msg("refused: %s", msg);
    assert_string_equal(r.name, "old");
    assert_int_equal(r.spec.gpu_count, 1);
    assert_int_equal(r.spec.nbinds, 3);
    assert_string_equal(r.spec.binds[0].src, "foo");
    assert_string_equal(r.spec.binds[1].src, "bar");
    assert_string_equal(r.spec.binds[2].src, "/host");
    assert_int_equal(r.spec.nports, 3);
    bool saw_40002 = false;
    for (size_t i = 0; i < r.spec.nports; i++)
        if (r.spec.ports[i].host_port == 40002 && r.spec.ports[i].container_port == 22)
            saw_40002 = true;
    assert_true(saw_40002);
    replicaset_create_request_free(&r);

    /* Ports: null is no ports */
    code = parse("{\"containerName\":\"old\",\"imageName\":\"img\",\"Ports\":null}",
                 RS_CREATE_CONTAINERS, false, &r, msg, sizeof(msg));
    assert_int_equal(code, ERR_OK);
    assert_int_equal(r.spec.nports, 0);
    replicaset_create_request_free(&r);
}

static void test_queue_fields(void **state)
{
    (void)state;
    replicaset_create_request r;
    char msg[512];
    int code = parse("{\"containerName\":\"old\",\"imageName\":\"img\",\"queue\":true,"
                     "\"queueTimeout\":\"2h\",\"priority\":70}",
                     RS_CREATE_CONTAINERS, false, &r, msg, sizeof(msg));
    if (code != ERR_OK)
        fail_msg("refused: %s", msg);
    assert_true(r.queue);
    assert_int_equal(r.queue_timeout_s, 7200);
    assert_int_equal(r.priority, 70);
    replicaset_create_request_free(&r);
    code = parse("{\"replicaSetName\":\"a\",\"imageName\":\"img\"}", RS_CREATE_REPLICASET, false,
                 &r, msg, sizeof(msg));
    assert_int_equal(code, ERR_OK);
    assert_false(r.queue);
    assert_int_equal(r.priority, -1);
    replicaset_create_request_free(&r);
}

typedef struct refusal {
    const char *body;
    enum replicaset_create_family family;
    bool in_fleet;
    int code;
    const char *in_msg;
} refusal;

static void test_refusals(void **state)
{
    (void)state;
    static const refusal cases[] = {
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"bogus\":1}", RS_CREATE_REPLICASET, true,
         ERR_INVALID_PARAMS,
         "unknown field 'bogus'; see docs/api.md for the fields of a replica set"},
        /* the older family names its own fields, and takes no newer ones */
        {"{\"containerName\":\"a\",\"imageName\":\"i\",\"replicaSetName\":\"a\"}",
         RS_CREATE_CONTAINERS, false, ERR_INVALID_PARAMS,
         "unknown field 'replicaSetName'; this route takes: imageName, containerName, gpuCount, "
         "binds, env, cmd, Ports, containerPorts, queue, queueTimeout, priority"},
        {"{\"containerName\":\"a\",\"imageName\":\"i\",\"maxDuration\":\"1h\"}",
         RS_CREATE_CONTAINERS, true, ERR_INVALID_PARAMS, "unknown field 'maxDuration'"},
        {"{\"containerName\":\"a\",\"imageName\":\"i\",\"Ports\":[{\"containerPort\":\"x\"}]}",
         RS_CREATE_CONTAINERS, false, ERR_WRONG_TYPE, "Ports[0].containerPort"},
        {"{\"containerName\":\"a\",\"imageName\":\"i\",\"Ports\":[{\"port\":1}]}",
         RS_CREATE_CONTAINERS, false, ERR_INVALID_PARAMS,
         "unknown field 'port'; this route takes: hostPort, containerPort, protocol"},
        /* the queue's fields (docs/queue.md) */
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"queue\":1}", RS_CREATE_REPLICASET, false,
         ERR_WRONG_TYPE, "queue must be true or false"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"priority\":101}", RS_CREATE_REPLICASET,
         false, ERR_INVALID_PARAMS, "priority is 101; give 0-100"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"priority\":\"high\"}",
         RS_CREATE_REPLICASET, false, ERR_WRONG_TYPE, "priority must be a whole number"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"queue\":true,\"queueTimeout\":\"soon\"}",
         RS_CREATE_REPLICASET, false, ERR_INVALID_PARAMS, "queueTimeout is 'soon'"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"queueTimeout\":\"2h\"}",
         RS_CREATE_REPLICASET, false, ERR_INVALID_PARAMS, "queueTimeout needs"},
        {"{\"containerName\":\"a\",\"imageName\":\"i\",\"Ports\":3}", RS_CREATE_CONTAINERS, false,
         ERR_WRONG_TYPE, "field 'Ports' must be an array"},
        /* placement on a single server, and its values */
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"node\":\"b\"}", RS_CREATE_REPLICASET,
         false, ERR_INVALID_PARAMS, "this gpuboxd is a single server"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"node\":\"-b\"}", RS_CREATE_REPLICASET,
         true, ERR_INVALID_NAME, "node name '-b'"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"placement\":\"fill\"}",
         RS_CREATE_REPLICASET, true, ERR_INVALID_PARAMS, "is not binpack or spread"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"nodeSelector\":{\"k\":1}}",
         RS_CREATE_REPLICASET, true, ERR_INVALID_PARAMS, "nodeSelector.k must be a string"},
        /* name, pull, credentials, run limits */
        {"{\"imageName\":\"i\"}", RS_CREATE_REPLICASET, false, ERR_NAME_EMPTY,
         "replica set name is empty"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"pull\":\"sometimes\"}",
         RS_CREATE_REPLICASET, false, ERR_INVALID_PARAMS, "pull is 'sometimes'"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"registryAuth\":\"x\"}",
         RS_CREATE_REPLICASET, false, ERR_WRONG_TYPE, "registryAuth"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"maxDuration\":\"1s\"}",
         RS_CREATE_REPLICASET, false, ERR_INVALID_PARAMS, "maxDuration is '1s'"},
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"idleStop\":5}", RS_CREATE_REPLICASET,
         false, ERR_WRONG_TYPE, "idleStop must be a duration"},
        /* the spec's own checks */
        {"{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"gpuCount\":-1}", RS_CREATE_REPLICASET,
         false, ERR_GPU_COUNT_NEGATIVE, "gpuCount"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        replicaset_create_request r;
        char msg[512];
        int code = parse(cases[i].body, cases[i].family, cases[i].in_fleet, &r, msg, sizeof(msg));
        if (code != cases[i].code || !strstr(msg, cases[i].in_msg))
            fail_msg("case %zu %s: code %d msg '%s'; wanted %d with '%s'", i, cases[i].body, code,
                     msg, cases[i].code, cases[i].in_msg);
        assert_null(r.body); /* nothing held after a refusal */
        replicaset_create_request_free(&r);
    }
}

/* Every field a spec prints is a create field: a new spec field cannot be
 * forgotten by the create list (and so by the fleet's placement). */
static void test_the_list_covers_the_spec(void **state)
{
    (void)state;
    replicaset_create_request r;
    char msg[512];
    assert_int_equal(parse("{\"replicaSetName\":\"a\",\"imageName\":\"i\",\"cpuCount\":1}",
                           RS_CREATE_REPLICASET, false, &r, msg, sizeof(msg)),
                     ERR_OK);
    _cleanup_json_ json_t *printed = replicaset_spec_to_json(&r.spec);
    const char *key;
    json_t *v;
    json_object_foreach(printed, key, v)
    {
        bool listed = false;
        for (size_t i = 0; replicaset_create_fields[i].name; i++)
            listed = listed || strcmp(replicaset_create_fields[i].name, key) == 0;
        if (!listed)
            fail_msg("spec field %s is missing from replicaset_create_fields", key);
    }
    replicaset_create_request_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_field),
        cmocka_unit_test(test_the_older_family),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_queue_fields),
        cmocka_unit_test(test_the_list_covers_the_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
