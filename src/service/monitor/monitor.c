/*
 * monitor.c - the monitor's thread: read the cards, find whose processes
 * they run, keep the reading for the answers, then act on it (health.c,
 * limits.c). monitor.h says what it does; internal.h how it is kept.
 */
#include "util/xalloc.h"
#include "service/monitor/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/gpus.h"
#include "service/keys.h"
#include "service/replicaset/record.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/prom.h"

/* The tracked sets are read from the store again when a record changed
 * (app's records generation), and at least this often. */
#define MON_SETS_RELOAD_MS 10000

long monitor_device_index(const app *a, const char *uuid)
{
    for (size_t i = 0; uuid && i < a->gpus.n; i++)
        if (strcmp(a->gpus.devices[i].uuid, uuid) == 0)
            return (long)i;
    return -1;
}

void monitor_sets_free(struct monitor_set *sets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(sets[i].uses);
        free(sets[i].gpu_pids);
        free(sets[i].pids_written);
    }
    free(sets);
}

int monitor_parse_xids(const char *list, uint8_t *bits, gb_err *err)
{
    memset(bits, 0, MONITOR_XID_LIMIT / 8);
    for (const char *p = list ? list : ""; *p;) {
        p += strspn(p, " ,");
        if (!*p)
            break;
        char *end = NULL;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x >= MONITOR_XID_LIMIT ||
            (*end && *end != ',' && *end != ' '))
            return err_set(err, ERR_INVALID_PARAMS,
                           "--xid-critical: '%.*s' is not an XID; give numbers from 1 to %d, "
                           "as in 48,63,79",
                           (int)strcspn(p, ","), p, MONITOR_XID_LIMIT - 1);
        bits[x / 8] |= (uint8_t)(1u << (x % 8));
        p = end;
    }
    return 0;
}

/* ---- the tracked sets ---- */

struct monitor_load {
    app *a;
    struct monitor_set *sets;
    size_t n, cap;
};

static int monitor_load_one(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    struct monitor_load *l = ctx;
    if (r->state != RS_STATE_RUNNING && r->state != RS_STATE_PAUSED)
        return 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->sets = xrealloc(l->sets, l->cap * sizeof(*l->sets));
    }
    struct monitor_set *s = &l->sets[l->n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", r->name);
    snprintf(s->owner, sizeof(s->owner), "%s", r->owner);
    snprintf(s->container_id, sizeof(s->container_id), "%s", r->container_id);
    snprintf(s->container_name, sizeof(s->container_name), "%s", r->container_name);
    s->paused = r->state == RS_STATE_PAUSED;
    s->idle_stop_s = r->idle_stop_s;
    s->max_duration_s = r->max_duration_s;
    s->running_since = time_iso_parse(r->running_since);
    s->uses = xcalloc(r->ngpus ? r->ngpus : 1, sizeof(*s->uses));
    for (size_t i = 0; i < r->ngpus; i++) {
        long dev = monitor_device_index(l->a, r->gpus[i]);
        if (dev < 0)
            continue;
        struct monitor_use *u = &s->uses[s->nuses++];
        snprintf(u->uuid, sizeof(u->uuid), "%s", r->gpus[i]);
        u->dev = (size_t)dev;
        bool share = r->grant.n == r->ngpus && r->grant.cards[i].mode != GPUS_MODE_WHOLE;
        u->share_mib = share ? r->grant.cards[i].memory_mib : l->a->gpus.devices[dev].memory_mib;
        u->share = share;
        u->util = -1;
        s->any_share = s->any_share || share;
    }
    return 0;
}

/* Since when each set is idle, as the store keeps it (limits.c writes it). */
static void monitor_load_idle(app *a, struct monitor_set *sets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char key[STORE_KEY_MAX];
        _cleanup_json_ json_t *v = NULL;
        gb_err e = GB_ERR_INIT;
        if (!keys_idle(key, sizeof(key), sets[i].name) ||
            records_get_json(a->store, key, "idle clock", &v, NULL, &e) <= 0)
            continue;
        time_t t = time_iso_parse(json_string_value(json_object_get(v, "idleSince")));
        sets[i].idle_since = sets[i].idle_persisted = t;
    }
}

