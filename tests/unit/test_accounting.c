/*
 * test_accounting.c - accounting over the store (service/users/usage.c,
 * fairshare.c, rollup.c): the decay's closed form against a numeric
 * integral; a user's fair-share usage from closed intervals and open
 * ledger entries, shares counted as parts of cards; and the rollup: after
 * folds (in one go, in steps, with an interval closing between them) and
 * pruning, usage and fair share answer as the intervals say, on every
 * store backend (sqlite, etcd).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/users/users_internal.h"
#include "etcd_test_util.h"
#include "store_test_util.h"

#define NOW_MS 1700000000000LL
#define NOW_S (NOW_MS / 1000.0)
#define DAY_S 86400.0

struct backend {
    const char *name;
    int (*group_setup)(void **state);
    int (*group_teardown)(void **state);
};

static const struct backend backends[] = {
    {"sqlite", NULL, NULL},
    {"etcd", etcd_test_group_setup, etcd_test_group_teardown},
};

struct fixture {
    char *dir;
    app a;
};

/* *state comes in as the backend (NULL: sqlite) and goes out as the fixture. */
static int setup(void **state)
{
    static int tests;
    const struct backend *b = *state;
    struct fixture *f = calloc(1, sizeof(*f));
    f->dir = store_test_mkdtemp();
    char url[512];
    if (b && strcmp(b->name, "etcd") == 0)
        snprintf(url, sizeof(url), "etcd://%s/acct-%d", etcd_test_shared.endpoint, ++tests);
    else
        snprintf(url, sizeof(url), "sqlite://%s/state.db", f->dir);
    gb_err e = GB_ERR_INIT;
    if (!f->dir || store_open(url, &f->a.store, &e) < 0) {
        print_error("cannot open %s: %s\n", url, e.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(f->a.store);
    store_test_rmdir(f->dir);
    free(f);
    return 0;
}

/* A closed interval of owner's set from..to (ms). */
static void put_interval(app *a, const char *owner, const char *set, int64_t from, int64_t to,
                         int cards, int share_mib, double share_cards)
{
    char key[STORE_KEY_MAX];
    keys_acct(key, sizeof(key), users_up(a), owner, (long long)to, set);
    json_t *j =
        json_pack("{s:s, s:s, s:I, s:I, s:i, s:i}", "set", set, "node", "", "from",
                  (json_int_t)from, "to", (json_int_t)to, "cards", cards, "shareMiB", share_mib);
    if (share_cards > 0)
        json_object_set_new(j, "shareCards", json_real(share_cards));
    char *text = json_dumps(j, JSON_COMPACT);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_put(a->store, key, text, NULL, &e), 0);
    free(text);
    json_decref(j);
}

/* owner's ledger, as its JSON text. */
static void put_ledger(app *a, const char *owner, const char *text)
{
    char key[STORE_KEY_MAX];
    keys_ledger(key, sizeof(key), users_up(a), owner);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_put(a->store, key, text, NULL, &e), 0);
}

/* The integral by the midpoint rule, to check the closed form against. */
static double numeric(double f, double t, double now, double h)
{
    const int n = 200000;
    double step = (t - f) / n, sum = 0;
    for (int i = 0; i < n; i++)
        sum += pow(2.0, -(now - (f + (i + 0.5) * step)) / h);
    return sum * step;
}

