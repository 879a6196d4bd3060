/*
 * ledger.c - what each owner holds, rewritten in the same transaction as
 * the record that changed it (users.h), so that a quota holds across every
 * node of a fleet, and the intervals cards were held, for accounting.
 *
 * One key per owner, ledger/<owner>:
 *   {"sets":    {"<name>": {"node", "cards", "shareMiB", "shareCards", "cores", "since",
 *                            "reserved"}},
 *    "volumes": {"<name>": {"node", "bytes"}}}
 * `since` (Unix ms) is when the set's current holding began; `shareCards`
 * (when the set holds shares on cards this node knows) the shares as
 * cards, sum of share / card memory. When the holding changes or the set
 * goes, {set, node, from, to, cards, shareMiB, shareCards} is written to
 * acct/<owner>/<to>-<set> in the same transaction. Every write
 * compares the ledger's mod_revision with the one read: two nodes creating
 * for one owner at once cannot both count on the same room; the loser
 * reads again and checks again.
 *
 * Quota before cards: a create first reserves its entry (users_ledger_reserve:
 * "reserved": true, its demand counted, the quota checked, the ledger's
 * revision compared), and only then takes cards, ports and cores from the
 * pools (sched/). A create past its owner's quota is thus refused before
 * it holds anything another user could have used, however many arrive at
 * once and on whichever nodes. The record's transaction turns the
 * reservation into the held entry (the usage is written in the same
 * transaction as the allocation, DESIGN.md section 7); a create that fails
 * before its record lands gives the reservation back (users_ledger_release), and
 * one a crash cut short is removed by the next start's users_ledger_sync, which
 * drops this node's entries that no record holds. A reservation closes no
 * accounting interval: card-seconds count from the record's transaction.
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/log.h"

#define LEDGER_ATTEMPTS 200

int64_t users_ledger_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *node_of(const app *a)
{
    return a->cfg.node ? a->cfg.node : "";
}

int users_ledger_read(app *a, const char *owner, json_t **out, int64_t *rev, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_ledger(key, sizeof(key), users_up(a), owner);
    *out = NULL;
    *rev = 0;
    char what[USER_NAME_MAX + 16];
    snprintf(what, sizeof(what), "the ledger of %s", owner);
    int found = records_get_json(a->store, key, what, out, rev, err);
    if (found < 0)
        return -1;
    if (!found || !json_is_object(*out)) {
        json_decref(*out);
        *out = json_object();
        if (!found)
            *rev = 0;
    }
    return 0;
}

static int64_t field(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Is the entry e a reservation (users_ledger_reserve), held by no record yet? */
static bool reserved(const json_t *e)
{
    return json_is_true(json_object_get(e, "reserved"));
}

void users_ledger_sum(const json_t *ledger, users_ledger_usage *u)
{
    *u = (users_ledger_usage){0};
    const char *k;
    json_t *e;
    json_object_foreach(json_object_get(ledger, "sets"), k, e)
    {
        u->cards += field(e, "cards");
        u->share_mib += field(e, "shareMiB");
        u->cores += field(e, "cores");
        u->instances++;
    }
    json_object_foreach(json_object_get(ledger, "volumes"), k, e) u->volume_bytes +=
        field(e, "bytes");
}

json_t *users_ledger_usage_to_json(const users_ledger_usage *u)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "cards", (json_int_t)u->cards, "shareMiB",
                     (json_int_t)u->share_mib, "instances", (json_int_t)u->instances, "volumeBytes",
                     (json_int_t)u->volume_bytes, "cores", (json_int_t)u->cores);
}

int users_ledger_usage_of(app *a, const char *owner, users_ledger_usage *u, gb_err *err)
{
    _cleanup_json_ json_t *lj = NULL;
    int64_t rev = 0;
    if (users_ledger_read(a, owner, &lj, &rev, err) < 0)
        return -1;
    users_ledger_sum(lj, u);
    return 0;
}

/* Does the entry e say what h says? */
static bool entry_foreign(const app *a, const json_t *e);

