/*
 * rollup.c - accounting that stays small (docs/users.md, "Accounting"):
 * per owner, the usage of every hour folded into one record per UTC day,
 * so that usage queries, /metrics and fair share read a few records and
 * the intervals of the last minutes, however long gpubox has run.
 *
 * The rollup covers time, not intervals: everything owner held before
 * `through` (closed intervals and the part of open ones up to it) is in
 * the rollup; everything after it is read in detail, from the intervals
 * whose end is at or after `through` (acct/ keys sort by their end) and
 * the open entries of the ledger, each cut at `through`. So an interval
 * may be half in the rollup and half in detail, and nothing is counted
 * twice or lost.
 *
 *   acctsum/<owner>        {"through": ms, "first": ms (the earliest moment
 *                           of folded usage, 0: none), "sets": {"<set>@<node>":
 *                           {name, node, cardSeconds, shareMiBSeconds,
 *                           shareCardSeconds}} (the totals before through),
 *                           "halfLife": s, "decayed": card-seconds decayed
 *                           to through with that half-life}
 *   acctday/<owner>/<day>  {"sets": {"<set>@<node>": {name, node, "h":
 *                           {"<hour 0-23>": [cardSeconds, shareMiBSeconds,
 *                           shareCardSeconds]}}}}
 *
 * A fold (users_rollup_fold) reads the state, the ledger and the intervals
 * since `through`, adds their part up to now into the day records, and
 * writes the days and the state in one transaction that compares the
 * state's and the ledger's revisions: an interval that closes meanwhile
 * (it moves from the ledger to acct/ in one transaction) makes the fold
 * start again, and of two nodes folding at once one wins. A long gap
 * (the first fold of a store with years of intervals) is folded
 * USERS_ROLLUP_FOLD_DAYS days per transaction, fewer when the records
 * would not fit one. Then closed intervals that ended before both
 * `through` and now - retention are deleted: their usage stays in the
 * days and the totals. The day records are kept for good (one per owner
 * per day with usage); the state's totals answer "since the beginning"
 * without reading them.
 *
 * Reading the days, a window that cuts an hour counts the hour's usage as
 * spread evenly over the part of it the rollup covers; so does fair share
 * when it must recompute the decay for another half-life. The state's
 * decayed sum is exact (computed from the intervals as they are folded).
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/log.h"

#define ROLLUP_ATTEMPTS 20
/* Ops a fold's transaction may have: its days, the state, two compares. */
#define ROLLUP_OPS_MAX (STORE_TXN_OPS_MAX - 8)

static int64_t floor_to(int64_t t, int64_t unit)
{
    int64_t q = t / unit;
    if (t % unit < 0)
        q--;
    return q * unit;
}

void users_rollup_free(users_rollup *r)
{
    json_decref(r->sets);
    *r = (users_rollup){0};
}

int users_rollup_read(app *a, const char *owner, users_rollup *r, gb_err *err)
{
    *r = (users_rollup){0};
    char key[STORE_KEY_MAX];
    keys_acct_sum(key, sizeof(key), users_up(a), owner);
    _cleanup_json_ json_t *j = NULL;
    int found = records_get_json(a->store, key, "the accounting rollup", &j, &r->mod_revision, err);
    if (found < 0)
        return -1;
    r->sets = json_object();
    if (!found || !json_is_object(j))
        return 0;
    r->through = json_integer_value(json_object_get(j, "through"));
    r->first = json_integer_value(json_object_get(j, "first"));
    r->half_life = json_number_value(json_object_get(j, "halfLife"));
    r->decayed = json_number_value(json_object_get(j, "decayed"));
    json_t *sets = json_object_get(j, "sets");
    if (json_is_object(sets))
        json_object_update(r->sets, sets);
    return 0;
}

static json_t *rollup_state_json(const users_rollup *r)
{
    return json_pack("{s:I, s:I, s:O, s:f, s:f}", "through", (json_int_t)r->through, "first",
                     (json_int_t)r->first, "sets", r->sets, "halfLife", r->half_life, "decayed",
                     r->decayed);
}

/* ---- intervals in detail ------------------------------------------------ */

