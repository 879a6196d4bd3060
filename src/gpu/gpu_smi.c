/*
 * gpu_smi.c - the inventory from `nvidia-smi --query-gpu=... --format=csv`,
 * for hosts where NVML cannot be loaded into the daemon but the tool works.
 *
 * nvidia-smi runs as a child process through util/proc (fork/exec, no
 * shell, output captured up to a cap, a time limit after which its whole
 * process group is killed). Its CSV
 * (one card per line: index, uuid, name, memory.total) goes through
 * gpu_smi_parse_csv, which takes the output apart defensively: the text
 * comes from another program and may be anything.
 *
 * A second, optional query reads the driver version and each card's MIG
 * mode. nvidia-smi's CSV does not list MIG instances, so a card in MIG mode
 * is marked mig_enabled (never scheduled whole) and its instances are only
 * available through NVML.
 */
#include "gpu/gpu_source.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

#include "util/log.h"
#include "util/proc.h"

#define SMI_HINT "is the NVIDIA driver installed? Use --gpu-source simulated to run without GPUs"

/* ---- parsing ------------------------------------------------------------ */

/* A span of the CSV text: one line or one field, not NUL-terminated. */
struct smi_span {
    const char *p;
    size_t len;
};

static struct smi_span smi_trim(struct smi_span s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t'))
        s.p++, s.len--;
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t' || s.p[s.len - 1] == '\r'))
        s.len--;
    return s;
}

static bool smi_span_eq(struct smi_span s, const char *word)
{
    return s.len == strlen(word) && strncasecmp(s.p, word, s.len) == 0;
}

/* nvidia-smi prints "[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU
 * requires reset]" ... where it could not read a value. */
static bool smi_unavailable(struct smi_span s)
{
    return s.len >= 2 && s.p[0] == '[' && s.p[s.len - 1] == ']';
}

/* Up to 60 bytes of a line for an error message, with anything unprintable
 * shown as '?' so a garbled output cannot garble the message. */
static const char *smi_quote(struct smi_span s, char *buf, size_t len)
{
    size_t n = s.len < 60 ? s.len : 60;
    if (n + 4 > len)
        n = len - 4;
    for (size_t i = 0; i < n; i++)
        buf[i] = isprint((unsigned char)s.p[i]) ? s.p[i] : '?';
    strcpy(buf + n, s.len > n ? "..." : "");
    return buf;
}

/* Unsigned decimal of at most max_digits digits, all of the span. */
static bool smi_parse_uint(struct smi_span s, size_t max_digits, uint64_t *v)
{
    if (s.len == 0 || s.len > max_digits)
        return false;
    *v = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (!isdigit((unsigned char)s.p[i]))
            return false;
        *v = *v * 10 + (uint64_t)(s.p[i] - '0');
    }
    return true;
}

/* "81920" or "81920 MiB" (with units) -> MiB. */
static bool smi_parse_memory(struct smi_span s, uint64_t *mib)
{
    size_t digits = 0;
    while (digits < s.len && isdigit((unsigned char)s.p[digits]))
        digits++;
    struct smi_span unit = smi_trim((struct smi_span){s.p + digits, s.len - digits});
    if (unit.len > 0 && !smi_span_eq(unit, "MiB"))
        return false;
    return smi_parse_uint((struct smi_span){s.p, digits}, 9, mib);
}

static bool smi_valid_uuid(struct smi_span s)
{
    if (s.len < 5 || s.len >= GPU_UUID_MAX)
        return false;
    if (strncmp(s.p, "GPU-", 4) != 0 && strncmp(s.p, "MIG-", 4) != 0)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (!isalnum((unsigned char)s.p[i]) && !strchr("-/", s.p[i]))
            return false;
    return true;
}

static bool smi_valid_name(struct smi_span s)
{
    if (s.len >= GPU_MODEL_MAX)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (s.p[i] < 0x20 || s.p[i] > 0x7e)
            return false;
    return true;
}

/* Split a line at commas into at most max fields; returns the number found
 * (more than max means too many). */
