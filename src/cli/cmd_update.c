/*
 * cmd_update.c - gpubox update NAME: change an instance's environment,
 * volumes, ports and limits, as docker update changes limits (docs/cli.md).
 *
 * Everything goes in one PATCH /api/v1/replicaSet/NAME, so one new version
 * takes every change at once:
 *   -e K=V / --env-rm K         envPatch {set, unset}
 *   -v SRC:DEST[:ro]            volumePatch: bind SRC at DEST, in place of
 *                               what DEST had (or added)
 *   --volume-rm DEST            volumePatch: the bind at DEST removed
 *   -p PORT / --publish-rm PORT containerPorts and ports: the set's list
 *                               with these added or taken out (a port kept
 *                               keeps its host port)
 *   --cpus, -m, --shm-size, --restart   the limits, as in run
 * Volumes and ports are changed against the set's spec as GET shows it:
 * the patch names a bind by its source and destination, and the port
 * lists are sent whole.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

#define UPDATE_BASE "/api/v1/replicaSet"

/* "8888", "53/udp", 8888 -> port and protocol ("tcp" when none). */
static bool update_port_parse(const json_t *v, long long *port, char *proto, size_t size)
{
    if (json_is_integer(v)) {
        *port = json_integer_value(v);
        snprintf(proto, size, "tcp");
        return true;
    }
    const char *s = json_string_value(v);
    if (!s)
        return false;
    char *end = NULL;
    *port = strtoll(s, &end, 10);
    if (end == s || *port < 1 || *port > 65535 || (*end && *end != '/'))
        return false;
    snprintf(proto, size, "%s", *end == '/' ? end + 1 : "tcp");
    return true;
}

/* Does container-port entry v (a string or a {containerPort, protocol})
 * name port/proto? */
static bool update_port_is(const json_t *v, long long port, const char *proto)
{
    long long p;
    char pr[16];
    if (json_is_object(v)) {
        const char *vp = json_string_value(json_object_get(v, "protocol"));
        return json_integer_value(json_object_get(v, "containerPort")) == port &&
               strcmp(vp ? vp : "tcp", proto) == 0;
    }
    return update_port_parse(v, &p, pr, sizeof(pr)) && p == port && strcmp(pr, proto) == 0;
}

/* Remove every entry of list naming port/proto; how many went. */
static size_t update_ports_remove(json_t *list, long long port, const char *proto)
{
    size_t gone = 0;
    for (size_t i = json_array_size(list); i-- > 0;)
        if (update_port_is(json_array_get(list, i), port, proto)) {
            json_array_remove(list, i);
            gone++;
        }
    return gone;
}

/* -p PORT[/proto] or HOST:PORT[/proto] added to the lists (nothing when
 * the container port is published already: the same answer twice). */
