/*
 * logs.c - what a replica set's containers wrote (GET .../logs): the
 * current version's from Docker, following it if asked, and older
 * versions' from what gpubox kept when their containers were removed.
 *
 * A new version removes the old container (version.c), and a delete
 * removes the last one; just before, replicaset_logs_keep copies the container's
 * last RS_LOGS_KEEP_LINES lines, with Docker's timestamps, into
 * <data_dir>/logs/<name>/<version>.ndjson (one JSON object a line:
 * {"time", "stream", "text"}), written to a temporary name and renamed,
 * so a file is whole or absent. A container decides what it prints, so
 * the files are bounded in bytes as written (escaped): a version keeps
 * the newest lines that fit a quarter of --kept-logs-mib (a first read
 * measures them, a second writes them; no pass holds the lines), and a
 * set keeps --kept-logs-mib over all its versions, the oldest versions'
 * files removed first (replicaset_logs_trim); GET /replicaSet/{name} shows what
 * they take (keptLogsBytes). Keeping them is best effort: a failure is
 * logged and never stops the change. A purge removes the folder. The
 * files are the node's own: in a fleet the node holding the set answers.
 *
 * Reading is two calls: replicaset_logs_plan checks the name and the
 * caller's right to see the set and says, per version asked for, where its
 * lines come from ("container", "kept" or "none" and why), so that every
 * error comes before a streamed answer begins; replicaset_logs_read then
 * hands the lines on, the oldest version first, one at a time: neither
 * Docker's lines nor a kept file's are ever held together.
 */
#include "service/replicaset/replicaset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service/keys.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/xalloc.h"
#include "util/log.h"
#include "util/time.h"

#define RS_LOGS_DIR "logs"

static const char *replicaset_stream_name(int stream)
{
    return stream == 2 ? "stderr" : "stdout";
}

static int replicaset_stream_of(const char *name)
{
    return name && strcmp(name, "stderr") == 0 ? 2 : 1;
}

