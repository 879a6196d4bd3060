/*
 * test_docker_state.c - docker_container_state_of: Docker's inspect read
 * into the typed state, and what it gives when fields are missing. (The
 * calls that ask Docker are covered by the end-to-end tests.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "docker/docker.h"
#include "util/cleanup.h"

static void test_state_of_inspect(void **state)
{
    (void)state;
    _cleanup_json_ json_t *inspect = json_loads(
        "{\"Id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
        "\"State\":{\"Status\":\"paused\",\"Running\":true,\"Paused\":true,\"Pid\":4711}}",
        0, NULL);
    docker_container_state st;
    docker_container_state_of(inspect, &st);
    assert_true(st.exists);
    assert_true(st.running);
    assert_true(st.paused);
    assert_string_equal(st.status, "paused");
    assert_int_equal(st.pid, 4711);
    assert_string_equal(st.id, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
}

static void test_state_of_sparse_inspect(void **state)
{
    (void)state;
    _cleanup_json_ json_t *inspect =
        json_loads("{\"State\":{\"Running\":false,\"Pid\":-3}}", 0, NULL);
    docker_container_state st;
    docker_container_state_of(inspect, &st);
    assert_true(st.exists);
    assert_false(st.running);
    assert_false(st.paused);
    assert_string_equal(st.status, "");
    assert_int_equal(st.pid, 0);
    assert_string_equal(st.id, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_of_inspect),
        cmocka_unit_test(test_state_of_sparse_inspect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
