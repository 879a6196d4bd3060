/*
 * users_internal.h - what the files of service/users/ share.
 */
#ifndef GPUBOX_SERVICE_USERS_INTERNAL_H
#define GPUBOX_SERVICE_USERS_INTERNAL_H

#include <pthread.h>

#include "service/users/users.h"

struct users {
    app *a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread, rollup_thread;
    bool thread_started, rollup_started, stopping, warned;
    /* The half-life whose decayed usage the rollup keeps: the one fair
     * share was last asked for (USERS_FAIRSHARE_HALF_LIFE_S before). */
    double fairshare_half_life_s;
    users_info *v; /* the file's users first, then the store's */
    size_t n;
    users_quota defaults;
};

/* A user record (users.h) into out; fields absent take defaults' quota. */
int users_from_json(const json_t *j, users_info *out, const users_quota *defaults);
/* The record as stored (with tokenHash) or as answered (without). */
json_t *users_to_json(const users_info *u, bool stored);
void users_defaults(users *u, users_quota *q);
/* A copy of the table (free it). */
users_info *users_snapshot(users *u, size_t *n);

/* The ledger's JSON of owner (absent: an empty one) and its revision. */
int users_ledger_read(app *a, const char *owner, json_t **out, int64_t *rev, gb_err *err);
/* The sums of a ledger's entries. */
void users_ledger_sum(const json_t *ledger, users_ledger_usage *u);
json_t *users_ledger_usage_to_json(const users_ledger_usage *u);
/* The integral over [f, t] (cut at now) of 2^(-(now - x) / half_life_s)
 * dx, in seconds (Unix seconds in, t - f when half_life_s is INFINITY):
 * the weight fair share gives to holding one card from f to t. */
double users_decay_integral(double f, double t, double now, double half_life_s);
/* What an interval or ledger entry j held, as cards: "cards" plus
 * "shareCards", or for records without it "shareMiB" / card_mib_guess. */
double users_interval_cards(const json_t *j, double card_mib_guess);
/* The memory of this node's largest card (MiB; 0 without cards): what a
 * share whose card is unknown is counted against. */
double users_share_card_mib_guess(const app *a);
/* The wall clock, Unix ms. */
int64_t users_ledger_now_ms(void);

/* ---- the accounting rollup (rollup.c) ------------------------------------ */

#define USERS_ROLLUP_HOUR_MS 3600000LL
#define USERS_ROLLUP_DAY_MS 86400000LL
/* Days one fold's transaction covers at most (fewer when they do not fit). */
#define USERS_ROLLUP_FOLD_DAYS 32
/* How often each node folds (less when the retention is shorter). */
#define USERS_ROLLUP_PERIOD_MS 300000LL
#define USERS_RETENTION_DEFAULT_S (400LL * 86400)
#define USERS_FAIRSHARE_HALF_LIFE_S (7.0 * 86400)

/* One interval of holding, closed (acct/) or open (a ledger entry, to =
 * now); share_cards the shares as cards (guessed for older records). */
typedef struct users_interval {
    const char *set, *node;
    int64_t from, to;
    int64_t cards, share_mib;
    double share_cards;
    bool open;
} users_interval;
typedef void (*users_interval_fn)(void *ctx, const char *owner, const users_interval *iv);
/* owner's intervals that end after since: the closed ones whose key says
 * so (one range read from since on), then the open ones of the ledger
 * (running to now). *ledger_rev (may be NULL): the ledger's revision,
 * read before the intervals. */
int users_intervals_since(app *a, const char *owner, int64_t since, int64_t now,
                          int64_t *ledger_rev, users_interval_fn fn, void *ctx, gb_err *err);

/* owner's rollup state (acctsum/, rollup.c); free with users_rollup_free. */
typedef struct users_rollup {
    int64_t through;  /* ms: usage before it is in the rollup; 0: none folded yet */
    int64_t first;    /* ms: the earliest moment of folded usage; 0: none */
    json_t *sets;     /* {"<set>@<node>": {name, node, cardSeconds, shareMiBSeconds,
                         shareCardSeconds}}: totals before through */
    double half_life; /* of decayed; 0: none */
    double decayed;   /* card-seconds before through, decayed to through */
    int64_t mod_revision;
} users_rollup;
int users_rollup_read(app *a, const char *owner, users_rollup *r, gb_err *err);
void users_rollup_free(users_rollup *r);
/* The hour slots of owner's days that touch [x, min(y, through)): each
 * with its span [hs, he) (cut at through) and its sums v = {cardSeconds,
 * shareMiBSeconds, shareCardSeconds}; one range read. */
typedef void (*users_rollup_slot_fn)(void *ctx, const char *id, const char *name, const char *node,
                                     int64_t hs, int64_t he, int64_t x, int64_t y,
                                     const double v[3]);
int users_rollup_slots(app *a, const char *owner, int64_t x, int64_t y, int64_t through,
                       users_rollup_slot_fn fn, void *ctx, gb_err *err);
/* The share of a slot [hs, he), spread evenly, that falls in [x, y). */
double users_rollup_part(int64_t hs, int64_t he, int64_t x, int64_t y);
/* The decayed card-seconds of owner's days over [from, through), each
 * hour spread evenly, weighed for now (Unix s); older than 64 half-lives
 * left out. */
int users_rollup_decayed(app *a, const char *owner, int64_t from, int64_t through,
                         double half_life_s, double now, double *out, gb_err *err);
/* Fold owner's usage up to now_ms into the rollup (see rollup.c), when
 * the rollup is at least min_step_ms behind, then delete the closed
 * intervals that ended before both the rollup's through and now_ms -
 * retention_ms. */
int users_rollup_fold(app *a, const char *owner, int64_t now_ms, int64_t min_step_ms,
                      int64_t retention_ms, double half_life_s, gb_err *err);
/* The same for every owner with a ledger or a rollup. */
int users_rollup_fold_all(app *a, int64_t now_ms, int64_t min_step_ms, int64_t retention_ms,
                          double half_life_s, gb_err *err);
/* The owners with a ledger or a rollup, as the keys of *out. */
int users_rollup_owners(app *a, json_t **out, gb_err *err);
/* --accounting-retention in ms, and how often the thread folds. */
int64_t users_retention_ms(const app *a);
int64_t users_rollup_period_ms(const app *a);
/* The usage of user (NULL: everyone with a ledger or a rollup) over [from,
 * to] (ms) into users, an object by user name: {user, cardSeconds,
 * shareMiBSeconds, sets: {"<set>@<node>": {name, node, cardSeconds,
 * shareMiBSeconds}}}; set (NULL: all) keeps one set's. Open intervals run
 * to now. (usage.c) */
int users_usage_collect(app *a, const char *user, const char *set, int64_t from, int64_t to,
                        int64_t now, json_t *users, gb_err *err);
/* Start the thread that folds every users_rollup_period_ms (users_close
 * stops it). */
int users_rollup_start(users *u, gb_err *err);

#endif
