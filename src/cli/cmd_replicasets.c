/*
 * cmd_replicasets.c - the subcommands on replica sets: ps, run, inspect,
 * history, scale, stop, start, pause, restart, rollback, exec, commit, rm.
 *
 * Each builds one request to /api/v1/replicaSet..., sends it (client.c;
 * the long ones with their progress shown meanwhile, progress.c), follows
 * the operation when the answer names one (operation.c), and
 * prints the answer: a table or a few lines for people, the server's data
 * for --json.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/err.h"

#define RS_BASE "/api/v1/replicaSet"

/* "/api/v1/replicaSet/<name>[/suffix]" (malloc'd). */
static char *rs_path(cli_ctx *ctx, const char *name, const char *suffix)
{
    _cleanup_free_ char *esc = cli_escape(ctx, name);
    char *path = NULL;
    if (asprintf(&path, RS_BASE "/%s%s%s", esc, suffix ? "/" : "", suffix ? suffix : "") < 0)
        abort();
    return path;
}

/* "40001->22/tcp, 40002->53/udp" into buf. */
static void rs_ports_text(const json_t *ports, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p)
    {
        size_t len = strlen(buf);
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        snprintf(buf + len, size - len, "%s%" JSON_INTEGER_FORMAT "->%" JSON_INTEGER_FORMAT "/%s",
                 i ? ", " : "", json_integer_value(json_object_get(p, "hostPort")),
                 json_integer_value(json_object_get(p, "containerPort")), proto ? proto : "tcp");
    }
}

/* The strings of a JSON array joined by sep into buf. */
static void rs_join(const json_t *list, const char *sep, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i ? sep : "",
                 json_string_value(v) ? json_string_value(v) : "?");
    }
}

static const char *rs_str(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s ? s : "-";
}

/* Print data for --json, else the one line `human` (a printf format with
 * the name first). */
static int rs_done(cli_ctx *ctx, const json_t *data, const char *human, const char *name)
{
    if (ctx->json)
        cli_print_json(ctx, data);
    else
        fprintf(ctx->out, human, name);
    return CLI_EXIT_OK;
}

int cli_cmd_ps(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", cli_flag(a, "all") ? RS_BASE "?all=true" : RS_BASE, NULL, &r);
    if (rc)
        return rc;
    json_t *sets = json_object_get(r.data, "replicaSets"), *s;
    size_t i;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    if (cli_flag(a, "quiet")) {
        json_array_foreach(sets, i, s)
        {
            fprintf(ctx->out, "%s\n", rs_str(s, "name"));
        }
        return CLI_EXIT_OK;
    }
    static const char *const headers[] = {"NAME", "VERSION", "STATE",   "STATUS",
                                          "GPUS", "PORTS",   "CREATED", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    json_array_foreach(sets, i, s)
    {
        char version[16], gpus[16], ports[512];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(s, "version")));
        snprintf(gpus, sizeof(gpus), "%zu", json_array_size(json_object_get(s, "gpus")));
        rs_ports_text(json_object_get(s, "ports"), ports, sizeof(ports));
        const char *row[] = {rs_str(s, "name"),      version, rs_str(s, "state"),
                             rs_str(s, "status"),    gpus,    ports[0] ? ports : "-",
                             rs_str(s, "createTime")};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    return CLI_EXIT_OK;
}

/* -v SRC:DEST[:ro|rw] -> {src, dest, readOnly}. */
static int run_bind(cli_ctx *ctx, const cli_args *a, const char *text, json_t *binds)
{
    _cleanup_free_ char *copy = strdup(text);
    char *parts[4] = {0};
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ":", &save); tok && n < 4;
         tok = strtok_r(NULL, ":", &save))
        parts[n++] = tok;
    if (n < 2 || n > 3 || (n == 3 && strcmp(parts[2], "ro") && strcmp(parts[2], "rw")))
        return cli_usage_error(ctx, a->cmd,
                               "-v '%s': give SRC:DEST or SRC:DEST:ro (SRC a volume name or an "
                               "absolute host path)",
                               text);
    json_array_append_new(binds, json_pack("{s:s, s:s, s:b}", "src", parts[0], "dest", parts[1],
                                           "readOnly", n == 3 && !strcmp(parts[2], "ro")));
    return 0;
}

