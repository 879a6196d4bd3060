/*
 * pids.h - the host PIDs of a container's processes, as gpuboxd writes
 * them, so the library finds its own process in NVML's per-process list
 * (docs/gpus.md, "Context memory").
 *
 * NVML lists processes under their PIDs in the host's PID namespace, also
 * when it is asked from inside a container, which has a PID namespace of
 * its own: there getpid() never matches. gpuboxd's monitor knows both
 * numbers of each process that NVML lists (the host PID from NVML, the
 * container's from the last NSpid entry of /proc/<pid>/status) and writes
 * them for each container into the limits directory it mounts read-only
 * (/run/gpubox/limits/pids), one process a line; blank lines and '#'
 * comments are ignored:
 *
 *     # HOSTPID PID
 *     81234 57
 *
 * gpuboxd writes the file (empty) when it creates the container and
 * replaces it whole (a rename) when the set of processes changes. Where
 * the file exists the library matches NVML's PIDs only through it (a host
 * PID of another container may equal the process's own PID); where it
 * does not (no gpuboxd container: tests/gpu/check.sh, a program run with
 * the library by hand, docker --pid=host without gpuboxd's mount), NVML's
 * PIDs are the process's own and match directly.
 *
 * Pure but for gpucuda_pids_refresh, which reads the file; the library
 * calls it only when it asks NVML (at most once a second, context.h).
 */
#ifndef GPUBOX_CUDA_PIDS_H
#define GPUBOX_CUDA_PIDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Lines past this many are ignored (gpuboxd lists only the processes NVML
 * lists, and writes no more: service/monitor). */
#define GPUCUDA_MAX_PIDS 1024
/* The kernel's PID_MAX_LIMIT: no PID is larger. */
#define GPUCUDA_PID_LIMIT 4194304U

typedef struct {
    uint32_t host; /* in the host's PID namespace, as NVML lists it */
    uint32_t own;  /* in the container's, as getpid() says */
} gpucuda_pid_pair;

typedef struct {
    int n;
    gpucuda_pid_pair pid[GPUCUDA_MAX_PIDS];
} gpucuda_pids;

/* The file as last read. Zero-initialized with a path, it has read
 * nothing yet (and counts as absent). */
typedef struct {
    const char *path;
    bool present; /* the file exists: match through it */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    gpucuda_pids pids;
} gpucuda_pids_file;

/* Parses the file's text. 0, or -1 with a message naming the line in err. */
int gpucuda_pids_parse(const char *text, gpucuda_pids *out, char *err, size_t errlen);

/* The host PID of the process with PID own in the container; 0 when the
 * list does not name it. */
uint32_t gpucuda_pids_host_of(const gpucuda_pids *p, uint32_t own);

/* Whether NVML's nvml_pid is the process self (its getpid()): through the
 * file when it exists, directly when it does not. */
bool gpucuda_pids_is_self(const gpucuda_pids_file *f, uint32_t nvml_pid, uint32_t self);

/* Reads f->path again when it changed (another inode, size or mtime). A
 * missing file: absent, nothing listed; a malformed one, or one that
 * cannot be read, keeps what was read before (and says so on stderr). */
void gpucuda_pids_refresh(gpucuda_pids_file *f);

#endif
