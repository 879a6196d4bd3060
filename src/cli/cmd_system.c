/*
 * cmd_system.c - the subcommands about the host: gpus, cpus, ports, version.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/size.h"

static void system_mib(json_int_t mib, char *buf, size_t size)
{
    size_format((uint64_t)mib * 1024 * 1024, buf, size);
}

static void system_gpus_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    /* ALLOCATED: the memory promised to shares (a whole card's is all of
     * it); USED: what the cards' processes use now, from the monitor's
     * last sample ("-" when gpuboxd samples none), as `gpubox top` and the
     * console show it. */
    static const char *const headers[] = {"NODE",    "INDEX",     "UUID", "MODEL",
                                          "MEMORY",  "ALLOCATED", "USED", "MODE",
                                          "HEALTHY", "TENANTS",   NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE"); /* only a fleet's devices carry node: INDEX is per node */
    json_t *devices = json_object_get(data, "devices"), *d;
    size_t i;
    json_array_foreach(devices, i, d)
    {
        char index[16], mem[32], allocated[32], used[32] = "-", tenants[512];
        snprintf(index, sizeof(index), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(d, "index")));
        system_mib(json_integer_value(json_object_get(d, "memoryMiB")), mem, sizeof(mem));
        system_mib(json_integer_value(json_object_get(d, "allocatedMemoryMiB")), allocated,
                   sizeof(allocated));
        json_t *usage = json_object_get(d, "usage");
        json_t *sampled = json_object_get(usage, "memoryUsedMiB");
        if (json_is_integer(sampled) && json_integer_value(sampled) >= 0)
            system_mib(json_integer_value(sampled), used, sizeof(used));
        cli_join(json_object_get(d, "tenants"), ",", tenants, sizeof(tenants));
        const char *row[] = {json_string_value(json_object_get(d, "node")),
                             index,
                             json_string_value(json_object_get(d, "uuid")),
                             json_string_value(json_object_get(d, "model")),
                             mem,
                             allocated,
                             used,
                             json_string_value(json_object_get(d, "mode")),
                             json_is_true(json_object_get(d, "healthy")) ? "yes" : "no",
                             tenants[0] ? tenants : "-"};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    if (json_is_true(json_object_get(data, "simulated")))
        fputs("(simulated GPUs: gpuboxd runs with --simulate-gpus)\n", ctx->out);
}

int cli_cmd_gpus(cli_ctx *ctx, const cli_args *a)
{
    (void)a;
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = "/api/v1/resources/gpus"},
                        system_gpus_print, NULL);
}

/* Ascending ids of the CPUs in cpus whose key equals value ("owner" or
 * "state") as a cpulist "2-3,18-19" into buf. */
static void system_cpulist(const json_t *cpus, const char *key, const char *value, char *buf,
                           size_t size)
{
    size_t len = 0, i;
    json_int_t start = -1, last = -2;
    json_t *c;
    buf[0] = '\0';
    json_array_foreach(cpus, i, c)
    {
        const char *v = json_string_value(json_object_get(c, key));
        if (!v || strcmp(v, value) != 0)
            continue;
        json_int_t id = json_integer_value(json_object_get(c, "id"));
        if (id == last + 1) {
            last = id;
            continue;
        }
        if (start >= 0 && len < size)
            len +=
                (size_t)snprintf(buf + len, size - len,
                                 start == last ? "%s%" JSON_INTEGER_FORMAT
                                               : "%s%" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT,
                                 len ? "," : "", start, last);
        start = last = id;
    }
    if (start >= 0 && len < size)
        snprintf(buf + len, size - len,
                 start == last ? "%s%" JSON_INTEGER_FORMAT
                               : "%s%" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT,
                 len ? "," : "", start, last);
}