static size_t smi_split(struct smi_span line, struct smi_span *fields, size_t max)
{
    size_t n = 0;
    const char *p = line.p, *end = line.p + line.len;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (n < max)
            fields[n] = smi_trim((struct smi_span){p, (size_t)(stop - p)});
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

/* One data line -> *d. 1 = a card, 0 = skipped (no UUID), -1 = garbage. */
static int smi_parse_line(struct smi_span line, int line_no, gpu_device *d, gb_err *err)
{
    char q[72];
    struct smi_span f[4];
    size_t n = smi_split(line, f, 4);
    if (n != 4)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 4 comma-separated fields (index, "
                       "uuid, name, memory.total), found %zu: '%s'",
                       line_no, n, smi_quote(line, q, sizeof(q)));
    uint64_t index = 0;
    if (!smi_parse_uint(f[0], 5, &index) || index > 65535)
        return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: index '%s' is not a number",
                       line_no, smi_quote(f[0], q, sizeof(q)));
    memset(d, 0, sizeof(*d));
    d->index = (int)index;
    d->healthy = true;
    if (smi_unavailable(f[1])) {
        log_warn("nvidia-smi: GPU %d left out: its UUID reads %s", d->index,
                 smi_quote(f[1], q, sizeof(q)));
        return 0;
    }
    if (!smi_valid_uuid(f[1]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       smi_quote(f[1], q, sizeof(q)));
    memcpy(d->uuid, f[1].p, f[1].len);
    if (smi_unavailable(f[2]))
        d->healthy = false;
    else if (smi_valid_name(f[2]))
        memcpy(d->model, f[2].p, f[2].len);
    else
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: name '%s' is not printable text of at most %d "
                       "characters",
                       line_no, smi_quote(f[2], q, sizeof(q)), GPU_MODEL_MAX - 1);
    if (smi_unavailable(f[3]))
        d->healthy = false;
    else if (!smi_parse_memory(f[3], &d->memory_mib))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: memory.total '%s' is not a number of MiB",
                       line_no, smi_quote(f[3], q, sizeof(q)));
    if (!d->healthy) {
        char q2[72];
        log_warn("nvidia-smi: GPU %s is unhealthy: name '%s', memory '%s'", d->uuid,
                 smi_quote(f[2], q, sizeof(q)), smi_quote(f[3], q2, sizeof(q2)));
    }
    return 1;
}

/* The same card twice means the output is not what we asked for. */
static int smi_check_unique(const gpu_inventory *inv, const gpu_device *d, int line_no, gb_err *err)
{
    for (size_t i = 0; i < inv->n; i++) {
        if (inv->devices[i].index == d->index)
            return err_set(err, ERR_INTERNAL,
                           "nvidia-smi output line %d: GPU index %d listed twice", line_no,
                           d->index);
        if (strcmp(inv->devices[i].uuid, d->uuid) == 0)
            return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: GPU %s listed twice",
                           line_no, d->uuid);
    }
    return 0;
}

static int smi_parse_lines(const char *csv, gpu_inventory *out, gb_err *err)
{
    bool first = true;
    int line_no = 0;
    for (const char *p = csv; *p;) {
        const char *nl = strchr(p, '\n');
        struct smi_span line = {p, nl ? (size_t)(nl - p) : strlen(p)};
        p = nl ? nl + 1 : p + line.len;
        line_no++;
        line = smi_trim(line);
        if (line.len == 0)
            continue;
        struct smi_span f0;
        smi_split(line, &f0, 1);
        bool header = first && smi_span_eq(f0, "index");
        first = false;
        if (header)
            continue;
        gpu_device d = {0};
        int r = smi_parse_line(line, line_no, &d, err);
        if (r < 0)
            return -1;
        if (r == 0)
            continue;
        if (smi_check_unique(out, &d, line_no, err) < 0)
            return -1;
        gpu_inventory_add(out, &d);
    }
    return 0;
}

int gpu_smi_parse_csv(const char *csv, gpu_inventory *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!csv)
        return err_set(err, ERR_INTERNAL, "nvidia-smi printed nothing");
    if (smi_parse_lines(csv, out, err) < 0) {
        gpu_inventory_free(out);
        return -1;
    }
    gpu_inventory_sort(out);
    strcpy(out->source, "nvidia-smi");
    return 0;
}

