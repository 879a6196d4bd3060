/*
 * cmd_volumes.c - `gpubox volume create|ls|inspect|resize|rm`, on
 * /api/v1/volumes.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

#define VOL_BASE "/api/v1/volumes"

static char *vol_path(cli_ctx *ctx, const char *name, const char *suffix)
{
    _cleanup_free_ char *esc = cli_escape(ctx, name);
    char *path = NULL;
    if (asprintf(&path, VOL_BASE "/%s%s%s", esc, suffix ? "/" : "", suffix ? suffix : "") < 0)
        abort();
    return path;
}

static const char *vol_str(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s ? s : "-";
}

/* The names of a list of {name, ...} objects, joined. */
static void vol_names(const json_t *list, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        size_t len = strlen(buf);
        const char *n = json_string_value(json_object_get(v, "name"));
        if (!n)
            n = json_string_value(json_object_get(v, "container"));
        snprintf(buf + len, size - len, "%s%s", i ? ", " : "", n ? n : "?");
    }
}

int cli_cmd_volume_create(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = json_pack("{s:s, s:s}", "name", a->pos[0], "size", a->pos[1]);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", VOL_BASE, body, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    if (ctx->json)
        cli_print_json(ctx, r.data);
    else
        fprintf(ctx->out, "volume %s: created, %s (%s)\n", a->pos[0], vol_str(r.data, "sizeText"),
                vol_str(r.data, "backend"));
    return CLI_EXIT_OK;
}

int cli_cmd_volume_ls(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", VOL_BASE, NULL, &r);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    json_t *vols = json_object_get(r.data, "volumes"), *v;
    size_t i;
    if (cli_flag(a, "quiet")) {
        json_array_foreach(vols, i, v)
        {
            fprintf(ctx->out, "%s\n", vol_str(v, "name"));
        }
        return CLI_EXIT_OK;
    }
    static const char *const headers[] = {"NAME",    "SIZE",    "BACKEND", "STATE",
                                          "VERSION", "CREATED", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    json_array_foreach(vols, i, v)
    {
        char version[16];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(v, "version")));
        const char *row[] = {vol_str(v, "name"),
                             vol_str(v, "sizeText"),
                             vol_str(v, "backend"),
                             vol_str(v, "state"),
                             version,
                             vol_str(v, "createTime")};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    return CLI_EXIT_OK;
}

int cli_cmd_volume_inspect(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = vol_path(ctx, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", path, NULL, &r);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    json_t *info = json_object_get(r.data, "info");
    char used_by[1024], mounted_by[1024];
    vol_names(json_object_get(info, "usedBy"), used_by, sizeof(used_by));
    vol_names(json_object_get(info, "mountedBy"), mounted_by, sizeof(mounted_by));
    fprintf(ctx->out,
            "Name:       %s\nSize:       %s\nUsed:       %s\nBackend:    %s%s\nState:      %s\n"
            "Version:    %" JSON_INTEGER_FORMAT "\nDocker:     %s\nUsed by:    %s\n"
            "Mounted by: %s\nCreated:    %s\nUpdated:    %s\n",
            vol_str(info, "name"), vol_str(info, "sizeText"), vol_str(info, "usedText"),
            vol_str(info, "backend"),
            json_is_false(json_object_get(info, "enforced")) ? " (size not enforced)" : "",
            vol_str(info, "state"), json_integer_value(json_object_get(info, "version")),
            vol_str(info, "dockerVolume"), used_by[0] ? used_by : "-",
            mounted_by[0] ? mounted_by : "-", vol_str(info, "createTime"),
            vol_str(info, "updateTime"));
    return CLI_EXIT_OK;
}

int cli_cmd_volume_resize(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = json_pack("{s:s}", "size", a->pos[1]);
    _cleanup_free_ char *path = vol_path(ctx, a->pos[0], "size");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "PATCH", path, body, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    if (ctx->json)
        cli_print_json(ctx, r.data);
    else
        fprintf(ctx->out, "volume %s: resized from %s to %s%s\n", a->pos[0],
                vol_str(r.data, "previousSizeText"), vol_str(r.data, "sizeText"),
                json_is_true(json_object_get(r.data, "online")) ? " (online)" : "");
    return CLI_EXIT_OK;
}

int cli_cmd_volume_rm(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = vol_path(ctx, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "DELETE", path, NULL, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    if (ctx->json)
        cli_print_json(ctx, r.data);
    else
        fprintf(ctx->out, "volume %s: deleted with its data\n", a->pos[0]);
    return CLI_EXIT_OK;
}
