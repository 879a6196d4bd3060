/*
 * limits.c - the run limits (replicaset/record.h, docs/usage.md): a set
 * idle for idleStop, or running for maxDuration, is stopped as PATCH
 * .../stop stops it, with the reason kept.
 *
 * Idle means: every card of the set under --idle-threshold percent in the
 * last reading, and no exec since the clock started. Since when a set is
 * idle is written to the store when it starts being idle (keys_idle) and
 * removed when it is busy again, so a restart of gpuboxd resumes the clock
 * instead of starting it over: one write per change, not per reading.
 * maxDuration counts from the record's runningSince, which the record
 * itself keeps.
 */
#include "util/xalloc.h"
#include "service/monitor/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/prom.h"

bool monitor_set_busy(const struct monitor *m, const struct monitor_set *s)
{
    /* Utilization the source cannot tell (MIG instances, nvidia-smi's
     * [N/A]) counts as busy while the set's processes hold memory there:
     * a limit must not stop work it cannot see. */
    for (size_t k = 0; k < s->nuses; k++)
        if (s->uses[k].util >= (int)m->idle_threshold ||
            (s->uses[k].util < 0 && s->uses[k].used_mib > 0))
            return true;
    return false;
}

/* What to do for one set after a reading, decided under the lock. */
struct monitor_act {
    char name[NAME_MAX_LEN + 1];
    char owner[NAME_MAX_LEN + 1];
    time_t idle_write; /* 0: none; -1: delete the key; else the time to keep */
    const char *stop;  /* NULL, "idle" or "maxDuration" */
    char detail[160];
};

static void monitor_decide(struct monitor *m, struct monitor_set *s, time_t now, bool sampling,
                           struct monitor_act *act)
{
    memset(act, 0, sizeof(*act));
    snprintf(act->name, sizeof(act->name), "%s", s->name);
    snprintf(act->owner, sizeof(act->owner), "%s", s->owner);
    if (sampling) {
        time_t since = 0;
        if (!monitor_set_busy(m, s)) {
            since = s->idle_since ? s->idle_since : now;
            if (s->last_exec > since)
                since = s->last_exec;
            if (s->running_since > since)
                since = s->running_since;
        }
        s->idle_since = since;
        if (since != s->idle_persisted)
            act->idle_write = since ? since : -1;
    }
    bool retry = !s->stop_tried || now - s->stop_tried >= 60;
    char took[32];
    if (s->max_duration_s && s->running_since && now >= s->running_since + s->max_duration_s &&
        retry) {
        time_duration_format(s->max_duration_s, took, sizeof(took));
        act->stop = "maxDuration";
        snprintf(act->detail, sizeof(act->detail), "ran for its maximum duration of %s", took);
    } else if (s->idle_stop_s && sampling && s->idle_since &&
               now - s->idle_since >= s->idle_stop_s && retry) {
        time_duration_format(s->idle_stop_s, took, sizeof(took));
        act->stop = "idle";
        snprintf(act->detail, sizeof(act->detail),
                 "idle for %s: every card under %u%% utilization and no exec", took,
                 m->idle_threshold);
    }
    if (act->stop)
        s->stop_tried = now;
}

static void monitor_idle_write(app *a, const struct monitor_act *act)
{
    char key[STORE_KEY_MAX], since[TIME_ISO_MAX] = "";
    gb_err e = GB_ERR_INIT;
    if (!keys_idle(key, sizeof(key), act->name))
        return;
    int rc;
    if (act->idle_write < 0) {
        rc = store_delete(a->store, key, &e);
    } else {
        time_iso_format(act->idle_write, since, sizeof(since));
        _cleanup_json_ json_t *v = json_pack("{s:s}", "idleSince", since);
        _cleanup_free_ char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        rc = text ? store_put(a->store, key, text, NULL, &e) : -1;
    }
    if (rc < 0) {
        log_warn("replica set %s: the idle clock is not kept in the store (%s); a restart now "
                 "would start it over",
                 act->name, e.msg);
        return;
    }
    struct monitor *m = a->monitor;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->nsets; i++)
        if (strcmp(m->sets[i].name, act->name) == 0)
            m->sets[i].idle_persisted = act->idle_write < 0 ? 0 : act->idle_write;
    pthread_mutex_unlock(&m->lock);
}

static void monitor_stop_set(app *a, const struct monitor_act *act)
{
    struct monitor *m = a->monitor;
    _cleanup_json_ json_t *out = NULL;
    gb_err e = GB_ERR_INIT;
    log_info("replica set %s: %s; stopping it (cards and ports released, data kept)", act->name,
             act->detail);
    int rc = m->act && m->act->stop_set
                 ? m->act->stop_set(a, act->name, act->stop, act->detail, &out, &e)
                 : err_set(&e, ERR_INTERNAL, "the monitor was given no way to stop a set");
    log_info("audit: user=gpubox role=system stop %s reason=%s -> %s", act->name, act->stop,
             rc == 0 ? "ok" : e.msg);
    if (rc < 0) {
        log_warn("replica set %s: the %s stop failed: %s; tried again in a minute", act->name,
                 act->stop, e.msg);
        return;
    }
    prom_counter_inc(m->autostops, (const char *const[]){act->stop});
    monitor_event(a, "autostop", act->name, act->owner, NULL, act->stop, act->detail, "gpubox");
    char key[STORE_KEY_MAX];
    if (keys_idle(key, sizeof(key), act->name))
        store_delete(a->store, key, &e);
}

void monitor_limits_apply(app *a, time_t now, bool sampling)
{
    struct monitor *m = a->monitor;
    pthread_mutex_lock(&m->lock);
    size_t n = m->nsets;
    struct monitor_act *acts = xcalloc(n ? n : 1, sizeof(*acts));
    bool idle_limits = false;
    for (size_t i = 0; i < n; i++) {
        monitor_decide(m, &m->sets[i], now, sampling, &acts[i]);
        idle_limits |= m->sets[i].idle_stop_s != 0;
    }
    bool warn = idle_limits && !sampling && !m->sampler && !m->warned_no_idle;
    m->warned_no_idle |= warn;
    pthread_mutex_unlock(&m->lock);
    if (warn)
        log_warn("usage monitor: replica sets have idleStop, but --usage-interval 0 turned "
                 "sampling off: they are not stopped when idle");
    for (size_t i = 0; i < n; i++) {
        if (acts[i].stop)
            monitor_stop_set(a, &acts[i]);
        else if (acts[i].idle_write)
            monitor_idle_write(a, &acts[i]);
    }
    free(acts);
}
