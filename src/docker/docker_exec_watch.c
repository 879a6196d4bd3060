/*
 * docker_exec_watch.c - the watchdog of an exec (docker_exec.c): when the
 * deadline passes, or the reader says the output passed the drain limit,
 * kill the exec'd process and everything it started.
 *
 * Docker has no call that ends an exec (only the whole container), but
 * gpuboxd runs as root on the same host and Docker reports the exec's host
 * pid. The watchdog is a thread, so the reader keeps reading the stream
 * while it kills; the stream then ends the ordinary way, with the output
 * written up to the kill and the exit code Docker records (137). Killing
 * while the stream is still attached matters: when a client goes away,
 * Docker marks the exec ended with code 126 the next time it has output to
 * pass on, yet leaves the process running.
 *
 * Killing one pid is not enough: `sh -c 'make -j8'` leaves the compilers
 * running, holding the CPU or GPU the timeout was meant to free. So the
 * tree is killed, in two passes:
 *
 *   1. stop: SIGSTOP the root, then scan /proc for processes whose parent is
 *      a stopped one, stop those too, and repeat until a scan finds nothing
 *      new. A stopped process cannot fork, so the tree stops growing, and a
 *      child that exits meanwhile stays a zombie (its parent cannot reap it)
 *      so its pid cannot be reused under us;
 *   2. kill: SIGKILL every stopped pid (SIGKILL ends a stopped process too).
 *
 * The root is signalled through a pidfd, opened and then checked against
 * Docker once more, so a pid reused after the exec ended is never hit; and
 * nothing is signalled unless the pid's cgroup names the exec's container,
 * so a Docker whose pids mean something else (another host, another PID
 * namespace) makes the kill fail with an error rather than hit a stranger. A
 * process that left the tree (daemonized, reparented to the container's
 * init) is not found; it dies with the container.
 *
 * The pid list is a plain growable array: trees are small, and the scan of
 * /proc dominates.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/time.h"

struct docker_exec_watch {
    pthread_t thread;
    docker_client *c;
    const char *eid;
    long deadline_ms; /* 0 = none */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC, like deadline_ms */
    bool done;           /* reader: the stream ended, stand down */
    bool kill_now;       /* reader: the drain limit passed (docker_exec_watch_fire) */
    bool killed;         /* watchdog: it killed the tree */
    bool by_deadline;    /* ... because the time ran out */
    int rc;              /* watchdog: -1 when killing failed (err says why) */
    gb_err err;
};

/* Wait (lock held) for a signal, or until until_ms (0 = no limit). */
static void docker_exec_watch_sleep(struct docker_exec_watch *w, long until_ms)
{
    if (until_ms == 0) {
        pthread_cond_wait(&w->cond, &w->lock);
        return;
    }
    struct timespec ts = {.tv_sec = until_ms / 1000, .tv_nsec = until_ms % 1000 * 1000000};
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

/* A tree deeper than this many scans is not a shape processes make by
 * themselves; stop looking and kill what was found. */
#define DOCKER_KILL_MAX_ROUNDS 64

struct docker_pidset {
    pid_t *pids;
    size_t len, alloc;
};

static bool docker_pidset_has(const struct docker_pidset *s, pid_t pid)
{
    for (size_t i = 0; i < s->len; i++)
        if (s->pids[i] == pid)
            return true;
    return false;
}

static void docker_pidset_add(struct docker_pidset *s, pid_t pid)
{
    if (s->len == s->alloc) {
        size_t want = s->alloc ? 2 * s->alloc : 16;
        s->pids = xrealloc(s->pids, want * sizeof(*s->pids));
        s->alloc = want;
    }
    s->pids[s->len++] = pid;
}

/* The parent of pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm
 * may hold spaces and parentheses, so parse after the last ')'); 0 when the
 * process is gone. */
static pid_t docker_proc_parent(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    int ppid = 0;
    if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
        return 0;
    return (pid_t)ppid;
}

/* One scan of /proc: stop and add every process whose parent is in s.
 * Returns how many were added, -1 when /proc cannot be read. */
static int docker_stop_children(struct docker_pidset *s)
{
    DIR *dir = opendir("/proc");
    if (!dir)
        return -1;
    int added = 0;
    struct dirent *ent;
    while ((ent = readdir(dir))) {
        char *end = NULL;
        long pid = strtol(ent->d_name, &end, 10);
        if (pid <= 0 || *end || docker_pidset_has(s, (pid_t)pid))
            continue;
        pid_t parent = docker_proc_parent(pid);
        if (parent <= 0 || !docker_pidset_has(s, parent))
            continue;
        if (kill((pid_t)pid, SIGSTOP) == 0) {
            docker_pidset_add(s, (pid_t)pid);
            added++;
        }
    }
    closedir(dir);
    return added;
}

/* Signal the root through its pidfd (or by pid when the kernel has none). */
static int docker_signal_root(pid_t pid, int pidfd, int sig)
{
    return pidfd >= 0 ? pidfd_send_signal(pidfd, sig, NULL, 0) : kill(pid, sig);
}

static int docker_exec_kill_process_tree(pid_t pid, int pidfd, gb_err *err)
{
    if (docker_signal_root(pid, pidfd, SIGSTOP) < 0) {
        if (errno == ESRCH)
            return 0; /* it ended by itself meanwhile */
        return err_set(err, ERR_INTERNAL, "stopping process %d: %s", (int)pid, strerror(errno));
    }
    struct docker_pidset tree = {0};
    docker_pidset_add(&tree, pid);
    for (int round = 0; round < DOCKER_KILL_MAX_ROUNDS; round++)
        if (docker_stop_children(&tree) <= 0)
            break;
    for (size_t i = 1; i < tree.len; i++)
        kill(tree.pids[i], SIGKILL);
    int rc = docker_signal_root(pid, pidfd, SIGKILL);
    int saved = errno;
    free(tree.pids);
    if (rc < 0 && saved != ESRCH)
        return err_set(err, ERR_INTERNAL, "killing process %d: %s", (int)pid, strerror(saved));
    return 0;
}

/* A pidfd pinning pid: -2 when it has ended, -1 when the kernel has no
 * pidfds (before Linux 5.3). */
static int docker_exec_open_pidfd(pid_t pid)
{
    int fd = pidfd_open(pid, 0);
    return fd >= 0 ? fd : errno == ESRCH ? -2 : -1;
}

/* Whether host process pid is in the container: its cgroup path names the
 * container's id (/docker/<id>, or docker-<id>.scope under systemd). A
 * Docker on another host, or in another PID namespace, reports pids that
 * mean nothing here; this keeps the watchdog from stopping whatever local
 * process has that number. */
static bool docker_proc_in_container(pid_t pid, const char *container_id)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f || strlen(container_id) < 12)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    return strstr(buf, container_id) != NULL;
}

