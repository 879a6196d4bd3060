/*
 * cmd_users.c - users, quotas and accounting (docs/users.md):
 *   gpubox whoami                      GET    /api/v1/whoami
 *   gpubox users                       GET    /api/v1/users
 *   gpubox user create NAME --role R   POST   /api/v1/users
 *   gpubox user set NAME ...           PATCH  /api/v1/users/{name}
 *   gpubox user rm NAME                DELETE /api/v1/users/{name}
 *   gpubox user token NAME             POST   /api/v1/users/{name}/token
 *   gpubox user revoke NAME            DELETE /api/v1/users/{name}/token
 *   gpubox quota defaults [...]        GET (and PUT) /api/v1/quotas/defaults
 *   gpubox usage [--user U] ...        GET    /api/v1/usage
 *
 * A quota is {cards, shareMiB, instances, volumeBytes}; a field absent or
 * null is unlimited, shown as "-" and given as "none". Every option value
 * is checked here before anything is sent (a usage error, exit 2).
 *
 * A token is shown only in the answer to a create or a rotation: it goes
 * alone on a line of stdout (so `TOKEN=$(gpubox user create ...)` works)
 * and a line on stderr says it will not be shown again.
 *
 * The shapes of the answers are docs/users.md's; where it leaves the
 * wrapping open (a user alone or as {"user": ...}, the defaults alone or as
 * {"quota": ...}) both are read.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/size.h"
#include "util/xalloc.h"

#define USERS_BASE "/api/v1/users"
#define DEFAULTS_PATH "/api/v1/quotas/defaults"
#define MIB (1024ULL * 1024)
/* The largest count a quota takes from the command line: far above any
 * host, well inside a JSON integer. */
#define QUOTA_COUNT_MAX 1000000000LL
/* maxPriority: queue priorities run 0-100 (docs/queue.md). */
#define QUOTA_PRIORITY_MAX 100

/* The quota fields, in the order they are shown, with the option that
 * sets each and what they count. */
static const struct {
    const char *field;  /* in the API */
    const char *label;  /* in the tables of people */
    const char *option; /* on the command line */
    enum cli_quota_kind kind;
} quota_fields[] = {
    {"cards", "cards", "cards", CLI_QUOTA_COUNT},
    {"shareMiB", "share", "share-mib", CLI_QUOTA_MIB},
    {"instances", "instances", "instances", CLI_QUOTA_COUNT},
    {"volumeBytes", "volumes", "volume-bytes", CLI_QUOTA_BYTES},
};

/* ---- values ---- */

void cli_quota_text(const json_t *value, enum cli_quota_kind kind, char *buf, size_t size)
{
    if (!value || json_is_null(value)) {
        snprintf(buf, size, "-");
        return;
    }
    if (json_is_string(value)) { /* "500GB": in the units of the rest */
        uint64_t bytes;
        gb_err err = GB_ERR_INIT;
        if (kind == CLI_QUOTA_BYTES && size_parse(json_string_value(value), &bytes, &err) == 0)
            size_format(bytes, buf, size);
        else
            snprintf(buf, size, "%s", json_string_value(value));
        return;
    }
    if (!json_is_number(value)) {
        snprintf(buf, size, "?");
        return;
    }
    double v = json_number_value(value);
    if (v < 0 || (kind == CLI_QUOTA_COUNT && !json_is_integer(value))) { /* shown as it is */
        snprintf(buf, size, "%g", v);
        return;
    }
    if (v == 0) { /* "0", not "0B" */
        snprintf(buf, size, "0");
        return;
    }
    switch (kind) {
    case CLI_QUOTA_COUNT:
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        break;
    case CLI_QUOTA_MIB:
        size_format((uint64_t)v * MIB, buf, size);
        break;
    case CLI_QUOTA_BYTES:
        size_format((uint64_t)v, buf, size);
        break;
    }
}

void cli_quota_cell(const json_t *used, const json_t *quota, enum cli_quota_kind kind, char *buf,
                    size_t size)
{
    char u[32], q[32];
    if (used)
        cli_quota_text(used, kind, u, sizeof(u));
    else
        snprintf(u, sizeof(u), "?"); /* an answer without the usage */
    cli_quota_text(quota, kind, q, sizeof(q));
    snprintf(buf, size, "%s/%s", u, q);
}

