/*
 * usage.c - accounting (users.h): card-seconds and MiB-seconds per user and
 * per set, from the closed intervals in acct/ and the open ones in the
 * ledgers, cut to the window asked for.
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

/* Closed intervals (acct/) and open ones (ledger/) of user (NULL: all). */
static int usage_collect(app *a, const char *user, const char *set, int64_t from, int64_t to,
                         int64_t now, json_t *users, gb_err *err)
{
    for (int open = 0; open < 2; open++) {
        char prefix[STORE_KEY_MAX];
        if (open)
            keys_ledger(prefix, sizeof(prefix), users_up(a), user ? user : "");
        else
            keys_acct_prefix(prefix, sizeof(prefix), users_up(a), user);
        store_kvs kvs = {0};
        if (store_range(a->store, prefix, &kvs, err) < 0)
            return err_prefix(err, "reading the accounting");
        for (size_t i = 0; i < kvs.n; i++) {
            char owner[USER_NAME_MAX + 1];
            if (!keys_account_owner(kvs.items[i].key, owner, sizeof(owner)) ||
                (user && strcmp(owner, user) != 0))
                continue; /* ledger/al when asked for ledger/a */
            _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
            if (!j)
                continue;
            if (!open) {
                if (!set || strcmp(str(j, "set"), set) == 0)
                    usage_add(users, owner, str(j, "set"), str(j, "node"), num(j, "from"),
                              num(j, "to"), num(j, "cards"), num(j, "shareMiB"), from, to);
                continue;
            }
            const char *k;
            json_t *e;
            usage_add(users, owner, NULL, "", 0, 0, 0, 0, from, to);
            json_object_foreach(json_object_get(j, "sets"), k, e)
            {
                if ((!set || strcmp(k, set) == 0) && (num(e, "cards") || num(e, "shareMiB")) &&
                    !json_is_true(json_object_get(e, "reserved"))) /* held by no record yet */
                    usage_add(users, owner, k, str(e, "node"), num(e, "since"), now,
                              num(e, "cards"), num(e, "shareMiB"), from, to);
            }
        }
        store_kvs_free(&kvs);
    }
    return 0;
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
        json_object_foreach(json_object_get(u, "sets"), sk, s) json_array_append(sets, s);
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
    if (usage_collect(a, user, set, from_ms, to_ms, now, users, err) < 0)
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
    if (usage_collect(a, NULL, NULL, 0, now, now, users, err) < 0)
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
