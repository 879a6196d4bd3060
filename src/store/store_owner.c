/*
 * store_owner.c - who holds a store: the identity a claiming process writes
 * into the SQLite lock file or the etcd owner key, read back by the next
 * one to say who is in the way, and to tell a holder that is gone (a
 * gpuboxd killed with -9 on this host) from one that still runs.
 *
 * The identity is JSON, so an operator can read it with cat or etcdctl:
 *   {"program": "gpuboxd", "host": "gpu01", "pid": 1234,
 *    "started": "2026-05-01T10:00:00Z", "bootId": "9f1c...",
 *    "pidNamespace": "pid:[4026531836]", "procStart": 81234}
 * A pid means something only on the host, boot and pid namespace it was
 * written in; procStart (field 22 of /proc/PID/stat, clock ticks after
 * boot) tells the process apart from a later one that was given its pid.
 */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/cleanup.h"
#include "util/time.h"

/* The first line of a small file, without its newline; "" when unreadable. */
static void store_owner_read_line(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (f && fgets(buf, (int)size, f))
        buf[strcspn(buf, "\n")] = '\0';
}

/* Field 22 (starttime) and field 3 (state) of /proc/PID/stat. The command
 * name (field 2) may hold spaces and parentheses: fields are counted from
 * the last ')'. -1 when there is no such process. */
static int store_owner_proc_stat(long pid, unsigned long long *start, char *state)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (n == 0)
        return -1;
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    if (!p || p[1] != ' ')
        return -1;
    *state = p[2];
    p += 2;
    for (int field = 3; field < 22; field++) { /* skip to field 22 */
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

/* The host's boot time (Unix seconds), from "btime" in /proc/stat. */
static int64_t store_owner_boot_time(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "btime ", 6) == 0)
            return strtoll(line + 6, NULL, 10);
    return 0;
}

int store_owner_of_pid(const char *program, long pid, store_owner *out, gb_err *err)
{
    *out = (store_owner){.pid = pid};
    char state = 0;
    if (store_owner_proc_stat(pid, &out->proc_start, &state) < 0)
        return err_set(err, ERR_NOT_FOUND, "no process %ld on this host (/proc/%ld/stat)", pid,
                       pid);
    snprintf(out->program, sizeof(out->program), "%s", program ? program : "");
    if (gethostname(out->host, sizeof(out->host)) < 0)
        snprintf(out->host, sizeof(out->host), "unknown");
    out->host[sizeof(out->host) - 1] = '\0';
    store_owner_read_line("/proc/sys/kernel/random/boot_id", out->boot_id, sizeof(out->boot_id));
    /* The namespace the pid number belongs to is the caller's own. */
    ssize_t n = readlink("/proc/self/ns/pid", out->pid_ns, sizeof(out->pid_ns) - 1);
    out->pid_ns[n > 0 ? n : 0] = '\0';
    long ticks = sysconf(_SC_CLK_TCK);
    int64_t boot = store_owner_boot_time();
    out->started = boot && ticks > 0 ? boot + (int64_t)(out->proc_start / (unsigned long)ticks)
                                     : (int64_t)time(NULL);
    return 0;
}

int store_owner_self(const char *program, store_owner *out, gb_err *err)
{
    return store_owner_of_pid(program, (long)getpid(), out, err);
}

char *store_owner_to_json(const store_owner *o)
{
    char started[32];
    if (time_iso_format((time_t)o->started, started, sizeof(started)) < 0)
        snprintf(started, sizeof(started), "unknown");
    _cleanup_json_ json_t *j =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:I}", "program", o->program, "host", o->host,
                  "pid", (json_int_t)o->pid, "started", started, "bootId", o->boot_id,
                  "pidNamespace", o->pid_ns, "procStart", (json_int_t)o->proc_start);
    return j ? json_dumps(j, JSON_COMPACT) : NULL;
}

static void store_owner_copy_string(json_t *j, const char *name, char *dst, size_t size)
{
    const char *v = json_string_value(json_object_get(j, name));
    snprintf(dst, size, "%s", v ? v : "");
}

int store_owner_from_json(const char *text, store_owner *out)
{
    *out = (store_owner){0};
    _cleanup_json_ json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    json_t *pid = json_object_get(j, "pid");
    if (!json_is_object(j) || !json_is_integer(pid) || json_integer_value(pid) <= 0)
        return -1;
    out->pid = (long)json_integer_value(pid);
    store_owner_copy_string(j, "program", out->program, sizeof(out->program));
    store_owner_copy_string(j, "host", out->host, sizeof(out->host));
    store_owner_copy_string(j, "bootId", out->boot_id, sizeof(out->boot_id));
    store_owner_copy_string(j, "pidNamespace", out->pid_ns, sizeof(out->pid_ns));
    json_t *start = json_object_get(j, "procStart");
    out->proc_start = json_is_integer(start) ? (unsigned long long)json_integer_value(start) : 0;
    const char *started = json_string_value(json_object_get(j, "started"));
    out->started = (int64_t)time_iso_parse(started);
    return 0;
}

void store_owner_describe(const store_owner *o, char *buf, size_t size)
{
    if (o->pid <= 0) {
        snprintf(buf, size, "a process that did not say who it is");
        return;
    }
    char started[40] = "";
    time_t t = (time_t)o->started;
    struct tm tm;
    if (o->started > 0 && gmtime_r(&t, &tm))
        strftime(started, sizeof(started), ", started %Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(buf, size, "%s pid %ld on host %s%s", o->program[0] ? o->program : "a process", o->pid,
             o->host[0] ? o->host : "unknown", started);
}

bool store_owner_is_gone(const store_owner *holder, const store_owner *me)
{
    /* Only a pid of this very host, boot and namespace can be looked up:
     * two hosts may share a name (cloned machines), and a container may see
     * other pids than its host. */
    if (holder->pid <= 0 || !holder->proc_start || !holder->boot_id[0] || !holder->pid_ns[0] ||
        strcmp(holder->host, me->host) != 0 || strcmp(holder->boot_id, me->boot_id) != 0 ||
        strcmp(holder->pid_ns, me->pid_ns) != 0)
        return false;
    unsigned long long start = 0;
    char state = 0;
    if (store_owner_proc_stat(holder->pid, &start, &state) < 0)
        return true; /* no such process */
    /* Another process that got the pid later, or the holder dead but not
     * yet reaped by its parent (a zombie runs no code). */
    return start != holder->proc_start || state == 'Z' || state == 'X';
}
