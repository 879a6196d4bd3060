/*
 * cmd_common.c - what the subcommands (cmd_*.c) share around their own
 * logic: the exchange with gpuboxd that nearly every one of them is (send
 * one request, show its progress, follow its operation, print the answer
 * as JSON for --json or for people), the paths of named resources, and the
 * small text helpers their tables and lines are made of.
 *
 * A subcommand is then what is its own: the request it builds (a cli_req)
 * and how it prints the answer for people (a cli_print_fn).
 */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/time.h"
#include "util/xalloc.h"

int cli_exchange(cli_ctx *ctx, const cli_req *req, cli_print_fn *human, const void *arg)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = req->verb ? cli_call_progress(ctx, req->verb, req->name, req->method, req->path,
                                           req->body, &r)
                       : cli_call(ctx, req->method, req->path, req->body, &r);
    if (rc || (req->follow && (rc = cli_follow_operation(ctx, r.data))))
        return rc;
    if (ctx->json)
        cli_print_json(ctx, r.data);
    else
        human(ctx, r.data, arg);
    return CLI_EXIT_OK;
}

char *cli_path(cli_ctx *ctx, const char *base, const char *name, const char *suffix)
{
    _cleanup_free_ char *esc = cli_escape(ctx, name);
    return xasprintf("%s/%s%s%s", base, esc, suffix ? "/" : "", suffix ? suffix : "");
}

const char *cli_str(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s ? s : "-";
}

void cli_appendf(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

void cli_join(const json_t *list, const char *sep, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        cli_appendf(buf, size, "%s%s", i ? sep : "",
                    json_string_value(v) ? json_string_value(v) : "?");
    }
}

void cli_print_names(cli_ctx *ctx, const json_t *list)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        fprintf(ctx->out, "%s\n", cli_str(v, "name"));
    }
}

void cli_age(const char *iso, time_t now, char *buf, size_t size)
{
    time_t then = iso ? time_iso_parse(iso) : 0;
    if (!then) {
        snprintf(buf, size, "%s", iso ? iso : "-");
        return;
    }
    long long s = now > then ? (long long)(now - then) : 0;
    if (s < 60)
        snprintf(buf, size, "%llds ago", s);
    else if (s < 3600)
        snprintf(buf, size, "%lldm ago", s / 60);
    else if (s < 86400)
        snprintf(buf, size, "%lldh ago", s / 3600);
    else
        snprintf(buf, size, "%lldd ago", s / 86400);
}

bool cli_owners_differ(const json_t *list)
{
    const char *first = NULL;
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        const char *owner = json_string_value(json_object_get(item, "owner"));
        if (!owner)
            continue;
        if (!first)
            first = owner;
        else if (strcmp(first, owner) != 0)
            return true;
    }
    return false;
}

const char *cli_owner_cell(const json_t *item, bool shown)
{
    return shown ? json_string_value(json_object_get(item, "owner")) : NULL;
}
