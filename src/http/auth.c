/*
 * auth.c - the token table, its file format, the constant-time lookup and
 * the per-request decision (see auth.h for the rules).
 *
 * The parser works on a private copy of the file's text, which holds every
 * token; that copy and the table are wiped (explicit_bzero) before they are
 * freed, so tokens do not linger in freed heap memory.
 */
#include "util/xalloc.h"
#include "http/auth.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/secret_file.h"

#define AUTH_FILE_MAX (1024 * 1024) /* AUTH_MAX_TOKENS lines of ~330 bytes fit */

typedef struct auth_entry {
    char name[AUTH_NAME_MAX + 1];
    enum http_role role;
    size_t len;                          /* the token's real length */
    unsigned char token[AUTH_TOKEN_MAX]; /* zero-padded */
} auth_entry;

struct http_auth {
    auth_entry *entries;
    size_t n;
    http_auth_directory_fn directory;
    void *directory_ctx;
};

const char *http_role_name(enum http_role role)
{
    switch (role) {
    case HTTP_ROLE_ADMIN:
        return "admin";
    case HTTP_ROLE_USER:
        return "user";
    case HTTP_ROLE_VIEWER:
        return "viewer";
    case HTTP_ROLE_NONE:
        break;
    }
    return "none";
}

void http_auth_free(http_auth *a)
{
    if (!a)
        return;
    if (a->entries)
        explicit_bzero(a->entries, a->n * sizeof(*a->entries));
    free(a->entries);
    free(a);
}

size_t http_auth_count(const http_auth *a)
{
    return a ? a->n : 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(http_auth *, http_auth_free)

static bool auth_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > AUTH_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.@-", s[i]))
            return false;
    return true;
}

/* Visible ASCII only: what an HTTP header carries without quoting. */
static bool auth_token_chars_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

static char *auth_trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* One `name:role:token` line into e. Messages never quote the role or the
 * token field: a line written in the wrong order would put a token there. */
static int auth_parse_line(char *line, const char *where, auth_entry *e, gb_err *err)
{
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: expected name:role:token (e.g. alice:admin:<32+ random characters>)",
                       where);
    size_t name_len = (size_t)(c1 - line), role_len = (size_t)(c2 - c1 - 1);
    const char *token = c2 + 1;
    size_t token_len = strlen(token);
    if (!auth_name_ok(line, name_len))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the name (first field) must be 1-%d characters of A-Z a-z 0-9 _ . @ -",
                       where, AUTH_NAME_MAX);
    if (role_len == 5 && strncmp(c1 + 1, "admin", 5) == 0)
        e->role = HTTP_ROLE_ADMIN;
    else if (role_len == 6 && strncmp(c1 + 1, "viewer", 6) == 0)
        e->role = HTTP_ROLE_VIEWER;
    else if (role_len == 4 && strncmp(c1 + 1, "user", 4) == 0)
        e->role = HTTP_ROLE_USER;
    else
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the role (second field) of '%.*s' must be admin, user or viewer", where,
                       (int)name_len, line);
    if (token_len < AUTH_TOKEN_MIN || token_len > AUTH_TOKEN_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the token of '%.*s' is %zu characters; use %d to %d (e.g. the output "
                       "of `openssl rand -hex 32`)",
                       where, (int)name_len, line, token_len, AUTH_TOKEN_MIN, AUTH_TOKEN_MAX);
    if (!auth_token_chars_ok(token, token_len))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the token of '%.*s' contains a blank, control or non-ASCII character; "
                       "tokens are visible ASCII",
                       where, (int)name_len, line);
    memcpy(e->name, line, name_len);
    e->name[name_len] = '\0';
    memcpy(e->token, token, token_len);
    e->len = token_len;
    return 0;
}

/* Names and tokens must be unique: two names for one token would make the
 * audit log lie, and two roles for one token would be ambiguous. */
static int auth_check_unique(const http_auth *a, const auth_entry *e, const char *where,
                             gb_err *err)
{
    bool same_token = false;
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->entries[i].name, e->name) == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "%s: the name '%s' is used twice; give each token its own name", where,
                           e->name);
        same_token |=
            http_auth_equal_fixed(a->entries[i].token, a->entries[i].len, e->token, e->len);
    }
    if (same_token)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: the token of '%s' is also another entry's token; tokens must differ",
                       where, e->name);
    return 0;
}

int http_auth_parse(const char *text, const char *origin, http_auth **out, gb_err *err)
{
    *out = NULL;
    _cleanup_(secret_text_free) char *copy = xstrdup(text); /* it holds every token */
    _cleanup_(http_auth_freep) http_auth *a = xcalloc(1, sizeof(*a));
    size_t cap = 0;
    int lineno = 0;
    for (char *rest = copy, *raw; (raw = strsep(&rest, "\n"));) {
        char where[300];
        snprintf(where, sizeof(where), "%s:%d", origin, ++lineno);
        char *line = auth_trim(raw);
        if (!line[0] || line[0] == '#')
            continue;
        if (a->n == AUTH_MAX_TOKENS)
            return err_set(err, ERR_INVALID_PARAMS, "%s: more than %d tokens", where,
                           AUTH_MAX_TOKENS);
        if (a->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            auth_entry *grown = xcalloc(ncap, sizeof(*grown));
            if (a->n) {
                memcpy(grown, a->entries, a->n * sizeof(*grown));
                explicit_bzero(a->entries, a->n * sizeof(*grown));
            }
            free(a->entries);
            a->entries = grown;
            cap = ncap;
        }
        auth_entry *e = &a->entries[a->n];
        if (auth_parse_line(line, where, e, err) < 0 || auth_check_unique(a, e, where, err) < 0) {
            explicit_bzero(e, sizeof(*e));
            return -1;
        }
        a->n++;
    }
    if (a->n == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s holds no token, so every request would be refused; add lines "
                       "name:role:token",
                       origin);
    *out = steal_ptr(&a);
    return 0;
}

