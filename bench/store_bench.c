/*
 * store_bench.c - puts, gets and compare-and-swap transactions per second
 * for several stores side by side, through the store_* functions as gpuboxd
 * uses them. bench/store.sh runs it on a SQLite file and a temporary etcd.
 *
 *   store_bench [--seconds S] NAME=URL [NAME=URL...]
 *
 * Each store gets the same workload, one operation kind at a time, for S
 * seconds each (default 2), first from one thread and then from
 * STORE_BENCH_THREADS threads on one handle:
 *   put  an unconditional put of a ~200-byte JSON value to one of 1000 keys
 *   get  a get of one of those keys
 *   cas  read a counter, then a transaction comparing its mod_revision and
 *        putting counter+1; only swaps that won are counted, so with
 *        several threads this is the rate of useful updates under contention
 * The table has one column of operations per second per store and, for
 * two or more stores, the ratio of each to the first.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

#define STORE_BENCH_KEYS 1000
#define STORE_BENCH_THREADS 8
#define STORE_BENCH_MAX_STORES 4

enum store_bench_op { BENCH_PUT, BENCH_GET, BENCH_CAS };
static const char *const store_bench_op_names[] = {"put", "get", "cas"};

struct store_bench_run {
    store *s;
    enum store_bench_op op;
    double seconds;
    atomic_long done;  /* operations counted */
    atomic_int failed; /* store calls that returned an error */
    char first_error[512];
    pthread_mutex_t lock;
};

static double store_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void store_bench_fail(struct store_bench_run *run, const gb_err *e)
{
    if (atomic_fetch_add(&run->failed, 1) == 0) {
        pthread_mutex_lock(&run->lock);
        snprintf(run->first_error, sizeof(run->first_error), "%s", e->msg);
        pthread_mutex_unlock(&run->lock);
    }
}

/* One compare-and-swap attempt on the counter; 1 when it won. */
static int store_bench_cas_once(store *s, gb_err *e)
{
    store_kv kv = {0};
    int found = store_get(s, "bench/counter", &kv, e);
    if (found < 0)
        return -1;
    long n = found ? strtol(kv.value, NULL, 10) : 0;
    int64_t seen = found ? kv.mod_revision : 0;
    store_kv_free(&kv);
    char value[32];
    snprintf(value, sizeof(value), "%ld", n + 1);
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = "bench/counter", .mod_revision = seen};
    store_op op = {.kind = STORE_OP_PUT, .key = "bench/counter", .value = value};
    bool ok = false;
    if (store_txn(s, &cmp, 1, &op, 1, &ok, NULL, e) < 0)
        return -1;
    return ok;
}

static void *store_bench_worker(void *arg)
{
    struct store_bench_run *run = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    char value[256];
    double end = store_bench_now() + run->seconds;
    for (long i = 0; store_bench_now() < end && atomic_load(&run->failed) == 0; i++) {
        char key[32];
        snprintf(key, sizeof(key), "bench/k/%d", rand_r(&seed) % STORE_BENCH_KEYS);
        gb_err e = GB_ERR_INIT;
        int r = 0;
        if (run->op == BENCH_PUT) {
            snprintf(
                value, sizeof(value),
                "{\"version\":%ld,\"image\":\"gpubox-test:latest\",\"gpus\":[\"GPU-0a1b2c3d\"],"
                "\"ports\":[40001,40002],\"env\":[\"A=1\",\"B=2\"],\"binds\":[{\"src\":"
                "\"bar\",\"dest\":\"/root/data\"}],\"padding\":\"%.40s\"}",
                i, "0123456789012345678901234567890123456789");
            r = store_put(run->s, key, value, NULL, &e);
        } else if (run->op == BENCH_GET) {
            store_kv kv = {0};
            r = store_get(run->s, key, &kv, &e);
            store_kv_free(&kv);
        } else {
            r = store_bench_cas_once(run->s, &e);
            if (r == 0)
                continue; /* lost the race: not a useful update */
        }
        if (r < 0)
            store_bench_fail(run, &e);
        else
            atomic_fetch_add(&run->done, 1);
    }
    return NULL;
}