static void test_decay_closed_form(void **state)
{
    (void)state;
    const double h = 7 * DAY_S;
    /* No decay: the interval's length. */
    assert_float_equal(users_decay_integral(100, 400, 1000, INFINITY), 300, 1e-9);
    /* One half-life ending now: H / ln 2 * (1 - 1/2). */
    assert_float_equal(users_decay_integral(NOW_S - h, NOW_S, NOW_S, h), h / M_LN2 / 2, 1e-6);
    /* Cut at now, nothing after it, nothing for an empty interval. */
    assert_float_equal(users_decay_integral(NOW_S - 10, NOW_S + 50, NOW_S, h),
                       users_decay_integral(NOW_S - 10, NOW_S, NOW_S, h), 1e-9);
    assert_float_equal(users_decay_integral(NOW_S + 1, NOW_S + 9, NOW_S, h), 0, 0);
    assert_float_equal(users_decay_integral(50, 50, NOW_S, h), 0, 0);
    /* Against the numeric integral, short and long, recent and old. */
    const double cases[][2] = {
        {-3600, 0}, {-30 * DAY_S, -20 * DAY_S}, {-400 * DAY_S, -1}, {-2 * DAY_S, -2 * DAY_S + 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double f = NOW_S + cases[i][0], t = NOW_S + cases[i][1];
        double want = numeric(f, t, NOW_S, h);
        assert_true(fabs(users_decay_integral(f, t, NOW_S, h) - want) <= 1e-6 * want + 1e-9);
    }
}

static void test_fairshare_from_intervals(void **state)
{
    struct fixture *f = *state;
    app *a = &f->a;
    const double h = 7 * DAY_S;
    const int64_t day = 86400000;
    /* 2 cards for a day a week ago; a half-card share for an hour. */
    put_interval(a, "ann", "train", NOW_MS - 8 * day, NOW_MS - 7 * day, 2, 0, 0);
    put_interval(a, "ann", "nb", NOW_MS - 3600000, NOW_MS - 1800000, 0, 40960, 0.5);
    /* Another user, and one whose name begins with ann's: not counted. */
    put_interval(a, "bob", "x", NOW_MS - day, NOW_MS, 8, 0, 0);
    put_interval(a, "anna", "x", NOW_MS - day, NOW_MS, 8, 0, 0);
    /* Open since 10 minutes ago with one card; a reservation holds nothing. */
    char ledger[256];
    snprintf(ledger, sizeof(ledger),
             "{\"sets\": {\"run\": {\"node\": \"\", \"cards\": 1, \"shareMiB\": 0, \"since\": "
             "%lld}, \"r\": {\"node\": \"\", \"cards\": 4, \"shareMiB\": 0, \"since\": %lld, "
             "\"reserved\": true}}}",
             NOW_MS - 600000, NOW_MS - 600000);
    put_ledger(a, "ann", ledger);
    put_ledger(a, "anna", ledger);

    double want = 2 * users_decay_integral(NOW_S - 8 * DAY_S, NOW_S - 7 * DAY_S, NOW_S, h) +
                  0.5 * users_decay_integral(NOW_S - 3600, NOW_S - 1800, NOW_S, h) +
                  1 * users_decay_integral(NOW_S - 600, NOW_S, NOW_S, h);
    double got = -1;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(users_fairshare_usage(a, "ann", h, NOW_S, &got, &e), 0);
    assert_float_equal(got, want, 1e-6 * want);
    /* The day a week ago counts about half of 2 cards x 1 day. */
    assert_true(got > 2 * DAY_S * 0.45 && got < 2 * DAY_S * 0.6 + 3000);

    /* No decay: plain card-seconds. */
    assert_int_equal(users_fairshare_usage(a, "ann", INFINITY, NOW_S, &got, &e), 0);
    assert_float_equal(got, 2 * DAY_S + 0.5 * 1800 + 600, 1e-6);

    /* Nobody: zero; a half-life that is not positive: refused. */
    assert_int_equal(users_fairshare_usage(a, "carl", h, NOW_S, &got, &e), 0);
    assert_float_equal(got, 0, 0);
    assert_int_equal(users_fairshare_usage(a, "ann", 0, NOW_S, &got, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

/* A share written before shareCards: valued against this node's largest card. */
static void test_fairshare_share_without_card_fraction(void **state)
{
    struct fixture *f = *state;
    app *a = &f->a;
    gpu_device devs[2] = {{.memory_mib = 40960}, {.memory_mib = 81920}};
    a->gpus.devices = devs;
    a->gpus.n = 2;
    put_interval(a, "dee", "nb", NOW_MS - 1000000, NOW_MS, 0, 20480, 0);
    double got = -1;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(users_fairshare_usage(a, "dee", INFINITY, NOW_S, &got, &e), 0);
    assert_float_equal(got, 1000 * 0.25, 1e-6);
    a->gpus.devices = NULL;
    a->gpus.n = 0;
}

/* ---- the rollup against the intervals ------------------------------------- */

#define HOUR_MS 3600000LL
#define DAYMS 86400000LL
#define MAXIV 4096

struct iv {
    char user[8], set[8];
    int64_t from, to; /* to = 0: open */
    int cards, share_mib;
    double share_cards;
};

static struct iv ivs[MAXIV];
static size_t niv;
static uint64_t rnd_state;

static uint64_t rnd(uint64_t n)
{
    rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rnd_state >> 33) % n;
}

static const char *users3[] = {"ann", "bob", "cy"};

/* owner's ledger from the open intervals. */
static void write_ledger(app *a, const char *user)
{
    json_t *sets = json_object();
    for (size_t i = 0; i < niv; i++) {
        if (ivs[i].to || strcmp(ivs[i].user, user) != 0)
            continue;
        json_t *e = json_pack("{s:s, s:i, s:i, s:I}", "node", "n1", "cards", ivs[i].cards,
                              "shareMiB", ivs[i].share_mib, "since", (json_int_t)ivs[i].from);
        if (ivs[i].share_cards > 0)
            json_object_set_new(e, "shareCards", json_real(ivs[i].share_cards));
        json_object_set_new(sets, ivs[i].set, e);
    }
    json_t *l = json_pack("{s:o, s:{}}", "sets", sets, "volumes");
    char *text = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS);
    put_ledger(a, user, text);
    free(text);
    json_decref(l);
}

static void put_closed(app *a, const struct iv *v)
{
    char key[STORE_KEY_MAX];
    keys_acct(key, sizeof(key), users_up(a), v->user, (long long)v->to, v->set);
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:i, s:i}", "set", v->set, "node", "n1", "from",
                          (json_int_t)v->from, "to", (json_int_t)v->to, "cards", v->cards,
                          "shareMiB", v->share_mib);
    if (v->share_cards > 0)
        json_object_set_new(j, "shareCards", json_real(v->share_cards));
    char *text = json_dumps(j, JSON_COMPACT);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_put(a->store, key, text, NULL, &e), 0);
    free(text);
    json_decref(j);
}

