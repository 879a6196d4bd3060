/*
 * users.h - users, their quotas, the ledger of what each holds, and the
 * accounting of what each used (docs/users.md).
 *
 * Where things live (keys.h, keys_user and the others), all in the fleet's
 * shared part of the store (users_up: a fleet node reaches it through its
 * own handle with "../../", store.h), so that every node sees one table:
 *   users/<name>        {name, role, source, tokenHash, quota, createTime,
 *                        tokenTime}: an API user, or the quota of a user
 *                        of the token file (source "file", no tokenHash)
 *   quota-defaults      the quota new users get
 *   ledger/<owner>      what the owner holds now, set by set and volume by
 *                       volume (ledger.c), rewritten in the same
 *                       transaction as every record change
 *   acct/<owner>/<to>-<set>  one closed interval of holding cards, deleted
 *                       after --accounting-retention once folded into
 *   acctsum/<owner>     the rollup (rollup.c): totals and decayed usage up
 *   acctday/<owner>/<day>  to `through`, and each UTC day's usage by hour
 *
 * The directory: every node keeps the users in memory (tokens only as
 * SHA-256 digests) and reads them again every USERS_REFRESH_MS, and at
 * once after a change it made itself; a revoked token stops working on
 * every node within that time.
 */
#ifndef GPUBOX_SERVICE_USERS_USERS_H
#define GPUBOX_SERVICE_USERS_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "service/app.h"
#include "service/users/caller.h"
#include "store/store.h"
#include "util/err.h"
#include "util/token.h"

#define USERS_REFRESH_MS 1000
#define QUOTA_UNLIMITED (-1)

/* A quota; QUOTA_UNLIMITED in a field lifts it. */
typedef struct users_quota {
    int64_t cards;        /* whole cards held at once */
    int64_t share_mib;    /* share memory held at once, summed over cards */
    int64_t instances;    /* replica sets that exist */
    int64_t volume_bytes; /* volume sizes, summed */
    int64_t cores;        /* exclusive logical CPUs (cpuCount) held at once */
    int64_t max_priority; /* the highest queue priority asked (docs/queue.md); default
                             QUOTA_PRIORITY_DEFAULT; QUOTA_UNLIMITED: up to 100 */
} users_quota;

#define QUOTA_PRIORITY_DEFAULT 50

typedef struct users_info {
    char name[USER_NAME_MAX + 1];
    enum users_role role;
    bool from_file; /* the token file's: role and token are the file's */
    bool has_token; /* an API user with a live token */
    char digest[TOKEN_DIGEST_HEX];
    users_quota quota;
    char create_time[32];
    int64_t create_ms; /* the same to the millisecond (Unix ms); 0 in older records */
    char token_time[32];
} users_info;

typedef struct users users;

/* Read the users and start the refresh thread (a->users). */
int users_open(app *a, gb_err *err);
void users_close(users *u);
/* Read the store's users again now. */
int users_refresh(users *u, gb_err *err);

/* The role of an API user's token (http/auth.h's directory); the name is
 * copied into name. USER_ROLE_NONE when no live token matches. */
enum users_role users_token_role(users *u, const char *token, size_t len, char *name,
                                 size_t name_size);
/* name's entry (a copy): 1 found, 0 not a user. */
int users_find(users *u, const char *name, users_info *out);
/* The first admin of the token file, or NULL. */
const char *users_first_file_admin(users *u);
/* When name was made through the API, as Unix ms; 0 for a token-file user
 * or no user. What a name's earlier user left from before then (accounting,
 * events, operations) is not the caller's to read (docs/security.md,
 * "Deleting users"). */
int64_t users_created_ms(users *u, const char *name);

/* What leads from a's store handle to the shared part (keys.h's `up`):
 * "" on a single server, "../../" on a fleet node. */
const char *users_up(const app *a);

/* ---- quota values -------------------------------------------------------- */

void users_quota_unlimited(users_quota *q);
json_t *users_quota_to_json(const users_quota *q);
/* The fields of j into q (fields absent stay as they are; null lifts one).
 * ERR_INVALID_PARAMS / ERR_WRONG_TYPE naming the field. */
int users_quota_from_json(const json_t *j, users_quota *q, gb_err *err);

/* ---- the API (docs/users.md); callers are admins unless said ----------- */

int users_api_create(app *a, const json_t *body, json_t **out, gb_err *err);
int users_api_list(app *a, json_t **out, gb_err *err);
int users_api_get(app *a, const char *name, json_t **out, gb_err *err);
int users_api_patch(app *a, const char *name, const json_t *body, json_t **out, gb_err *err);
int users_api_delete(app *a, const char *name, json_t **out, gb_err *err);
int users_api_token_rotate(app *a, const char *name, json_t **out, gb_err *err);
int users_api_token_revoke(app *a, const char *name, json_t **out, gb_err *err);
int users_api_defaults_get(app *a, json_t **out, gb_err *err);
int users_api_defaults_put(app *a, const json_t *body, json_t **out, gb_err *err);
/* Any caller: who they are, their quota and what they hold. */
int users_api_whoami(app *a, json_t **out, gb_err *err);
/* Any caller (a user: only themself): accounting between from and to
 * (Unix ms; to 0 = now), for user and set (NULL = all). */
