/*
 * pids.c - the host PIDs of the container's processes, from the file
 * gpuboxd writes (pids.h).
 */
#include "glibc_compat.h" /* first: binds glibc versions (see there) */
#include "pids.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "limits.h" /* gpucuda_read_small_file */

/* A PID, 1 to GPUCUDA_PID_LIMIT, in decimal at *p; advances *p. */
static bool parse_pid(const char **p, const char *end, uint32_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9' && v <= GPUCUDA_PID_LIMIT)
        v = v * 10 + (uint64_t)(*s++ - '0');
    if (s == *p || v == 0 || v > GPUCUDA_PID_LIMIT || (s < end && *s >= '0' && *s <= '9'))
        return false;
    *p = s;
    *out = (uint32_t)v;
    return true;
}

int gpucuda_pids_parse(const char *text, gpucuda_pids *out, char *err, size_t errlen)
{
    out->n = 0;
    int lineno = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        lineno++;
        const char *p = line;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p < end && *p != '#') {
            gpucuda_pid_pair pair;
            bool ok = parse_pid(&p, end, &pair.host);
            if (ok) {
                const char *gap = p;
                while (p < end && (*p == ' ' || *p == '\t'))
                    p++;
                ok = p > gap && parse_pid(&p, end, &pair.own);
            }
            while (ok && p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
                p++;
            if (!ok || p != end) {
                snprintf(err, errlen, "line %d: expected HOSTPID PID, two numbers from 1 to %u",
                         lineno, GPUCUDA_PID_LIMIT);
                return -1;
            }
            if (out->n < GPUCUDA_MAX_PIDS)
                out->pid[out->n++] = pair;
        }
        line = *end ? end + 1 : end;
    }
    return 0;
}

uint32_t gpucuda_pids_host_of(const gpucuda_pids *p, uint32_t own)
{
    for (int i = 0; i < p->n; i++)
        if (p->pid[i].own == own)
            return p->pid[i].host;
    return 0;
}

bool gpucuda_pids_is_self(const gpucuda_pids_file *f, uint32_t nvml_pid, uint32_t self)
{
    if (!f->present)
        return nvml_pid == self;
    uint32_t host = gpucuda_pids_host_of(&f->pids, self);
    return host != 0 && nvml_pid == host;
}

void gpucuda_pids_refresh(gpucuda_pids_file *f)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || gpucuda_fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        if (errno == ENOENT || errno == ENOTDIR) {
            f->present = false;
            f->pids.n = 0;
        }
        return;
    }
    if (f->present && f->ino == st.st_ino && f->dev == st.st_dev && f->size == st.st_size &&
        f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec) {
        close(fd);
        return;
    }
    char *text = gpucuda_read_small_file(fd);
    int e = errno;
    close(fd);
    if (!text) {
        fprintf(stderr, "libgpubox-cuda: cannot read %s (%s); keeping the PIDs read before\n",
                f->path, strerror(e));
        return;
    }
    char err[160];
    gpucuda_pids *read = malloc(sizeof(*read));
    int rc = read ? gpucuda_pids_parse(text, read, err, sizeof(err)) : -1;
    free(text);
    if (rc != 0) {
        fprintf(stderr, "libgpubox-cuda: %s: %s; keeping the PIDs read before\n", f->path,
                read ? err : "out of memory");
        free(read);
        return;
    }
    f->pids.n = read->n;
    memcpy(f->pids.pid, read->pid, (size_t)read->n * sizeof(read->pid[0]));
    free(read);
    f->present = true;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;
}
