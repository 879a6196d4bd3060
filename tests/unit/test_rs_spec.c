/*
 * test_rs_spec.c - replica-set specs: every field's validation, the
 * normalized JSON form, and that printing then parsing gives the same spec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "service/replicaset/patch_request.h"
#include "service/replicaset/record.h"
#include "service/replicaset/spec.h"
#include "util/cleanup.h"

static const char *const create_extra[] = {"replicaSetName", NULL};

/* Parse text; returns the error code (ERR_OK on success) and frees the spec. */
static int parse_code(const char *text, char *msg, size_t msg_size)
{
    json_error_t jerr;
    _cleanup_json_ json_t *j = json_loads(text, 0, &jerr);
    assert_non_null(j);
    replicaset_spec s;
    gb_err e = GB_ERR_INIT;
    int rc = replicaset_spec_from_json(j, create_extra, &s, &e);
    if (msg)
        snprintf(msg, msg_size, "%s", e.msg);
    if (rc == 0) {
        replicaset_spec_free(&s);
        return ERR_OK;
    }
    return e.code;
}

/* A body the spec must refuse: with code, and a message holding in_msg. */
typedef struct spec_refusal {
    const char *body;
    int code;
    const char *in_msg;
} spec_refusal;

/* Each of the n bodies refused as its case says; a failure names the body. */
static void assert_refusals(const spec_refusal *cases, size_t n)
{
    char msg[512];
    for (size_t i = 0; i < n; i++) {
        int code = parse_code(cases[i].body, msg, sizeof(msg));
        if (code != cases[i].code || !strstr(msg, cases[i].in_msg))
            fail_msg("%s: got code %d msg '%s', want %d with '%s'", cases[i].body, code, msg,
                     cases[i].code, cases[i].in_msg);
    }
}