int http_auth_load(const char *path, http_auth **out, gb_err *err)
{
    *out = NULL;
    char what[4200];
    snprintf(what, sizeof(what), "token file %s", path);
    _cleanup_(secret_text_free) char *text = NULL;
    if (secret_file_read(path, what, "it", true, AUTH_FILE_MAX, &text, err) < 0)
        return -1;
    return http_auth_parse(text, path, out, err);
}

bool http_auth_equal_fixed(const unsigned char *a, size_t a_len, const unsigned char *b,
                           size_t b_len)
{
    /* volatile keeps the compiler from ending the loop once a difference is
     * known: every byte is read whatever the inputs. */
    volatile size_t diff = a_len ^ b_len;
    for (size_t i = 0; i < AUTH_TOKEN_MAX; i++)
        diff |= (size_t)(a[i] ^ b[i]);
    return diff == 0;
}

enum http_role http_auth_lookup(const http_auth *a, const char *token, size_t len,
                                const char **name)
{
    *name = NULL;
    if (!a || !token)
        return HTTP_ROLE_NONE;
    unsigned char probe[AUTH_TOKEN_MAX] = {0};
    memcpy(probe, token, len < AUTH_TOKEN_MAX ? len : AUTH_TOKEN_MAX);
    /* Compare with every entry and pick the match with masks rather than a
     * branch, so the answer takes as long wherever (or whether) it matched. */
    size_t found = 0, any = 0;
    for (size_t i = 0; i < a->n; i++) {
        size_t mask = (size_t)0 - (size_t)http_auth_equal_fixed(a->entries[i].token,
                                                                a->entries[i].len, probe, len);
        found |= i & mask;
        any |= mask;
    }
    explicit_bzero(probe, sizeof(probe));
    if (!any)
        return HTTP_ROLE_NONE;
    *name = a->entries[found].name;
    return a->entries[found].role;
}

bool http_auth_bearer(const char *header, const char **token, size_t *len)
{
    *token = NULL;
    *len = 0;
    if (!header)
        return false;
    while (*header == ' ' || *header == '\t')
        header++;
    if (strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return false;
    const char *t = header + 6;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    if (n == 0)
        return false;
    *token = t;
    *len = n;
    return true;
}

enum http_role http_access_required(enum http_access access, const char *method)
{
    switch (access) {
    case HTTP_ACCESS_OPEN:
        return HTTP_ROLE_NONE;
    case HTTP_ACCESS_VIEWER:
        return HTTP_ROLE_VIEWER;
    case HTTP_ACCESS_USER:
        return HTTP_ROLE_USER;
    case HTTP_ACCESS_OBSERVER:
        return HTTP_ROLE_VIEWER;
    case HTTP_ACCESS_ADMIN:
        return HTTP_ROLE_ADMIN;
    case HTTP_ACCESS_BY_METHOD:
        break;
    }
    if (method && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0))
        return HTTP_ROLE_VIEWER;
    return HTTP_ROLE_USER;
}

void http_auth_entry(const http_auth *a, size_t i, const char **name, enum http_role *role)
{
    *name = a->entries[i].name;
    *role = a->entries[i].role;
}

void http_auth_set_directory(http_auth *a, http_auth_directory_fn fn, void *ctx)
{
    a->directory = fn;
    a->directory_ctx = ctx;
}

/* The role and name of a presented token: the file's first, then the
 * directory's. */
static void auth_identify(const http_auth *a, const char *token, size_t len, http_identity *who)
{
    const char *name = NULL;
    who->role = http_auth_lookup(a, token, len, &name);
    if (who->role != HTTP_ROLE_NONE)
        snprintf(who->name, sizeof(who->name), "%s", name);
    else if (a->directory)
        who->role = a->directory(a->directory_ctx, token, len, who->name, sizeof(who->name));
    if (who->role == HTTP_ROLE_NONE)
        snprintf(who->name, sizeof(who->name), "-");
    who->bad_token = who->role == HTTP_ROLE_NONE;
}

int http_auth_check(const http_auth *a, enum http_access access, const char *method,
                    const char *path, const char *authorization, http_identity *who, gb_err *err)
{
    *who = (http_identity){.name = "-", .role = HTTP_ROLE_NONE};
    if (!a) {
        *who = (http_identity){.name = "anonymous", .role = HTTP_ROLE_ADMIN};
        return 0;
    }
    /* Asked before the token: an unknown route answers 401 or 403 alike. */
    enum http_role need = http_access_required(access, method);
    const char *token = NULL;
    size_t len = 0;
    if (http_auth_bearer(authorization, &token, &len))
        auth_identify(a, token, len, who);
    if (need == HTTP_ROLE_NONE)
        return 0;
    if (!token)
        return err_set(err, ERR_UNAUTHORIZED,
                       "this route needs a token: send the header 'Authorization: Bearer <token>' "
                       "with a token from the server's --token-file");
    if (who->bad_token)
        return err_set(err, ERR_UNAUTHORIZED,
                       "the bearer token is not one this server knows; check GPUBOX_TOKEN or the "
                       "Authorization header");
    bool observer_only = access == HTTP_ACCESS_OBSERVER && who->role == HTTP_ROLE_USER;
    if (who->role < need || observer_only)
        return err_set(err, ERR_FORBIDDEN, "token '%s' has role %s; %s %.200s needs role %s",
                       who->name, http_role_name(who->role), method, path,
                       observer_only ? "viewer or admin" : http_role_name(need));
    return 0;
}