static int update_publish(cli_ctx *ctx, const cli_args *a, const char *text, json_t *cports,
                          json_t *ports)
{
    char msg[256], proto[16];
    const char *colon = strchr(text, ':');
    long long host = 0, port;
    _cleanup_free_ char *host_text = colon ? xstrndup(text, (size_t)(colon - text)) : NULL;
    if (host_text && cli_parse_int("-p host port", host_text, 1, 65535, &host, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    _cleanup_json_ json_t *cport = json_string(colon ? colon + 1 : text);
    if (!update_port_parse(cport, &port, proto, sizeof(proto)) ||
        (strcmp(proto, "tcp") && strcmp(proto, "udp")))
        return cli_usage_error(ctx, a->cmd,
                               "-p '%s': give PORT, PORT/udp or HOST:PORT (ports 1-65535)", text);
    const json_t *lists[] = {ports, cports};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
        for (size_t i = 0; i < json_array_size(lists[l]); i++)
            if (update_port_is(json_array_get(lists[l], i), port, proto))
                return 0;
    if (colon)
        json_array_append_new(ports,
                              json_pack("{s:I, s:I, s:s}", "hostPort", (json_int_t)host,
                                        "containerPort", (json_int_t)port, "protocol", proto));
    else
        json_array_append_new(cports, json_sprintf("%lld/%s", port, proto));
    return 0;
}

static int update_unpublish(cli_ctx *ctx, const cli_args *a, const char *text, json_t *cports,
                            json_t *ports)
{
    char proto[16];
    long long port;
    _cleanup_json_ json_t *v = json_string(text);
    if (!update_port_parse(v, &port, proto, sizeof(proto)))
        return cli_usage_error(ctx, a->cmd, "--publish-rm '%s': give PORT or PORT/udp", text);
    if (update_ports_remove(cports, port, proto) + update_ports_remove(ports, port, proto) == 0)
        return cli_fail(ctx, CLI_EXIT_NOT_FOUND,
                        "%s does not publish container port %lld/%s; gpubox inspect %s shows its "
                        "ports",
                        a->pos[0], port, proto, a->pos[0]);
    return 0;
}

/* The set's bind at dest, or NULL. */
static json_t *update_bind_at(const json_t *binds, const char *dest)
{
    size_t i;
    json_t *b;
    json_array_foreach(binds, i, b)
    {
        const char *d = json_string_value(json_object_get(b, "dest"));
        if (d && strcmp(d, dest) == 0)
            return b;
    }
    return NULL;
}

/* -v SRC:DEST[:ro] -> {oldBind: the bind at DEST, if any, newBind}. The
 * binds list follows the change, so a later option sees it. */
static int update_volume(cli_ctx *ctx, const cli_args *a, const char *text, json_t *binds,
                         json_t *changes)
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
    json_t *nb = json_pack("{s:s, s:s, s:b}", "src", parts[0], "dest", parts[1], "readOnly",
                           n == 3 && !strcmp(parts[2], "ro"));
    json_t *old = update_bind_at(binds, parts[1]);
    json_t *change = json_pack("{s:O}", "newBind", nb);
    if (old) {
        json_object_set_new(change, "oldBind",
                            json_pack("{s:O, s:O}", "src", json_object_get(old, "src"), "dest",
                                      json_object_get(old, "dest")));
        json_object_update(old, nb);
    } else {
        json_array_append(binds, nb);
    }
    json_decref(nb);
    json_array_append_new(changes, change);
    return 0;
}

static int update_volume_rm(cli_ctx *ctx, const cli_args *a, const char *dest, json_t *binds,
                            json_t *changes)
{
    json_t *old = update_bind_at(binds, dest);
    if (!old)
        return cli_fail(ctx, CLI_EXIT_NOT_FOUND,
                        "%s has nothing bound at %s; gpubox inspect %s shows its binds", a->pos[0],
                        dest, a->pos[0]);
    json_array_append_new(changes,
                          json_pack("{s:{s:O, s:O}}", "oldBind", "src", json_object_get(old, "src"),
                                    "dest", json_object_get(old, "dest")));
    for (size_t i = 0; i < json_array_size(binds); i++)
        if (json_array_get(binds, i) == old) {
            json_array_remove(binds, i);
            break;
        }
    return 0;
}

/* -e K=V, or -e K taking K's value from this environment (as run). */
static int update_env(cli_ctx *ctx, const cli_args *a, const char *text, json_t *set)
{
    if (strchr(text, '=') && text[0] != '=') {
        json_array_append_new(set, json_string(text));
        return 0;
    }
    const char *value = getenv(text);
    if (!value || !text[0] || strchr(text, '='))
        return cli_usage_error(ctx, a->cmd, "-e %s: give K=V, or set %s in this environment", text,
                               text);
    json_array_append_new(set, json_sprintf("%s=%s", text, value));
    return 0;
}

/* The options that change volumes or ports need the set's spec. */
static bool update_needs_spec(const cli_args *a)
{
    return cli_count(a, "volume") || cli_count(a, "volume-rm") || cli_count(a, "publish") ||
           cli_count(a, "publish-rm");
}

/* The list options, in the order given, into body. */
static int update_lists(cli_ctx *ctx, const cli_args *a, const json_t *spec, json_t *body)
{
    _cleanup_json_ json_t *binds = json_deep_copy(json_object_get(spec, "binds"));
    json_t *cports = json_deep_copy(json_object_get(spec, "containerPorts"));
    json_t *ports = json_deep_copy(json_object_get(spec, "ports"));
    json_t *set = json_array(), *unset = json_array(), *volumes = json_array();
    if (!binds)
        binds = json_array();
    if (cli_count(a, "publish") || cli_count(a, "publish-rm")) {
        json_object_set_new(body, "containerPorts", cports ? cports : json_array());
        json_object_set_new(body, "ports", ports ? ports : json_array());
        cports = json_object_get(body, "containerPorts");
        ports = json_object_get(body, "ports");
    } else {
        json_decref(cports);
        json_decref(ports);
    }
    if (cli_count(a, "env") || cli_count(a, "env-rm"))
        json_object_set_new(body, "envPatch", json_pack("{s:o, s:o}", "set", set, "unset", unset));
    else {
        json_decref(set);
        json_decref(unset);
    }
    if (cli_count(a, "volume") || cli_count(a, "volume-rm"))
        json_object_set_new(body, "volumePatch", volumes);
    else
        json_decref(volumes);
    int rc = 0;
    for (size_t i = 0; !rc && i < a->nopts; i++) {
        const char *name = a->opts[i].opt->name, *v = a->opts[i].value;
        if (!strcmp(name, "env"))
            rc = update_env(ctx, a, v, set);
        else if (!strcmp(name, "env-rm"))
            json_array_append_new(unset, json_string(v));
        else if (!strcmp(name, "volume"))
            rc = update_volume(ctx, a, v, binds, volumes);
        else if (!strcmp(name, "volume-rm"))
            rc = update_volume_rm(ctx, a, v, binds, volumes);
        else if (!strcmp(name, "publish"))
            rc = update_publish(ctx, a, v, cports, ports);
        else if (!strcmp(name, "publish-rm"))
            rc = update_unpublish(ctx, a, v, cports, ports);
    }
    return rc;
}

/* --cpus, -m, --shm-size, --restart: as run sends them. */
static int update_limits(cli_ctx *ctx, const cli_args *a, json_t *body)
{
    char msg[256];
    const char *cpus = cli_get(a, "cpus");
    if (cpus) {
        double c;
        if (cli_parse_number("--cpus", cpus, 0, 1024, &c, msg, sizeof(msg)))
            return cli_usage_error(ctx, a->cmd, "%s", msg);
        json_object_set_new(body, "cpus", json_real(c));
    }
    static const char *const strings[][2] = {
        {"memory", "memory"}, {"shm-size", "shmSize"}, {"restart", "restartPolicy"}};
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
        const char *v = cli_get(a, strings[i][0]);
        if (v) /* "0" removes a limit: the API's 0 */
            json_object_set_new(body, strings[i][1],
                                strcmp(v, "0") == 0 && i < 2 ? json_integer(0) : json_string(v));
    }
    return 0;
}