static void test_full_spec_roundtrip(void **state)
{
    (void)state;
    const char *text =
        "{\"replicaSetName\":\"foo\",\"imageName\":\"ubuntu:22.04\",\"gpuCount\":2,"
        "\"binds\":[{\"src\":\"data\",\"dest\":\"/root/data\"},{\"src\":\"/srv/x\","
        "\"dest\":\"/x\",\"readOnly\":true}],\"env\":[\"A=1\",\"B=\"],\"cmd\":[\"sleep\","
        "\"10\"],\"containerPorts\":[\"22\",\"53/udp\",8888],\"ports\":[{\"hostPort\":41000,"
        "\"containerPort\":80}],\"cpus\":1.5,\"memory\":\"2GB\",\"shmSize\":\"64MB\","
        "\"restartPolicy\":\"always\",\"labels\":{\"team\":\"vision\"}}";
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    replicaset_spec s;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(replicaset_spec_from_json(j, create_extra, &s, &e), 0);
    assert_string_equal(s.image, "ubuntu:22.04");
    assert_int_equal(s.gpu_count, 2);
    assert_int_equal(s.nbinds, 2);
    assert_true(s.binds[1].read_only);
    assert_int_equal(s.nenv, 2);
    assert_int_equal(s.ncmd, 2);
    assert_int_equal(s.nports, 4);
    assert_int_equal(s.ports[1].container_port, 53);
    assert_string_equal(s.ports[1].protocol, "udp");
    assert_int_equal(s.ports[3].host_port, 41000);
    assert_int_equal(replicaset_spec_ports_to_allocate(&s), 3);
    assert_int_equal(s.memory_bytes, 2LL << 30);
    assert_int_equal(s.shm_bytes, 64LL << 20);
    assert_true(s.cpus > 1.49 && s.cpus < 1.51);

    /* print, parse again, print again: the same JSON */
    _cleanup_json_ json_t *printed = replicaset_spec_to_json(&s);
    replicaset_spec again;
    assert_int_equal(replicaset_spec_from_json(printed, NULL, &again, &e), 0);
    _cleanup_json_ json_t *printed2 = replicaset_spec_to_json(&again);
    assert_true(json_equal(printed, printed2));
    _cleanup_free_ char *dump = json_dumps(printed, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(strstr(dump, "\"containerPorts\":[\"22/tcp\",\"53/udp\",\"8888/tcp\"]"));
    assert_non_null(strstr(dump, "\"memory\":2147483648"));

    replicaset_spec copy;
    replicaset_spec_copy(&s, &copy);
    assert_string_equal(copy.binds[0].src, "data");
    assert_ptr_not_equal(copy.binds[0].src, s.binds[0].src); /* deep */
    _cleanup_json_ json_t *copied = replicaset_spec_to_json(&copy);
    assert_true(json_equal(printed, copied));
    replicaset_spec_free(&copy);
    replicaset_spec_free(&again);
    replicaset_spec_free(&s);
}

static void test_spec_errors(void **state)
{
    (void)state;
    static const spec_refusal cases[] = {
        {"{}", ERR_IMAGE_EMPTY, "imageName"},
        {"{\"imageName\":\"\"}", ERR_IMAGE_EMPTY, "imageName"},
        {"{\"imageName\":5}", ERR_WRONG_TYPE, "imageName"},
        {"{\"imageName\":\"a b\"}", ERR_INVALID_PARAMS, "whitespace"},
        {"{\"imageName\":\"x\",\"gpuCount\":-1}", ERR_GPU_COUNT_NEGATIVE, "gpuCount"},
        {"{\"imageName\":\"x\",\"gpuCount\":\"2\"}", ERR_WRONG_TYPE, "gpuCount"},
        {"{\"imageName\":\"x\",\"gpuCount\":100000}", ERR_INVALID_PARAMS, "at most"},
        {"{\"imageName\":\"x\",\"bogus\":1}", ERR_INVALID_PARAMS, "unknown field 'bogus'"},
        {"{\"imageName\":\"x\",\"env\":[\"NOEQUALS\"]}", ERR_INVALID_PARAMS, "NAME=value"},
        {"{\"imageName\":\"x\",\"env\":[\"=v\"]}", ERR_INVALID_PARAMS, "NAME=value"},
        {"{\"imageName\":\"x\",\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]}", ERR_INVALID_PARAMS,
         "env[0] sets NVIDIA_VISIBLE_DEVICES, which gpubox sets itself"},
        {"{\"imageName\":\"x\",\"env\":[\"A=1\",\"GPUBOX_GPU_MEMORY_MIB=99\"]}", ERR_INVALID_PARAMS,
         "env[1] sets GPUBOX_GPU_MEMORY_MIB"},
        {"{\"imageName\":\"x\",\"env\":[\"CUDA_DEVICE_MEMORY_LIMIT_0=80g\"]}", ERR_INVALID_PARAMS,
         "CUDA_DEVICE_MEMORY_LIMIT_0"},
        {"{\"imageName\":\"x\",\"env\":\"A=1\"}", ERR_WRONG_TYPE, "env"},
        {"{\"imageName\":\"x\",\"cmd\":[1]}", ERR_WRONG_TYPE, "cmd"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\"}]}", ERR_INVALID_PARAMS, "dest"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"rel\"}]}", ERR_INVALID_PARAMS,
         "absolute"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/\"}]}", ERR_INVALID_PARAMS,
         "'/'"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"/a/../b\",\"dest\":\"/d\"}]}",
         ERR_INVALID_PARAMS, ".."},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"a-b\",\"dest\":\"/d\"}]}",
         ERR_VOLUME_NAME_HAS_DASH, "'-'"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/d\"},{\"src\":\"w\","
         "\"dest\":\"/d\"}]}",
         ERR_INVALID_PARAMS, "both mount"},
        {"{\"imageName\":\"x\",\"binds\":[\"v:/d\"]}", ERR_WRONG_TYPE, "binds[0]"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/etc/gpubox/gpu.env\"}]}",
         ERR_INVALID_PARAMS, "where gpubox mounts its own files"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/usr/local/gpubox\"}]}",
         ERR_INVALID_PARAMS, "/usr/local/gpubox"},
        /* the CUDA limiter's preload file, limits and budget */
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/etc/ld.so.preload\"}]}",
         ERR_INVALID_PARAMS, "/etc/ld.so.preload"},
        {"{\"imageName\":\"x\",\"binds\":[{\"src\":\"v\",\"dest\":\"/run/gpubox/budget\"}]}",
         ERR_INVALID_PARAMS, "under /run/gpubox"},
        {"{\"imageName\":\"x\",\"containerPorts\":[\"0\"]}", ERR_INVALID_PARAMS, "1-65535"},
        {"{\"imageName\":\"x\",\"containerPorts\":[\"70000\"]}", ERR_INVALID_PARAMS, "1-65535"},
        {"{\"imageName\":\"x\",\"containerPorts\":[\"22/sctp\"]}", ERR_INVALID_PARAMS, "udp"},
        {"{\"imageName\":\"x\",\"containerPorts\":[\"ssh\"]}", ERR_INVALID_PARAMS, "port"},
        {"{\"imageName\":\"x\",\"containerPorts\":[\"22\",22]}", ERR_INVALID_PARAMS, "twice"},
        {"{\"imageName\":\"x\",\"ports\":[{\"hostPort\":1,\"containerPort\":1},{\"hostPort\":1,"
         "\"containerPort\":2}]}",
         ERR_INVALID_PARAMS, "host port 1/tcp is asked twice"},
        {"{\"imageName\":\"x\",\"ports\":[{\"hostPort\":-1,\"containerPort\":1}]}",
         ERR_INVALID_PARAMS, "hostPort"},
        {"{\"imageName\":\"x\",\"cpus\":-1}", ERR_INVALID_PARAMS, "cpus"},
        {"{\"imageName\":\"x\",\"cpus\":\"2\"}", ERR_WRONG_TYPE, "cpus"},
        {"{\"imageName\":\"x\",\"memory\":\"1KB\"}", ERR_INVALID_PARAMS, "at least"},
        {"{\"imageName\":\"x\",\"memory\":\"2XB\"}", ERR_VOLUME_SIZE_UNIT, "XB"},
        {"{\"imageName\":\"x\",\"memory\":-5}", ERR_INVALID_PARAMS, "memory"},
        {"{\"imageName\":\"x\",\"restartPolicy\":\"sometimes\"}", ERR_INVALID_PARAMS,
         "restartPolicy"},
        {"{\"imageName\":\"x\",\"labels\":{\"gpubox.replicaset\":\"y\"}}", ERR_INVALID_PARAMS,
         "gpubox."},
        {"{\"imageName\":\"x\",\"labels\":{\"a\":1}}", ERR_WRONG_TYPE, "labels.a"},
        {"{\"imageName\":\"x\",\"env\":[\"A=\\u0001\"]}", ERR_INVALID_PARAMS, "control"},
    };
    assert_refusals(cases, ARRAY_SIZE(cases));
    assert_int_equal(parse_code("{\"imageName\":\"x\",\"gpuCount\":0,\"env\":null}", NULL, 0),
                     ERR_OK);
}

