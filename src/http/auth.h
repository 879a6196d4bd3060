/*
 * auth.h - who may call the API: bearer tokens from a file, each with a name
 * and a role, and the decision for one request.
 *
 * The token file (--token-file) holds one token per line as
 * `name:role:token`; `#` starts a comment line, blank lines are ignored.
 * Roles: `admin` may call every route, `user` the reading ones and the
 * changing ones that are not an admin's alone (the service layer then lets
 * them see and change only what they own, docs/users.md), `viewer` only the
 * reading ones (see enum http_access in router.h).
 *
 * Beside the file, a directory (http_auth_set_directory) may know more
 * tokens: the users an admin made through the API, which the service layer
 * keeps hashed in the store. The file is asked first. The file must not be readable or writable
 * by other users, and every line must be well formed, or the daemon does not
 * start: a half-read token file would lock out (or let in) the wrong people.
 *
 * Tokens are secrets. They are compared in constant time (every configured
 * token is compared over a fixed length, with no early exit, so the time an
 * answer takes says nothing about how much of a guess was right), they are
 * never copied into error messages or logs (the token's name stands for
 * it), and their memory is wiped when the table is freed.
 *
 * Layout: one array of entries, each holding its name, its role and its
 * token zero-padded to AUTH_TOKEN_MAX bytes plus its real length. The table
 * is built at start-up and only read afterwards, so lookups need no lock.
 */
#ifndef GPUBOX_HTTP_AUTH_H
#define GPUBOX_HTTP_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "http/router.h"
#include "util/err.h"

#define AUTH_TOKEN_MIN 16  /* shorter tokens are refused: too easy to guess */
#define AUTH_TOKEN_MAX 256 /* longer ones too: the compare covers this many bytes */
#define AUTH_NAME_MAX 63
#define AUTH_MAX_TOKENS 1024

/* Ordered: a role may call what a lower one may, except that a user may not
 * read what only observers read (HTTP_ACCESS_OBSERVER). */
enum http_role { HTTP_ROLE_NONE = 0, HTTP_ROLE_VIEWER, HTTP_ROLE_USER, HTTP_ROLE_ADMIN };

typedef struct http_auth http_auth;

/* Read and check a token file: a regular file with no permission bits for
 * other users, at least one token, every line well formed, names and tokens
 * unique. Errors (ERR_INVALID_PARAMS) name the file and line, never the token. */
int http_auth_load(const char *path, http_auth **out, gb_err *err);
/* The same from text (origin names it in messages); for tests and fuzzing. */
int http_auth_parse(const char *text, const char *origin, http_auth **out, gb_err *err);
void http_auth_free(http_auth *a);
size_t http_auth_count(const http_auth *a);
/* Entry i (< http_auth_count) of the file: its name and role, not its token. */
void http_auth_entry(const http_auth *a, size_t i, const char **name, enum http_role *role);

/* More tokens than the file's: fn answers the role of token[0..len) and
 * copies its name into name (name_size bytes), or answers HTTP_ROLE_NONE.
 * It is asked only when no token of the file matches, from any thread. */
typedef enum http_role (*http_auth_directory_fn)(void *ctx, const char *token, size_t len,
                                                 char *name, size_t name_size);
void http_auth_set_directory(http_auth *a, http_auth_directory_fn fn, void *ctx);

/* The entry whose token equals token[0..len), in constant time over the
 * whole table. Returns its role and sets *name (borrowed from the table), or
 * HTTP_ROLE_NONE (and *name NULL) when no token matches. */
enum http_role http_auth_lookup(const http_auth *a, const char *token, size_t len,
                                const char **name);

/* The token of an "Authorization: Bearer <token>" header value (scheme case
 * insensitive, surrounding blanks ignored). Returns false when the header is
 * absent, of another scheme, or empty. *token points into header. */
bool http_auth_bearer(const char *header, const char **token, size_t *len);

/* Fixed-length, branch-free compare: a (a_len bytes) equals b (b_len
 * bytes)? Reads AUTH_TOKEN_MAX bytes of each padded buffer whatever the
 * lengths, so both must be AUTH_TOKEN_MAX bytes long. */
bool http_auth_equal_fixed(const unsigned char *a, size_t a_len, const unsigned char *b,
                           size_t b_len);

/* The role a route's access asks of a caller with this method;
 * HTTP_ROLE_NONE means no token is needed. When no route matched (a 404 or
 * 405 will follow) pass HTTP_ACCESS_VIEWER: unauthenticated callers cannot
 * map the API. */
enum http_role http_access_required(enum http_access access, const char *method);

/* The outcome of one request's check. */
typedef struct http_identity {
    char name[AUTH_NAME_MAX + 1]; /* token name, "anonymous" (auth off), "-" (no valid token) */
    enum http_role role;          /* what the caller is */
    bool bad_token;               /* a token was sent but is unknown (for WWW-Authenticate) */
} http_identity;

/* Decide one request to path with method, on a route of this access. a
 * NULL means authentication is off: everyone is an anonymous admin.
 * authorization is the Authorization header (NULL when absent). Returns 0
 * when the caller may go on, or -1 with ERR_UNAUTHORIZED (no token or an
 * unknown one) or ERR_FORBIDDEN (the role may not); *who is filled either
 * way, for the audit log. */
int http_auth_check(const http_auth *a, enum http_access access, const char *method,
                    const char *path, const char *authorization, http_identity *who, gb_err *err);

const char *http_role_name(enum http_role role);

#endif
