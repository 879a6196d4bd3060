/*
 * cpus_topology.c - the host's CPU topology for the core allocator
 * (cpus.h): kernel cpulists, the simulated topology, and reading sysfs.
 */
#include "util/xalloc.h"
#include "sched/cpus.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

void cpus_topology_free(cpus_topology *t)
{
    free(t->cpus);
    t->cpus = NULL;
    t->n = 0;
}

static int cpus_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Digits at *s into *v (below CPUS_MAX); advances *s. */
static bool cpus_number(const char **s, int *v)
{
    if (!isdigit((unsigned char)**s))
        return false;
    long n = 0;
    while (isdigit((unsigned char)**s)) {
        n = n * 10 + (**s - '0');
        if (n >= CPUS_MAX)
            return false;
        (*s)++;
    }
    *v = (int)n;
    return true;
}

int cpus_list_parse(const char *s, int **out, size_t *n, gb_err *err)
{
    const char *orig = s ? s : "";
    _cleanup_free_ bool *seen = xcalloc(CPUS_MAX, sizeof(bool));
    s = orig;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t count = 0;
    while (*s && *s != '\n') {
        int a, b;
        if (!cpus_number(&s, &a))
            goto bad;
        b = a;
        if (*s == '-') {
            s++;
            if (!cpus_number(&s, &b) || b < a)
                goto bad;
        }
        for (int i = a; i <= b; i++)
            if (!seen[i]) {
                seen[i] = true;
                count++;
            }
        if (*s == ',') {
            s++;
            if (!*s || *s == '\n')
                goto bad;
        } else if (*s && *s != '\n') {
            goto bad;
        }
    }
    *out = xcalloc(count + 1, sizeof(int));
    *n = 0;
    for (int i = 0; i < CPUS_MAX; i++)
        if (seen[i])
            (*out)[(*n)++] = i;
    return 0;
bad:
    return err_set(err, ERR_INVALID_PARAMS,
                   "CPU list '%.40s' is not a list of CPU numbers and ranges below %d, as in "
                   "0-3,8-11",
                   orig, CPUS_MAX);
}

char *cpus_list_format(const int *ids, size_t n)
{
    _cleanup_free_ int *sorted = xcalloc(n + 1, sizeof(int));
    if (n)
        memcpy(sorted, ids, n * sizeof(int));
    qsort(sorted, n, sizeof(int), cpus_cmp_int);
    size_t cap = n * 12 + 1, len = 0;
    char *out = xcalloc(cap, 1);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && sorted[j + 1] == sorted[j] + 1)
            j++;
        if (j == i)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? "," : "", sorted[i]);
        else
            len += (size_t)snprintf(out + len, cap - len, "%s%d-%d", len ? "," : "", sorted[i],
                                    sorted[j]);
        i = j + 1;
    }
    return out;
}

int cpus_topology_simulate(const char *spec, cpus_topology *out, gb_err *err)
{
    const char *s = spec ? spec : "";
    int v[3];
    for (int k = 0; k < 3; k++) {
        if (!cpus_number(&s, &v[k]) || v[k] < 1 || (k < 2 && *s++ != 'x'))
            goto bad;
    }
    if (*s || (long)v[0] * v[1] * v[2] > CPUS_MAX || v[2] > 8)
        goto bad;
    int nodes = v[0], cores = v[1], threads = v[2];
    out->n = (size_t)(nodes * cores * threads);
    out->cpus = xcalloc(out->n, sizeof(*out->cpus));
    out->simulated = true;
    for (int t = 0; t < threads; t++)
        for (int node = 0; node < nodes; node++)
            for (int c = 0; c < cores; c++) {
                int core = node * cores + c;
                int id = t * nodes * cores + core;
                out->cpus[id] = (cpus_cpu){.id = id, .core = core, .node = node, .package = node};
            }
    return 0;
bad:
    return err_set(err, ERR_INVALID_PARAMS,
                   "CPU topology '%.40s' is not NODESxCORESxTHREADS (each at least 1, threads "
                   "at most 8, %d logical CPUs at most), as in 2x16x2",
                   spec ? spec : "", CPUS_MAX);
}

