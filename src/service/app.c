/*
 * app.c - start-up and shutdown of the application context.
 *
 * Start-up is a fixed sequence (app.h), each step logging one clean line so
 * an operator reading the first screen of the log knows what gpuboxd found:
 * which store (and that this daemon holds it alone), which Docker, which
 * GPUs and from where. Simulated GPUs get a
 * banner nobody can miss: everything else about the host is real.
 */
#include "util/xalloc.h"
#include "service/app.h"
#include "service/container_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fleet/fleet.h"
#include "sched/cpus.h"
#include "sched/gpus.h"
#include "service/cores.h"
#include "service/engine.h"
#include "service/nodes/nodes.h"
#include "service/images/images.h"
#include "service/metrics.h"
#include "service/queue/queue.h"
#include "service/monitor/monitor.h"
#include "service/service.h"
#include "service/namelock.h"
#include "service/replicaset/replicaset.h"
#include "service/replicaset/doubt.h"
#include "service/volumes/volumes.h"
#include "service/users/users.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* mkdir -p, one component at a time. */
static int app_make_dir(const char *dir, gb_err *err)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return err_set(err, ERR_INVALID_PARAMS, "data dir path is too long: %s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return err_set(err, ERR_INVALID_PARAMS,
                           "cannot create data dir %s: %s (choose "
                           "another --data-dir)",
                           path, strerror(errno));
        *p = saved;
        if (!saved)
            break;
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_set(err, ERR_INVALID_PARAMS, "data dir %s is not a directory", dir);
    return 0;
}

bool app_stop_requested(const app_config *cfg)
{
    sigset_t pending;
    if (!cfg->stop_signals || sigpending(&pending) < 0)
        return false;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(cfg->stop_signals, sig) == 1 && sigismember(&pending, sig) == 1)
            return true;
    return false;
}

/* Sleep ms, in steps short enough that a stop signal ends the wait at once:
 * -1 when one is pending. */