/* -p PORT[/proto] -> containerPorts; -p HOST:PORT[/proto] -> ports. */
static int run_port(cli_ctx *ctx, const cli_args *a, const char *text, json_t *container_ports,
                    json_t *ports)
{
    char msg[256];
    const char *colon = strchr(text, ':');
    if (!colon) {
        json_array_append_new(container_ports, json_string(text));
        return 0;
    }
    _cleanup_free_ char *host = strndup(text, (size_t)(colon - text));
    _cleanup_free_ char *cport = strdup(colon + 1);
    char *slash = strchr(cport, '/');
    const char *proto = "tcp";
    if (slash) {
        *slash = '\0';
        proto = slash + 1;
    }
    long long hp, cp;
    if (cli_parse_int("-p host port", host, 1, 65535, &hp, msg, sizeof(msg)) ||
        cli_parse_int("-p container port", cport, 1, 65535, &cp, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    json_array_append_new(ports, json_pack("{s:I, s:I, s:s}", "hostPort", (json_int_t)hp,
                                           "containerPort", (json_int_t)cp, "protocol", proto));
    return 0;
}

/* -e K=V, or -e K taking K's value from this environment (as docker run). */
static int run_env(cli_ctx *ctx, const cli_args *a, const char *text, json_t *env)
{
    if (strchr(text, '=')) {
        json_array_append_new(env, json_string(text));
        return 0;
    }
    const char *value = getenv(text);
    if (!value)
        return cli_usage_error(ctx, a->cmd, "-e %s: give K=V, or set %s in this environment", text,
                               text);
    _cleanup_free_ char *kv = NULL;
    if (asprintf(&kv, "%s=%s", text, value) < 0)
        abort();
    json_array_append_new(env, json_string(kv));
    return 0;
}

/* The list options of run into the body; 0 or a usage exit code. */
static int run_lists(cli_ctx *ctx, const cli_args *a, json_t *body)
{
    json_t *binds = json_array(), *env = json_array(), *cports = json_array(),
           *ports = json_array(), *labels = json_object();
    json_t *uuids = cli_count(a, "gpu-uuid") ? json_array() : NULL; /* only when pinned */
    if (uuids)
        json_object_set_new(body, "gpuUUIDs", uuids);
    json_object_set_new(body, "binds", binds);
    json_object_set_new(body, "env", env);
    json_object_set_new(body, "containerPorts", cports);
    json_object_set_new(body, "ports", ports);
    json_object_set_new(body, "labels", labels);
    int rc = 0;
    for (size_t i = 0; !rc && i < a->nopts; i++) {
        const char *name = a->opts[i].opt->name, *v = a->opts[i].value;
        if (!strcmp(name, "volume"))
            rc = run_bind(ctx, a, v, binds);
        else if (!strcmp(name, "publish"))
            rc = run_port(ctx, a, v, cports, ports);
        else if (!strcmp(name, "env"))
            rc = run_env(ctx, a, v, env);
        else if (!strcmp(name, "gpu-uuid"))
            json_array_append_new(uuids, json_string(v));
        else if (!strcmp(name, "label")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v)
                rc = cli_usage_error(ctx, a->cmd, "--label '%s': give K=V", v);
            else {
                _cleanup_free_ char *k = strndup(v, (size_t)(eq - v));
                json_object_set_new(labels, k, json_string(eq + 1));
            }
        }
    }
    return rc;
}

/* The body of POST /replicaSet from run's arguments. */
static int run_body(cli_ctx *ctx, const cli_args *a, json_t **out)
{
    char msg[256];
    const char *image = cli_get(a, "image");
    if (!image)
        return cli_usage_error(ctx, a->cmd, "--image is required");
    _cleanup_json_ json_t *body =
        json_pack("{s:s, s:s}", "replicaSetName", a->pos[0], "imageName", image);
    const char *gpus = cli_get(a, "gpus");
    long long n;
    if (gpus) {
        if (cli_parse_int("--gpus", gpus, 0, 1024, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "gpuCount", json_integer(n));
    }
    if (cli_get(a, "gpu-memory"))
        json_object_set_new(body, "gpuMemory", json_string(cli_get(a, "gpu-memory")));
    if (cli_flag(a, "shared"))
        json_object_set_new(body, "gpuShared", json_true());
    const char *cpus = cli_get(a, "cpus");
    if (cpus) {
        double c;
        if (cli_parse_number("--cpus", cpus, 0, 1024, &c, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "cpus", json_real(c));
    }
    static const char *const strings[][2] = {{"memory", "memory"},
                                             {"shm-size", "shmSize"},
                                             {"restart", "restartPolicy"},
                                             {"gpu-policy", "gpuPolicy"},
                                             {"gpu-model", "gpuModel"}};
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
        if (cli_get(a, strings[i][0]))
            json_object_set_new(body, strings[i][1], json_string(cli_get(a, strings[i][0])));
    int rc = run_lists(ctx, a, body);
    if (rc)
        return rc;
    if (a->has_rest) {
        json_t *cmd = json_array();
        for (size_t i = 0; i < a->nrest; i++)
            json_array_append_new(cmd, json_string(a->rest[i]));
        json_object_set_new(body, "cmd", cmd);
    }
    *out = steal_ptr(&body);
    return 0;
}

int cli_cmd_run(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = NULL;
    int rc = run_body(ctx, a, &body);
    if (rc)
        return rc;
    _cleanup_(cli_reply_free) cli_reply r = {0};
    if ((rc = cli_call_progress(ctx, "run", a->pos[0], "POST", RS_BASE, body, &r)) ||
        (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    char gpus[1024], ports[512];
    rs_join(json_object_get(r.data, "gpus"), ", ", gpus, sizeof(gpus));
    rs_ports_text(json_object_get(r.data, "ports"), ports, sizeof(ports));
    fprintf(ctx->out, "%s: running as %s\n  gpus:  %s\n  ports: %s\n", a->pos[0],
            rs_str(r.data, "containerName"), gpus[0] ? gpus : "-", ports[0] ? ports : "-");
    return CLI_EXIT_OK;
}

/* A spec's binds as "src:dest[:ro]" joined. */
static void rs_binds_text(const json_t *binds, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s:%s%s", i ? ", " : "", rs_str(b, "src"),
                 rs_str(b, "dest"), json_is_true(json_object_get(b, "readOnly")) ? ":ro" : "");
    }
}

int cli_cmd_inspect(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", path, NULL, &r);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    json_t *info = json_object_get(r.data, "info"), *spec = json_object_get(info, "spec");
    char gpus[1024], ports[512], env[2048], cmd[1024], binds[1024];
    rs_join(json_object_get(info, "gpus"), ", ", gpus, sizeof(gpus));
    rs_ports_text(json_object_get(info, "ports"), ports, sizeof(ports));
    rs_join(json_object_get(spec, "env"), " ", env, sizeof(env));
    rs_join(json_object_get(spec, "cmd"), " ", cmd, sizeof(cmd));
    rs_binds_text(json_object_get(spec, "binds"), binds, sizeof(binds));
    char limits[160] = "-";
    json_t *gl = json_object_get(info, "gpuLimits");
    if (json_is_object(gl))
        snprintf(limits, sizeof(limits), "%s, %s", rs_str(gl, "mode"),
                 json_is_true(json_object_get(gl, "enforced")) ? "enforced"
                                                               : "scheduled but not enforced");
    fprintf(ctx->out,
            "Name:       %s\nState:      %s\nStatus:     %s\nVersion:    %" JSON_INTEGER_FORMAT
            "\nContainer:  %s\nImage:      %s\nGPUs:       %s\nGPU limits: %s\nPorts:      %s\n"
            "Binds:      %s\n"
            "Env:        %s\nCmd:        %s\nCreated:    %s\nUpdated:    %s\n",
            rs_str(info, "name"), rs_str(info, "state"), rs_str(info, "status"),
            json_integer_value(json_object_get(info, "version")), rs_str(info, "containerName"),
            rs_str(spec, "imageName"), gpus[0] ? gpus : "-", limits, ports[0] ? ports : "-",
            binds[0] ? binds : "-", env[0] ? env : "-", cmd[0] ? cmd : "(image default)",
            rs_str(info, "createTime"), rs_str(info, "updateTime"));
    return CLI_EXIT_OK;
}

int cli_cmd_history(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], "history");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", path, NULL, &r);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    static const char *const headers[] = {"VERSION", "CREATED", "CONTAINER", "IMAGE", "GPUS", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    json_t *h;
    size_t i;
    json_array_foreach(json_object_get(r.data, "history"), i, h)
    {
        json_t *spec = json_object_get(h, "spec");
        char version[16], gpus[16];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(h, "version")));
        snprintf(gpus, sizeof(gpus), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(spec, "gpuCount")));
        const char *row[] = {version, rs_str(h, "createTime"), rs_str(h, "containerName"),
                             rs_str(spec, "imageName"), gpus};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    return CLI_EXIT_OK;
}

