/*
 * gpu_env.c - what a container gets besides its cards: the limits of its
 * GPU grant as environment variables and as a read-only file, and, when the
 * host has HAMi-core, the library that enforces them.
 *
 * For a grant with cards (sched/gpus.h):
 *   - env: gpus_grant_env's lines (CUDA_DEVICE_MEMORY_LIMIT_<i>,
 *     GPUBOX_GPU_MEMORY_MIB, GPUBOX_GPU_SHARE, ...), after the user's, so a
 *     user's entry of the same name cannot override them;
 *   - the same lines in a host file <data-dir>/gpu-env/<container>.env,
 *     bind-mounted read-only at GPUS_ENV_FILE_PATH, so a login shell (which
 *     starts from a clean environment) can source them. It is gpubox's own
 *     mount: the user-bind policy of binds.c, which refuses the data dir,
 *     does not apply. The file lives as long as its container; it is
 *     removed with the container, and start-up removes files no record's
 *     container names (a crash between the two);
 *   - shares only, gpubox's CUDA limiter (--cuda-limiter, src/cuda/,
 *     docs/gpus.md): the library mounted read-only at RS_CUDA_LIMITER_PATH
 *     and a preload file naming it read-only at /etc/ld.so.preload, so
 *     every dynamically linked process loads it whatever its environment
 *     (the host file <data-dir>/gpu-limits/<container>/ld.so.preload);
 *     the cards' shares in <data-dir>/gpu-limits/<container>/limits, the
 *     directory mounted read-only at RS_CUDA_LIMITS_DIR (a directory, so a
 *     later rewrite by rename reaches the container), which goes with
 *     the container; beside it the file "pids" (src/cuda/pids.h: the
 *     host PIDs of the container's GPU processes, so the library finds
 *     itself in NVML's list), written empty here and kept by the monitor
 *     (service/monitor/hostpids.c); and a small tmpfs (RS_CUDA_BUDGET_BYTES, mode 1777)
 *     at RS_CUDA_BUDGET_DIR, where the container's processes keep their
 *     shared budget: memory rather than the host's disk, so what the
 *     container writes there is capped and goes with it;
 *   - shares only, with --hami-core instead: the library mounted read-only
 *     at RS_HAMI_CORE_PATH and LD_PRELOAD naming it (in the env and the
 *     file), so HAMi-core enforces the memory limits.
 * With neither, the limits are scheduled but not enforced, and the API
 * says so (replicaset_gpu_enforced_by reads it from the container itself, which
 * outlives a change of the host setting).
 */
#include "util/xalloc.h"
#include "service/replicaset/gpu_env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

#define RS_GPU_ENV_DIR "gpu-env"
#define RS_GPU_ENV_SUFFIX ".env"
#define RS_GPU_LIMITS_DIR "gpu-limits" /* <container>/limits, mounted read-only */
/* The budget's tmpfs: the budget file (src/cuda/budget.h) is about 40 KiB. */
#define RS_CUDA_BUDGET_BYTES (1024 * 1024)
#define RS_LD_SO_PRELOAD_FILE "ld.so.preload" /* beside limits, names the limiter */

/* A memory share or time-slice replica (a grant has one mode). */
static bool replicaset_grant_is_share(const replicaset_record *r)
{
    return r->ngpus && r->grant.n == r->ngpus && r->grant.cards[0].mode != GPUS_MODE_WHOLE;
}

static bool replicaset_hami_core_set(const app *a)
{
    return a->cfg.hami_core && *a->cfg.hami_core;
}

/* Docker's inspect says LD_PRELOAD names the library and it is mounted. */
static bool replicaset_hami_core_in(const json_t *inspect)
{
    bool preload = false, mounted = false;
    json_t *env = json_object_get(json_object_get(inspect, "Config"), "Env");
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *e = json_string_value(json_array_get(env, i));
        if (e && strncmp(e, "LD_PRELOAD=", 11) == 0) /* the last one is what counts */
            preload = strcmp(e + 11, RS_HAMI_CORE_PATH) == 0;
    }
    json_t *mounts = json_object_get(inspect, "Mounts");
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *dest =
            json_string_value(json_object_get(json_array_get(mounts, i), "Destination"));
        mounted = mounted || (dest && strcmp(dest, RS_HAMI_CORE_PATH) == 0);
    }
    return preload && mounted;
}

/* The limiter is in place when HAMi-core is not set and gpubox's is. */
static bool replicaset_cuda_limiter_set(const app *a)
{
    return !replicaset_hami_core_set(a) && a->cfg.cuda_limiter && *a->cfg.cuda_limiter;
}

