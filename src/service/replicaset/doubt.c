/*
 * doubt.c - settling replica-set writes the store did not confirm.
 *
 * A write that fails with ERR_STORE_UNAVAILABLE may still have been applied:
 * etcd may have received it and frozen, died or lost its network before
 * answering, and an etcd that resumes processes requests still buffered on
 * a connection the client has given up on. So such a write is neither
 * "done" nor "not done", and the pools must not act as if they knew:
 *   - a create whose record transaction is in doubt keeps its GPUs and ports
 *     in the pools (the store may list them), and its record must be undone
 *     if it landed: no container was made for it;
 *   - a create whose undo is in doubt (Docker failed, then the store did)
 *     keeps them likewise until the undo is known to have landed;
 *   - a stop or delete whose record is in doubt keeps them until the store
 *     is known to no longer list them;
 *   - the first transaction of a journaled operation (journal.h) in doubt
 *     keeps what the operation took; if it landed, the operation is then
 *     finished or undone as after a crash, and if not, the pools hold
 *     again only what the record before it held.
 * Each such write becomes an entry here. It is settled, under the set's name
 * lock, by the background thread (every second while entries wait) and by
 * the next operation on the same name (replicaset_doubt_resolve), which cannot go on
 * before it is settled.
 *
 * Settling uses the fact that every record write compares the record key's
 * mod_revision with what it read (replicaset_record_save). A transaction with that
 * same comparison that re-writes the key ("the fence") either succeeds, and
 * then the write in doubt has not landed and never can (its comparison now
 * fails), or fails, and then it has landed. For a first create of a name the
 * key was absent before, and etcd keeps no trace of an absent key, so the
 * fence is a tombstone: a deleted record at version 0, which holds nothing
 * and which the queries treat as absent (replicaset_record_is_tombstone).
 *
 * The entries live in a list under a mutex: there are none outside an
 * outage, and a handful during one.
 */
#include "util/xalloc.h"
#include "service/replicaset/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/journal.h"
#include "service/keys.h"
#include "service/namelock.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

#define RS_DOUBT_INTERVAL_S 1

typedef struct replicaset_doubt {
    struct replicaset_doubt *next;
    enum replicaset_doubt_kind kind;
    char name[NAME_MAX_LEN + 1];
    int version;          /* the version whose write is in doubt */
    int64_t expected_rev; /* the record key's mod_revision if the write has not landed */
    char *fence;          /* CREATE: what the key held before, or a tombstone; RELEASE: the
                             record as it was */
    char *previous;       /* CREATE, CREATE_UNDO: the record before the create, NULL if none;
                             OPERATION: the record before the operation */
    char *held;           /* JSON of the record whose GPUs and ports the pools hold */
} replicaset_doubt;

struct replicaset_doubts {
    pthread_mutex_t lock; /* guards head and stopping */
    pthread_cond_t wake;
    replicaset_doubt *head; /* oldest first */
    bool stopping;
    bool started;
    pthread_t thread;
};

static void replicaset_doubt_free(replicaset_doubt *d)
{
    if (!d)
        return;
    free(d->fence);
    free(d->previous);
    free(d->held);
    free(d);
}

static char *replicaset_record_dump(const replicaset_record *r)
{
    _cleanup_json_ json_t *j = replicaset_record_to_json(r);
    return j ? json_dumps(j, JSON_COMPACT) : NULL;
}

/* A deleted record at version 0: holds nothing, has no history, and the
 * next create of the name starts at version 1 over it. */
static char *replicaset_tombstone_dump(const replicaset_record *r)
{
    replicaset_record t = {.version = 0, .state = RS_STATE_DELETED, .spec = r->spec};
    memcpy(t.name, r->name, sizeof(t.name));
    time_iso_now(t.update_time, sizeof(t.update_time));
    memcpy(t.create_time, t.update_time, sizeof(t.create_time));
    return replicaset_record_dump(&t);
}