int cli_check_role(const char *role, char *msg, size_t size)
{
    if (!strcmp(role, "admin") || !strcmp(role, "user") || !strcmp(role, "viewer"))
        return 0;
    snprintf(msg, size, "--role must be admin, user or viewer, got '%s'", role);
    return CLI_EXIT_USAGE;
}

/* A count: a whole number 0 or more. */
static int quota_count(const char *opt, const char *text, json_t **out, char *msg, size_t size)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!text[0] || *end || errno || v < 0 || v > QUOTA_COUNT_MAX) {
        snprintf(msg, size,
                 "--%s must be a whole number from 0 to %lld, or none (unlimited); got '%s'", opt,
                 QUOTA_COUNT_MAX, text);
        return CLI_EXIT_USAGE;
    }
    *out = json_integer(v);
    return 0;
}

/* A size ("16GB", or a number of bytes) as bytes, or as whole MiB. */
static int quota_size(const char *opt, const char *text, bool mib, json_t **out, char *msg,
                      size_t size)
{
    uint64_t bytes;
    gb_err err = GB_ERR_INIT;
    if (size_parse(text, &bytes, &err) != 0) {
        snprintf(msg, size, "--%s: %s; or none (unlimited)", opt, err.msg);
        return CLI_EXIT_USAGE;
    }
    if (mib && bytes % MIB) {
        snprintf(msg, size,
                 "--%s '%s' is not a whole number of MiB; give it like \"16GB\" or \"512MB\"", opt,
                 text);
        return CLI_EXIT_USAGE;
    }
    *out = json_integer((json_int_t)(mib ? bytes / MIB : bytes));
    return 0;
}

int cli_quota_flags(const cli_args *a, json_t *quota, char *msg, size_t size)
{
    static const struct {
        const char *option, *field;
        enum cli_quota_kind kind; /* COUNT: a whole number; MIB, BYTES: a size */
    } options[] = {
        {"cards", "cards", CLI_QUOTA_COUNT},
        {"share-mib", "shareMiB", CLI_QUOTA_COUNT},
        {"share", "shareMiB", CLI_QUOTA_MIB},
        {"instances", "instances", CLI_QUOTA_COUNT},
        {"volume-bytes", "volumeBytes", CLI_QUOTA_BYTES},
        {"cores", "cores", CLI_QUOTA_COUNT},
        {"max-priority", "maxPriority", CLI_QUOTA_COUNT},
    };
    if (cli_get(a, "share") && cli_get(a, "share-mib")) {
        snprintf(msg, size, "give --share or --share-mib, not both");
        return -1;
    }
    int given = 0;
    for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
        const char *text = cli_get(a, options[i].option);
        if (!text)
            continue;
        json_t *value = NULL;
        int rc = 0;
        if (!strcmp(text, "none"))
            value = json_null();
        else if (options[i].kind == CLI_QUOTA_COUNT)
            rc = quota_count(options[i].option, text, &value, msg, size);
        else
            rc = quota_size(options[i].option, text, options[i].kind == CLI_QUOTA_MIB, &value, msg,
                            size);
        if (rc == 0 && json_is_integer(value) && !strcmp(options[i].option, "max-priority") &&
            json_integer_value(value) > QUOTA_PRIORITY_MAX) {
            json_decref(value);
            rc = CLI_EXIT_USAGE;
        }
        if (rc && !strcmp(options[i].option, "max-priority"))
            snprintf(msg, size,
                     "--max-priority must be a whole number from 0 to %d, or none (any); got '%s'",
                     QUOTA_PRIORITY_MAX, text);
        if (rc)
            return -1;
        json_object_set_new(quota, options[i].field, value);
        given++;
    }
    return given;
}

