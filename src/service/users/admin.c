/*
 * admin.c - the users API (users.h, docs/users.md): an admin creates,
 * lists, changes and removes users, rotates and revokes their tokens, and
 * sets the quota new users get; anyone asks who they are.
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

static int auth_off(const app *a, gb_err *err)
{
    if (a->cfg.auth_on)
        return 0;
    return err_set(err, ERR_STATE_CONFLICT,
                   "authentication is off (gpuboxd has no --token-file), so there are no users: "
                   "start gpuboxd with a token file holding at least one admin (docs/users.md)");
}

static int users_name_check(const char *name, gb_err *err)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > USER_NAME_MAX)
        return err_set(err, ERR_INVALID_NAME, "a user name has 1 to %d characters", USER_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '@' && c != '-')
            return err_set(err, ERR_INVALID_NAME,
                           "user name '%.63s' may hold only A-Z a-z 0-9 _ . @ -", name);
    }
    return 0;
}

static int no_such_user(const char *name, gb_err *err)
{
    return err_set(err, ERR_USER_NOT_FOUND, "no user named '%.63s'", name);
}

static int find_user(app *a, const char *name, users_info *ui, gb_err *err)
{
    if (auth_off(a, err) < 0 || users_name_check(name, err) < 0)
        return -1;
    if (!users_find(a->users, name, ui))
        return no_such_user(name, err);
    return 0;
}

/* The answer for one user: the record and what they hold. */
static int users_answer(app *a, const users_info *ui, json_t **out, gb_err *err)
{
    users_ledger_usage u;
    if (users_ledger_usage_of(a, ui->name, &u, err) < 0)
        return -1;
    json_t *j = users_to_json(ui, false);
    json_object_set_new(j, "usage", users_ledger_usage_to_json(&u));
    *out = j;
    return 0;
}

/* Write ui's record if its key is still at rev (0: absent). */
static int users_write(app *a, const users_info *ui, int64_t rev, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_user(key, sizeof(key), users_up(a), ui->name);
    _cleanup_json_ json_t *j = users_to_json(ui, true);
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
    store_op op = {.kind = STORE_OP_PUT, .key = key, .value = text};
    bool ok = false;
    if (store_txn(a->store, &cmp, 1, &op, 1, &ok, NULL, err) < 0)
        return err_prefix(err, "saving user %s", ui->name);
    if (!ok)
        return err_set(err, rev ? ERR_CONFLICT : ERR_USER_EXISTS,
                       rev ? "user %s was changed by someone else meanwhile; try again"
                           : "a user named '%s' exists",
                       ui->name);
    gb_err e = GB_ERR_INIT;
    if (users_refresh(a->users, &e) < 0)
        log_warn("users: saved %s but cannot read the users again: %s", ui->name, e.msg);
    return 0;
}

/* The revision of name's record (0: none). */
static int users_rev(app *a, const char *name, int64_t *rev, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_user(key, sizeof(key), users_up(a), name);
    store_kv kv = {0};
    int found = store_get(a->store, key, &kv, err);
    *rev = found > 0 ? kv.mod_revision : 0;
    store_kv_free(&kv);
    return found < 0 ? err_prefix(err, "reading user %s", name) : 0;
}

static int body_only(const json_t *body, const char *const *fields, gb_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        bool known = false;
        for (size_t i = 0; fields[i] && !known; i++)
            known = strcmp(fields[i], k) == 0;
        if (!known)
            return err_set(err, ERR_INVALID_PARAMS, "unknown field '%.64s'", k);
    }
    return 0;
}

static int role_field(const json_t *body, bool required, enum users_role *role, gb_err *err)
{
    const char *text = NULL;
    int got = json_field_string(body, NULL, "role", &text, required, err);
    if (got <= 0)
        return got;
    *role = users_role_parse(text);
    if (*role == USER_ROLE_NONE)
        return err_set(err, ERR_INVALID_PARAMS, "role must be admin, user or viewer, not '%.32s'",
                       text);
    return 1;
}

/* A new token for ui: into token, its digest into ui. */
static int new_token(users_info *ui, char *token, size_t size, gb_err *err)
{
    if (token_new(token, size, err) < 0)
        return -1;
    token_digest(token, strlen(token), ui->digest);
    ui->has_token = true;
    time_iso_now(ui->token_time, sizeof(ui->token_time));
    return 0;
}

