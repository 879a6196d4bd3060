/*
 * cmd_volumes.c - `gpubox volume create|ls|inspect|resize|rm`, on
 * /api/v1/volumes: each builds its request and prints the answer for
 * people; cli_exchange (cmd_common.c) does the rest.
 */
#include "cli/cli.h"

#include "util/cleanup.h"

#define VOL_BASE "/api/v1/volumes"

/* The names of a list of {name, ...} objects, joined. */
static void vol_names(const json_t *list, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *n = json_string_value(json_object_get(v, "name"));
        if (!n)
            n = json_string_value(json_object_get(v, "container"));
        cli_appendf(buf, size, "%s%s", i ? ", " : "", n ? n : "?");
    }
}

/* "loop (xfs)": the backend, with the filesystem of a loop volume. */
static const char *vol_backend(const json_t *v, char *buf, size_t size)
{
    const char *fs = json_string_value(json_object_get(v, "filesystem"));
    if (!fs)
        return cli_str(v, "backend");
    snprintf(buf, size, "%s (%s)", cli_str(v, "backend"), fs);
    return buf;
}

static void vol_create_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    fprintf(ctx->out, "volume %s: created, %s (%s)\n", a->pos[0], cli_str(data, "sizeText"),
            cli_str(data, "backend"));
}

int cli_cmd_volume_create(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = json_pack("{s:s, s:s}", "name", a->pos[0], "size", a->pos[1]);
    if (cli_get(a, "node")) /* only in a fleet, so only when given */
        json_object_set_new(body, "node", json_string(cli_get(a, "node")));
    cli_req req = {.method = "POST", .path = VOL_BASE, .body = body, .follow = true};
    return cli_exchange(ctx, &req, vol_create_print, a);
}

void cli_volume_ls_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    json_t *vols = json_object_get(data, "volumes"), *v;
    size_t i;
    if (cli_flag(a, "quiet")) {
        cli_print_names(ctx, vols);
        return;
    }
    static const char *const headers[] = {"NAME",  "NODE",    "OWNER",   "SIZE", "BACKEND",
                                          "STATE", "VERSION", "CREATED", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");  /* only a fleet's volumes carry node */
    cli_table_optional(t, "OWNER"); /* only when the volumes have two owners or more */
    bool owners = cli_owners_differ(vols);
    json_array_foreach(vols, i, v)
    {
        char version[16], backend[64];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(v, "version")));
        const char *node = json_string_value(json_object_get(v, "node")); /* NULL: none */
        const char *row[] = {cli_str(v, "name"),
                             node,
                             cli_owner_cell(v, owners),
                             cli_str(v, "sizeText"),
                             vol_backend(v, backend, sizeof(backend)),
                             cli_str(v, "state"),
                             version,
                             cli_str(v, "createTime")};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
}

int cli_cmd_volume_ls(cli_ctx *ctx, const cli_args *a)
{
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = VOL_BASE}, cli_volume_ls_print, a);
}

static void vol_inspect_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    json_t *info = json_object_get(data, "info");
    char used_by[1024], mounted_by[1024], backend[64];
    vol_names(json_object_get(info, "usedBy"), used_by, sizeof(used_by));
    vol_names(json_object_get(info, "mountedBy"), mounted_by, sizeof(mounted_by));
    fprintf(ctx->out,
            "Name:       %s\nSize:       %s\nUsed:       %s\nBackend:    %s%s\nState:      %s\n"
            "Version:    %" JSON_INTEGER_FORMAT "\nDocker:     %s\nUsed by:    %s\n"
            "Mounted by: %s\nCreated:    %s\nUpdated:    %s\n",
            cli_str(info, "name"), cli_str(info, "sizeText"), cli_str(info, "usedText"),
            vol_backend(info, backend, sizeof(backend)),
            json_is_false(json_object_get(info, "enforced")) ? " (size not enforced)" : "",
            cli_str(info, "state"), json_integer_value(json_object_get(info, "version")),
            cli_str(info, "dockerVolume"), used_by[0] ? used_by : "-",
            mounted_by[0] ? mounted_by : "-", cli_str(info, "createTime"),
            cli_str(info, "updateTime"));
}

int cli_cmd_volume_inspect(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, VOL_BASE, a->pos[0], NULL);
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, vol_inspect_print, NULL);
}

static void vol_resize_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    fprintf(ctx->out, "volume %s: resized from %s to %s%s\n", a->pos[0],
            cli_str(data, "previousSizeText"), cli_str(data, "sizeText"),
            json_is_true(json_object_get(data, "online")) ? " (online)" : "");
}

int cli_cmd_volume_resize(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = json_pack("{s:s}", "size", a->pos[1]);
    _cleanup_free_ char *path = cli_path(ctx, VOL_BASE, a->pos[0], "size");
    cli_req req = {.method = "PATCH", .path = path, .body = body, .follow = true};
    return cli_exchange(ctx, &req, vol_resize_print, a);
}

static void vol_rm_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)data;
    const cli_args *a = arg;
    fprintf(ctx->out, "volume %s: deleted with its data\n", a->pos[0]);
}

int cli_cmd_volume_rm(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, VOL_BASE, a->pos[0], NULL);
    cli_req req = {.method = "DELETE", .path = path, .follow = true};
    return cli_exchange(ctx, &req, vol_rm_print, a);
}
