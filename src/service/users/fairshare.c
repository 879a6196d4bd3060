/*
 * fairshare.c - a user's fair-share usage (users.h): what they held, as
 * cards, with the past weighted down by a half-life.
 *
 * A set that held c cards-worth (whole cards, plus each share of M MiB on
 * a card of T MiB as M/T) from f to t adds
 *
 *   c * integral over [f, t] of 2^(-(now - x) / H) dx
 *     = c * (H / ln 2) * 2^(-(now - t) / H) * (1 - 2^(-(t - f) / H))
 *
 * (users_decay_integral), computed with expm1 so that a short interval
 * long ago loses no precision. Intervals still open count up to now; what
 * a name's earlier user held, before the present user was made, is not
 * theirs (users_created_ms).
 *
 * What lies before the rollup's `through` (rollup.c) comes from its state:
 * the decayed sum its folds kept for this half-life, exact, decayed on to
 * now; for another half-life (or a name reused) from its day records,
 * each hour's usage spread evenly over the hour, within a relative
 * 2^(3600 / H) - 1 of the exact value (0.41% for 7 days). What lies after
 * it comes from the intervals, exact.
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "util/cleanup.h"

double users_decay_integral(double f, double t, double now, double half_life_s)
{
    if (t > now)
        t = now;
    if (!(t > f))
        return 0;
    if (isinf(half_life_s))
        return t - f;
    double k = M_LN2 / half_life_s;
    return exp(-k * (now - t)) * -expm1(-k * (t - f)) / k;
}

double users_share_card_mib_guess(const app *a)
{
    uint64_t best = 0;
    for (size_t i = 0; i < a->gpus.n; i++)
        if (!a->gpus.devices[i].is_mig && a->gpus.devices[i].memory_mib > best)
            best = a->gpus.devices[i].memory_mib;
    return (double)best;
}

double users_interval_cards(const json_t *j, double card_mib_guess)
{
    double cards = (double)json_integer_value(json_object_get(j, "cards"));
    json_t *sc = json_object_get(j, "shareCards");
    int64_t share = json_integer_value(json_object_get(j, "shareMiB"));
    if (json_is_number(sc))
        cards += json_number_value(sc);
    else if (share > 0 && card_mib_guess > 0) /* written before shareCards, or card unknown */
        cards += (double)share / card_mib_guess;
    return cards;
}

struct fairshare_detail {
    double sum, now, half_life;
    int64_t since; /* cut every interval here */
};

static void fairshare_interval(void *ctx, const char *owner, const users_interval *iv)
{
    (void)owner;
    struct fairshare_detail *d = ctx;
    int64_t f = iv->from > d->since ? iv->from : d->since;
    d->sum +=
        ((double)iv->cards + iv->share_cards) *
        users_decay_integral((double)f / 1000.0, (double)iv->to / 1000.0, d->now, d->half_life);
}

int users_fairshare_usage(app *a, const char *user, double half_life_s, double now,
                          double *out_card_seconds, gb_err *err)
{
    *out_card_seconds = 0;
    if (!(half_life_s > 0))
        return err_set(err, ERR_INVALID_PARAMS,
                       "the fair-share half-life must be a positive number of seconds, not %g",
                       half_life_s);
    if (a->users) { /* the rollup keeps the decayed sum for this half-life from now on */
        pthread_mutex_lock(&a->users->mu);
        a->users->fairshare_half_life_s = half_life_s;
        pthread_mutex_unlock(&a->users->mu);
    }
    int64_t born = users_created_ms(a->users, user), now_ms = (int64_t)(now * 1000.0);
    users_rollup r;
    if (users_rollup_read(a, user, &r, err) < 0)
        return -1;
    double rolled = 0;
    int rc = 0;
    if (r.first && r.through > born) {
        /* Exact: the sum the folds kept, decayed on to now. Else the
         * days, each hour spread evenly (rollup.c). */
        if (r.half_life == half_life_s && born <= r.first && now_ms >= r.through)
            rolled = r.decayed * exp2(-(now - (double)r.through / 1000.0) / half_life_s);
        else
            rc = users_rollup_decayed(a, user, born > r.first ? born : r.first, r.through,
                                      half_life_s, now, &rolled, err);
    }
    struct fairshare_detail d = {
        .now = now, .half_life = half_life_s, .since = born > r.through ? born : r.through};
    if (rc == 0)
        rc = users_intervals_since(a, user, d.since, now_ms, NULL, fairshare_interval, &d, err);
    users_rollup_free(&r);
    if (rc < 0)
        return err_prefix(err, "the fair-share usage of %s", user);
    *out_card_seconds = rolled + d.sum;
    return 0;
}
