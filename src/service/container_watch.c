/*
 * container_watch.c - the cache of Docker's container states, kept by
 * Docker's event stream (container_watch.h says how and why).
 */
#include "util/xalloc.h"
#include "service/container_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "docker/docker.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* Events are replayed from this long before the list, so none that happen
 * while the list is made is missed. */
#define CW_REPLAY_S 2
/* After a failed list or a broken stream, wait this long before the next. */
#define CW_RETRY_MS 1000
/* The recent changes kept before old ones are dropped. */
#define CW_RECENT_MAX 256

struct container_watch {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    app *a;
    bool valid;     /* states mirrors Docker: listed, and the stream since followed */
    json_t *states; /* {container name: status} */
    json_t *recent; /* {name or id: time_mono_ms of gpuboxd's own change} */
};

/* Docker's status after a container event, NULL when the event does not
 * change it, "" when the container is gone. */
static const char *cw_status_after(const char *action)
{
    static const struct {
        const char *action, *status;
    } moves[] = {
        {"create", "created"}, {"start", "running"}, {"restart", "running"}, {"unpause", "running"},
        {"pause", "paused"},   {"die", "exited"},    {"destroy", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(moves); i++)
        if (strcmp(action, moves[i].action) == 0)
            return moves[i].status;
    return NULL;
}

static bool cw_event(void *ctx, const docker_container_event *ev)
{
    struct container_watch *w = ctx;
    if (!ev->name)
        return !atomic_load(&w->stopping);
    pthread_mutex_lock(&w->lock);
    if (strcmp(ev->action, "rename") == 0 && ev->old_name) {
        json_t *old = json_incref(json_object_get(w->states, ev->old_name));
        json_object_del(w->states, ev->old_name);
        json_object_set_new(w->states, ev->name, old ? old : json_string("created"));
    } else {
        const char *status = cw_status_after(ev->action);
        if (status && *status)
            json_object_set_new(w->states, ev->name, json_string(status));
        else if (status)
            json_object_del(w->states, ev->name);
    }
    pthread_mutex_unlock(&w->lock);
    return !atomic_load(&w->stopping);
}

/* List gpubox's containers into the cache; -1 when Docker did not answer. */
static int cw_list(struct container_watch *w, gb_err *err)
{
    _cleanup_(docker_container_briefs_free) docker_container_briefs list = {0};
    if (docker_container_list_briefs(w->a->docker, DOCKER_LABEL_REPLICASET, NULL, &list, err) < 0)
        return -1;
    json_t *states = json_object();
    for (size_t i = 0; i < list.n; i++)
        if (list.items[i].name && list.items[i].status)
            json_object_set_new(states, list.items[i].name, json_string(list.items[i].status));
    pthread_mutex_lock(&w->lock);
    json_decref(w->states);
    w->states = states;
    w->valid = true;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static size_t cw_count(struct container_watch *w)
{
    pthread_mutex_lock(&w->lock);
    size_t n = json_object_size(w->states);
    pthread_mutex_unlock(&w->lock);
    return n;
}

static void cw_invalidate(struct container_watch *w)
{
    pthread_mutex_lock(&w->lock);
    w->valid = false;
    pthread_mutex_unlock(&w->lock);
}

/* Sleep up to ms, or until stopped. */
static void cw_pause(struct container_watch *w, int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ns = until.tv_nsec + (ms % 1000) * 1000000;
    until.tv_sec += ms / 1000 + ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&w->lock);
    if (!atomic_load(&w->stopping))
        pthread_cond_timedwait(&w->wake, &w->lock, &until);
    pthread_mutex_unlock(&w->lock);
}

static void *cw_thread(void *arg)
{
    struct container_watch *w = arg;
    bool warned = false, followed = false;
    while (!atomic_load(&w->stopping)) {
        gb_err e = GB_ERR_INIT;
        int64_t since = (int64_t)time(NULL) - CW_REPLAY_S;
        if (cw_list(w, &e) < 0) {
            if (!warned)
                log_warn("container cache: cannot list the containers (%s); the replica-set list "
                         "asks Docker itself until it can",
                         e.msg);
            warned = true;
            cw_pause(w, CW_RETRY_MS);
            continue;
        }
        if (warned || !followed)
            log_info("container cache: %zu container(s) listed; following Docker's events%s",
                     cw_count(w), followed ? " again" : "");
        warned = false;
        followed = true;
        int rc = docker_container_events(w->a->docker, DOCKER_LABEL_REPLICASET, since, &w->stopping,
                                         cw_event, w, &e);
        cw_invalidate(w);
        if (atomic_load(&w->stopping))
            break;
        log_warn("container cache: Docker's event stream %s; listing the containers again",
                 rc < 0 ? e.msg : "ended");
        warned = rc < 0;
        cw_pause(w, CW_RETRY_MS);
    }
    return NULL;
}

/* The docker client's change observer: gpuboxd changed a container. */
static void cw_changed(void *ctx, const char *id_or_name)
{
    struct container_watch *w = ctx;
    int64_t now = time_mono_ms();
    pthread_mutex_lock(&w->lock);
    if (json_object_size(w->recent) >= CW_RECENT_MAX) {
        const char *key;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(w->recent, tmp, key, v)
        {
            if (now - json_integer_value(v) > CONTAINER_WATCH_FRESH_MS)
                json_object_del(w->recent, key);
        }
    }
    json_object_set_new(w->recent, id_or_name, json_integer(now));
    pthread_mutex_unlock(&w->lock);
}

void container_watch_start(app *a)
{
    struct container_watch *w = xcalloc(1, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &attr);
    pthread_condattr_destroy(&attr);
    w->a = a;
    w->states = json_object();
    w->recent = json_object();
    a->containers = w;
    docker_client_on_change(a->docker, cw_changed, w);
    int rc = pthread_create(&w->thread, NULL, cw_thread, w);
    if (rc != 0)
        log_warn("container cache: cannot start its thread (%s); the replica-set list asks Docker "
                 "itself",
                 strerror(rc));
    w->started = rc == 0;
}

void container_watch_stop(app *a)
{
    struct container_watch *w = a->containers;
    if (!w)
        return;
    if (w->started) {
        pthread_mutex_lock(&w->lock);
        atomic_store(&w->stopping, true);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
    }
    docker_client_on_change(a->docker, NULL, NULL);
    json_decref(w->states);
    json_decref(w->recent);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    a->containers = NULL;
}

int container_watch_states(app *a, json_t **out)
{
    struct container_watch *w = a->containers;
    *out = NULL;
    if (!w)
        return -1;
    pthread_mutex_lock(&w->lock);
    if (w->valid)
        *out = json_deep_copy(w->states);
    pthread_mutex_unlock(&w->lock);
    return *out ? 0 : -1;
}

bool container_watch_recent(app *a, const char *name, const char *id)
{
    struct container_watch *w = a->containers;
    if (!w)
        return false;
    int64_t now = time_mono_ms();
    bool recent = false;
    pthread_mutex_lock(&w->lock);
    const char *keys[] = {name, id};
    for (size_t i = 0; i < 2 && !recent; i++) {
        json_t *t = keys[i] && *keys[i] ? json_object_get(w->recent, keys[i]) : NULL;
        recent = t && now - json_integer_value(t) <= CONTAINER_WATCH_FRESH_MS;
    }
    pthread_mutex_unlock(&w->lock);
    return recent;
}
