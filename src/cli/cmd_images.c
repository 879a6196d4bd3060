/*
 * cmd_images.c - gpubox pull, gpubox images and gpubox images rm: images on
 * the node gpuboxd runs on (docs/cli.md).
 *
 * pull asks gpuboxd to pull and answer at once ("wait": false), then
 * follows the pull's operation (operation.c), so progress shows on stderr
 * as layers arrive; at the end the image's reference and id go to stdout.
 * --password-stdin reads the password from the first line of stdin, so it
 * never shows in a process list or a shell history.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "util/cleanup.h"

#define IMAGES_PATH "/api/v1/images"
#define IMAGES_PASSWORD_MAX 1024

/* The first line of stdin, without its newline; -1 when there is none. */
static int read_password(char *buf, size_t size)
{
    if (!fgets(buf, (int)size, stdin))
        return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] ? 0 : -1;
}

/* The pull's final record (the operation followed to its end). */
static void pull_print(cli_ctx *ctx, const json_t *op)
{
    if (ctx->json) {
        cli_print_json(ctx, op);
        return;
    }
    fprintf(ctx->out, "%s %s\n", cli_str(op, "target"), cli_str(op, "imageId"));
}

int cli_cmd_pull(cli_ctx *ctx, const cli_args *a)
{
    const char *user = cli_get(a, "username");
    bool from_stdin = cli_flag(a, "password-stdin");
    if (from_stdin != (user != NULL))
        return cli_usage_error(ctx, a->cmd, "--username and --password-stdin go together");
    _cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "image", a->pos[0], "wait", 0);
    char password[IMAGES_PASSWORD_MAX + 2] = "";
    if (user) {
        if (read_password(password, sizeof(password)) < 0)
            return cli_usage_error(ctx, a->cmd, "--password-stdin: no password on stdin");
        json_object_set_new(body, "registryAuth",
                            json_pack("{s:s, s:s}", "username", user, "password", password));
        explicit_bzero(password, sizeof(password));
    }
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", IMAGES_PATH "/pull", body, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    /* The answer came at once: the record as it ended. */
    const char *id = json_string_value(json_object_get(r.data, "operationId"));
    _cleanup_free_ char *esc = cli_escape(ctx, id ? id : "");
    _cleanup_free_ char *path = xasprintf("/api/v1/operations/%s", esc);
    _cleanup_(cli_reply_free) cli_reply fin = {0};
    if (cli_call(ctx, "GET", path, NULL, &fin) == 0)
        pull_print(ctx, fin.data);
    else
        pull_print(ctx, json_object_get(r.data, "operation"));
    return CLI_EXIT_OK;
}

/* "1.2GB", "35.0MB", "812KB", as docker images does (powers of 1000). */
static void image_size(json_int_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1000 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1000;
        u++;
    }
    snprintf(buf, size, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static void images_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    json_t *list = json_object_get(data, "images");
    static const char *const headers[] = {"IMAGE", "ID", "SIZE", "CREATED", "NODE", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");
    time_t now = time(NULL);
    size_t i;
    json_t *img;
    json_array_foreach(list, i, img)
    {
        const char *id = cli_str(img, "id");
        const char *hex = strncmp(id, "sha256:", 7) == 0 ? id + 7 : id;
        char short_id[13], size[32], age[32];
        snprintf(short_id, sizeof(short_id), "%.12s", hex);
        image_size(json_integer_value(json_object_get(img, "size")), size, sizeof(size));
        cli_age(json_string_value(json_object_get(img, "created")), now, age, sizeof(age));
        json_t *tags = json_object_get(img, "repoTags");
        size_t ntags = json_array_size(tags);
        for (size_t k = 0; k < (ntags ? ntags : 1); k++) {
            const char *tag = ntags ? json_string_value(json_array_get(tags, k)) : "<none>";
            if (cli_flag(a, "quiet")) {
                fprintf(ctx->out, "%s\n", tag ? tag : "<none>");
                continue;
            }
            const char *row[] = {tag ? tag : "<none>", short_id, size, age,
                                 json_string_value(json_object_get(img, "node"))};
            cli_table_add(t, row);
        }
    }
    if (!cli_flag(a, "quiet"))
        cli_table_print(t, ctx->out);
}

int cli_cmd_images(cli_ctx *ctx, const cli_args *a)
{
    const char *name = cli_get(a, "name");
    _cleanup_free_ char *esc = name ? cli_escape(ctx, name) : NULL;
    _cleanup_free_ char *path =
        name ? xasprintf(IMAGES_PATH "?name=%s", esc) : xstrdup(IMAGES_PATH);
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, images_print, a);
}

static void image_rm_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    if (json_is_true(json_object_get(data, "deleted")))
        fprintf(ctx->out, "%s: removed, with image %s\n", cli_str(data, "imageName"),
                cli_str(data, "imageId"));
    else
        fprintf(ctx->out, "%s: removed (image %s keeps its other names)\n",
                cli_str(data, "imageName"), cli_str(data, "imageId"));
}

/* gpubox images rm REF...: one DELETE per name, in order; the exit code is
 * the first failure's (the others are still tried, as docker rmi does). */
int cli_cmd_image_rm(cli_ctx *ctx, const cli_args *a)
{
    int first = CLI_EXIT_OK;
    for (size_t i = 0; i < a->npos; i++) {
        _cleanup_free_ char *esc = cli_escape(ctx, a->pos[i]);
        _cleanup_free_ char *path = xasprintf(IMAGES_PATH "?name=%s", esc);
        int rc =
            cli_exchange(ctx, &(cli_req){.method = "DELETE", .path = path}, image_rm_print, NULL);
        if (rc && !first)
            first = rc;
    }
    return first;
}
