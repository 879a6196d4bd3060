/*
 * usage.c - accounting (users.h): card-seconds and MiB-seconds per user and
 * per set over the window asked for: what lies before the rollup's
 * `through` from the rollup (rollup.c), what lies after it from the closed
 * intervals in acct/ that end after it and the open ones in the ledgers.
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "util/cleanup.h"
#include "util/time.h"

/* Add cards and shareMiB held over [f, t] (ms), cut to [from, to], to the
 * user's entry for set on node in users (an object by user name). */
static void usage_add(json_t *users, const char *user, const char *set, const char *node, int64_t f,
                      int64_t t, int64_t cards, int64_t share, int64_t from, int64_t to)
{
    int64_t lo = f > from ? f : from, hi = t < to ? t : to;
    json_t *u = json_object_get(users, user);
    if (!u) {
        u = json_pack("{s:s, s:f, s:f, s:o}", "user", user, "cardSeconds", 0.0, "shareMiBSeconds",
                      0.0, "sets", json_object());
        json_object_set_new(users, user, u);
    }
    if (hi <= lo || !set)
        return;
    double secs = (double)(hi - lo) / 1000.0;
    char id[160];
    snprintf(id, sizeof(id), "%s@%s", set, node);
    json_t *sets = json_object_get(u, "sets");
    json_t *s = json_object_get(sets, id);
    if (!s) {
        s = json_pack("{s:s, s:s, s:f, s:f}", "name", set, "node", node, "cardSeconds", 0.0,
                      "shareMiBSeconds", 0.0);
        json_object_set_new(sets, id, s);
    }
    const char *fields[] = {"cardSeconds", "shareMiBSeconds"};
    int64_t amounts[] = {cards, share};
    for (int i = 0; i < 2; i++) {
        double add = secs * (double)amounts[i];
        json_real_set(json_object_get(s, fields[i]),
                      json_real_value(json_object_get(s, fields[i])) + add);
        json_real_set(json_object_get(u, fields[i]),
                      json_real_value(json_object_get(u, fields[i])) + add);
    }
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int64_t num(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Add amounts already counted (the rollup's) to user's entry for set on
 * node; sign -1 takes them away. */
static void usage_add_sums(json_t *users, const char *user, const char *set, const char *node,
                           double card_s, double mib_s)
{
    usage_add(users, user, NULL, "", 0, 0, 0, 0, 0, 0);
    json_t *u = json_object_get(users, user);
    char id[160];
    snprintf(id, sizeof(id), "%s@%s", set, node);
    json_t *sets = json_object_get(u, "sets");
    json_t *s = json_object_get(sets, id);
    if (!s) {
        s = json_pack("{s:s, s:s, s:f, s:f}", "name", set, "node", node, "cardSeconds", 0.0,
                      "shareMiBSeconds", 0.0);
        json_object_set_new(sets, id, s);
    }
    const char *fields[] = {"cardSeconds", "shareMiBSeconds"};
    double amounts[] = {card_s, mib_s};
    for (int i = 0; i < 2; i++) {
        json_real_set(json_object_get(s, fields[i]),
                      json_real_value(json_object_get(s, fields[i])) + amounts[i]);
        json_real_set(json_object_get(u, fields[i]),
                      json_real_value(json_object_get(u, fields[i])) + amounts[i]);
    }
}

struct usage_collect {
    json_t *users;
    const char *set; /* NULL: all */
    int64_t from, to;
    double sign;
};

static void usage_interval(void *ctx, const char *owner, const users_interval *iv)
{
    struct usage_collect *c = ctx;
    if (!c->set || strcmp(iv->set, c->set) == 0)
        usage_add(c->users, owner, iv->set, iv->node, iv->from, iv->to, iv->cards, iv->share_mib,
                  c->from, c->to);
}

struct usage_slots {
    struct usage_collect *c;
    const char *owner;
};

static void usage_slot(void *ctx, const char *id, const char *name, const char *node, int64_t hs,
                       int64_t he, int64_t x, int64_t y, const double v[3])
{
    (void)id;
    struct usage_slots *us = ctx;
    if (us->c->set && strcmp(name, us->c->set) != 0)
        return;
    double part = users_rollup_part(hs, he, x, y) * us->c->sign;
    usage_add_sums(us->c->users, us->owner, name, node, v[0] * part, v[1] * part);
}

/* owner's usage over [from, to]: the rollup for what lies before its
 * `through` (its totals, less the days after the window, when the window
 * begins before the first usage folded; else the days in the window),
 * and the intervals after `through` in detail (rollup.c). */
static int usage_owner(app *a, const char *owner, const char *set, int64_t from, int64_t to,
                       int64_t now, json_t *users, gb_err *err)
{
    users_rollup r;
    if (users_rollup_read(a, owner, &r, err) < 0)
        return -1;
    usage_add(users, owner, NULL, "", 0, 0, 0, 0, from, to);
    struct usage_collect c = {.users = users, .set = set, .from = from, .to = to, .sign = 1};
    struct usage_slots us = {.c = &c, .owner = owner};
    int64_t y = to < r.through ? to : r.through;
    int rc = 0;
    if (r.first && from < y && y > r.first) {
        if (from <= r.first) {
            const char *id;
            json_t *t;
            json_object_foreach(r.sets, id, t)
            {
                const char *name = json_string_value(json_object_get(t, "name")) ?: "";
                if (!set || strcmp(name, set) == 0)
                    usage_add_sums(users, owner, name,
                                   json_string_value(json_object_get(t, "node")) ?: "",
                                   json_number_value(json_object_get(t, "cardSeconds")),
                                   json_number_value(json_object_get(t, "shareMiBSeconds")));
            }
            c.sign = -1;
            rc = users_rollup_slots(a, owner, y, r.through, r.through, usage_slot, &us, err);
        } else {
            rc = users_rollup_slots(a, owner, from, y, r.through, usage_slot, &us, err);
        }
    }
    c.sign = 1;
    c.from = from > r.through ? from : r.through;
    if (rc == 0 && c.from < to)
        rc = users_intervals_since(a, owner, c.from, now, NULL, usage_interval, &c, err);
    users_rollup_free(&r);
    return rc;
}

int users_usage_collect(app *a, const char *user, const char *set, int64_t from, int64_t to,
                        int64_t now, json_t *users, gb_err *err)
{
    if (user)
        return usage_owner(a, user, set, from, to, now, users, err);
    _cleanup_json_ json_t *owners = NULL;
    if (users_rollup_owners(a, &owners, err) < 0)
        return -1;
    const char *owner;
    json_t *v;
    json_object_foreach(owners, owner, v)
    {
        if (usage_owner(a, owner, set, from, to, now, users, err) < 0)
            return -1;
    }
    return 0;
}

/* Sums the rollup's subtraction left a hair below zero read zero. */
static void usage_clamp(json_t *o)
{
    const char *fields[] = {"cardSeconds", "shareMiBSeconds"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(o, fields[i]);
        if (json_is_real(v) && json_real_value(v) < 1e-6)
            json_real_set(v, 0);
    }
}

/* users (by name) as the answer's sorted array, each with its sets as one. */
static json_t *usage_list(json_t *users)
{
    json_t *list = json_array();
    const char *k;
    json_t *u;
    json_object_foreach(users, k, u)
    {
        json_t *sets = json_array();
        const char *sk;
        json_t *s;
        usage_clamp(u);
        json_object_foreach(json_object_get(u, "sets"), sk, s)
        {
            usage_clamp(s);
            if (json_real_value(json_object_get(s, "cardSeconds")) > 0 ||
                json_real_value(json_object_get(s, "shareMiBSeconds")) > 0)
                json_array_append(sets, s); /* the rollup's subtraction may leave a zero */
        }
        json_object_set_new(u, "sets", sets);
        json_array_append(list, u);
    }
    return list;
}

int users_api_usage(app *a, const char *user, const char *set, int64_t from_ms, int64_t to_ms,
                    json_t **out, gb_err *err)
{
    const caller *c = users_caller_current();
    int64_t born_ms = 0;
    if (users_caller_is_user()) {
        if (user && strcmp(user, c->name) != 0)
            return err_set(err, ERR_USER_NOT_FOUND, "no user named '%.63s'", user);
        user = c->name;
        born_ms = users_created_ms(a->users, user);
    }
    int64_t now = users_ledger_now_ms();
    if (!to_ms)
        to_ms = now;
    if (from_ms > to_ms)
        return err_set(err, ERR_INVALID_PARAMS, "from must not be after to");
    if (from_ms < born_ms) /* an earlier user of the name used that: not theirs to read */
        from_ms = born_ms > to_ms ? to_ms : born_ms;
    _cleanup_json_ json_t *users = json_object();
    if (user) /* asked for by name: shown, with nothing used if so */
        usage_add(users, user, NULL, "", 0, 0, 0, 0, from_ms, to_ms);
    if (users_usage_collect(a, user, set, from_ms, to_ms, now, users, err) < 0)
        return -1;
    char f[32], t[32];
    time_iso_format((time_t)(from_ms / 1000), f, sizeof(f));
    time_iso_format((time_t)(to_ms / 1000), t, sizeof(t));
    *out = json_pack("{s:s, s:s, s:o}", "from", f, "to", t, "users", usage_list(users));
    return 0;
}

int users_metrics_usage(app *a, json_t **out, gb_err *err)
{
    const char *me = a->cfg.node ? a->cfg.node : "";
    int64_t now = users_ledger_now_ms();
    _cleanup_json_ json_t *users = json_object();
    if (users_usage_collect(a, NULL, NULL, 0, now, now, users, err) < 0)
        return -1;
    json_t *res = json_object();
    const char *name;
    json_t *u;
    json_object_foreach(users, name, u)
    {
        double cs = 0, ms = 0;
        const char *k;
        json_t *s;
        json_object_foreach(json_object_get(u, "sets"), k, s)
        {
            if (strcmp(str(s, "node"), me) != 0)
                continue;
            cs += json_real_value(json_object_get(s, "cardSeconds"));
            ms += json_real_value(json_object_get(s, "shareMiBSeconds"));
        }
        json_object_set_new(res, name,
                            json_pack("{s:f, s:f, s:I, s:I}", "cardSeconds", cs, "shareMiBSeconds",
                                      ms, "cards", (json_int_t)0, "shareMiB", (json_int_t)0));
    }
    /* What this node's sets hold now, from the ledgers. */
    char prefix[STORE_KEY_MAX];
    keys_ledger(prefix, sizeof(prefix), users_up(a), "");
    store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0) {
        json_decref(res);
        return err_prefix(err, "reading the ledgers");
    }
    for (size_t i = 0; i < kvs.n; i++) {
        char owner[USER_NAME_MAX + 1];
        if (!keys_account_owner(kvs.items[i].key, owner, sizeof(owner)))
            continue;
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        json_t *r = json_object_get(res, owner);
        const char *k;
        json_t *e;
        json_object_foreach(json_object_get(j, "sets"), k, e)
        {
            if (strcmp(str(e, "node"), me) != 0 || !r ||
                json_is_true(json_object_get(e, "reserved")))
                continue;
            json_object_set_new(r, "cards", json_integer(num(r, "cards") + num(e, "cards")));
            json_object_set_new(r, "shareMiB",
                                json_integer(num(r, "shareMiB") + num(e, "shareMiB")));
        }
    }
    store_kvs_free(&kvs);
    *out = res;
    return 0;
}