/* Operations per second of op on s from nthreads threads; -1 on error. */
static double store_bench_measure(store *s, enum store_bench_op op, int nthreads, double seconds)
{
    struct store_bench_run run = {.s = s, .op = op, .seconds = seconds};
    pthread_mutex_init(&run.lock, NULL);
    pthread_t threads[STORE_BENCH_THREADS];
    double start = store_bench_now();
    for (int i = 0; i < nthreads; i++)
        pthread_create(&threads[i], NULL, store_bench_worker, &run);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    double took = store_bench_now() - start;
    pthread_mutex_destroy(&run.lock);
    if (atomic_load(&run.failed)) {
        fprintf(stderr, "store_bench: %s from %d threads: %d calls failed; first: %s\n",
                store_bench_op_names[op], nthreads, atomic_load(&run.failed), run.first_error);
        return -1;
    }
    return (double)atomic_load(&run.done) / took;
}

/* Every get must find its key, so the puts fill all keys first. */
static int store_bench_prepare(store *s, gb_err *e)
{
    for (int i = 0; i < STORE_BENCH_KEYS; i += 100) {
        store_op ops[100];
        char keys[100][32];
        for (int j = 0; j < 100; j++) {
            snprintf(keys[j], sizeof(keys[j]), "bench/k/%d", i + j);
            ops[j] = (store_op){.kind = STORE_OP_PUT, .key = keys[j], .value = "{}"};
        }
        bool ok = false;
        if (store_txn(s, NULL, 0, ops, 100, &ok, NULL, e) < 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = 2;
    const char *names[STORE_BENCH_MAX_STORES];
    store *stores[STORE_BENCH_MAX_STORES];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
            continue;
        }
        char *eq = strchr(argv[i], '=');
        if (!eq || n == STORE_BENCH_MAX_STORES || seconds <= 0) {
            fprintf(stderr,
                    "usage: store_bench [--seconds S] NAME=URL [NAME=URL...] (at most %d)\n",
                    STORE_BENCH_MAX_STORES);
            return 2;
        }
        *eq = '\0';
        gb_err e = GB_ERR_INIT;
        if (store_open(eq + 1, &stores[n], &e) < 0 || store_bench_prepare(stores[n], &e) < 0) {
            fprintf(stderr, "store_bench: %s: %s\n", argv[i], e.msg);
            return 1;
        }
        names[n++] = argv[i];
    }
    if (n == 0) {
        fprintf(stderr, "usage: store_bench [--seconds S] NAME=URL [NAME=URL...]\n");
        return 2;
    }

    printf("%-22s", "operations per second");
    for (int k = 0; k < n; k++)
        printf(" %12s", names[k]);
    for (int k = 1; k < n; k++)
        printf("   %s/%s", names[k], names[0]);
    printf("\n");
    const int thread_counts[] = {1, STORE_BENCH_THREADS};
    int status = 0;
    for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
        for (int op = BENCH_PUT; op <= BENCH_CAS; op++) {
            double rate[STORE_BENCH_MAX_STORES];
            char label[40];
            snprintf(label, sizeof(label), "%s, %d thread%s", store_bench_op_names[op],
                     thread_counts[t], thread_counts[t] > 1 ? "s" : "");
            printf("%-22s", label);
            fflush(stdout);
            for (int k = 0; k < n; k++) {
                rate[k] = store_bench_measure(stores[k], op, thread_counts[t], seconds);
                status |= rate[k] < 0;
                printf(" %12.0f", rate[k]);
                fflush(stdout);
            }
            for (int k = 1; k < n; k++)
                printf("   %*.2f", (int)(strlen(names[k]) + strlen(names[0]) + 1),
                       rate[0] > 0 ? rate[k] / rate[0] : 0.0);
            printf("\n");
        }
    }
    for (int k = 0; k < n; k++)
        store_close(stores[k]);
    return status;
}