/* Docker's inspect says the preload file and the limits are mounted. */
static bool replicaset_cuda_limiter_in(const json_t *inspect)
{
    bool preload = false, limits = false;
    json_t *mounts = json_object_get(inspect, "Mounts");
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *dest =
            json_string_value(json_object_get(json_array_get(mounts, i), "Destination"));
        preload = preload || (dest && strcmp(dest, RS_LD_SO_PRELOAD_PATH) == 0);
        limits = limits || (dest && strcmp(dest, RS_CUDA_LIMITS_DIR) == 0);
    }
    return preload && limits;
}

const char *replicaset_gpu_enforced_by(const app *a, const replicaset_record *r,
                                       const json_t *inspect)
{
    if (!replicaset_grant_is_share(r))
        return r->ngpus ? "exclusive cards" : NULL;
    if (inspect ? replicaset_cuda_limiter_in(inspect) : replicaset_cuda_limiter_set(a))
        return "gpubox";
    if (inspect ? replicaset_hami_core_in(inspect) : replicaset_hami_core_set(a))
        return "HAMi-core";
    return NULL;
}

static int replicaset_gpu_env_path(const app *a, const char *container, char *path, size_t size)
{
    int n = snprintf(path, size, "%s/" RS_GPU_ENV_DIR "/%s" RS_GPU_ENV_SUFFIX, a->cfg.data_dir,
                     container);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* Write text to path through a temporary file and a rename, so a container
 * (re)started at any moment mounts a whole file. */
static int replicaset_gpu_env_write(const char *path, const char *text, gb_err *err)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return err_set(err, ERR_INTERNAL, "GPU env file path is too long: %s", path);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot write %s: %s", tmp, strerror(errno));
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            unlink(tmp);
            return err_set(err, ERR_INTERNAL, "cannot write %s: %s", tmp, strerror(errno));
        }
        done += (size_t)w;
    }
    /* 0644 whatever the umask: processes of any user in the container read it */
    if (fchmod(fd, 0644) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, ERR_INTERNAL, "cannot write %s: %s", path, strerror(e));
    }
    return 0;
}

/* <data-dir>/NAME/<container> (made, mode 0755, when make is set). */
static int replicaset_gpu_dir(const app *a, const char *name, const char *container, bool make,
                              char *path, size_t size, gb_err *err)
{
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof(parent), "%s/%s", a->cfg.data_dir, name) >= (int)sizeof(parent) ||
        snprintf(path, size, "%s/%s", parent, container) >= (int)size)
        return err_set(err, ERR_INTERNAL, "data dir path is too long for %s", name);
    if (!make)
        return 0;
    if ((mkdir(parent, 0755) < 0 && errno != EEXIST) || (mkdir(path, 0755) < 0 && errno != EEXIST))
        return err_set(err, ERR_INTERNAL, "cannot create %s: %s", path, strerror(errno));
    return 0;
}

/* Removes a directory of replicaset_gpu_dir and the files in it. */
static void replicaset_gpu_dir_remove(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    if (rmdir(path) < 0 && errno != ENOENT)
        log_warn("replica sets: cannot remove %s: %s", path, strerror(errno));
}

int replicaset_cuda_card_cores(const app *a, const replicaset_record *r, size_t i)
{
    if (r->spec.gpu_cores > 0)
        return r->spec.gpu_cores;
    if (i >= r->grant.n || r->grant.cards[i].mode != GPUS_MODE_TIMESLICE ||
        !a->cfg.timeslice_equal_compute)
        return 0;
    unsigned replicas =
        a->cfg.timeslice_replicas ? a->cfg.timeslice_replicas : GPUS_TIMESLICE_REPLICAS_DEFAULT;
    if (a->cfg.gpu_max_tenants && a->cfg.gpu_max_tenants < replicas)
        replicas = a->cfg.gpu_max_tenants;
    return replicas > 1 ? (int)(100 / replicas) : 0;
}

/* The text of the limits file (src/cuda/limits.h: UUID, MiB and the
 * compute share, one card a line) for r's grant into *text (free it). */
static int replicaset_cuda_limits_text(const app *a, const replicaset_record *r, char **text,
                                       gb_err *err)
{
    size_t len = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return err_set(err, ERR_INTERNAL, "out of memory");
    fprintf(f, "# gpubox CUDA limits of %s: UUID MEMORY_MIB [cores=PERCENT]\n", r->container_name);
    for (size_t i = 0; i < r->grant.n; i++) {
        int cores = replicaset_cuda_card_cores(a, r, i);
        fprintf(f, "%s %llu", r->grant.cards[i].uuid,
                (unsigned long long)r->grant.cards[i].memory_mib);
        if (cores > 0)
            fprintf(f, " cores=%d", cores);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(*text);
        *text = NULL;
        return err_set(err, ERR_INTERNAL, "out of memory");
    }
    return 0;
}

/* The host path of r's limits file into file; false when r holds no share
 * or its container has no such file. */
