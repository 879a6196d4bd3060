/*
 * docker_exec_stream.c - an interactive exec: a process in a container
 * whose stdin and output are one two-way byte stream, as `docker exec -it`
 * (and `-i`) make it.
 *
 * Three steps:
 *   1. POST /containers/{id}/exec with stdin, stdout and stderr attached,
 *      and a TTY when asked;
 *   2. POST /exec/{eid}/start on a connection of its own, asking to
 *      upgrade it ("Connection: Upgrade", "Upgrade: tcp"); Docker answers
 *      101 (or 200 from older daemons) and from then on the connection is
 *      the process's stream: what is written is its stdin, what is read its
 *      output (raw with a TTY; else multiplexed as docker_stream.c reads
 *      it), and shutting down the write side closes its stdin. curl cannot
 *      hand such a connection over, so this file writes the request and
 *      reads the answer's head itself, a byte at a time so no byte of the
 *      stream is read into a buffer that is then lost;
 *   3. POST /exec/{eid}/resize?h=&w= whenever the window changes.
 *
 * When the stream is closed while the process still runs (the client went
 * away), its process tree is killed (docker_exec_watch.c), since Docker
 * leaves an exec whose client vanished running.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* The answer's head is a few lines; more means something else answered. */
#define DOCKER_HIJACK_HEAD_MAX 8192
#define DOCKER_HIJACK_TIMEOUT_MS 30000
/* After the stream ends, how long Docker has to record the exit code. */
#define DOCKER_EXEC_STREAM_EXIT_WAIT_MS 5000

struct docker_exec_stream {
    docker_client *c;
    char *eid;
    char *container;
    int fd;
    bool tty;
    /* Without a TTY, the frame being read (docker_internal.h, struct
     * docker_demux, says the format). */
    unsigned char header[8];
    size_t header_len;
    uint32_t frame_left;
};

static int docker_exec_stream_create(docker_client *c, const char *id,
                                     const docker_exec_stream_opts *o, char **eid, gb_err *err)
{
    _cleanup_json_ json_t *body =
        json_pack("{s:b, s:b, s:b, s:b, s:[]}", "AttachStdin", true, "AttachStdout", true,
                  "AttachStderr", true, "Tty", o->tty, "Cmd");
    for (size_t i = 0; i < o->ncmd; i++)
        json_array_append_new(json_object_get(body, "Cmd"), json_string(o->cmd[i]));
    if (o->tty)
        json_object_set_new(body, "Env", json_pack("[s]", "TERM=xterm-256color"));
    _cleanup_free_ char *path = docker_container_path(id, "/exec", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "running '%s' in container '%s'", o->cmd[0], id);
    if (status != 201)
        return docker_status_err(status, resp, err, "running '%s' in container '%s'", o->cmd[0],
                                 id);
    const char *s = json_string_value(json_object_get(resp, "Id"));
    if (!s)
        return err_set(err, ERR_INTERNAL,
                       "running '%s' in container '%s': Docker's answer has no Id", o->cmd[0], id);
    *eid = xstrdup(s);
    return 0;
}

/* Read one byte within the deadline: 1, 0 (closed), -1 (error or time). */
static int docker_read_byte(int fd, char *ch, long deadline_ms)
{
    for (;;) {
        long left = deadline_ms - time_mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        ssize_t n = read(fd, ch, 1);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : (int)n;
    }
}

/* The answer's head, up to and with its blank line, into head; the status. */
static int docker_read_head(int fd, char *head, size_t size, long *status, gb_err *err)
{
    long deadline = time_mono_ms() + DOCKER_HIJACK_TIMEOUT_MS;
    size_t n = 0;
    while (n + 1 < size) {
        char ch;
        if (docker_read_byte(fd, &ch, deadline) != 1)
            return err_set(err, ERR_INTERNAL,
                           "Docker closed or stalled the exec's stream before "
                           "it began");
        head[n++] = ch;
        head[n] = '\0';
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0) {
            if (sscanf(head, "HTTP/%*s %ld", status) != 1)
                return err_set(err, ERR_INTERNAL, "Docker's answer to an exec start is not HTTP");
            return 0;
        }
    }
    return err_set(err, ERR_INTERNAL, "Docker's answer to an exec start has an endless head");
}

/* An error answer's JSON body (Content-Length of it, at most 64 KiB). */
static json_t *docker_read_error_body(int fd, const char *head)
{
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    size_t len = cl ? strtoul(cl + 17, NULL, 10) : 0;
    if (len == 0 || len > 65536)
        return NULL;
    _cleanup_free_ char *body = xmalloc(len + 1);
    size_t got = 0;
    long deadline = time_mono_ms() + 5000;
    while (got < len && docker_read_byte(fd, body + got, deadline) == 1)
        got++;
    body[got] = '\0';
    return json_loadb(body, got, 0, NULL);
}