int users_intervals_since(app *a, const char *owner, int64_t since, int64_t now,
                          int64_t *ledger_rev, users_interval_fn fn, void *ctx, gb_err *err)
{
    double guess = users_share_card_mib_guess(a);
    /* The ledger first: an interval that closes after this read changes
     * its revision, which a fold compares. */
    _cleanup_json_ json_t *lj = NULL;
    int64_t lrev = 0;
    if (users_ledger_read(a, owner, &lj, &lrev, err) < 0)
        return -1;
    if (ledger_rev)
        *ledger_rev = lrev;
    char prefix[STORE_KEY_MAX], start[STORE_KEY_MAX];
    keys_acct_prefix(prefix, sizeof(prefix), users_up(a), owner);
    keys_acct(start, sizeof(start), users_up(a), owner, (long long)(since > 0 ? since : 0), "");
    store_kvs kvs = {0};
    if (store_range_between(a->store, prefix, since > 0 ? start : NULL, NULL, &kvs, err) < 0)
        return err_prefix(err, "reading the accounting of %s", owner);
    for (size_t i = 0; i < kvs.n; i++) {
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        if (!j)
            continue;
        users_interval iv = {
            .set = json_string_value(json_object_get(j, "set")) ?: "",
            .node = json_string_value(json_object_get(j, "node")) ?: "",
            .from = json_integer_value(json_object_get(j, "from")),
            .to = json_integer_value(json_object_get(j, "to")),
            .cards = json_integer_value(json_object_get(j, "cards")),
            .share_mib = json_integer_value(json_object_get(j, "shareMiB")),
        };
        iv.share_cards = users_interval_cards(j, guess) - (double)iv.cards;
        if (iv.to > since)
            fn(ctx, owner, &iv);
    }
    store_kvs_free(&kvs);
    const char *k;
    json_t *e;
    json_object_foreach(json_object_get(lj, "sets"), k, e)
    {
        if (json_is_true(json_object_get(e, "reserved")))
            continue; /* held by no record yet */
        users_interval iv = {
            .set = k,
            .node = json_string_value(json_object_get(e, "node")) ?: "",
            .from = json_integer_value(json_object_get(e, "since")),
            .to = now,
            .cards = json_integer_value(json_object_get(e, "cards")),
            .share_mib = json_integer_value(json_object_get(e, "shareMiB")),
            .open = true,
        };
        if (!iv.cards && !iv.share_mib)
            continue;
        iv.share_cards = users_interval_cards(e, guess) - (double)iv.cards;
        if (iv.to > since)
            fn(ctx, owner, &iv);
    }
    return 0;
}

/* ---- reading the days --------------------------------------------------- */

int users_rollup_slots(app *a, const char *owner, int64_t x, int64_t y, int64_t through,
                       users_rollup_slot_fn fn, void *ctx, gb_err *err)
{
    if (y > through)
        y = through;
    if (x >= y)
        return 0;
    char prefix[STORE_KEY_MAX], start[STORE_KEY_MAX], end[STORE_KEY_MAX];
    keys_acct_day(prefix, sizeof(prefix), users_up(a), owner, -1);
    keys_acct_day(start, sizeof(start), users_up(a), owner, floor_to(x, USERS_ROLLUP_DAY_MS));
    keys_acct_day(end, sizeof(end), users_up(a), owner,
                  floor_to(y - 1, USERS_ROLLUP_DAY_MS) + USERS_ROLLUP_DAY_MS);
    store_kvs kvs = {0};
    if (store_range_between(a->store, prefix, start, end, &kvs, err) < 0)
        return err_prefix(err, "reading the accounting rollup of %s", owner);
    for (size_t i = 0; i < kvs.n; i++) {
        const char *slash = strrchr(kvs.items[i].key, '/');
        int64_t day = slash ? strtoll(slash + 1, NULL, 10) : 0;
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        const char *id;
        json_t *s;
        json_object_foreach(json_object_get(j, "sets"), id, s)
        {
            const char *name = json_string_value(json_object_get(s, "name")) ?: "";
            const char *node = json_string_value(json_object_get(s, "node")) ?: "";
            const char *h;
            json_t *v;
            json_object_foreach(json_object_get(s, "h"), h, v)
            {
                int64_t hs = day + strtoll(h, NULL, 10) * USERS_ROLLUP_HOUR_MS;
                int64_t he = hs + USERS_ROLLUP_HOUR_MS;
                if (he > through)
                    he = through; /* the hour is folded up to through only */
                if (he <= x || hs >= y || he <= hs)
                    continue;
                double vals[3];
                for (int n = 0; n < 3; n++)
                    vals[n] = json_number_value(json_array_get(v, (size_t)n));
                fn(ctx, id, name, node, hs, he, x, y, vals);
            }
        }
    }
    store_kvs_free(&kvs);
    return 0;
}

