/*
 * store_etcd_claim.c - one daemon per etcd store: the claim is the key
 * <prefix>daemon/owner (STORE_OWNER_KEY), holding the owner's identity
 * (store_owner.c), attached to a lease that a thread keeps alive.
 *
 *   claim     /v3/lease/grant {TTL}, then a txn "owner key absent -> put it
 *             with the lease" (its failure branch reads who holds it). A
 *             holder that is a gpuboxd of this host, boot and pid namespace
 *             that no longer runs (kill -9, then a restart) is replaced at
 *             once, by a put that compares the key's mod_revision; any other
 *             holder refuses the claim (ERR_CONFLICT), and its lease expires
 *             TTL seconds after its last keepalive if it is gone.
 *   keepalive every TTL/5 (every half second after a failure) through
 *             /v3/lease/keepalive; each answer extends valid_until to the
 *             moment the keepalive was sent plus the TTL granted. The lease
 *             cannot expire in etcd before that moment, so until then no
 *             other daemon can hold the store.
 *   lost      past valid_until without an answer (an etcd outage, a cut
 *             network), or when etcd says the lease is gone (revoked), or
 *             when the fence of a write (store_etcd.c) finds the owner key
 *             no longer attached to the lease: writes are refused with
 *             ERR_STORE_UNAVAILABLE, and the thread tries every second to
 *             claim again - a keepalive that succeeds while the key still
 *             carries the lease (etcd renews leases when it restarts), or a
 *             new lease and an absent-put. Both changes are logged.
 *   release   stop the thread, /v3/lease/revoke (etcd deletes the key).
 *
 * Everything below the mutex is read and changed under it; requests to
 * etcd are sent without it held.
 */
#include "util/xalloc.h"
#include "store/store_etcd_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/base64.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* How often the thread tries again after a failed keepalive, and while the
 * claim is lost. */
#define ETCD_CLAIM_RETRY_MS 1000
/* How soon a keepalive is sent again after one failed while the claim is
 * held: a lost etcd member's election (up to twice its election timeout)
 * must not use up the TTL. */
#define ETCD_KEEPALIVE_RETRY_MS 500
/* While lost, a line in the log for every this many failed re-claims. */
#define ETCD_CLAIM_LOG_EVERY 30

struct etcd_claim {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC: release wakes the thread */
    enum store_claim_state state;
    store_owner me;
    char *value;          /* me as JSON: the owner key's value */
    int ttl_s;            /* asked for */
    int64_t lease;        /* the lease the owner key is attached to; 0: none */
    int64_t granted_ttl;  /* what etcd granted, seconds */
    int64_t valid_until;  /* CLOCK_MONOTONIC ns: last keepalive sent + granted_ttl */
    bool last_ok;         /* the last keepalive was answered */
    char last_error[256]; /* why the last keepalive failed, when it did */
    char lost_why[300];
    unsigned failures; /* re-claims that failed since the claim was lost */
    bool stopping, thread_started;
    pthread_t thread;
};

/* What the owner key holds now. */
struct etcd_owner_kv {
    bool present;
    int64_t mod_revision;
    int64_t lease;
    store_owner holder; /* pid 0 when its value is not an owner's identity */
};

struct etcd_claim *etcd_claim_new(void)
{
    struct etcd_claim *c = xcalloc(1, sizeof(*c));
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void etcd_claim_free(struct etcd_claim *c)
{
    if (!c)
        return;
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c->value);
    free(c);
}

/* "<prefix>daemon/owner", for messages. */
static void etcd_claim_key_name(const struct etcd_store *es, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s", es->prefix, STORE_OWNER_KEY);
}

/* ---- leases ---------------------------------------------------------------- */