static void test_lifecycle_table(void **state)
{
    (void)state;
    replicaset_record r = {.name = "foo"};
    gb_err e = GB_ERR_INIT;
    r.state = RS_STATE_RUNNING;
    assert_int_equal(replicaset_lifecycle_check(RS_OP_STOP, &r, &e), 0);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_PAUSE, &r, &e), 0);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_CONTINUE, &r, &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "running"));
    r.state = RS_STATE_STOPPED;
    assert_int_equal(replicaset_lifecycle_check(RS_OP_STOP, &r, &e), -1);
    assert_non_null(strstr(e.msg, "already stopped"));
    assert_int_equal(replicaset_lifecycle_check(RS_OP_PAUSE, &r, &e), -1);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_CONTINUE, &r, &e), -1);
    assert_non_null(strstr(e.msg, "restart"));
    assert_int_equal(replicaset_lifecycle_check(RS_OP_EXECUTE, &r, &e), -1);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_DELETE, &r, &e), 0);
    /* A change of a stopped set waits for its next start (record.h). */
    assert_int_equal(replicaset_lifecycle_check(RS_OP_PATCH, &r, &e), 0);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_ROLLBACK, &r, &e), 0);
    r.state = RS_STATE_PAUSED;
    assert_int_equal(replicaset_lifecycle_check(RS_OP_CONTINUE, &r, &e), 0);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_STOP, &r, &e), 0);
    assert_int_equal(replicaset_lifecycle_check(RS_OP_PAUSE, &r, &e), -1);
    r.state = RS_STATE_DELETED;
    assert_int_equal(replicaset_lifecycle_check(RS_OP_DELETE, &r, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

static void test_record_roundtrip(void **state)
{
    (void)state;
    const char *text =
        "{\"name\":\"foo\",\"version\":3,\"state\":\"paused\",\"spec\":{\"imageName\":\"x\","
        "\"gpuCount\":1},\"containerName\":\"foo-3\",\"containerId\":\"abc\",\"gpus\":[\"GPU-1\"],"
        "\"ports\":[{\"hostPort\":40001,\"containerPort\":22,\"protocol\":\"tcp\"}],"
        "\"createTime\":\"t1\",\"updateTime\":\"t2\"}";
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    replicaset_record r;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(replicaset_record_from_json(j, &r, &e), 0);
    assert_int_equal(r.version, 3);
    assert_int_equal(r.state, RS_STATE_PAUSED);
    assert_int_equal(r.ngpus, 1);
    assert_string_equal(r.gpus[0], "GPU-1");
    assert_int_equal(r.ports[0].host_port, 40001);
    _cleanup_json_ json_t *back = replicaset_record_to_json(&r);
    assert_string_equal(json_string_value(json_object_get(back, "state")), "paused");
    assert_int_equal(json_array_size(json_object_get(back, "gpus")), 1);
    replicaset_record_free(&r);

    /* A stopped set's change waiting for its next start (record.h). */
    _cleanup_json_ json_t *stopped =
        json_loads("{\"name\":\"foo\",\"version\":2,\"state\":\"stopped\",\"spec\":{"
                   "\"imageName\":\"x\"},\"pendingSpec\":{\"imageName\":\"y\",\"gpuCount\":2}}",
                   0, NULL);
    assert_int_equal(replicaset_record_from_json(stopped, &r, &e), 0);
    assert_non_null(r.pending_spec);
    replicaset_record copy;
    replicaset_record_copy(&r, &copy);
    replicaset_record_free(&r);
    _cleanup_json_ json_t *again = replicaset_record_to_json(&copy);
    json_t *pending = json_object_get(again, "pendingSpec");
    assert_string_equal(json_string_value(json_object_get(pending, "imageName")), "y");
    assert_int_equal(json_integer_value(json_object_get(pending, "gpuCount")), 2);
    replicaset_record_free(&copy);
    assert_null(copy.pending_spec);
    _cleanup_json_ json_t *odd = json_loads("{\"name\":\"foo\",\"version\":1,\"state\":"
                                            "\"stopped\",\"spec\":{\"imageName\":\"x\"},"
                                            "\"pendingSpec\":[]}",
                                            0, NULL);
    assert_int_equal(replicaset_record_from_json(odd, &r, &e), -1);
    assert_int_equal(e.code, ERR_INTERNAL);

    _cleanup_json_ json_t *bad = json_loads("{\"name\":\"foo\",\"version\":1,\"state\":\"odd\","
                                            "\"spec\":{\"imageName\":\"x\"}}",
                                            0, NULL);
    assert_int_equal(replicaset_record_from_json(bad, &r, &e), -1);
    assert_int_equal(e.code, ERR_INTERNAL);
}

/* A record keeps the fields this gpuboxd does not know (a newer one wrote
 * them) and writes them back, so a record carried whole to another node
 * (a move) loses nothing; the ones it knows are its own to write. */
static void test_record_keeps_unknown_fields(void **state)
{
    (void)state;
    _cleanup_json_ json_t *j =
        json_loads("{\"name\":\"foo\",\"version\":2,\"state\":\"running\",\"spec\":{\"imageName\":"
                   "\"x\"},\"addedLater\":[{\"name\":\"web\",\"port\":80}],\"futureFlag\":true}",
                   0, NULL);
    replicaset_record r;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(replicaset_record_from_json(j, &r, &e), 0);
    replicaset_record copy;
    replicaset_record_copy(&r, &copy);
    replicaset_record_free(&r);
    copy.version = 3;
    _cleanup_json_ json_t *back = replicaset_record_to_json(&copy);
    assert_int_equal(json_integer_value(json_object_get(back, "version")), 3);
    assert_true(json_equal(json_object_get(back, "addedLater"), json_object_get(j, "addedLater")));
    assert_true(json_is_true(json_object_get(back, "futureFlag")));
    /* A known field the record no longer has is not brought back. */
    assert_null(json_object_get(back, "operation"));
    replicaset_record_free(&copy);
    assert_null(copy.unknown);
}

/* Parse a create body that must succeed. */
static void parse_ok(const char *text, replicaset_spec *s)
{
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    gb_err e = GB_ERR_INIT;
    if (replicaset_spec_from_json(j, create_extra, s, &e) < 0)
        fail_msg("%s: %s", text, e.msg);
}

static void test_gpu_share_fields(void **state)
{
    (void)state;
    replicaset_spec s;
    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":\"8GB\"}", &s);
    assert_int_equal(s.gpu_count, 1); /* a share defaults to one card */
    assert_int_equal(s.gpu_memory_mib, 8192);
    assert_false(s.gpu_shared);
    assert_int_equal(s.gpu_policy, GPUS_POLICY_BINPACK);
    assert_true(replicaset_spec_gpu_is_share(&s));
    replicaset_spec_free(&s);

    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":1536,\"gpuCount\":2,\"gpuPolicy\":\"spread\","
             "\"gpuModel\":\"a100\"}",
             &s);
    assert_int_equal(s.gpu_count, 2);
    assert_int_equal(s.gpu_memory_mib, 1536);
    assert_int_equal(s.gpu_policy, GPUS_POLICY_SPREAD);
    assert_string_equal(s.gpu_model, "a100");
    gpus_request req;
    replicaset_spec_gpu_request(&s, &req);
    assert_int_equal(req.count, 2);
    assert_int_equal(req.memory_mib, 1536);
    assert_false(req.timeslice);
    assert_int_equal(req.policy, GPUS_POLICY_SPREAD);
    assert_string_equal(req.model, "a100");
    assert_int_equal(req.npin, 0);
    replicaset_spec_free(&s);

    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":\"1.5gb\"}", &s);
    assert_int_equal(s.gpu_memory_mib, 1536);
    replicaset_spec_free(&s);

    parse_ok("{\"imageName\":\"x\",\"gpuShared\":true}", &s);
    assert_int_equal(s.gpu_count, 1);
    assert_true(s.gpu_shared);
    assert_int_equal(s.gpu_memory_mib, 0);
    replicaset_spec_free(&s);

    /* pins give the count; gpuCount may be absent, 0 or their number */
    const char *pinned[] = {
        "{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU-a\",\"GPU-b\"]}",
        "{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU-a\",\"GPU-b\"],\"gpuCount\":0}",
        "{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU-a\",\"GPU-b\"],\"gpuCount\":2,"
        "\"gpuMemory\":\"4GB\"}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(pinned); i++) {
        parse_ok(pinned[i], &s);
        assert_int_equal(s.gpu_count, 2);
        assert_int_equal(s.ngpu_uuids, 2);
        assert_string_equal(s.gpu_uuids[1], "GPU-b");
        replicaset_spec_gpu_request(&s, &req);
        assert_int_equal(req.npin, 2);
        assert_string_equal(req.pin_uuids[0], "GPU-a");
        replicaset_spec_free(&s);
    }

    /* whole cards, as always: nothing shared */
    parse_ok("{\"imageName\":\"x\",\"gpuCount\":3}", &s);
    assert_int_equal(s.gpu_count, 3);
    assert_false(replicaset_spec_gpu_is_share(&s));
    assert_null(s.gpu_uuids);
    assert_null(s.gpu_model);
    replicaset_spec_free(&s);
}