/* Sets s0..s4 of each user, one interval after another over span_days
 * before now, each set's last one left open for ann. */
static void generate(app *a, int64_t now, int span_days, uint64_t seed)
{
    niv = 0;
    rnd_state = seed;
    for (size_t u = 0; u < 3; u++) {
        for (int s = 0; s < 5; s++) {
            int64_t t = now - (int64_t)span_days * DAYMS + (int64_t)rnd(DAYMS);
            while (niv < MAXIV - 1) {
                struct iv *v = &ivs[niv];
                snprintf(v->user, sizeof(v->user), "%s", users3[u]);
                snprintf(v->set, sizeof(v->set), "s%d", s);
                v->from = t + (int64_t)rnd(30 * HOUR_MS);
                v->to = v->from + 60000 + (int64_t)rnd(50 * HOUR_MS);
                v->cards = (int)rnd(4);
                v->share_mib = v->cards ? 0 : 1000 + (int)rnd(40000);
                v->share_cards = v->cards ? 0 : v->share_mib / 81920.0;
                if (v->to >= now - HOUR_MS) {
                    if (u == 0) { /* open */
                        v->to = 0;
                        if (v->from >= now)
                            v->from = now - HOUR_MS;
                        niv++;
                    }
                    break;
                }
                put_closed(a, v);
                t = v->to;
                niv++;
            }
        }
        write_ledger(a, users3[u]);
    }
}

/* The reference, from the list: card-seconds and MiB-seconds of user
 * (and set, NULL: all) over [from, to], open intervals running to now. */
static void ref_usage(const char *user, const char *set, int64_t from, int64_t to, int64_t now,
                      double *card_s, double *mib_s)
{
    *card_s = *mib_s = 0;
    for (size_t i = 0; i < niv; i++) {
        const struct iv *v = &ivs[i];
        if (strcmp(v->user, user) != 0 || (set && strcmp(v->set, set) != 0))
            continue;
        int64_t t = v->to ? v->to : now;
        int64_t lo = v->from > from ? v->from : from, hi = t < to ? t : to;
        if (hi > lo) {
            *card_s += (double)(hi - lo) / 1000.0 * v->cards;
            *mib_s += (double)(hi - lo) / 1000.0 * v->share_mib;
        }
    }
}

