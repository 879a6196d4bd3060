/*
 * placement_bench.c - how long choosing a node for a create takes
 * (sched/placement.h) at 10, 100 and 1000 nodes of 8 cards, with the
 * capacity records in a real etcd, against reading those records from it.
 * bench/placement.sh starts the etcd and runs it.
 *
 *   placement_bench --store URL [--seconds S] [--nodes N[,N...]]
 *
 * The fleet: each node has 8 cards in the pattern of bench/alloc_bench.c
 * (four A100 80 GB, two A100 40 GB, two T4 16 GB), half of them held: in
 * a fixed pseudo-random order per node, 4 cards held whole, 2 shared by
 * memory (one to three tenants of 4, 8 or 12 GB), 1 time-sliced (one to
 * three of its four replicas taken) and 1 free. Every node has a record of
 * about 2.3 KB at <prefix>/fleet/capacity/<node>, written before timing;
 * each node count has a prefix of its own.
 *
 * Timed, per node count and request:
 *   baseline     one store_range of the capacity prefix: every record, as
 *                the deciding daemon reads them (the etcd backend reads a
 *                range in pages of 128 keys at one revision);
 *   parse+rank   placement_node_parse of every record read, then
 *                placement_rank, then placement_node_free - the work the
 *                daemon adds to that read;
 *   rank alone   placement_rank on nodes parsed beforehand, for a daemon
 *                that would keep them parsed between decisions.
 * Each row runs PLACEMENT_BENCH_ROUNDS rounds of each, interleaved, and
 * prints the medians and parse+rank / baseline: a round in which another
 * process had the CPU does not count, and both sides of the ratio saw the
 * same machine.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "sched/placement.h"
#include "store/store.h"
#include "util/err.h"

#define PLACEMENT_BENCH_MAX_COUNTS 8
#define PLACEMENT_BENCH_ROUNDS 9
#define PLACEMENT_BENCH_CARDS 8
#define PLACEMENT_BENCH_TXN_PUTS 64

struct placement_bench_model {
    const char *name;
    uint64_t memory_mib;
};

static const struct placement_bench_model placement_bench_models[PLACEMENT_BENCH_CARDS] = {
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-SXM4-80GB", 81920},
    {"NVIDIA A100-PCIE-40GB", 40960},
    {"NVIDIA A100-PCIE-40GB", 40960},
    {"Tesla T4", 16384},
    {"Tesla T4", 16384},
};

struct placement_bench_kind {
    const char *name;
    placement_request req;
};

static const struct placement_bench_kind placement_bench_kinds[] = {
    {"8GB share, binpack", {.gpu_count = 1, .memory_mib = 8192, .ports_needed = 2}},
    {"whole, 1 card, spread", {.gpu_count = 1, .policy = GPUS_POLICY_SPREAD}},
    /* More than any card has: refused, with its message. */
    {"96GB share, refused", {.gpu_count = 1, .memory_mib = 98304}},
};
#define PLACEMENT_BENCH_NKINDS (sizeof(placement_bench_kinds) / sizeof(placement_bench_kinds[0]))

/* splitmix64: the same fleet on every run. */
static uint64_t placement_bench_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double placement_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One device of a record in the form /resources/gpus shows it. */
static json_t *placement_bench_device(const char *uuid, int index, const char *model,
                                      uint64_t memory, const char *mode, uint64_t free_mib,
                                      int tenants, int replicas_used)
{
    return json_pack("{s:s, s:i, s:s, s:I, s:s, s:I, s:i, s:i, s:{s:i, s:i}, s:b, s:b, s:b}",
                     "uuid", uuid, "index", index, "model", model, "memoryMiB", (json_int_t)memory,
                     "mode", mode, "freeMemoryMiB", (json_int_t)free_mib, "tenants", tenants,
                     "maxTenants", 0, "replicas", "total", 4, "used", replicas_used, "excluded", 0,
                     "shareable", 1, "healthy", 1);
}

