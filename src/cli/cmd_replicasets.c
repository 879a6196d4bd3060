/*
 * cmd_replicasets.c - the subcommands on replica sets: ps, run, inspect,
 * history, scale, stop, start, pause, restart, rollback, exec, commit, rm.
 *
 * Each builds one request to /api/v1/replicaSet... and says how to print
 * the answer for people: a table or a few lines. Sending it (the long ones
 * with their progress shown meanwhile), following the operation the answer
 * names and printing the server's data for --json are cli_exchange's
 * (cmd_common.c).
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/err.h"
#include "util/size.h"

#define RS_BASE "/api/v1/replicaSet"

/* "/api/v1/replicaSet/<name>[/suffix]" (malloc'd). */
static char *rs_path(cli_ctx *ctx, const char *name, const char *suffix)
{
    return cli_path(ctx, RS_BASE, name, suffix);
}

/* "40001->22/tcp, 40002->53/udp" into buf. */
static void rs_ports_text(const json_t *ports, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p)
    {
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        cli_appendf(buf, size, "%s%" JSON_INTEGER_FORMAT "->%" JSON_INTEGER_FORMAT "/%s",
                    i ? ", " : "", json_integer_value(json_object_get(p, "hostPort")),
                    json_integer_value(json_object_get(p, "containerPort")), proto ? proto : "tcp");
    }
}

/* Whether Docker's status of a set's container is what its state implies:
 * then ps shows the state alone. */
static bool rs_status_agrees(const char *state, const char *status)
{
    if (!strcmp(state, status))
        return true;
    if (!strcmp(state, "paused") || !strcmp(state, "stopped"))
        return !strcmp(status, "exited") || !strcmp(status, "created") ||
               (!strcmp(state, "stopped") && !strcmp(status, "missing"));
    return !strcmp(state, "creating") && !strcmp(status, "created");
}

/* "running", or "running (container exited)" when Docker says otherwise. */
static void rs_state_text(const json_t *s, char *buf, size_t size)
{
    const char *state = cli_str(s, "state"), *status = cli_str(s, "status");
    if (rs_status_agrees(state, status))
        snprintf(buf, size, "%s", state);
    else
        snprintf(buf, size, "%s (container %s)", state, status);
}

/* "37%", "0% idle", "-" when the busiest card's utilization is unknown; NULL
 * without a reading (the column is then left out). */
static const char *rs_busy_text(const json_t *s, char *buf, size_t size)
{
    json_t *usage = json_object_get(s, "usage");
    if (!json_is_object(usage))
        return NULL;
    json_t *util = json_object_get(usage, "utilization");
    bool idle = json_is_string(json_object_get(usage, "idleSince"));
    if (json_is_integer(util) && json_integer_value(util) >= 0)
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT "%%%s", json_integer_value(util),
                 idle ? " idle" : "");
    else
        snprintf(buf, size, "%s", idle ? "idle" : "-");
    return buf;
}

void cli_ps_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    json_t *sets = json_object_get(data, "replicaSets"), *s;
    size_t i;
    if (cli_flag(a, "quiet")) {
        cli_print_names(ctx, sets);
        return;
    }
    static const char *const headers[] = {"NAME", "NODE", "OWNER", "VERSION", "IMAGE", "STATE",
                                          "GPUS", "BUSY", "PORTS", "CREATED", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");  /* only a fleet's sets carry node */
    cli_table_optional(t, "OWNER"); /* only when the sets have two owners or more */
    cli_table_optional(t, "BUSY");  /* only when the server samples usage */
    bool owners = cli_owners_differ(sets);
    json_array_foreach(sets, i, s)
    {
        char version[16], gpus[16], ports[512], state[64], busy[32];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(s, "version")));
        snprintf(gpus, sizeof(gpus), "%zu", json_array_size(json_object_get(s, "gpus")));
        rs_ports_text(json_object_get(s, "ports"), ports, sizeof(ports));
        rs_state_text(s, state, sizeof(state));
        const char *node = json_string_value(json_object_get(s, "node")); /* NULL: none */
        const char *image = json_string_value(json_object_get(s, "image"));
        const char *row[] = {cli_str(s, "name"),
                             node,
                             cli_owner_cell(s, owners),
                             version,
                             image && *image ? image : "-",
                             state,
                             gpus,
                             rs_busy_text(s, busy, sizeof(busy)),
                             ports[0] ? ports : "-",
                             cli_str(s, "createTime")};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
}

