/*
 * gpu_usage_smi.c - usage readings from nvidia-smi, for hosts where NVML
 * cannot be loaded into the daemon: two runs a reading,
 *
 *   nvidia-smi --query-gpu=uuid,memory.used,utilization.gpu
 *   nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory
 *
 * both with --format=csv,noheader,nounits, through util/proc (no shell,
 * output capped, killed with its process group past the time limit, which
 * covers both runs together: GPU_USAGE_SMI_TIMEOUT_MS).
 *
 * nvidia-smi has no XID events and no per-process utilization in CSV, so
 * its readings have neither. Its CSV lists whole cards only: a process on
 * a MIG instance is reported on the card.
 *
 * The two parsers take the text apart defensively, as gpu_smi.c does for
 * the inventory: it comes from another program and may be anything. A
 * line that is not what was asked for is an error naming the line; a value
 * nvidia-smi could not read ("[N/A]", "[Unknown Error]") is not: a card
 * whose memory reads so is not answering, a utilization that reads so is
 * unknown (-1), a process's memory that reads so is 0.
 */
#include "gpu/gpu_usage.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu/gpu_smi_csv.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Both runs of one reading together. */
#define GPU_USAGE_SMI_TIMEOUT_MS 5000

/* ---- parsing ------------------------------------------------------------ */

/* The inventory index of the card named, or -1. */
static int usage_find(const gpu_inventory *inv, struct gpu_csv_span uuid)
{
    for (size_t i = 0; i < inv->n; i++)
        if (strlen(inv->devices[i].uuid) == uuid.len &&
            memcmp(inv->devices[i].uuid, uuid.p, uuid.len) == 0)
            return (int)i;
    return -1;
}

/* "memory.used, utilization.gpu" of card c, from line line_no. */
static int usage_card_values(const struct gpu_csv_span *f, int line_no, gpu_card_usage *c,
                             gb_err *err)
{
    char q[72];
    uint64_t v = 0;
    if (gpu_csv_unavailable(f[1])) {
        gpu_card_usage_absent(c, "nvidia-smi: %s", gpu_csv_quote(f[1], q, sizeof(q)));
        return 0;
    }
    if (!gpu_csv_number(f[1], 9, "MiB", &v))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: memory.used '%s' is not a number of MiB",
                       line_no, gpu_csv_quote(f[1], q, sizeof(q)));
    c->memory_used_mib = v;
    if (gpu_csv_unavailable(f[2])) {
        c->utilization = -1;
        return 0;
    }
    if (!gpu_csv_number(f[2], 3, "%", &v) || v > 100)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: utilization.gpu '%s' is not a percentage",
                       line_no, gpu_csv_quote(f[2], q, sizeof(q)));
    c->utilization = (int)v;
    return 0;
}

/* One "uuid, memory.used, utilization.gpu" line into out; seen marks the
 * inventory's cards already read. */
static int usage_card_line(struct gpu_csv_span line, int line_no, const gpu_inventory *inv,
                           bool *seen, gpu_usage *out, gb_err *err)
{
    char q[72];
    struct gpu_csv_span f[3];
    size_t n = gpu_csv_split(line, f, 3);
    if (n != 3)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 3 comma-separated fields (uuid, "
                       "memory.used, utilization.gpu), found %zu: '%s'",
                       line_no, n, gpu_csv_quote(line, q, sizeof(q)));
    if (gpu_csv_unavailable(f[0]))
        return 0; /* a card without a UUID: nothing in gpubox can refer to it */
    if (!gpu_csv_valid_uuid(f[0]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       gpu_csv_quote(f[0], q, sizeof(q)));
    int at = usage_find(inv, f[0]);
    if (at < 0)
        return 0; /* not in the inventory (it came after start-up): not ours to report */
    if (seen[at])
        return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: GPU %s listed twice", line_no,
                       inv->devices[at].uuid);
    seen[at] = true;
    return usage_card_values(f, line_no, &out->cards[at], err);
}

int gpu_smi_parse_card_usage(const char *csv, const gpu_inventory *inv, gpu_usage *out, gb_err *err)
{
    gpu_usage_start(out, inv);
    bool *seen = xcalloc(inv->n ? inv->n : 1, sizeof(*seen));
    struct gpu_csv_lines it = {.next = csv, .first = true, .header_word = "uuid"};
    struct gpu_csv_span line;
    int rc = 0;
    while (rc == 0 && gpu_csv_next_line(&it, &line))
        rc = usage_card_line(line, it.line_no, inv, seen, out, err);
    for (size_t i = 0; rc == 0 && i < inv->n; i++)
        if (!seen[i])
            gpu_card_usage_absent(&out->cards[i], "not listed by nvidia-smi");
    free(seen);
    if (rc < 0)
        gpu_usage_free(out);
    return rc;
}

