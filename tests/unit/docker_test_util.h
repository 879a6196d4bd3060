/*
 * docker_test_util.h - what the test_docker_*.c suites share: one client
 * on the real dockerd, the test image, names and labels unique to a suite
 * and a process, and a cleanup that removes whatever the suite made.
 *
 * A suite calls dtu_setup("exec") from its group setup. Its containers are
 * then named "gbtest-dk-exec-<pid>-<suffix>" and labelled
 * gbtest.dk.exec=<pid> (dtu_labels), as are its volumes and images, and its
 * host directories are /tmp/gbtest-dk-exec-<pid>-*; dtu_cleanup, run as the
 * teardown of every test, force-removes every container, volume and image
 * with that label and those directories, so a failing test leaves nothing
 * behind. Include after cmocka.h; the functions are static inline, so
 * a suite that needs only some of them compiles without warnings.
 */
#ifndef GPUBOX_TESTS_DOCKER_TEST_UTIL_H
#define GPUBOX_TESTS_DOCKER_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "docker/docker.h"
#include "util/cleanup.h"

static docker_client *dtu_client;
static const char *dtu_image;
static char dtu_pid[16];
static char dtu_suite[32];
static char dtu_label_key[64]; /* gbtest.dk.<suite> */
static char dtu_label[96];     /* gbtest.dk.<suite>=<pid> */

static inline void dtu_name(char *buf, size_t size, const char *suffix)
{
    snprintf(buf, size, "gbtest-dk-%s-%s-%s", dtu_suite, dtu_pid, suffix);
}

static inline double dtu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* {"gbtest.dk.<suite>": "<pid>"}: the label that marks what a suite made. */
static inline json_t *dtu_labels(void)
{
    json_t *labels = json_pack("{s:s}", dtu_label_key, dtu_pid);
    assert_non_null(labels);
    return labels;
}

/* A ContainerConfig for the test image, labelled for cleanup. cmd is
 * stolen (NULL: the image's default). */
static inline json_t *dtu_config(json_t *cmd)
{
    json_t *cfg = json_pack("{s:s, s:o}", "Image", dtu_image, "Labels", dtu_labels());
    assert_non_null(cfg);
    if (cmd)
        json_object_set_new(cfg, "Cmd", cmd);
    return cfg;
}

/* Create a container named by suffix from cfg (consumed) and return its id. */
static inline char *dtu_create(const char *suffix, json_t *cfg)
{
    char name[160];
    dtu_name(name, sizeof(name), suffix);
    gb_err e = GB_ERR_INIT;
    char *id = NULL;
    int rc = docker_container_create(dtu_client, name, cfg, &id, &e);
    json_decref(cfg);
    if (rc != 0)
        fail_msg("creating %s: %s", name, e.msg);
    assert_non_null(id);
    return id;
}

/* Create and start a container running `sh -c script`. */
static inline char *dtu_start_sh(const char *suffix, const char *script)
{
    char *id = dtu_create(suffix, dtu_config(json_pack("[s,s,s]", "sh", "-c", script)));
    gb_err e = GB_ERR_INIT;
    if (docker_container_start(dtu_client, id, &e) != 0)
        fail_msg("starting %s: %s", suffix, e.msg);
    return id;
}

/* Run `sh -c script` in container id; fail the test unless it exits 0.
 * Returns its stdout (malloc'd). */
static inline char *dtu_exec_sh(const char *id, const char *script)
{
    const char *cmd[] = {"sh", "-c", script};
    docker_exec_result r;
    gb_err e = GB_ERR_INIT;
    if (docker_exec_run(dtu_client, id, cmd, 3, NULL, 60, 0, &r, &e) != 0)
        fail_msg("exec '%s': %s", script, e.msg);
    if (r.exit_code != 0)
        fail_msg("exec '%s' exited %ld: %s%s", script, r.exit_code, r.out_stdout, r.out_stderr);
    char *out = steal_ptr(&r.out_stdout);
    docker_exec_result_free(&r);
    return out;
}

/* A new directory "/tmp/gbtest-dk-<suite>-<pid>-<what>-XXXXXX" (malloc'd);
 * dtu_cleanup removes it. */
static inline char *dtu_temp_dir(const char *what)
{
    char tmpl[128];
    snprintf(tmpl, sizeof(tmpl), "/tmp/gbtest-dk-%s-%s-%s-XXXXXX", dtu_suite, dtu_pid, what);
    assert_non_null(mkdtemp(tmpl));
    char *dir = strdup(tmpl);
    assert_non_null(dir);
    return dir;
}

/* GET path (a list filtered by our label) and remove each item with rm. */
static inline void dtu_remove_listed(const char *what, const char *path, const char *array_key,
                                     const char *id_key,
                                     int (*rm)(docker_client *, const char *, bool, gb_err *))
{
    long status = 0;
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_request(dtu_client, "GET", path, NULL, &status, &resp, &e) != 0 || status != 200) {
        fprintf(stderr, "cleanup: listing %s: %s (HTTP %ld)\n", what, e.msg, status);
        return;
    }
    json_t *list = array_key ? json_object_get(resp, array_key) : resp;
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        const char *id = json_string_value(json_object_get(item, id_key));
        if (id && rm(dtu_client, id, true, &e) != 0)
            fprintf(stderr, "cleanup: removing %s %s: %s\n", what, id, e.msg);
    }
}

/* Teardown of every test: containers first (they hold volumes and images). */
static inline int dtu_cleanup(void **state)
{
    (void)state;
    char filters[160], path[256];
    snprintf(filters, sizeof(filters), "%%7B%%22label%%22%%3A%%5B%%22%s%%3D%s%%22%%5D%%7D",
             dtu_label_key, dtu_pid);
    snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", filters);
    dtu_remove_listed("container", path, NULL, "Id", docker_container_remove);
    snprintf(path, sizeof(path), "/volumes?filters=%s", filters);
    dtu_remove_listed("volume", path, "Volumes", "Name", docker_volume_remove);
    snprintf(path, sizeof(path), "/images/json?filters=%s", filters);
    dtu_remove_listed("image", path, NULL, "Id", docker_image_remove);
    char rm[160];
    snprintf(rm, sizeof(rm), "rm -rf /tmp/gbtest-dk-%s-%s-*", dtu_suite, dtu_pid);
    if (system(rm) != 0)
        fprintf(stderr, "cleanup: %s failed\n", rm);
    return 0;
}

static inline int dtu_setup(const char *suite)
{
    dtu_image = getenv("GPUBOX_TEST_IMAGE");
    if (!dtu_image || !*dtu_image)
        dtu_image = "gpubox-test:latest";
    snprintf(dtu_pid, sizeof(dtu_pid), "%d", (int)getpid());
    snprintf(dtu_suite, sizeof(dtu_suite), "%s", suite);
    snprintf(dtu_label_key, sizeof(dtu_label_key), "gbtest.dk.%s", suite);
    snprintf(dtu_label, sizeof(dtu_label), "%s=%s", dtu_label_key, dtu_pid);
    gb_err e = GB_ERR_INIT;
    dtu_client = docker_client_new(NULL, &e); /* $DOCKER_HOST, or the default */
    if (!dtu_client) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return dtu_cleanup(NULL);
}

static inline int dtu_teardown(void **state)
{
    dtu_cleanup(state);
    docker_client_free(dtu_client);
    return 0;
}

#endif