/* <data_dir>/logs/<name>[/<version>.ndjson]; -1 when it does not fit. */
static int replicaset_logs_path(const app *a, const char *name, int version, char *buf, size_t size)
{
    int n = version > 0 ? snprintf(buf, size, "%s/" RS_LOGS_DIR "/%s/%d.ndjson", a->cfg.data_dir,
                                   name, version)
                        : snprintf(buf, size, "%s/" RS_LOGS_DIR "/%s", a->cfg.data_dir, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* ---- keeping ------------------------------------------------------------------ */

uint64_t replicaset_logs_set_cap(const app *a)
{
    unsigned mib = a->cfg.kept_logs_mib ? a->cfg.kept_logs_mib : RS_LOGS_KEEP_SET_MIB_DEFAULT;
    return (uint64_t)mib << 20;
}

uint64_t replicaset_logs_version_cap(const app *a)
{
    return replicaset_logs_set_cap(a) / 4;
}

/* A kept line as the file holds it: {"time","stream","text"} and its end. */
static void replicaset_keep_encode(json_out *o, const docker_log_line *l)
{
    json_out_reset(o);
    json_out_raw(o, "{\"time\":", 8);
    json_out_string_lossy(o, l->time, strlen(l->time));
    json_out_printf(o, ",\"stream\":\"%s\",\"text\":", replicaset_stream_name(l->stream));
    json_out_string_lossy(o, l->text, l->len);
    json_out_raw(o, "}\n", 2);
}

/* The first pass: how many of the container's last lines fit the cap,
 * counted as written (escaped), with a window of their sizes only. */
struct replicaset_keep_measure {
    json_out line;
    uint32_t *cost; /* a ring of RS_LOGS_KEEP_LINES */
    size_t start, n;
    uint64_t bytes, cap;
};

static bool replicaset_keep_measure_line(void *ctx, const docker_log_line *l)
{
    struct replicaset_keep_measure *m = ctx;
    replicaset_keep_encode(&m->line, l);
    if (m->n == RS_LOGS_KEEP_LINES) { /* Docker sent more than asked: keep the last */
        m->bytes -= m->cost[m->start];
        m->start = (m->start + 1) % RS_LOGS_KEEP_LINES;
        m->n--;
    }
    m->cost[(m->start + m->n++) % RS_LOGS_KEEP_LINES] = (uint32_t)m->line.len;
    m->bytes += m->line.len;
    while (m->bytes > m->cap && m->n > 0) {
        m->bytes -= m->cost[m->start];
        m->start = (m->start + 1) % RS_LOGS_KEEP_LINES;
        m->n--;
    }
    return true;
}

/* The second pass: the lines the first found room for, and never more
 * than the cap (the log may differ a little from the first read). */
struct replicaset_keep_write {
    FILE *f;
    json_out line;
    uint64_t bytes, cap;
    bool failed;
};

static bool replicaset_keep_line(void *ctx, const docker_log_line *l)
{
    struct replicaset_keep_write *w = ctx;
    replicaset_keep_encode(&w->line, l);
    if (w->bytes + w->line.len > w->cap)
        return false;
    w->bytes += w->line.len;
    if (fwrite(w->line.data, 1, w->line.len, w->f) != w->line.len) {
        w->failed = true;
        return false;
    }
    return true;
}

static int replicaset_mkdir(const char *path)
{
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* <n>.ndjson: n, or 0 when name is not a kept file. */
static int replicaset_logs_file_version(const char *name)
{
    char *end = NULL;
    long v = strtol(name, &end, 10);
    return v > 0 && v <= INT_MAX && end && strcmp(end, ".ndjson") == 0 ? (int)v : 0;
}

struct replicaset_kept_file {
    int version;
    uint64_t bytes;
};

static int replicaset_kept_file_cmp(const void *x, const void *y)
{
    const struct replicaset_kept_file *a = x, *b = y;
    return (a->version > b->version) - (a->version < b->version);
}

/* The kept files of a set, oldest version first; their count. */
static size_t replicaset_logs_kept_files(const char *dir, struct replicaset_kept_file **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int v = replicaset_logs_file_version(e->d_name);
        struct stat st;
        if (!v || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *out = xrealloc(*out, cap * sizeof(**out));
        }
        (*out)[n++] = (struct replicaset_kept_file){.version = v, .bytes = (uint64_t)st.st_size};
    }
    closedir(d);
    if (n)
        qsort(*out, n, sizeof(**out), replicaset_kept_file_cmp);
    return n;
}

uint64_t replicaset_logs_kept_bytes(const app *a, const char *name)
{
    char dir[PATH_MAX];
    if (!a->cfg.data_dir || replicaset_logs_path(a, name, 0, dir, sizeof(dir)) < 0)
        return 0;
    _cleanup_free_ struct replicaset_kept_file *files = NULL;
    size_t n = replicaset_logs_kept_files(dir, &files);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += files[i].bytes;
    return total;
}

/* Keep the set's kept logs within its cap: the oldest versions' go first. */
static void replicaset_logs_trim(const app *a, const char *name, const char *dir)
{
    _cleanup_free_ struct replicaset_kept_file *files = NULL;
    size_t n = replicaset_logs_kept_files(dir, &files);
    uint64_t total = 0, cap = replicaset_logs_set_cap(a);
    for (size_t i = 0; i < n; i++)
        total += files[i].bytes;
    for (size_t i = 0; i + 1 < n && total > cap; i++) {
        char path[PATH_MAX];
        if (replicaset_logs_path(a, name, files[i].version, path, sizeof(path)) < 0 ||
            unlink(path) < 0)
            continue;
        total -= files[i].bytes;
        log_info("replica sets: dropped the kept logs of %s version %d (%" PRIu64
                 " bytes): the set's kept logs are held to %" PRIu64 " bytes",
                 name, files[i].version, files[i].bytes, cap);
    }
}

void replicaset_logs_keep(app *a, const char *name, int version, const char *container)
{
    char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8], top[PATH_MAX];
    if (!a->cfg.data_dir || replicaset_logs_path(a, name, 0, dir, sizeof(dir)) < 0 ||
        replicaset_logs_path(a, name, version, path, sizeof(path)) < 0)
        return;
    snprintf(top, sizeof(top), "%s/" RS_LOGS_DIR, a->cfg.data_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (replicaset_mkdir(top) < 0 || replicaset_mkdir(dir) < 0) {
        log_warn("replica sets: cannot keep the logs of %s: %s: %s", container, dir,
                 strerror(errno));
        return;
    }
    /* First how many of the last lines fit, then those: the file is
     * bounded as it is written, and neither pass holds the lines. */
    struct replicaset_keep_measure m = {.cost = xcalloc(RS_LOGS_KEEP_LINES, sizeof(uint32_t)),
                                        .cap = replicaset_logs_version_cap(a)};
    docker_logs_opts o = {.tail = RS_LOGS_KEEP_LINES};
    gb_err e = GB_ERR_INIT;
    int rc =
        docker_container_log_lines(a->docker, container, &o, replicaset_keep_measure_line, &m, &e);
    free(m.cost);
    json_out_free(&m.line);
    if (rc < 0) {
        if (e.code != ERR_NOT_FOUND) /* else nothing to keep: the container is gone already */
            log_warn("replica sets: cannot keep the logs of %s: %s", container, e.msg);
        return;
    }
    /* 0600: what a user's container wrote is theirs alone. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        log_warn("replica sets: cannot keep the logs of %s: %s: %s", container, tmp,
                 strerror(errno));
        return;
    }
    struct replicaset_keep_write w = {.f = f, .cap = m.cap};
    o.tail = (long)m.n;
    rc = m.n ? docker_container_log_lines(a->docker, container, &o, replicaset_keep_line, &w, &e)
             : 0;
    json_out_free(&w.line);
    bool ok = fclose(f) == 0 && rc == 0 && !w.failed;
    if (ok && rename(tmp, path) == 0) {
        replicaset_logs_trim(a, name, dir);
        return;
    }
    int errno_saved = errno;
    unlink(tmp);
    if (rc < 0 && e.code == ERR_NOT_FOUND)
        return;
    log_warn("replica sets: cannot keep the logs of %s: %s", container,
             rc < 0 ? e.msg : strerror(w.failed ? EIO : errno_saved));
}

void replicaset_logs_forget(app *a, const char *name)
{
    char dir[PATH_MAX];
    if (!a->cfg.data_dir || replicaset_logs_path(a, name, 0, dir, sizeof(dir)) < 0)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
            unlink(path);
    }
    closedir(d);
    if (rmdir(dir) < 0 && errno != ENOENT)
        log_warn("replica sets: cannot remove %s: %s", dir, strerror(errno));
}

/* ---- the plan ----------------------------------------------------------------- */

/* The versions the history knows, oldest first, as {version, containerName}. */
static int replicaset_logs_versions(app *a, const char *name, json_t *out, gb_err *err)
{
    char prefix[STORE_KEY_MAX];
    keys_replicaset_history_prefix(prefix, sizeof(prefix), name);
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, prefix, &kvs, err) < 0)
        return err_prefix(err, "reading the history of %s", name);
    for (size_t i = 0; i < kvs.n; i++) {
        _cleanup_json_ json_t *h = json_loads(kvs.items[i].value, 0, NULL);
        json_t *v = json_object_get(h, "version");
        const char *cn = json_string_value(json_object_get(h, "containerName"));
        if (json_is_integer(v) && cn)
            json_array_append_new(out, json_pack("{s:I, s:s}", "version", json_integer_value(v),
                                                 "containerName", cn));
    }
    return 0;
}

/* Where version v's lines come from: its container when Docker has it,
 * else the lines kept when it was removed, else nothing (with why). */
static void replicaset_logs_source(app *a, const char *name, json_t *v, bool current)
{
    const char *cn = json_string_value(json_object_get(v, "containerName"));
    int version = (int)json_integer_value(json_object_get(v, "version"));
    char path[PATH_MAX];
    docker_container_state st;
    gb_err e = GB_ERR_INIT;
    if (docker_container_state_get(a->docker, cn, &st, &e) == 0) {
        json_object_set_new(v, "source", json_string("container"));
        json_object_set_new(v, "status", json_string(st.status));
        return;
    }
    if (replicaset_logs_path(a, name, version, path, sizeof(path)) == 0 &&
        access(path, R_OK) == 0) {
        json_object_set_new(v, "source", json_string("kept"));
        return;
    }
    json_object_set_new(v, "source", json_string("none"));
    char why[700];
    if (e.code != ERR_NOT_FOUND)
        snprintf(why, sizeof(why), "Docker did not answer: %.500s", e.msg);
    else
        snprintf(why, sizeof(why),
                 current ? "container %s is gone and no lines of it were kept"
                         : "container %s was removed and no lines of it were kept (gpubox keeps "
                           "the last lines of a version's container when it removes it; this one "
                           "went before that, or keeping them failed)",
                 cn);
    json_object_set_new(v, "note", json_string(why));
}

int replicaset_logs_plan(app *a, const char *name, const replicaset_logs_request *rq, json_t **out,
                         gb_err *err)
{
    *out = NULL;
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_record_load_named(a, name, &r, err) < 0)
        return -1;
    _cleanup_json_ json_t *all = json_array();
    if (replicaset_logs_versions(a, name, all, err) < 0)
        return -1;
    size_t n = json_array_size(all);
    size_t first = rq->versions <= 0 || (size_t)rq->versions >= n ? 0 : n - (size_t)rq->versions;
    json_t *chosen = json_array();
    for (size_t i = first; i < n; i++) {
        json_t *v = json_array_get(all, i);
        bool current = json_integer_value(json_object_get(v, "version")) == r.version;
        /* A version's container may be the current one only while the
         * set is not deleted. */
        replicaset_logs_source(a, name, v, current && r.state != RS_STATE_DELETED);
        json_object_set_new(v, "current", json_boolean(current));
        json_array_append(chosen, v);
    }
    *out = json_pack("{s:s, s:i, s:s, s:o}", "name", name, "version", r.version, "state",
                     replicaset_state_name(r.state), "versions", chosen);
    return 0;
}

