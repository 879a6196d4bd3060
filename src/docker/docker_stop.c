/*
 * docker_stop.c - stopping a container without waiting for a signal that
 * nobody in it will act on.
 *
 * Docker stops a container by sending its stop signal (SIGTERM) to the
 * container's PID 1, waiting up to the grace period, then killing it. Every
 * gpubox container runs docker-init (tini) as PID 1 (HostConfig.Init), which
 * passes the signal on to its one child, the set's command, and to nothing
 * else. When that command is an interactive shell, the usual command of an
 * "instance" container (the image's CMD /bin/bash or /bin/sh, run with a
 * TTY), the shell ignores SIGTERM: nothing in the container ever hears the
 * signal and Docker waits the whole grace period for nothing, then kills
 * everything. Every patch, rollback or restart of such a set paid it.
 *
 * So before a stop, docker_container_stop_promptly looks at the process the
 * signal will reach, from the host's /proc (gpuboxd runs as root on the
 * Docker host; util/proc.h reads it):
 *   - PID 1 of the container (State.Pid), confirmed to be the container's
 *     by its cgroup naming the container's id;
 *   - with docker-init as PID 1, its only child instead;
 *   - that process acts on SIGTERM when it catches it (SigCgt), blocks it
 *     in any thread (SigBlk: it may take it with sigwait, as tini does), or
 *     neither ignores it (SigIgn) nor is PID 1 of its namespace (the kernel
 *     drops signals that PID 1 has left at their default).
 * When it does not act on it, the stop kills at once (grace 0: Docker still
 * sends SIGTERM first); the outcome is the one Docker reaches after the
 * grace period, that much sooner. In every other case, and whenever
 * anything is unclear (no /proc of the Docker host: a remote Docker or
 * another PID namespace; a stop signal other than SIGTERM;
 * TINI_KILL_PROCESS_GROUP set, which makes docker-init signal a whole
 * process group; a PID 1 with no or several children), the stop gives the
 * full grace period.
 *
 * The look happens a moment before the stop: a process that installs a
 * SIGTERM handler in between is killed without using it. The window is the
 * time of one Docker inspect.
 */
#include "docker/docker_internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/proc.h"

/* pid is in the container whose full id is id. */
static bool docker_pid_in_container(pid_t pid, const char *id)
{
    return strlen(id) >= 32 && proc_cgroup_mentions(pid, id);
}

static bool docker_env_has(const json_t *env, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *e = json_string_value(json_array_get(env, i));
        if (e && strncmp(e, name, len) == 0 && e[len] == '=')
            return true;
    }
    return false;
}

static bool docker_signal_is_term(const char *signal)
{
    return !signal || !*signal || strcmp(signal, "SIGTERM") == 0 || strcmp(signal, "TERM") == 0 ||
           strcmp(signal, "15") == 0;
}

/* Whether the stop signal of the container described by inspect reaches
 * no process that acts on it (file comment); why gets the reason. */
static bool docker_stop_needs_no_grace(const json_t *inspect, char *why, size_t size)
{
    json_t *config = json_object_get(inspect, "Config");
    docker_container_state st;
    docker_container_state_of(inspect, &st);
    bool init = json_is_true(json_object_get(json_object_get(inspect, "HostConfig"), "Init"));
    if (!st.running || st.pid <= 0 || !st.id[0])
        return false;
    if (!docker_signal_is_term(json_string_value(json_object_get(config, "StopSignal"))))
        return false;
    if (!docker_pid_in_container((pid_t)st.pid, st.id))
        return false; /* not the Docker host's /proc, or it just ended */
    pid_t target = (pid_t)st.pid;
    if (init) {
        if (docker_env_has(json_object_get(config, "Env"), "TINI_KILL_PROCESS_GROUP"))
            return false;
        target = proc_only_child((pid_t)st.pid);
        if (target <= 0 || !docker_pid_in_container(target, st.id))
            return false;
    }
    proc_signals s;
    if (proc_signals_of(target, &s) < 0)
        return false;
    unsigned long long term = PROC_SIG_BIT(SIGTERM);
    if ((s.caught & term) || (s.blocked & term))
        return false;
    if (s.ignored & term)
        snprintf(why, size, "its SIGTERM goes to pid %d, which ignores it", (int)target);
    else if (s.ns_pid == 1)
        snprintf(why, size, "its SIGTERM goes to pid %d, PID 1 without a handler for it",
                 (int)target);
    else
        return false; /* the default action: it ends */
    return true;
}

int docker_container_stop_promptly(docker_client *c, const char *id_or_name, int timeout_s,
                                   gb_err *err)
{
    int grace = timeout_s;
    _cleanup_json_ json_t *info = NULL;
    gb_err ignored = GB_ERR_INIT;
    char why[160] = "";
    /* An inspect that fails leaves the stop to say what is wrong. */
    if (docker_container_inspect(c, id_or_name, &info, &ignored) == 0 &&
        docker_stop_needs_no_grace(info, why, sizeof(why))) {
        grace = 0;
        log_debug("stopping %s without a grace period: %s", id_or_name, why);
    }
    return docker_container_stop(c, id_or_name, grace, err);
}