int cli_cmd_ps(cli_ctx *ctx, const cli_args *a)
{
    const char *path = cli_flag(a, "all") ? RS_BASE "?all=true" : RS_BASE;
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, cli_ps_print, a);
}

/* -v SRC:DEST[:ro|rw] -> {src, dest, readOnly}. */
static int run_bind(cli_ctx *ctx, const cli_args *a, const char *text, json_t *binds)
{
    _cleanup_free_ char *copy = xstrdup(text);
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
    _cleanup_free_ char *host = xstrndup(text, (size_t)(colon - text));
    _cleanup_free_ char *cport = xstrdup(colon + 1);
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
    _cleanup_free_ char *kv = xasprintf("%s=%s", text, value);
    json_array_append_new(env, json_string(kv));
    return 0;
}

/* --node-selector K=V[,K=V...] into the selector object. */
static int run_selector(cli_ctx *ctx, const cli_args *a, const char *text, json_t *selector)
{
    char msg[512];
    if (cli_parse_pairs("--node-selector", text, selector, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    return 0;
}

/* Every --ssh-key FILE's keys, one a line (blank lines and # comments
 * skipped, as in authorized_keys), into body's sshKeys; the server checks
 * them. 0 or a usage exit code. */
static int rs_ssh_keys(cli_ctx *ctx, const cli_args *a, json_t *body)
{
    if (!cli_count(a, "ssh-key"))
        return 0;
    json_t *keys = json_array();
    json_object_set_new(body, "sshKeys", keys);
    for (size_t i = 0; i < a->nopts; i++) {
        if (strcmp(a->opts[i].opt->name, "ssh-key") != 0)
            continue;
        const char *path = a->opts[i].value;
        FILE *f = fopen(path, "r");
        if (!f)
            return cli_usage_error(ctx, a->cmd, "--ssh-key %s: %s", path, strerror(errno));
        char line[16384];
        size_t before = json_array_size(keys);
        while (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\r\n")] = '\0';
            const char *k = line + strspn(line, " \t");
            if (*k && *k != '#')
                json_array_append_new(keys, json_string(k));
        }
        fclose(f);
        if (json_array_size(keys) == before)
            return cli_usage_error(ctx, a->cmd,
                                   "--ssh-key %s has no key; give a public key file such as "
                                   "~/.ssh/id_ed25519.pub",
                                   path);
    }
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
    /* in a fleet: sent only when given */
    json_t *selector = cli_count(a, "node-selector") ? json_object() : NULL;
    if (selector)
        json_object_set_new(body, "nodeSelector", selector);
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
        else if (!strcmp(name, "node-selector"))
            rc = run_selector(ctx, a, v, selector);
        else if (!strcmp(name, "label")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v)
                rc = cli_usage_error(ctx, a->cmd, "--label '%s': give K=V", v);
            else {
                _cleanup_free_ char *k = xstrndup(v, (size_t)(eq - v));
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
    const char *pull = cli_get(a, "pull");
    if (pull && strcmp(pull, "missing") != 0 && strcmp(pull, "always") != 0 &&
        strcmp(pull, "never") != 0)
        return cli_usage_error(ctx, a->cmd, "--pull takes missing, always or never, not '%s'",
                               pull);
    if (pull)
        json_object_set_new(body, "pull", json_string(pull));
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
    const char *cores = cli_get(a, "gpu-cores");
    if (cores) {
        if (cli_parse_int("--gpu-cores", cores, 1, 100, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "gpuCores", json_integer(n));
    }
    /* the node, in a fleet: sent only when given */
    const char *node = cli_get(a, "node"), *placement = cli_get(a, "placement");
    if (node)
        json_object_set_new(body, "node", json_string(node));
    if (placement && strcmp(placement, "binpack") && strcmp(placement, "spread"))
        return cli_usage_error(ctx, a->cmd, "--placement must be binpack or spread, got '%s'",
                               placement);
    if (placement)
        json_object_set_new(body, "placement", json_string(placement));
    const char *cpus = cli_get(a, "cpus");
    if (cpus) {
        double c;
        if (cli_parse_number("--cpus", cpus, 0, 1024, &c, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "cpus", json_real(c));
    }
    const char *cpu_count = cli_get(a, "cpu-count");
    if (cpu_count) {
        if (cli_parse_int("--cpu-count", cpu_count, 0, 4096, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "cpuCount", json_integer(n));
    }
    static const char *const strings[][2] = {{"memory", "memory"},
                                             {"shm-size", "shmSize"},
                                             {"restart", "restartPolicy"},
                                             {"gpu-policy", "gpuPolicy"},
                                             {"gpu-model", "gpuModel"},
                                             {"idle-stop", "idleStop"},
                                             {"max-duration", "maxDuration"},
                                             {"queue-timeout", "queueTimeout"}};
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
        if (cli_get(a, strings[i][0]))
            json_object_set_new(body, strings[i][1], json_string(cli_get(a, strings[i][0])));
    if (cli_flag(a, "queue"))
        json_object_set_new(body, "queue", json_true());
    const char *priority = cli_get(a, "priority");
    if (priority) {
        if (cli_parse_int("--priority", priority, 0, 100, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "priority", json_integer(n));
    }
    if ((cli_flag(a, "detach") || cli_get(a, "queue-timeout")) && !cli_flag(a, "queue"))
        return cli_usage_error(ctx, a->cmd, "--detach and --queue-timeout go with --queue");
    int rc = run_lists(ctx, a, body);
    if (!rc)
        rc = rs_ssh_keys(ctx, a, body);
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

/* The ssh command of an answer's "ssh" (data's own, or its info's), and
 * why it may not work yet: "ssh -p 40012 root@host" or "ssh -p 40012
 * root@host (not ready: the image has no SSH server ...)". */
static bool rs_ssh_text(const json_t *ssh, char *buf, size_t size)
{
    if (!json_is_object(ssh))
        return false;
    const char *command = json_string_value(json_object_get(ssh, "command"));
    snprintf(buf, size, "%s", command ? command : "-");
    if (!json_is_true(json_object_get(ssh, "running")))
        cli_appendf(buf, size, " (not ready: %s)", cli_str(ssh, "message"));
    return true;
}

/* [2, 3, 18] as "2-3,18" (a cpuset); "" for none. */
static void rs_cpuset_text(const json_t *ids, char *buf, size_t size)
{
    size_t len = 0, n = json_array_size(ids);
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size;) {
        json_int_t first = json_integer_value(json_array_get(ids, i)), last = first;
        while (i + 1 < n && json_integer_value(json_array_get(ids, i + 1)) == last + 1)
            last = json_integer_value(json_array_get(ids, ++i));
        i++;
        len += (size_t)(first == last ? snprintf(buf + len, size - len, "%s%" JSON_INTEGER_FORMAT,
                                                 len ? "," : "", first)
                                      : snprintf(buf + len, size - len,
                                                 "%s%" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT,
                                                 len ? "," : "", first, last));
    }
}

static void run_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    char gpus[1024], ports[512], ssh[1024];
    cli_join(json_object_get(data, "gpus"), ", ", gpus, sizeof(gpus));
    rs_ports_text(json_object_get(data, "ports"), ports, sizeof(ports));
    fprintf(ctx->out, "%s: running as %s\n  gpus:  %s\n  ports: %s\n", a->pos[0],
            cli_str(data, "containerName"), gpus[0] ? gpus : "-", ports[0] ? ports : "-");
    if (rs_ssh_text(json_object_get(data, "ssh"), ssh, sizeof(ssh)))
        fprintf(ctx->out, "  ssh:   %s\n", ssh);
    char cpus[1024];
    rs_cpuset_text(json_object_get(data, "cpuset"), cpus, sizeof(cpus));
    if (cpus[0])
        fprintf(ctx->out, "  cpus:  %s\n", cpus);
}

int cli_cmd_run(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = NULL;
    int rc = run_body(ctx, a, &body);
    if (rc)
        return rc;
    if (cli_flag(a, "queue"))
        return cli_run_queued(ctx, a, body, run_print);
    cli_req req = {.method = "POST",
                   .path = RS_BASE,
                   .body = body,
                   .verb = "run",
                   .name = a->pos[0],
                   .follow = true};
    return cli_exchange(ctx, &req, run_print, a);
}

/* A spec's binds as "src:dest[:ro]" joined. */
static void rs_binds_text(const json_t *binds, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        cli_appendf(buf, size, "%s%s:%s%s", i ? ", " : "", cli_str(b, "src"), cli_str(b, "dest"),
                    json_is_true(json_object_get(b, "readOnly")) ? ":ro" : "");
    }
}

/* A field of the set's info, or of the answer's data beside it. */
static json_t *rs_info_field(const json_t *data, const char *field)
{
    json_t *v = json_object_get(json_object_get(data, "info"), field);
    return v && !json_is_null(v) ? v : json_object_get(data, field);
}

/* A non-empty string field of spec, or NULL. */
static const char *rs_spec_text(const json_t *spec, const char *field)
{
    const char *s = json_string_value(json_object_get(spec, field));
    return s && s[0] ? s : NULL;
}

/* The automatic stops, the current run and the cards' usage, each only
 * when the answer has them (a gpuboxd without them prints nothing more). */
static void inspect_usage_print(cli_ctx *ctx, const json_t *data, const json_t *spec)
{
    /* The run limits sit beside the spec; older answers had them in it. */
    const char *idle = json_string_value(rs_info_field(data, "idleStop"));
    const char *max = json_string_value(rs_info_field(data, "maxDuration"));
    idle = idle && *idle ? idle : rs_spec_text(spec, "idleStop");
    max = max && *max ? max : rs_spec_text(spec, "maxDuration");
    const char *since = json_string_value(rs_info_field(data, "runningSince"));
    const char *stop_at = json_string_value(rs_info_field(data, "stopAt"));
    json_t *stopped = rs_info_field(data, "stopped"), *usage = rs_info_field(data, "usage");
    if (idle || max || stop_at) {
        char text[256] = "";
        if (idle)
            cli_appendf(text, sizeof(text), "idle %s", idle);
        if (max)
            cli_appendf(text, sizeof(text), "%smax %s", text[0] ? "; " : "", max);
        if (stop_at)
            cli_appendf(text, sizeof(text), ", at %s", stop_at);
        fprintf(ctx->out, "Auto stop:  %s\n", text);
    }
    if (since)
        fprintf(ctx->out, "Running:    since %s\n", since);
    if (json_is_object(stopped)) {
        const char *detail = json_string_value(json_object_get(stopped, "detail"));
        fprintf(ctx->out, "Stopped:    %s at %s%s%s\n", cli_str(stopped, "reason"),
                cli_str(stopped, "at"), detail && detail[0] ? ": " : "",
                detail && detail[0] ? detail : "");
    }
    if (!json_is_object(usage))
        return;
    const char *idle_since = json_string_value(json_object_get(usage, "idleSince"));
    fprintf(ctx->out, "Usage:      sampled %s%s%s\n", cli_str(usage, "sampledAt"),
            idle_since ? ", idle since " : "", idle_since ? idle_since : "");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(usage, "cards"), i, c)
    {
        char used[32] = "-", share[32] = "-", util[16] = "-";
        json_t *v;
        if (json_is_integer(v = json_object_get(c, "memoryUsedMiB")) && json_integer_value(v) >= 0)
            size_format((uint64_t)json_integer_value(v) * 1024 * 1024, used, sizeof(used));
        if (json_is_integer(v = json_object_get(c, "shareMiB")) && json_integer_value(v) >= 0)
            size_format((uint64_t)json_integer_value(v) * 1024 * 1024, share, sizeof(share));
        if (json_is_integer(v = json_object_get(c, "utilization")) && json_integer_value(v) >= 0)
            snprintf(util, sizeof(util), "%" JSON_INTEGER_FORMAT "%%", json_integer_value(v));
        fprintf(ctx->out, "  card %" JSON_INTEGER_FORMAT " %s: %s/%s used, utilization %s%s%s\n",
                json_integer_value(json_object_get(c, "index")), cli_str(c, "uuid"), used, share,
                util, json_is_false(json_object_get(c, "healthy")) ? ", unhealthy" : "",
                json_is_true(json_object_get(c, "overShare")) ? ", OVER its share" : "");
    }
}

/* One spec value for the Pending line: a number, a string, a list of
 * strings joined by spaces, anything else as compact JSON. */
static void rs_spec_value_text(const json_t *v, char *buf, size_t size)
{
    buf[0] = '\0';
    if (json_is_string(v)) {
        snprintf(buf, size, "%s", json_string_value(v)[0] ? json_string_value(v) : "\"\"");
    } else if (json_is_array(v) &&
               (json_array_size(v) == 0 || json_is_string(json_array_get(v, 0)))) {
        cli_join(v, " ", buf, size);
        if (!buf[0])
            snprintf(buf, size, "(none)");
    } else {
        _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(buf, size, "%s", text ? text : "?");
    }
}

/* "Pending:    at the next start: gpuCount 1 -> 2, env A=1 B=2": what a
 * change made while the set was stopped changes (info.pendingSpec). */
static void rs_pending_print(cli_ctx *ctx, const json_t *info)
{
    const json_t *spec = json_object_get(info, "spec"),
                 *pending = json_object_get(info, "pendingSpec");
    if (!json_is_object(pending))
        return;
    char line[2048] = "";
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)pending, key, v)
    {
        const json_t *was = json_object_get(spec, key);
        if (was && json_equal(was, v))
            continue;
        char now[512], before[512];
        rs_spec_value_text(v, now, sizeof(now));
        if (json_is_number(v) || json_is_boolean(v) || json_is_string(v)) {
            rs_spec_value_text(was ? was : json_null(), before, sizeof(before));
            cli_appendf(line, sizeof(line), "%s%s %s -> %s", line[0] ? ", " : "", key, before, now);
        } else {
            cli_appendf(line, sizeof(line), "%s%s %s", line[0] ? ", " : "", key, now);
        }
    }
    fprintf(ctx->out, "Pending:    at the next start: %s\n", line[0] ? line : "(no change)");
}

void cli_inspect_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    json_t *info = json_object_get(data, "info"), *spec = json_object_get(info, "spec");
    char gpus[1024], ports[512], env[2048], cmd[1024], binds[1024];
    cli_join(json_object_get(info, "gpus"), ", ", gpus, sizeof(gpus));
    rs_ports_text(json_object_get(info, "ports"), ports, sizeof(ports));
    cli_join(json_object_get(spec, "env"), " ", env, sizeof(env));
    cli_join(json_object_get(spec, "cmd"), " ", cmd, sizeof(cmd));
    rs_binds_text(json_object_get(spec, "binds"), binds, sizeof(binds));
    char limits[160] = "-";
    json_t *gl = json_object_get(info, "gpuLimits");
    if (json_is_object(gl))
        snprintf(limits, sizeof(limits), "%s, %s", cli_str(gl, "mode"),
                 json_is_true(json_object_get(gl, "enforced")) ? "enforced"
                                                               : "scheduled but not enforced");
    fprintf(ctx->out,
            "Name:       %s\nState:      %s\nStatus:     %s\nVersion:    %" JSON_INTEGER_FORMAT
            "\nContainer:  %s\nImage:      %s\nGPUs:       %s\nGPU limits: %s\nPorts:      %s\n"
            "Binds:      %s\n"
            "Env:        %s\nCmd:        %s\nCreated:    %s\nUpdated:    %s\n",
            cli_str(info, "name"), cli_str(info, "state"), cli_str(info, "status"),
            json_integer_value(json_object_get(info, "version")), cli_str(info, "containerName"),
            cli_str(spec, "imageName"), gpus[0] ? gpus : "-", limits, ports[0] ? ports : "-",
            binds[0] ? binds : "-", env[0] ? env : "-", cmd[0] ? cmd : "(image default)",
            cli_str(info, "createTime"), cli_str(info, "updateTime"));
    char ssh[1024];
    if (rs_ssh_text(json_object_get(info, "ssh"), ssh, sizeof(ssh)))
        fprintf(ctx->out, "SSH:        %s\n", ssh);
    char cpus[1024];
    rs_cpuset_text(json_object_get(info, "cpuset"), cpus, sizeof(cpus));
    if (cpus[0])
        fprintf(ctx->out, "CPUs:       %s (its own)\n", cpus);
    rs_pending_print(ctx, info);
    inspect_usage_print(ctx, data, spec);
}

int cli_cmd_inspect(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], NULL);
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, cli_inspect_print, NULL);
}