static double ref_fair(const char *user, double h, int64_t now)
{
    double sum = 0;
    for (size_t i = 0; i < niv; i++) {
        const struct iv *v = &ivs[i];
        if (strcmp(v->user, user) == 0)
            sum += (v->cards + v->share_cards) *
                   users_decay_integral(v->from / 1000.0, (v->to ? v->to : now) / 1000.0,
                                        now / 1000.0, h);
    }
    return sum;
}

/* The usage answer's numbers for user (and one set). */
static void got_usage(app *a, const char *user, const char *set, int64_t from, int64_t to,
                      int64_t now, double *card_s, double *mib_s)
{
    json_t *users = json_object();
    gb_err e = GB_ERR_INIT;
    if (users_usage_collect(a, user, set, from, to, now, users, &e) < 0)
        fail_msg("usage of %s: %s", user, e.msg);
    json_t *u = json_object_get(users, user);
    *card_s = json_number_value(json_object_get(u, "cardSeconds"));
    *mib_s = json_number_value(json_object_get(u, "shareMiBSeconds"));
    json_decref(users);
}

static void expect_usage(app *a, const char *user, const char *set, int64_t from, int64_t to,
                         int64_t now, double tol_card, double tol_mib)
{
    double rc, rm, gc, gm;
    ref_usage(user, set, from, to, now, &rc, &rm);
    got_usage(a, user, set, from, to, now, &gc, &gm);
    if (fabs(gc - rc) > tol_card + 1e-9 * rc || fabs(gm - rm) > tol_mib + 1e-9 * rm)
        fail_msg("%s/%s [%lld, %lld]: card-s %f (want %f +- %f), MiB-s %f (want %f +- %f)", user,
                 set ? set : "*", (long long)from, (long long)to, gc, rc, tol_card, gm, rm,
                 tol_mib);
}

/* The usage answers against the reference: whole hours and the whole
 * history exactly (to a millisecond of a card's worth), a window that
 * cuts folded hours within what those two hours held. */
static void check_answers(app *a, int64_t now, int64_t through)
{
    const int64_t now_h = now / HOUR_MS * HOUR_MS;
    for (size_t u = 0; u < 3; u++) {
        const char *user = users3[u];
        expect_usage(a, user, NULL, 0, now, now, 1e-3, 1e-3 * 65536);
        expect_usage(a, user, "s3", 0, now, now, 1e-3, 1e-3 * 65536);
        expect_usage(a, user, NULL, now_h - 20 * DAYMS, now_h - 5 * DAYMS, now, 1e-3, 1e-3 * 65536);
        expect_usage(a, user, NULL, now_h - 2 * DAYMS, now, now, 1e-3, 1e-3 * 65536);
        /* Cut inside hours: off by at most what the edge hours held. */
        int64_t from = now - 20 * DAYMS - 1234567, to = now - 5 * DAYMS + 777;
        double ec, em, c2, m2;
        int64_t fh = from / HOUR_MS * HOUR_MS, th = to / HOUR_MS * HOUR_MS;
        ref_usage(user, NULL, fh, fh + HOUR_MS, now, &ec, &em);
        ref_usage(user, NULL, th, th + HOUR_MS, now, &c2, &m2);
        if (to >= through) /* that edge is read in detail */
            c2 = m2 = 0;
        expect_usage(a, user, NULL, from, to, now, ec + c2 + 1e-3, em + m2 + 1);
    }
}

static void check_fair(app *a, int64_t now, double exact_h)
{
    gb_err e = GB_ERR_INIT;
    for (size_t u = 0; u < 3; u++) {
        double got = 0, want = ref_fair(users3[u], exact_h, now);
        assert_int_equal(users_fairshare_usage(a, users3[u], exact_h, now / 1000.0, &got, &e), 0);
        if (fabs(got - want) > 1e-6 * want + 1e-6)
            fail_msg("fair share of %s (H %g): %f, want %f", users3[u], exact_h, got, want);
        /* Another half-life: from the days, each hour spread evenly. */
        const double h = DAY_S;
        want = ref_fair(users3[u], h, now);
        assert_int_equal(users_fairshare_usage(a, users3[u], h, now / 1000.0, &got, &e), 0);
        if (fabs(got - want) > (exp2(3600 / h) - 1) * want + 1e-6)
            fail_msg("fair share of %s (H %g): %f, want %f", users3[u], h, got, want);
    }
}

