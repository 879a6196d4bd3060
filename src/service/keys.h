/*
 * keys.h - where gpubox's records live in the store: the one place that
 * knows the key layout (the store itself treats keys as opaque strings).
 *
 *   /gpubox/replicasets/<name>               current record of replica set <name>
 *   /gpubox/history/<name>/<N>               spec of version N, N zero-padded to 10
 *                                            digits so keys sort by version; kept as
 *                                            explicit keys so they survive compaction
 *   /gpubox/volumes/<name>                   current record of volume <name>
 *   /gpubox/volume-history/<name>/<N>        size of volume <name> at version N (N
 *                                            zero-padded to 10 digits; N starts at 1
 *                                            and grows by 1 per resize)
 *   /gpubox/operations/<id>                  journal of a multi-step operation
 *   /gpubox/health/<uuid>                    a card marked unhealthy (service/monitor)
 *   /gpubox/idle/<name>                      since when replica set <name> is idle
 *   /gpubox/images/<ref>                     who may use image reference <ref> (Docker's
 *                                            familiar form, "reg:5000/team/app:v1" or
 *                                            "app@sha256:..."), pulled with a user's own
 *                                            credentials (service/images/owners.c); no
 *                                            key: everyone
 *   /gpubox/events/<ms>-<seq>                an event (service/monitor/events.c), ms
 *                                            zero-padded to 15 digits so keys sort by time
 *   /accounts/...                            users, quotas, ledgers, accounting: the
 *                                            fleet's shared part (users/users.h)
 *
 * A replica-set record holds its allocations as fields of its JSON value
 * (the store is the one source of truth for who holds what):
 *   "gpus":  ["GPU-uuid", ...]              whole cards held
 *   "ports": [{"hostPort": 40001, ...}, ...] host ports held
 * The pools are derived from those fields at start-up (service/allocations.c).
 */
#ifndef GPUBOX_SERVICE_KEYS_H
#define GPUBOX_SERVICE_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KEYS_ROOT "/gpubox/"
#define KEYS_REPLICASETS KEYS_ROOT "replicasets/"
#define KEYS_VOLUMES KEYS_ROOT "volumes/"
#define KEYS_OPERATIONS KEYS_ROOT "operations/"
#define KEYS_HISTORY KEYS_ROOT "history/"
#define KEYS_VOLUME_HISTORY KEYS_ROOT "volume-history/"
#define KEYS_HEALTH KEYS_ROOT "health/"
#define KEYS_IDLE KEYS_ROOT "idle/"
#define KEYS_EVENTS KEYS_ROOT "events/"
#define KEYS_IMAGES KEYS_ROOT "images/"
/* Users, quotas, ledgers and accounting (users/users.h): outside KEYS_ROOT,
 * so a single server joining a fleet leaves them at the fleet's root, where
 * every node reaches them. Their functions below take `up`, what leads
 * from the caller's store handle to that root: "" on a single server,
 * "../../" on a fleet node (a relative key, store.h).
 *   /accounts/users/<name>                   a user (users/users.h)
 *   /accounts/quota-defaults                 the quota new users get
 *   /accounts/ledger/<owner>                 what owner holds now
 *   /accounts/acct/<owner>/<to ms>-<set>     one closed interval of holding cards
 *   /accounts/acctsum/<owner>                the rollup's state: folded through
 *                                            when, totals, decayed usage
 *   /accounts/acctday/<owner>/<day ms>       the rollup of one UTC day, hour by hour
 *                                            (users/rollup.c) */
#define KEYS_ACCOUNTS "/accounts/"
#define KEYS_ACCOUNTS_USERS KEYS_ACCOUNTS "users/"
#define KEYS_ACCOUNTS_DEFAULTS KEYS_ACCOUNTS "quota-defaults"
#define KEYS_ACCOUNTS_LEDGER KEYS_ACCOUNTS "ledger/"
#define KEYS_ACCOUNTS_ACCT KEYS_ACCOUNTS "acct/"
#define KEYS_ACCOUNTS_SUM KEYS_ACCOUNTS "acctsum/"
#define KEYS_ACCOUNTS_DAY KEYS_ACCOUNTS "acctday/"

/* Build a key into buf; returns buf, or NULL when it does not fit. */
/* up + the user name's key; name "" gives the prefix of every user. */
char *keys_user(char *buf, size_t size, const char *up, const char *name);
char *keys_quota_defaults(char *buf, size_t size, const char *up);
/* up + owner's ledger; owner "" gives the prefix of every ledger. */
char *keys_ledger(char *buf, size_t size, const char *up, const char *owner);
char *keys_acct(char *buf, size_t size, const char *up, const char *owner, long long to_ms,
                const char *set);
/* The prefix of owner's intervals; owner NULL: of everyone's. */
char *keys_acct_prefix(char *buf, size_t size, const char *up, const char *owner);
/* owner's rollup state; owner "" gives the prefix of everyone's. */
char *keys_acct_sum(char *buf, size_t size, const char *up, const char *owner);
/* owner's rollup of the UTC day that begins at day_ms; day_ms < 0 gives
 * the prefix of all owner's days. */
char *keys_acct_day(char *buf, size_t size, const char *up, const char *owner, long long day_ms);
/* The owner a ledger, interval or rollup key names (the segment after
 * ledger/, acct/, acctsum/ or acctday/), into owner; false when key is none. */
bool keys_account_owner(const char *key, char *owner, size_t size);
char *keys_replicaset(char *buf, size_t size, const char *name);
char *keys_replicaset_history(char *buf, size_t size, const char *name, long version);
/* "/gpubox/history/<name>/": the prefix of every version of <name>. */
char *keys_replicaset_history_prefix(char *buf, size_t size, const char *name);
char *keys_volume(char *buf, size_t size, const char *name);
char *keys_volume_history(char *buf, size_t size, const char *name, long version);
/* "/gpubox/volume-history/<name>/": the prefix of every size of <name>. */
char *keys_volume_history_prefix(char *buf, size_t size, const char *name);
char *keys_operation(char *buf, size_t size, const char *id);
char *keys_health(char *buf, size_t size, const char *uuid);
char *keys_idle(char *buf, size_t size, const char *name);
char *keys_image(char *buf, size_t size, const char *ref);
/* The <ref> of an image key (under KEYS_IMAGES); NULL for any other key. */
const char *keys_image_ref(const char *key);
char *keys_event(char *buf, size_t size, long long ms, unsigned seq);

/* True when key is a replica set's current record (not one of its history
 * entries or any other key under the prefix). */
bool keys_is_replicaset_record(const char *key);

#endif