static bool entry_same(const app *a, const json_t *e, const users_ledger_hold *h)
{
    if (!h->exists && entry_foreign(a, e))
        return true; /* another node's now (a set that moved): not this node's to remove */
    if (!e || !h->exists)
        return !e && !h->exists;
    const char *node = json_string_value(json_object_get(e, "node"));
    if (!node || strcmp(node, node_of(a)) != 0 || reserved(e) != h->reserve)
        return false;
    if (h->volume)
        return field(e, "bytes") == h->volume_bytes;
    return field(e, "cards") == h->cards && field(e, "shareMiB") == h->share_mib &&
           field(e, "cores") == h->cores;
}

/* An entry another node wrote: the name moved there (replicaset/move.c). */
static bool entry_foreign(const app *a, const json_t *e)
{
    const char *node = e ? json_string_value(json_object_get(e, "node")) : NULL;
    return node && node[0] && node_of(a)[0] && strcmp(node, node_of(a)) != 0;
}

/* One quota dimension: refuse when it grows past the limit. */
static int quota_dim(const char *owner, const char *what, int64_t limit, int64_t total, int64_t old,
                     int64_t want, gb_err *err)
{
    if (limit == QUOTA_UNLIMITED || want <= old || total - old + want <= limit)
        return 0;
    return err_set(err, ERR_QUOTA_EXCEEDED,
                   "quota exceeded: user %s may hold %lld %s; holds %lld, this asks %lld more",
                   owner, (long long)limit, what, (long long)total, (long long)(want - old));
}

/* Would want, in place of the entry old, pass owner's quota? */
static int quota_check(app *a, const json_t *ledger, const json_t *old,
                       const users_ledger_hold *want, gb_err *err)
{
    users_info ui;
    if (!users_find(a->users, want->owner, &ui) || ui.role != USER_ROLE_USER)
        return 0;
    users_ledger_usage all;
    users_ledger_sum(ledger, &all);
    const users_quota *q = &ui.quota;
    if (want->volume)
        return quota_dim(want->owner, "bytes of volumes", q->volume_bytes, all.volume_bytes,
                         old ? field(old, "bytes") : 0, want->volume_bytes, err);
    if (quota_dim(want->owner, "instances", q->instances, all.instances, old ? 1 : 0, 1, err) < 0 ||
        quota_dim(want->owner, "whole cards", q->cards, all.cards, old ? field(old, "cards") : 0,
                  want->cards, err) < 0 ||
        quota_dim(want->owner, "MiB of GPU shares", q->share_mib, all.share_mib,
                  old ? field(old, "shareMiB") : 0, want->share_mib, err) < 0 ||
        quota_dim(want->owner, "CPU cores (logical CPUs)", q->cores, all.cores,
                  old ? field(old, "cores") : 0, want->cores, err) < 0)
        return -1;
    return 0;
}

/* h's entry in the ledger lj, NULL when it has none. */
static const json_t *users_ledger_entry(const json_t *lj, const users_ledger_hold *h)
{
    return json_object_get(json_object_get(lj, h->volume ? "volumes" : "sets"), h->name);
}