/* Read the running sets again, keeping what the monitor knew of each. */
static void monitor_reload_sets(app *a, bool first)
{
    struct monitor *m = a->monitor;
    struct monitor_load l = {.a = a};
    uint64_t gen = __atomic_load_n(&a->records_generation, __ATOMIC_ACQUIRE);
    gb_err e = GB_ERR_INIT;
    if (replicaset_records_each(a->store, monitor_load_one, &l, &e) < 0) {
        log_warn("usage monitor: cannot read the replica sets: %s", e.msg);
        monitor_sets_free(l.sets, l.n);
        return;
    }
    if (first)
        monitor_load_idle(a, l.sets, l.n);
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < l.n; i++)
        for (size_t k = 0; !first && k < m->nsets; k++) {
            const struct monitor_set *old = &m->sets[k];
            if (strcmp(old->name, l.sets[i].name) ||
                strcmp(old->container_id, l.sets[i].container_id))
                continue;
            l.sets[i].idle_since = old->idle_since;
            l.sets[i].idle_persisted = old->idle_persisted;
            l.sets[i].last_exec = old->last_exec;
            l.sets[i].stop_tried = old->stop_tried;
            l.sets[i].pids_written = old->pids_written ? xstrdup(old->pids_written) : NULL;
            for (size_t u = 0; u < l.sets[i].nuses; u++)
                for (size_t v = 0; v < old->nuses; v++)
                    if (strcmp(l.sets[i].uses[u].uuid, old->uses[v].uuid) == 0) {
                        l.sets[i].uses[u].over = old->uses[v].over;
                        l.sets[i].uses[u].killed_pid = old->uses[v].killed_pid;
                    }
        }
    monitor_sets_free(m->sets, m->nsets);
    m->sets = l.sets;
    m->nsets = l.n;
    m->records_seen = gen;
    m->sets_loaded_ms = time_mono_ms();
    pthread_mutex_unlock(&m->lock);
}

/* ---- one reading ---- */

/* PIDs and the containers they run in, kept between readings: /proc is
 * read once for each new PID. */
struct monitor_pids {
    int *pid;
    char (*id)[PROC_CONTAINER_ID_LEN + 1]; /* "" for none */
    long *ns;                              /* its PID in its container (NSpid's last); 0: unknown */
    size_t n;
};

/* The container pid runs in ("" for none) and its PID there (*ns). */
static const char *monitor_container_of(struct monitor_pids *cache, struct monitor_pids *next,
                                        int pid, long *ns)
{
    for (size_t i = 0; i < next->n; i++)
        if (next->pid[i] == pid) {
            *ns = next->ns[i];
            return next->id[i];
        }
    next->pid = xrealloc(next->pid, (next->n + 1) * sizeof(*next->pid));
    next->id = xrealloc(next->id, (next->n + 1) * sizeof(*next->id));
    next->ns = xrealloc(next->ns, (next->n + 1) * sizeof(*next->ns));
    size_t at = next->n++;
    next->pid[at] = pid;
    for (size_t i = 0; i < cache->n; i++)
        if (cache->pid[i] == pid) {
            memcpy(next->id[at], cache->id[i], sizeof(next->id[at]));
            *ns = next->ns[at] = cache->ns[i];
            return next->id[at];
        }
    proc_signals sig;
    if (!proc_container_id(pid, next->id[at]))
        next->id[at][0] = '\0';
    next->ns[at] = next->id[at][0] && proc_signals_of(pid, &sig) == 0 ? sig.ns_pid : 0;
    *ns = next->ns[at];
    return next->id[at];
}

static void monitor_pids_free(struct monitor_pids *p)
{
    free(p->pid);
    free(p->id);
    free(p->ns);
    memset(p, 0, sizeof(*p));
}

/* The set whose container has this id (a full id; records keep the full
 * one), or NULL. */
static struct monitor_set *monitor_set_of(struct monitor *m, const char *id)
{
    for (size_t i = 0; id[0] && i < m->nsets; i++)
        if (strcmp(m->sets[i].container_id, id) == 0)
            return &m->sets[i];
    return NULL;
}