static void test_gpu_share_errors(void **state)
{
    (void)state;
    static const spec_refusal cases[] = {
        {"{\"imageName\":\"x\",\"gpuMemory\":\"8GB\",\"gpuShared\":true}", ERR_INVALID_PARAMS,
         "cannot be combined"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"8GB\",\"gpuCount\":0}", ERR_INVALID_PARAMS,
         "gpuCount is 0"},
        {"{\"imageName\":\"x\",\"gpuShared\":true,\"gpuCount\":0}", ERR_INVALID_PARAMS,
         "gpuShared asks"},
        {"{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU-a\"],\"gpuCount\":2}", ERR_INVALID_PARAMS,
         "names 1 GPU(s) but gpuCount is 2"},
        {"{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU-a\",\"GPU-a\"]}", ERR_INVALID_PARAMS, "twice"},
        {"{\"imageName\":\"x\",\"gpuUUIDs\":[\"GPU a\"]}", ERR_INVALID_PARAMS, "not a GPU UUID"},
        {"{\"imageName\":\"x\",\"gpuUUIDs\":[\"\"]}", ERR_INVALID_PARAMS, "not a GPU UUID"},
        {"{\"imageName\":\"x\",\"gpuUUIDs\":\"GPU-a\"}", ERR_WRONG_TYPE, "gpuUUIDs"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"8192\"}", ERR_INVALID_PARAMS, "no unit"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1000KB\"}", ERR_INVALID_PARAMS, "whole number"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"8XB\"}", ERR_VOLUME_SIZE_UNIT, "gpuMemory"},
        {"{\"imageName\":\"x\",\"gpuMemory\":-1}", ERR_INVALID_PARAMS, "gpuMemory is -1"},
        {"{\"imageName\":\"x\",\"gpuMemory\":99999999999}", ERR_INVALID_PARAMS, "MiB"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"900TB\"}", ERR_INVALID_PARAMS, "more than"},
        {"{\"imageName\":\"x\",\"gpuMemory\":8.5}", ERR_WRONG_TYPE, "gpuMemory"},
        {"{\"imageName\":\"x\",\"gpuShared\":\"yes\"}", ERR_WRONG_TYPE, "gpuShared"},
        {"{\"imageName\":\"x\",\"gpuPolicy\":\"fill\"}", ERR_INVALID_PARAMS, "binpack"},
        {"{\"imageName\":\"x\",\"gpuModel\":\"a\\u0001\"}", ERR_INVALID_PARAMS, "control"},
        {"{\"imageName\":\"x\",\"gpuModel\":7}", ERR_WRONG_TYPE, "gpuModel"},
    };
    assert_refusals(cases, ARRAY_SIZE(cases));
}

