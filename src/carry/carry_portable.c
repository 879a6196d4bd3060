/*
 * carry_portable.c - the portable way: carry a system disk through Docker's
 * changes and archive APIs, for any storage driver.
 *
 * The plan (carry_plan.c) names paths to read out of the old container.
 * Each is read with one archive GET and rewritten (carry_tar.c) into a
 * single tar stream that one archive PUT extracts at "/" of the new
 * container: names get their parent directory prepended, entries that must
 * not be carried are dropped, and a REPLACE starts with a placeholder entry
 * whose extraction removes what the new container has at that path.
 *
 * Three kinds of thread, joined by pipes, so memory stays bounded whatever
 * the size:
 *
 *   GET thread (one per op)   Docker -> pipe
 *   feeder thread             pipe -> rewrite -> pipe
 *   calling thread            pipe -> Docker (the PUT)
 *
 * A SHALLOW op needs only the first entry of its stream: the feeder then
 * closes that pipe and the GET fails on a broken pipe, which is expected.
 * Threads that write into pipes block SIGPIPE, so a reader that is gone
 * gives EPIPE, never a signal. When the PUT ends early the calling thread
 * closes its pipe and the feeder stops at its next write; when the feeder
 * fails it ends the stream with a corrupt block so the PUT fails too.
 */
#include "util/xalloc.h"
#include "carry/carry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

static void block_sigpipe(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* ---- One archive GET into a pipe ---- */

struct get_job {
    docker_client *c;
    const char *container;
    const char *path;
    int fd; /* the pipe's write end; the thread closes it */
    int rc;
    gb_err err;
    pthread_t thread;
    bool started;
};

static void *get_thread(void *arg)
{
    struct get_job *j = arg;
    block_sigpipe();
    j->rc = docker_container_archive_get(j->c, j->container, j->path, j->fd, &j->err);
    close(j->fd);
    j->fd = -1;
    return NULL;
}

/* Start reading path out of container; *read_fd gets the stream. */
static int get_start(struct get_job *j, docker_client *c, const char *container, const char *path,
                     int *read_fd, gb_err *err)
{
    *j = (struct get_job){.c = c, .container = container, .path = path, .fd = -1};
    j->err = (gb_err)GB_ERR_INIT;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: pipe: %s", strerror(errno));
    j->fd = p[1];
    carry_pipe_widen(p[1]);
    int rc = pthread_create(&j->thread, NULL, get_thread, j);
    if (rc != 0) {
        close(p[0]);
        close(p[1]);
        return err_set(err, ERR_INTERNAL, "carrying the system disk: starting a thread: %s",
                       strerror(rc));
    }
    j->started = true;
    *read_fd = p[0];
    return 0;
}

/* Close the stream (so a GET still writing stops) and wait for the GET. */
static void get_finish(struct get_job *j, int *read_fd)
{
    if (*read_fd >= 0) {
        close(*read_fd);
        *read_fd = -1;
    }
    if (j->started)
        pthread_join(j->thread, NULL);
    j->started = false;
}

/* ---- The feeder: every op's stream into the PUT's ---- */

struct feeder {
    docker_client *c;
    const carry_portable_input *in;
    const carry_plan *plan;
    int out_fd;
    bool out_broken; /* a write to out_fd failed: the PUT is gone */
    bool volume_op;  /* the op being fed carries a mount whole (carry_op.volume) */
    uint64_t entries, bytes, unapplied;
    int rc;
    gb_err err;
};

/* "a/b/" for "/a/b/name", "" for "/name". */
static char *parent_prefix(const char *path)
{
    const char *slash = strrchr(path, '/');
    return xstrndup(path + 1, (size_t)(slash - path));
}

/* Whether entry e (at container path cpath) goes into the new container. */
static bool feeder_wants(struct feeder *f, const carry_tar_entry *e, const char *cpath)
{
    if (f->volume_op)
        return true;
    if (carry_paths_covers(f->in->skip, cpath))
        return false;
    /* Anything but a directory at a path that holds a mount point of the
     * new container would make the extraction remove into that mount. */
    if (e->type != '5' && carry_paths_any_within(f->in->guard, cpath)) {
        log_warn("carry: '%s' is not carried: it is not a directory in the old container, and the "
                 "new container mounts something inside it",
                 cpath);
        f->unapplied++;
        return false;
    }
    return true;
}

/* Copy one entry (header and data) into the output under its new name. */
static int feeder_copy_entry(struct feeder *f, carry_tar_reader *r, const carry_tar_entry *e,
                             const char *prefix, const char *cpath, gb_err *err)
{
    if (!feeder_wants(f, e, cpath))
        return carry_tar_data(r, e, -1, err);
    _cleanup_free_ char *name = xasprintf("%s%s", prefix, e->name);
    /* A hard link names its target by its path in this same archive. */
    _cleanup_free_ char *link = e->type == '1' ? xasprintf("%s%s", prefix, e->linkname) : NULL;
    if (carry_tar_write_header(f->out_fd, e, name, link, err) < 0) {
        f->out_broken = true;
        return -1;
    }
    int rc = carry_tar_data(r, e, f->out_fd, err);
    if (rc < 0) {
        f->out_broken = rc == -2;
        return -1;
    }
    if (carry_tar_pad(f->out_fd, e->size, err) < 0) {
        f->out_broken = true;
        return -1;
    }
    f->entries++;
    if (e->type == '0')
        f->bytes += e->size;
    return 0;
}

/* The container path of an archive entry: prefix + name without a trailing '/'. */
static char *entry_path(const char *prefix, const char *name)
{
    char *p = xasprintf("/%s%s", prefix, name);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    return p;
}

static void drain(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        return;
    }
}