static int etcd_lease_grant(struct etcd_store *es, int ttl_s, int64_t *lease, int64_t *granted,
                            gb_err *err)
{
    _cleanup_json_ json_t *body = json_pack("{s:o}", "TTL", etcd_json_int64(ttl_s));
    _cleanup_json_ json_t *reply = NULL;
    /* A grant sent twice only makes a lease that expires unused. */
    if (etcd_client_call(es->client, "/v3/lease/grant", body, false, &reply, NULL, err) < 0)
        return err_prefix(err, "granting a lease for the claim");
    *lease = etcd_json_get_int64(reply, "ID");
    *granted = etcd_json_get_int64(reply, "TTL");
    if (*lease == 0 || *granted <= 0)
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "etcd at %s granted no lease (answer without ID or TTL)",
                       etcd_client_endpoints(es->client));
    return 0;
}

/* *ttl gets the lease's new TTL, 0 when etcd no longer has the lease. The
 * gateway answers the streaming call with {"result": {...}}, and leaves
 * out a TTL of 0. */
static int etcd_lease_keepalive(struct etcd_store *es, int64_t lease, int64_t *ttl, gb_err *err)
{
    _cleanup_json_ json_t *body = json_pack("{s:o}", "ID", etcd_json_int64(lease));
    _cleanup_json_ json_t *reply = NULL;
    if (etcd_client_call(es->client, "/v3/lease/keepalive", body, false, &reply, NULL, err) < 0)
        return -1;
    json_t *result = json_object_get(reply, "result");
    if (!json_is_object(result)) {
        const char *why =
            json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        return err_set(err, ERR_STORE_UNAVAILABLE, "etcd at %s did not renew the lease: %s",
                       etcd_client_endpoints(es->client), why ? why : "no result in its answer");
    }
    *ttl = etcd_json_get_int64(result, "TTL");
    return 0;
}

/* The seconds the lease has left; -1 when etcd cannot say. */
static int64_t etcd_lease_time_to_live(struct etcd_store *es, int64_t lease)
{
    _cleanup_json_ json_t *body = json_pack("{s:o}", "ID", etcd_json_int64(lease));
    _cleanup_json_ json_t *reply = NULL;
    gb_err ignored = GB_ERR_INIT;
    int rc =
        etcd_client_call(es->client, "/v3/lease/timetolive", body, false, &reply, NULL, &ignored);
    return rc < 0 ? -1 : etcd_json_get_int64(reply, "TTL");
}

/* Best effort: a lease that cannot be revoked expires by itself. */
static void etcd_lease_revoke(struct etcd_store *es, int64_t lease)
{
    _cleanup_json_ json_t *body = json_pack("{s:o}", "ID", etcd_json_int64(lease));
    _cleanup_json_ json_t *reply = NULL;
    gb_err e = GB_ERR_INIT;
    if (etcd_client_call(es->client, "/v3/lease/revoke", body, false, &reply, NULL, &e) < 0)
        log_debug("store: revoking lease %llx: %s", (unsigned long long)lease, e.msg);
}

/* ---- the owner key --------------------------------------------------------- */

/* The first entry of a range answer's kvs (kvs may be NULL or empty). */
static void etcd_owner_from_kvs(json_t *kvs, struct etcd_owner_kv *out)
{
    *out = (struct etcd_owner_kv){0};
    json_t *kv = json_array_get(kvs, 0);
    if (!kv)
        return;
    out->present = true;
    out->mod_revision = etcd_json_get_int64(kv, "mod_revision");
    out->lease = etcd_json_get_int64(kv, "lease");
    const char *b64 = json_string_value(json_object_get(kv, "value"));
    _cleanup_free_ char *value = NULL;
    size_t len = 0;
    if (b64 && base64_decode(b64, strlen(b64), &value, &len) == 0 && !memchr(value, '\0', len))
        store_owner_from_json(value, &out->holder);
}

static int etcd_owner_read(struct etcd_store *es, struct etcd_owner_kv *out, gb_err *err)
{
    _cleanup_json_ json_t *body =
        json_pack("{s:o}", "key", etcd_store_json_key(es, STORE_OWNER_KEY));
    _cleanup_json_ json_t *reply = NULL;
    if (etcd_client_call(es->client, "/v3/kv/range", body, false, &reply, NULL, err) < 0)
        return err_prefix(err, "reading who holds the store");
    etcd_owner_from_kvs(json_object_get(reply, "kvs"), out);
    return 0;
}

