/*
 * test_rs_network.c - the name of a user's Docker network
 * (service/replicaset/network.c): "gpubox-u-<user>", a name Docker takes
 * for every user name gpubox accepts, different for different users.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "service/replicaset/internal.h"

static void assert_docker_name(const char *s)
{
    assert_true(strlen(s) >= 2);
    for (const char *p = s; *p; p++)
        assert_non_null(
            strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *p));
}

static void test_names(void **state)
{
    (void)state;
    char a[RS_NETWORK_NAME_MAX], b[RS_NETWORK_NAME_MAX];
    replicaset_network_name("alice", a, sizeof(a));
    assert_string_equal(a, "gpubox-u-alice");
    replicaset_network_name("Bob.Smith_2-x", a, sizeof(a));
    assert_string_equal(a, "gpubox-u-Bob.Smith_2-x");
    /* no owner: the owner of what a caller without tokens makes */
    replicaset_network_name("", a, sizeof(a));
    assert_string_equal(a, "gpubox-u-anonymous");
    replicaset_network_name(NULL, b, sizeof(b));
    assert_string_equal(a, b);
    /* '@' is not for Docker names: replaced, and a hash keeps users apart */
    replicaset_network_name("a@b", a, sizeof(a));
    replicaset_network_name("a_b", b, sizeof(b));
    assert_docker_name(a);
    assert_string_not_equal(a, b);
    assert_int_equal(strncmp(a, "gpubox-u-a_b-", strlen("gpubox-u-a_b-")), 0);
    replicaset_network_name("a@c", b, sizeof(b));
    assert_string_not_equal(a, b);
    /* the longest user name fits */
    char longest[USER_NAME_MAX + 1];
    memset(longest, '@', USER_NAME_MAX);
    longest[USER_NAME_MAX] = '\0';
    replicaset_network_name(longest, a, sizeof(a));
    assert_docker_name(a);
    assert_int_equal(strlen(a), strlen("gpubox-u-") + USER_NAME_MAX + 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