static void history_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    static const char *const headers[] = {"VERSION", "CREATED", "CONTAINER", "IMAGE", "GPUS", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    json_t *h;
    size_t i;
    json_array_foreach(json_object_get(data, "history"), i, h)
    {
        json_t *spec = json_object_get(h, "spec");
        char version[16], gpus[16];
        snprintf(version, sizeof(version), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(h, "version")));
        snprintf(gpus, sizeof(gpus), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(spec, "gpuCount")));
        const char *row[] = {version, cli_str(h, "createTime"), cli_str(h, "containerName"),
                             cli_str(spec, "imageName"), gpus};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
}

int cli_cmd_history(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], "history");
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, history_print, NULL);
}

/* The line a PATCH prints for people: human is a format taking the set's
 * name and the answer's containerName. */
typedef struct rs_patch_line {
    const char *name;
    const char *human;
    bool rollback; /* another image's line says what a rollback does not bring back */
} rs_patch_line;

static void rs_patch_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const rs_patch_line *line = arg;
    const json_t *pending = json_object_get(data, "pending");
    if (json_is_boolean(pending) && !strcmp(cli_str(data, "state"), "stopped")) {
        /* A change of a stopped set waits for its next start. */
        if (json_is_true(pending))
            fprintf(ctx->out,
                    "%s: stopped; the change applies at its next start (gpubox start %s)\n",
                    line->name, line->name);
        else if (json_is_true(json_object_get(data, "changed")))
            fprintf(ctx->out, "%s: changed; it is stopped and starts as it was (gpubox start %s)\n",
                    line->name, line->name);
        else
            fprintf(ctx->out, "%s: nothing changed; it is stopped\n", line->name);
        return;
    }
    if (json_is_true(json_object_get(data, "inPlace"))) {
        /* A share resized on its cards: the same container, the same version. */
        const json_t *share = json_array_get(json_object_get(data, "gpuShares"), 0);
        const json_t *cores = json_object_get(data, "gpuCores");
        char compute[48] = "no compute limit";
        if (json_is_integer(cores))
            snprintf(compute, sizeof(compute), "at most %" JSON_INTEGER_FORMAT "%% of its compute",
                     json_integer_value(cores));
        fprintf(ctx->out,
                "%s: share changed in place: now %" JSON_INTEGER_FORMAT
                " MiB on each card, %s; still version %" JSON_INTEGER_FORMAT
                " (%s), not restarted; its processes see it at their next allocation\n",
                line->name, json_integer_value(json_object_get(share, "memoryMiB")), compute,
                json_integer_value(json_object_get(data, "version")),
                cli_str(data, "containerName"));
        return;
    }
    fprintf(ctx->out, line->human, line->name, cli_str(data, "containerName"));
    if (json_is_true(json_object_get(data, "pendingApplied")))
        fprintf(ctx->out,
                "%s: the change made while it was stopped now runs (version %" JSON_INTEGER_FORMAT
                ")\n",
                line->name, json_integer_value(json_object_get(data, "version")));
    if (json_is_false(json_object_get(data, "systemDiskCarried")) && line->rollback)
        fprintf(ctx->out,
                "%s: now runs %s again, as the image was: files written outside binds and "
                "volumes under the other image are not brought back (binds and volumes kept)\n",
                line->name, cli_str(data, "imageName"));
    else if (json_is_false(json_object_get(data, "systemDiskCarried")))
        fprintf(ctx->out,
                "%s: now runs %s, without the old system disk (binds and volumes "
                "kept; roll back to return to the old image)\n",
                line->name, cli_str(data, "imageName"));
    const json_t *aside = json_object_get(data, "gpusAside");
    if (aside)
        fprintf(ctx->out, "%s: runs without its %lld card(s); `gpubox start %s` takes them back\n",
                line->name, (long long)json_integer_value(json_object_get(aside, "gpuCount")),
                line->name);
    char ssh[1024];
    if (rs_ssh_text(json_object_get(data, "ssh"), ssh, sizeof(ssh)))
        fprintf(ctx->out, "  ssh: %s\n", ssh);
}