static bool replicaset_cuda_limits_file(const app *a, const replicaset_record *r, char *file,
                                        size_t size)
{
    char dir[PATH_MAX];
    gb_err e = GB_ERR_INIT;
    if (!replicaset_grant_is_share(r) ||
        replicaset_gpu_dir(a, RS_GPU_LIMITS_DIR, r->container_name, false, dir, sizeof(dir), &e) <
            0 ||
        snprintf(file, size, "%s/limits", dir) >= (int)size)
        return false;
    return access(file, F_OK) == 0;
}

bool replicaset_cuda_limits_present(const app *a, const replicaset_record *r)
{
    char file[PATH_MAX + 16];
    return replicaset_cuda_limits_file(a, r, file, sizeof(file));
}

int replicaset_cuda_limits_rewrite(const app *a, const replicaset_record *r, gb_err *err)
{
    char file[PATH_MAX + 16];
    if (!replicaset_cuda_limits_file(a, r, file, sizeof(file)))
        return 0;
    _cleanup_free_ char *text = NULL;
    if (replicaset_cuda_limits_text(a, r, &text, err) < 0 ||
        replicaset_gpu_env_write(file, text, err) < 0)
        return -1;
    return 1;
}

int replicaset_cuda_pids_write(const app *a, const char *container, const char *text, gb_err *err)
{
    char dir[PATH_MAX], file[PATH_MAX + 16];
    if (replicaset_gpu_dir(a, RS_GPU_LIMITS_DIR, container, false, dir, sizeof(dir), err) < 0)
        return -1;
    snprintf(file, sizeof(file), "%s/pids", dir);
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    return replicaset_gpu_env_write(file, text, err) < 0 ? -1 : 1;
}

/* The CUDA limiter for a share: the limits file, the pids file, the
 * preload file, and the four mounts. */
static int replicaset_cuda_limiter_prepare(const app *a, const replicaset_record *r,
                                           replicaset_gpu_env *out, gb_err *err)
{
    _cleanup_free_ char *text = NULL;
    if (replicaset_cuda_limits_text(a, r, &text, err) < 0)
        return -1;
    char limits_dir[PATH_MAX], file[PATH_MAX + 16], preload[PATH_MAX];
    if (replicaset_gpu_dir(a, RS_GPU_LIMITS_DIR, r->container_name, true, limits_dir,
                           sizeof(limits_dir), err) < 0)
        return -1;
    /* The preload file is the container's own too (in the same directory,
     * where the library reads only "limits"): no two creates write one file. */
    snprintf(file, sizeof(file), "%s/limits", limits_dir);
    if (snprintf(preload, sizeof(preload), "%s/" RS_LD_SO_PRELOAD_FILE, limits_dir) >=
        (int)sizeof(preload))
        return err_set(err, ERR_INTERNAL, "data dir path is too long for the preload file");
    if (replicaset_gpu_env_write(file, text, err) < 0 ||
        replicaset_gpu_env_write(preload, RS_CUDA_LIMITER_PATH "\n", err) < 0 ||
        replicaset_cuda_pids_write(a, r->container_name, RS_CUDA_PIDS_HEADER, err) < 0)
        return -1;
    out->limits_dir = xstrdup(limits_dir);
    out->preload_file = xstrdup(preload);
    out->mounts[out->nmounts++] =
        (docker_bind){.src = a->cfg.cuda_limiter, .dest = RS_CUDA_LIMITER_PATH, .read_only = true};
    out->mounts[out->nmounts++] =
        (docker_bind){.src = out->preload_file, .dest = RS_LD_SO_PRELOAD_PATH, .read_only = true};
    out->mounts[out->nmounts++] =
        (docker_bind){.src = out->limits_dir, .dest = RS_CUDA_LIMITS_DIR, .read_only = true};
    out->mounts[out->nmounts++] =
        (docker_bind){.dest = RS_CUDA_BUDGET_DIR, .tmpfs_bytes = RS_CUDA_BUDGET_BYTES};
    return 0;
}

/* The grant's lines, plus LD_PRELOAD for a share when HAMi-core is set;
 * the CUDA limiter's files and mounts for a share when it is set. */
static int replicaset_gpu_env_lines(const app *a, const replicaset_record *r,
                                    replicaset_gpu_env *out, gb_err *err)
{
    if (gpus_grant_env(&r->grant, &out->env, &out->nenv, err) < 0)
        return -1;
    if (replicaset_grant_is_share(r) && replicaset_cuda_limiter_set(a))
        return replicaset_cuda_limiter_prepare(a, r, out, err);
    if (!replicaset_hami_core_set(a) || !replicaset_grant_is_share(r))
        return 0;
    char **grown = xrealloc(out->env, (out->nenv + 2) * sizeof(*grown));
    out->env = grown;
    out->env[out->nenv] = xstrdup("LD_PRELOAD=" RS_HAMI_CORE_PATH);
    out->nenv++;
    out->mounts[out->nmounts++] =
        (docker_bind){.src = a->cfg.hami_core, .dest = RS_HAMI_CORE_PATH, .read_only = true};
    return 0;
}