/* What a slot [hs, he) spread evenly gives to [x, y), as a fraction. */
double users_rollup_part(int64_t hs, int64_t he, int64_t x, int64_t y)
{
    int64_t lo = hs > x ? hs : x, hi = he < y ? he : y;
    return hi > lo && he > hs ? (double)(hi - lo) / (double)(he - hs) : 0;
}

struct decay_ctx {
    double sum, now, half_life;
};

static void decay_slot(void *ctx, const char *id, const char *name, const char *node, int64_t hs,
                       int64_t he, int64_t x, int64_t y, const double v[3])
{
    (void)id, (void)name, (void)node;
    struct decay_ctx *d = ctx;
    int64_t lo = hs > x ? hs : x, hi = he < y ? he : y;
    if (hi <= lo)
        return;
    /* The hour's card-seconds spread evenly over [hs, he). */
    double rate = (v[0] + v[2]) / ((double)(he - hs) / 1000.0);
    d->sum +=
        rate * users_decay_integral((double)lo / 1000.0, (double)hi / 1000.0, d->now, d->half_life);
}

int users_rollup_decayed(app *a, const char *owner, int64_t from, int64_t through,
                         double half_life_s, double now, double *out, gb_err *err)
{
    struct decay_ctx d = {.now = now, .half_life = half_life_s};
    /* Older than 64 half-lives weighs less than 2^-64: left out. */
    if (!isinf(half_life_s)) {
        int64_t horizon = (int64_t)((now - 64 * half_life_s) * 1000.0);
        if (horizon > from)
            from = horizon;
    }
    if (users_rollup_slots(a, owner, from, through, through, decay_slot, &d, err) < 0)
        return -1;
    *out = d.sum;
    return 0;
}

/* ---- folding ------------------------------------------------------------ */

struct fold {
    app *a;
    const char *owner;
    users_rollup *r;
    int64_t lo, hi; /* what this step folds: [lo, hi) */
    double half_life;
    json_t *days; /* {"<day ms>": day record}, as read and added to */
    int64_t earliest;
    bool failed;
    gb_err *err;
};

static json_t *fold_day(struct fold *f, int64_t day)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)day);
    json_t *d = json_object_get(f->days, id);
    if (d)
        return d;
    char key[STORE_KEY_MAX];
    keys_acct_day(key, sizeof(key), users_up(f->a), f->owner, (long long)day);
    json_t *j = NULL;
    if (records_get_json(f->a->store, key, "an accounting day", &j, NULL, f->err) < 0)
        f->failed = true;
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    if (!json_is_object(json_object_get(j, "sets")))
        json_object_set_new(j, "sets", json_object());
    json_object_set_new(f->days, id, j);
    return j;
}

/* Add v to the numbers of arr (an array of n numbers, made when absent). */
static void add_to(json_t *o, const char *k, const double *v, size_t n)
{
    json_t *arr = json_object_get(o, k);
    if (!json_is_array(arr)) {
        arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, json_real(0));
        json_object_set_new(o, k, arr);
    }
    for (size_t i = 0; i < n; i++)
        json_array_set_new(arr, i, json_real(json_number_value(json_array_get(arr, i)) + v[i]));
}

static json_t *set_entry(json_t *sets, const char *id, const char *name, const char *node)
{
    json_t *s = json_object_get(sets, id);
    if (!s) {
        s = json_pack("{s:s, s:s}", "name", name, "node", node);
        json_object_set_new(sets, id, s);
    }
    return s;
}

