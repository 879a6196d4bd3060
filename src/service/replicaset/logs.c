/*
 * logs.c - what a replica set's containers wrote (GET .../logs): the
 * current version's from Docker, following it if asked, and older
 * versions' from what gpubox kept when their containers were removed.
 *
 * A new version removes the old container (version.c), and a delete
 * removes the last one; just before, rs_logs_keep copies the container's
 * last RS_LOGS_KEEP_LINES lines, with Docker's timestamps, into
 * <data_dir>/logs/<name>/<version>.ndjson (one JSON object a line:
 * {"time", "stream", "text"}), written to a temporary name and renamed,
 * so a file is whole or absent. Keeping them is best effort: a failure is
 * logged and never stops the change. A purge removes the folder. The
 * files are the node's own: in a fleet the node holding the set answers.
 *
 * Reading is two calls: replicaset_logs_plan checks the name and the
 * caller's right to see the set and says, per version asked for, where its
 * lines come from ("container", "kept" or "none" and why), so that every
 * error comes before a streamed answer begins; replicaset_logs_read then
 * hands the lines on, the oldest version first.
 */
#include "service/replicaset/replicaset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "util/log.h"
#include "util/time.h"

#define RS_LOGS_DIR "logs"

static const char *rs_stream_name(int stream)
{
    return stream == 2 ? "stderr" : "stdout";
}

static int rs_stream_of(const char *name)
{
    return name && strcmp(name, "stderr") == 0 ? 2 : 1;
}

