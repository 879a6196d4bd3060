/*
 * proc.c - fork/exec without a shell, both output streams collected with
 * poll() until they close, then the exit status, all before one deadline.
 *
 * The child runs in its own process group (set on both sides of the fork,
 * whichever runs first), so a timeout kills the tool and anything it
 * started. The child inherits only the three descriptors it is given:
 * everything above 2 is closed before exec.
 */
#include "util/xalloc.h"
#include "util/proc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/time.h"

extern char **environ;

struct proc_pipe {
    int fd;
    char *buf;
    size_t len;
};

static bool proc_is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Look for name in each directory of a colon-separated list. */
static bool proc_search(const char *name, const char *dirs, char *path, size_t len)
{
    if (!dirs)
        return false;
    char *copy = xstrdup(dirs), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        snprintf(path, len, "%s/%s", *dir ? dir : ".", name);
        found = proc_is_executable(path);
    }
    free(copy);
    return found;
}

int proc_resolve(const char *name, const char *extra_dirs, char *path, size_t len, gb_err *err)
{
    struct stat st;
    if (strchr(name, '/')) {
        if (stat(name, &st) < 0 || access(name, X_OK) < 0)
            return err_set(err, ERR_INTERNAL, "cannot run %s: %s", name, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return err_set(err, ERR_INTERNAL, "cannot run %s: not a file", name);
        snprintf(path, len, "%s", name);
        return 0;
    }
    const char *env = getenv("PATH");
    if (proc_search(name, env && *env ? env : "/usr/local/bin:/usr/bin:/bin", path, len) ||
        proc_search(name, extra_dirs, path, len))
        return 0;
    if (extra_dirs)
        return err_set(err, ERR_INTERNAL, "%s not found on PATH nor in %s", name, extra_dirs);
    return err_set(err, ERR_INTERNAL, "%s not found on PATH", name);
}

/* Read what is there on one pipe; closes it at end of file. -1 past the cap. */
static int proc_drain(struct proc_pipe *pp)
{
    char chunk[4096];
    ssize_t n = read(pp->fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0) {
        close(pp->fd);
        pp->fd = -1;
        return 0;
    }
    if (pp->len + (size_t)n > PROC_OUTPUT_MAX)
        return -1;
    char *grown = xrealloc(pp->buf, pp->len + (size_t)n + 1);
    memcpy(grown + pp->len, chunk, (size_t)n);
    pp->buf = grown;
    pp->len += (size_t)n;
    pp->buf[pp->len] = '\0';
    return 0;
}

/* Milliseconds left before the deadline, for poll(); -1 = no deadline. */
static int proc_left_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - time_mono_ms();
    return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Collect both pipes until they close, then the exit status, all before the
 * deadline (-1: none). -1 with *why set when the child must be killed;
 * *why is NULL when it ran out of time. */
static int proc_collect(pid_t pid, struct proc_pipe p[2], int *status, int64_t deadline,
                        const char **why)
{
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        int left = proc_left_ms(deadline);
        if (left == 0)
            return *why = NULL, -1;
        struct pollfd pfd[2] = {{.fd = p[0].fd, .events = POLLIN},
                                {.fd = p[1].fd, .events = POLLIN}};
        int n = poll(pfd, 2, left);
        if (n < 0 && errno != EINTR)
            return *why = "could not be watched (poll failed)", -1;
        for (int i = 0; n > 0 && i < 2; i++)
            if (pfd[i].revents && proc_drain(&p[i]) < 0)
                return *why = "printed more than 1 MiB", -1;
    }
    /* Pipes closed; the process may still be exiting (or lingering). */
    for (;;) {
        pid_t w = waitpid(pid, status, deadline < 0 ? 0 : WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return *why = "vanished (waitpid failed)", -1;
        if (deadline >= 0 && time_mono_ms() >= deadline)
            return *why = NULL, -1;
        if (deadline >= 0)
            usleep(5000);
    }
}

static void proc_child(char *const argv[], char *const envp[], int devnull, int out, int errfd)
{
    /* Only async-signal-safe calls between fork and exec. The daemon's
     * blocked signals and ignored SIGPIPE must not leak into the tool. */
    sigset_t none;
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    setpgid(0, 0);
    if (dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
        _exit(127);
    /* Libraries the daemon links (curl, sqlite) may hold descriptors
     * without O_CLOEXEC; the tool gets none of them. */
    if (close_range(3, ~0U, 0) < 0)
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    execve(argv[0], argv, envp ? envp : environ);
    _exit(127);
}

static void proc_close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int proc_run(char *const argv[], char *const envp[], int timeout_ms, proc_result *r, gb_err *err)
{
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    memset(r, 0, sizeof(*r));
    if (devnull < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        int saved = errno;
        proc_close_pair(outp);
        proc_close_pair(errp);
        return err_set(err, ERR_INTERNAL, "cannot run %s: %s", argv[0], strerror(saved));
    }
    int64_t deadline = timeout_ms > 0 ? time_mono_ms() + timeout_ms : -1;
    pid_t pid = fork();
    if (pid == 0)
        proc_child(argv, envp, devnull, outp[1], errp[1]);
    close(outp[1]);
    close(errp[1]);
    struct proc_pipe p[2] = {{.fd = outp[0]}, {.fd = errp[0]}};
    if (pid < 0) {
        int saved = errno;
        close(p[0].fd);
        close(p[1].fd);
        return err_set(err, ERR_INTERNAL, "cannot run %s: fork: %s", argv[0], strerror(saved));
    }
    setpgid(pid, pid); /* also in the child: whichever runs first makes the group */
    const char *why = NULL;
    int rc = proc_collect(pid, p, &r->status, deadline, &why);
    for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    if (rc < 0) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR)
            ;
        free(p[0].buf);
        free(p[1].buf);
        memset(r, 0, sizeof(*r));
        if (!why)
            return err_set(err, ERR_INTERNAL, "%s did not finish within %d ms; killed it", argv[0],
                           timeout_ms);
        return err_set(err, ERR_INTERNAL, "%s %s; killed it", argv[0], why);
    }
    r->out = p[0].buf ? p[0].buf : xstrdup("");
    r->out_len = p[0].len;
    r->err = p[1].buf ? p[1].buf : xstrdup("");
    r->err_len = p[1].len;
    return 0;
}

void proc_result_free(proc_result *r)
{
    if (!r)
        return;
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

const char *proc_first_line(const proc_result *r, char *buf, size_t len)
{
    const char *texts[] = {r->out, r->err};
    for (size_t i = 0; i < 2; i++) {
        for (const char *p = texts[i]; p && *p;) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            const char *next = nl ? nl + 1 : NULL;
            while (n > 0 && isspace((unsigned char)*p))
                p++, n--;
            /* trailing blanks, and a '.' since the caller's sentence goes on */
            while (n > 0 && (isspace((unsigned char)p[n - 1]) || p[n - 1] == '.'))
                n--;
            if (n > 0) {
                if (n > len - 1)
                    n = len - 1;
                for (size_t k = 0; k < n; k++)
                    buf[k] = isprint((unsigned char)p[k]) ? p[k] : '?';
                buf[n] = '\0';
                return buf;
            }
            p = next;
        }
    }
    return "(no output)";
}

int proc_check_exit(const char *what, const proc_result *r, int code, gb_err *err)
{
    char said[200];
    if (WIFSIGNALED(r->status))
        return err_set(err, code, "%s was killed by signal %d", what, WTERMSIG(r->status));
    if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
        return err_set(err, code, "%s exited with status %d: %s", what, WEXITSTATUS(r->status),
                       proc_first_line(r, said, sizeof(said)));
    return 0;
}
