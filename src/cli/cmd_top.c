/*
 * cmd_top.c - the live use and health of the cards: `gpubox top` (a view
 * of the cards and the instances on them, redrawn like top(1)), `gpubox
 * events` (what gpuboxd did by itself: automatic stops, cards marked
 * unhealthy or healthy again) and `gpubox gpu healthy UUID` (clear a
 * card's unhealthy mark).
 *
 * top reads GET /api/v1/resources/gpus only: each device carries `usage`
 * (null when gpuboxd samples no usage, or has no reading yet), `healthy`
 * and `unhealthy` (why it was marked), and its `allocations` (per tenant)
 * `memoryUsedMiB` and `utilization` (-1: unknown). A frame is rendered by
 * cli_top_render from that answer alone, so the tests feed it answers.
 *
 * The loop: on a terminal, the screen is cleared and a frame drawn every
 * --interval seconds until SIGINT; with --once, or when stdout is not a
 * terminal, one frame without escape codes; --iterations N draws N frames
 * (apart by a blank line when stdout is not a terminal). --json prints one
 * reading's data.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/size.h"
#include "util/time.h"
#include "util/xalloc.h"

#define GPUS_PATH "/api/v1/resources/gpus"
#define TOP_CLEAR "\033[H\033[2J"

/* An integer field, or -1 when absent (or not an integer). */
static json_int_t top_int(const json_t *obj, const char *field)
{
    json_t *v = json_object_get(obj, field);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* MiB as a size ("16GB", "1.17GB", "0B"); "-" for a value below 0 (none). */
static void top_mib(json_int_t mib, char *buf, size_t size)
{
    if (mib < 0)
        snprintf(buf, size, "-");
    else
        size_format((uint64_t)mib * 1024 * 1024, buf, size);
}

/* "used/total", "-/total" when used is unknown. */
static void top_mib_pair(json_int_t used, json_int_t total, char *buf, size_t size)
{
    char a[32], b[32];
    top_mib(used, a, sizeof(a));
    top_mib(total, b, sizeof(b));
    snprintf(buf, size, "%s/%s", a, b);
}

/* A utilization 0..100; "-" when unknown (-1, or none). */
static void top_util(json_int_t util, char *buf, size_t size)
{
    if (util < 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, util);
}

bool cli_gpu_unhealthy(const json_t *device)
{
    return json_is_object(json_object_get(device, "unhealthy")) ||
           json_is_false(json_object_get(device, "healthy"));
}

void cli_gpu_health(const json_t *device, char *buf, size_t size)
{
    json_t *u = json_object_get(device, "unhealthy");
    if (json_is_object(u)) {
        const char *reason = json_string_value(json_object_get(u, "reason"));
        json_int_t xid = top_int(u, "xid");
        if (reason && strcmp(reason, "xid") == 0 && xid >= 0)
            snprintf(buf, size, "XID %" JSON_INTEGER_FORMAT, xid);
        else if (reason && strcmp(reason, "xid") == 0)
            snprintf(buf, size, "XID");
        else
            snprintf(buf, size, "%s", reason ? reason : "unhealthy");
    } else if (json_is_false(json_object_get(device, "healthy"))) {
        snprintf(buf, size, "unhealthy");
    } else {
        snprintf(buf, size, "ok");
    }
}

/* One row of the instances table: a tenant on a card. */
typedef struct top_inst {
    const char *name, *node;
    json_int_t index;
    json_int_t used;  /* MiB; -1: not sampled */
    json_int_t share; /* MiB it holds on the card */
    json_int_t util;  /* -1: unknown */
} top_inst;

/* Memory used, most first; then by name, node and card. */
static int top_inst_cmp(const void *pa, const void *pb)
{
    const top_inst *a = pa, *b = pb;
    if (a->used != b->used)
        return a->used > b->used ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    c = strcmp(a->node ? a->node : "", b->node ? b->node : "");
    if (c)
        return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The (tenant, card) rows of every device's allocations; a tenant listed
 * twice on one card (two time-slice replicas) is one row holding both. */
static top_inst *top_instances(const json_t *devices, size_t *n)
{
    size_t cap = 0, i, j;
    json_t *d, *al;
    json_array_foreach(devices, i, d)
    {
        cap += json_array_size(json_object_get(d, "allocations"));
    }
    top_inst *rows = xcalloc(cap ? cap : 1, sizeof(*rows));
    *n = 0;
    json_array_foreach(devices, i, d)
    {
        size_t first = *n;
        json_array_foreach(json_object_get(d, "allocations"), j, al)
        {
            const char *name = json_string_value(json_object_get(al, "name"));
            if (!name)
                continue;
            top_inst *row = NULL;
            for (size_t k = first; k < *n && !row; k++)
                if (strcmp(rows[k].name, name) == 0)
                    row = &rows[k];
            json_int_t share = top_int(al, "memoryMiB");
            if (row) {
                if (share > 0)
                    row->share = (row->share > 0 ? row->share : 0) + share;
                continue;
            }
            rows[(*n)++] = (top_inst){
                .name = name,
                .node = json_string_value(json_object_get(d, "node")),
                .index = top_int(d, "index"),
                .used = top_int(al, "memoryUsedMiB"),
                .share = share,
                .util = top_int(al, "utilization"),
            };
        }
    }
    qsort(rows, *n, sizeof(*rows), top_inst_cmp);
    return rows;
}

static void top_header(const json_t *devices, time_t now, FILE *out)
{
    size_t i, ncards = json_array_size(devices), nbad = 0, nsampled = 0;
    json_int_t used = 0, total = 0, foreign = 0;
    json_t *d;
    json_array_foreach(devices, i, d)
    {
        json_t *usage = json_object_get(d, "usage");
        nbad += cli_gpu_unhealthy(d);
        total += top_int(d, "memoryMiB") > 0 ? top_int(d, "memoryMiB") : 0;
        if (!json_is_object(usage))
            continue;
        nsampled++;
        used += top_int(usage, "memoryUsedMiB") > 0 ? top_int(usage, "memoryUsedMiB") : 0;
        foreign += top_int(usage, "foreignMemoryMiB") > 0 ? top_int(usage, "foreignMemoryMiB") : 0;
    }
    char when[TIME_ISO_MAX], mem[80], fmem[32];
    if (time_iso_format(now, when, sizeof(when)) < 0)
        snprintf(when, sizeof(when), "-");
    top_mib_pair(nsampled ? used : -1, total, mem, sizeof(mem));
    top_mib(nsampled ? foreign : -1, fmem, sizeof(fmem));
    fprintf(out, "gpubox top  %s  %zu card%s, %zu unhealthy  memory used %s  foreign %s%s\n", when,
            ncards, ncards == 1 ? "" : "s", nbad, mem, fmem,
            ncards && !nsampled ? "  (usage sampling is off)" : "");
}

static void top_cards(const json_t *devices, FILE *out)
{
    if (json_array_size(devices) == 0) {
        fputs("(no GPUs)\n", out);
        return;
    }
    static const char *const headers[] = {
        "NODE", "INDEX", "MODEL", "MEM USED/TOTAL", "UTIL %", "FOREIGN", "TENANTS", "HEALTH", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE"); /* only a fleet's devices carry node */
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d)
    {
        json_t *usage = json_object_get(d, "usage");
        bool sampled = json_is_object(usage);
        char index[24], mem[80], util[24], foreign[32], tenants[24], health[48];
        top_util(top_int(d, "index"), index, sizeof(index));
        top_mib_pair(sampled ? top_int(usage, "memoryUsedMiB") : -1, top_int(d, "memoryMiB"), mem,
                     sizeof(mem));
        top_util(sampled ? top_int(usage, "utilization") : -1, util, sizeof(util));
        top_mib(sampled ? top_int(usage, "foreignMemoryMiB") : -1, foreign, sizeof(foreign));
        json_t *allocs = json_object_get(d, "allocations");
        if (!json_is_array(allocs))
            allocs = json_object_get(d, "tenants");
        snprintf(tenants, sizeof(tenants), "%zu", json_array_size(allocs));
        cli_gpu_health(d, health, sizeof(health));
        const char *row[] = {json_string_value(json_object_get(d, "node")),
                             index,
                             json_string_value(json_object_get(d, "model")),
                             mem,
                             util,
                             foreign,
                             tenants,
                             health};
        cli_table_add(t, row);
    }
    cli_table_print(t, out);
}

static void top_instance_rows(const json_t *devices, FILE *out)
{
    size_t n = 0;
    _cleanup_free_ top_inst *rows = top_instances(devices, &n);
    if (n == 0) {
        fputs("(no instances on the cards)\n", out);
        return;
    }
    static const char *const headers[] = {"NAME",   "NODE", "CARD", "MEM USED/SHARE",
                                          "UTIL %", "FLAG", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    cli_table_optional(t, "NODE");
    cli_table_optional(t, "FLAG"); /* only when some instance is over its share */
    bool any_over = false;
    for (size_t i = 0; i < n; i++)
        any_over |= rows[i].share >= 0 && rows[i].used > rows[i].share;
    for (size_t i = 0; i < n; i++) {
        char card[24], mem[80], util[24];
        top_util(rows[i].index, card, sizeof(card));
        top_mib_pair(rows[i].used, rows[i].share, mem, sizeof(mem));
        top_util(rows[i].util, util, sizeof(util));
        bool over = rows[i].share >= 0 && rows[i].used > rows[i].share;
        const char *row[] = {rows[i].name, rows[i].node, card,
                             mem,          util,         over ? "OVER" : (any_over ? "-" : NULL)};
        cli_table_add(t, row);
    }
    cli_table_print(t, out);
}

void cli_top_render(const json_t *data, time_t now, bool clear, FILE *out)
{
    json_t *devices = json_object_get(data, "devices");
    if (clear)
        fputs(TOP_CLEAR, out);
    top_header(devices, now, out);
    fputc('\n', out);
    top_cards(devices, out);
    fputc('\n', out);
    top_instance_rows(devices, out);
}

static volatile sig_atomic_t top_interrupted;

static void top_on_sigint(int sig)
{
    (void)sig;
    top_interrupted = 1;
}

/* Sleep seconds, or less when SIGINT comes. */
static void top_sleep(double seconds)
{
    struct timespec left = {.tv_sec = (time_t)seconds,
                            .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (!top_interrupted && nanosleep(&left, &left) < 0 && errno == EINTR)
        ;
}

int cli_cmd_top(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    double interval = 1;
    long long iterations = 0;
    const char *itext = cli_get(a, "interval"), *ntext = cli_get(a, "iterations");
    if (itext && cli_parse_number("--interval", itext, 0.1, 3600, &interval, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    if (ntext && cli_parse_int("--iterations", ntext, 1, 1000000000, &iterations, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    bool once = cli_flag(a, "once");
    if (once && ntext)
        return cli_usage_error(ctx, a->cmd, "give --once or --iterations, not both");
    bool tty = isatty(fileno(ctx->out));
    /* 0: until SIGINT */
    long long frames = once || ctx->json ? 1 : ntext ? iterations : tty ? 0 : 1;
    bool clear = tty && frames != 1;

    struct sigaction old, on = {.sa_handler = top_on_sigint};
    sigemptyset(&on.sa_mask);
    top_interrupted = 0;
    if (frames != 1)
        sigaction(SIGINT, &on, &old);
    int rc = CLI_EXIT_OK;
    for (long long i = 0; (frames == 0 || i < frames) && !top_interrupted; i++) {
        if (i > 0) {
            top_sleep(interval);
            if (top_interrupted)
                break;
        }
        _cleanup_(cli_reply_free) cli_reply r = {0};
        rc = cli_call(ctx, "GET", GPUS_PATH, NULL, &r);
        if (rc)
            break;
        if (ctx->json) {
            cli_print_json(ctx, r.data);
            break;
        }
        if (i > 0 && !clear)
            fputc('\n', ctx->out);
        cli_top_render(r.data, time(NULL), clear, ctx->out);
        fflush(ctx->out);
    }
    if (frames != 1)
        sigaction(SIGINT, &old, NULL);
    return rc;
}

void cli_events_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    (void)arg;
    static const char *const headers[] = {"TIME", "KIND", "SET/GPU", "REASON", "DETAIL", NULL};
    _cleanup_(cli_table_freep) cli_table *t = cli_table_new(headers);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(data, "events"), i, e)
    {
        const char *what = json_string_value(json_object_get(e, "replicaSet"));
        if (!what)
            what = json_string_value(json_object_get(e, "gpu"));
        const char *row[] = {json_string_value(json_object_get(e, "time")),
                             json_string_value(json_object_get(e, "kind")), what,
                             json_string_value(json_object_get(e, "reason")),
                             json_string_value(json_object_get(e, "detail"))};
        cli_table_add(t, row);
    }
    cli_table_print(t, ctx->out);
}

int cli_cmd_events(cli_ctx *ctx, const cli_args *a)
{
    char msg[256];
    long long limit = 0;
    const char *text = cli_get(a, "limit");
    if (text && cli_parse_int("--limit", text, 1, 100000, &limit, msg, sizeof(msg)))
        return cli_usage_error(ctx, a->cmd, "%s", msg);
    _cleanup_free_ char *path =
        text ? xasprintf("/api/v1/events?limit=%lld", limit) : xstrdup("/api/v1/events");
    return cli_exchange(ctx, &(cli_req){.method = "GET", .path = path}, cli_events_print, NULL);
}

/* "gpu GPU-...: ok" (or what it still is), the answer being the device. */
static void gpu_health_print(cli_ctx *ctx, const json_t *data, const void *arg)
{
    const char *uuid = arg;
    /* the device itself, or under "device" */
    const json_t *d =
        json_is_object(json_object_get(data, "device")) ? json_object_get(data, "device") : data;
    char health[48];
    cli_gpu_health(d, health, sizeof(health));
    const char *id = json_string_value(json_object_get(d, "uuid"));
    fprintf(ctx->out, "gpu %s: %s\n", id ? id : uuid, health);
}

int cli_cmd_gpu_healthy(cli_ctx *ctx, const cli_args *a)
{
    _cleanup_free_ char *path = cli_path(ctx, GPUS_PATH, a->pos[0], "healthy");
    return cli_exchange(ctx, &(cli_req){.method = "PATCH", .path = path}, gpu_health_print,
                        a->pos[0]);
}
