/*
 * accounting_bench.c - what accounting answers cost after a year against
 * after a day (bench/accounting.sh runs it): two stores made in the same
 * run, one with a day of synthetic intervals, one with a year of them,
 * for the same users; then, timed in process against each, the calls
 * behind GET /api/v1/usage (everyone from the beginning; one user over
 * the last 24 hours), /metrics (users_metrics_usage) and the queue's fair
 * share (users_fairshare_usage, one user). The year's store is timed
 * twice: folded into the rollup as a running gpuboxd keeps it (with the
 * default retention every interval of the year is still there), and not
 * folded, which reads every interval as gpubox did before the rollup.
 *
 * Usage: accounting_bench DIR [--users N] [--per-day K] [--seconds S]
 *   DIR: an empty directory for the SQLite files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/keys.h"
#include "service/users/users_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd_state = 12345;
static uint64_t rnd(uint64_t n)
{
    rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rnd_state >> 33) % n;
}

static void die(const char *what, const gb_err *e)
{
    fprintf(stderr, "accounting_bench: %s: %s\n", what, e->msg);
    exit(1);
}

/* users x per_day intervals a day over days before now, batched; and each
 * user's ledger with one set open. Returns the intervals written. */
static long fill(app *a, int users, int per_day, int days, int64_t now)
{
    long n = 0;
    gb_err e = GB_ERR_INIT;
    store_op ops[100];
    char keys[100][STORE_KEY_MAX], *texts[100];
    int k = 0;
    for (int u = 0; u < users; u++) {
        char user[32];
        snprintf(user, sizeof(user), "user%03d", u);
        for (int d = days; d > 0; d--) {
            for (int j = 0; j < per_day; j++) {
                int64_t from = now - (int64_t)d * 86400000 + (int64_t)rnd(86400000);
                int64_t to = from + 60000 + (int64_t)rnd(6 * 3600000);
                if (to >= now - 60000)
                    continue;
                char set[32];
                snprintf(set, sizeof(set), "job%d", j); /* names recur, as sets do */
                int cards = (int)rnd(5);
                int share = cards ? 0 : 1024 * (1 + (int)rnd(40));
                keys_acct(keys[k], STORE_KEY_MAX, "", user, (long long)to, set);
                json_t *jv = json_pack("{s:s, s:s, s:I, s:I, s:i, s:i}", "set", set, "node", "",
                                       "from", (json_int_t)from, "to", (json_int_t)to, "cards",
                                       cards, "shareMiB", share);
                if (share)
                    json_object_set_new(jv, "shareCards", json_real(share / 81920.0));
                texts[k] = json_dumps(jv, JSON_COMPACT);
                json_decref(jv);
                ops[k] = (store_op){.kind = STORE_OP_PUT, .key = keys[k], .value = texts[k]};
                n++;
                if (++k == 100) {
                    bool ok = false;
                    if (store_txn(a->store, NULL, 0, ops, (size_t)k, &ok, NULL, &e) < 0)
                        die("writing intervals", &e);
                    for (int i = 0; i < k; i++)
                        free(texts[i]);
                    k = 0;
                }
            }
        }
        char lkey[STORE_KEY_MAX], ledger[256];
        keys_ledger(lkey, sizeof(lkey), "", user);
        snprintf(ledger, sizeof(ledger),
                 "{\"sets\": {\"open\": {\"node\": \"\", \"cards\": 1, \"shareMiB\": 0, "
                 "\"since\": %lld}}, \"volumes\": {}}",
                 (long long)(now - 7200000));
        if (store_put(a->store, lkey, ledger, NULL, &e) < 0)
            die("writing a ledger", &e);
    }
    if (k) {
        bool ok = false;
        if (store_txn(a->store, NULL, 0, ops, (size_t)k, &ok, NULL, &e) < 0)
            die("writing intervals", &e);
        for (int i = 0; i < k; i++)
            free(texts[i]);
    }
    return n;
}

