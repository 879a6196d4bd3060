/*
 * directory.c - the users every node knows: the token file's and the
 * store's, kept in memory and read again every USERS_REFRESH_MS by a thread
 * (users.h). Lookups take the table's mutex only to copy one entry.
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

const char *users_up(const app *a)
{
    return a->cfg.node ? "../../" : "";
}

void users_quota_unlimited(users_quota *q)
{
    *q = (users_quota){QUOTA_UNLIMITED, QUOTA_UNLIMITED, QUOTA_UNLIMITED,
                       QUOTA_UNLIMITED, QUOTA_UNLIMITED, QUOTA_PRIORITY_DEFAULT};
}

/* The file's users, then the store's records over them: an API user, or a
 * file user's quota. */
static int directory_read(users *u, users_info **out, size_t *n, users_quota *defaults, gb_err *err)
{
    app *a = u->a;
    char key[STORE_KEY_MAX];
    users_quota_unlimited(defaults);
    _cleanup_json_ json_t *dj = NULL;
    keys_quota_defaults(key, sizeof(key), users_up(a));
    int found = records_get_json(a->store, key, "the quota defaults", &dj, NULL, err);
    if (found < 0)
        return -1;
    if (found && users_quota_from_json(dj, defaults, err) < 0)
        return err_prefix(err, "reading the quota defaults");

    size_t cap = a->cfg.nfile_users + 8, cnt = 0;
    users_info *v = xcalloc(cap, sizeof(*v));
    for (size_t i = 0; i < a->cfg.nfile_users; i++) {
        users_info *e = &v[cnt++];
        snprintf(e->name, sizeof(e->name), "%s", a->cfg.file_users[i].name);
        e->role = (enum users_role)a->cfg.file_users[i].role;
        e->from_file = true;
        e->quota = *defaults;
    }
    keys_user(key, sizeof(key), users_up(a), "");
    store_kvs kvs = {0};
    if (store_range(a->store, key, &kvs, err) < 0) {
        free(v);
        return err_prefix(err, "reading the users");
    }
    for (size_t i = 0; i < kvs.n; i++) {
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        users_info rec;
        if (!j || users_from_json(j, &rec, defaults) < 0) {
            log_warn("users: the record %s is not a user; it is ignored", kvs.items[i].key);
            continue;
        }
        users_info *e = NULL;
        for (size_t k = 0; k < a->cfg.nfile_users && !e; k++)
            if (strcmp(v[k].name, rec.name) == 0)
                e = &v[k];
        if (e) { /* a file user: only the quota comes from the store */
            e->quota = rec.quota;
            snprintf(e->create_time, sizeof(e->create_time), "%s", rec.create_time);
            continue;
        }
        if (rec.from_file)
            continue; /* the quota of someone no longer in the file */
        if (cnt == cap)
            v = xreallocarray(v, cap *= 2, sizeof(*v));
        v[cnt++] = rec;
    }
    store_kvs_free(&kvs);
    *out = v;
    *n = cnt;
    return 0;
}

int users_refresh(users *u, gb_err *err)
{
    users_info *v = NULL;
    size_t n = 0;
    users_quota d;
    if (directory_read(u, &v, &n, &d, err) < 0)
        return -1;
    pthread_mutex_lock(&u->mu);
    users_info *old = u->v;
    size_t old_n = u->n;
    u->v = v;
    u->n = n;
    u->defaults = d;
    pthread_mutex_unlock(&u->mu);
    if (old)
        token_wipe(old, old_n * sizeof(*old));
    free(old);
    return 0;
}

static void *directory_thread(void *arg)
{
    users *u = arg;
    pthread_mutex_lock(&u->mu);
    while (!u->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)USERS_REFRESH_MS % 1000 * 1000000L;
        until.tv_sec += USERS_REFRESH_MS / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!u->stopping && pthread_cond_timedwait(&u->cv, &u->mu, &until) != ETIMEDOUT)
            ;
        if (u->stopping)
            break;
        pthread_mutex_unlock(&u->mu);
        gb_err e = GB_ERR_INIT;
        if (users_refresh(u, &e) < 0 && !u->warned) {
            log_warn("users: cannot read the users again (%s); the last ones read stay in force",
                     e.msg);
            u->warned = true;
        } else if (e.code == ERR_OK) {
            u->warned = false;
        }
        pthread_mutex_lock(&u->mu);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

int users_open(app *a, gb_err *err)
{
    users *u = xcalloc(1, sizeof(*u));
    u->a = a;
    u->fairshare_half_life_s = USERS_FAIRSHARE_HALF_LIFE_S;
    pthread_mutex_init(&u->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cv, &ca);
    pthread_condattr_destroy(&ca);
    a->users = u;
    if (users_refresh(u, err) < 0)
        return err_prefix(err, "users");
    if (pthread_create(&u->thread, NULL, directory_thread, u) != 0)
        return err_set(err, ERR_INTERNAL, "users: cannot start the refresh thread");
    u->thread_started = true;
    return users_rollup_start(u, err);
}

void users_close(users *u)
{
    if (!u)
        return;
    if (u->thread_started) {
        pthread_mutex_lock(&u->mu);
        u->stopping = true;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        pthread_join(u->thread, NULL);
    }
    if (u->rollup_started)
        pthread_join(u->rollup_thread, NULL);
    if (u->v)
        token_wipe(u->v, u->n * sizeof(*u->v));
    free(u->v);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u);
}

enum users_role users_token_role(users *u, const char *token, size_t len, char *name,
                                 size_t name_size)
{
    char digest[TOKEN_DIGEST_HEX];
    token_digest(token, len, digest);
    enum users_role role = USER_ROLE_NONE;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n; i++) {
        if (u->v[i].has_token && strcmp(u->v[i].digest, digest) == 0) {
            role = u->v[i].role;
            snprintf(name, name_size, "%s", u->v[i].name);
            break;
        }
    }
    pthread_mutex_unlock(&u->mu);
    return role;
}

int users_find(users *u, const char *name, users_info *out)
{
    int found = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n && !found; i++) {
        if (strcmp(u->v[i].name, name) == 0) {
            *out = u->v[i];
            found = 1;
        }
    }
    pthread_mutex_unlock(&u->mu);
    return found;
}

void users_defaults(users *u, users_quota *q)
{
    pthread_mutex_lock(&u->mu);
    *q = u->defaults;
    pthread_mutex_unlock(&u->mu);
}

users_info *users_snapshot(users *u, size_t *n)
{
    pthread_mutex_lock(&u->mu);
    users_info *v = xcalloc(u->n ? u->n : 1, sizeof(*v));
    memcpy(v, u->v, u->n * sizeof(*v));
    *n = u->n;
    pthread_mutex_unlock(&u->mu);
    return v;
}

const char *users_first_file_admin(users *u)
{
    for (size_t i = 0; i < u->a->cfg.nfile_users; i++)
        if (u->a->cfg.file_users[i].role == USER_ROLE_ADMIN)
            return u->a->cfg.file_users[i].name;
    return NULL;
}

int64_t users_created_ms(users *u, const char *name)
{
    users_info ui;
    if (!u || !users_find(u, name, &ui) || ui.from_file)
        return 0;
    time_t t = ui.create_ms ? 0 : time_iso_parse(ui.create_time);
    int64_t ms = ui.create_ms ? ui.create_ms : t > 0 ? (int64_t)t * 1000 : 0;
    token_wipe(&ui, sizeof(ui));
    return ms;
}