/* ---- reading ------------------------------------------------------------------ */

/* "2026-11-22T01:28:28.123456789Z" as unix seconds; 0 when it is not. */
static int64_t replicaset_logs_time_s(const char *t)
{
    int64_t s = 0;
    return t && time_rfc3339_parse(t, &s) == 0 ? s : 0;
}

struct replicaset_read {
    const replicaset_logs_request *rq;
    int version;
    replicaset_log_fn fn;
    void *ctx;
    bool stopped;
};

static bool replicaset_read_line(void *ctx, const docker_log_line *l)
{
    struct replicaset_read *rd = ctx;
    replicaset_log_line line = {.version = rd->version,
                                .stream = l->stream,
                                .time = l->time,
                                .text = l->text,
                                .len = l->len,
                                .partial = l->partial};
    if (!rd->fn(rd->ctx, &line))
        rd->stopped = true;
    return !rd->stopped;
}

/* A kept line read back, or NULL when it is not one or comes before since. */
static json_t *replicaset_kept_parse(const char *buf, int64_t since)
{
    json_t *o = json_loads(buf, 0, NULL);
    if (!o || !json_is_object(o))
        return json_decref(o), NULL;
    int64_t t = replicaset_logs_time_s(json_string_value(json_object_get(o, "time")));
    if (since > 0 && t < since)
        return json_decref(o), NULL;
    return o;
}