static int feeder_run_op(struct feeder *f, const carry_op *op, gb_err *err)
{
    _cleanup_free_ char *prefix = parent_prefix(op->path);
    if (op->kind == CARRY_OP_REPLACE &&
        carry_tar_write_placeholder(f->out_fd, op->path + 1, err) < 0) {
        f->out_broken = true;
        return -1;
    }
    f->volume_op = op->volume;
    struct get_job job;
    int read_fd = -1;
    if (get_start(&job, f->c, f->in->from, op->path, &read_fd, err) < 0)
        return -1;
    carry_tar_reader *r = carry_tar_reader_new(read_fd);
    int rc = 0;
    bool first = true, stopped_early = false;
    while (rc == 0) {
        carry_tar_entry e;
        int got = carry_tar_next(r, &e, err);
        if (got <= 0) {
            rc = got;
            break;
        }
        _cleanup_free_ char *cpath = entry_path(prefix, e.name);
        if (first && strcmp(cpath, op->path) != 0)
            rc = err_set(err, ERR_INTERNAL,
                         "carrying the system disk: Docker's archive of '%s' starts with '%s'",
                         op->path, cpath);
        else
            rc = feeder_copy_entry(f, r, &e, prefix, cpath, err);
        carry_tar_entry_clear(&e);
        first = false;
        if (rc == 0 && op->kind == CARRY_OP_SHALLOW) {
            stopped_early = true;
            break;
        }
    }
    /* Read what is left (after the end blocks, or after a stream that broke
     * off) so the GET ends on its own and says why it failed, if it did;
     * not when the PUT is gone, which ends everything. */
    if (!stopped_early && !f->out_broken)
        drain(read_fd);
    carry_tar_reader_free(r);
    get_finish(&job, &read_fd);
    if (job.rc < 0 && !stopped_early && !f->out_broken) {
        *err = job.err;
        if (err->code == ERR_NOT_FOUND)
            return err_set(err, ERR_INTERNAL,
                           "carrying the system disk: '%s' vanished from the old container: %s",
                           op->path, job.err.msg);
        return -1;
    }
    if (rc < 0)
        return rc;
    if (first)
        return err_set(err, ERR_INTERNAL,
                       "carrying the system disk: Docker's archive of '%s' is empty", op->path);
    return 0;
}

/* Every op into f->out_fd, then the end blocks; on a failure a corrupt
 * block instead (while the reader is still there). */
static void feeder_feed(struct feeder *f)
{
    f->rc = 0;
    for (size_t i = 0; i < f->plan->nops && f->rc == 0; i++)
        f->rc = feeder_run_op(f, &f->plan->ops[i], &f->err);
    if (f->rc == 0 && carry_tar_write_end(f->out_fd, &f->err) < 0) {
        f->rc = -1;
        f->out_broken = true;
    }
    if (f->rc < 0 && !f->out_broken) {
        /* A bad header makes Docker's extraction fail instead of taking a
         * stream cut at an entry boundary for a whole one. */
        unsigned char bad[CARRY_TAR_BLOCK];
        memset(bad, 0xff, sizeof(bad));
        (void)carry_write_all(f->out_fd, bad, sizeof(bad));
    }
}

static void *feeder_thread(void *arg)
{
    struct feeder *f = arg;
    block_sigpipe();
    feeder_feed(f);
    close(f->out_fd);
    f->out_fd = -1;
    return NULL;
}

/* ---- Probing a deleted top-level path ---- */

/* Whether `from` still has path (a directory emptied and made again). */
static int probe_exists(docker_client *c, const char *from, const char *path, bool *exists,
                        gb_err *err)
{
    *exists = false;
    struct get_job job;
    int read_fd = -1;
    if (get_start(&job, c, from, path, &read_fd, err) < 0)
        return -1;
    carry_tar_reader *r = carry_tar_reader_new(read_fd);
    carry_tar_entry e;
    int got = carry_tar_next(r, &e, err);
    if (got > 0) {
        *exists = true;
        carry_tar_entry_clear(&e);
    }
    int rc = got < 0 ? -1 : 0;
    carry_tar_reader_free(r);
    get_finish(&job, &read_fd);
    if (rc < 0 || *exists)
        return rc;
    if (job.rc < 0 && job.err.code != ERR_NOT_FOUND) {
        *err = job.err;
        return -1;
    }
    return 0;
}

