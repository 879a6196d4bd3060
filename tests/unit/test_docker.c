/*
 * test_docker.c - the Docker Engine API client against the real dockerd.
 *
 * Every container made here is named "gbtest-docker-<pid>-..." and labelled
 * gbtest.docker=<pid>; the teardown after each test lists that label and
 * force-removes whatever it finds, so a failing test leaves nothing behind.
 * The image comes from $GPUBOX_TEST_IMAGE (default gpubox-test:latest).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "docker/docker.h"
#include "util/cleanup.h"

static docker_client *client;
static const char *image;
static char pid_text[16];
static char test_label[64]; /* gbtest.docker=<pid> */

static void name_of(char *buf, size_t size, const char *suffix)
{
    snprintf(buf, size, "gbtest-docker-%s-%s", pid_text, suffix);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A ContainerConfig for the test image, labelled for cleanup. cmd is stolen
 * (NULL: the image's default). */
static json_t *config_new(json_t *cmd)
{
    json_t *cfg = json_pack("{s:s, s:{s:s}}", "Image", image, "Labels", "gbtest.docker", pid_text);
    assert_non_null(cfg);
    if (cmd)
        json_object_set_new(cfg, "Cmd", cmd);
    return cfg;
}

/* Create a container named by suffix from cfg (which it consumes) and return its id. */
static char *create_container(const char *suffix, json_t *cfg)
{
    char name[128];
    name_of(name, sizeof(name), suffix);
    gb_err e = GB_ERR_INIT;
    char *id = NULL;
    int rc = docker_container_create(client, name, cfg, &id, &e);
    json_decref(cfg);
    if (rc != 0)
        fail_msg("creating %s: %s", name, e.msg);
    assert_non_null(id);
    return id;
}

static int remove_test_containers(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *list = NULL;
    if (docker_container_list(client, test_label, &list, &e) != 0) {
        fprintf(stderr, "cleanup: %s\n", e.msg);
        return -1;
    }
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        const char *id = json_string_value(json_object_get(item, "Id"));
        if (id && docker_container_remove(client, id, true, &e) != 0)
            fprintf(stderr, "cleanup: %s\n", e.msg);
    }
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    image = getenv("GPUBOX_TEST_IMAGE");
    if (!image || !*image)
        image = "gpubox-test:latest";
    snprintf(pid_text, sizeof(pid_text), "%d", (int)getpid());
    snprintf(test_label, sizeof(test_label), "gbtest.docker=%s", pid_text);
    gb_err e = GB_ERR_INIT;
    client = docker_client_new(NULL, &e); /* $DOCKER_HOST, or the default */
    if (!client) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return remove_test_containers(NULL);
}

static int group_teardown(void **state)
{
    int rc = remove_test_containers(state);
    docker_client_free(client);
    return rc;
}

static void test_ping_version_info(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(docker_ping(client, &e), 0);

    _cleanup_json_ json_t *version = NULL;
    assert_int_equal(docker_version(client, &version, &e), 0);
    assert_non_null(json_string_value(json_object_get(version, "ApiVersion")));
    assert_non_null(json_string_value(json_object_get(version, "Version")));

    _cleanup_json_ json_t *info = NULL;
    assert_int_equal(docker_info(client, &info, &e), 0);
    const char *driver = json_string_value(json_object_get(info, "Driver"));
    assert_non_null(driver);
    assert_true(strlen(driver) > 0);
}

static void test_image_inspect(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *img = NULL;
    assert_int_equal(docker_image_inspect(client, image, &img, &e), 0);
    assert_non_null(json_string_value(json_object_get(img, "Id")));

    const char *absent[] = {"gbtest-absent-image:none", "gbtest/absent-image:none"};
    for (size_t i = 0; i < ARRAY_SIZE(absent); i++) {
        json_t *none = NULL;
        assert_int_equal(docker_image_inspect(client, absent[i], &none, &e), -1);
        assert_null(none);
        assert_int_equal(e.code, ERR_IMAGE_NOT_FOUND);
        assert_non_null(strstr(e.msg, absent[i]));
        assert_non_null(strstr(e.msg, "not on this server; pull it first"));
    }
}

static void test_container_lifecycle(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char rs_a[64], rs_b[64], label_a[96];
    snprintf(rs_a, sizeof(rs_a), "gbtestdocker%sa", pid_text);
    snprintf(rs_b, sizeof(rs_b), "gbtestdocker%sb", pid_text);
    snprintf(label_a, sizeof(label_a), "gpubox.replicaset=%s", rs_a);

    json_t *cfg = config_new(json_pack("[s,s]", "sleep", "300"));
    json_object_set_new(json_object_get(cfg, "Labels"), "gpubox.replicaset", json_string(rs_a));
    _cleanup_free_ char *id = create_container("a-1", cfg);
    json_t *other = config_new(json_pack("[s,s]", "sleep", "300"));
    json_object_set_new(json_object_get(other, "Labels"), "gpubox.replicaset", json_string(rs_b));
    _cleanup_free_ char *other_id = create_container("b-1", other);

    assert_int_equal(docker_container_start(client, id, &e), 0);
    assert_int_equal(docker_container_start(client, id, &e), 0); /* already running */

    char name[128];
    name_of(name, sizeof(name), "a-1");
    _cleanup_json_ json_t *running = NULL;
    assert_int_equal(docker_container_inspect(client, name, &running, &e), 0);
    assert_string_equal(json_string_value(json_object_get(running, "Id")), id);
    assert_true(json_is_true(json_object_get(json_object_get(running, "State"), "Running")));
    json_t *labels = json_object_get(json_object_get(running, "Config"), "Labels");
    assert_string_equal(json_string_value(json_object_get(labels, "gpubox.replicaset")), rs_a);

    _cleanup_json_ json_t *list = NULL;
    assert_int_equal(docker_container_list(client, label_a, &list, &e), 0);
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "Id")), id);
    _cleanup_json_ json_t *all_ours = NULL;
    assert_int_equal(docker_container_list(client, test_label, &all_ours, &e), 0);
    assert_int_equal(json_array_size(all_ours), 2);

    /* A running container is not removed without force. */
    assert_int_equal(docker_container_remove(client, id, false, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);

    assert_int_equal(docker_container_stop(client, id, 1, &e), 0);
    assert_int_equal(docker_container_stop(client, id, 1, &e), 0); /* already stopped */
    _cleanup_json_ json_t *stopped = NULL;
    assert_int_equal(docker_container_inspect(client, id, &stopped, &e), 0);
    assert_false(json_is_true(json_object_get(json_object_get(stopped, "State"), "Running")));

    assert_int_equal(docker_container_remove(client, id, false, &e), 0);
    assert_int_equal(docker_container_remove(client, id, false, &e), 0); /* already gone */
    json_t *gone = NULL;
    assert_int_equal(docker_container_inspect(client, id, &gone, &e), -1);
    assert_null(gone);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "No such container"));
    assert_int_equal(docker_container_stop(client, id, 1, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);

    assert_int_equal(docker_container_remove(client, other_id, true, &e), 0);
}