void replicaset_doubt_hold(app *a, enum replicaset_doubt_kind kind, const replicaset_record *r,
                           const char *previous)
{
    replicaset_doubt *d = xcalloc(1, sizeof(*d));
    if (d) {
        d->kind = kind;
        memcpy(d->name, r->name, sizeof(d->name));
        d->version = r->version;
        d->expected_rev = r->mod_revision;
        d->held = replicaset_record_dump(r);
        d->previous = previous ? xstrdup(previous) : NULL;
        if (kind == RS_DOUBT_CREATE)
            d->fence = previous ? xstrdup(previous) : replicaset_tombstone_dump(r);
        else if (kind == RS_DOUBT_RELEASE)
            d->fence = d->held ? xstrdup(d->held) : NULL;
        else if (kind == RS_DOUBT_OPERATION)
            d->fence = previous ? xstrdup(previous) : NULL;
    }
    if (!d || !d->held || (previous && !d->previous) ||
        (kind != RS_DOUBT_CREATE_UNDO && !d->fence)) {
        /* Keeping the GPUs held is the safe side: the worst case is a card
         * idle until the next start-up derives the pools again. */
        log_error("replica set %s: out of memory remembering a write the store did not confirm; "
                  "its GPUs and ports stay held until gpuboxd restarts",
                  r->name);
        replicaset_doubt_free(d);
        return;
    }
    struct replicaset_doubts *s = a->doubts;
    if (!s) {
        log_error("replica set %s: the store did not confirm a write and nothing settles it "
                  "now; its GPUs and ports stay held until gpuboxd restarts",
                  r->name);
        replicaset_doubt_free(d);
        return;
    }
    pthread_mutex_lock(&s->lock);
    replicaset_doubt **tail = &s->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = d;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    log_warn("replica set %s: the store did not confirm a write for version %d; its GPUs and "
             "ports stay held until gpuboxd has settled it with the store",
             r->name, r->version);
}

/* Give back what d's record holds (the store no longer lists it). */
static void replicaset_doubt_give_back(app *a, const replicaset_doubt *d)
{
    _cleanup_json_ json_t *j = json_loads(d->held, 0, NULL);
    _cleanup_(replicaset_record_free) replicaset_record held = {0};
    gb_err e = GB_ERR_INIT;
    if (!j || replicaset_record_from_json(j, &held, &e) < 0) {
        log_error("replica set %s: cannot read back what it held (%s); it stays held until "
                  "gpuboxd restarts",
                  d->name, e.msg);
        return;
    }
    replicaset_alloc_give_back(a, &held);
}

/* A create that never reached the store: its owner's quota reservation
 * (create.c, step 1b) goes too. */
static void replicaset_doubt_release_quota(app *a, const replicaset_doubt *d)
{
    _cleanup_json_ json_t *j = json_loads(d->held, 0, NULL);
    _cleanup_(replicaset_record_free) replicaset_record held = {0};
    gb_err e = GB_ERR_INIT;
    if (j && replicaset_record_from_json(j, &held, &e) == 0)
        replicaset_create_quota_release(a, &held);
}

/* One transaction on d's record key, if its mod_revision is still
 * expected: 1 applied, 0 the key had changed, -1 the store failed. */
static int replicaset_doubt_txn(app *a, const replicaset_doubt *d, const store_op *ops, size_t nops,
                                gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), d->name);
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = d->expected_rev};
    bool ok = false;
    if (store_txn(a->store, &cmp, 1, ops, nops, &ok, NULL, err) < 0)
        return -1;
    return ok;
}

/* Undo a create's record and history entry (both landed). */
static int replicaset_doubt_undo_create(app *a, replicaset_doubt *d, gb_err *err)
{
    char key[STORE_KEY_MAX], hkey[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), d->name);
    keys_replicaset_history(hkey, sizeof(hkey), d->name, d->version);
    store_op ops[2] = {{.kind = STORE_OP_DELETE, .key = hkey}};
    ops[1] = d->previous ? (store_op){.kind = STORE_OP_PUT, .key = key, .value = d->previous}
                         : (store_op){.kind = STORE_OP_DELETE, .key = key};
    int applied = replicaset_doubt_txn(a, d, ops, 2, err);
    if (applied < 0)
        return -1;
    /* Not applied: the key changed after the record was read, which only
     * the undo in doubt itself can have done (the name lock is held). */
    replicaset_doubt_give_back(a, d);
    log_info("replica set %s: undid the create of version %d that the store outage cut off; "
             "gave back its GPUs and ports",
             d->name, d->version);
    return 0;
}

/* Put the fence over the set's record if the record is still at the
 * revision it had before the write in doubt: 1 the write never landed (and
 * now never can: the fence moved the revision on), 0 it landed, -1 error. */
static int replicaset_doubt_fence(app *a, replicaset_doubt *d, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), d->name);
    store_op fence = {.kind = STORE_OP_PUT, .key = key, .value = d->fence};
    return replicaset_doubt_txn(a, d, &fence, 1, err);
}