static int resolve_probes(docker_client *c, const carry_portable_input *in, carry_plan *plan,
                          gb_err *err)
{
    for (size_t i = 0; i < plan->probe.n; i++) {
        const char *path = plan->probe.v[i];
        bool exists;
        if (probe_exists(c, in->from, path, &exists, err) < 0)
            return -1;
        bool guarded = carry_paths_any_within(in->guard, path);
        if (exists && !guarded) { /* emptied and made again: replace it whole */
            carry_plan_add(plan, CARRY_OP_REPLACE, path);
            continue;
        }
        if (exists)
            log_warn("carry: cannot empty '%s' in the new container: it holds a mount point", path);
        else
            log_warn("carry: cannot delete '%s' in the new container: the portable way deletes "
                     "by replacing the parent directory, and '/' cannot be replaced "
                     "(docs/carry.md)",
                     path);
        carry_paths_add(&plan->unapplied, path);
    }
    carry_plan_finish(plan);
    return 0;
}

/* ---- The whole run ---- */

static int run_plan(docker_client *c, const carry_portable_input *in, const carry_plan *plan,
                    struct feeder *f, gb_err *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "carrying the system disk: pipe: %s", strerror(errno));
    carry_pipe_widen(p[1]);
    *f = (struct feeder){.c = c, .in = in, .plan = plan, .out_fd = p[1]};
    f->err = (gb_err)GB_ERR_INIT;
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, feeder_thread, f);
    if (rc != 0) {
        close(p[0]);
        close(p[1]);
        return err_set(err, ERR_INTERNAL, "carrying the system disk: starting a thread: %s",
                       strerror(rc));
    }
    gb_err put_err = GB_ERR_INIT;
    int put_rc = docker_container_archive_put(c, in->to, "/", p[0], &put_err);
    close(p[0]); /* a feeder still writing stops with EPIPE */
    pthread_join(thread, NULL);
    if (f->rc < 0 && !f->out_broken) {
        *err = f->err;
        return -1;
    }
    if (put_rc < 0) {
        *err = put_err;
        return err_prefix(err, "carrying the system disk into '%s'", in->to_name);
    }
    if (f->rc < 0) {
        *err = f->err;
        return -1;
    }
    return 0;
}

int carry_portable(docker_client *c, const carry_portable_input *in, carry_stats *stats,
                   gb_err *err)
{
    _cleanup_json_ json_t *changes = NULL;
    if (docker_container_changes(c, in->from, &changes, err) < 0)
        return -1;
    carry_plan plan;
    carry_plan_input plan_in = {.changes = changes, .skip = in->skip, .guard = in->guard};
    if (carry_plan_build(&plan_in, &plan, err) < 0)
        return -1;
    int rc = resolve_probes(c, in, &plan, err);
    struct feeder f = {0};
    if (rc == 0 && plan.nops > 0)
        rc = run_plan(c, in, &plan, &f, err);
    if (stats) {
        stats->entries += f.entries;
        stats->bytes += f.bytes;
        stats->unapplied += plan.unapplied.n + f.unapplied;
    }
    log_debug("carry: portable plan of %zu ops from %zu changes", plan.nops,
              json_array_size(changes));
    carry_plan_free(&plan);
    return rc;
}

int carry_portable_export(docker_client *c, const carry_portable_input *in,
                          const char *const *volumes, size_t nvolumes, int out_fd,
                          carry_stats *stats, gb_err *err)
{
    block_sigpipe();
    _cleanup_json_ json_t *changes = NULL;
    if (docker_container_changes(c, in->from, &changes, err) < 0)
        return -1;
    carry_plan plan;
    carry_plan_input plan_in = {.changes = changes, .skip = in->skip, .guard = in->guard};
    if (carry_plan_build(&plan_in, &plan, err) < 0)
        return -1;
    int rc = resolve_probes(c, in, &plan, err);
    /* After the plan is final: a mount is never inside another op's path
     * (the plan splits around skipped paths), and each is carried whole. */
    for (size_t i = 0; i < nvolumes; i++) {
        carry_plan_add(&plan, CARRY_OP_DEEP, volumes[i]);
        plan.ops[plan.nops - 1].volume = true;
    }
    struct feeder f = {.c = c, .in = in, .plan = &plan, .out_fd = out_fd};
    f.err = (gb_err)GB_ERR_INIT;
    if (rc == 0) {
        feeder_feed(&f);
        if (f.rc < 0) {
            *err = f.err;
            rc = -1;
        }
    }
    if (stats) {
        stats->entries += f.entries;
        stats->bytes += f.bytes;
        stats->unapplied += plan.unapplied.n + f.unapplied;
    }
    carry_plan_free(&plan);
    return rc;
}