/* Fill the cards and the sets' uses from u; with the lock held. */
static void monitor_account(struct monitor *m, const gpu_usage *u, struct monitor_pids *cache,
                            struct monitor_pids *next)
{
    for (size_t i = 0; i < m->nsets; i++) {
        m->sets[i].ngpu_pids = 0;
        for (size_t k = 0; k < m->sets[i].nuses; k++) {
            m->sets[i].uses[k].used_mib = 0;
            m->sets[i].uses[k].util = -1;
            m->sets[i].uses[k].top_pid = 0;
            m->sets[i].uses[k].top_mib = 0;
        }
    }
    for (size_t i = 0; i < m->ncards && i < u->ncards; i++)
        m->cards[i] = (struct monitor_card){.sampled = true,
                                            .present = u->cards[i].present,
                                            .used_mib = u->cards[i].memory_used_mib,
                                            .util = u->cards[i].utilization};
    for (size_t p = 0; p < u->nprocs; p++) {
        const gpu_proc_usage *pr = &u->procs[p];
        long dev = monitor_device_index(m->a, pr->uuid);
        if (dev < 0 || (size_t)dev >= m->ncards)
            continue;
        m->cards[dev].nprocs++;
        long ns = 0;
        struct monitor_set *s = monitor_set_of(m, monitor_container_of(cache, next, pr->pid, &ns));
        struct monitor_use *use = NULL;
        for (size_t k = 0; s && k < s->nuses; k++)
            if (s->uses[k].dev == (size_t)dev)
                use = &s->uses[k];
        if (!use) { /* in no container of a set holding this card: foreign */
            m->cards[dev].foreign_mib += pr->memory_mib;
            continue;
        }
        use->used_mib += pr->memory_mib;
        if (use->share && ns > 0) {
            s->gpu_pids = xrealloc(s->gpu_pids, (s->ngpu_pids + 1) * sizeof(*s->gpu_pids));
            s->gpu_pids[s->ngpu_pids++] = (struct monitor_gpu_pid){.host = pr->pid, .own = ns};
        }
        if (pr->memory_mib > use->top_mib || !use->top_pid) {
            use->top_pid = pr->pid;
            use->top_mib = pr->memory_mib;
        }
        if (pr->utilization >= 0)
            use->util = (use->util < 0 ? 0 : use->util) + pr->utilization;
    }
    /* Without process samples, a set's utilization on a card is the
     * card's: exact for a whole card, an upper bound for a share. */
    for (size_t i = 0; i < m->nsets; i++)
        for (size_t k = 0; k < m->sets[i].nuses; k++) {
            struct monitor_use *use = &m->sets[i].uses[k];
            if (use->util < 0)
                use->util = m->cards[use->dev].util;
            if (use->util > 100)
                use->util = 100;
        }
}

/* Health from the reading: XIDs on the critical list, cards gone. */
static void monitor_health_from(app *a, const gpu_usage *u)
{
    struct monitor *m = a->monitor;
    for (size_t i = 0; i < u->nxids; i++) {
        const gpu_xid *x = &u->xids[i];
        long dev = monitor_device_index(a, x->uuid);
        char index[16], xid[24];
        snprintf(index, sizeof(index), "%d", dev >= 0 ? a->gpus.devices[dev].index : -1);
        snprintf(xid, sizeof(xid), "%llu", x->xid);
        prom_counter_inc(m->xid_events, (const char *const[]){x->uuid, index, xid});
        bool critical = x->xid < MONITOR_XID_LIMIT && (m->xids[x->xid / 8] & (1u << (x->xid % 8)));
        log_warn("GPU %s: XID %llu%s", x->uuid, x->xid,
                 critical ? " (critical: the card takes no new tenant until an admin clears it)"
                          : " (not on --xid-critical: noted only)");
        if (critical && dev >= 0) {
            char detail[96];
            snprintf(detail, sizeof(detail), "XID %llu reported by the driver", x->xid);
            monitor_health_mark(a, (size_t)dev, "xid", x->xid, detail);
            /* The card's MIG instances go with it. */
            for (size_t k = 0; k < a->gpus.n; k++)
                if (a->gpus.devices[k].is_mig &&
                    strcmp(a->gpus.devices[k].parent_uuid, x->uuid) == 0)
                    monitor_health_mark(a, k, "xid", x->xid, detail);
        }
    }
    for (size_t i = 0; i < u->ncards && i < a->gpus.n; i++) {
        if (u->cards[i].present)
            continue;
        pthread_mutex_lock(&m->lock);
        bool marked = m->marks[i].marked;
        pthread_mutex_unlock(&m->lock);
        if (!marked) {
            char detail[160];
            snprintf(detail, sizeof(detail), "the card stopped answering: %s", u->cards[i].problem);
            monitor_health_mark(a, i, "lost", 0, detail);
        }
    }
}

static void monitor_tick(app *a, struct monitor_pids *cache)
{
    struct monitor *m = a->monitor;
    uint64_t gen = __atomic_load_n(&a->records_generation, __ATOMIC_ACQUIRE);
    if (gen != m->records_seen || time_mono_ms() - m->sets_loaded_ms >= MON_SETS_RELOAD_MS)
        monitor_reload_sets(a, false);
    gpu_usage u = {0};
    bool sampled = false;
    if (m->sampler) {
        int64_t t0 = time_mono_ns();
        gb_err e = GB_ERR_INIT;
        sampled = gpu_sampler_read(m->sampler, &u, &e) == 0;
        if (!sampled)
            log_warn("usage monitor: reading the GPUs failed: %s", e.msg);
        m->sample_seconds = time_since_s(t0);
    }
    if (sampled) {
        struct monitor_pids next = {0};
        pthread_mutex_lock(&m->lock);
        monitor_account(m, &u, cache, &next);
        time_iso_now(m->sampled_at, sizeof(m->sampled_at));
        m->samples++;
        m->generation++;
        uint64_t *foreign = xcalloc(m->ncards ? m->ncards : 1, sizeof(*foreign));
        for (size_t i = 0; i < m->ncards; i++)
            foreign[i] = m->cards[i].foreign_mib;
        pthread_mutex_unlock(&m->lock);
        monitor_pids_free(cache);
        *cache = next;
        for (size_t i = 0; i < m->ncards; i++)
            gpus_pool_set_foreign(a->gpu_pool, a->gpus.devices[i].uuid, foreign[i]);
        free(foreign);
        monitor_health_from(a, &u);
        monitor_overrun_apply(a);
        monitor_hostpids_apply(a);
    }
    gpu_usage_free(&u);
    monitor_limits_apply(a, time(NULL), sampled);
}