/* Kill the exec's tree if it still runs. The pid is pinned with a pidfd,
 * then checked against Docker once more: if the exec ended between the two
 * looks, its pid may already belong to someone else, and nothing is
 * killed. Before the process has started (Running false, no exit code yet)
 * it tries again until the reader stands it down. */
static void docker_exec_watch_kill(struct docker_exec_watch *w)
{
    for (;;) {
        struct docker_exec_state st;
        if (docker_exec_inspect(w->c, w->eid, &st, &w->err) < 0)
            break;
        if (st.running && st.pid > 0) {
            pid_t pid = (pid_t)st.pid;
            _cleanup_close_ int pidfd = docker_exec_open_pidfd(pid);
            if (pidfd >= 0 && docker_exec_inspect(w->c, w->eid, &st, &w->err) < 0)
                break;
            if (pidfd == -2 || !st.running || st.pid != pid)
                return; /* it ended meanwhile */
            if (!docker_proc_in_container(pid, st.container_id)) {
                err_set(&w->err, ERR_INTERNAL,
                        "cannot kill it: process %d, which Docker names, is not in container "
                        "%.12s on this host (is Docker on another host or in another PID "
                        "namespace?), so the command keeps running",
                        (int)pid, st.container_id);
                break;
            }
            if (docker_exec_kill_process_tree(pid, pidfd, &w->err) < 0)
                break;
            w->killed = true;
            return;
        }
        if (!st.running && st.exit_code >= 0)
            return; /* it ended by itself */
        pthread_mutex_lock(&w->lock);
        if (!w->done)
            docker_exec_watch_sleep(w, time_mono_ms() + 20);
        bool stop = w->done;
        pthread_mutex_unlock(&w->lock);
        if (stop)
            return;
    }
    w->rc = -1;
}

static void *docker_exec_watchdog(void *arg)
{
    struct docker_exec_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->done && !w->kill_now && !(w->deadline_ms && time_mono_ms() >= w->deadline_ms))
        docker_exec_watch_sleep(w, w->deadline_ms);
    bool stand_down = w->done;
    w->by_deadline = !w->kill_now;
    pthread_mutex_unlock(&w->lock);
    if (!stand_down)
        docker_exec_watch_kill(w);
    return NULL;
}

struct docker_exec_watch *docker_exec_watch_start(docker_client *c, const char *eid,
                                                  long deadline_ms, gb_err *err)
{
    struct docker_exec_watch *w = xcalloc(1, sizeof(*w));
    *w = (struct docker_exec_watch){
        .c = c, .eid = eid, .deadline_ms = deadline_ms, .err = GB_ERR_INIT};
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    int rc = pthread_create(&w->thread, NULL, docker_exec_watchdog, w);
    if (rc != 0) {
        err_set(err, ERR_INTERNAL, "cannot start a watchdog thread: %s", strerror(rc));
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

void docker_exec_watch_fire(struct docker_exec_watch *w)
{
    pthread_mutex_lock(&w->lock);
    w->kill_now = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int docker_exec_watch_finish(struct docker_exec_watch *w, bool *killed, bool *by_deadline,
                             gb_err *err)
{
    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    *killed = w->killed;
    *by_deadline = w->by_deadline;
    int rc = w->rc;
    if (rc < 0)
        err_set(err, w->err.code, "%s", w->err.msg);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return rc;
}

int docker_exec_kill_tree(docker_client *c, const char *eid, gb_err *err)
{
    struct docker_exec_watch w = {.c = c, .eid = eid, .err = GB_ERR_INIT};
    pthread_mutex_init(&w.lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cond, &attr);
    pthread_condattr_destroy(&attr);
    docker_exec_watch_kill(&w);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    if (w.rc < 0)
        err_set(err, w.err.code, "%s", w.err.msg);
    return w.rc;
}