static void fold_interval(void *ctx, const char *owner, const users_interval *iv)
{
    (void)owner;
    struct fold *f = ctx;
    int64_t lo = iv->from > f->lo ? iv->from : f->lo, hi = iv->to < f->hi ? iv->to : f->hi;
    if (hi <= lo || f->failed)
        return;
    char id[NAME_MAX_LEN + 160];
    snprintf(id, sizeof(id), "%s@%s", iv->set, iv->node);
    double cards = (double)iv->cards + iv->share_cards;
    f->r->decayed += cards * users_decay_integral((double)lo / 1000.0, (double)hi / 1000.0,
                                                  (double)f->hi / 1000.0, f->half_life);
    if (!f->earliest || lo < f->earliest)
        f->earliest = lo;
    double total[3] = {0};
    for (int64_t hs = floor_to(lo, USERS_ROLLUP_HOUR_MS); hs < hi; hs += USERS_ROLLUP_HOUR_MS) {
        int64_t a = hs > lo ? hs : lo,
                b = hs + USERS_ROLLUP_HOUR_MS < hi ? hs + USERS_ROLLUP_HOUR_MS : hi;
        double secs = (double)(b - a) / 1000.0;
        double v[3] = {secs * (double)iv->cards, secs * (double)iv->share_mib,
                       secs * iv->share_cards};
        int64_t day = floor_to(hs, USERS_ROLLUP_DAY_MS);
        json_t *d = fold_day(f, day);
        json_t *s = set_entry(json_object_get(d, "sets"), id, iv->set, iv->node);
        json_t *h = json_object_get(s, "h");
        if (!h) {
            h = json_object();
            json_object_set_new(s, "h", h);
        }
        char hour[8];
        snprintf(hour, sizeof(hour), "%d", (int)((hs - day) / USERS_ROLLUP_HOUR_MS));
        add_to(h, hour, v, 3);
        for (int i = 0; i < 3; i++)
            total[i] += v[i];
    }
    json_t *t = set_entry(f->r->sets, id, iv->set, iv->node);
    const char *fields[] = {"cardSeconds", "shareMiBSeconds", "shareCardSeconds"};
    for (int i = 0; i < 3; i++)
        json_object_set_new(t, fields[i],
                            json_real(json_number_value(json_object_get(t, fields[i])) + total[i]));
}

/* The earliest moment of usage not yet folded (open or closed since
 * through), or 0 for none. */
static void earliest_interval(void *ctx, const char *owner, const users_interval *iv)
{
    (void)owner;
    int64_t *e = ctx;
    if (iv->to > iv->from && (!*e || iv->from < *e))
        *e = iv->from;
}

/* Write a fold's day records and the state r in one transaction that
 * compares the state's revision as read and the ledger's (lrev). 1 landed,
 * 0 to try again (a compare failed; or too much for one transaction, and
 * *ndays halved), -1 on error. */
