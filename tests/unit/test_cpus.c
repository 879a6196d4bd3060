/*
 * test_cpus.c - the CPU-core allocator: cpulist parsing and formatting, the
 * simulated topology, reading a sysfs laid out in a temporary directory,
 * a card's NUMA node from its PCI bus id, and the pool: whole cores first,
 * the preferred NUMA node first, falling back to others, all or nothing,
 * release, taking an exact set, and the reserved CPUs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sched/cpus.h"

static void test_list_parse(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    int *ids = NULL;
    size_t n = 0;
    assert_int_equal(cpus_list_parse("0-3,8-11\n", &ids, &n, &err), 0);
    assert_int_equal(n, 8);
    assert_int_equal(ids[3], 3);
    assert_int_equal(ids[4], 8);
    char *s = cpus_list_format(ids, n);
    assert_string_equal(s, "0-3,8-11");
    free(s);
    free(ids);
    assert_int_equal(cpus_list_parse("5,1,1", &ids, &n, &err), 0);
    assert_int_equal(n, 2);
    s = cpus_list_format(ids, n);
    assert_string_equal(s, "1,5");
    free(s);
    free(ids);
    assert_int_equal(cpus_list_parse("", &ids, &n, &err), 0);
    assert_int_equal(n, 0);
    free(ids);
    const char *bad[] = {"a", "3-1", "1,", "1-", "-1", "1 2", "99999", "0-3,x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        gb_err e = GB_ERR_INIT;
        assert_int_equal(cpus_list_parse(bad[i], &ids, &n, &e), -1);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
    }
}

static void test_simulate(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    cpus_topology t = {0};
    assert_int_equal(cpus_topology_simulate("2x4x2", &t, &err), 0);
    assert_int_equal(t.n, 16);
    assert_true(t.simulated);
    /* cpu 0 and 8 are the two threads of core 0 on node 0; 4 is node 1. */
    assert_int_equal(t.cpus[0].core, t.cpus[8].core);
    assert_int_equal(t.cpus[4].node, 1);
    assert_int_equal(t.cpus[12].node, 1);
    cpus_topology_free(&t);
    const char *bad[] = {"", "2x4", "0x4x2", "2x4x2x1", "2x4xa", "2x4x9", "64x64x2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        gb_err e = GB_ERR_INIT;
        assert_int_equal(cpus_topology_simulate(bad[i], &t, &e), -1);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
    }
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_read_sysfs(void **state)
{
    (void)state;
    char root[] = "/tmp/gpubox-cpus-XXXXXX";
    assert_non_null(mkdtemp(root));
    /* 2 packages x 2 cores x 2 threads; core_id repeats across packages. */
    put(root, "sys/devices/system/cpu/online", "0-7\n");
    int core_id[] = {0, 1, 0, 1, 0, 1, 0, 1}, pkg[] = {0, 0, 1, 1, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++) {
        char rel[128], v[16];
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/core_id", i);
        snprintf(v, sizeof(v), "%d\n", core_id[i]);
        put(root, rel, v);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/physical_package_id", i);
        snprintf(v, sizeof(v), "%d\n", pkg[i]);
        put(root, rel, v);
    }
    put(root, "sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
    put(root, "sys/devices/system/node/node1/cpulist", "2-3,6-7\n");
    put(root, "sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
    put(root, "sys/bus/pci/devices/0000:18:00.0/numa_node", "-1\n");

    gb_err err = GB_ERR_INIT;
    cpus_topology t = {0};
    assert_int_equal(cpus_topology_read(root, &t, &err), 0);
    assert_int_equal(t.n, 8);
    assert_false(t.simulated);
    assert_int_equal(t.cpus[0].core, t.cpus[4].core);     /* siblings */
    assert_int_not_equal(t.cpus[0].core, t.cpus[2].core); /* same core_id, other package */
    assert_int_equal(t.cpus[2].node, 1);
    assert_int_equal(t.cpus[5].node, 0);
    assert_int_equal(cpus_pci_numa_node(root, "00000000:3B:00.0"), 1);
    assert_int_equal(cpus_pci_numa_node(root, "0000:3b:00.0"), 1);
    assert_int_equal(cpus_pci_numa_node(root, "00000000:18:00.0"), -1);
    assert_int_equal(cpus_pci_numa_node(root, "00000000:99:00.0"), -1);
    assert_int_equal(cpus_pci_numa_node(root, ""), -1);
    cpus_topology_free(&t);

    char nothing[600];
    snprintf(nothing, sizeof(nothing), "%s/none", root);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(cpus_topology_read(nothing, &t, &e), -1);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static cpus_pool *sim_pool(const char *spec, const int *reserved, size_t nreserved)
{
    gb_err err = GB_ERR_INIT;
    cpus_topology t = {0};
    assert_int_equal(cpus_topology_simulate(spec, &t, &err), 0);
    cpus_pool *p = cpus_pool_new(&t, reserved, nreserved);
    cpus_topology_free(&t);
    return p;
}

static void test_whole_cores_on_preferred_node(void **state)
{
    (void)state;
    cpus_pool *p = sim_pool("2x4x2", NULL, 0); /* node 0: 0-3,8-11; node 1: 4-7,12-15 */
    gb_err err = GB_ERR_INIT;
    int out[16];
    int prefer1[] = {1};
    assert_int_equal(cpus_pool_alloc(p, 4, prefer1, 1, "a", out, &err), 0);
    /* two whole cores of node 1 */
    int want[] = {4, 5, 12, 13};
    assert_memory_equal(out, want, sizeof(want));
    /* no preference: the node with the most free (node 0) */
    assert_int_equal(cpus_pool_alloc(p, 2, NULL, 0, "b", out, &err), 0);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 8);
    /* an odd count: one whole core and one thread */
    assert_int_equal(cpus_pool_alloc(p, 3, prefer1, 1, "c", out, &err), 0);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 14);
    /* the next single thread completes the split core 7/15 first */
    assert_int_equal(cpus_pool_alloc(p, 1, prefer1, 1, "d", out, &err), 0);
    assert_int_equal(out[0], 15);
    assert_int_equal(cpus_pool_free_count(p), 16 - 10);
    cpus_pool_free(p);
}

static void test_fallback_and_all_or_nothing(void **state)
{
    (void)state;
    int reserved[] = {0, 8};
    cpus_pool *p = sim_pool("2x4x2", reserved, 2);
    assert_int_equal(cpus_pool_usable(p), 14);
    gb_err err = GB_ERR_INIT;
    int out[16];
    int prefer0[] = {0};
    /* node 0 has 6 free (0 and 8 are the host's); 8 asked: 6 there, 2 on node 1 */
    assert_int_equal(cpus_pool_alloc(p, 8, prefer0, 1, "a", out, &err), 0);
    int node1 = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_not_equal(out[i], 0);
        assert_int_not_equal(out[i], 8);
        node1 += (out[i] >= 4 && out[i] <= 7) || out[i] >= 12;
    }
    assert_int_equal(node1, 2);
    size_t before = cpus_pool_free_count(p);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(cpus_pool_alloc(p, 7, prefer0, 1, "b", out, &e), -1);
    assert_int_equal(e.code, ERR_CPU_NOT_ENOUGH);
    assert_non_null(strstr(e.msg, "asked 7, 6 free"));
    assert_non_null(strstr(e.msg, "0 on node 0"));
    assert_non_null(strstr(e.msg, "6 on node 1"));
    assert_int_equal(cpus_pool_free_count(p), before);
    /* release gives back only what the owner holds */
    cpus_pool_release(p, out, 8, "someone-else");
    assert_int_equal(cpus_pool_free_count(p), before);
    assert_int_equal(cpus_pool_alloc(p, 6, prefer0, 1, "b", out, &err), 0);
    assert_int_equal(cpus_pool_free_count(p), 0);
    cpus_pool_release(p, out, 6, "b");
    assert_int_equal(cpus_pool_free_count(p), 6);
    cpus_pool_free(p);
}

