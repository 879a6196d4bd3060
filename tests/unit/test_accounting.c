/*
 * test_accounting.c - accounting over the store (service/users/usage.c,
 * fairshare.c): the decay's closed form against a numeric integral, and a
 * user's fair-share usage from closed intervals and open ledger entries,
 * shares counted as parts of cards.
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
#include "store_test_util.h"

#define NOW_MS 1700000000000LL
#define NOW_S (NOW_MS / 1000.0)
#define DAY_S 86400.0

struct fixture {
    char *dir;
    app a;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    f->dir = store_test_mkdtemp();
    char url[512];
    snprintf(url, sizeof(url), "sqlite://%s/state.db", f->dir);
    gb_err e = GB_ERR_INIT;
    if (!f->dir || store_open(url, &f->a.store, &e) < 0)
        return -1;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay_closed_form),
        cmocka_unit_test_setup_teardown(test_fairshare_from_intervals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fairshare_share_without_card_fraction, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("accounting", tests, NULL, NULL);
}