/* Put our identity into the owner key with lease, if the key is absent
 * (expect_mod 0) or still at expect_mod. *now gets the key as it is when
 * that comparison fails. */
static int etcd_owner_put(struct etcd_store *es, const char *value, int64_t lease,
                          int64_t expect_mod, bool *succeeded, struct etcd_owner_kv *now,
                          gb_err *err)
{
    json_t *cmp =
        expect_mod
            ? json_pack("{s:o, s:s, s:s, s:o}", "key", etcd_store_json_key(es, STORE_OWNER_KEY),
                        "target", "MOD", "result", "EQUAL", "mod_revision",
                        etcd_json_int64(expect_mod))
            : json_pack("{s:o, s:s, s:s, s:s}", "key", etcd_store_json_key(es, STORE_OWNER_KEY),
                        "target", "CREATE", "result", "EQUAL", "create_revision", "0");
    _cleanup_json_ json_t *body =
        json_pack("{s:[o], s:[{s:{s:o, s:o, s:o}}], s:[{s:{s:o}}]}", "compare", cmp, "success",
                  "request_put", "key", etcd_store_json_key(es, STORE_OWNER_KEY), "value",
                  etcd_json_bytes(value, strlen(value)), "lease", etcd_json_int64(lease), "failure",
                  "request_range", "key", etcd_store_json_key(es, STORE_OWNER_KEY));
    _cleanup_json_ json_t *reply = NULL;
    if (etcd_client_call(es->client, "/v3/kv/txn", body, true, &reply, NULL, err) < 0)
        return err_prefix(err, "writing the owner key");
    *succeeded = json_is_true(json_object_get(reply, "succeeded"));
    json_t *range =
        json_object_get(json_array_get(json_object_get(reply, "responses"), 0), "response_range");
    etcd_owner_from_kvs(json_object_get(range, "kvs"), now);
    return 0;
}

/* ERR_CONFLICT naming who holds the store and when that ends. */
static int etcd_claim_refused(struct etcd_store *es, const struct etcd_owner_kv *cur,
                              store_owner *holder, gb_err *err)
{
    char who[512], key[STORE_KEY_MAX + 64], expiry[96];
    *holder = cur->holder;
    store_owner_describe(&cur->holder, who, sizeof(who));
    etcd_claim_key_name(es, key, sizeof(key));
    int64_t left = cur->lease ? etcd_lease_time_to_live(es, cur->lease) : -1;
    if (!cur->lease)
        snprintf(expiry, sizeof(expiry),
                 "; the key has no lease and never expires: delete it "
                 "if no daemon uses this store");
    else if (left >= 0)
        snprintf(expiry, sizeof(expiry),
                 "; its lease expires in %lld s unless that daemon keeps "
                 "it alive",
                 (long long)left);
    else
        expiry[0] = '\0';
    return err_set(err, ERR_CONFLICT,
                   "the store etcd at %s (key %s) is in use by %s%s. Two daemons on one store "
                   "would hand out the same GPUs and ports: stop the other one, or give this one "
                   "a key prefix of its own",
                   etcd_client_endpoints(es->client), key, who, expiry);
}

