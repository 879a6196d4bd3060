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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gpu/gpu_smi_csv.h"
#include "util/log.h"
#include "util/proc.h"

#define SMI_HINT "is the NVIDIA driver installed? Use --gpu-source simulated to run without GPUs"

/* ---- parsing ------------------------------------------------------------ */

static bool smi_valid_name(struct gpu_csv_span s)
{
    if (s.len >= GPU_MODEL_MAX)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (s.p[i] < 0x20 || s.p[i] > 0x7e)
            return false;
    return true;
}

/* One data line -> *d. 1 = a card, 0 = skipped (no UUID), -1 = garbage. */
static int smi_parse_line(struct gpu_csv_span line, int line_no, gpu_device *d, gb_err *err)
{
    char q[72];
    struct gpu_csv_span f[4];
    size_t n = gpu_csv_split(line, f, 4);
    if (n != 4)
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: expected 4 comma-separated fields (index, "
                       "uuid, name, memory.total), found %zu: '%s'",
                       line_no, n, gpu_csv_quote(line, q, sizeof(q)));
    uint64_t index = 0;
    if (!gpu_csv_number(f[0], 5, "", &index) || index > 65535)
        return err_set(err, ERR_INTERNAL, "nvidia-smi output line %d: index '%s' is not a number",
                       line_no, gpu_csv_quote(f[0], q, sizeof(q)));
    memset(d, 0, sizeof(*d));
    d->index = (int)index;
    d->healthy = true;
    if (gpu_csv_unavailable(f[1])) {
        log_warn("nvidia-smi: GPU %d left out: its UUID reads %s", d->index,
                 gpu_csv_quote(f[1], q, sizeof(q)));
        return 0;
    }
    if (!gpu_csv_valid_uuid(f[1]))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: '%s' is not a GPU UUID (GPU-...)", line_no,
                       gpu_csv_quote(f[1], q, sizeof(q)));
    memcpy(d->uuid, f[1].p, f[1].len);
    if (gpu_csv_unavailable(f[2]))
        d->healthy = false;
    else if (smi_valid_name(f[2]))
        memcpy(d->model, f[2].p, f[2].len);
    else
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: name '%s' is not printable text of at most %d "
                       "characters",
                       line_no, gpu_csv_quote(f[2], q, sizeof(q)), GPU_MODEL_MAX - 1);
    /* "81920" or "81920 MiB" (with units) -> MiB. */
    if (gpu_csv_unavailable(f[3]))
        d->healthy = false;
    else if (!gpu_csv_number(f[3], 9, "MiB", &d->memory_mib))
        return err_set(err, ERR_INTERNAL,
                       "nvidia-smi output line %d: memory.total '%s' is not a number of MiB",
                       line_no, gpu_csv_quote(f[3], q, sizeof(q)));
    if (!d->healthy) {
        char q2[72];
        log_warn("nvidia-smi: GPU %s is unhealthy: name '%s', memory '%s'", d->uuid,
                 gpu_csv_quote(f[2], q, sizeof(q)), gpu_csv_quote(f[3], q2, sizeof(q2)));
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
    struct gpu_csv_lines it = {.next = csv, .first = true, .header_word = "index"};
    struct gpu_csv_span line;
    while (gpu_csv_next_line(&it, &line)) {
        gpu_device d = {0};
        int r = smi_parse_line(line, it.line_no, &d, err);
        if (r < 0)
            return -1;
        if (r == 0)
            continue;
        if (smi_check_unique(out, &d, it.line_no, err) < 0)
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
    struct gpu_csv_lines it = {.next = r.out, .first = true}; /* noheader: no header_word */
    struct gpu_csv_span line, f[3];
    while (gpu_csv_next_line(&it, &line)) {
        if (gpu_csv_split(line, f, 3) != 3)
            continue;
        if (!inv->driver_version[0] && !gpu_csv_unavailable(f[1]) && smi_valid_name(f[1]) &&
            f[1].len < sizeof(inv->driver_version))
            memcpy(inv->driver_version, f[1].p, f[1].len);
        for (size_t i = 0; i < inv->n; i++) {
            gpu_device *d = &inv->devices[i];
            if (gpu_csv_eq(f[0], d->uuid) && gpu_csv_eq(f[2], "Enabled")) {
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