/* Node `name`'s capacity record (see the top of the file); free it. */
static char *placement_bench_record(const char *name, uint64_t *seed)
{
    int order[PLACEMENT_BENCH_CARDS];
    for (int i = 0; i < PLACEMENT_BENCH_CARDS; i++)
        order[i] = i;
    for (int i = PLACEMENT_BENCH_CARDS; i > 1; i--) { /* Fisher-Yates */
        int j = (int)(placement_bench_next(seed) % (uint64_t)i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    static const uint64_t share_sizes[] = {4096, 8192, 12288};
    json_t *devices = json_array();
    for (int k = 0; k < PLACEMENT_BENCH_CARDS; k++) {
        int i = order[k];
        const struct placement_bench_model *m = &placement_bench_models[i];
        char uuid[64];
        uint64_t r = placement_bench_next(seed);
        snprintf(uuid, sizeof(uuid), "GPU-%08" PRIx32 "-%04x-%04x-%04x-%012" PRIx64, (uint32_t)r, i,
                 (unsigned)(r >> 32) & 0xffff, (unsigned)(r >> 48), r & 0xffffffffffffu);
        json_t *d;
        int tenants = 1 + (int)(placement_bench_next(seed) % 3);
        if (k < 4) {
            d = placement_bench_device(uuid, i, m->name, m->memory_mib, "whole", 0, 1, 0);
        } else if (k < 6) {
            uint64_t held = 0;
            int t = 0;
            for (; t < tenants; t++) {
                uint64_t size = share_sizes[placement_bench_next(seed) % 3];
                if (held + size > m->memory_mib)
                    break; /* a T4 holds what fits */
                held += size;
            }
            d = placement_bench_device(uuid, i, m->name, m->memory_mib, "memory",
                                       m->memory_mib - held, t, 0);
        } else if (k < 7) {
            d = placement_bench_device(uuid, i, m->name, m->memory_mib, "timeslice", 0, tenants,
                                       tenants);
        } else {
            d = placement_bench_device(uuid, i, m->name, m->memory_mib, "free", m->memory_mib, 0,
                                       0);
        }
        json_array_append_new(devices, d);
    }
    /* The record lists devices in index order, as /resources/gpus does. */
    json_t *sorted = json_array();
    for (int i = 0; i < PLACEMENT_BENCH_CARDS; i++)
        for (size_t k = 0; k < json_array_size(devices); k++)
            if (json_integer_value(json_object_get(json_array_get(devices, k), "index")) == i)
                json_array_append(sorted, json_array_get(devices, k));
    json_decref(devices);
    json_t *rec = json_pack("{s:s, s:I, s:o, s:{s:I}, s:{s:I}}", "node", name, "updated",
                            (json_int_t)1764000000123, "devices", sorted, "ports", "availableCount",
                            (json_int_t)(1000 + placement_bench_next(seed) % 24000), "volumes",
                            "freeBytes", (json_int_t)(UINT64_C(1) << 40));
    char *text = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    return text;
}

/* Write n records under prefix, PLACEMENT_BENCH_TXN_PUTS to a transaction;
 * *bytes gets their total size. */
static int placement_bench_fill(store *s, const char *prefix, size_t n, size_t *bytes, gb_err *err)
{
    uint64_t seed = 42;
    *bytes = 0;
    for (size_t i = 0; i < n; i += PLACEMENT_BENCH_TXN_PUTS) {
        store_op ops[PLACEMENT_BENCH_TXN_PUTS];
        char keys[PLACEMENT_BENCH_TXN_PUTS][128];
        char *values[PLACEMENT_BENCH_TXN_PUTS] = {NULL};
        size_t nops = 0;
        for (size_t j = i; j < n && nops < PLACEMENT_BENCH_TXN_PUTS; j++, nops++) {
            char name[32];
            snprintf(name, sizeof(name), "node-%04zu", j);
            snprintf(keys[nops], sizeof(keys[nops]), "%s%s", prefix, name);
            values[nops] = placement_bench_record(name, &seed);
            *bytes += strlen(values[nops]);
            ops[nops] = (store_op){.kind = STORE_OP_PUT, .key = keys[nops], .value = values[nops]};
        }
        bool ok = false;
        int rc = store_txn(s, NULL, 0, ops, nops, &ok, NULL, err);
        for (size_t k = 0; k < nops; k++)
            free(values[k]);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One row's state. */
struct placement_bench_row {
    store *s;
    const char *prefix;
    const store_kvs *kvs; /* read once, for parse+rank */
    placement_node *nodes;
    size_t *order;
    const placement_request *req;
    size_t n_order;
    gb_err why;
    int failed; /* a store call failed */
    gb_err err;
};

static void placement_bench_read(struct placement_bench_row *r)
{
    store_kvs kvs = {0};
    if (store_range(r->s, r->prefix, &kvs, &r->err) < 0)
        r->failed = 1;
    store_kvs_free(&kvs);
}

static const char *placement_bench_name(const char *key)
{
    const char *slash = strrchr(key, '/');
    return slash ? slash + 1 : key;
}

/* Parse every record read into r->nodes; the caller frees them. */
static void placement_bench_parse(struct placement_bench_row *r)
{
    for (size_t i = 0; i < r->kvs->n; i++) {
        gb_err e = GB_ERR_INIT;
        const store_kv *kv = &r->kvs->items[i];
        placement_node_parse(placement_bench_name(kv->key), kv->value, &r->nodes[i], &e);
        r->nodes[i].alive = true;
    }
}

static void placement_bench_rank(struct placement_bench_row *r)
{
    placement_rank(r->nodes, r->kvs->n, r->req, r->order, &r->n_order, &r->why);
}

static void placement_bench_parse_rank(struct placement_bench_row *r)
{
    placement_bench_parse(r);
    placement_bench_rank(r);
    for (size_t i = 0; i < r->kvs->n; i++)
        placement_node_free(&r->nodes[i]);
}

/* Call step(r) for `seconds`, at least once; microseconds per call. */
static double placement_bench_round(void (*step)(struct placement_bench_row *),
                                    struct placement_bench_row *r, double seconds)
{
    long calls = 0;
    double start = placement_bench_now(), elapsed;
    do {
        step(r);
        calls++;
        elapsed = placement_bench_now() - start;
    } while (elapsed < seconds);
    return elapsed / (double)calls * 1e6;
}

static double placement_bench_median(double *v, int n)
{
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
            double t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
    return v[n / 2];
}

static int placement_bench_nodes(store *s, size_t n, double seconds)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "placement-bench/%zu/fleet/capacity/", n);
    gb_err err = GB_ERR_INIT;
    size_t bytes = 0;
    store_kvs kvs = {0};
    if (placement_bench_fill(s, prefix, n, &bytes, &err) < 0 ||
        store_range(s, prefix, &kvs, &err) < 0) {
        fprintf(stderr, "placement_bench: %zu nodes: %s\n", n, err.msg);
        return -1;
    }
    if (kvs.n != n) {
        fprintf(stderr, "placement_bench: wrote %zu records, read %zu\n", n, kvs.n);
        store_kvs_free(&kvs);
        return -1;
    }
    struct placement_bench_row r = {.s = s, .prefix = prefix, .kvs = &kvs};
    r.nodes = calloc(n, sizeof(*r.nodes));
    r.order = calloc(n, sizeof(*r.order));
    placement_node *parsed = calloc(n, sizeof(*parsed));
    int rc = r.nodes && r.order && parsed ? 0 : -1;
    struct placement_bench_row kept = r;
    kept.nodes = parsed;
    if (rc == 0)
        placement_bench_parse(&kept); /* for "rank alone" */
    double round = seconds / 3 / PLACEMENT_BENCH_ROUNDS;
    for (size_t k = 0; rc == 0 && k < PLACEMENT_BENCH_NKINDS; k++) {
        double base[PLACEMENT_BENCH_ROUNDS], full[PLACEMENT_BENCH_ROUNDS],
            alone[PLACEMENT_BENCH_ROUNDS];
        r.req = kept.req = &placement_bench_kinds[k].req;
        for (int i = 0; i < PLACEMENT_BENCH_ROUNDS; i++) {
            base[i] = placement_bench_round(placement_bench_read, &r, round);
            full[i] = placement_bench_round(placement_bench_parse_rank, &r, round);
            alone[i] = placement_bench_round(placement_bench_rank, &kept, round);
        }
        if (r.failed) {
            fprintf(stderr, "placement_bench: reading the records: %s\n", r.err.msg);
            rc = -1;
            break;
        }
        double b = placement_bench_median(base, PLACEMENT_BENCH_ROUNDS);
        double f = placement_bench_median(full, PLACEMENT_BENCH_ROUNDS);
        double a = placement_bench_median(alone, PLACEMENT_BENCH_ROUNDS);
        char outcome[32];
        if (r.n_order)
            snprintf(outcome, sizeof(outcome), "%zu fit", r.n_order);
        else
            snprintf(outcome, sizeof(outcome), "refused");
        printf("%6zu  %8.0f  %-21s  %-9s  %10.0f  %13.0f  %8.2fx  %10.1f\n", n,
               (double)bytes / 1024, placement_bench_kinds[k].name, outcome, b, f,
               b > 0 ? f / b : 0, a);
        if (!r.n_order && n == 10)
            printf("%6s  (%s)\n", "", r.why.msg);
        fflush(stdout);
    }
    for (size_t i = 0; i < n && parsed; i++)
        placement_node_free(&parsed[i]);
    free(parsed);
    free(r.nodes);
    free(r.order);
    store_kvs_free(&kvs);
    return rc;
}

int main(int argc, char **argv)
{
    double seconds = 1.5;
    const char *url = NULL;
    size_t counts[PLACEMENT_BENCH_MAX_COUNTS] = {10, 100, 1000}, ncounts = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
            ncounts = 0;
            for (char *s = argv[++i], *end; *s && ncounts < PLACEMENT_BENCH_MAX_COUNTS; s = end) {
                counts[ncounts] = strtoul(s, &end, 10);
                if (end == s || counts[ncounts] == 0 || counts[ncounts] > 9999) {
                    fprintf(stderr, "placement_bench: --nodes takes N[,N...] (1..9999)\n");
                    return 2;
                }
                ncounts++;
                end += *end == ',';
            }
        } else {
            url = NULL;
            break;
        }
    }
    if (!url) {
        fprintf(stderr, "usage: placement_bench --store URL [--seconds S] [--nodes N[,N...]]\n");
        return 2;
    }
    if (seconds <= 0)
        seconds = 1.5;
    store *s = NULL;
    gb_err err = GB_ERR_INIT;
    if (store_open(url, &s, &err) < 0) {
        fprintf(stderr, "placement_bench: %s\n", err.msg);
        return 1;
    }
    printf("fleet: 8 cards a node (A100-80GB x4, A100-40GB x2, T4-16GB x2), half held: "
           "4 whole, 2 memory-shared, 1 time-sliced, 1 free\n");
    printf("baseline: one store_range of every capacity record (%s)\n", store_backend_name(s));
    printf("parse+rank: placement_node_parse of every record + placement_rank + free\n");
    printf("times: medians of %d interleaved rounds, %.2f s per row\n\n", PLACEMENT_BENCH_ROUNDS,
           seconds);
    printf("%6s  %8s  %-21s  %-9s  %10s  %13s  %9s  %10s\n", "nodes", "KiB", "request", "outcome",
           "range us", "parse+rank us", "x range", "rank us");
    int status = 0;
    for (size_t c = 0; c < ncounts && status == 0; c++)
        if (placement_bench_nodes(s, counts[c], seconds) < 0)
            status = 1;
    store_close(s);
    return status;
}