int cli_user_body(const cli_args *a, bool create, json_t **out, char *msg, size_t size)
{
    const char *role = cli_get(a, "role");
    if (create && !role) {
        snprintf(msg, size, "--role is required: admin, user or viewer");
        return CLI_EXIT_USAGE;
    }
    if (role && cli_check_role(role, msg, size))
        return CLI_EXIT_USAGE;
    _cleanup_json_ json_t *quota = json_object();
    int given = cli_quota_flags(a, quota, msg, size);
    if (given < 0)
        return CLI_EXIT_USAGE;
    if (!create && !role && given == 0) {
        snprintf(msg, size,
                 "nothing to change: give --role, or a quota option (--cards, --share-mib or "
                 "--share, --instances, --volume-bytes, --cores, --max-priority)");
        return CLI_EXIT_USAGE;
    }
    json_t *body = json_object();
    if (create)
        json_object_set_new(body, "name", json_string(a->pos[0]));
    if (role)
        json_object_set_new(body, "role", json_string(role));
    if (given)
        json_object_set(body, "quota", quota);
    *out = body;
    return 0;
}

void cli_hours(double seconds, double per, char *buf, size_t size)
{
    double hours = seconds / per / 3600.0;
    if (hours > 0 && hours < 0.005)
        snprintf(buf, size, "<0.01");
    else
        snprintf(buf, size, "%.2f", hours);
}

/* ---- whoami ---- */

/* RESOURCE USED QUOTA, a row a quota field; used NULL: no USED column. */
static void quota_table(cli_ctx *ctx, const json_t *used, const json_t *quota)
{
    static const char *const with_used[] = {"RESOURCE", "USED", "QUOTA", NULL};
    static const char *const quota_only[] = {"RESOURCE", "QUOTA", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(used ? with_used : quota_only);
    _cleanup_json_ json_t *zero = json_integer(0);
    for (size_t i = 0; i < ARRAY_SIZE(quota_fields); i++) {
        char u[32], q[32];
        if (used) { /* a field left out: none used */
            json_t *v = json_object_get(used, quota_fields[i].field);
            cli_quota_text(v ? v : zero, quota_fields[i].kind, u, sizeof(u));
        }
        cli_quota_text(json_object_get(quota, quota_fields[i].field), quota_fields[i].kind, q,
                       sizeof(q));
        const char *row_used[] = {quota_fields[i].label, u, q};
        const char *row_quota[] = {quota_fields[i].label, q};
        cli_table_add(t, used ? row_used : row_quota);
    }
    cli_table_print(t, ctx->out);
}

void cli_whoami_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    const json_t *me = data;
    fprintf(ctx->out, "Name:    %s\nRole:    %s\nSource:  %s\n\n", cli_str(me, "name"),
            cli_str(me, "role"), cli_str(me, "source"));
    json_t *usage = json_object_get(me, "usage");
    quota_table(ctx, json_is_object(usage) ? usage : NULL, json_object_get(me, "quota"));
    if (!strcmp(cli_str(me, "role"), "admin"))
        fputs("(quotas do not limit the admin role; its use is counted all the same)\n", ctx->out);
}

int cli_cmd_whoami(cli_ctx *ctx, const cli_args *a)
{
    (void)a;
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = "/api/v1/whoami"},
                        cli_whoami_print, NULL);
}

/* ---- users ---- */

void cli_users_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    json_t *users = json_object_get(data, "users"), *u;
    size_t i;
    if (a && cli_flag(a, "quiet")) {
        cli_print_names(ctx, users);
        return;
    }
    static const char *const headers[] = {"NAME",      "ROLE",    "SOURCE",  "CARDS", "SHARE",
                                          "INSTANCES", "VOLUMES", "CREATED", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    json_t *zero = json_integer(0);
    json_array_foreach(users, i, u)
    {
        json_t *quota = json_object_get(u, "quota"), *usage = json_object_get(u, "usage");
        char cells[ARRAY_SIZE(quota_fields)][72];
        for (size_t f = 0; f < ARRAY_SIZE(quota_fields); f++) {
            /* no usage at all: "?"; a field left out of it: none used */
            json_t *used = json_object_get(usage, quota_fields[f].field);
            cli_quota_cell(json_is_object(usage) ? (used ? used : zero) : NULL,
                           json_object_get(quota, quota_fields[f].field), quota_fields[f].kind,
                           cells[f], sizeof(cells[f]));
        }
        const char *row[] = {
            cli_str(u, "name"), cli_str(u, "role"), cli_str(u, "source"),    cells[0], cells[1],
            cells[2],           cells[3],           cli_str(u, "createTime")};
        cli_table_add(t, row);
    }
    json_decref(zero);
    cli_table_print(t, ctx->out);
}

