/*
 * docker_archive.c - read a container's filesystem changes and move files
 * in and out of it as tar streams: what the portable way of carrying a
 * system disk (DESIGN.md section 2) is built from, for storage drivers
 * other than overlay2.
 *
 * Archives stream between Docker and a file descriptor: the download's
 * sink writes each piece to the fd as curl receives it, and the upload's
 * source reads the fd as curl sends (chunked, since the size is not known).
 * Neither holds more than curl's buffer in memory, so a system disk of many
 * gigabytes costs no memory. Instead of a total time limit, which no size
 * would fit, a transfer that moves nothing for DOCKER_ARCHIVE_STALL_S fails.
 *
 * Writing to a pipe whose reader is gone raises SIGPIPE; gpuboxd ignores
 * that signal, so the write fails with EPIPE and the call reports it.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/cleanup.h"

#define DOCKER_ARCHIVE_STALL_S 60L
/* The most of an error answer kept for its message. */
#define DOCKER_ARCHIVE_ERROR_BODY 4096

static int docker_change_cmp(const void *a, const void *b)
{
    const char *pa = json_string_value(json_object_get(*(json_t *const *)a, "Path"));
    const char *pb = json_string_value(json_object_get(*(json_t *const *)b, "Path"));
    return strcmp(pa ? pa : "", pb ? pb : "");
}

/* Docker lists changes in the order it walks the layer, which varies.
 * Sorted by path, a directory comes before everything in it (a prefix
 * sorts first), which is the order a copy must create them in. */
static json_t *docker_changes_sorted(json_t *changes)
{
    size_t n = json_array_size(changes);
    _cleanup_free_ json_t **items = xcalloc(n ? n : 1, sizeof(*items));
    json_t *sorted = json_array();
    for (size_t i = 0; i < n; i++)
        items[i] = json_array_get(changes, i);
    qsort(items, n, sizeof(*items), docker_change_cmp);
    for (size_t i = 0; i < n; i++)
        json_array_append(sorted, items[i]);
    return sorted;
}

int docker_container_changes(docker_client *c, const char *id_or_name, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = docker_container_path(id_or_name, "/changes", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    /* A container with a large upper layer takes a while to walk. */
    if (docker_call(c, "GET", path, NULL, DOCKER_LONG_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "listing changes of container '%s'", id_or_name);
    if (status != 200)
        return docker_status_err(status, resp, err, "listing changes of container '%s'",
                                 id_or_name);
    if (json_is_null(resp) || !resp) /* Docker says null when nothing changed */
        *out = json_array();
    else if (json_is_array(resp))
        *out = docker_changes_sorted(resp);
    else
        return err_set(err, ERR_INTERNAL,
                       "listing changes of container '%s': Docker's answer is not a list",
                       id_or_name);
    return 0;
}

/* "/containers/<id>/archive?path=<escaped path>" */
static char *docker_archive_url(const char *id, const char *path, gb_err *err)
{
    if (!path || path[0] != '/') {
        err_set(err, ERR_INVALID_PARAMS, "archive path '%s' is not absolute",
                path ? path : "(null)");
        return NULL;
    }
    _cleanup_free_ char *esc = docker_escape(path, "/");
    _cleanup_free_ char *rest = xasprintf("/archive?path=%s", esc);
    return docker_container_path(id, rest, err);
}

/* The same for a transfer to or from fd. */
static char *docker_archive_path(const char *id, const char *path, int fd, gb_err *err)
{
    if (fd < 0) {
        err_set(err, ERR_INVALID_PARAMS, "archive of '%s': no file descriptor given",
                path ? path : "(null)");
        return NULL;
    }
    return docker_archive_url(id, path, err);
}

int docker_container_path_exists(docker_client *c, const char *id_or_name, const char *path,
                                 bool *exists, gb_err *err)
{
    *exists = false;
    _cleanup_free_ char *url_path = docker_archive_url(id_or_name, path, err);
    if (!url_path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "HEAD", url_path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "looking for '%s' in container '%s'", path, id_or_name);
    if (status == 200)
        *exists = true;
    else if (status != 404)
        return docker_status_err(status, NULL, err, "looking for '%s' in container '%s'", path,
                                 id_or_name);
    return 0;
}

/* Where the body of an archive call goes: the tar to fd when Docker says
 * 200, anything else (an error answer) to a small buffer for its message. */
struct docker_archive_io {
    const struct docker_req *req;
    int fd;
    int io_errno; /* errno of a failed read or write of fd */
    struct docker_buf answer;
};

static bool docker_write_all(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, data, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return false;
        data += done;
        n -= (size_t)done;
    }
    return true;
}

static size_t docker_archive_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_archive_io *io = userdata;
    size_t n = size * nmemb;
    if (io->req->status == 200) {
        if (docker_write_all(io->fd, data, n))
            return n;
        io->io_errno = errno ? errno : EIO;
        return 0;
    }
    size_t room = io->answer.limit - io->answer.len;
    if (room > 0)
        docker_buf_append(&io->answer, data, n < room ? n : room);
    return n;
}