static void test_take_exact(void **state)
{
    (void)state;
    int reserved[] = {0};
    cpus_pool *p = sim_pool("1x4x2", reserved, 1);
    gb_err err = GB_ERR_INIT;
    int ids[] = {1, 5};
    assert_int_equal(cpus_pool_take(p, ids, 2, "a", false, &err), 0);
    /* held by a: refused, nothing more taken */
    int again[] = {2, 5};
    gb_err e = GB_ERR_INIT;
    assert_int_equal(cpus_pool_take(p, again, 2, "b", false, &e), -1);
    assert_int_equal(e.code, ERR_CPU_NOT_ENOUGH);
    assert_non_null(strstr(e.msg, "held by replica set a"));
    assert_int_equal(cpus_pool_free_count(p), 5);
    int res[] = {0};
    e = (gb_err)GB_ERR_INIT;
    assert_int_equal(cpus_pool_take(p, res, 1, "b", false, &e), -1);
    assert_non_null(strstr(e.msg, "reserved"));
    assert_int_equal(cpus_pool_take(p, res, 1, "b", true, &err), 0);
    int unknown[] = {42};
    e = (gb_err)GB_ERR_INIT;
    assert_int_equal(cpus_pool_take(p, unknown, 1, "b", true, &e), -1);
    json_t *st = cpus_pool_status(p);
    assert_int_equal(json_integer_value(json_object_get(st, "held")), 3);
    assert_int_equal(json_integer_value(json_object_get(st, "total")), 8);
    assert_int_equal(json_integer_value(json_object_get(st, "cores")), 4);
    assert_int_equal(json_integer_value(json_object_get(st, "threadsPerCore")), 2);
    json_t *cpu5 = json_array_get(json_object_get(st, "cpus"), 5);
    assert_string_equal(json_string_value(json_object_get(cpu5, "owner")), "a");
    json_decref(st);
    cpus_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_parse),
        cmocka_unit_test(test_simulate),
        cmocka_unit_test(test_read_sysfs),
        cmocka_unit_test(test_whole_cores_on_preferred_node),
        cmocka_unit_test(test_fallback_and_all_or_nothing),
        cmocka_unit_test(test_take_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