static int replicaset_doubt_settle_create(app *a, replicaset_doubt *d, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), d->name);
    int not_landed = replicaset_doubt_fence(a, d, err);
    if (not_landed < 0)
        return -1;
    if (not_landed) {
        replicaset_doubt_give_back(a, d);
        replicaset_doubt_release_quota(a, d);
        log_info("replica set %s: the create of version %d that the store outage cut off never "
                 "reached the store; gave back its GPUs and ports",
                 d->name, d->version);
        return 0;
    }
    /* It landed: the record is the create's, at whatever revision now. */
    _cleanup_(store_kv_free) store_kv kv = {0};
    int found = store_get(a->store, key, &kv, err);
    if (found < 0)
        return -1;
    if (!found) {
        replicaset_doubt_give_back(a, d);
        replicaset_doubt_release_quota(a, d);
        return 0;
    }
    d->kind = RS_DOUBT_CREATE_UNDO;
    d->expected_rev = kv.mod_revision;
    return replicaset_doubt_undo_create(a, d, err);
}

static int replicaset_doubt_settle_release(app *a, replicaset_doubt *d, gb_err *err)
{
    int not_landed = replicaset_doubt_fence(a, d, err);
    if (not_landed < 0)
        return -1;
    if (not_landed) {
        log_info("replica set %s: the change of version %d that the store outage cut off never "
                 "reached the store; the set keeps its GPUs and ports (try the change again)",
                 d->name, d->version);
        return 0;
    }
    replicaset_doubt_give_back(a, d);
    log_info("replica set %s: the change that the store outage cut off did reach the store; "
             "gave back its GPUs and ports",
             d->name);
    return 0;
}

/* Read a record dumped by replicaset_record_dump; -1 (logged) when it does not read. */
static int replicaset_doubt_record(const replicaset_doubt *d, const char *text,
                                   replicaset_record *out)
{
    _cleanup_json_ json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    gb_err e = GB_ERR_INIT;
    if (!j || replicaset_record_from_json(j, out, &e) < 0) {
        log_error("replica set %s: cannot read back a record (%s)", d->name, e.msg);
        return -1;
    }
    return 0;
}

static int replicaset_doubt_settle_operation(app *a, replicaset_doubt *d, gb_err *err)
{
    int not_landed = replicaset_doubt_fence(a, d, err);
    if (not_landed < 0)
        return -1;
    if (not_landed) {
        /* Nothing of it is in the store: the pools hold what the record
         * before it held, exactly (what it took goes back). */
        _cleanup_(replicaset_record_free) replicaset_record held = {0}, before = {0};
        if (replicaset_doubt_record(d, d->held, &held) == 0 &&
            replicaset_doubt_record(d, d->fence, &before) == 0)
            replicaset_alloc_swap_back(a, &held, &before);
        log_info("replica set %s: the change of version %d that the store outage cut off never "
                 "reached the store; nothing changed (try it again)",
                 d->name, d->version);
        return 0;
    }
    /* It landed: the operation is in the journal, unfinished. */
    _cleanup_(replicaset_record_free) replicaset_record cur = {0};
    int found = replicaset_record_load(a->store, d->name, &cur, err);
    if (found < 0)
        return -1;
    if (!found || !cur.operation[0])
        return 0;
    journal_op op = {0};
    found = journal_load(a->store, cur.operation, &op, err);
    if (found < 0)
        return -1;
    gb_err e = GB_ERR_INIT;
    int rc = found && op.state == JOURNAL_RUNNING ? op_resume(a, &op, &cur, &e) : 0;
    journal_op_free(&op);
    if (rc < 0 && e.code == ERR_STORE_UNAVAILABLE) {
        *err = e;
        return -1;
    }
    /* Settled or not, it is an unfinished operation like any other now:
     * the next call on the set tries again (replicaset_load_settled). */
    log_info("replica set %s: the change that the store outage cut off did reach the store; %s",
             d->name, rc == 0 ? "carried it through" : e.msg);
    return 0;
}

static int replicaset_doubt_settle(app *a, replicaset_doubt *d, gb_err *err)
{
    switch (d->kind) {
    case RS_DOUBT_CREATE:
        return replicaset_doubt_settle_create(a, d, err);
    case RS_DOUBT_CREATE_UNDO:
        return replicaset_doubt_undo_create(a, d, err);
    case RS_DOUBT_RELEASE:
        return replicaset_doubt_settle_release(a, d, err);
    case RS_DOUBT_OPERATION:
        return replicaset_doubt_settle_operation(a, d, err);
    }
    return 0;
}