static size_t docker_archive_source(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct docker_archive_io *io = userdata;
    for (;;) {
        ssize_t n = read(io->fd, buf, size * nitems);
        if (n >= 0)
            return (size_t)n;
        if (errno != EINTR) {
            io->io_errno = errno;
            return CURL_READFUNC_ABORT;
        }
    }
}

/* Send an archive request and turn its outcome into 0 or an error. */
static int docker_archive_send(docker_client *c, struct docker_req *req,
                               struct docker_archive_io *io, const char *what, gb_err *err)
{
    io->req = req;
    io->answer.limit = DOCKER_ARCHIVE_ERROR_BODY;
    req->stall_s = DOCKER_ARCHIVE_STALL_S;
    req->sink = docker_archive_sink;
    req->sink_ctx = io;
    int rc = docker_send(c, req, err);
    _cleanup_json_ json_t *resp =
        io->answer.len ? json_loadb(io->answer.data, io->answer.len, 0, NULL) : NULL;
    free(io->answer.data);
    /* Docker may answer an error before it has read the whole upload, and
     * then the send fails: its answer is the better reason. */
    if (req->status >= 400)
        return docker_status_err(req->status, resp, err, "%s", what);
    if (io->io_errno)
        return err_set(err, ERR_INTERNAL, "%s: %s the archive failed: %s", what,
                       req->source ? "reading" : "writing", strerror(io->io_errno));
    if (rc < 0)
        return err_prefix(err, "%s", what);
    if (req->status != 200)
        return docker_status_err(req->status, resp, err, "%s", what);
    return 0;
}

int docker_container_archive_get(docker_client *c, const char *id_or_name, const char *path, int fd,
                                 gb_err *err)
{
    _cleanup_free_ char *url_path = docker_archive_path(id_or_name, path, fd, err);
    if (!url_path)
        return -1;
    char what[512];
    snprintf(what, sizeof(what), "copying '%s' out of container '%s'", path, id_or_name);
    struct docker_req req = {.method = "GET", .path = url_path};
    struct docker_archive_io io = {.fd = fd};
    return docker_archive_send(c, &req, &io, what, err);
}

int docker_container_archive_put(docker_client *c, const char *id_or_name, const char *dir, int fd,
                                 gb_err *err)
{
    _cleanup_free_ char *url_path = docker_archive_path(id_or_name, dir, fd, err);
    if (!url_path)
        return -1;
    char what[512];
    snprintf(what, sizeof(what), "copying an archive into '%s' of container '%s'", dir, id_or_name);
    struct docker_req req = {.method = "PUT",
                             .path = url_path,
                             .source = docker_archive_source,
                             .content_type = "application/x-tar"};
    struct docker_archive_io io = {.fd = fd};
    req.source_ctx = &io;
    return docker_archive_send(c, &req, &io, what, err);
}
