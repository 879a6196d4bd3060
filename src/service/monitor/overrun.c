/*
 * overrun.c - the second line of defence behind the CUDA limiter: what a
 * replica set's processes use on a card, as NVML reports it per process
 * (the reading of monitor.c), against the memory share it holds there. A
 * static binary, a program that bypassed the library, or context memory
 * the library does not count can take a container past its share; the
 * monitor sees it in the next reading.
 *
 * Going over (a card whose use was under its share in the reading before)
 * is reported once: an event "share.overrun" in the event log, the counter
 * gpubox_share_overruns_total and a log line; while it stays over, the
 * set's usage says overShare on that card and the gauge
 * gpubox_instance_gpu_share_overrun is 1. With --share-overrun kill, each
 * reading that finds the set over kills its largest process on that card
 * (SIGKILL, after checking that the PID still runs in the set's container:
 * a PID the kernel gave to another process since the reading is left
 * alone), with an event "share.overrun" of reason "kill". Whole cards are
 * never judged: their share is the card.
 */
#include "util/xalloc.h"
#include "service/monitor/internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/proc.h"
#include "util/prom.h"

struct monitor_overrun {
    char name[NAME_MAX_LEN + 1];
    char owner[NAME_MAX_LEN + 1];
    char container_id[80];
    char uuid[GPU_UUID_MAX];
    uint64_t used_mib, share_mib, top_mib;
    int top_pid;
    bool report; /* it went over since the last reading */
    bool kill;   /* kill top_pid */
};

/* Kill pid when it still runs in the container; true when it was killed. */
static bool monitor_overrun_kill(const struct monitor_overrun *o, char *why, size_t size)
{
    char id[PROC_CONTAINER_ID_LEN + 1];
    if (o->top_pid <= 0 || !proc_container_id(o->top_pid, id) || strcmp(id, o->container_id) != 0) {
        snprintf(why, size, "process %d no longer runs in its container", o->top_pid);
        return false;
    }
    if (kill(o->top_pid, SIGKILL) < 0) {
        snprintf(why, size, "cannot kill process %d: %s", o->top_pid, strerror(errno));
        return false;
    }
    return true;
}

void monitor_overrun_apply(app *a)
{
    struct monitor *m = a->monitor;
    bool kill_mode = a->cfg.share_overrun_kill;
    pthread_mutex_lock(&m->lock);
    size_t n = 0, cap = 0;
    struct monitor_overrun *todo = NULL;
    for (size_t i = 0; i < m->nsets; i++) {
        struct monitor_set *s = &m->sets[i];
        for (size_t k = 0; k < s->nuses; k++) {
            struct monitor_use *u = &s->uses[k];
            bool over = u->share && m->cards[u->dev].sampled && u->used_mib > u->share_mib;
            bool report = over && !u->over;
            bool kill_now = over && kill_mode && u->top_pid > 0 && u->top_pid != u->killed_pid;
            u->over = over;
            if (!report && !kill_now)
                continue;
            if (kill_now)
                u->killed_pid = u->top_pid;
            if (n == cap) {
                cap = cap ? cap * 2 : 4;
                todo = xrealloc(todo, cap * sizeof(*todo));
            }
            struct monitor_overrun *o = &todo[n++];
            memset(o, 0, sizeof(*o));
            snprintf(o->name, sizeof(o->name), "%s", s->name);
            snprintf(o->owner, sizeof(o->owner), "%s", s->owner);
            snprintf(o->container_id, sizeof(o->container_id), "%s", s->container_id);
            snprintf(o->uuid, sizeof(o->uuid), "%s", u->uuid);
            o->used_mib = u->used_mib;
            o->share_mib = u->share_mib;
            o->top_pid = u->top_pid;
            o->top_mib = u->top_mib;
            o->report = report;
            o->kill = kill_now;
        }
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        const struct monitor_overrun *o = &todo[i];
        char detail[256];
        if (o->report) {
            snprintf(detail, sizeof(detail),
                     "its processes use %llu MiB of its %llu MiB share on the card (NVML's "
                     "per-process memory); the largest, process %d, uses %llu MiB",
                     (unsigned long long)o->used_mib, (unsigned long long)o->share_mib, o->top_pid,
                     (unsigned long long)o->top_mib);
            log_warn("replica set %s: over its share on GPU %s: %s", o->name, o->uuid, detail);
            prom_counter_inc(m->overruns, (const char *const[]){"report"});
            monitor_event(a, "share.overrun", o->name, o->owner, o->uuid, "report", detail,
                          "gpubox");
        }
        if (!o->kill)
            continue;
        char why[160];
        if (!monitor_overrun_kill(o, why, sizeof(why))) {
            log_warn("replica set %s: --share-overrun kill on GPU %s: %s", o->name, o->uuid, why);
            continue;
        }
        snprintf(detail, sizeof(detail),
                 "killed process %d (%llu MiB), its largest on the card: its processes used "
                 "%llu MiB of its %llu MiB share (--share-overrun kill)",
                 o->top_pid, (unsigned long long)o->top_mib, (unsigned long long)o->used_mib,
                 (unsigned long long)o->share_mib);
        log_warn("replica set %s: GPU %s: %s", o->name, o->uuid, detail);
        log_info("audit: user=gpubox role=system kill %s pid=%d reason=share-overrun -> ok",
                 o->name, o->top_pid);
        prom_counter_inc(m->overruns, (const char *const[]){"kill"});
        monitor_event(a, "share.overrun", o->name, o->owner, o->uuid, "kill", detail, "gpubox");
    }
    free(todo);
}