static void test_create_conflict_and_missing_image(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *id = create_container("dup", config_new(NULL));
    char name[128];
    name_of(name, sizeof(name), "dup");
    _cleanup_json_ json_t *cfg = config_new(NULL);
    char *second = NULL;
    assert_int_equal(docker_container_create(client, name, cfg, &second, &e), -1);
    assert_null(second);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "already in use"));

    _cleanup_json_ json_t *bad = config_new(NULL);
    json_object_set_new(bad, "Image", json_string("gbtest-absent-image:none"));
    name_of(name, sizeof(name), "noimage");
    assert_int_equal(docker_container_create(client, name, bad, &second, &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_NOT_FOUND);
    assert_non_null(strstr(e.msg, "gbtest-absent-image:none"));
}

/* What `docker run --gpus` sends: the fake nvidia-container-runtime-hook on
 * dockerd's PATH makes the nvidia driver exist, and Docker hands the device
 * ids to the container as NVIDIA_VISIBLE_DEVICES. */
static void test_gpu_device_request_wait_and_logs(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    json_t *cfg =
        config_new(json_pack("[s,s,s]", "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES; echo err >&2"));
    json_object_set_new(cfg, "HostConfig",
                        json_pack("{s:[{s:s, s:[s,s], s:[[s]]}]}", "DeviceRequests", "Driver",
                                  "nvidia", "DeviceIDs", "GPU-test-1", "GPU-test-2", "Capabilities",
                                  "gpu"));
    _cleanup_free_ char *id = create_container("gpu", cfg);
    assert_int_equal(docker_container_start(client, id, &e), 0);
    long code = -1;
    if (docker_container_wait(client, id, &code, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(code, 0);

    _cleanup_free_ char *out = NULL;
    _cleanup_free_ char *errout = NULL;
    if (docker_container_logs(client, id, &out, &errout, 0, &e) != 0)
        fail_msg("%s", e.msg);
    assert_string_equal(out, "GPU-test-1,GPU-test-2\n");
    assert_string_equal(errout, "err\n");
}

static void test_wait_reports_exit_code(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *id =
        create_container("exit3", config_new(json_pack("[s,s,s]", "sh", "-c", "exit 3")));
    assert_int_equal(docker_container_start(client, id, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(client, id, &code, &e), 0);
    assert_int_equal(code, 3);
    /* Waiting again on an exited container answers at once, same code. */
    code = -1;
    assert_int_equal(docker_container_wait_timeout(client, id, 5, &code, &e), 0);
    assert_int_equal(code, 3);

    _cleanup_free_ char *sleeper =
        create_container("sleeper", config_new(json_pack("[s,s]", "sleep", "300")));
    assert_int_equal(docker_container_start(client, sleeper, &e), 0);
    double t0 = now_s();
    assert_int_equal(docker_container_wait_timeout(client, sleeper, 1, &code, &e), -1);
    assert_true(now_s() - t0 < 5);
    assert_non_null(strstr(e.msg, "did not exit within 1 s"));

    long missing = 0;
    assert_int_equal(docker_container_wait(client, "gbtest-docker-absent", &missing, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

/* Enough output that frames straddle network reads: each seq line is a
 * frame, and the stream is far larger than one read buffer. */
static void test_logs_large_tty_and_cap(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *id = create_container(
        "seq", config_new(json_pack("[s,s,s]", "sh", "-c", "seq 1 20000; seq 1 3 >&2")));
    assert_int_equal(docker_container_start(client, id, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(client, id, &code, &e), 0);
    assert_int_equal(code, 0);

    size_t expected_cap = 20000 * 6 + 1;
    _cleanup_free_ char *expected = malloc(expected_cap);
    assert_non_null(expected);
    size_t len = 0;
    for (int i = 1; i <= 20000; i++)
        len += (size_t)snprintf(expected + len, expected_cap - len, "%d\n", i);

    _cleanup_free_ char *out = NULL;
    _cleanup_free_ char *errout = NULL;
    assert_int_equal(docker_container_logs(client, id, &out, &errout, 0, &e), 0);
    assert_int_equal(strlen(out), len);
    assert_string_equal(out, expected);
    assert_string_equal(errout, "1\n2\n3\n");

    char *small_out = NULL, *small_err = NULL;
    assert_int_equal(docker_container_logs(client, id, &small_out, &small_err, 1000, &e), -1);
    assert_null(small_out);
    assert_null(small_err);
    assert_non_null(strstr(e.msg, "exceed 1000 bytes on stdout"));

    json_t *cfg = config_new(json_pack("[s,s]", "echo", "hello"));
    json_object_set_new(cfg, "Tty", json_true());
    _cleanup_free_ char *tty = create_container("tty", cfg);
    assert_int_equal(docker_container_start(client, tty, &e), 0);
    assert_int_equal(docker_container_wait(client, tty, &code, &e), 0);
    _cleanup_free_ char *tty_out = NULL;
    _cleanup_free_ char *tty_err = NULL;
    assert_int_equal(docker_container_logs(client, tty, &tty_out, &tty_err, 0, &e), 0);
    assert_string_equal(tty_out, "hello\r\n"); /* the TTY turns \n into \r\n */
    assert_string_equal(tty_err, "");

    char *absent_out = NULL, *absent_err = NULL;
    assert_int_equal(
        docker_container_logs(client, "gbtest-docker-absent", &absent_out, &absent_err, 0, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

static void test_generic_request(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    assert_int_equal(docker_request(client, "GET", "/containers/gbtest-docker-absent/json", NULL,
                                    &status, &resp, &e),
                     0);
    assert_int_equal(status, 404);
    assert_non_null(strstr(json_string_value(json_object_get(resp, "message")), "No such"));

    json_t *bad = NULL;
    assert_int_equal(docker_container_inspect(client, "", &bad, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

static void test_unreachable_host(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_client *gone = docker_client_new("unix:///nonexistent.sock", &e);
    assert_non_null(gone);
    double t0 = now_s();
    assert_int_equal(docker_ping(gone, &e), -1);
    assert_int_equal(e.code, ERR_DOCKER_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "cannot reach Docker at unix:///nonexistent.sock"));
    assert_non_null(strstr(e.msg, "is dockerd running?"));
    json_t *out = NULL;
    assert_int_equal(docker_container_inspect(gone, "x", &out, &e), -1);
    assert_int_equal(e.code, ERR_DOCKER_UNAVAILABLE);
    assert_true(now_s() - t0 < 2);
    docker_client_free(gone);

    /* Nothing listens on port 1 of the loopback: refused at once. */
    docker_client *tcp = docker_client_new("tcp://127.0.0.1:1", &e);
    assert_non_null(tcp);
    assert_string_equal(docker_client_host(tcp), "tcp://127.0.0.1:1");
    assert_int_equal(docker_ping(tcp, &e), -1);
    assert_int_equal(e.code, ERR_DOCKER_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "tcp://127.0.0.1:1"));
    docker_client_free(tcp);
}

static void test_host_selection(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    const char *bad[] = {"ssh://user@host",
                         "npipe:////./pipe/docker_engine",
                         "unix://relative.sock",
                         "/var/run/docker.sock",
                         "tcp://",
                         "tcp://host:2375/prefix"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err_clear(&e);
        assert_null(docker_client_new(bad[i], &e));
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(e.msg, bad[i]));
    }

    _cleanup_free_ char *saved = getenv("DOCKER_HOST") ? strdup(getenv("DOCKER_HOST")) : NULL;
    setenv("DOCKER_HOST", "unix:///nonexistent-from-env.sock", 1);
    docker_client *from_env = docker_client_new(NULL, &e);
    assert_non_null(from_env);
    assert_string_equal(docker_client_host(from_env), "unix:///nonexistent-from-env.sock");
    docker_client_free(from_env);
    unsetenv("DOCKER_HOST");
    docker_client *deflt = docker_client_new(NULL, &e);
    assert_non_null(deflt);
    assert_string_equal(docker_client_host(deflt), "unix:///var/run/docker.sock");
    /* the default answers where the tests run on it (no $DOCKER_HOST) */
    if (!saved)
        assert_int_equal(docker_ping(deflt, &e), 0);
    docker_client_free(deflt);
    if (saved)
        setenv("DOCKER_HOST", saved, 1);
}

static void test_keep_alive(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_client *c = docker_client_new(NULL, &e); /* $DOCKER_HOST, or the default */
    assert_non_null(c);
    for (int i = 0; i < 50; i++)
        assert_int_equal(docker_ping(c, &e), 0);
    json_t *out = NULL;
    assert_int_equal(docker_container_inspect(c, "gbtest-docker-absent", &out, &e), -1);
    assert_int_equal(docker_ping(c, &e), 0); /* an error answer keeps the connection too */
    assert_int_equal(docker_client_connects(c), 1);
    docker_client_free(c);
}

struct hammer {
    docker_client *c;
    const char *container;
    atomic_int failures;
    char first_error[512];
    pthread_mutex_t lock;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 20; i++) {
        gb_err e = GB_ERR_INIT;
        json_t *out = NULL;
        int rc = docker_ping(h->c, &e);
        if (rc == 0)
            rc = docker_image_inspect(h->c, image, &out, &e);
        json_decref(out);
        out = NULL;
        if (rc == 0) {
            rc = docker_container_inspect(h->c, h->container, &out, &e);
            if (rc == 0 && !json_is_object(json_object_get(out, "State")))
                rc = err_set(&e, ERR_INTERNAL, "inspect answer has no State");
            json_decref(out);
        }
        if (rc != 0 && atomic_fetch_add(&h->failures, 1) == 0) {
            pthread_mutex_lock(&h->lock);
            snprintf(h->first_error, sizeof(h->first_error), "%s", e.msg);
            pthread_mutex_unlock(&h->lock);
        }
    }
    return NULL;
}

static void test_concurrent_calls(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char name[128];
    name_of(name, sizeof(name), "shared");
    _cleanup_free_ char *id = create_container("shared", config_new(NULL));
    struct hammer h = {.container = name, .lock = PTHREAD_MUTEX_INITIALIZER};
    h.c = docker_client_new(NULL, &e); /* $DOCKER_HOST, or the default */
    assert_non_null(h.c);
    pthread_t threads[8];
    for (size_t i = 0; i < ARRAY_SIZE(threads); i++)
        assert_int_equal(pthread_create(&threads[i], NULL, hammer_thread, &h), 0);
    for (size_t i = 0; i < ARRAY_SIZE(threads); i++)
        pthread_join(threads[i], NULL);
    unsigned long connects = docker_client_connects(h.c);
    docker_client_free(h.c);
    if (atomic_load(&h.failures) != 0)
        fail_msg("%d of 480 calls failed; first: %s", atomic_load(&h.failures), h.first_error);
    /* 480 calls from 8 threads: connections are kept, one per busy handle. */
    assert_true(connects >= 1 && connects <= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping_version_info),
        cmocka_unit_test(test_image_inspect),
        cmocka_unit_test_teardown(test_container_lifecycle, remove_test_containers),
        cmocka_unit_test_teardown(test_create_conflict_and_missing_image, remove_test_containers),
        cmocka_unit_test_teardown(test_gpu_device_request_wait_and_logs, remove_test_containers),
        cmocka_unit_test_teardown(test_wait_reports_exit_code, remove_test_containers),
        cmocka_unit_test_teardown(test_logs_large_tty_and_cap, remove_test_containers),
        cmocka_unit_test(test_generic_request),
        cmocka_unit_test(test_unreachable_host),
        cmocka_unit_test(test_host_selection),
        cmocka_unit_test(test_keep_alive),
        cmocka_unit_test_teardown(test_concurrent_calls, remove_test_containers),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
