/*
 * test_docker_networks.c - the network calls against the real dockerd: a
 * labelled bridge network made once (a second create of the name is a
 * conflict), listed by label, containers on it reaching each other by
 * alias and by name while a container on another network cannot connect;
 * a stopped container moved between networks; removal refused while a
 * running container is on it, and idempotent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "docker_test_util.h"

static char net_a[160], net_b[160];

static void remove_networks(void)
{
    gb_err e = GB_ERR_INIT;
    docker_network_remove(dtu_client, net_a, &e);
    docker_network_remove(dtu_client, net_b, &e);
}

static int group_setup(void **state)
{
    (void)state;
    if (dtu_setup("networks") < 0)
        return -1;
    dtu_name(net_a, sizeof(net_a), "neta");
    dtu_name(net_b, sizeof(net_b), "netb");
    remove_networks();
    return 0;
}

static int group_teardown(void **state)
{
    dtu_cleanup(state); /* containers first: they hold the networks */
    remove_networks();
    return dtu_teardown(state);
}

static json_t *net_labels(const char *who)
{
    json_t *labels = dtu_labels();
    json_object_set_new(labels, DOCKER_LABEL_NETWORK, json_string(who));
    return labels;
}

/* A container of the test image on network, answering to alias there. */
static char *on_network(const char *suffix, const char *network, const char *alias,
                        const char *script)
{
    const char *cmd[] = {"sh", "-c", script};
    _cleanup_json_ json_t *labels = dtu_labels();
    docker_run_spec spec = {.image = dtu_image,
                            .cmd = cmd,
                            .ncmd = 3,
                            .labels = labels,
                            .network = network,
                            .network_alias = alias};
    json_t *cfg = NULL;
    gb_err e = GB_ERR_INIT;
    if (docker_run_spec_to_json(&spec, &cfg, &e) != 0)
        fail_msg("%s", e.msg);
    char *id = dtu_create(suffix, cfg);
    if (docker_container_start(dtu_client, id, &e) != 0)
        fail_msg("starting %s: %s", suffix, e.msg);
    return id;
}

/* Exit code of `sh -c script` in id. */
static long exec_code(const char *id, const char *script)
{
    const char *cmd[] = {"sh", "-c", script};
    docker_exec_result r;
    gb_err e = GB_ERR_INIT;
    if (docker_exec_run(dtu_client, id, cmd, 3, NULL, 30, 0, &r, &e) != 0)
        fail_msg("exec '%s': %s", script, e.msg);
    long code = r.exit_code;
    docker_exec_result_free(&r);
    return code;
}

/* The networks a container's inspect lists. */
static json_t *networks_of(const char *id)
{
    json_t *c = NULL;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(docker_container_inspect(dtu_client, id, &c, &e), 0);
    json_t *nets = json_incref(json_object_get(json_object_get(c, "NetworkSettings"), "Networks"));
    json_decref(c);
    return nets;
}

static void test_networks(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *la = net_labels("a");
    _cleanup_json_ json_t *lb = net_labels("b");
    _cleanup_free_ char *id_a = NULL;
    if (docker_network_create(dtu_client, net_a, la, &id_a, &e) != 0)
        fail_msg("%s", e.msg);
    assert_non_null(id_a);
    assert_int_equal(docker_network_create(dtu_client, net_b, lb, NULL, &e), 0);
    /* the name is taken */
    assert_int_equal(docker_network_create(dtu_client, net_a, la, NULL, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);

    _cleanup_json_ json_t *seen = NULL;
    assert_int_equal(docker_network_inspect(dtu_client, net_a, &seen, &e), 0);
    assert_string_equal(json_string_value(json_object_get(seen, "Id")), id_a);
    assert_string_equal(json_string_value(json_object_get(seen, "Driver")), "bridge");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(seen, "Labels"), DOCKER_LABEL_NETWORK)),
        "a");
    char label[96];
    snprintf(label, sizeof(label), "%s=a", DOCKER_LABEL_NETWORK);
    _cleanup_json_ json_t *listed = NULL;
    assert_int_equal(docker_network_list(dtu_client, label, &listed, &e), 0);
    bool found = false;
    size_t i;
    json_t *n;
    json_array_foreach(listed, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "Name"));
        assert_string_not_equal(name, net_b);
        found = found || strcmp(name, net_a) == 0;
    }
    assert_true(found);
    json_t *absent = NULL;
    char none[160];
    dtu_name(none, sizeof(none), "nonet");
    assert_int_equal(docker_network_inspect(dtu_client, none, &absent, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);

    /* on a: a server and a client reaching it by alias and by name; on b,
     * a container that cannot connect to it at all */
    _cleanup_free_ char *srv =
        on_network("srv", net_a, "web", "echo hi > /tmp/index.html; exec httpd -f -p 8080 -h /tmp");
    _cleanup_free_ char *cli = on_network("cli", net_a, NULL, "exec sleep 600");
    _cleanup_free_ char *out = on_network("out", net_b, NULL, "exec sleep 600");
    char srv_name[160], script[512];
    dtu_name(srv_name, sizeof(srv_name), "srv");
    _cleanup_json_ json_t *srv_nets = networks_of(srv);
    const char *ip =
        json_string_value(json_object_get(json_object_get(srv_nets, net_a), "IPAddress"));
    assert_non_null(ip);
    assert_int_equal(json_object_size(srv_nets), 1);
    const char *get =
        "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 3 %s 8080 | grep -q hi";
    bool served = false;
    for (int attempt = 0; attempt < 50 && !served; attempt++) {
        snprintf(script, sizeof(script), get, "web");
        served = exec_code(cli, script) == 0;
        if (!served)
            usleep(100 * 1000);
    }
    assert_true(served);
    snprintf(script, sizeof(script), get, srv_name);
    assert_int_equal(exec_code(cli, script), 0);
    snprintf(script, sizeof(script), get, ip);
    assert_int_equal(exec_code(cli, script), 0);
    assert_int_not_equal(exec_code(out, script), 0);

    /* a running container keeps its network */
    assert_int_equal(docker_network_remove(dtu_client, net_a, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);

    /* a stopped one moves: off b, onto a, and it starts there */
    assert_int_equal(docker_container_stop(dtu_client, out, 0, &e), 0);
    assert_int_equal(docker_network_disconnect(dtu_client, net_b, out, true, &e), 0);
    const char *aliases[] = {"other"};
    if (docker_network_connect(dtu_client, net_a, out, aliases, 1, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(docker_container_start(dtu_client, out, &e), 0);
    _cleanup_json_ json_t *moved = networks_of(out);
    assert_int_equal(json_object_size(moved), 1);
    assert_non_null(json_object_get(moved, net_a));
    assert_int_equal(exec_code(out, script), 0);
    assert_int_equal(exec_code(cli, "nslookup other >/dev/null"), 0);

    /* b has nobody now: it goes, and going again is fine */
    assert_int_equal(docker_network_remove(dtu_client, net_b, &e), 0);
    assert_int_equal(docker_network_remove(dtu_client, net_b, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_networks, dtu_cleanup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