/* The kept lines of a version, since and tail applied: line by line (a
 * count first when tail asks for the last ones), never the whole file. */
static int replicaset_logs_read_kept(app *a, const char *name, struct replicaset_read *rd,
                                     long tail, gb_err *err)
{
    char path[PATH_MAX];
    if (replicaset_logs_path(a, name, rd->version, path, sizeof(path)) < 0)
        return err_set(err, ERR_INTERNAL, "the logs path of %s is too long", name);
    FILE *f = fopen(path, "re");
    if (!f)
        return err_set(err, ERR_INTERNAL, "reading the kept logs of %s version %d: %s", name,
                       rd->version, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    size_t skip = 0;
    if (tail >= 0) {
        size_t n = 0;
        while (getline(&buf, &cap, f) > 0) {
            json_t *o = replicaset_kept_parse(buf, rd->rq->since);
            n += o != NULL;
            json_decref(o);
        }
        skip = (size_t)tail < n ? n - (size_t)tail : 0;
        rewind(f);
    }
    while (!rd->stopped && getline(&buf, &cap, f) > 0) {
        _cleanup_json_ json_t *o = replicaset_kept_parse(buf, rd->rq->since);
        if (!o)
            continue;
        if (skip) {
            skip--;
            continue;
        }
        json_t *tj = json_object_get(o, "text");
        const char *text = json_string_value(tj);
        const char *time = json_string_value(json_object_get(o, "time"));
        replicaset_log_line line = {
            .version = rd->version,
            .stream = replicaset_stream_of(json_string_value(json_object_get(o, "stream"))),
            .time = time ? time : "",
            .text = text ? text : "",
            .len = text ? json_string_length(tj) : 0};
        if (!rd->fn(rd->ctx, &line))
            rd->stopped = true;
    }
    free(buf);
    fclose(f);
    return 0;
}

int replicaset_logs_read(app *a, const json_t *plan, const replicaset_logs_request *rq,
                         replicaset_log_fn fn, void *ctx, gb_err *err)
{
    const char *name = json_string_value(json_object_get(plan, "name"));
    json_t *versions = json_object_get(plan, "versions");
    size_t n = json_array_size(versions);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(versions, i);
        const char *source = json_string_value(json_object_get(v, "source"));
        struct replicaset_read rd = {.rq = rq,
                                     .version =
                                         (int)json_integer_value(json_object_get(v, "version")),
                                     .fn = fn,
                                     .ctx = ctx};
        int rc = 0;
        /* Only the last version asked for is followed: the others have
         * been replaced and will write nothing more. */
        bool follow = rq->follow && i + 1 == n;
        long tail = rq->tails ? rq->tails[i] : rq->tail;
        if (tail == 0 && !follow)
            continue;
        if (source && strcmp(source, "container") == 0) {
            docker_logs_opts o = {
                .tail = tail, .since = rq->since, .follow = follow, .cancel = rq->cancel};
            rc = docker_container_log_lines(a->docker,
                                            json_string_value(json_object_get(v, "containerName")),
                                            &o, replicaset_read_line, &rd, err);
        } else if (source && strcmp(source, "kept") == 0) {
            rc = replicaset_logs_read_kept(a, name, &rd, tail, err);
        }
        if (rc < 0)
            return err_prefix(err, "reading the logs of %s version %d", name, rd.version);
        if (rd.stopped || (rq->cancel && atomic_load(rq->cancel)))
            return 0;
    }
    return 0;
}
