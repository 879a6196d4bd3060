/*
 * cmd_nodes.c - the subcommands about the nodes of a fleet: `gpubox nodes`
 * (GET /api/v1/nodes) and `gpubox node cordon|uncordon NAME` (PATCH
 * /api/v1/nodes/{name}/cordon|uncordon). Each builds its request and
 * prints the answer for people; cli_exchange (cmd_common.c) does the rest.
 *
 * A gpuboxd started without --node is not in a fleet and answers these
 * routes with an error whose message says so; it is printed as any other
 * server error is.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/xalloc.h"

#define NODES_BASE "/api/v1/nodes"

static int nodes_key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "gpu=a100,zone=x": the labels sorted by key, so a node prints the same
 * whatever order the server keeps them in. */
static void nodes_labels(const json_t *labels, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t n = json_object_size(labels), i = 0;
    if (n == 0)
        return;
    const char **keys = xcalloc(n, sizeof(*keys));
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)labels, key, value)
    {
        keys[i++] = key;
    }
    qsort(keys, n, sizeof(*keys), nodes_key_cmp);
    for (i = 0; i < n; i++)
        cli_appendf(buf, size, "%s%s=%s", i ? "," : "", keys[i], cli_str(labels, keys[i]));
    free(keys);
}

static void nodes_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    json_t *nodes = json_object_get(data, "nodes"), *n;
    size_t i;
    if (cli_flag(a, "quiet")) {
        cli_print_names(ctx, nodes);
        return;
    }
    static const char *const headers[] = {"NAME",  "STATE",  "GPUS",      "MODELS",
                                          "PORTS", "LABELS", "HEARTBEAT", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    time_t now = time(NULL);
    json_array_foreach(nodes, i, n)
    {
        json_t *gpus = json_object_get(n, "gpus");
        char gpu_text[48], models[512], ports[24], labels[1024], heartbeat[48];
        snprintf(gpu_text, sizeof(gpu_text), "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(gpus, "free")),
                 json_integer_value(json_object_get(gpus, "total")));
        cli_join(json_object_get(gpus, "models"), ",", models, sizeof(models));
        snprintf(ports, sizeof(ports), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(n, "freePorts")));
        nodes_labels(json_object_get(n, "labels"), labels, sizeof(labels));
        cli_age(json_string_value(json_object_get(n, "lastHeartbeat")), now, heartbeat,
                sizeof(heartbeat));
        const char *row[] = {cli_str(n, "name"),
                             cli_str(n, "state"),
                             gpu_text,
                             models[0] ? models : "-",
                             ports,
                             labels[0] ? labels : "-",
                             heartbeat};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
}

int cli_cmd_nodes(cli_ctx *ctx, const cli_args *a)
{
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = NODES_BASE}, nodes_print, a);
}

/* "node a: cordoned"; a state that does not say whether the node is
 * cordoned (unreachable) gets it in brackets. */
static void node_state_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    json_t *node = json_object_get(data, "node");
    const char *state = cli_str(node, "state");
    fprintf(ctx->out, "node %s: %s", cli_str(node, "name"), state);
    if (strcmp(state, "cordoned") != 0 && strcmp(state, "ready") != 0)
        fputs(json_is_true(json_object_get(node, "cordoned")) ? " (cordoned)" : " (not cordoned)",
              ctx->out);
    fputc('\n', ctx->out);
}

static int node_patch(cli_ctx *ctx, const char *name, const char *suffix)
{
    _cleanup_free_ char *path = cli_path(ctx, NODES_BASE, name, suffix);
    return cli_exchange(ctx, &(cli_req){.method = "PATCH", .path = path}, node_state_print, NULL);
}

int cli_cmd_node_cordon(cli_ctx *ctx, const cli_args *a)
{
    return node_patch(ctx, a->pos[0], "cordon");
}

int cli_cmd_node_uncordon(cli_ctx *ctx, const cli_args *a)
{
    return node_patch(ctx, a->pos[0], "uncordon");
}