static void *monitor_thread(void *arg)
{
    app *a = arg;
    struct monitor *m = a->monitor;
    struct monitor_pids cache = {0};
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->lock);
        monitor_tick(a, &cache);
        pthread_mutex_lock(&m->lock);
        if (m->stopping)
            break;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t ns = until.tv_nsec + (m->interval_ms % 1000) * 1000000;
        until.tv_sec += m->interval_ms / 1000 + ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&m->wake, &m->lock, &until);
    }
    pthread_mutex_unlock(&m->lock);
    monitor_pids_free(&cache);
    return NULL;
}

int monitor_start(app *a, const monitor_actions *act, gb_err *err)
{
    struct monitor *m = xcalloc(1, sizeof(*m));
    m->act = act;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, &attr);
    pthread_condattr_destroy(&attr);
    m->a = a;
    a->monitor = m;
    m->ncards = a->gpus.n;
    m->cards = xcalloc(m->ncards ? m->ncards : 1, sizeof(*m->cards));
    m->marks = xcalloc(m->ncards ? m->ncards : 1, sizeof(*m->marks));
    m->idle_threshold = a->cfg.idle_threshold;
    m->xid_events = prom_counter_new("gpubox_gpu_xid_events_total",
                                     "XID error events the driver reported, by card and XID",
                                     (const char *const[]){"uuid", "index", "xid", NULL});
    m->autostops = prom_counter_new("gpubox_instance_autostops_total",
                                    "Replica sets gpubox stopped by their run limits",
                                    (const char *const[]){"reason", NULL});
    m->overruns = prom_counter_new(
        "gpubox_share_overruns_total",
        "Times a replica set's processes went over its memory share on a card (NVML's "
        "per-process memory), by what gpubox did: report, or kill (--share-overrun)",
        (const char *const[]){"action", NULL});
    const char *xids = a->cfg.xid_critical ? a->cfg.xid_critical : MONITOR_XID_DEFAULT;
    if (monitor_parse_xids(xids, m->xids, err) < 0 || monitor_health_load(a, err) < 0)
        return -1;
    double interval = a->cfg.usage_interval_s;
    bool sampling = interval > 0;
    m->interval_ms = sampling ? (int64_t)(interval * 1000 + 0.5) : 1000;
    gpu_config cfg = {.nvml_library = a->cfg.nvml_library, .nvidia_smi = a->cfg.nvidia_smi};
    gb_err why = GB_ERR_INIT;
    if (sampling && gpu_sampler_open(&cfg, &a->gpus, &m->sampler, &why) < 0) {
        /* The cards were found, so gpuboxd serves them; it only cannot
         * watch them. */
        log_warn("usage monitor: cannot read the GPUs' usage (%s); running without live usage, "
                 "health checks and idleStop",
                 why.msg);
        sampling = false;
        m->interval_ms = 1000;
    }
    monitor_reload_sets(a, true);
    int rc = pthread_create(&m->thread, NULL, monitor_thread, a);
    if (rc != 0)
        return err_set(err, ERR_INTERNAL, "cannot start the usage monitor's thread: %s",
                       strerror(rc));
    m->started = true;
    if (sampling)
        log_info("usage monitor: sampling every %g s from %s; idle under %u%%; critical XIDs %s",
                 interval, a->gpus.source, m->idle_threshold, xids);
    else
        log_info("usage monitor: no sampling; maxDuration checked every 1 s");
    return 0;
}

void monitor_stop(app *a)
{
    struct monitor *m = a->monitor;
    if (!m)
        return;
    if (m->started) {
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->thread, NULL);
    }
    gpu_sampler_close(m->sampler);
    monitor_sets_free(m->sets, m->nsets);
    free(m->cards);
    free(m->marks);
    prom_family_free(m->xid_events);
    prom_family_free(m->autostops);
    prom_family_free(m->overruns);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    free(m);
    a->monitor = NULL;
}

uint64_t monitor_generation(app *a)
{
    struct monitor *m = a->monitor;
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    uint64_t g = m->generation;
    pthread_mutex_unlock(&m->lock);
    return g;
}

void monitor_note_exec(app *a, const char *name)
{
    struct monitor *m = a->monitor;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->nsets; i++)
        if (strcmp(m->sets[i].name, name) == 0)
            m->sets[i].last_exec = time(NULL);
    pthread_mutex_unlock(&m->lock);
}
