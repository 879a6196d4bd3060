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
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <math.h>
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

int users_fairshare_usage(app *a, const char *user, double half_life_s, double now,
                          double *out_card_seconds, gb_err *err)
{
    *out_card_seconds = 0;
    if (!(half_life_s > 0))
        return err_set(err, ERR_INVALID_PARAMS,
                       "the fair-share half-life must be a positive number of seconds, not %g",
                       half_life_s);
    double guess = users_share_card_mib_guess(a);
    double born = (double)users_created_ms(a->users, user) / 1000.0;
    double sum = 0;
    for (int open = 0; open < 2; open++) {
        char key[STORE_KEY_MAX];
        if (open)
            keys_ledger(key, sizeof(key), users_up(a), user);
        else
            keys_acct_prefix(key, sizeof(key), users_up(a), user);
        store_kvs kvs = {0};
        if (store_range(a->store, key, &kvs, err) < 0)
            return err_prefix(err, "reading the accounting of %s", user);
        for (size_t i = 0; i < kvs.n; i++) {
            char owner[USER_NAME_MAX + 1];
            if (!keys_account_owner(kvs.items[i].key, owner, sizeof(owner)) ||
                strcmp(owner, user) != 0)
                continue; /* ledger/al when asked for ledger/a */
            _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
            if (!open) {
                double f = (double)json_integer_value(json_object_get(j, "from")) / 1000.0;
                double t = (double)json_integer_value(json_object_get(j, "to")) / 1000.0;
                sum += users_interval_cards(j, guess) *
                       users_decay_integral(f > born ? f : born, t, now, half_life_s);
                continue;
            }
            const char *k;
            json_t *e;
            json_object_foreach(json_object_get(j, "sets"), k, e)
            {
                if (json_is_true(json_object_get(e, "reserved")))
                    continue; /* held by no record yet */
                double f = (double)json_integer_value(json_object_get(e, "since")) / 1000.0;
                sum += users_interval_cards(e, guess) *
                       users_decay_integral(f > born ? f : born, now, now, half_life_s);
            }
        }
        store_kvs_free(&kvs);
    }
    *out_card_seconds = sum;
    return 0;
}