/* <data_dir>/logs/<name>[/<version>.ndjson]; -1 when it does not fit. */
static int rs_logs_path(const app *a, const char *name, int version, char *buf, size_t size)
{
    int n = version > 0 ? snprintf(buf, size, "%s/" RS_LOGS_DIR "/%s/%d.ndjson", a->cfg.data_dir,
                                   name, version)
                        : snprintf(buf, size, "%s/" RS_LOGS_DIR "/%s", a->cfg.data_dir, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* ---- keeping ------------------------------------------------------------------ */

static bool rs_keep_line(void *ctx, const docker_log_line *l)
{
    FILE *f = ctx;
    _cleanup_json_ json_t *o =
        json_pack("{s:s, s:s, s:o}", "time", l->time, "stream", rs_stream_name(l->stream), "text",
                  json_string_lossy(l->text, l->len));
    return o && json_dumpf(o, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF;
}

static int rs_mkdir(const char *path)
{
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

void rs_logs_keep(app *a, const char *name, int version, const char *container)
{
    char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8], top[PATH_MAX];
    if (!a->cfg.data_dir || rs_logs_path(a, name, 0, dir, sizeof(dir)) < 0 ||
        rs_logs_path(a, name, version, path, sizeof(path)) < 0)
        return;
    snprintf(top, sizeof(top), "%s/" RS_LOGS_DIR, a->cfg.data_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (rs_mkdir(top) < 0 || rs_mkdir(dir) < 0) {
        log_warn("replica sets: cannot keep the logs of %s: %s: %s", container, dir,
                 strerror(errno));
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
    docker_logs_opts o = {.tail = RS_LOGS_KEEP_LINES};
    gb_err e = GB_ERR_INIT;
    int rc = docker_container_log_lines(a->docker, container, &o, rs_keep_line, f, &e);
    bool ok = fclose(f) == 0 && rc == 0;
    if (ok && rename(tmp, path) == 0)
        return;
    unlink(tmp);
    if (rc < 0 && e.code == ERR_NOT_FOUND)
        return; /* nothing to keep: the container is gone already */
    log_warn("replica sets: cannot keep the logs of %s: %s", container,
             rc < 0 ? e.msg : strerror(errno));
}

void rs_logs_forget(app *a, const char *name)
{
    char dir[PATH_MAX];
    if (!a->cfg.data_dir || rs_logs_path(a, name, 0, dir, sizeof(dir)) < 0)
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
static int rs_logs_versions(app *a, const char *name, json_t *out, gb_err *err)
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
static void rs_logs_source(app *a, const char *name, json_t *v, bool current)
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
    if (rs_logs_path(a, name, version, path, sizeof(path)) == 0 && access(path, R_OK) == 0) {
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

int replicaset_logs_plan(app *a, const char *name, const rs_logs_request *rq, json_t **out,
                         gb_err *err)
{
    *out = NULL;
    _cleanup_(rs_record_free) rs_record r = {0};
    if (rs_record_load_named(a, name, &r, err) < 0)
        return -1;
    _cleanup_json_ json_t *all = json_array();
    if (rs_logs_versions(a, name, all, err) < 0)
        return -1;
    size_t n = json_array_size(all);
    size_t first = rq->versions <= 0 || (size_t)rq->versions >= n ? 0 : n - (size_t)rq->versions;
    json_t *chosen = json_array();
    for (size_t i = first; i < n; i++) {
        json_t *v = json_array_get(all, i);
        bool current = json_integer_value(json_object_get(v, "version")) == r.version;
        /* A version's container may be the current one only while the
         * set is not deleted. */
        rs_logs_source(a, name, v, current && r.state != RS_STATE_DELETED);
        json_object_set_new(v, "current", json_boolean(current));
        json_array_append(chosen, v);
    }
    *out = json_pack("{s:s, s:i, s:s, s:o}", "name", name, "version", r.version, "state",
                     rs_state_name(r.state), "versions", chosen);
    return 0;
}

/* ---- reading ------------------------------------------------------------------ */

/* "2026-11-22T01:28:28.123456789Z" as unix seconds; 0 when it is not. */
static int64_t rs_logs_time_s(const char *t)
{
    int64_t s = 0;
    return t && time_rfc3339_parse(t, &s) == 0 ? s : 0;
}

struct rs_read {
    const rs_logs_request *rq;
    int version;
    rs_log_fn fn;
    void *ctx;
    bool stopped;
};

static bool rs_read_line(void *ctx, const docker_log_line *l)
{
    struct rs_read *rd = ctx;
    rs_log_line line = {.version = rd->version,
                        .stream = l->stream,
                        .time = l->time,
                        .text = l->text,
                        .len = l->len,
                        .partial = l->partial};
    if (!rd->fn(rd->ctx, &line))
        rd->stopped = true;
    return !rd->stopped;
}

/* The kept lines of a version, since and tail applied. */
static int rs_logs_read_kept(app *a, const char *name, struct rs_read *rd, gb_err *err)
{
    char path[PATH_MAX];
    if (rs_logs_path(a, name, rd->version, path, sizeof(path)) < 0)
        return err_set(err, ERR_INTERNAL, "the logs path of %s is too long", name);
    FILE *f = fopen(path, "re");
    if (!f)
        return err_set(err, ERR_INTERNAL, "reading the kept logs of %s version %d: %s", name,
                       rd->version, strerror(errno));
    _cleanup_json_ json_t *lines = json_array();
    char *buf = NULL;
    size_t cap = 0;
    while (getline(&buf, &cap, f) > 0) {
        json_t *o = json_loads(buf, 0, NULL);
        if (!o)
            continue;
        int64_t t = rs_logs_time_s(json_string_value(json_object_get(o, "time")));
        if (rd->rq->since > 0 && t < rd->rq->since) {
            json_decref(o);
            continue;
        }
        json_array_append_new(lines, o);
    }
    free(buf);
    fclose(f);
    size_t n = json_array_size(lines);
    size_t from = rd->rq->tail >= 0 && (size_t)rd->rq->tail < n ? n - (size_t)rd->rq->tail : 0;
    for (size_t i = from; i < n && !rd->stopped; i++) {
        json_t *o = json_array_get(lines, i);
        const char *text = json_string_value(json_object_get(o, "text"));
        const char *time = json_string_value(json_object_get(o, "time"));
        rs_log_line line = {.version = rd->version,
                            .stream = rs_stream_of(json_string_value(json_object_get(o, "stream"))),
                            .time = time ? time : "",
                            .text = text ? text : "",
                            .len = text ? json_string_length(json_object_get(o, "text")) : 0};
        if (!rd->fn(rd->ctx, &line))
            rd->stopped = true;
    }
    return 0;
}

int replicaset_logs_read(app *a, const json_t *plan, const rs_logs_request *rq, rs_log_fn fn,
                         void *ctx, gb_err *err)
{
    const char *name = json_string_value(json_object_get(plan, "name"));
    json_t *versions = json_object_get(plan, "versions");
    size_t n = json_array_size(versions);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(versions, i);
        const char *source = json_string_value(json_object_get(v, "source"));
        struct rs_read rd = {.rq = rq,
                             .version = (int)json_integer_value(json_object_get(v, "version")),
                             .fn = fn,
                             .ctx = ctx};
        int rc = 0;
        if (source && strcmp(source, "container") == 0) {
            /* Only the last version asked for is followed: the others have
             * been replaced and will write nothing more. */
            docker_logs_opts o = {.tail = rq->tail,
                                  .since = rq->since,
                                  .follow = rq->follow && i + 1 == n,
                                  .cancel = rq->cancel};
            rc = docker_container_log_lines(a->docker,
                                            json_string_value(json_object_get(v, "containerName")),
                                            &o, rs_read_line, &rd, err);
        } else if (source && strcmp(source, "kept") == 0) {
            rc = rs_logs_read_kept(a, name, &rd, err);
        }
        if (rc < 0)
            return err_prefix(err, "reading the logs of %s version %d", name, rd.version);
        if (rd.stopped || (rq->cancel && atomic_load(rq->cancel)))
            return 0;
    }
    return 0;
}
