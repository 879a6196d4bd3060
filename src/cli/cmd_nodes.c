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

/* ---- moving sets between nodes ------------------------------------------------------ */

/* One move, waited for (its progress shown while it runs): 0 and *r
 * filled, or the exit code with the reason printed (report) or in *r. */
static int node_move_one(cli_ctx *ctx, const char *name, const char *node, bool with_sharers,
                         cli_reply *r, bool report)
{
    _cleanup_free_ char *path = cli_path(ctx, "/api/v1/replicaSet", name, "move");
    _cleanup_json_ json_t *body = json_object();
    if (node)
        json_object_set_new(body, "node", json_string(node));
    if (with_sharers)
        json_object_set_new(body, "withSharers", json_true());
    if (report)
        return cli_call_progress(ctx, "move", name, "POST", path, body, r);
    cli_progress_start(ctx, "move", name);
    int rc = cli_request(ctx, "POST", path, body, r, false);
    cli_progress_stop(ctx);
    return rc;
}

/* "train: moved from a to b (version 3, running), 1.2 GB in 9.8 s (122.4 MB/s);
 * ports 22->41003". */
static void node_move_print(cli_ctx *ctx, const json_t *d)
{
    double bytes = (double)json_integer_value(json_object_get(d, "bytes"));
    double seconds = json_number_value(json_object_get(d, "seconds"));
    double rate = json_number_value(json_object_get(d, "bytesPerSecond"));
    fprintf(ctx->out,
            "%s: moved from %s to %s (version %" JSON_INTEGER_FORMAT ", %s), %.1f MB in "
            "%.1f s (%.1f MB/s)",
            cli_str(d, "name"), cli_str(d, "from"), cli_str(d, "to"),
            json_integer_value(json_object_get(d, "version")), cli_str(d, "state"), bytes / 1e6,
            seconds, rate / 1e6);
    json_t *ports = json_object_get(d, "ports"), *p;
    size_t i;
    json_array_foreach(ports, i, p)
    {
        fprintf(ctx->out, "%s%" JSON_INTEGER_FORMAT "->%" JSON_INTEGER_FORMAT,
                i ? ", " : "; ports ", json_integer_value(json_object_get(p, "containerPort")),
                json_integer_value(json_object_get(p, "hostPort")));
    }
    fputc('\n', ctx->out);
}

int cli_cmd_move(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc =
        node_move_one(ctx, a->pos[0], cli_get(a, "node"), cli_flag(a, "with-sharers"), &r, true);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return 0;
    }
    node_move_print(ctx, r.data);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r.data, "sharers"), i, s)
    {
        node_move_print(ctx, s);
    }
    return 0;
}

/* Cordon, then move every set off the node (only running ones with
 * --running), each where placement puts it; what could not move is
 * reported with why, and makes the exit status not 0. */
int cli_cmd_node_drain(cli_ctx *ctx, const cli_args *a)
{
    const char *node = a->pos[0];
    bool running_only = cli_flag(a, "running");
    _cleanup_free_ char *cordon = cli_path(ctx, NODES_BASE, node, "cordon");
    _cleanup_(cli_reply_free) cli_reply c = {0};
    int rc = cli_call(ctx, "PATCH", cordon, NULL, &c);
    if (rc)
        return rc;
    fprintf(ctx->out, "node %s: cordoned\n", node);
    _cleanup_(cli_reply_free) cli_reply list = {0};
    rc = cli_call(ctx, "GET", "/api/v1/replicaSet", NULL, &list);
    if (rc)
        return rc;
    size_t moved = 0, failed = 0, i;
    json_t *s;
    json_array_foreach(json_object_get(list.data, "replicaSets"), i, s)
    {
        const char *state = cli_str(s, "state");
        if (strcmp(cli_str(s, "node"), node) != 0 || !strcmp(state, "deleted"))
            continue;
        if (running_only && strcmp(state, "running") != 0)
            continue;
        _cleanup_(cli_reply_free) cli_reply r = {0};
        int one = node_move_one(ctx, cli_str(s, "name"), NULL, false, &r, false);
        if (one == 0) {
            node_move_print(ctx, r.data);
            moved++;
        } else {
            char words[1024];
            fprintf(ctx->out, "%s: not moved: %s\n", cli_str(s, "name"),
                    r.msg ? cli_words(r.msg, words, sizeof(words)) : "no answer");
            failed++;
        }
    }
    fprintf(ctx->out, "node %s: %zu set(s) moved, %zu could not move\n", node, moved, failed);
    return failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