/* Unlink the oldest entry for name (NULL if none). */
static replicaset_doubt *replicaset_doubt_take(struct replicaset_doubts *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    replicaset_doubt *found = NULL;
    for (replicaset_doubt **p = &s->head; *p; p = &(*p)->next) {
        if (strcmp((*p)->name, name) == 0) {
            found = *p;
            *p = found->next;
            found->next = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* Put d back at the head: it stays the oldest for its name. The thread may
 * have found the list empty meanwhile (d was out) and gone to sleep. */
static void replicaset_doubt_put_back(struct replicaset_doubts *s, replicaset_doubt *d)
{
    pthread_mutex_lock(&s->lock);
    d->next = s->head;
    s->head = d;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

int replicaset_doubt_resolve(app *a, const char *name, gb_err *err)
{
    replicaset_doubt *d;
    while (a->doubts && (d = replicaset_doubt_take(a->doubts, name))) {
        gb_err e = GB_ERR_INIT;
        if (replicaset_doubt_settle(a, d, &e) < 0) {
            log_debug("replica set %s: cannot settle yet: %s", name, e.msg);
            replicaset_doubt_put_back(a->doubts, d);
            return err_set(err, e.code,
                           "an earlier change to replica set '%s' was cut off by a store outage "
                           "and is not settled yet (%s); try again when the store answers",
                           name, e.msg);
        }
        replicaset_doubt_free(d);
    }
    return 0;
}

/* The names with entries now (a copy: settling takes name locks, which
 * must not be waited for under s->lock). */
static size_t replicaset_doubt_names(struct replicaset_doubts *s, char (**names)[NAME_MAX_LEN + 1])
{
    size_t n = 0;
    for (replicaset_doubt *d = s->head; d; d = d->next)
        n++;
    *names = n ? xcalloc(n, sizeof(**names)) : NULL;
    if (!*names)
        return 0;
    size_t i = 0;
    for (replicaset_doubt *d = s->head; d; d = d->next)
        memcpy((*names)[i++], d->name, sizeof((*names)[0]));
    return n;
}

static void *replicaset_doubt_thread(void *arg)
{
    app *a = arg;
    struct replicaset_doubts *s = a->doubts;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (!s->head) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        /* Let the store come back before asking it again. */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += RS_DOUBT_INTERVAL_S;
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
        if (s->stopping)
            break;
        char(*names)[NAME_MAX_LEN + 1] = NULL;
        size_t n = replicaset_doubt_names(s, &names);
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < n; i++) {
            namelock *l = namelock_acquire(a->locks, "rs", names[i]);
            if (l) {
                replicaset_doubt_resolve(a, names[i], NULL);
                namelock_release(l);
            }
        }
        free(names);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int replicaset_doubt_start(app *a, gb_err *err)
{
    struct replicaset_doubts *s = xcalloc(1, sizeof(*s));
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    a->doubts = s;
    int rc = pthread_create(&s->thread, NULL, replicaset_doubt_thread, a);
    if (rc != 0)
        return err_set(err, ERR_INTERNAL, "cannot start the thread that settles cut-off writes: %s",
                       strerror(rc));
    s->started = true;
    return 0;
}

void replicaset_doubt_stop(app *a)
{
    struct replicaset_doubts *s = a->doubts;
    if (!s)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    while (s->head) {
        replicaset_doubt *d = s->head;
        s->head = d->next;
        log_warn("replica set %s: a write cut off by the store outage is not settled; the next "
                 "start-up reconciles the set with what the store holds",
                 d->name);
        replicaset_doubt_free(d);
    }
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
    a->doubts = NULL;
}

int replicaset_doubt_begin_failed(app *a, const replicaset_record *before,
                                  const replicaset_record *after, gb_err *err)
{
    if (!err || err->code != ERR_STORE_UNAVAILABLE)
        return -1;
    _cleanup_json_ json_t *j = replicaset_record_to_json(before);
    _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text)
        replicaset_doubt_hold(a, RS_DOUBT_OPERATION, after, text);
    else
        log_error("replica set %s: out of memory remembering a write the store did not confirm; "
                  "what it holds stays held until gpuboxd restarts",
                  after->name);
    return err_prefix(err,
                      "replica set '%s': the store did not confirm the start of the change; "
                      "gpuboxd carries it out or forgets it by itself once the store answers "
                      "(what the set holds stays held until then)",
                      after->name);
}