static void system_cpus_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    static const char *const node_headers[] = {"NUMA", "CPUS", "TOTAL", "FREE", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(node_headers);
    json_t *n, *cpus = json_object_get(data, "cpus"), *c;
    size_t i;
    json_array_foreach(json_object_get(data, "numaNodes"), i, n)
    {
        char node[16], total[16], free_n[16];
        snprintf(node, sizeof(node), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(n, "node")));
        snprintf(total, sizeof(total), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(n, "total")));
        snprintf(free_n, sizeof(free_n), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(n, "free")));
        const char *row[] = {node, json_string_value(json_object_get(n, "cpus")), total, free_n};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
    fprintf(ctx->out,
            "\n%" JSON_INTEGER_FORMAT " logical CPUs, %" JSON_INTEGER_FORMAT
            " cores x %" JSON_INTEGER_FORMAT " threads: %" JSON_INTEGER_FORMAT
            " free, %" JSON_INTEGER_FORMAT " held, %" JSON_INTEGER_FORMAT " reserved\n",
            json_integer_value(json_object_get(data, "total")),
            json_integer_value(json_object_get(data, "cores")),
            json_integer_value(json_object_get(data, "threadsPerCore")),
            json_integer_value(json_object_get(data, "free")),
            json_integer_value(json_object_get(data, "held")),
            json_integer_value(json_object_get(data, "reserved")));
    /* Who holds what: one row per holder, in order of their first CPU. */
    static const char *const held_headers[] = {"HELD BY", "CPUS", NULL};
    _cleanup_(cli_table_freep) cli_table *h = cli_table_new(held_headers);
    _cleanup_json_ json_t *seen = json_object();
    char list[1024];
    system_cpulist(cpus, "state", "reserved", list, sizeof(list));
    if (list[0]) {
        const char *row[] = {"(the host: reserved)", list};
        cli_table_add(h, row);
    }
    json_array_foreach(cpus, i, c)
    {
        const char *owner = json_string_value(json_object_get(c, "owner"));
        if (!owner || json_object_get(seen, owner))
            continue;
        json_object_set_new(seen, owner, json_true());
        system_cpulist(cpus, "owner", owner, list, sizeof(list));
        const char *row[] = {owner, list};
        cli_table_add(h, row);
    }
    if (json_object_size(seen) || json_integer_value(json_object_get(data, "reserved"))) {
        fputc('\n', ctx->out);
        cli_table_print(h, ctx->out);
    }
    if (json_is_true(json_object_get(data, "simulated")))
        fputs("(simulated CPU topology: gpuboxd runs with --simulate-cpus; containers get the "
              "cores mapped onto the host's real CPUs, not exclusive)\n",
              ctx->out);
}

int cli_cmd_cpus(cli_ctx *ctx, const cli_args *a)
{
    (void)a;
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = "/api/v1/resources/cpus"},
                        system_cpus_print, NULL);
}

static void system_ports_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    json_t *p = json_object_get(data, "ports");
    json_t *used = json_object_get(p, "usedPorts");
    fprintf(ctx->out,
            "RANGE        %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT "\n"
            "AVAILABLE    %" JSON_INTEGER_FORMAT "\nUSED         %zu",
            json_integer_value(json_object_get(p, "startPort")),
            json_integer_value(json_object_get(p, "endPort")),
            json_integer_value(json_object_get(p, "availableCount")), json_array_size(used));
    size_t i;
    json_t *port;
    json_array_foreach(used, i, port)
    {
        fprintf(ctx->out, "%s%" JSON_INTEGER_FORMAT, i ? "," : ": ", json_integer_value(port));
    }
    fputc('\n', ctx->out);
}

int cli_cmd_ports(cli_ctx *ctx, const cli_args *a)
{
    (void)a;
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = "/api/v1/resources/ports"},
                        system_ports_print, NULL);
}

int cli_cmd_version(cli_ctx *ctx, const cli_args *a)
{
    (void)a;
    _cleanup_(cli_reply_free) cli_reply r = {0};
    int rc = cli_call(ctx, "GET", "/version", NULL, &r);
    if (ctx->json) {
        json_t *both = json_pack("{s:s, s:O?}", "client", GPUBOX_VERSION, "server", r.data);
        cli_print_json(ctx, both);
        json_decref(both);
        return rc;
    }
    fprintf(ctx->out, "client   gpubox %s\n", GPUBOX_VERSION);
    if (rc)
        return rc;
    json_t *docker = json_object_get(r.data, "docker");
    const char *dv = json_string_value(json_object_get(docker, "version"));
    const char *derr = json_string_value(json_object_get(docker, "error"));
    const char *sv = json_string_value(json_object_get(r.data, "version"));
    const char *api = json_string_value(json_object_get(r.data, "apiVersion"));
    fprintf(ctx->out, "server   gpuboxd %s (API %s) at %s\n", sv ? sv : "?", api ? api : "?",
            ctx->host);
    if (!docker) /* a server with --token-file tells Docker's version to a token only */
        fprintf(ctx->out, "docker   (shown with a token: set GPUBOX_TOKEN)\n");
    else if (dv)
        fprintf(ctx->out, "docker   %s\n", dv);
    else
        fprintf(ctx->out, "docker   not answering: %s\n", derr ? derr : "?");
    return CLI_EXIT_OK;
}