/* One "gpu_uuid, pid, used_memory" line appended to out. */
static int usage_app_line(struct gpu_csv_span line, int line_no, gpu_usage *out, gb_err *err)
{
    char q[72];
    struct gpu_csv_span f[3];
    uint64_t pid = 0, mib = 0;
    size_t n = gpu_csv_split(line, f, 3);
    if (n != 3)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 3 comma-separated fields (gpu_uuid, "
                       "pid, used_memory), found %zu: '%s'",
                       line_no, n, gpu_csv_quote(line, q, sizeof(q)));
    if (!gpu_csv_valid_uuid(f[0]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       gpu_csv_quote(f[0], q, sizeof(q)));
    if (!gpu_csv_number(f[1], 10, "", &pid) || pid == 0 || pid > INT_MAX)
        return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: pid '%s' is not a PID",
                       line_no, gpu_csv_quote(f[1], q, sizeof(q)));
    if (!gpu_csv_unavailable(f[2]) && !gpu_csv_number(f[2], 9, "MiB", &mib))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: used_memory '%s' is not a number of MiB",
                       line_no, gpu_csv_quote(f[2], q, sizeof(q)));
    gpu_proc_usage *p = gpu_usage_add_proc(out);
    memcpy(p->uuid, f[0].p, f[0].len);
    p->uuid[f[0].len] = '\0';
    p->pid = (int)pid;
    p->memory_mib = mib;
    return 0;
}

int gpu_smi_parse_apps(const char *csv, gpu_usage *out, gb_err *err)
{
    size_t before = out->nprocs;
    struct gpu_csv_lines it = {.next = csv, .first = true, .header_word = "gpu_uuid"};
    struct gpu_csv_span line;
    while (gpu_csv_next_line(&it, &line)) {
        /* Some versions say so instead of printing nothing. */
        if (line.len >= 26 && strncasecmp(line.p, "No running processes found", 26) == 0)
            continue;
        if (usage_app_line(line, it.line_no, out, err) < 0) {
            out->nprocs = before;
            return -1;
        }
    }
    return 0;
}

/* ---- running nvidia-smi ------------------------------------------------- */

struct smi_sampler {
    char path[4096];
    const gpu_inventory *inv;
};

static int smi_sampler_open(const gpu_config *cfg, const gpu_inventory *inv, void **state,
                            gb_err *err)
{
    const char *name = cfg->nvidia_smi && *cfg->nvidia_smi ? cfg->nvidia_smi : "nvidia-smi";
    struct smi_sampler *s = xcalloc(1, sizeof(*s));
    if (proc_resolve(name, NULL, s->path, sizeof(s->path), err) < 0) {
        free(s);
        return err_prefix(err, "GPU usage sampling");
    }
    s->inv = inv;
    *state = s;
    return 0;
}

static void smi_sampler_close(void *state)
{
    free(state);
}

/* Run nvidia-smi with query (e.g. "--query-gpu=...") until deadline_ms
 * (monotonic); on success *r holds its output, text without a NUL. */
static int smi_sampler_run(const char *path, const char *query, int64_t deadline_ms, proc_result *r,
                           gb_err *err)
{
    int64_t left = deadline_ms - time_mono_ms();
    if (left <= 0)
        return err_set(err, ERR_INTERNAL, "%s did not finish within %d ms", path,
                       GPU_USAGE_SMI_TIMEOUT_MS);
    char *const argv[] = {(char *)path, (char *)query, (char *)"--format=csv,noheader,nounits",
                          NULL};
    if (proc_run(argv, NULL, (int)left, r, err) < 0)
        return -1;
    int rc = 0;
    if (proc_check_exit(path, r, ERR_INTERNAL, err) < 0)
        rc = -1;
    else if (r->out_len > 0 && memchr(r->out, '\0', r->out_len))
        rc = err_set(err, ERR_INTERNAL, "%s printed binary data, not CSV", path);
    if (rc < 0)
        proc_result_free(r);
    return rc;
}

static int smi_sampler_read(void *state, gpu_usage *out, gb_err *err)
{
    struct smi_sampler *s = state;
    int64_t deadline = time_mono_ms() + GPU_USAGE_SMI_TIMEOUT_MS;
    proc_result r = {0};
    if (smi_sampler_run(s->path, "--query-gpu=uuid,memory.used,utilization.gpu", deadline, &r,
                        err) < 0)
        return -1;
    int rc = gpu_smi_parse_card_usage(r.out, s->inv, out, err);
    proc_result_free(&r);
    if (rc < 0)
        return -1;
    if (smi_sampler_run(s->path, "--query-compute-apps=gpu_uuid,pid,used_memory", deadline, &r,
                        err) < 0)
        return -1;
    rc = gpu_smi_parse_apps(r.out, out, err);
    proc_result_free(&r);
    return rc;
}

const struct gpu_sampler_backend gpu_sampler_smi = {
    .open = smi_sampler_open,
    .read = smi_sampler_read,
    .close = smi_sampler_close,
};