static void test_gpu_share_roundtrip(void **state)
{
    (void)state;
    replicaset_spec s, again;
    gb_err e = GB_ERR_INIT;
    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":\"10GB\",\"gpuUUIDs\":[\"GPU-b\",\"GPU-a\"],"
             "\"gpuPolicy\":\"SPREAD\",\"gpuModel\":\"H100\"}",
             &s);
    _cleanup_json_ json_t *printed = replicaset_spec_to_json(&s);
    _cleanup_free_ char *dump = json_dumps(printed, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(strstr(dump, "\"gpuCount\":2"));
    assert_non_null(strstr(dump, "\"gpuMemory\":10240"));
    assert_non_null(strstr(dump, "\"gpuPolicy\":\"spread\""));
    assert_non_null(strstr(dump, "\"gpuShared\":false"));
    assert_non_null(strstr(dump, "\"gpuUUIDs\":[\"GPU-b\",\"GPU-a\"]"));
    assert_non_null(strstr(dump, "\"gpuModel\":\"H100\""));
    assert_int_equal(replicaset_spec_from_json(printed, NULL, &again, &e), 0);
    _cleanup_json_ json_t *printed2 = replicaset_spec_to_json(&again);
    assert_true(json_equal(printed, printed2));
    replicaset_spec copy;
    replicaset_spec_copy(&s, &copy);
    assert_int_equal(copy.gpu_memory_mib, 10240);
    assert_int_equal(copy.ngpu_uuids, 2);
    replicaset_spec_free(&copy);
    replicaset_spec_free(&again);
    replicaset_spec_free(&s);

    /* a record written before GPU sharing has none of the fields */
    parse_ok("{\"imageName\":\"x\",\"gpuCount\":2}", &s);
    _cleanup_json_ json_t *old = replicaset_spec_to_json(&s);
    assert_int_equal(json_integer_value(json_object_get(old, "gpuMemory")), 0);
    assert_true(json_is_false(json_object_get(old, "gpuShared")));
    assert_string_equal(json_string_value(json_object_get(old, "gpuPolicy")), "binpack");
    assert_string_equal(json_string_value(json_object_get(old, "gpuModel")), "");
    replicaset_spec_free(&s);
}