/* POST /exec/{eid}/start with the upgrade; on success fd is the stream. */
static int docker_exec_stream_start(docker_client *c, const char *eid, bool tty, int *fd_out,
                                    gb_err *err)
{
    _cleanup_close_ int fd = docker_connect_raw(c, err);
    if (fd < 0)
        return -1;
    /* Over tcp://, a keystroke typed before the last one's echo is back
     * goes at once, not after Docker's delayed acknowledgement (Nagle); a
     * Unix socket refuses the option, which is fine. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char body[64];
    int blen =
        snprintf(body, sizeof(body), "{\"Detach\":false,\"Tty\":%s}", tty ? "true" : "false");
    _cleanup_free_ char *req = xasprintf("POST %s/exec/%s/start HTTP/1.1\r\n"
                                         "Host: docker\r\n"
                                         "Content-Type: application/json\r\n"
                                         "Connection: Upgrade\r\n"
                                         "Upgrade: tcp\r\n"
                                         "Content-Length: %d\r\n\r\n%s",
                                         docker_api_prefix(), eid, blen, body);
    size_t len = strlen(req), off = 0;
    while (off < len) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return err_set(err, ERR_INTERNAL, "sending an exec start to Docker: %s",
                           strerror(errno));
        off += (size_t)n;
    }
    char head[DOCKER_HIJACK_HEAD_MAX];
    long status = 0;
    if (docker_read_head(fd, head, sizeof(head), &status, err) < 0)
        return -1;
    if (status != 101 && status != 200) {
        _cleanup_json_ json_t *resp = docker_read_error_body(fd, head);
        return docker_status_err(status, resp, err, "starting exec %.12s", eid);
    }
    *fd_out = fd;
    fd = -1;
    return 0;
}

int docker_exec_stream_open(docker_client *c, const char *id, const docker_exec_stream_opts *o,
                            docker_exec_stream **out, gb_err *err)
{
    *out = NULL;
    if (!o->cmd || o->ncmd == 0 || !o->cmd[0] || !*o->cmd[0])
        return err_set(err, ERR_INVALID_PARAMS, "exec in container '%s': the command is empty",
                       id ? id : "");
    _cleanup_free_ char *eid = NULL;
    if (docker_exec_stream_create(c, id, o, &eid, err) < 0)
        return -1;
    docker_exec_stream *s = xcalloc(1, sizeof(*s));
    s->c = c;
    s->eid = steal_ptr(&eid);
    s->container = xstrdup(id);
    s->fd = -1;
    s->tty = o->tty;
    if (docker_exec_stream_start(c, s->eid, o->tty, &s->fd, err) < 0) {
        err_prefix(err, "running '%s' in container '%s'", o->cmd[0], id);
        docker_exec_stream_close(s, false);
        return -1;
    }
    if (o->tty && o->cols && o->rows) {
        gb_err ignored = GB_ERR_INIT; /* a process that already ended has no window */
        docker_exec_stream_resize(s, o->cols, o->rows, &ignored);
    }
    *out = s;
    return 0;
}

int docker_exec_stream_fd(const docker_exec_stream *s)
{
    return s->fd;
}

int docker_exec_stream_resize(docker_exec_stream *s, unsigned cols, unsigned rows, gb_err *err)
{
    char path[200];
    snprintf(path, sizeof(path), "/exec/%s/resize?h=%u&w=%u", s->eid, rows, cols);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(s->c, "POST", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return -1;
    if (status != 200 && status != 201)
        return docker_status_err(status, resp, err, "resizing exec %.12s", s->eid);
    return 0;
}

int docker_exec_stream_split(docker_exec_stream *s, const uint8_t *data, size_t n,
                             docker_exec_emit_fn emit, void *ctx)
{
    if (s->tty) {
        emit(ctx, 1, data, n);
        return 0;
    }
    while (n) {
        if (s->frame_left == 0) {
            size_t take = 8 - s->header_len < n ? 8 - s->header_len : n;
            memcpy(s->header + s->header_len, data, take);
            s->header_len += take, data += take, n -= take;
            if (s->header_len < 8)
                return 0;
            s->header_len = 0;
            if (s->header[0] > 2 || s->header[1] || s->header[2] || s->header[3])
                return -1; /* not the multiplexed format */
            s->frame_left = ((uint32_t)s->header[4] << 24) | ((uint32_t)s->header[5] << 16) |
                            ((uint32_t)s->header[6] << 8) | s->header[7];
            continue;
        }
        size_t take = s->frame_left < n ? s->frame_left : n;
        emit(ctx, s->header[0] == 2 ? 2 : 1, data, take);
        s->frame_left -= (uint32_t)take, data += take, n -= take;
    }
    return 0;
}

long docker_exec_stream_exit_code(docker_exec_stream *s)
{
    long until = time_mono_ms() + DOCKER_EXEC_STREAM_EXIT_WAIT_MS;
    for (;;) {
        struct docker_exec_state st;
        gb_err err = GB_ERR_INIT;
        if (docker_exec_inspect(s->c, s->eid, &st, &err) < 0)
            return -1;
        if (!st.running)
            return st.exit_code;
        if (time_mono_ms() >= until)
            return -1;
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    }
}

void docker_exec_stream_close(docker_exec_stream *s, bool kill)
{
    if (!s)
        return;
    if (kill && s->fd >= 0) {
        gb_err e = GB_ERR_INIT;
        if (docker_exec_kill_tree(s->c, s->eid, &e) < 0)
            log_warn("exec %.12s in %s outlives its closed terminal: %s", s->eid, s->container,
                     e.msg);
    }
    if (s->fd >= 0)
        close(s->fd);
    free(s->eid);
    free(s->container);
    free(s);
}