/* A PATCH .../suffix with body (may be NULL), its progress shown labelled
 * verb while it runs (NULL: a short one, none), its operation followed, and
 * one line for people: human is a format taking the name and the answer's
 * containerName. */
static int rs_patch(cli_ctx *ctx, const char *verb, const char *name, const char *suffix,
                    const json_t *body, const char *human)
{
    _cleanup_free_ char *path = rs_path(ctx, name, suffix);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = verb ? cli_call_progress(ctx, verb, name, "PATCH", path, body, &r)
                  : cli_call(ctx, "PATCH", path, body, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    fprintf(ctx->out, human, name, rs_str(r.data, "containerName"));
    return CLI_EXIT_OK;
}

int cli_cmd_scale(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    const char *gpus = cli_get(a, "gpus"), *memory = cli_get(a, "gpu-memory");
    if (!gpus && !memory)
        return cli_usage_error(ctx, a->cmd, "give --gpus N and/or --gpu-memory SIZE");
    _cleanup_json_ json_t *patch = json_object();
    long long n;
    if (gpus) {
        if (cli_parse_int("--gpus", gpus, 0, 1024, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(patch, "gpuCount", json_integer(n));
    }
    if (memory)
        json_object_set_new(patch, "gpuMemory", json_string(memory));
    _cleanup_json_ json_t *body = json_pack("{s:O}", "gpuPatch", patch);
    return rs_patch(ctx, "scale", a->pos[0], NULL, body, "%s: scaled; now runs as %s\n");
}

int cli_cmd_stop(cli_ctx *ctx, const cli_args *a)
{
    return rs_patch(ctx, "stop", a->pos[0], "stop", NULL,
                    "%s: stopped (%s kept; its GPUs and ports released)\n");
}

int cli_cmd_pause(cli_ctx *ctx, const cli_args *a)
{
    return rs_patch(ctx, NULL, a->pos[0], "pause", NULL,
                    "%s: paused (%s stopped; GPUs and ports kept)\n");
}

int cli_cmd_restart(cli_ctx *ctx, const cli_args *a)
{
    return rs_patch(ctx, "restart", a->pos[0], "restart", NULL, "%s: restarted as %s\n");
}

/* Continue a paused set, restart a stopped one: the state decides. */
int cli_cmd_start(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", path, NULL, &r);
    if (rc)
        return rc;
    const char *state = rs_str(json_object_get(r.data, "info"), "state");
    if (!strcmp(state, "paused"))
        return rs_patch(ctx, NULL, a->pos[0], "continue", NULL, "%s: running again (%s)\n");
    if (!strcmp(state, "stopped"))
        return rs_patch(ctx, "start", a->pos[0], "restart", NULL, "%s: started as %s\n");
    return cli_fail(ctx, !strcmp(state, "deleted") ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CONFLICT,
                    "cannot start replica set '%s': it is %s; only a paused or stopped set can "
                    "start",
                    a->pos[0], state);
}

int cli_cmd_rollback(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    long long version;
    if (cli_parse_int("VERSION", a->pos[1], 1, 1 << 30, &version, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    _cleanup_json_ json_t *body = json_pack("{s:I}", "version", (json_int_t)version);
    return rs_patch(ctx, "rollback", a->pos[0], "rollback", body,
                    "%s: rolled back; now runs as %s\n");
}

/* Write len bytes of s to f (the output may hold NULs... the server has
 * made them '?', but write what is there byte for byte). */
static void exec_write(FILE *f, const json_t *s)
{
    if (json_is_string(s))
        fwrite(json_string_value(s), 1, json_string_length(s), f);
    fflush(f);
}

int cli_cmd_exec(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    if (!a->has_rest || a->nrest == 0)
        return cli_usage_error(ctx, a->cmd, "give the command after \"--\": gpubox exec %s -- CMD",
                               a->pos[0]);
    _cleanup_json_ json_t *body = json_object();
    json_t *cmd = json_array();
    for (size_t i = 0; i < a->nrest; i++)
        json_array_append_new(cmd, json_string(a->rest[i]));
    json_object_set_new(body, "cmd", cmd);
    if (cli_get(a, "workdir"))
        json_object_set_new(body, "workDir", json_string(cli_get(a, "workdir")));
    long long timeout;
    if (cli_get(a, "timeout")) {
        if (cli_parse_int("--timeout", cli_get(a, "timeout"), 1, 3600, &timeout, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "timeoutSeconds", json_integer(timeout));
    }
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], "execute");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", path, body, &r);
    if (rc)
        return rc;
    json_int_t code = json_integer_value(json_object_get(r.data, "exitCode"));
    bool timed_out = json_is_true(json_object_get(r.data, "timedOut"));
    if (ctx->json) {
        cli_print_json(ctx, r.data);
    } else {
        exec_write(ctx->out, json_object_get(r.data, "stdout"));
        exec_write(ctx->err, json_object_get(r.data, "stderr"));
        if (json_is_true(json_object_get(r.data, "stdoutTruncated")) ||
            json_is_true(json_object_get(r.data, "stderrTruncated")))
            cli_fail(ctx, 0, "the output was cut at 1 MiB per stream");
    }
    if (timed_out)
        return cli_fail(ctx, 124, "the command was killed after its timeout");
    return code < 0 || code > 255 ? CLI_EXIT_ERROR : (int)code;
}

int cli_cmd_commit(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body =
        json_pack("{s:s, s:b}", "newImageName", a->pos[1], "overwrite", cli_flag(a, "overwrite"));
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], "commit");
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "POST", path, body, &r);
    if (rc)
        return rc;
    if (ctx->json) {
        cli_print_json(ctx, r.data);
        return CLI_EXIT_OK;
    }
    fprintf(ctx->out, "%s: committed to %s (%s)\n", a->pos[0], rs_str(r.data, "imageName"),
            rs_str(r.data, "imageId"));
    return CLI_EXIT_OK;
}

int cli_cmd_rm(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *base = rs_path(ctx, a->pos[0], NULL);
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s%s", base, cli_flag(a, "purge") ? "?purge=true" : "") < 0)
        abort();
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call_progress(ctx, "rm", a->pos[0], "DELETE", path, NULL, &r);
    if (rc || (rc = cli_follow_operation(ctx, r.data)))
        return rc;
    return rs_done(ctx, r.data,
                   cli_flag(a, "purge") ? "%s: deleted, history purged\n"
                                        : "%s: deleted (history kept: gpubox history)\n",
                   a->pos[0]);
}