static void update_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const cli_args *a = arg;
    if (json_is_true(json_object_get(data, "inPlace")))
        fprintf(ctx->out,
                "%s: updated in place: still version %" JSON_INTEGER_FORMAT
                " (%s), not restarted; its processes see the new limits at once\n",
                a->pos[0], json_integer_value(json_object_get(data, "version")),
                cli_str(data, "containerName"));
    else if (json_is_false(json_object_get(data, "changed")))
        fprintf(ctx->out, "%s: nothing changed (it already has what was asked)\n", a->pos[0]);
    else
        fprintf(ctx->out, "%s: updated; now runs as %s\n", a->pos[0],
                cli_str(data, "containerName"));
}

int cli_cmd_update(cli_ctx *ctx, const cli_args *a)
{
    static const char *const any[] = {"env",      "env-rm",     "volume",   "volume-rm",
                                      "publish",  "publish-rm", "cpus",     "memory",
                                      "shm-size", "restart",    "gpu-cores"};
    bool given = false;
    for (size_t i = 0; i < ARRAY_SIZE(any); i++)
        given = given || cli_count(a, any[i]) > 0;
    if (!given)
        return cli_usage_error(ctx, a->cmd,
                               "give what to change: -e K=V, --env-rm K, -v SRC:DEST, "
                               "--volume-rm DEST, -p PORT, --publish-rm PORT, --cpus, --memory, "
                               "--shm-size, --restart or --gpu-cores (cards and image: gpubox "
                               "scale)");
    _cleanup_free_ char *path = cli_path(ctx, UPDATE_BASE, a->pos[0], NULL);
    _cleanup_(cli_reply_free) cli_reply cur = {0};
    const json_t *spec = NULL;
    if (update_needs_spec(a)) {
        int rc = cli_call(ctx, "GET", path, NULL, &cur);
        if (rc)
            return rc;
        spec = json_object_get(json_object_get(cur.data, "info"), "spec");
    }
    _cleanup_json_ json_t *body = json_object();
    int rc = update_limits(ctx, a, body);
    if (!rc && cli_get(a, "gpu-cores")) {
        json_t *gpu = json_object();
        json_object_set_new(body, "gpuPatch", gpu);
        rc = cli_gpu_cores_value(ctx, a, cli_get(a, "gpu-cores"), gpu);
    }
    if (!rc)
        rc = update_lists(ctx, a, spec, body);
    if (rc)
        return rc;
    cli_req req = {.method = "PATCH",
                   .path = path,
                   .body = body,
                   .verb = "update",
                   .name = a->pos[0],
                   .follow = true};
    return cli_exchange(ctx, &req, update_print, a);
}