/* A PATCH .../suffix with body (may be NULL), its progress shown labelled
 * verb while it runs (NULL: a short one, none), its operation followed, and
 * one line for people (rs_patch_line). */
static int rs_patch(cli_ctx *ctx, const char *verb, const char *name, const char *suffix,
                    const json_t *body, const char *human)
{
    _cleanup_free_ char *path = rs_path(ctx, name, suffix);
    cli_req req = {
        .method = "PATCH", .path = path, .body = body, .verb = verb, .name = name, .follow = true};
    return cli_exchange(ctx, &req, rs_patch_print,
                        &(rs_patch_line){name, human, suffix && !strcmp(suffix, "rollback")});
}

int cli_gpu_cores_value(cli_ctx *ctx, const cli_args *a, const char *text, json_t *patch)
{
    char msg[256];
    long long n;
    if (!text)
        return 0;
    if (strcmp(text, "none") == 0) {
        json_object_set_new(patch, "gpuCores", json_null());
        return 0;
    }
    if (cli_parse_int("--gpu-cores", text, 1, 100, &n, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s (or \"none\": no compute limit)", msg);
    json_object_set_new(patch, "gpuCores", json_integer(n));
    return 0;
}

int cli_cmd_scale(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    const char *gpus = cli_get(a, "gpus"), *memory = cli_get(a, "gpu-memory");
    const char *cores = cli_get(a, "gpu-cores");
    const char *idle = cli_get(a, "idle-stop"), *max = cli_get(a, "max-duration");
    const char *image = cli_get(a, "image"), *cpu_count = cli_get(a, "cpu-count");
    if (!gpus && !memory && !cores && !idle && !max && !image && !cli_count(a, "ssh-key") &&
        !cpu_count)
        return cli_usage_error(ctx, a->cmd,
                               "give --gpus N and/or --gpu-memory SIZE, --gpu-cores PERCENT (or "
                               "--image, --ssh-key, --cpu-count, --idle-stop, --max-duration)");
    _cleanup_json_ json_t *body = json_object();
    if (image)
        json_object_set_new(body, "imageName", json_string(image));
    int rc = rs_ssh_keys(ctx, a, body);
    if (rc)
        return rc;
    long long n;
    if (gpus || memory || cores) {
        json_t *patch = json_object();
        json_object_set_new(body, "gpuPatch", patch);
        int rc_cores = cli_gpu_cores_value(ctx, a, cores, patch);
        if (rc_cores)
            return rc_cores;
        if (gpus) {
            if (cli_parse_int("--gpus", gpus, 0, 1024, &n, msg, sizeof(msg)))
                return cli_usage_error(ctx, a->cmd, "%s", msg);
            json_object_set_new(patch, "gpuCount", json_integer(n));
        }
        if (memory)
            json_object_set_new(patch, "gpuMemory", json_string(memory));
    }
    /* passed as given ("30m"; "" removes the limit); gpuboxd checks them */
    if (idle)
        json_object_set_new(body, "idleStop", json_string(idle));
    if (max)
        json_object_set_new(body, "maxDuration", json_string(max));
    if (cpu_count) {
        if (cli_parse_int("--cpu-count", cpu_count, 0, 4096, &n, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "cpuCount", json_integer(n));
    }
    return rs_patch(ctx, "scale", a->pos[0], NULL, body,
                    gpus || memory || cores || cpu_count ? "%s: scaled; now runs as %s\n"
                                                         : "%s: changed; now runs as %s\n");
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

/* --no-gpu: {"gpuCount": 0}, a start without the set's cards. */
static json_t *rs_restart_body(const cli_args *a)
{
    return cli_flag(a, "no-gpu") ? json_pack("{s:i}", "gpuCount", 0) : NULL;
}

int cli_cmd_restart(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body = rs_restart_body(a);
    return rs_patch(ctx, "restart", a->pos[0], "restart", body, "%s: restarted as %s\n");
}

/* Continue a paused set, restart a stopped one: the state decides. */
int cli_cmd_start(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", path, NULL, &r);
    if (rc)
        return rc;
    const char *state = cli_str(json_object_get(r.data, "info"), "state");
    _cleanup_json_ json_t *body = rs_restart_body(a);
    if (!strcmp(state, "paused") && !body)
        return rs_patch(ctx, NULL, a->pos[0], "continue", NULL, "%s: running again (%s)\n");
    /* Running without its cards (a start with --no-gpu): a plain start
     * takes them back, as the advice printed then says. */
    bool aside = json_is_object(json_object_get(json_object_get(r.data, "info"), "gpusAside"));
    if (!strcmp(state, "stopped") || !strcmp(state, "paused") ||
        (!strcmp(state, "running") && aside && !body))
        return rs_patch(ctx, "start", a->pos[0], "restart", body, "%s: started as %s\n");
    if (!strcmp(state, "running") && body)
        return cli_fail(ctx, CLI_EXIT_CONFLICT,
                        "cannot start replica set '%s': it is running; `gpubox restart --no-gpu "
                        "%s` restarts it without its cards",
                        a->pos[0], a->pos[0]);
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
    bool interactive = cli_flag(a, "interactive"), tty = cli_flag(a, "tty");
    if (tty && !interactive)
        return cli_usage_error(ctx, a->cmd, "-t goes with -i: gpubox exec -it %s -- CMD",
                               a->pos[0]);
    if (interactive && (cli_get(a, "workdir") || cli_get(a, "timeout")))
        return cli_usage_error(ctx, a->cmd,
                               "--workdir and --timeout are for a one-shot exec, not with -i");
    if (interactive && (tty || (a->has_rest && a->nrest > 0)))
        return cli_exec_stream(ctx, a, tty);
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

static void commit_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    fprintf(ctx->out, "%s: committed to %s (%s)\n", a->pos[0], cli_str(data, "imageName"),
            cli_str(data, "imageId"));
}

int cli_cmd_commit(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_json_ json_t *body =
        json_pack("{s:s, s:b}", "newImageName", a->pos[1], "overwrite", cli_flag(a, "overwrite"));
    if (cli_flag(a, "keep-env")) /* only when asked: older servers refuse the field */
        json_object_set_new(body, "keepEnv", json_true());
    _cleanup_free_ char *path = rs_path(ctx, a->pos[0], "commit");
    cli_req req = {.method = "POST", .path = path, .body = body};
    return cli_exchange(ctx, &req, commit_print, a);
}

static void rm_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)data;
    const cli_args *a = arg;
    if (cli_flag(a, "purge"))
        fprintf(ctx->out, "%s: deleted, history purged\n", a->pos[0]);
    else
        fprintf(ctx->out, "%s: deleted (history kept: gpubox history)\n", a->pos[0]);
}

int cli_cmd_rm(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *base = rs_path(ctx, a->pos[0], NULL);
    _cleanup_free_ char *path = xasprintf("%s%s", base, cli_flag(a, "purge") ? "?purge=true" : "");
    cli_req req = {
        .method = "DELETE", .path = path, .verb = "rm", .name = a->pos[0], .follow = true};
    return cli_exchange(ctx, &req, rm_print, a);
}