int users_api_create(app *a, const json_t *body, json_t **out, gb_err *err)
{
    static const char *const fields[] = {"name", "role", "quota", NULL};
    users_info ui = {0};
    const char *name = NULL;
    json_t *q = NULL;
    if (auth_off(a, err) < 0 || body_only(body, fields, err) < 0 ||
        json_field_string(body, NULL, "name", &name, true, err) < 0 ||
        users_name_check(name, err) < 0 || role_field(body, true, &ui.role, err) < 0 ||
        json_field_object(body, NULL, "quota", &q, false, err) < 0)
        return -1;
    snprintf(ui.name, sizeof(ui.name), "%s", name);
    users_defaults(a->users, &ui.quota);
    if (q && users_quota_from_json(q, &ui.quota, err) < 0)
        return -1;
    users_info existing;
    if (users_find(a->users, name, &existing))
        return err_set(err, ERR_USER_EXISTS, "a user named '%s' exists", name);
    time_iso_now(ui.create_time, sizeof(ui.create_time));
    ui.create_ms =
        users_ledger_now_ms(); /* the accounting's clock: its intervals compare with it */
    char token[TOKEN_LEN + 1] = "";
    int rc = new_token(&ui, token, sizeof(token), err) < 0 || users_write(a, &ui, 0, err) < 0 ||
                     users_answer(a, &ui, out, err) < 0
                 ? -1
                 : 0;
    if (rc == 0)
        json_object_set_new(*out, "token", json_string(token));
    token_wipe(token, sizeof(token));
    if (rc < 0)
        return -1;
    log_info("users: %s created user %s (role %s)", users_caller_owner(), ui.name,
             users_role_name(ui.role));
    return 0;
}

int users_api_list(app *a, json_t **out, gb_err *err)
{
    if (auth_off(a, err) < 0)
        return -1;
    size_t n = 0;
    _cleanup_free_ users_info *v = users_snapshot(a->users, &n);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *j = NULL;
        if (users_answer(a, &v[i], &j, err) < 0) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, j);
    }
    token_wipe(v, n * sizeof(*v));
    *out = json_pack("{s:o}", "users", list);
    return 0;
}

int users_api_get(app *a, const char *name, json_t **out, gb_err *err)
{
    users_info ui;
    if (find_user(a, name, &ui, err) < 0)
        return -1;
    return users_answer(a, &ui, out, err);
}

int users_api_patch(app *a, const char *name, const json_t *body, json_t **out, gb_err *err)
{
    static const char *const fields[] = {"role", "quota", NULL};
    users_info ui;
    enum users_role role = USER_ROLE_NONE;
    json_t *q = NULL;
    int64_t rev = 0;
    if (find_user(a, name, &ui, err) < 0 || body_only(body, fields, err) < 0)
        return -1;
    int has_role = role_field(body, false, &role, err);
    if (has_role < 0 || json_field_object(body, NULL, "quota", &q, false, err) < 0)
        return -1;
    if (has_role && ui.from_file && role != ui.role)
        return err_set(err, ERR_STATE_CONFLICT,
                       "%s comes from the token file, which gives its role: edit the file and "
                       "restart gpuboxd to change it",
                       name);
    if (has_role)
        ui.role = role;
    if (q && users_quota_from_json(q, &ui.quota, err) < 0)
        return -1;
    if (!ui.create_time[0])
        time_iso_now(ui.create_time, sizeof(ui.create_time));
    if (users_rev(a, name, &rev, err) < 0 || users_write(a, &ui, rev, err) < 0)
        return -1;
    log_info("users: %s changed user %s", users_caller_owner(), name);
    return users_answer(a, &ui, out, err);
}

/* A token-file user's token cannot be changed here. */
static int api_only(const users_info *ui, const char *what, gb_err *err)
{
    if (!ui->from_file)
        return 0;
    return err_set(err, ERR_STATE_CONFLICT,
                   "%s comes from the token file: %s it there and restart gpuboxd", ui->name, what);
}

