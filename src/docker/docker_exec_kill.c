/*
 * docker_exec_kill.c - kill an exec'd process and everything it started,
 * when an exec runs out of time or output (docker_exec.c).
 *
 * Docker has no call that kills an exec, and ends it only with the whole
 * container; but gpuboxd runs as root on the same host, and Docker reports
 * the exec's host pid. Killing that one pid is not enough: `sh -c 'make -j8'`
 * leaves the compilers running, holding the GPU or the CPU the timeout was
 * meant to free. So the tree is killed, in two passes:
 *
 *   1. stop: SIGSTOP the root, then scan /proc for processes whose parent is
 *      a stopped one, stop those too, and repeat until a scan finds nothing
 *      new. A stopped process cannot fork, so the tree stops growing, and a
 *      child that exits meanwhile stays a zombie (its parent cannot reap it)
 *      so its pid cannot be reused under us;
 *   2. kill: SIGKILL every stopped pid (SIGKILL ends a stopped process too).
 *
 * The root is signalled through a pidfd that the caller opened and checked
 * against Docker, so a pid reused after the exec ended is never hit. A
 * process that left the tree (daemonized, reparented to the container's
 * init) is not found; it dies with the container.
 *
 * The pid list is a plain growable array: trees are small, and the scan of
 * /proc dominates.
 */
#include "docker/docker_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "util/cleanup.h"

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

static bool docker_pidset_add(struct docker_pidset *s, pid_t pid)
{
    if (s->len == s->alloc) {
        size_t want = s->alloc ? 2 * s->alloc : 16;
        pid_t *grown = realloc(s->pids, want * sizeof(*grown));
        if (!grown)
            return false;
        s->pids = grown;
        s->alloc = want;
    }
    s->pids[s->len++] = pid;
    return true;
}

/* The parent of pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm
 * may hold spaces and parentheses, so parse after the last ')'); 0 when the
 * process is gone. */
static pid_t docker_proc_parent(const char *pid_text)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid_text);
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
        pid_t parent = docker_proc_parent(ent->d_name);
        if (parent <= 0 || !docker_pidset_has(s, parent))
            continue;
        if (kill((pid_t)pid, SIGSTOP) == 0 && docker_pidset_add(s, (pid_t)pid))
            added++;
    }
    closedir(dir);
    return added;
}

/* Signal the root through its pidfd (or by pid when the kernel has none). */
static int docker_signal_root(pid_t pid, int pidfd, int sig)
{
    return pidfd >= 0 ? pidfd_send_signal(pidfd, sig, NULL, 0) : kill(pid, sig);
}

int docker_exec_kill_process_tree(pid_t pid, int pidfd, gb_err *err)
{
    if (docker_signal_root(pid, pidfd, SIGSTOP) < 0) {
        if (errno == ESRCH)
            return 0; /* it ended by itself meanwhile */
        return err_set(err, ERR_INTERNAL, "stopping process %d: %s", (int)pid, strerror(errno));
    }
    struct docker_pidset tree = {0};
    if (!docker_pidset_add(&tree, pid))
        return err_set(err, ERR_INTERNAL, "out of memory");
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

int docker_exec_open_pidfd(pid_t pid)
{
    int fd = pidfd_open(pid, 0);
    return fd >= 0 ? fd : errno == ESRCH ? -2 : -1;
}