enum call { CALL_USAGE_ALL, CALL_USAGE_DAY, CALL_METRICS, CALL_FAIRSHARE, CALLS };
static const char *call_names[CALLS] = {"usage, all users, from the beginning",
                                        "usage, one user, last 24 hours", "/metrics (per user)",
                                        "fair share, one user"};

static void one_call(app *a, enum call c, int i, int users)
{
    gb_err e = GB_ERR_INIT;
    json_t *out = NULL;
    char user[32];
    snprintf(user, sizeof(user), "user%03d", i % users);
    int64_t now = users_ledger_now_ms();
    int rc = 0;
    double fs = 0;
    switch (c) {
    case CALL_USAGE_ALL:
        rc = users_api_usage(a, NULL, NULL, 0, 0, &out, &e);
        break;
    case CALL_USAGE_DAY:
        rc = users_api_usage(a, user, NULL, now - 86400000LL, 0, &out, &e);
        break;
    case CALL_METRICS:
        rc = users_metrics_usage(a, &out, &e);
        break;
    case CALL_FAIRSHARE:
        rc = users_fairshare_usage(a, user, 7 * 86400.0, (double)now / 1000.0, &fs, &e);
        break;
    default:
        break;
    }
    if (rc < 0)
        die(call_names[c], &e);
    json_decref(out);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The median ms of c over about seconds (at least 3 calls). */
static double time_call(app *a, enum call c, double seconds, int users)
{
    double t[10000];
    int n = 0;
    double end = now_s() + seconds;
    while (n < 10000 && (n < 3 || now_s() < end)) {
        double t0 = now_s();
        one_call(a, c, n, users);
        t[n++] = (now_s() - t0) * 1000.0;
    }
    qsort(t, (size_t)n, sizeof(t[0]), cmp_double);
    return t[n / 2];
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: accounting_bench DIR [--users N] [--per-day K] [--seconds S]\n");
        return 2;
    }
    int users = 50, per_day = 8;
    double seconds = 2;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--users"))
            users = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--per-day"))
            per_day = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
    }
    const int days[] = {1, 365};
    app apps[3] = {0};
    long counts[3];
    double fold_s[3] = {0};
    int64_t now = users_ledger_now_ms();
    for (int s = 0; s < 3; s++) {
        char url[1024];
        snprintf(url, sizeof(url), "sqlite://%s/acct%d.db", argv[1], s);
        gb_err e = GB_ERR_INIT;
        if (store_open(url, &apps[s].store, &e) < 0)
            die("opening the store", &e);
        rnd_state = 12345;
        double t0 = now_s();
        counts[s] = fill(&apps[s], users, per_day, days[s ? 1 : 0], now);
        fprintf(stderr, "accounting_bench: %s: %ld intervals written in %.1f s\n",
                s == 0   ? "a day"
                : s == 1 ? "a year"
                         : "a year (not folded)",
                counts[s], now_s() - t0);
        if (s < 2) { /* as gpuboxd's folds keep it; default retention: nothing deleted */
            t0 = now_s();
            if (users_rollup_fold_all(&apps[s], users_ledger_now_ms(), 0,
                                      USERS_RETENTION_DEFAULT_S * 1000, 7 * 86400.0, &e) < 0)
                die("folding", &e);
            fold_s[s] = now_s() - t0;
        }
    }
    printf("accounting: %d users, about %d intervals per user per day, SQLite; median ms per "
           "call\n",
           users, per_day);
    printf("%-38s %12s %12s %8s %14s\n", "call", "a day", "a year", "ratio", "year unfolded");
    for (int c = 0; c < CALLS; c++) {
        double t[3];
        for (int s = 0; s < 3; s++)
            t[s] = time_call(&apps[s], (enum call)c, seconds, users);
        printf("%-38s %12.2f %12.2f %7.2fx %14.2f\n", call_names[c], t[0], t[1], t[1] / t[0], t[2]);
    }
    printf("intervals: %ld (a day), %ld (a year); first fold of the year: %.1f s\n", counts[0],
           counts[1], fold_s[1]);
    printf("target: a year within about 1x of a day (same calls, same run)\n");
    for (int s = 0; s < 3; s++)
        store_close(apps[s].store);
    return 0;
}