int users_api_usage(app *a, const char *user, const char *set, int64_t from_ms, int64_t to_ms,
                    json_t **out, gb_err *err);

/* user's fair-share usage (docs/users.md, "Accounting"): what the user
 * held, as cards (whole cards, plus each share of M MiB on a card of T
 * MiB as M/T of a card), integrated over time with every moment t weighted
 * by 2^(-(now - t) / half_life_s), in card-seconds; intervals still open
 * count up to now. now is Unix seconds; half_life_s > 0 (INFINITY: no
 * decay). ERR_INVALID_PARAMS for a half-life that is not positive. */
int users_fairshare_usage(app *a, const char *user, double half_life_s, double now,
                          double *out_card_seconds, gb_err *err);

/* This node's use per user, for /metrics: {user: {cardSeconds,
 * shareMiBSeconds, cards, shareMiB}} (what its sets used, and hold now). */
int users_metrics_usage(app *a, json_t **out, gb_err *err);

/* ---- the ledger (ledger.c) ---------------------------------------------- */

/* What one replica set or volume holds, as its owner's ledger counts it. */
typedef struct users_ledger_hold {
    char owner[USER_NAME_MAX + 1];
    char name[NAME_MAX_LEN + 1];
    bool volume;          /* a volume's entry, else a replica set's */
    bool exists;          /* false: the entry goes (deleted) */
    int64_t cards;        /* whole cards */
    int64_t share_mib;    /* shares' memory summed over cards */
    double share_cards;   /* the shares as cards: sum of share / card memory (0: unknown) */
    int64_t cores;        /* exclusive logical CPUs (cpuCount) */
    int64_t volume_bytes; /* a volume's size */
    bool unchecked;       /* no quota check (start-up's sync: it only writes down what is) */
    bool reserve;         /* a reservation: counted and checked, held by no record yet */
} users_ledger_hold;

/* The transaction cmps/ops on the store, with h's owner's ledger entry for
 * h->name set to h in the same transaction, the interval it held cards
 * closed into acct/ when the holding changed, and the owner's quota
 * checked when the entry grows: against check (NULL: h itself), for a
 * change whose record holds more for a moment than it will keep (the old
 * and the new version's cards during a patch). A quota passed is
 * ERR_QUOTA_EXCEEDED and nothing written. *landed as store_txn's: false
 * when cmps failed (the ledger's own compare is retried, not reported). */
int users_ledger_txn(app *a, const users_ledger_hold *h, const users_ledger_hold *check,
                     const store_cmp *cmps, size_t ncmps, const store_op *ops, size_t nops,
                     bool *landed, int64_t *revision, gb_err *err);

/* A record of kind k saved as store_json.h's records_save_plain
 * saves it, with h's ledger entry written in the same transaction
 * (users_ledger_txn; check as there). */
struct records_kind;
int users_ledger_record_save(app *a, const struct records_kind *k, const char *name,
                             const json_t *value, int64_t *mod_revision, const store_op *extra,
                             size_t nextra, const users_ledger_hold *h,
                             const users_ledger_hold *check, gb_err *err);

/* What owner holds now over the fleet; 0, or -1 when the store fails. */
typedef struct users_ledger_usage {
    int64_t cards, share_mib, instances, volume_bytes, cores;
} users_ledger_usage;
int users_ledger_usage_of(app *a, const char *owner, users_ledger_usage *u, gb_err *err);
/* Before a create takes anything from the pools: h's entry written into
 * its owner's ledger as a reservation ("reserved": true), in a transaction
 * that compares the ledger's revision and checks the quota, so that of
 * many creates at once, on any node, only those the quota allows get
 * one; the others are ERR_QUOTA_EXCEEDED having held nothing. The
 * record's own transaction (users_ledger_txn) then turns the reservation into
 * the entry of what the record holds, checked again for anything the
 * reservation did not count. *reserved: whether an entry was written
 * (false with no users, for an owner no quota limits (not a `user`, or
 * every set dimension unlimited), or when the name already has a held
 * entry: then only checked). Reserved entries count towards the quota and usage, not
 * towards card-seconds. */
int users_ledger_reserve(app *a, const users_ledger_hold *h, bool *reserved, gb_err *err);
/* Give h's reservation back: its entry goes if it is still a reservation
 * of this node (a record that took it over keeps it). A reservation a
 * crash left is removed by users_ledger_sync at the next start. */
int users_ledger_release(app *a, const users_ledger_hold *h, gb_err *err);
/* owner's entry for name (a volume's or a set's), if this node's, now
 * node's: a move undone on the node it was going to gives the entry back
 * to the node the name stays on, before its own copy goes
 * (replicaset/move_in.c). A node removes another node's entry never. */
int users_ledger_hand_over(app *a, const char *owner, bool volume, const char *name,
                           const char *node, gb_err *err);

/* Make this node's entries in every ledger agree with holds, what its
 * records hold (start-up: records from before users, and anything a store
 * outage left behind). */
int users_ledger_sync(app *a, const users_ledger_hold *holds, size_t n, gb_err *err);

#endif
