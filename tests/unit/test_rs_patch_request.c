/*
 * test_rs_patch_request.c - the one patch parser
 * (service/replicaset/patch_request.h): its field table holds every field
 * a patch of either route family takes, each value of a wrong type is
 * refused up front naming the field, unknown fields are refused as the
 * routes always did, and an older route's body becomes the same typed
 * request as the /replicaSet patch that means the same.
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

/* Parse text of family; the error code (ERR_OK on success), its message in msg. */
static int parse(const char *text, enum replicaset_patch_family family,
                 replicaset_patch_request *out, char *msg, size_t msg_size)
{
    json_error_t jerr;
    _cleanup_json_ json_t *j = json_loads(text, 0, &jerr);
    if (!j)
        fail_msg("%s: %s", text, jerr.text);
    gb_err e = GB_ERR_INIT;
    int rc = replicaset_patch_request_parse(j, family, out, &e);
    if (msg)
        snprintf(msg, msg_size, "%s", e.msg);
    return rc == 0 ? ERR_OK : e.code;
}

static const replicaset_patch_field *find(const char *name, const char *older)
{
    for (size_t i = 0; replicaset_patch_fields[i].name || replicaset_patch_fields[i].older; i++) {
        const replicaset_patch_field *f = &replicaset_patch_fields[i];
        if ((name ? f->name && strcmp(f->name, name) == 0 : !f->name) &&
            (older ? f->older && strcmp(f->older, older) == 0 : true))
            return f;
    }
    return NULL;
}

/* Every field a patch took before the parser was one: PATCH /replicaSet's
 * list, and the bodies of the older /gpu and /volume routes. */
static void test_table_has_every_field(void **state)
{
    (void)state;
    static const char *const replicaset[] = {
        "imageName", "gpuPatch",    "volumePatch", "envPatch", "containerPorts",
        "ports",     "cpus",        "memory",      "shmSize",  "restartPolicy",
        "idleStop",  "maxDuration", "sshKeys",     "cpuCount",
    };
    for (size_t i = 0; i < sizeof(replicaset) / sizeof(replicaset[0]); i++) {
        const replicaset_patch_field *f = find(replicaset[i], NULL);
        if (!f)
            fail_msg("%s is not in replicaset_patch_fields", replicaset[i]);
        assert_int_not_equal(f->offset, (size_t)-1);
        assert_non_null(f->expect);
    }
    const replicaset_patch_field *gpu = find("gpuPatch.gpuCount", "gpuCount");
    assert_non_null(gpu);
    assert_int_equal(gpu->older_family, RS_PATCH_CONTAINERS_GPU);
    static const char *const volume[] = {"type", "oldBind", "newBind"};
    for (size_t i = 0; i < 3; i++) {
        const replicaset_patch_field *f = NULL;
        for (size_t k = 0; replicaset_patch_fields[k].name || replicaset_patch_fields[k].older; k++)
            if (replicaset_patch_fields[k].older &&
                strcmp(replicaset_patch_fields[k].older, volume[i]) == 0)
                f = &replicaset_patch_fields[k];
        if (!f)
            fail_msg("the /volume route's %s is not in replicaset_patch_fields", volume[i]);
        assert_int_equal(f->older_family, RS_PATCH_CONTAINERS_VOLUME);
    }
}

/* A value of each JSON type; which types each is. */
static const struct {
    const char *text;
    unsigned type; /* 0: a type no field takes (a boolean) */
} values[] = {
    {"\"x\"", RS_PT_STRING}, {"3", RS_PT_INTEGER}, {"0.5", RS_PT_REAL},
    {"{}", RS_PT_OBJECT},    {"[]", RS_PT_ARRAY},  {"true", 0},
};

/* The family whose body carries field f under the name returned. */
static const char *name_in(const replicaset_patch_field *f, enum replicaset_patch_family *family)
{
    if (f->older) {
        *family = f->older_family;
        return f->older;
    }
    *family = RS_PATCH_REPLICASET;
    return f->name;
}

/* Each field of the table, in its family, with a value of each type: a
 * type it does not take is refused with ERR_WRONG_TYPE naming the field,
 * before anything else is looked at; null passes the type check. */