/* The ledger after h, and the interval h's change closes (NULL: none). */
static json_t *users_ledger_next(app *a, const json_t *lj, const json_t *old,
                                 const users_ledger_hold *h, int64_t now, json_t **closed)
{
    json_t *next = json_deep_copy(lj);
    const char *section = h->volume ? "volumes" : "sets";
    json_t *sec = json_object_get(next, section);
    if (!sec) {
        sec = json_object();
        json_object_set_new(next, section, sec);
    }
    *closed = NULL;
    /* A reservation held nothing: no interval to close, and the holding
     * begins when a record takes it over. */
    bool held = old && !h->volume && !reserved(old) &&
                (field(old, "cards") > 0 || field(old, "shareMiB") > 0);
    bool same_hold = held && h->exists && !h->reserve && field(old, "cards") == h->cards &&
                     field(old, "shareMiB") == h->share_mib;
    if (held && !same_hold) {
        *closed = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "set", h->name, "node",
                            json_string_value(json_object_get(old, "node")) ?: "", "from",
                            (json_int_t)field(old, "since"), "to", (json_int_t)now, "cards",
                            (json_int_t)field(old, "cards"), "shareMiB",
                            (json_int_t)field(old, "shareMiB"));
        json_t *sc = json_object_get(old, "shareCards");
        if (json_is_number(sc))
            json_object_set(*closed, "shareCards", sc);
    }
    if (!h->exists) {
        json_object_del(sec, h->name);
    } else if (h->volume) {
        json_object_set_new(
            sec, h->name,
            json_pack("{s:s, s:I}", "node", node_of(a), "bytes", (json_int_t)h->volume_bytes));
    } else {
        int64_t since = same_hold ? field(old, "since") : now;
        json_t *entry =
            json_pack("{s:s, s:I, s:I, s:I}", "node", node_of(a), "cards", (json_int_t)h->cards,
                      "shareMiB", (json_int_t)h->share_mib, "since", (json_int_t)since);
        if (h->cores) /* only when held: entries stay as they were without cpuCount */
            json_object_set_new(entry, "cores", json_integer(h->cores));
        if (h->share_mib && h->share_cards > 0) /* the shares as cards, for fair share */
            json_object_set_new(entry, "shareCards", json_real(h->share_cards));
        if (h->reserve)
            json_object_set_new(entry, "reserved", json_true());
        json_object_set_new(sec, h->name, entry);
    }
    return next;
}

int users_ledger_txn(app *a, const users_ledger_hold *h, const users_ledger_hold *check,
                     const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
                     bool *landed, int64_t *revision, gb_err *err)
{
    if (!h || !h->owner[0] || !a->users)
        return store_txn(a->store, cmps, ncmps, ops, nops, landed, revision, err);
    char lkey[STORE_KEY_MAX], akey[STORE_KEY_MAX];
    keys_ledger(lkey, sizeof(lkey), users_up(a), h->owner);
    for (int attempt = 0; attempt < LEDGER_ATTEMPTS; attempt++) {
        _cleanup_json_ json_t *lj = NULL;
        int64_t lrev = 0;
        if (users_ledger_read(a, h->owner, &lj, &lrev, err) < 0)
            return -1;
        const json_t *old = users_ledger_entry(lj, h);
        if (entry_same(a, old, h))
            return store_txn(a->store, cmps, ncmps, ops, nops, landed, revision, err);
        if (h->exists && !h->unchecked && quota_check(a, lj, old, check ? check : h, err) < 0)
            return -1;
        int64_t now = users_ledger_now_ms();
        _cleanup_json_ json_t *closed = NULL;
        _cleanup_json_ json_t *next = users_ledger_next(a, lj, old, h, now, &closed);
        _cleanup_free_ char *ltext = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
        _cleanup_free_ char *atext = closed ? json_dumps(closed, JSON_COMPACT) : NULL;
        _cleanup_free_ store_cmp *c2 = xcalloc(ncmps + 1, sizeof(*c2));
        _cleanup_free_ store_op *o2 = xcalloc(nops + 2, sizeof(*o2));
        if (ncmps)
            memcpy(c2, cmps, ncmps * sizeof(*c2));
        if (nops)
            memcpy(o2, ops, nops * sizeof(*o2));
        c2[ncmps] = (store_cmp){.kind = STORE_CMP_MOD_REVISION, .key = lkey, .mod_revision = lrev};
        size_t n = nops;
        o2[n++] = (store_op){.kind = STORE_OP_PUT, .key = lkey, .value = ltext};
        if (atext) {
            keys_acct(akey, sizeof(akey), users_up(a), h->owner, (long long)now, h->name);
            o2[n++] = (store_op){.kind = STORE_OP_PUT, .key = akey, .value = atext};
        }
        if (store_txn(a->store, c2, ncmps + 1, o2, n, landed, revision, err) < 0)
            return -1;
        if (*landed)
            return 0;
        _cleanup_json_ json_t *again = NULL;
        int64_t rev2 = 0;
        if (users_ledger_read(a, h->owner, &again, &rev2, err) < 0)
            return -1;
        if (rev2 == lrev)
            return 0; /* the caller's comparisons failed */
        struct timespec pause = {0, (long)(rand() % 3 + 1) * 1000000L};
        nanosleep(&pause, NULL);
    }
    return err_set(err, ERR_CONFLICT, "the ledger of %s kept changing under %d attempts; try again",
                   h->owner, LEDGER_ATTEMPTS);
}