int cli_cmd_users(cli_ctx *ctx, const cli_args *a)
{
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = USERS_BASE}, cli_users_print, a);
}

/* ---- user create, token: the token shown once ---- */

/* Print the answer of a create or a rotation: the token alone on stdout
 * (the data as JSON for --json), and note on stderr that it is shown this
 * once. */
static int token_answer(cli_ctx *ctx, const json_t *data, const char *note)
{
    const char *token = json_string_value(json_object_get(data, "token"));
    if (!token && !ctx->json)
        return cli_fail(ctx, CLI_EXIT_ERROR, "the answer carries no token");
    fprintf(ctx->err, "%s\n", note);
    if (ctx->json)
        cli_print_json(ctx, data);
    else
        fprintf(ctx->out, "%s\n", token);
    return CLI_EXIT_OK;
}

/* The defaults with the fields of changes put over them, as *out: a
 * quota option changes that field only, the others stay the defaults'. */
static int over_defaults(cli_ctx *ctx, const json_t *changes, json_t **out)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", DEFAULTS_PATH, NULL, &r);
    if (rc)
        return rc;
    json_t *quota = json_is_object(r.data) ? json_deep_copy(r.data) : json_object();
    json_object_update(quota, (json_t *)changes);
    *out = quota;
    return 0;
}

int cli_cmd_user_create(cli_ctx *ctx, const cli_args *a)
{
    char msg[512];
    _cleanup_json_ json_t *body = NULL;
    if (cli_user_body(a, true, &body, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    /* The server gives the defaults for the quota fields left out. */
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", USERS_BASE, body, &r);
    if (rc)
        return rc;
    _cleanup_free_ char *note = xasprintf(
        "user %s created (role %s); its token is shown only this once, keep it now:", a->pos[0],
        cli_get(a, "role"));
    return token_answer(ctx, r.data, note);
}

int cli_cmd_user_token(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, USERS_BASE, a->pos[0], "token");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", path, NULL, &r);
    if (rc)
        return rc;
    _cleanup_free_ char *note =
        xasprintf("user %s: a new token; the old one no longer works. It is shown only this "
                  "once, keep it now:",
                  a->pos[0]);
    return token_answer(ctx, r.data, note);
}

/* ---- user set, rm, revoke ---- */

/* "cards 2, share 16GB, instances -, volumes 500GB" */
static void quota_line(const json_t *quota, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(quota_fields); i++) {
        char v[32];
        cli_quota_text(json_object_get(quota, quota_fields[i].field), quota_fields[i].kind, v,
                       sizeof(v));
        cli_appendf(buf, size, "%s%s %s", i ? ", " : "", quota_fields[i].label, v);
    }
}

static void user_set_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    const json_t *user = data;
    char quota[256];
    quota_line(json_object_get(user, "quota"), quota, sizeof(quota));
    fprintf(ctx->out, "user %s: role %s; quota %s\n", a->pos[0], cli_str(user, "role"), quota);
}

int cli_cmd_user_set(cli_ctx *ctx, const cli_args *a)
{
    char msg[512];
    _cleanup_json_ json_t *body = NULL;
    if (cli_user_body(a, false, &body, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    _cleanup_free_ char *path = cli_path(ctx, USERS_BASE, a->pos[0], NULL);
    cli_req req = {.method = "PATCH", .path = path, .body = body};
    return cli_exchange(ctx, &req, user_set_print, a);
}

/* One line for people: the format takes the user's name. */
static void user_line_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)data;
    const char *const *line = arg; /* {format, name} */
    fprintf(ctx->out, line[0], line[1]);
}