static void test_wrong_types_refused(void **state)
{
    (void)state;
    size_t refused = 0;
    for (size_t i = 0; replicaset_patch_fields[i].name || replicaset_patch_fields[i].older; i++) {
        const replicaset_patch_field *f = &replicaset_patch_fields[i];
        enum replicaset_patch_family family;
        const char *name = name_in(f, &family);
        for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
            if (values[v].type & f->types)
                continue;
            char text[256], msg[512];
            snprintf(text, sizeof(text), "{\"%s\":%s}", name, values[v].text);
            replicaset_patch_request r;
            int code = parse(text, family, &r, msg, sizeof(msg));
            if (code != ERR_WRONG_TYPE)
                fail_msg("%s (family %d): code %d, %s", text, family, code, msg);
            if (!strstr(msg, name) || !strstr(msg, f->expect))
                fail_msg("%s: the message does not name the field and its type: %s", text, msg);
            assert_null(r.body);
            refused++;
        }
    }
    assert_true(refused > 40);
    /* The body itself: an object. */
    replicaset_patch_request r;
    assert_int_equal(parse("[]", RS_PATCH_REPLICASET, &r, NULL, 0), ERR_WRONG_TYPE);
}

/* Each /replicaSet field with a value of a type it takes lands in its
 * place in the request. */
static void test_every_field_lands(void **state)
{
    (void)state;
    replicaset_patch_request r;
    char msg[512];
    int code = parse("{\"imageName\":\"img:2\",\"gpuPatch\":{\"gpuCount\":1},"
                     "\"volumePatch\":[{\"newBind\":\"data:/d\"}],\"envPatch\":[\"A=1\"],"
                     "\"containerPorts\":[\"22\"],\"ports\":[],\"cpus\":0.5,\"memory\":\"1GB\","
                     "\"shmSize\":65536,\"restartPolicy\":\"always\",\"idleStop\":\"30m\","
                     "\"maxDuration\":\"\",\"sshKeys\":[],\"cpuCount\":2}",
                     RS_PATCH_REPLICASET, &r, msg, sizeof(msg));
    if (code != ERR_OK)
        fail_msg("%s", msg);
    assert_string_equal(json_string_value(r.image), "img:2");
    assert_int_equal(json_integer_value(json_object_get(r.gpu, "gpuCount")), 1);
    assert_true(json_is_array(r.volumes));
    assert_true(json_is_array(r.env));
    assert_non_null(r.container_ports);
    assert_non_null(r.ports);
    assert_true(json_number_value(r.cpus) == 0.5);
    assert_string_equal(json_string_value(r.memory), "1GB");
    assert_int_equal(json_integer_value(r.shm_size), 65536);
    assert_string_equal(json_string_value(r.restart_policy), "always");
    assert_non_null(r.ssh_keys);
    assert_int_equal(json_integer_value(r.cpu_count), 2);
    assert_true(r.idle_stop_given && r.max_duration_given);
    assert_int_equal(r.idle_stop_s, 1800);
    assert_int_equal(r.max_duration_s, 0);
    assert_int_equal(r.nfields, 14);
    assert_false(replicaset_patch_request_limits_only(&r));
    replicaset_patch_request_free(&r);

    /* Each field of the table has its member: a body of it alone gives one field. */
    for (size_t i = 0; replicaset_patch_fields[i].name; i++) {
        const replicaset_patch_field *f = &replicaset_patch_fields[i];
        if (f->offset == (size_t)-1)
            continue;
        char text[128];
        snprintf(text, sizeof(text), "{\"%s\":null}", f->name);
        assert_int_equal(parse(text, RS_PATCH_REPLICASET, &r, msg, sizeof(msg)), ERR_OK);
        assert_int_equal(r.nfields, 1);
        assert_true(json_is_null(*(const json_t **)((const char *)&r + f->offset)));
        replicaset_patch_request_free(&r);
    }

    /* No body: an empty patch. Run limits alone: limits only. */
    gb_err e = GB_ERR_INIT;
    assert_int_equal(replicaset_patch_request_parse(NULL, RS_PATCH_REPLICASET, &r, &e), 0);
    assert_int_equal(r.nfields, 0);
    assert_false(replicaset_patch_request_limits_only(&r));
    replicaset_patch_request_free(&r);
    assert_int_equal(parse("{\"maxDuration\":\"2h\"}", RS_PATCH_REPLICASET, &r, NULL, 0), ERR_OK);
    assert_true(replicaset_patch_request_limits_only(&r));
    assert_false(r.idle_stop_given);
    assert_int_equal(r.max_duration_s, 7200);
    replicaset_patch_request_free(&r);
    /* A run limit that is not a duration: refused up front, naming it. */
    assert_int_equal(parse("{\"idleStop\":\"soon\"}", RS_PATCH_REPLICASET, &r, msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "idleStop"));
}