int users_ledger_reserve(app *a, const users_ledger_hold *h, bool *reserved_out, gb_err *err)
{
    *reserved_out = false;
    if (!h->owner[0] || !a->users)
        return 0;
    /* No quota applies (an admin, a viewer, no limit on what h asks): no
     * reservation either, nor its transaction; the record's save writes
     * the entry as before. */
    users_info ui;
    const users_quota *q = &ui.quota;
    if (!users_find(a->users, h->owner, &ui) || ui.role != USER_ROLE_USER ||
        (q->instances == QUOTA_UNLIMITED && q->cards == QUOTA_UNLIMITED &&
         q->share_mib == QUOTA_UNLIMITED && q->cores == QUOTA_UNLIMITED))
        return 0;
    _cleanup_json_ json_t *lj = NULL;
    int64_t rev = 0;
    if (users_ledger_read(a, h->owner, &lj, &rev, err) < 0)
        return -1;
    const json_t *old = users_ledger_entry(lj, h);
    if (old && !reserved(old)) /* held under this name already: only a check */
        return quota_check(a, lj, old, h, err);
    users_ledger_hold r = *h;
    r.exists = r.reserve = true;
    r.unchecked = false;
    bool landed = false;
    if (users_ledger_txn(a, &r, NULL, NULL, 0, NULL, 0, &landed, NULL, err) < 0)
        return -1;
    *reserved_out = landed;
    return 0;
}

int users_ledger_release(app *a, const users_ledger_hold *h, gb_err *err)
{
    if (!h->owner[0] || !a->users)
        return 0;
    _cleanup_json_ json_t *lj = NULL;
    int64_t rev = 0;
    if (users_ledger_read(a, h->owner, &lj, &rev, err) < 0)
        return -1;
    const json_t *e = users_ledger_entry(lj, h);
    const char *node = json_string_value(json_object_get(e, "node"));
    if (!e || !reserved(e) || !node || strcmp(node, node_of(a)) != 0)
        return 0; /* taken over by its record, or not this node's */
    users_ledger_hold gone = {.volume = h->volume, .exists = false};
    snprintf(gone.owner, sizeof(gone.owner), "%s", h->owner);
    snprintf(gone.name, sizeof(gone.name), "%s", h->name);
    bool landed = false;
    return users_ledger_txn(a, &gone, NULL, NULL, 0, NULL, 0, &landed, NULL, err);
}

/* Is there a hold for section/name among holds? */
static bool held_by(const users_ledger_hold *holds, size_t n, const char *owner, bool volume,
                    const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (holds[i].volume == volume && strcmp(holds[i].name, name) == 0 &&
            strcmp(holds[i].owner, owner) == 0)
            return true;
    return false;
}

/* Remove from owner's ledger this node's entries that no hold names. */
static int sync_stale(app *a, const char *owner, const json_t *lj, const users_ledger_hold *holds,
                      size_t n, gb_err *err)
{
    for (int v = 0; v < 2; v++) {
        const char *k;
        json_t *e;
        json_object_foreach(json_object_get(lj, v ? "volumes" : "sets"), k, e)
        {
            const char *node = json_string_value(json_object_get(e, "node"));
            if (!node || strcmp(node, node_of(a)) != 0 || held_by(holds, n, owner, v, k))
                continue;
            users_ledger_hold gone = {.volume = v, .exists = false};
            snprintf(gone.owner, sizeof(gone.owner), "%s", owner);
            snprintf(gone.name, sizeof(gone.name), "%s", k);
            bool ok = false;
            if (users_ledger_txn(a, &gone, NULL, NULL, 0, NULL, 0, &ok, NULL, err) < 0)
                return -1;
            log_info("ledger: %s's %s %s is no longer on this node; its entry is gone", owner,
                     v ? "volume" : "replica set", k);
        }
    }
    return 0;
}

