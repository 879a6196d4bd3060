/*
 * test_util.c - names, sizes and the error/HTTP-status table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/err.h"
#include "util/names.h"
#include "util/size.h"

static void test_replicaset_names(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(name_check_replicaset("foo", &e), 0);
    assert_int_equal(name_check_replicaset("Foo_1.bar", &e), 0);
    assert_int_equal(name_check_replicaset("", &e), -1);
    assert_int_equal(e.code, ERR_NAME_EMPTY);
    assert_int_equal(name_check_replicaset(NULL, &e), -1);
    assert_int_equal(e.code, ERR_NAME_EMPTY);
    assert_int_equal(name_check_replicaset("foo-1", &e), -1);
    assert_int_equal(e.code, ERR_NAME_HAS_DASH);
    assert_non_null(strstr(e.msg, "'-'"));
    /* why, and the same name with '_' to use instead */
    assert_int_equal(name_check_replicaset("my-new-job", &e), -1);
    assert_non_null(strstr(e.msg, "NAME-VERSION"));
    assert_non_null(strstr(e.msg, "use 'my_new_job' instead"));
    assert_int_equal(name_check_replicaset("a/b", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_NAME);
    assert_int_equal(name_check_replicaset("..", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_NAME);
    assert_int_equal(name_check_replicaset("bad\x01name", &e), -1);
    assert_non_null(strstr(e.msg, "0x01"));
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    assert_int_equal(name_check_replicaset(longname, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_NAME);
    longname[63] = '\0';
    assert_int_equal(name_check_replicaset(longname, &e), 0);
}

static void test_volume_names(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(name_check_volume("data1", &e), 0);
    assert_int_equal(name_check_volume("", &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_EMPTY);
    assert_int_equal(name_check_volume("a-b", &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_HAS_DASH);
    assert_non_null(strstr(e.msg, "use 'a_b' instead"));
    assert_int_equal(name_check_volume("/etc", &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_SLASH);
    assert_int_equal(name_check_volume("a b", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_NAME);
}

static void test_split_versioned(void **state)
{
    (void)state;
    char base[NAME_MAX_LEN + 1];
    int v = 0;
    assert_int_equal(name_split_versioned("foo-12", base, &v), 0);
    assert_string_equal(base, "foo");
    assert_int_equal(v, 12);
    assert_int_equal(name_split_versioned("foo", base, &v), -1);
    assert_int_equal(name_split_versioned("foo-", base, &v), -1);
    assert_int_equal(name_split_versioned("-3", base, &v), -1);
    assert_int_equal(name_split_versioned("foo-0", base, &v), -1);
    assert_int_equal(name_split_versioned("foo-01", base, &v), -1);
    assert_int_equal(name_split_versioned("foo-1x", base, &v), -1);
    assert_int_equal(name_split_versioned("a-b-2", base, &v), -1);
    assert_int_equal(name_split_versioned("foo-99999999999", base, &v), -1);
}

static void test_size_parse(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    uint64_t b = 0;
    assert_int_equal(size_parse("20GB", &b, &e), 0);
    assert_int_equal(b, 20ULL << 30);
    assert_int_equal(size_parse("20gb", &b, &e), 0);
    assert_int_equal(b, 20ULL << 30);
    assert_int_equal(size_parse("1.5Tb", &b, &e), 0);
    assert_int_equal(b, 3ULL << 39);
    assert_int_equal(size_parse("512 MB", &b, &e), 0);
    assert_int_equal(b, 512ULL << 20);
    assert_int_equal(size_parse("0.5KB", &b, &e), 0);
    assert_int_equal(b, 512);
    assert_int_equal(size_parse("4096", &b, &e), 0);
    assert_int_equal(b, 4096);
    assert_int_equal(size_parse("10B", &b, &e), 0);
    assert_int_equal(b, 10);

    assert_int_equal(size_parse("20XB", &b, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_SIZE_UNIT);
    assert_non_null(strstr(e.msg, "XB"));
    assert_int_equal(size_parse("20 G", &b, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_SIZE_UNIT);
    assert_int_equal(size_parse("1e3GB", &b, &e), -1);
    assert_int_equal(size_parse("GB", &b, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(size_parse("-5GB", &b, &e), -1);
    assert_int_equal(size_parse("5.GB", &b, &e), -1);
    assert_int_equal(size_parse("", &b, &e), -1);
    assert_int_equal(size_parse(NULL, &b, &e), -1);
    assert_int_equal(size_parse("2000TB", &b, &e), -1);
    assert_non_null(strstr(e.msg, "too large"));
    assert_int_equal(size_parse("99999999999999999999999999GB", &b, &e), -1);
    assert_non_null(strstr(e.msg, "too large"));
    assert_int_equal(size_parse("1024TB", &b, &e), 0);
}

static void test_size_format(void **state)
{
    (void)state;
    char buf[32];
    size_format(20ULL << 30, buf, sizeof(buf));
    assert_string_equal(buf, "20GB");
    size_format(3ULL << 29, buf, sizeof(buf));
    assert_string_equal(buf, "1.5GB");
    size_format(100, buf, sizeof(buf));
    assert_string_equal(buf, "100B");
    size_format(1024, buf, sizeof(buf));
    assert_string_equal(buf, "1KB");
    size_format((1ULL << 30) + 1, buf, sizeof(buf));
    assert_string_equal(buf, "1GB");
}

static void test_err_table(void **state)
{
    (void)state;
    assert_int_equal(err_http_status(ERR_OK), 200);
    assert_int_equal(err_http_status(ERR_INVALID_PARAMS), 400);
    assert_int_equal(err_http_status(ERR_EXISTS), 409);
    assert_int_equal(err_http_status(ERR_NOT_FOUND), 404);
    assert_int_equal(err_http_status(ERR_METHOD_NOT_ALLOWED), 405);
    assert_int_equal(err_http_status(ERR_BODY_TOO_LARGE), 413);
    assert_int_equal(err_http_status(ERR_IMAGE_NOT_FOUND), 422);
    assert_int_equal(err_http_status(ERR_STORE_UNAVAILABLE), 503);
    assert_int_equal(err_http_status(ERR_UNAUTHORIZED), 401);
    assert_int_equal(err_http_status(ERR_FORBIDDEN), 403);
    assert_int_equal(err_http_status(424242), 500);
    assert_string_equal(err_name(ERR_GPU_NOT_ENOUGH), "GPU_NOT_ENOUGH");

    gb_err e = GB_ERR_INIT;
    assert_int_equal(err_set(&e, ERR_RUN_FAILED, "container %s", "foo-1"), -1);
    err_prefix(&e, "creating %s", "foo");
    assert_string_equal(e.msg, "creating foo: container foo-1");
    assert_int_equal(e.code, ERR_RUN_FAILED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicaset_names), cmocka_unit_test(test_volume_names),
        cmocka_unit_test(test_split_versioned),  cmocka_unit_test(test_size_parse),
        cmocka_unit_test(test_size_format),      cmocka_unit_test(test_err_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
