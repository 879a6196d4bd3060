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
    pthread_t thread;
    bool thread_started, stopping, warned;
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

#endif
