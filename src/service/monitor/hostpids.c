/*
 * hostpids.c - the host PIDs of each container's GPU processes, for the
 * CUDA limiter inside it (src/cuda/pids.h, docs/gpus.md "Context
 * memory").
 *
 * NVML lists processes under their host PIDs, also when the library asks
 * from inside a container, whose processes know only their PIDs there;
 * so the library, which counts its context memory from its line of
 * NVML's list, cannot find itself. The monitor's reading already has what
 * it needs: NVML's processes, and for each the container it runs in and
 * its PID there (the last NSpid entry of /proc/<pid>/status, read once per
 * new PID, monitor.c). After each reading, each set holding a share gets
 * the file "pids" in its limits directory (mounted read-only at
 * /run/gpubox/limits), one "HOSTPID PID" line per process of its
 * container that NVML lists on its shared cards, sorted, at most
 * MONITOR_HOSTPIDS_MAX of them. It is replaced (a temporary file and a
 * rename) only when the list changed: a container whose GPU processes stay
 * the same costs a comparison per reading. A container without the
 * limiter has no limits directory, and nothing is written.
 *
 * A process appears in NVML's list when its context exists; the monitor
 * lists it at its next reading (--usage-interval, 1 s by default) and the
 * library reads the file when it next asks NVML (at most once a second).
 * Without sampling (--usage-interval 0, or no NVML) nothing is written,
 * and inside containers context memory is not counted.
 */
#include "util/xalloc.h"
#include "service/monitor/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/replicaset/gpu_env.h"
#include "util/cleanup.h"
#include "util/log.h"

/* As many lines as the library reads (GPUCUDA_MAX_PIDS, src/cuda/pids.h). */
#define MONITOR_HOSTPIDS_MAX 1024

struct monitor_hostpids_todo {
    char name[NAME_MAX_LEN + 1];
    char container_id[80];
    char container_name[NAME_MAX_LEN + 16]; /* RS_CONTAINER_NAME_MAX */
    char *text;
};

static int monitor_gpu_pid_cmp(const void *x, const void *y)
{
    const struct monitor_gpu_pid *a = x, *b = y;
    return (a->host > b->host) - (a->host < b->host);
}

/* The file's text for s's processes of the last reading (free it). */
static char *monitor_hostpids_text(struct monitor_set *s)
{
    if (s->ngpu_pids > 1)
        qsort(s->gpu_pids, s->ngpu_pids, sizeof(*s->gpu_pids), monitor_gpu_pid_cmp);
    char *text = NULL;
    size_t len = 0, lines = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        xalloc_die(0);
    fputs(RS_CUDA_PIDS_HEADER, f);
    for (size_t i = 0; i < s->ngpu_pids && lines < MONITOR_HOSTPIDS_MAX; i++) {
        if (i > 0 && s->gpu_pids[i].host == s->gpu_pids[i - 1].host)
            continue; /* on two cards */
        fprintf(f, "%d %ld\n", s->gpu_pids[i].host, s->gpu_pids[i].own);
        lines++;
    }
    if (fclose(f) != 0)
        xalloc_die(0);
    return text;
}

void monitor_hostpids_apply(app *a)
{
    struct monitor *m = a->monitor;
    struct monitor_hostpids_todo *todo = NULL;
    size_t n = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->nsets; i++) {
        struct monitor_set *s = &m->sets[i];
        if (!s->any_share || !s->container_name[0])
            continue;
        char *text = monitor_hostpids_text(s);
        if (s->pids_written && strcmp(s->pids_written, text) == 0) {
            free(text);
            continue;
        }
        todo = xrealloc(todo, (n + 1) * sizeof(*todo));
        struct monitor_hostpids_todo *t = &todo[n++];
        snprintf(t->name, sizeof(t->name), "%s", s->name);
        snprintf(t->container_id, sizeof(t->container_id), "%s", s->container_id);
        snprintf(t->container_name, sizeof(t->container_name), "%s", s->container_name);
        t->text = text;
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        struct monitor_hostpids_todo *t = &todo[i];
        gb_err e = GB_ERR_INIT;
        if (replicaset_cuda_pids_write(a, t->container_name, t->text, &e) < 0) {
            /* not remembered: tried again at the next reading */
            log_warn("replica set %s: cannot write the host PIDs for the CUDA limiter: %s", t->name,
                     e.msg);
            free(t->text);
            continue;
        }
        pthread_mutex_lock(&m->lock);
        for (size_t k = 0; k < m->nsets; k++) {
            struct monitor_set *s = &m->sets[k];
            if (strcmp(s->name, t->name) == 0 && strcmp(s->container_id, t->container_id) == 0) {
                free(s->pids_written);
                s->pids_written = t->text;
                t->text = NULL;
                break;
            }
        }
        pthread_mutex_unlock(&m->lock);
        free(t->text);
    }
    free(todo);
}
