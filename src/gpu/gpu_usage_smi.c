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

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "util/proc.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Both runs of one reading together. */
#define GPU_USAGE_SMI_TIMEOUT_MS 5000

/* ---- parsing ------------------------------------------------------------ */

/* A span of the CSV text: one line or one field, not NUL-terminated. */
struct usage_span {
    const char *p;
    size_t len;
};

static struct usage_span usage_trim(struct usage_span s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t'))
        s.p++, s.len--;
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t' || s.p[s.len - 1] == '\r'))
        s.len--;
    return s;
}

static bool usage_eq(struct usage_span s, const char *word)
{
    return s.len == strlen(word) && strncasecmp(s.p, word, s.len) == 0;
}

/* "[N/A]", "[Unknown Error]", "[Not Supported]"...: no value. */
static bool usage_unavailable(struct usage_span s)
{
    return s.len >= 2 && s.p[0] == '[' && s.p[s.len - 1] == ']';
}

/* Up to 60 bytes of s for a message, anything unprintable as '?'. */
static const char *usage_quote(struct usage_span s, char *buf, size_t len)
{
    size_t n = s.len < 60 ? s.len : 60;
    if (n + 4 > len)
        n = len - 4;
    for (size_t i = 0; i < n; i++)
        buf[i] = isprint((unsigned char)s.p[i]) ? s.p[i] : '?';
    strcpy(buf + n, s.len > n ? "..." : "");
    return buf;
}

/* A decimal of 1..max_digits digits, then optionally the unit (spaces
 * allowed between), and nothing else. */
static bool usage_number(struct usage_span s, size_t max_digits, const char *unit, uint64_t *v)
{
    size_t digits = 0;
    *v = 0;
    while (digits < s.len && isdigit((unsigned char)s.p[digits]))
        *v = *v * 10 + (uint64_t)(s.p[digits++] - '0');
    if (digits == 0 || digits > max_digits)
        return false;
    struct usage_span rest = usage_trim((struct usage_span){s.p + digits, s.len - digits});
    return rest.len == 0 || usage_eq(rest, unit);
}

static bool usage_valid_uuid(struct usage_span s)
{
    if (s.len < 5 || s.len >= GPU_UUID_MAX)
        return false;
    if (strncmp(s.p, "GPU-", 4) != 0 && strncmp(s.p, "MIG-", 4) != 0)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (!isalnum((unsigned char)s.p[i]) && s.p[i] != '-' && s.p[i] != '/')
            return false;
    return true;
}

/* Split a line at commas into at most max fields; returns how many there
 * are (more than max: too many). */
static size_t usage_split(struct usage_span line, struct usage_span *fields, size_t max)
{
    size_t n = 0;
    const char *p = line.p, *end = line.p + line.len;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (n < max)
            fields[n] = usage_trim((struct usage_span){p, (size_t)(stop - p)});
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

/* Walks the CSV's lines, skipping blank ones and a header whose first
 * field is header_word (the first non-blank line only). */
struct usage_lines {
    const char *next;
    int line_no;
    bool first;
    const char *header_word;
};

static bool usage_next_line(struct usage_lines *it, struct usage_span *line)
{
    while (it->next && *it->next) {
        const char *p = it->next, *nl = strchr(p, '\n');
        *line = usage_trim((struct usage_span){p, nl ? (size_t)(nl - p) : strlen(p)});
        it->next = nl ? nl + 1 : p + strlen(p);
        it->line_no++;
        if (line->len == 0)
            continue;
        struct usage_span f0;
        usage_split(*line, &f0, 1);
        bool header = it->first && usage_eq(f0, it->header_word);
        it->first = false;
        if (!header)
            return true;
    }
    return false;
}

/* The inventory index of the card named, or -1. */
static int usage_find(const gpu_inventory *inv, struct usage_span uuid)
{
    for (size_t i = 0; i < inv->n; i++)
        if (strlen(inv->devices[i].uuid) == uuid.len &&
            memcmp(inv->devices[i].uuid, uuid.p, uuid.len) == 0)
            return (int)i;
    return -1;
}

/* "memory.used, utilization.gpu" of card c, from line line_no. */
static int usage_card_values(const struct usage_span *f, int line_no, gpu_card_usage *c,
                             gb_err *err)
{
    char q[72];
    uint64_t v = 0;
    if (usage_unavailable(f[1])) {
        gpu_card_usage_absent(c, "nvidia-smi: %s", usage_quote(f[1], q, sizeof(q)));
        return 0;
    }
    if (!usage_number(f[1], 9, "MiB", &v))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: memory.used '%s' is not a number of MiB",
                       line_no, usage_quote(f[1], q, sizeof(q)));
    c->memory_used_mib = v;
    if (usage_unavailable(f[2])) {
        c->utilization = -1;
        return 0;
    }
    if (!usage_number(f[2], 3, "%", &v) || v > 100)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: utilization.gpu '%s' is not a percentage",
                       line_no, usage_quote(f[2], q, sizeof(q)));
    c->utilization = (int)v;
    return 0;
}

/* One "uuid, memory.used, utilization.gpu" line into out; seen marks the
 * inventory's cards already read. */
static int usage_card_line(struct usage_span line, int line_no, const gpu_inventory *inv,
                           bool *seen, gpu_usage *out, gb_err *err)
{
    char q[72];
    struct usage_span f[3];
    size_t n = usage_split(line, f, 3);
    if (n != 3)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 3 comma-separated fields (uuid, "
                       "memory.used, utilization.gpu), found %zu: '%s'",
                       line_no, n, usage_quote(line, q, sizeof(q)));
    if (usage_unavailable(f[0]))
        return 0; /* a card without a UUID: nothing in gpubox can refer to it */
    if (!usage_valid_uuid(f[0]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       usage_quote(f[0], q, sizeof(q)));
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
    struct usage_lines it = {.next = csv, .first = true, .header_word = "uuid"};
    struct usage_span line;
    int rc = 0;
    while (rc == 0 && usage_next_line(&it, &line))
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
static int usage_app_line(struct usage_span line, int line_no, gpu_usage *out, gb_err *err)
{
    char q[72];
    struct usage_span f[3];
    uint64_t pid = 0, mib = 0;
    size_t n = usage_split(line, f, 3);
    if (n != 3)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 3 comma-separated fields (gpu_uuid, "
                       "pid, used_memory), found %zu: '%s'",
                       line_no, n, usage_quote(line, q, sizeof(q)));
    if (!usage_valid_uuid(f[0]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       usage_quote(f[0], q, sizeof(q)));
    if (!usage_number(f[1], 10, "", &pid) || pid == 0 || pid > INT_MAX)
        return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: pid '%s' is not a PID",
                       line_no, usage_quote(f[1], q, sizeof(q)));
    if (!usage_unavailable(f[2]) && !usage_number(f[2], 9, "MiB", &mib))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: used_memory '%s' is not a number of MiB",
                       line_no, usage_quote(f[2], q, sizeof(q)));
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
    struct usage_lines it = {.next = csv, .first = true, .header_word = "gpu_uuid"};
    struct usage_span line;
    while (usage_next_line(&it, &line)) {
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
