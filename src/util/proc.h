/*
 * proc.h - running another program: fork/exec without a shell, output
 * captured, a time limit.
 *
 * gpubox runs a few tools it cannot replace with a library call
 * (nvidia-smi, mkfs.ext4, e2fsck, resize2fs). Each runs as a child process
 * with stdin on /dev/null, stdout and stderr on pipes (at most
 * PROC_OUTPUT_MAX bytes each are kept), default signal handling, and its own
 * process group, so that a tool that outlives its time limit is killed with
 * everything it started. No shell ever sees the arguments: they are passed
 * to execve as they are.
 *
 * It also reads what /proc says of a running process (its signal masks,
 * its cgroups, its children), for callers that must know how a process
 * will take a signal before they send one.
 */
#ifndef GPUBOX_UTIL_PROC_H
#define GPUBOX_UTIL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

#define PROC_OUTPUT_MAX (1024 * 1024)
/* timeout_ms for tools that must never be killed half-way (a resize2fs
 * moving blocks): wait as long as they take. */
#define PROC_NO_TIMEOUT 0

typedef struct proc_result {
    int status; /* as from waitpid: use WIFEXITED / WEXITSTATUS */
    char *out;  /* stdout, NUL-terminated; "" when the program printed nothing */
    size_t out_len;
    char *err; /* stderr, likewise */
    size_t err_len;
} proc_result;

/* Find a program: a name with '/' is taken as it is (it must be an
 * executable regular file); a bare name is looked up on PATH, then in the
 * colon-separated extra_dirs (may be NULL), e.g. "/usr/sbin:/sbin" for
 * system tools when the daemon's PATH lacks them. path gets the result.
 * Errors (ERR_INTERNAL): "cannot run X: <why>", "X: not a file",
 * "X not found on PATH". */
int proc_resolve(const char *name, const char *extra_dirs, char *path, size_t len, gb_err *err);

/* Run argv[0] (a path, see proc_resolve) with argv and envp (NULL: the
 * daemon's environment). Returns 0 once the program has exited, whatever
 * its status; r then owns the output (proc_result_free). -1 with *err when
 * it could not be started, printed more than PROC_OUTPUT_MAX on a stream,
 * or did not finish within timeout_ms (> 0) - then it was killed with its
 * whole process group, and r holds nothing. */
int proc_run(char *const argv[], char *const envp[], int timeout_ms, proc_result *r, gb_err *err);

void proc_result_free(proc_result *r);

/* The first non-empty line the program printed (stdout, else stderr),
 * printable characters only and without a trailing '.', for error
 * messages; "(no output)" when it said nothing. */
const char *proc_first_line(const proc_result *r, char *buf, size_t len);

/* 0 when the program exited with status 0; otherwise -1 with *err (code)
 * "<what> exited with status N: <first line>" or "<what> was killed by
 * signal N". */
int proc_check_exit(const char *what, const proc_result *r, int code, gb_err *err);

/* ---- A running process, through /proc (proc_status.c) ---- */

#define PROC_SIG_BIT(sig) (1ULL << ((sig)-1))

/* What /proc/<pid>/status says of a process's signals. */
typedef struct proc_signals {
    unsigned long long ignored, caught; /* SigIgn, SigCgt */
    unsigned long long blocked;         /* SigBlk of every thread together */
    long ns_pid;                        /* its pid in its own pid namespace (NSpid) */
} proc_signals;

/* pid's signal masks; -1 when /proc cannot tell (no such process, or not
 * this host's /proc). */
int proc_signals_of(pid_t pid, proc_signals *out);
/* Some line of /proc/<pid>/cgroup contains text (a container's id names
 * its cgroup under every cgroup version and driver). */
bool proc_cgroup_mentions(pid_t pid, const char *text);
/* The container a process runs in: the last run of exactly 64 hex digits
 * in its /proc/<pid>/cgroup lines ("/docker/<id>" with the cgroupfs
 * driver, "docker-<id>.scope" with systemd's, either cgroup version), into
 * id (65 bytes). true when found; false for a process in no container or
 * one that is gone. */
#define PROC_CONTAINER_ID_LEN 64
bool proc_container_id(pid_t pid, char *id);
/* The same for one line of that file (exported for tests). */
bool proc_cgroup_line_container(const char *line, char *id);

/* The only child of pid; 0 when it has none or several. */
pid_t proc_only_child(pid_t pid);

#endif