static size_t count_intervals(app *a, const char *user)
{
    char prefix[STORE_KEY_MAX];
    keys_acct_prefix(prefix, sizeof(prefix), users_up(a), user);
    store_kvs kvs = {0};
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_range(a->store, prefix, &kvs, &e), 0);
    size_t n = kvs.n;
    store_kvs_free(&kvs);
    return n;
}

static void fold_ok(app *a, int64_t now, int64_t retention_ms, double h)
{
    gb_err e = GB_ERR_INIT;
    if (users_rollup_fold_all(a, now, 0, retention_ms, h, &e) < 0)
        fail_msg("fold: %s", e.msg);
}

/* 100 days of intervals folded at once (several transactions), then
 * pruned to nothing: the answers stay those of the intervals. */
static void test_rollup_matches_intervals(void **state)
{
    struct fixture *f = *state;
    app *a = &f->a;
    const double h = 7 * DAY_S;
    int64_t now = 1790000000000LL + 1234;
    generate(a, now, 100, 42);
    check_answers(a, now, 0); /* nothing folded: all in detail */
    check_fair(a, now, h);

    fold_ok(a, now, 400 * DAYMS, h);
    users_rollup r;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(users_rollup_read(a, "ann", &r, &e), 0);
    assert_int_equal(r.through, now);
    assert_true(r.first > 0 && r.first < now - 90 * DAYMS);
    users_rollup_free(&r);
    check_answers(a, now, now);
    check_fair(a, now, h);

    /* A tiny retention deletes every interval that ended before now; the
     * answers do not change. */
    size_t before = count_intervals(a, "bob");
    assert_true(before > 20);
    fold_ok(a, now, 1, h);
    assert_int_equal(count_intervals(a, "bob"), 0);
    check_answers(a, now, now);
    check_fair(a, now, h);
    /* Later, open intervals go on counting. */
    int64_t later = now + 5 * HOUR_MS + 999;
    check_answers(a, later, now);
    check_fair(a, later, h);
}

/* Folds in steps, and an open interval that closes between two folds:
 * half of it is in the rollup, half read in detail, counted once. */
static void test_rollup_in_steps(void **state)
{
    struct fixture *f = *state;
    app *a = &f->a;
    const double h = 7 * DAY_S;
    int64_t now = 1790000000000LL + 777;
    generate(a, now, 60, 7);
    /* ann's s0 is open since 12 days ago (held beside its older intervals). */
    struct iv *open = NULL;
    for (size_t i = 0; i < niv; i++)
        if (!ivs[i].to && strcmp(ivs[i].user, "ann") == 0 && strcmp(ivs[i].set, "s0") == 0)
            open = &ivs[i];
    assert_non_null(open);
    open->from = now - 12 * DAYMS;
    write_ledger(a, "ann");
    fold_ok(a, now - 40 * DAYMS, 400 * DAYMS, h);
    fold_ok(a, now - 10 * DAYMS + 12345, 400 * DAYMS, h);
    check_answers(a, now, now - 10 * DAYMS + 12345);
    check_fair(a, now, h);
    /* It closes 5 days ago, after that fold. */
    open->to = now - 5 * DAYMS;
    put_closed(a, open);
    write_ledger(a, "ann");
    check_answers(a, now, now - 10 * DAYMS + 12345);
    check_fair(a, now, h);
    fold_ok(a, now, 400 * DAYMS, h);
    check_answers(a, now, now);
    check_fair(a, now, h);
}

int main(void)
{
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_decay_closed_form),
        cmocka_unit_test_setup_teardown(test_fairshare_from_intervals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fairshare_share_without_card_fraction, setup,
                                        teardown),
    };
    int failed = cmocka_run_group_tests_name("accounting", plain, NULL, NULL);
    const struct CMUnitTest on_backend[] = {
        cmocka_unit_test_setup_teardown(test_rollup_matches_intervals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollup_in_steps, setup, teardown),
    };
    for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
        struct CMUnitTest tests[sizeof(on_backend) / sizeof(on_backend[0])];
        memcpy(tests, on_backend, sizeof(tests));
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            tests[i].initial_state = (void *)&backends[b];
        failed += _cmocka_run_group_tests(backends[b].name, tests, sizeof(tests) / sizeof(tests[0]),
                                          backends[b].group_setup, backends[b].group_teardown);
    }
    return failed;
}