/* Apply a patch body to s; returns the error code. */
static int patch(replicaset_spec *s, const char *text, char *msg, size_t size)
{
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    gb_err e = GB_ERR_INIT;
    int rc = replicaset_spec_gpu_from_json(j, true, s, &e);
    if (msg)
        snprintf(msg, size, "%s", e.msg);
    return rc == 0 ? ERR_OK : e.code;
}

static void test_gpu_patch_rules(void **state)
{
    (void)state;
    char msg[512];
    replicaset_spec s;
    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":\"8GB\",\"gpuCount\":2,\"gpuPolicy\":\"spread\"}",
             &s);
    /* an absent field keeps its value */
    assert_int_equal(patch(&s, "{\"gpuMemory\":\"16GB\"}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_memory_mib, 16384);
    assert_int_equal(s.gpu_count, 2);
    assert_int_equal(s.gpu_policy, GPUS_POLICY_SPREAD);
    /* time-slice replaces the memory share, and back */
    assert_int_equal(patch(&s, "{\"gpuShared\":true}", NULL, 0), ERR_OK);
    assert_true(s.gpu_shared);
    assert_int_equal(s.gpu_memory_mib, 0);
    assert_int_equal(patch(&s, "{\"gpuMemory\":4096}", NULL, 0), ERR_OK);
    assert_false(s.gpu_shared);
    assert_int_equal(s.gpu_memory_mib, 4096);
    /* a refused patch changes nothing */
    assert_int_equal(patch(&s, "{\"gpuCount\":0,\"gpuModel\":\"T4\"}", msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "gpuCount is 0"));
    assert_int_equal(s.gpu_count, 2);
    assert_null(s.gpu_model);
    assert_int_equal(patch(&s, "{\"gpuMemory\":\"1GB\",\"gpuShared\":true}", NULL, 0),
                     ERR_INVALID_PARAMS);
    assert_int_equal(s.gpu_memory_mib, 4096);
    /* back to whole cards, pinned */
    assert_int_equal(patch(&s, "{\"gpuMemory\":0,\"gpuUUIDs\":[\"GPU-c\"]}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_count, 1);
    assert_false(replicaset_spec_gpu_is_share(&s));
    assert_int_equal(s.ngpu_uuids, 1);
    assert_int_equal(patch(&s, "{\"gpuUUIDs\":[],\"gpuCount\":3}", NULL, 0), ERR_OK);
    assert_int_equal(s.ngpu_uuids, 0);
    assert_int_equal(s.gpu_count, 3);
    replicaset_spec_free(&s);

    /* from no GPU to a share: one card */
    parse_ok("{\"imageName\":\"x\"}", &s);
    assert_int_equal(patch(&s, "{\"gpuShared\":true}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_count, 1);
    replicaset_spec_free(&s);
}

/* gpuCores: 1-100 with a share; refused otherwise; null removes it; a
 * patch that makes the set whole drops it unless it names it. */
static void test_gpu_cores(void **state)
{
    (void)state;
    static const spec_refusal cases[] = {
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":0}", ERR_INVALID_PARAMS,
         "gpuCores is 0"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":101}", ERR_INVALID_PARAMS,
         "gpuCores is 101"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":-3}", ERR_INVALID_PARAMS,
         "1 to 100"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":\"50\"}", ERR_WRONG_TYPE,
         "gpuCores must be a whole number"},
        {"{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":50.5}", ERR_WRONG_TYPE,
         "not a number with a fraction"},
        {"{\"imageName\":\"x\",\"gpuCores\":50}", ERR_INVALID_PARAMS, "asks for no GPU"},
        {"{\"imageName\":\"x\",\"gpuCount\":2,\"gpuCores\":50}", ERR_INVALID_PARAMS, "whole cards"},
    };
    assert_refusals(cases, ARRAY_SIZE(cases));

    replicaset_spec s, again;
    gb_err e = GB_ERR_INIT;
    parse_ok("{\"imageName\":\"x\",\"gpuMemory\":\"1GB\",\"gpuCores\":30}", &s);
    assert_int_equal(s.gpu_cores, 30);
    _cleanup_json_ json_t *printed = replicaset_spec_to_json(&s);
    assert_int_equal(json_integer_value(json_object_get(printed, "gpuCores")), 30);
    assert_int_equal(replicaset_spec_from_json(printed, NULL, &again, &e), 0);
    assert_int_equal(again.gpu_cores, 30);
    replicaset_spec_free(&again);
    parse_ok("{\"imageName\":\"x\",\"gpuShared\":true,\"gpuCores\":100}", &again);
    assert_int_equal(again.gpu_cores, 100);
    replicaset_spec_free(&again);

    char msg[512];
    assert_int_equal(patch(&s, "{\"gpuCores\":60}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_cores, 60);
    assert_int_equal(patch(&s, "{\"gpuCores\":0}", msg, sizeof(msg)), ERR_INVALID_PARAMS);
    assert_int_equal(s.gpu_cores, 60);
    assert_int_equal(patch(&s, "{\"gpuMemory\":0,\"gpuCores\":20}", msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "whole cards"));
    assert_int_equal(s.gpu_cores, 60);
    assert_int_equal(s.gpu_memory_mib, 1024);
    assert_int_equal(patch(&s, "{\"gpuCores\":null}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_cores, 0);
    _cleanup_json_ json_t *none = replicaset_spec_to_json(&s);
    assert_null(json_object_get(none, "gpuCores"));
    assert_int_equal(patch(&s, "{\"gpuCores\":45}", NULL, 0), ERR_OK);
    /* made whole without naming gpuCores: it goes with the share */
    assert_int_equal(patch(&s, "{\"gpuMemory\":0}", NULL, 0), ERR_OK);
    assert_int_equal(s.gpu_cores, 0);
    replicaset_spec_free(&s);
}

#define ED_KEY "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMBOOVpKl70aWpC9CI0pjknieNF6kuIECYx9bPT5lyhH"
#define EC_KEY                                                                                     \
    "ecdsa-sha2-nistp256 "                                                                         \
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAOyCS9aizD4vYHhaTZm4Hn8Gwm2EjUmbYRJscn8" \
    "7"                                                                                            \
    "nRt4u/+anKp5HWxeRIGxXp0aycJdbLcJUzEptvUeUBLK7o="

/* A whole patch (replicaset_spec_patch) of s, which becomes the result. */
static void spec_patch_ok(replicaset_spec *s, const char *text)
{
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    replicaset_spec out;
    bool changed = false;
    gb_err e = GB_ERR_INIT;
    replicaset_patch_request p;
    if (replicaset_patch_request_parse(j, RS_PATCH_REPLICASET, &p, &e) < 0)
        fail_msg("%s: %s", text, e.msg);
    int rc = replicaset_spec_patch(s, &p, &out, &changed, &e);
    replicaset_patch_request_free(&p);
    if (rc < 0)
        fail_msg("%s: %s", text, e.msg);
    assert_true(changed);
    replicaset_spec_free(s);
    *s = out;
}

/* sshKeys: the keys kept (trimmed), 22/tcp added once, the JSON form
 * parsing to the same spec; bad keys refused naming the entry. */
static void test_ssh_keys(void **state)
{
    (void)state;
    replicaset_spec s;
    parse_ok("{\"imageName\":\"x\",\"containerPorts\":[\"8888\"],\"sshKeys\":[\" " ED_KEY
             " me@x \",\"" EC_KEY "\"]}",
             &s);
    assert_int_equal(s.nssh_keys, 2);
    assert_string_equal(s.ssh_keys[0], ED_KEY " me@x");
    assert_int_equal(s.nports, 2);
    assert_int_equal(s.ports[1].container_port, 22);
    assert_int_equal(s.ports[1].host_port, 0);
    _cleanup_json_ json_t *j = replicaset_spec_to_json(&s);
    assert_int_equal(json_array_size(json_object_get(j, "sshKeys")), 2);
    replicaset_spec again;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(replicaset_spec_from_json(j, NULL, &again, &e), 0);
    assert_int_equal(again.nports, 2);
    _cleanup_json_ json_t *j2 = replicaset_spec_to_json(&again);
    assert_true(json_equal(j, j2));
    replicaset_spec_free(&again);
    /* a patch to no keys keeps the port; a patch of the ports with keys
     * brings 22 back */
    spec_patch_ok(&s, "{\"sshKeys\":[]}");
    assert_int_equal(s.nssh_keys, 0);
    assert_int_equal(s.nports, 2);
    spec_patch_ok(&s, "{\"containerPorts\":[],\"sshKeys\":[\"" ED_KEY "\"]}");
    assert_int_equal(s.nports, 1);
    assert_int_equal(s.ports[0].container_port, 22);
    replicaset_spec_free(&s);

    /* 22 listed by the user, as an explicit port: not added again */
    parse_ok("{\"imageName\":\"x\",\"ports\":[{\"hostPort\":40022,\"containerPort\":22}],"
             "\"sshKeys\":[\"" ED_KEY "\"]}",
             &s);
    assert_int_equal(s.nports, 1);
    assert_int_equal(s.ports[0].host_port, 40022);
    replicaset_spec_free(&s);

    static const spec_refusal cases[] = {
        {"{\"imageName\":\"x\",\"sshKeys\":\"" ED_KEY "\"}", ERR_INVALID_PARAMS, "sshKeys"},
        {"{\"imageName\":\"x\",\"sshKeys\":[1]}", ERR_INVALID_PARAMS, "sshKeys"},
        {"{\"imageName\":\"x\",\"sshKeys\":[\"ssh-dss AAAA\"]}", ERR_INVALID_PARAMS,
         "sshKeys[0] starts with 'ssh-dss'"},
        {"{\"imageName\":\"x\",\"sshKeys\":[\"ssh-rsa "
         "AAAAC3NzaC1lZDI1NTE5AAAAIMBOOVpKl70aWpC9CI0pjknieNF6kuIECYx9bPT5lyhH\"]}",
         ERR_INVALID_PARAMS, "not a ssh-rsa key"},
        {"{\"imageName\":\"x\",\"sshKeys\":[\"ssh-ed25519 AAAA!\"]}", ERR_INVALID_PARAMS,
         "not base64"},
        {"{\"imageName\":\"x\",\"sshKeys\":[\"" ED_KEY "\\nssh-rsa\"]}", ERR_INVALID_PARAMS,
         "control character"},
        {"{\"imageName\":\"x\",\"sshKeys\":[\"" ED_KEY "\",\"" ED_KEY "\"]}", ERR_INVALID_PARAMS,
         "sshKeys[1] repeats sshKeys[0]"},
    };
    assert_refusals(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_spec_roundtrip),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_lifecycle_table),
        cmocka_unit_test(test_record_roundtrip),
        cmocka_unit_test(test_gpu_share_fields),
        cmocka_unit_test(test_gpu_share_errors),
        cmocka_unit_test(test_gpu_share_roundtrip),
        cmocka_unit_test(test_gpu_patch_rules),
        cmocka_unit_test(test_gpu_cores),
        cmocka_unit_test(test_ssh_keys),
        cmocka_unit_test(test_record_keeps_unknown_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