/* One attempt to take the owner key with a new lease. */
static int etcd_claim_try(struct etcd_store *es, store_owner *holder, gb_err *err)
{
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    store_owner me = c->me;
    int ttl_s = c->ttl_s;
    _cleanup_free_ char *value = xstrdup(c->value);
    pthread_mutex_unlock(&c->lock);

    struct etcd_owner_kv cur;
    if (etcd_owner_read(es, &cur, err) < 0)
        return -1;
    bool takeover = cur.present && store_owner_is_gone(&cur.holder, &me);
    if (cur.present && !takeover)
        return etcd_claim_refused(es, &cur, holder, err);

    int64_t lease = 0, granted = 0, sent = time_mono_ns();
    bool ok = false;
    struct etcd_owner_kv now;
    if (etcd_lease_grant(es, ttl_s, &lease, &granted, err) < 0)
        return -1;
    if (etcd_owner_put(es, value, lease, takeover ? cur.mod_revision : 0, &ok, &now, err) < 0 ||
        !ok) {
        /* Revoked, the lease takes along a put that landed unanswered. */
        etcd_lease_revoke(es, lease);
        return ok ? -1 : etcd_claim_refused(es, &now, holder, err);
    }
    if (takeover) {
        char who[512];
        store_owner_describe(&cur.holder, who, sizeof(who));
        log_warn("store: took the store over from %s, which no longer runs", who);
    }
    pthread_mutex_lock(&c->lock);
    c->lease = lease;
    c->granted_ttl = granted;
    c->valid_until = sent + granted * 1000000000;
    c->last_ok = true;
    c->state = STORE_CLAIM_HELD;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* ---- losing and taking back ------------------------------------------------- */

/* Under c->lock: HELD -> LOST, logged once. */
static void etcd_claim_lose_locked(struct etcd_store *es, const char *why)
{
    struct etcd_claim *c = es->claim;
    if (c->state != STORE_CLAIM_HELD)
        return;
    c->state = STORE_CLAIM_LOST;
    c->failures = 0;
    snprintf(c->lost_why, sizeof(c->lost_why), "%s", why);
    char key[STORE_KEY_MAX + 64];
    etcd_claim_key_name(es, key, sizeof(key));
    log_error("store: lost the claim on etcd at %s (key %s): %s. Writes are refused until this "
              "process has claimed the store again, which it tries every second",
              etcd_client_endpoints(es->client), key, why);
}

/* Under c->lock: past valid_until, the lease may have expired in etcd and
 * another daemon may hold the store. */
static void etcd_claim_check_expiry_locked(struct etcd_store *es)
{
    struct etcd_claim *c = es->claim;
    if (c->state != STORE_CLAIM_HELD || time_mono_ns() < c->valid_until)
        return;
    char why[sizeof(c->lost_why)];
    snprintf(why, sizeof(why), "no keepalive was answered for %lld s, the lease's TTL%s%.200s%s",
             (long long)c->granted_ttl,
             c->last_ok ? "" : " (last: ", c->last_ok ? "" : c->last_error, c->last_ok ? "" : ")");
    etcd_claim_lose_locked(es, why);
}

int etcd_claim_fence(struct etcd_store *es, int64_t *lease, gb_err *err)
{
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    etcd_claim_check_expiry_locked(es);
    *lease = c->state == STORE_CLAIM_HELD ? c->lease : 0;
    bool lost = c->state == STORE_CLAIM_LOST;
    char why[sizeof(c->lost_why)];
    snprintf(why, sizeof(why), "%s", c->lost_why);
    pthread_mutex_unlock(&c->lock);
    if (!lost)
        return 0;
    return err_set(err, ERR_STORE_UNAVAILABLE,
                   "this gpuboxd lost its claim on the store (etcd at %s): %s; another daemon may "
                   "hold it now, so nothing is written until this one has claimed it again",
                   etcd_client_endpoints(es->client), why);
}

int64_t etcd_store_claim_lease(store *s)
{
    struct etcd_store *es = (struct etcd_store *)s;
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    etcd_claim_check_expiry_locked(es);
    int64_t lease = c->state == STORE_CLAIM_HELD ? c->lease : 0;
    pthread_mutex_unlock(&c->lock);
    return lease;
}

int etcd_claim_fence_failed(struct etcd_store *es, int64_t lease, json_t *reply, gb_err *err)
{
    json_t *range =
        json_object_get(json_array_get(json_object_get(reply, "responses"), 0), "response_range");
    struct etcd_owner_kv now;
    etcd_owner_from_kvs(json_object_get(range, "kvs"), &now);
    if (now.present && now.lease == lease)
        return 0;
    struct etcd_claim *c = es->claim;
    char why[sizeof(c->lost_why)], who[200];
    store_owner_describe(&now.holder, who, sizeof(who));
    if (now.present)
        snprintf(why, sizeof(why), "the owner key is held by %s", who);
    else
        snprintf(why, sizeof(why), "the owner key is gone (its lease was revoked, or it expired)");
    pthread_mutex_lock(&c->lock);
    if (c->lease == lease)
        etcd_claim_lose_locked(es, why);
    pthread_mutex_unlock(&c->lock);
    return err_set(err, ERR_STORE_UNAVAILABLE,
                   "this gpuboxd lost its claim on the store (etcd at %s): %s; nothing was "
                   "written, and nothing is until this one has claimed it again",
                   etcd_client_endpoints(es->client), why);
}

/* While lost, with the lease still alive: is the owner key still ours? */
static bool etcd_claim_still_ours(struct etcd_store *es, int64_t lease, gb_err *err)
{
    struct etcd_owner_kv cur;
    return etcd_owner_read(es, &cur, err) == 0 && cur.present && cur.lease == lease;
}

/* Keep the lease alive while held; while lost, take the claim back. */
static void etcd_claim_tick(struct etcd_store *es)
{
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    int64_t lease = c->lease;
    bool held = c->state == STORE_CLAIM_HELD;
    pthread_mutex_unlock(&c->lock);
    gb_err e = GB_ERR_INIT;

    if (lease) {
        int64_t sent = time_mono_ns(), ttl = 0;
        if (etcd_lease_keepalive(es, lease, &ttl, &e) < 0) {
            pthread_mutex_lock(&c->lock);
            c->last_ok = false;
            snprintf(c->last_error, sizeof(c->last_error), "%.255s", e.msg);
            etcd_claim_check_expiry_locked(es);
            pthread_mutex_unlock(&c->lock);
            return;
        }
        gb_err read_err = GB_ERR_INIT;
        bool ours = ttl > 0 && (held || etcd_claim_still_ours(es, lease, &read_err));
        if (ttl > 0 && !ours && read_err.code != ERR_OK)
            return; /* cannot tell yet: try again in a second */
        pthread_mutex_lock(&c->lock);
        bool changed = c->lease != lease; /* released or lost meanwhile */
        /* Lost while this keepalive was out (a write's fence failed): the
         * next tick looks at the owner key before taking it as ours. */
        bool unchecked = held && c->state == STORE_CLAIM_LOST;
        if (!changed && ours && !unchecked) {
            c->valid_until = sent + ttl * 1000000000;
            c->last_ok = true;
            if (c->state == STORE_CLAIM_LOST) {
                c->state = STORE_CLAIM_HELD;
                log_info("store: the claim on etcd at %s is this gpuboxd's again (lease %llx "
                         "outlived the outage); writes are accepted again",
                         etcd_client_endpoints(es->client), (unsigned long long)lease);
            }
        } else if (!changed && !ours) {
            etcd_claim_lose_locked(es, ttl > 0 ? "the owner key no longer carries this "
                                                 "daemon's lease"
                                               : "etcd says the lease is gone (revoked, or "
                                                 "expired)");
            c->lease = 0;
        }
        pthread_mutex_unlock(&c->lock);
        if (changed || ours)
            return;
        if (ttl > 0)
            etcd_lease_revoke(es, lease); /* alive but holding nothing */
    }

    /* Lost, with no lease: claim again. */
    store_owner holder;
    if (etcd_claim_try(es, &holder, &e) == 0) {
        log_info("store: claimed etcd at %s again (new lease); writes are accepted again",
                 etcd_client_endpoints(es->client));
        return;
    }
    pthread_mutex_lock(&c->lock);
    unsigned failures = c->failures++;
    pthread_mutex_unlock(&c->lock);
    if (failures % ETCD_CLAIM_LOG_EVERY == 0)
        log_error("store: cannot claim the store again: %s; writes stay refused", e.msg);
}

static void *etcd_claim_run(void *arg)
{
    struct etcd_store *es = arg;
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        /* A fifth of the TTL while all is well: a keepalive stuck in an
         * election (a lost member) and its retries still come before the
         * lease is in danger. */
        int64_t wait_ms = c->state != STORE_CLAIM_HELD ? ETCD_CLAIM_RETRY_MS
                          : c->last_ok                 ? c->granted_ttl * 1000 / 5
                                                       : ETCD_KEEPALIVE_RETRY_MS;
        int64_t until = time_mono_ns() + wait_ms * 1000000;
        struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
        while (!c->stopping && pthread_cond_timedwait(&c->wake, &c->lock, &ts) != ETIMEDOUT) {
        }
        if (c->stopping)
            break;
        pthread_mutex_unlock(&c->lock);
        etcd_claim_tick(es);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* ---- the store interface ---------------------------------------------------- */

int etcd_store_claim(store *s, const store_owner *me, int ttl_s, store_owner *holder, gb_err *err)
{
    struct etcd_store *es = (struct etcd_store *)s;
    struct etcd_claim *c = es->claim;
    char *value = store_owner_to_json(me);
    if (!value)
        return err_set(err, ERR_INTERNAL,
                       "etcd store: who claims it cannot be written as JSON (a name that is not "
                       "UTF-8)");
    pthread_mutex_lock(&c->lock);
    free(c->value);
    c->value = value;
    c->me = *me;
    c->ttl_s = ttl_s;
    pthread_mutex_unlock(&c->lock);
    if (etcd_claim_try(es, holder, err) < 0)
        return -1;
    int rc = pthread_create(&c->thread, NULL, etcd_claim_run, es);
    pthread_mutex_lock(&c->lock);
    c->thread_started = rc == 0;
    pthread_mutex_unlock(&c->lock);
    if (rc != 0) {
        etcd_store_release(s);
        return err_set(err, ERR_INTERNAL, "cannot start the thread that keeps the claim: %s",
                       strerror(rc));
    }
    return 0;
}

void etcd_store_release(store *s)
{
    struct etcd_store *es = (struct etcd_store *)s;
    struct etcd_claim *c = es->claim;
    pthread_mutex_lock(&c->lock);
    bool joined = c->thread_started;
    c->stopping = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    if (joined)
        pthread_join(c->thread, NULL);
    pthread_mutex_lock(&c->lock);
    int64_t lease = c->lease;
    c->lease = 0;
    c->state = STORE_CLAIM_NONE;
    c->stopping = c->thread_started = false;
    pthread_mutex_unlock(&c->lock);
    if (lease)
        etcd_lease_revoke(es, lease); /* etcd deletes the owner key with it */
}

enum store_claim_state etcd_store_claim_state(store *s)
{
    struct etcd_store *es = (struct etcd_store *)s;
    pthread_mutex_lock(&es->claim->lock);
    etcd_claim_check_expiry_locked(es);
    enum store_claim_state state = es->claim->state;
    pthread_mutex_unlock(&es->claim->lock);
    return state;
}

void etcd_store_claim_describe(store *s, char *buf, size_t size)
{
    struct etcd_store *es = (struct etcd_store *)s;
    struct etcd_claim *c = es->claim;
    char key[STORE_KEY_MAX + 64];
    etcd_claim_key_name(es, key, sizeof(key));
    pthread_mutex_lock(&c->lock);
    if (c->state == STORE_CLAIM_NONE)
        snprintf(buf, size, "not claimed");
    else
        snprintf(buf, size, "key %s, lease %llx, TTL %lld s, kept alive every %lld ms", key,
                 (unsigned long long)c->lease, (long long)c->granted_ttl,
                 (long long)(c->granted_ttl * 1000 / 5));
    pthread_mutex_unlock(&c->lock);
}