static int fold_write(app *a, const char *owner, const users_rollup *r, json_t *days_json,
                      int64_t lrev, int *ndays, gb_err *err)
{
    size_t n = json_object_size(days_json) + 1, bytes = 0, i = 0;
    _cleanup_free_ store_op *ops = xcalloc(n, sizeof(*ops));
    _cleanup_free_ char *keys = xcalloc(n, STORE_KEY_MAX);
    char **texts = xcalloc(n, sizeof(*texts));
    const char *id;
    json_t *d;
    json_object_foreach(days_json, id, d)
    {
        char *key = keys + i * STORE_KEY_MAX;
        keys_acct_day(key, STORE_KEY_MAX, users_up(a), owner, strtoll(id, NULL, 10));
        texts[i] = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
        ops[i] = (store_op){.kind = STORE_OP_PUT, .key = key, .value = texts[i]};
        bytes += strlen(key) + strlen(texts[i]);
        i++;
    }
    char *skey = keys + i * STORE_KEY_MAX, lkey[STORE_KEY_MAX];
    keys_acct_sum(skey, STORE_KEY_MAX, users_up(a), owner);
    keys_ledger(lkey, sizeof(lkey), users_up(a), owner);
    json_t *sj = rollup_state_json(r);
    texts[i] = json_dumps(sj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(sj);
    ops[i] = (store_op){.kind = STORE_OP_PUT, .key = skey, .value = texts[i]};
    bytes += strlen(skey) + strlen(texts[i]);
    int rc = 1;
    if ((n > ROLLUP_OPS_MAX || bytes > STORE_TXN_BYTES_MAX - 64 * 1024) && *ndays > 1) {
        *ndays = *ndays / 2; /* too much for one transaction: fewer days */
        rc = 0;
    } else {
        store_cmp cmps[] = {
            {.kind = STORE_CMP_MOD_REVISION, .key = skey, .mod_revision = r->mod_revision},
            {.kind = STORE_CMP_MOD_REVISION, .key = lkey, .mod_revision = lrev},
        };
        bool landed = false;
        if (store_txn(a->store, cmps, 2, ops, n, &landed, NULL, err) < 0)
            rc = -1;
        else
            rc = landed ? 1 : 0;
    }
    for (size_t k = 0; k < n; k++)
        free(texts[k]);
    free(texts);
    return rc;
}

/* One step: [r->through, up to target) folded in one transaction. 1 when
 * it landed, 0 when it must be tried again (a compare failed, or *days
 * was too many and is now fewer), -1 on error. */
static int fold_step(app *a, const char *owner, users_rollup *r, int64_t target, double half_life_s,
                     int *days, gb_err *err)
{
    int64_t lrev = 0, earliest = 0;
    if (!r->through) {
        if (users_intervals_since(a, owner, 0, target, NULL, earliest_interval, &earliest, err) < 0)
            return -1;
        r->through = earliest && earliest < target ? earliest : target;
    }
    struct fold f = {.a = a,
                     .owner = owner,
                     .r = r,
                     .lo = r->through,
                     .half_life = half_life_s,
                     .days = json_object(),
                     .err = err};
    f.hi = floor_to(f.lo, USERS_ROLLUP_DAY_MS) + (int64_t)*days * USERS_ROLLUP_DAY_MS;
    if (f.hi > target)
        f.hi = target;
    /* The decayed sum, carried from through to the step's end; recomputed
     * from the days when it was kept for another half-life. */
    if (r->half_life != half_life_s && r->first) {
        double d = 0;
        if (users_rollup_decayed(a, owner, r->first, r->through, half_life_s,
                                 (double)r->through / 1000.0, &d, err) < 0) {
            json_decref(f.days);
            return -1;
        }
        r->decayed = d;
    }
    r->half_life = half_life_s;
    r->decayed *= exp2(-(double)(f.hi - f.lo) / 1000.0 / half_life_s);
    int rc = users_intervals_since(a, owner, f.lo, f.hi, &lrev, fold_interval, &f, err);
    if (rc == 0 && f.failed)
        rc = -1;
    if (rc < 0) {
        json_decref(f.days);
        return -1;
    }
    if (f.earliest && (!r->first || f.earliest < r->first))
        r->first = f.earliest;
    r->through = f.hi;
    rc = fold_write(a, owner, r, f.days, lrev, days, err);
    json_decref(f.days);
    return rc;
}

/* Delete owner's closed intervals that ended before cutoff. */
static int rollup_prune(app *a, const char *owner, int64_t cutoff, gb_err *err)
{
    char prefix[STORE_KEY_MAX], end[STORE_KEY_MAX];
    keys_acct_prefix(prefix, sizeof(prefix), users_up(a), owner);
    keys_acct(end, sizeof(end), users_up(a), owner, (long long)cutoff, "");
    store_kvs kvs = {0};
    if (cutoff <= 0 || store_range_between(a->store, prefix, NULL, end, &kvs, err) < 0)
        return cutoff <= 0 ? 0 : -1;
    int rc = 0;
    for (size_t i = 0; i < kvs.n && rc == 0; i += ROLLUP_OPS_MAX) {
        size_t n = kvs.n - i < ROLLUP_OPS_MAX ? kvs.n - i : ROLLUP_OPS_MAX;
        store_op ops[ROLLUP_OPS_MAX];
        for (size_t k = 0; k < n; k++)
            ops[k] = (store_op){.kind = STORE_OP_DELETE, .key = kvs.items[i + k].key};
        bool ok = false;
        rc = store_txn(a->store, NULL, 0, ops, n, &ok, NULL, err);
    }
    store_kvs_free(&kvs);
    return rc;
}

int users_rollup_fold(app *a, const char *owner, int64_t now_ms, int64_t min_step_ms,
                      int64_t retention_ms, double half_life_s, gb_err *err)
{
    int days = USERS_ROLLUP_FOLD_DAYS, tries = 0;
    users_rollup r = {0};
    for (;;) {
        users_rollup_free(&r);
        if (users_rollup_read(a, owner, &r, err) < 0)
            return -1;
        if (r.through >= now_ms || (r.through && now_ms - r.through < min_step_ms))
            break;
        int rc = fold_step(a, owner, &r, now_ms, half_life_s, &days, err);
        if (rc < 0) {
            users_rollup_free(&r);
            return err_prefix(err, "folding the accounting of %s", owner);
        }
        if (rc == 0 && ++tries >= ROLLUP_ATTEMPTS) {
            users_rollup_free(&r);
            return err_set(err, ERR_CONFLICT,
                           "the accounting of %s kept changing while it was folded; the next "
                           "fold tries again",
                           owner);
        }
    }
    int64_t cutoff = now_ms - retention_ms;
    if (cutoff > r.through)
        cutoff = r.through;
    users_rollup_free(&r);
    return rollup_prune(a, owner, cutoff, err);
}

int users_rollup_owners(app *a, json_t **out, gb_err *err)
{
    *out = json_object();
    for (int sum = 0; sum < 2; sum++) {
        char prefix[STORE_KEY_MAX];
        if (sum)
            keys_acct_sum(prefix, sizeof(prefix), users_up(a), "");
        else
            keys_ledger(prefix, sizeof(prefix), users_up(a), "");
        store_kvs kvs = {0};
        if (store_range(a->store, prefix, &kvs, err) < 0) {
            json_decref(*out);
            *out = NULL;
            return err_prefix(err, "reading the accounting");
        }
        for (size_t i = 0; i < kvs.n; i++) {
            char owner[USER_NAME_MAX + 1];
            if (keys_account_owner(kvs.items[i].key, owner, sizeof(owner)))
                json_object_set_new(*out, owner, json_true());
        }
        store_kvs_free(&kvs);
    }
    return 0;
}

int users_rollup_fold_all(app *a, int64_t now_ms, int64_t min_step_ms, int64_t retention_ms,
                          double half_life_s, gb_err *err)
{
    _cleanup_json_ json_t *owners = NULL;
    if (users_rollup_owners(a, &owners, err) < 0)
        return -1;
    int rc = 0;
    const char *owner;
    json_t *v;
    json_object_foreach(owners, owner, v)
    {
        gb_err e = GB_ERR_INIT;
        if (users_rollup_fold(a, owner, now_ms, min_step_ms, retention_ms, half_life_s, &e) < 0 &&
            rc == 0) {
            *err = e;
            rc = -1;
        }
    }
    return rc;
}

/* ---- the thread --------------------------------------------------------- */

int64_t users_rollup_period_ms(const app *a)
{
    int64_t ret = users_retention_ms(a), p = USERS_ROLLUP_PERIOD_MS;
    if (ret / 2 < p)
        p = ret / 2;
    return p < 1000 ? 1000 : p;
}

int64_t users_retention_ms(const app *a)
{
    return a->cfg.accounting_retention_s > 0 ? a->cfg.accounting_retention_s * 1000
                                             : USERS_RETENTION_DEFAULT_S * 1000;
}

static void *rollup_thread(void *arg)
{
    users *u = arg;
    app *a = u->a;
    bool warned = false;
    pthread_mutex_lock(&u->mu);
    while (!u->stopping) {
        double h = u->fairshare_half_life_s;
        pthread_mutex_unlock(&u->mu);
        gb_err e = GB_ERR_INIT;
        int64_t p = users_rollup_period_ms(a);
        if (users_rollup_fold_all(a, users_ledger_now_ms(), p / 2, users_retention_ms(a), h, &e) <
            0) {
            if (!warned)
                log_warn("accounting: folding the intervals into the rollup: %s (tried again "
                         "later; answers stay right, only slower)",
                         e.msg);
            warned = true;
        } else {
            warned = false;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += p / 1000;
        until.tv_nsec += (long)(p % 1000) * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&u->mu);
        while (!u->stopping && pthread_cond_timedwait(&u->cv, &u->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

int users_rollup_start(users *u, gb_err *err)
{
    if (pthread_create(&u->rollup_thread, NULL, rollup_thread, u) != 0)
        return err_set(err, ERR_INTERNAL, "users: cannot start the accounting thread");
    u->rollup_started = true;
    return 0;
}