/* The first line of a file, trimmed; NULL if it cannot be read. */
static char *cpus_read_line(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[8192];
    char *line = fgets(buf, sizeof(buf), f);
    fclose(f);
    if (!line)
        return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    return xstrdup(buf);
}

static int cpus_read_int(const char *path, int fallback)
{
    _cleanup_free_ char *line = cpus_read_line(path);
    if (!line || !*line)
        return fallback;
    char *end;
    long v = strtol(line, &end, 10);
    return *end ? fallback : (int)v;
}

int cpus_topology_read(const char *root, cpus_topology *out, gb_err *err)
{
    const char *r = root ? root : "";
    _cleanup_free_ char *online_path = xasprintf("%s/sys/devices/system/cpu/online", r);
    _cleanup_free_ char *online = cpus_read_line(online_path);
    if (!online)
        return err_set(err, ERR_INTERNAL, "cannot read %s: is /sys mounted?", online_path);
    _cleanup_free_ int *ids = NULL;
    size_t n = 0;
    if (cpus_list_parse(online, &ids, &n, err) < 0)
        return err_prefix(err, "%s", online_path);
    out->cpus = xcalloc(n + 1, sizeof(*out->cpus));
    out->n = n;
    out->simulated = false;
    /* (package, core_id) pairs numbered in order of first sight. */
    _cleanup_free_ int *pkg_of = xcalloc(n + 1, sizeof(int));
    _cleanup_free_ int *cid_of = xcalloc(n + 1, sizeof(int));
    int ncores = 0;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *cp =
            xasprintf("%s/sys/devices/system/cpu/cpu%d/topology/core_id", r, ids[i]);
        _cleanup_free_ char *pp =
            xasprintf("%s/sys/devices/system/cpu/cpu%d/topology/physical_package_id", r, ids[i]);
        int cid = cpus_read_int(cp, ids[i]), pkg = cpus_read_int(pp, 0);
        int core = -1;
        for (size_t j = 0; j < i && core < 0; j++)
            if (pkg_of[j] == pkg && cid_of[j] == cid)
                core = out->cpus[j].core;
        if (core < 0)
            core = ncores++;
        pkg_of[i] = pkg;
        cid_of[i] = cid;
        out->cpus[i] = (cpus_cpu){.id = ids[i], .core = core, .node = 0, .package = pkg};
    }
    /* Nodes: each node's cpulist; a host without NUMA has none, all node 0. */
    for (int node = 0; node < 1024; node++) {
        _cleanup_free_ char *np = xasprintf("%s/sys/devices/system/node/node%d/cpulist", r, node);
        _cleanup_free_ char *list = cpus_read_line(np);
        if (!list)
            continue;
        _cleanup_free_ int *members = NULL;
        size_t nm = 0;
        gb_err ignored = GB_ERR_INIT;
        if (cpus_list_parse(list, &members, &nm, &ignored) < 0)
            continue;
        for (size_t k = 0; k < nm; k++)
            for (size_t i = 0; i < n; i++)
                if (out->cpus[i].id == members[k])
                    out->cpus[i].node = node;
    }
    return 0;
}

int cpus_pci_numa_node(const char *root, const char *bus_id)
{
    if (!bus_id || !*bus_id)
        return -1;
    /* NVML: "00000000:3B:00.0" (8-digit domain); sysfs: "0000:3b:00.0". */
    const char *colon = strchr(bus_id, ':');
    if (!colon)
        return -1;
    size_t dom_len = (size_t)(colon - bus_id);
    const char *dom = dom_len > 4 ? colon - 4 : bus_id;
    char name[64];
    size_t k = 0;
    for (const char *c = dom; *c && k < sizeof(name) - 1; c++)
        name[k++] = (char)tolower((unsigned char)*c);
    name[k] = '\0';
    if (strchr(name, '/') || strstr(name, ".."))
        return -1;
    _cleanup_free_ char *path =
        xasprintf("%s/sys/bus/pci/devices/%s/numa_node", root ? root : "", name);
    int node = cpus_read_int(path, -1);
    return node < 0 ? -1 : node;
}