/* The lines into <data-dir>/gpu-env/<container>.env; out->file its path. */
static int replicaset_gpu_env_write_file(const app *a, const replicaset_record *r,
                                         replicaset_gpu_env *out, gb_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return err_set(err, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < out->nenv; i++)
        fprintf(f, "%s\n", out->env[i]);
    if (fclose(f) != 0)
        return err_set(err, ERR_INTERNAL, "out of memory");
    char dir[PATH_MAX], path[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/" RS_GPU_ENV_DIR, a->cfg.data_dir) >= (int)sizeof(dir) ||
        replicaset_gpu_env_path(a, r->container_name, path, sizeof(path)) < 0)
        return err_set(err, ERR_INTERNAL, "data dir path is too long for the GPU env files");
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return err_set(err, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    if (replicaset_gpu_env_write(path, text, err) < 0)
        return -1;
    out->file = xstrdup(path);
    return 0;
}

int replicaset_gpu_env_prepare(app *a, const replicaset_record *r, const binds_resolved *binds,
                               replicaset_gpu_env *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (r->ngpus == 0 || r->grant.n != r->ngpus)
        return 0;
    /* replicaset_spec refuses binds there; a spec made before that rule is caught here */
    for (size_t i = 0; i < binds->n; i++)
        if (strcmp(binds->binds[i].dest, GPUS_ENV_FILE_PATH) == 0 ||
            strcmp(binds->binds[i].dest, RS_HAMI_CORE_PATH) == 0 ||
            strcmp(binds->binds[i].dest, RS_CUDA_LIMITER_PATH) == 0 ||
            strcmp(binds->binds[i].dest, RS_LD_SO_PRELOAD_PATH) == 0 ||
            strncmp(binds->binds[i].dest, RS_GPUBOX_RUN_DIR "/", strlen(RS_GPUBOX_RUN_DIR) + 1) ==
                0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "a bind mounts on %s, where gpubox puts the GPU limits; pick another "
                           "dest",
                           binds->binds[i].dest);
    if (replicaset_gpu_env_lines(a, r, out, err) < 0 ||
        replicaset_gpu_env_write_file(a, r, out, err) < 0) {
        replicaset_gpu_env_free(out);
        return -1;
    }
    out->mounts[out->nmounts++] =
        (docker_bind){.src = out->file, .dest = GPUS_ENV_FILE_PATH, .read_only = true};
    return 0;
}

void replicaset_gpu_env_free(replicaset_gpu_env *e)
{
    gpus_grant_env_free(e->env, e->nenv);
    free(e->file);
    free(e->limits_dir);
    free(e->preload_file);
    memset(e, 0, sizeof(*e));
}

void replicaset_gpu_env_remove(app *a, const char *container)
{
    char path[PATH_MAX];
    if (replicaset_gpu_env_path(a, container, path, sizeof(path)) == 0 && unlink(path) < 0 &&
        errno != ENOENT)
        log_warn("replica sets: cannot remove %s: %s", path, strerror(errno));
    gb_err e = GB_ERR_INIT;
    if (replicaset_gpu_dir(a, RS_GPU_LIMITS_DIR, container, false, path, sizeof(path), &e) == 0)
        replicaset_gpu_dir_remove(path);
}

/* Start-up: the CUDA limiter's limits directories of containers no record
 * names. */
static size_t replicaset_gpu_dirs_sweep(app *a, const char *name, const json_t *containers)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/%s", a->cfg.data_dir, name) >= (int)sizeof(dir))
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || json_object_get(containers, e->d_name))
            continue;
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        replicaset_gpu_dir_remove(path);
        removed++;
    }
    closedir(d);
    return removed;
}

void replicaset_gpu_env_sweep(app *a, const json_t *containers)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/" RS_GPU_ENV_DIR, a->cfg.data_dir) >= (int)sizeof(dir))
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name), s = strlen(RS_GPU_ENV_SUFFIX);
        if (e->d_name[0] == '.')
            continue;
        bool env = n > s && strcmp(e->d_name + n - s, RS_GPU_ENV_SUFFIX) == 0;
        char container[NAME_MAX + 1];
        snprintf(container, sizeof(container), "%.*s", env ? (int)(n - s) : (int)n, e->d_name);
        if (env && json_object_get(containers, container))
            continue;
        /* a stale file, or a .tmp left by a crash mid-write */
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    removed += replicaset_gpu_dirs_sweep(a, RS_GPU_LIMITS_DIR, containers);
    if (removed)
        log_info("reconcile: removed %zu GPU env file(s) or limits directories no container uses",
                 removed);
}