/* Unknown fields: each route names what it takes, as before. */
static void test_unknown_fields(void **state)
{
    (void)state;
    replicaset_patch_request r;
    char msg[512];
    assert_int_equal(
        parse("{\"cpus\":1,\"gpuCount\":2}", RS_PATCH_REPLICASET, &r, msg, sizeof(msg)),
        ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg,
                           "unknown field 'gpuCount'; this route takes: imageName, gpuPatch, "
                           "volumePatch, envPatch, containerPorts, ports, cpus, memory, "
                           "shmSize, restartPolicy, idleStop, maxDuration, sshKeys, cpuCount"));
    assert_int_equal(
        parse("{\"gpuPatch\":{\"gpuCount\":1}}", RS_PATCH_CONTAINERS_GPU, &r, msg, sizeof(msg)),
        ERR_INVALID_PARAMS);
    assert_string_equal(msg, "unknown field 'gpuPatch'; this route takes: gpuCount");
    assert_int_equal(parse("{\"gpuCount\":1}", RS_PATCH_CONTAINERS_VOLUME, &r, msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_string_equal(msg, "unknown field 'gpuCount'; this route takes: type, oldBind, newBind");
    /* The older /gpu route needs its count; /volume's type is volume or bind. */
    assert_int_equal(parse("{}", RS_PATCH_CONTAINERS_GPU, &r, msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "gpuCount"));
    assert_int_equal(parse("{\"type\":\"disk\"}", RS_PATCH_CONTAINERS_VOLUME, &r, msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "type"));
    assert_int_equal(parse("{\"type\":\"volume\",\"newBind\":\"/srv:/d\"}",
                           RS_PATCH_CONTAINERS_VOLUME, &r, msg, sizeof(msg)),
                     ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "newBind.src is the host path"));
}

/* The older routes' bodies and the /replicaSet patches that mean the same
 * give the same request. */
static void assert_same(const char *older, enum replicaset_patch_family family,
                        const char *replicaset)
{
    replicaset_patch_request a, b;
    char msg[512];
    if (parse(older, family, &a, msg, sizeof(msg)) != ERR_OK)
        fail_msg("%s: %s", older, msg);
    if (parse(replicaset, RS_PATCH_REPLICASET, &b, msg, sizeof(msg)) != ERR_OK)
        fail_msg("%s: %s", replicaset, msg);
    if (!json_equal(a.body, b.body)) {
        char *ta = json_dumps(a.body, JSON_SORT_KEYS), *tb = json_dumps(b.body, JSON_SORT_KEYS);
        fail_msg("%s gives %s, %s gives %s", older, ta, replicaset, tb);
    }
    assert_int_equal(a.nfields, b.nfields);
    assert_true(json_equal(a.gpu, b.gpu) || (!a.gpu && !b.gpu));
    assert_true(json_equal(a.volumes, b.volumes) || (!a.volumes && !b.volumes));
    assert_false(replicaset_patch_request_limits_only(&a));
    replicaset_patch_request_free(&a);
    replicaset_patch_request_free(&b);
}

static void test_families_give_the_same_request(void **state)
{
    (void)state;
    assert_same("{\"gpuCount\":3}", RS_PATCH_CONTAINERS_GPU, "{\"gpuPatch\":{\"gpuCount\":3}}");
    assert_same("{\"type\":\"volume\",\"oldBind\":\"data-2:/d\",\"newBind\":\"data-3:/e\"}",
                RS_PATCH_CONTAINERS_VOLUME,
                "{\"volumePatch\":{\"oldBind\":\"data:/d\",\"newBind\":\"data:/e\"}}");
    assert_same("{\"type\":\"bind\",\"newBind\":{\"src\":\"/srv\",\"dest\":\"/d\"}}",
                RS_PATCH_CONTAINERS_VOLUME,
                "{\"volumePatch\":{\"oldBind\":null,\"newBind\":{\"src\":\"/srv\",\"dest\":\"/"
                "d\"}}}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_has_every_field),
        cmocka_unit_test(test_wrong_types_refused),
        cmocka_unit_test(test_every_field_lands),
        cmocka_unit_test(test_unknown_fields),
        cmocka_unit_test(test_families_give_the_same_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
