/*
 * cmd_system.c - the subcommands about the host: gpus, ports, version.
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
    static const char *const headers[] = {"NODE", "INDEX", "UUID",    "MODEL",   "MEMORY",
                                          "USED", "MODE",  "HEALTHY", "TENANTS", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE"); /* only a fleet's devices carry node: INDEX is per node */
    json_t *devices = json_object_get(data, "devices"), *d;
    size_t i;
    json_array_foreach(devices, i, d)
    {
        char index[16], mem[32], used[32], tenants[512];
        snprintf(index, sizeof(index), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(d, "index")));
        system_mib(json_integer_value(json_object_get(d, "memoryMiB")), mem, sizeof(mem));
        system_mib(json_integer_value(json_object_get(d, "allocatedMemoryMiB")), used,
                   sizeof(used));
        cli_join(json_object_get(d, "tenants"), ",", tenants, sizeof(tenants));
        const char *row[] = {json_string_value(json_object_get(d, "node")),
                             index,
                             json_string_value(json_object_get(d, "uuid")),
                             json_string_value(json_object_get(d, "model")),
                             mem,
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
    if (dv)
        fprintf(ctx->out, "docker   %s\n", dv);
    else
        fprintf(ctx->out, "docker   not answering: %s\n", derr ? derr : "?");
    return CLI_EXIT_OK;
}