int users_ledger_sync(app *a, const users_ledger_hold *holds, size_t n, gb_err *err)
{
    for (size_t i = 0; i < n; i++) {
        users_ledger_hold h = holds[i];
        h.unchecked = true;
        bool ok = false;
        if (users_ledger_txn(a, &h, NULL, NULL, 0, NULL, 0, &ok, NULL, err) < 0)
            return err_prefix(err, "writing down what %s holds", h.name);
    }
    char prefix[STORE_KEY_MAX];
    keys_ledger(prefix, sizeof(prefix), users_up(a), "");
    store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0)
        return err_prefix(err, "reading the ledgers");
    int rc = 0;
    for (size_t i = 0; i < kvs.n && rc == 0; i++) {
        char owner[USER_NAME_MAX + 1];
        _cleanup_json_ json_t *lj = json_loads(kvs.items[i].value, 0, NULL);
        if (keys_account_owner(kvs.items[i].key, owner, sizeof(owner)) && lj)
            rc = sync_stale(a, owner, lj, holds, n, err);
    }
    store_kvs_free(&kvs);
    return rc;
}

struct users_ledger_save {
    app *a;
    const users_ledger_hold *h, *check;
};

static int users_ledger_save_txn(void *ctx, const store_cmp *cmps, size_t ncmps,
                                 const store_op *ops, size_t nops, bool *landed, int64_t *revision,
                                 gb_err *err)
{
    const struct users_ledger_save *s = ctx;
    return users_ledger_txn(s->a, s->h, s->check, cmps, ncmps, ops, nops, landed, revision, err);
}

int users_ledger_record_save(app *a, const records_kind *k, const char *name, const json_t *value,
                             int64_t *mod_revision, const store_op *extra, size_t nextra,
                             const users_ledger_hold *h, const users_ledger_hold *check,
                             gb_err *err)
{
    if (!h)
        return records_save_plain(a->store, k, name, value, mod_revision, extra, nextra, err);
    struct users_ledger_save s = {.a = a, .h = h, .check = check};
    return records_save_via(a->store, k, name, value, mod_revision, extra, nextra,
                            users_ledger_save_txn, &s, err);
}

int users_ledger_hand_over(app *a, const char *owner, bool volume, const char *name,
                           const char *node, gb_err *err)
{
    if (!owner || !owner[0] || !a->users)
        return 0;
    char lkey[STORE_KEY_MAX];
    keys_ledger(lkey, sizeof(lkey), users_up(a), owner);
    for (int attempt = 0; attempt < LEDGER_ATTEMPTS; attempt++) {
        _cleanup_json_ json_t *lj = NULL;
        int64_t rev = 0;
        if (users_ledger_read(a, owner, &lj, &rev, err) < 0)
            return -1;
        json_t *e = json_object_get(json_object_get(lj, volume ? "volumes" : "sets"), name);
        const char *n = json_string_value(json_object_get(e, "node"));
        if (!e || !n || strcmp(n, node_of(a)) != 0)
            return 0; /* not this node's to hand over */
        json_object_set_new(e, "node", json_string(node));
        _cleanup_free_ char *text = json_dumps(lj, JSON_COMPACT | JSON_SORT_KEYS);
        store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = lkey, .mod_revision = rev};
        store_op op = {.kind = STORE_OP_PUT, .key = lkey, .value = text};
        bool ok = false;
        if (store_txn(a->store, &cmp, 1, &op, 1, &ok, NULL, err) < 0)
            return -1;
        if (ok)
            return 0;
    }
    return err_set(err, ERR_CONFLICT, "the ledger of %s kept changing under %d attempts; try again",
                   owner, LEDGER_ATTEMPTS);
}