int users_api_delete(app *a, const char *name, json_t **out, gb_err *err)
{
    users_info ui;
    users_ledger_usage u;
    if (find_user(a, name, &ui, err) < 0 || api_only(&ui, "remove", err) < 0 ||
        users_ledger_usage_of(a, name, &u, err) < 0)
        return -1;
    if (u.instances || u.volume_bytes)
        return err_set(err, ERR_STATE_CONFLICT,
                       "%s still owns %lld replica set(s) and %lld bytes of volumes; delete them "
                       "first",
                       name, (long long)u.instances, (long long)u.volume_bytes);
    char key[STORE_KEY_MAX];
    keys_user(key, sizeof(key), users_up(a), name);
    if (store_delete(a->store, key, err) < 0)
        return err_prefix(err, "removing user %s", name);
    gb_err e = GB_ERR_INIT;
    if (users_refresh(a->users, &e) < 0)
        log_warn("users: removed %s but cannot read the users again: %s", name, e.msg);
    log_info("users: %s removed user %s", users_caller_owner(), name);
    *out = json_pack("{s:s}", "name", name);
    return 0;
}

int users_api_token_rotate(app *a, const char *name, json_t **out, gb_err *err)
{
    users_info ui;
    int64_t rev = 0;
    char token[TOKEN_LEN + 1] = "";
    if (find_user(a, name, &ui, err) < 0 || api_only(&ui, "change its token", err) < 0 ||
        users_rev(a, name, &rev, err) < 0 || new_token(&ui, token, sizeof(token), err) < 0 ||
        users_write(a, &ui, rev, err) < 0) {
        token_wipe(token, sizeof(token));
        return -1;
    }
    log_info("users: %s gave user %s a new token", users_caller_owner(), name);
    *out = json_pack("{s:s, s:s}", "name", name, "token", token);
    token_wipe(token, sizeof(token));
    return 0;
}

int users_api_token_revoke(app *a, const char *name, json_t **out, gb_err *err)
{
    users_info ui;
    int64_t rev = 0;
    if (find_user(a, name, &ui, err) < 0 || api_only(&ui, "remove its line", err) < 0 ||
        users_rev(a, name, &rev, err) < 0)
        return -1;
    ui.has_token = false;
    ui.digest[0] = '\0';
    ui.token_time[0] = '\0';
    if (users_write(a, &ui, rev, err) < 0)
        return -1;
    log_info("users: %s revoked the token of user %s", users_caller_owner(), name);
    return users_answer(a, &ui, out, err);
}

int users_api_defaults_get(app *a, json_t **out, gb_err *err)
{
    if (auth_off(a, err) < 0)
        return -1;
    users_quota q;
    users_defaults(a->users, &q);
    *out = users_quota_to_json(&q);
    return 0;
}

int users_api_defaults_put(app *a, const json_t *body, json_t **out, gb_err *err)
{
    users_quota q;
    users_quota_unlimited(&q);
    if (auth_off(a, err) < 0 || users_quota_from_json(body, &q, err) < 0)
        return -1;
    char key[STORE_KEY_MAX];
    keys_quota_defaults(key, sizeof(key), users_up(a));
    _cleanup_json_ json_t *j = users_quota_to_json(&q);
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    if (store_put(a->store, key, text, NULL, err) < 0)
        return err_prefix(err, "saving the quota defaults");
    gb_err e = GB_ERR_INIT;
    if (users_refresh(a->users, &e) < 0)
        log_warn("users: saved the quota defaults but cannot read them again: %s", e.msg);
    *out = users_quota_to_json(&q);
    return 0;
}

int users_api_whoami(app *a, json_t **out, gb_err *err)
{
    const caller *c = users_caller_current();
    users_info ui = {0};
    const char *name = c ? c->name : USER_ANONYMOUS;
    bool known = a->cfg.auth_on && users_find(a->users, name, &ui);
    if (!known) {
        snprintf(ui.name, sizeof(ui.name), "%s", name);
        ui.role = c ? c->role : USER_ROLE_ADMIN;
        users_quota_unlimited(&ui.quota);
    }
    if (users_answer(a, &ui, out, err) < 0)
        return -1;
    json_object_set_new(*out, "source",
                        json_string(!a->cfg.auth_on ? "none"
                                    : ui.from_file  ? "file"
                                                    : "api"));
    json_object_del(*out, "hasToken");
    /* Whether this gpuboxd is a fleet's node: the console asks it here,
     * with the answer it needs anyway, rather than probing the fleet's
     * routes (a 404 in the browser's log on every load of a single server). */
    json_object_set_new(*out, "fleet", json_boolean(a->fleet != NULL));
    if (ui.role != USER_ROLE_USER)
        json_object_set_new(*out, "quotaApplies", json_false());
    else
        json_object_set_new(*out, "quotaApplies", json_true());
    return 0;
}