int cli_cmd_user_rm(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, USERS_BASE, a->pos[0], NULL);
    const char *line[] = {"user %s: deleted\n", a->pos[0]};
    return cli_exchange(ctx, &(cli_req){.method = "DELETE", .path = path}, user_line_print, line);
}

int cli_cmd_user_revoke(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, USERS_BASE, a->pos[0], "token");
    const char *line[] = {"user %1$s: token revoked; `gpubox user token %1$s` gives a new one\n",
                          a->pos[0]};
    return cli_exchange(ctx, &(cli_req){.method = "DELETE", .path = path}, user_line_print, line);
}

/* ---- quota defaults ---- */

void cli_quota_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    quota_table(ctx, NULL, data);
}

/* With quota options: read the defaults, change the fields given, and put
 * the whole quota back, so the fields not given stay as they are whether
 * the server's PUT replaces the quota or merges it. */
int cli_cmd_quota_defaults(cli_ctx *ctx, const cli_args *a)
{
    char msg[512];
    _cleanup_json_ json_t *changes = json_object();
    int given = cli_quota_flags(a, changes, msg, sizeof(msg));
    if (given < 0)
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    if (given == 0)
        return cli_exchange(ctx, &(cli_req){.method = "GET", .path = DEFAULTS_PATH},
                            cli_quota_print, NULL);
    _cleanup_json_ json_t *quota = NULL;
    int rc = over_defaults(ctx, changes, &quota);
    if (rc)
        return rc;
    return cli_exchange(ctx, &(cli_req){.method = "PUT", .path = DEFAULTS_PATH, .body = quota},
                        cli_quota_print, NULL);
}

/* ---- usage ---- */

void cli_usage_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    static const char *const headers[] = {"USER", "SET", "NODE", "CARD-HOURS", "SHARE-GIB-HOURS",
                                          NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE"); /* only when some set names its node */
    json_t *users = json_object_get(data, "users"), *u, *s;
    size_t i, k;
    json_array_foreach(users, i, u)
    {
        const char *user = cli_str(u, "user");
        json_array_foreach(json_object_get(u, "sets"), k, s)
        {
            char cards[32], share[32];
            cli_hours(json_number_value(json_object_get(s, "cardSeconds")), 1, cards,
                      sizeof(cards));
            cli_hours(json_number_value(json_object_get(s, "shareMiBSeconds")), 1024, share,
                      sizeof(share));
            const char *node = json_string_value(json_object_get(s, "node"));
            const char *row[] = {user, cli_str(s, "name"), node && *node ? node : NULL, cards,
                                 share}; /* "" on a single server: no NODE column */
            cli_table_add(t, row);
        }
        char cards[32], share[32];
        cli_hours(json_number_value(json_object_get(u, "cardSeconds")), 1, cards, sizeof(cards));
        cli_hours(json_number_value(json_object_get(u, "shareMiBSeconds")), 1024, share,
                  sizeof(share));
        const char *total[] = {user, "(total)", NULL, cards, share};
        cli_table_add(t, total);
    }
    cli_table_print(t, ctx->out);
    const char *from = json_string_value(json_object_get(data, "from"));
    const char *to = json_string_value(json_object_get(data, "to"));
    fprintf(ctx->out, "(from %s to %s)\n", from ? from : "the beginning", to ? to : "now");
}

int cli_cmd_usage(cli_ctx *ctx, const cli_args *a)
{
    static const char *const params[] = {"user", "set", "from", "to"};
    _cleanup_free_ char *path = xstrdup("/api/v1/usage");
    char sep = '?';
    for (size_t i = 0; i < ARRAY_SIZE(params); i++) {
        const char *v = cli_get(a, params[i]);
        if (!v)
            continue;
        if (!v[0])
            return cli_usage_error(ctx, a->cmd, "--%s needs a value", params[i]);
        _cleanup_free_ char *esc = cli_escape(ctx, v);
        char *longer = xasprintf("%s%c%s=%s", path, sep, params[i], esc);
        free(path);
        path = longer;
        sep = '&';
    }
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, cli_usage_print, NULL);
}