static int app_pause(const app *a, unsigned ms)
{
    for (unsigned slept = 0;; slept += 100) {
        if (app_stop_requested(&a->cfg))
            return -1;
        if (slept >= ms)
            return 0;
        struct timespec step = {.tv_nsec = 100 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
}

/* Open the store and read its revision once, so that a store that cannot be
 * reached shows now. A remote store (etcd) may come up after gpuboxd, as
 * Docker may: it is retried every second for store_wait_s, with a line in
 * the log at the first failure and every 10 s. An embedded one is not:
 * its errors (a path, permissions, a foreign file) do not pass by waiting. */
static int app_open_store(app *a, gb_err *err)
{
    const char *url = a->cfg.store_url;
    _cleanup_free_ char *shown = store_url_redact(url);
    const char *where = strstr(shown, "://") ? strstr(shown, "://") + 3 : shown;
    bool remote = store_url_is_remote(url);
    int64_t start = time_mono_ns();
    for (unsigned attempt = 0;; attempt++) {
        gb_err e = GB_ERR_INIT;
        int64_t rev = 0;
        if (store_open(url, &a->store, &e) == 0) {
            if (store_revision(a->store, &rev, &e) == 0) {
                log_info("store: %s at %s (revision %lld)%s", store_backend_name(a->store), where,
                         (long long)rev, attempt ? ", answering now" : "");
                return 0;
            }
            store_close(a->store);
            a->store = NULL;
        }
        *err = e;
        if (!remote || e.code != ERR_STORE_UNAVAILABLE)
            return err_prefix(err, "opening the store");
        unsigned waited = (unsigned)time_since_s(start);
        if (waited >= a->cfg.store_wait_s)
            return err_prefix(err, "the store did not answer within %us (--store-wait)",
                              a->cfg.store_wait_s);
        if (attempt % 10 == 0)
            log_warn("store: %s; retrying in 1 s (waiting up to %us, --store-wait)", e.msg,
                     a->cfg.store_wait_s);
        if (app_pause(a, 1000) < 0)
            return err_set(err, ERR_STORE_UNAVAILABLE, "stopped while waiting for the store at %s",
                           where);
    }
}

/* One daemon per store: claim it before anything reads the state to act
 * on it. The holder of an etcd store may be a daemon that is gone without
 * releasing it (its host went down): its lease then expires within
 * STORE_CLAIM_TTL_S, so an etcd claim is tried again every second for
 * store_wait_s, as is one that etcd did not answer. The holder of a SQLite
 * store is alive (the kernel frees its lock with it): refused at once. */
static int app_claim_store(app *a, gb_err *err)
{
    store_owner me;
    if (store_owner_self("gpuboxd", &me, err) < 0)
        return err_prefix(err, "claiming the store");
    bool remote = store_url_is_remote(a->cfg.store_url);
    int64_t start = time_mono_ns();
    for (unsigned attempt = 0;; attempt++) {
        gb_err e = GB_ERR_INIT;
        if (store_claim(a->store, &me, STORE_CLAIM_TTL_S, NULL, &e) == 0) {
            char where[STORE_KEY_MAX + 160];
            store_claim_describe(a->store, where, sizeof(where));
            log_info("store: claimed for this gpuboxd (pid %ld): %s%s", me.pid, where,
                     attempt ? ", after waiting for the other holder" : "");
            return 0;
        }
        *err = e;
        bool passes = e.code == ERR_CONFLICT || e.code == ERR_STORE_UNAVAILABLE;
        if (!remote || !passes)
            return err_prefix(err, "claiming the store");
        unsigned waited = (unsigned)time_since_s(start);
        if (waited >= a->cfg.store_wait_s)
            return err_prefix(err, "the store was not free within %us (--store-wait)",
                              a->cfg.store_wait_s);
        if (attempt % 10 == 0)
            log_warn("store: %s; trying again every second (waiting up to %us, --store-wait)",
                     e.msg, a->cfg.store_wait_s);
        if (app_pause(a, 1000) < 0)
            return err_set(err, ERR_STORE_UNAVAILABLE, "stopped while waiting to claim the store");
    }
}

static void copy_json_string(char *dst, size_t size, json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    snprintf(dst, size, "%s", s ? s : "unknown");
}

/* Docker may still be starting (both started by the same boot): retry the
 * ping for docker_wait_s before giving up with a message that says where. */
static int app_connect_docker(app *a, gb_err *err)
{
    if (!(a->docker = docker_client_new(a->cfg.docker_host, err)))
        return err_prefix(err, "--docker-host %s", a->cfg.docker_host);
    int64_t start = time_mono_ns();
    for (unsigned attempt = 0;; attempt++) {
        gb_err ping = GB_ERR_INIT;
        if (docker_ping(a->docker, &ping) == 0)
            break;
        if (time_since_s(start) >= a->cfg.docker_wait_s)
            return err_set(err, ERR_DOCKER_UNAVAILABLE,
                           "Docker at %s did not answer within %us: %s. Is dockerd running? "
                           "Point --docker-host (or $DOCKER_HOST) at it",
                           a->cfg.docker_host, a->cfg.docker_wait_s, ping.msg);
        if (attempt == 0)
            log_warn("docker: waiting for Docker at %s (%s)", a->cfg.docker_host, ping.msg);
        if (app_pause(a, 250) < 0)
            return err_set(err, ERR_DOCKER_UNAVAILABLE, "stopped while waiting for Docker at %s",
                           a->cfg.docker_host);
    }
    _cleanup_json_ json_t *version = NULL;
    _cleanup_json_ json_t *info = NULL;
    if (docker_version(a->docker, &version, err) < 0 || docker_info(a->docker, &info, err) < 0)
        return err_prefix(err, "asking Docker at %s what it is", a->cfg.docker_host);
    copy_json_string(a->docker_version, sizeof(a->docker_version), version, "Version");
    copy_json_string(a->docker_api_version, sizeof(a->docker_api_version), version, "ApiVersion");
    copy_json_string(a->docker_storage_driver, sizeof(a->docker_storage_driver), info, "Driver");
    const char *root = json_string_value(json_object_get(info, "DockerRootDir"));
    snprintf(a->docker_root_dir, sizeof(a->docker_root_dir), "%s", root ? root : "");
    log_info("docker: Docker %s (API %s) at %s, storage driver %s", a->docker_version,
             a->docker_api_version, a->cfg.docker_host, a->docker_storage_driver);
    if (strcmp(a->docker_storage_driver, "overlay2") != 0)
        log_warn("docker: storage driver %s is not overlay2; carrying a container's system disk "
                 "to a new version will use the slower portable path",
                 a->docker_storage_driver);
    return 0;
}

static void app_log_simulated_banner(const app *a)
{
    log_warn("****************************************************************");
    log_warn("* SIMULATED GPUs (--simulate-gpus %s): %zu device(s).", a->cfg.simulate_gpus,
             a->gpus.n);
    log_warn("* These cards do not exist. Containers run for real but get no GPU;");
    log_warn("* the API marks every GPU answer \"simulated\": true.");
    log_warn("****************************************************************");
}

static int app_load_gpus(app *a, gb_err *err)
{
    gpu_config gc = {
        .source = a->cfg.gpu_source,
        .simulate_spec = a->cfg.simulate_gpus,
        .nvml_library = a->cfg.nvml_library,
        .nvidia_smi = a->cfg.nvidia_smi,
    };
    if (gpu_inventory_load(&gc, &a->gpus, err) < 0)
        return err_prefix(err, "loading the GPU inventory");
    if (a->gpus.simulated)
        app_log_simulated_banner(a);
    if (strcmp(a->gpus.source, "none") == 0 || a->gpus.n == 0) {
        log_warn("gpus: no GPU found (tried NVML and nvidia-smi); GPU requests will fail. Use "
                 "--simulate-gpus 8xA100-80GB to try gpubox without GPUs");
        return 0;
    }
    log_info("gpus: %zu device(s) from %s%s%s%s", a->gpus.n, a->gpus.source,
             a->gpus.driver_version[0] ? " (driver " : "", a->gpus.driver_version,
             a->gpus.driver_version[0] ? ")" : "");
    for (size_t i = 0; i < a->gpus.n; i++) {
        const gpu_device *d = &a->gpus.devices[i];
        log_info("gpu %d: %s %s, %llu MiB%s%s", d->index, d->uuid, d->model,
                 (unsigned long long)d->memory_mib, d->is_mig ? ", MIG instance" : "",
                 d->healthy ? "" : ", UNHEALTHY");
    }
    return 0;
}

/* The GPU pool with the host's sharing settings; exclusions must name
 * devices of this host (a typo would hand out the card meant to be kept). */
static int app_make_gpu_pool(app *a, gb_err *err)
{
    gpus_settings s;
    gpus_settings_defaults(&s);
    if (a->cfg.timeslice_replicas)
        s.timeslice_replicas = a->cfg.timeslice_replicas;
    s.max_tenants_per_card = a->cfg.gpu_max_tenants;
    if (a->cfg.gpu_memory_oversubscription > 0)
        s.memory_oversubscription = a->cfg.gpu_memory_oversubscription;
    char **sharing = NULL, **all = NULL;
    size_t nsharing = 0, nall = 0;
    int rc = -1;
    if (gpus_settings_parse_list(a->cfg.gpu_exclude_sharing ? a->cfg.gpu_exclude_sharing : "",
                                 "--gpu-exclude-sharing", &sharing, &nsharing, err) < 0 ||
        gpus_settings_parse_list(a->cfg.gpu_exclude ? a->cfg.gpu_exclude : "", "--gpu-exclude",
                                 &all, &nall, err) < 0)
        goto done;
    s.exclude_sharing = (const char *const *)sharing;
    s.nexclude_sharing = nsharing;
    s.exclude_all = (const char *const *)all;
    s.nexclude_all = nall;
    if (!(a->gpu_pool = gpus_pool_new_with(&a->gpus, &s, err))) {
        err_prefix(err, "GPU host settings");
        goto done;
    }
    char limit[32] = "none";
    if (s.max_tenants_per_card)
        snprintf(limit, sizeof(limit), "%u", s.max_tenants_per_card);
    log_info("gpu sharing: %u time-slice replica(s) per card, tenant limit %s, memory x%.2f, %zu "
             "card(s) whole only, %zu excluded; share limits %s",
             s.timeslice_replicas, limit, s.memory_oversubscription, nsharing, nall,
             a->cfg.hami_core && *a->cfg.hami_core
                 ? "enforced by HAMi-core"
                 : "scheduled but NOT enforced in containers (no --hami-core)");
    rc = 0;
done:
    gpus_settings_list_free(sharing, nsharing);
    gpus_settings_list_free(all, nall);
    return rc;
}

/* The data dir holds the volumes' images and mount points: a second
 * daemon on it, even with a store of its own (another etcd prefix), would
 * attach and resize the same volumes. An exclusive flock on
 * <data_dir>/gpuboxd.lock, held for the process's life and freed by the
 * kernel however it ends; the holder's pid is written in it for the
 * message. Taken after the store claim, so a daemon on the same store
 * hears about the store first. */
static int app_lock_data_dir(app *a, gb_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/gpuboxd.lock", a->cfg.data_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int saved = errno;
        char holder[32] = "";
        ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(fd);
        if (saved != EWOULDBLOCK)
            return err_set(err, ERR_INTERNAL, "cannot lock %s: %s", path, strerror(saved));
        return err_set(err, ERR_STATE_CONFLICT,
                       "data dir %s is in use by another gpuboxd (pid %s), with a store of its "
                       "own; two daemons on one data dir would attach and resize the same "
                       "volumes: give each its own --data-dir",
                       a->cfg.data_dir, holder[0] ? holder : "unknown");
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        log_warn("cannot write the pid into %s: %s", path, strerror(errno));
    a->data_dir_lock = fd;
    return 0;
}

/* The metrics observe operations (ops_timer.h). */
static void app_op_done(app *a, const char *kind, const char *result, double seconds)
{
    ops_metrics_observe(a->ops, kind, result, seconds);
}

/* The monitor acts on sets through what the replica-set code offers. */
static const monitor_actions app_monitor_actions = {.stop_set = replicaset_stop_because};

int app_open(const app_config *cfg, app **out, gb_err *err)
{
    app *a = xcalloc(1, sizeof(*a));
    a->cfg = *cfg;
    a->data_dir_lock = -1;
    a->op_kinds = op_kinds;
    a->op_target = &op_target_records;
    /* Each concern calls in one direction: the code below reports up
     * through these hooks, never by name. */
    a->hooks = (app_hooks){.set_usage = monitor_set_json,
                           .set_exec = monitor_note_exec,
                           .op_done = app_op_done,
                           .queue_status = queue_status,
                           .capacity_freed = queue_capacity_freed};
    if (app_make_dir(cfg->data_dir, err) < 0 || app_open_store(a, err) < 0 ||
        app_claim_store(a, err) < 0 || nodes_migrate(a, err) < 0 || users_open(a, err) < 0 ||
        app_lock_data_dir(a, err) < 0 || app_connect_docker(a, err) < 0 ||
        images_open(a, cfg->registry_auth_file, err) < 0 || app_load_gpus(a, err) < 0)
        goto fail;
    if (app_make_gpu_pool(a, err) < 0)
        goto fail;
    a->ports = ports_pool_new(cfg->port_start, cfg->port_end);
    if (cores_make_pool(a, err) < 0)
        goto fail;
    a->gpus_cache = resources_cache_new();
    a->locks = namelock_table_new();
    a->ops = ops_metrics_new();
    if (!a->ports) {
        err_set(err, ERR_INVALID_PARAMS, "--port-range %u-%u holds no port", cfg->port_start,
                cfg->port_end);
        goto fail;
    }
    /* Before any other thread calls Docker: it observes the client's calls
     * (container_watch.h). */
    container_watch_start(a);
    /* Volumes before the replica sets: reconciling may start containers,
     * and after a reboot their volumes must be mounted first. */
    if (volumes_open(a, err) < 0 || allocations_derive(a, err) < 0 ||
        ownership_settle(a, err) < 0 || replicaset_reconcile(a, err) < 0 ||
        replicaset_doubt_start(a, err) < 0 || monitor_start(a, &app_monitor_actions, err) < 0 ||
        nodes_join(a, err) < 0 || queue_start(a, err) < 0)
        goto fail;
    replicaset_moves_start(a); /* moves a crash left half done: settled now it is a node */
    log_info("ports: %u-%u, %zu free; gpu attach: %s; volume backend: %s", cfg->port_start,
             cfg->port_end, ports_pool_available(a->ports), cfg->gpu_attach, cfg->volume_backend);
    *out = a;
    return 0;
fail:
    app_close(a);
    return -1;
}

void app_close(app *a)
{
    if (!a)
        return;
    replicaset_moves_stop(a); /* it talks to the fleet and takes name locks */
    queue_stop(a);            /* it reads every node's queue through the fleet, and creates
                                 sets: before the fleet and what a create needs go */
    fleet_close(a->fleet);    /* then: the others see this node go at once */
    monitor_stop(a);          /* it stops sets: before what a stop needs goes */
    replicaset_doubt_stop(a); /* it takes name locks and gives back to the pools */
    queue_free(a);
    volumes_close(a->volumes);
    images_close(a); /* stops running pulls: before Docker's client goes */
    users_close(a->users);
    resources_cache_free(a->gpus_cache);
    namelock_table_free(a->locks);
    ops_metrics_free(a->ops);
    gpus_pool_free(a->gpu_pool);
    ports_pool_free(a->ports);
    cpus_pool_free(a->cpus);
    gpu_inventory_free(&a->gpus);
    container_watch_stop(a); /* after every other thread that calls Docker */
    docker_client_free(a->docker);
    if (a->store) {
        if (store_claim_state(a->store) != STORE_CLAIM_NONE) {
            store_release(a->store); /* last: nothing writes any more */
            log_info("store: claim released");
        }
        store_close(a->store);
        log_info("store: closed");
    }
    if (a->data_dir_lock >= 0)
        close(a->data_dir_lock);
    free(a);
}