/* ---- running nvidia-smi ------------------------------------------------- */

/* Every failure to run the tool ends with what the operator can do about it. */
static int smi_hint(gb_err *err)
{
    char msg[sizeof(err->msg)];
    snprintf(msg, sizeof(msg), "%s", err->msg);
    return err_set(err, err->code, "%s; " SMI_HINT, msg);
}

/* Run one query; on success *r holds its output (NUL-terminated, no NUL inside). */
static int smi_query(const char *path, const char *fields, int timeout_ms, proc_result *r,
                     gb_err *err)
{
    char query[128];
    snprintf(query, sizeof(query), "--query-gpu=%s", fields);
    char *const argv[] = {(char *)path, query, (char *)"--format=csv,noheader,nounits", NULL};
    if (proc_run(argv, NULL, timeout_ms, r, err) < 0)
        return -1;
    int rc = 0;
    if (proc_check_exit(path, r, ERR_INTERNAL, err) < 0)
        rc = WIFSIGNALED(r->status) ? -1 : smi_hint(err);
    else if (r->out_len > 0 && memchr(r->out, '\0', r->out_len))
        rc = err_set(err, ERR_INTERNAL, "%s printed binary data, not CSV", path);
    if (rc < 0)
        proc_result_free(r);
    return rc;
}

/* The optional second query: driver version and MIG mode per card. */
static void smi_read_extras(const char *path, int timeout_ms, gpu_inventory *inv)
{
    proc_result r;
    gb_err e = GB_ERR_INIT;
    if (smi_query(path, "uuid,driver_version,mig.mode.current", timeout_ms, &r, &e) < 0) {
        log_debug("nvidia-smi: no driver version or MIG mode: %s", e.msg);
        return;
    }
    for (const char *p = r.out; p && *p;) {
        const char *nl = strchr(p, '\n');
        struct smi_span line = {p, nl ? (size_t)(nl - p) : strlen(p)};
        p = nl ? nl + 1 : NULL;
        struct smi_span f[3];
        if (smi_split(smi_trim(line), f, 3) != 3)
            continue;
        if (!inv->driver_version[0] && !smi_unavailable(f[1]) && smi_valid_name(f[1]) &&
            f[1].len < sizeof(inv->driver_version))
            memcpy(inv->driver_version, f[1].p, f[1].len);
        for (size_t i = 0; i < inv->n; i++) {
            gpu_device *d = &inv->devices[i];
            if (smi_span_eq(f[0], d->uuid) && smi_span_eq(f[2], "Enabled")) {
                d->mig_enabled = true;
                log_warn("nvidia-smi: GPU %s is in MIG mode; its MIG instances are listed only "
                         "through NVML (--gpu-source nvml), so it is not scheduled",
                         d->uuid);
            }
        }
    }
    proc_result_free(&r);
}

int gpu_smi_load_timeout(const char *nvidia_smi, int timeout_ms, gpu_inventory *out, gb_err *err)
{
    char path[4096];
    proc_result r;
    memset(out, 0, sizeof(*out));
    if (!nvidia_smi || !*nvidia_smi)
        nvidia_smi = "nvidia-smi";
    if (proc_resolve(nvidia_smi, NULL, path, sizeof(path), err) < 0)
        return smi_hint(err);
    if (smi_query(path, "index,uuid,name,memory.total", timeout_ms, &r, err) < 0)
        return -1;
    int rc = gpu_smi_parse_csv(r.out, out, err);
    proc_result_free(&r);
    if (rc < 0)
        return -1;
    if (out->n > 0)
        smi_read_extras(path, timeout_ms, out);
    return 0;
}

int gpu_smi_load(const char *nvidia_smi, gpu_inventory *out, gb_err *err)
{
    return gpu_smi_load_timeout(nvidia_smi, GPU_SMI_TIMEOUT_MS, out, err);
}

static int gpu_smi_source_load(const char *arg, gpu_inventory *out, gb_err *err)
{
    return gpu_smi_load(arg, out, err);
}

const struct gpu_source gpu_source_smi = {.name = "nvidia-smi", .load = gpu_smi_source_load};
