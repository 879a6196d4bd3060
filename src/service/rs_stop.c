/*
 * rs_stop.c - stopping a replica set's container without waiting for a
 * signal that nobody in it will act on.
 *
 * Docker stops a container by sending its stop signal (SIGTERM) to the
 * container's PID 1, waiting up to the grace period, then killing it. Every
 * gpubox container runs docker-init (tini) as PID 1 (HostConfig.Init), which
 * passes the signal on to its one child, the set's command, and to nothing
 * else. When that command is an interactive shell, the usual command of an
 * "instance" container (the image's CMD /bin/bash or /bin/sh, run with a
 * TTY), the shell ignores SIGTERM: nothing in the container ever hears the
 * signal and Docker waits the whole grace period, 10 s, for nothing, then
 * kills everything. Every patch, rollback or restart of such a set paid
 * those 10 s.
 *
 * So before a stop, gpubox looks at the process the signal will reach,
 * from the host's /proc (gpuboxd runs as root on the Docker host):
 *   - PID 1 of the container (State.Pid), confirmed to be the container's
 *     by its cgroup naming the container's id;
 *   - with docker-init as PID 1, its only child instead;
 *   - that process acts on SIGTERM when it catches it (SigCgt), blocks it
 *     in any thread (SigBlk: it may take it with sigwait, as tini does), or
 *     neither ignores it (SigIgn) nor is PID 1 of its namespace (the kernel
 *     drops signals that PID 1 has left at their default).
 * When it does not act on it, the stop kills at once (grace 0: Docker still
 * sends SIGTERM first); the outcome is the one Docker reaches after the
 * grace period, 10 s sooner. In every other case, and whenever anything is
 * unclear (no /proc of the Docker host: a remote Docker or another PID
 * namespace; a stop signal other than SIGTERM; TINI_KILL_PROCESS_GROUP set,
 * which makes docker-init signal a whole process group; a PID 1 with no or
 * several children), the stop gives the full grace period, as before.
 *
 * The look happens a moment before the stop: a process that installs a
 * SIGTERM handler in between is killed without using it. The window is the
 * time of one Docker inspect.
 */
#include "service/rs_internal.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "util/cleanup.h"
#include "util/log.h"

#define RS_SIG_BIT(sig) (1ULL << ((sig)-1))

/* What /proc/<pid>/status says of a process's signals. */
typedef struct rs_proc_signals {
    unsigned long long ignored, caught, blocked; /* masks; blocked: the main thread's */
    long ns_pid;                                 /* its pid in its own namespace */
} rs_proc_signals;

static int rs_proc_read_status(const char *path, rs_proc_signals *out)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "SigIgn: %llx", &out->ignored) == 1 ||
            sscanf(line, "SigCgt: %llx", &out->caught) == 1 ||
            sscanf(line, "SigBlk: %llx", &out->blocked) == 1) {
            seen++;
        } else if (strncmp(line, "NSpid:", 6) == 0) {
            /* "NSpid:\t4711\t7": the last is the innermost namespace's. */
            char *last = strrchr(line, '\t');
            out->ns_pid = last ? strtol(last + 1, NULL, 10) : 0;
            seen++;
        }
    }
    return seen == 4 ? 0 : -1;
}

/* pid's signals, with SigBlk the union over all its threads. */
static int rs_proc_signals_of(pid_t pid, rs_proc_signals *out)
{
    char path[64];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (rs_proc_read_status(path, out) < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char tpath[320];
        rs_proc_signals t = {0};
        snprintf(tpath, sizeof(tpath), "/proc/%d/task/%s/status", (int)pid, e->d_name);
        if (rs_proc_read_status(tpath, &t) == 0)
            out->blocked |= t.blocked;
    }
    closedir(d);
    return 0;
}

/* pid is in the container whose full id is id: its cgroup path names it
 * (cgroup v1 and v2, cgroupfs and systemd drivers all do). */
static bool rs_proc_in_container(pid_t pid, const char *id)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f || strlen(id) < 32)
        return false;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, id))
            return true;
    return false;
}

/* The only child of pid; 0 when it has none or several. */
static pid_t rs_proc_only_child(pid_t pid)
{
    char path[64], text[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f || !fgets(text, sizeof(text), f))
        return 0;
    int child = 0;
    char rest[8] = "";
    int n = sscanf(text, "%d %7s", &child, rest);
    return n == 1 && child > 0 ? (pid_t)child : 0;
}

static bool rs_env_has(const json_t *env, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *e = json_string_value(json_array_get(env, i));
        if (e && strncmp(e, name, len) == 0 && e[len] == '=')
            return true;
    }
    return false;
}

/* The grace period a stop of the container described by inspect needs
 * (file comment): 0 when its stop signal reaches no process that acts on
 * it, else RS_STOP_TIMEOUT_S. why gets the reason for the log. */
static int rs_stop_grace(const json_t *inspect, char *why, size_t size)
{
    json_t *state = json_object_get(inspect, "State"), *config = json_object_get(inspect, "Config");
    const char *id = json_string_value(json_object_get(inspect, "Id"));
    const char *signal = json_string_value(json_object_get(config, "StopSignal"));
    json_int_t pid1 = json_integer_value(json_object_get(state, "Pid"));
    bool init = json_is_true(json_object_get(json_object_get(inspect, "HostConfig"), "Init"));
    if (!json_is_true(json_object_get(state, "Running")) || pid1 <= 0 || !id)
        return RS_STOP_TIMEOUT_S;
    if (signal && *signal && strcmp(signal, "SIGTERM") != 0 && strcmp(signal, "TERM") != 0 &&
        strcmp(signal, "15") != 0)
        return RS_STOP_TIMEOUT_S;
    if (!rs_proc_in_container((pid_t)pid1, id))
        return RS_STOP_TIMEOUT_S; /* not the Docker host's /proc, or it just ended */
    pid_t target = (pid_t)pid1;
    if (init) {
        if (rs_env_has(json_object_get(config, "Env"), "TINI_KILL_PROCESS_GROUP"))
            return RS_STOP_TIMEOUT_S;
        target = rs_proc_only_child((pid_t)pid1);
        if (target <= 0 || !rs_proc_in_container(target, id))
            return RS_STOP_TIMEOUT_S;
    }
    rs_proc_signals s;
    if (rs_proc_signals_of(target, &s) < 0)
        return RS_STOP_TIMEOUT_S;
    unsigned long long term = RS_SIG_BIT(SIGTERM);
    if ((s.caught & term) || (s.blocked & term))
        return RS_STOP_TIMEOUT_S;
    if (s.ignored & term)
        snprintf(why, size, "its SIGTERM goes to pid %d, which ignores it", (int)target);
    else if (s.ns_pid == 1)
        snprintf(why, size, "its SIGTERM goes to pid %d, PID 1 without a handler for it",
                 (int)target);
    else
        return RS_STOP_TIMEOUT_S; /* the default action: it ends */
    return 0;
}

int rs_container_stop(app *a, const char *container, gb_err *err)
{
    int grace = RS_STOP_TIMEOUT_S;
    _cleanup_json_ json_t *info = NULL;
    gb_err ignored = GB_ERR_INIT;
    char why[160] = "";
    /* An inspect that fails leaves the stop to say what is wrong. */
    if (docker_container_inspect(a->docker, container, &info, &ignored) == 0)
        grace = rs_stop_grace(info, why, sizeof(why));
    if (grace == 0)
        log_debug("stopping %s without a grace period: %s", container, why);
    return docker_container_stop(a->docker, container, grace, err);
}
