/*
 * cmd_exec_stream.c - `gpubox exec -it NAME -- CMD` and `-i`: the command
 * joined to this terminal (or these pipes) through gpuboxd's terminal
 * WebSocket (docs/access.md), as `docker exec -it` does.
 *
 * curl makes the connection (plain or TLS, as for every other call) and
 * then hands it over (CURLOPT_CONNECT_ONLY); this file sends the
 * WebSocket handshake and frames over it (http/websocket.h). One loop
 * polls stdin and the connection: stdin's bytes go out as binary messages;
 * the server's binary messages are the command's output (with -t as the
 * terminal shows it; without, each begins with a byte naming stdout or
 * stderr); {"exit": N} is the exit code. With -t stdin is put in raw mode
 * (restored on the way out, whatever ends the loop), so keys such as ^C
 * reach the remote shell, and the window's size is sent at the start and
 * after each SIGWINCH. Without -t, the end of stdin is sent as {"eof":
 * true}, which closes the command's input.
 *
 * Nothing here blocks on a send: what the connection cannot take waits in
 * a buffer, and stdin is not read while that buffer is full, so a command
 * that echoes a large input back never deadlocks against us.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <termios.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http/websocket.h"
#include "util/base64.h"
#include "util/cleanup.h"

#define STREAM_READ 32768
#define STREAM_HIGH_WATER (1024u * 1024)
#define STREAM_MAX_MESSAGE (16u * 1024 * 1024)

typedef struct stream_conn {
    CURL *curl;
    int fd;
    ws_reader reader;
    uint8_t *out; /* frames waiting to be sent */
    size_t out_off, out_len, out_cap;
    bool tty;
    bool stdin_open;
    long exit_code; /* -1: not told */
    bool closed;    /* the server's close frame came */
    uint16_t close_code;
    char close_why[128];
} stream_conn;

static volatile sig_atomic_t stream_winch;
static struct termios stream_saved;
static bool stream_raw;

static void stream_on_winch(int sig)
{
    (void)sig;
    stream_winch = 1;
}

static void stream_restore_tty(void)
{
    if (stream_raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &stream_saved);
        stream_raw = false;
    }
}

static void stream_queue(stream_conn *c, enum ws_opcode op, const uint8_t *data, size_t n)
{
    uint8_t mask[4];
    if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
        memset(mask, 0x5a, sizeof(mask));
    uint8_t head[WS_HEADER_MAX];
    size_t hl = ws_frame_header(head, op, true, n, mask);
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + hl + n > c->out_cap) {
        if (c->out_off) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        size_t cap = c->out_cap ? c->out_cap : 65536;
        while (cap < c->out_len + hl + n)
            cap *= 2;
        c->out = xrealloc(c->out, cap);
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, head, hl);
    memcpy(c->out + c->out_len + hl, data, n);
    ws_mask(c->out + c->out_len + hl, n, mask, 0);
    c->out_len += hl + n;
}

static void stream_queue_text(stream_conn *c, const char *text)
{
    stream_queue(c, WS_OP_TEXT, (const uint8_t *)text, strlen(text));
}

/* Send what the connection takes now; -1 when it is gone. */
static int stream_flush(stream_conn *c)
{
    while (c->out_off < c->out_len) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(c->curl, c->out + c->out_off, c->out_len - c->out_off, &sent);
        if (rc == CURLE_AGAIN)
            return 0;
        if (rc != CURLE_OK)
            return -1;
        c->out_off += sent;
    }
    return 0;
}

/* Send everything, waiting as needed (the handshake, the last frames). */
static int stream_flush_all(stream_conn *c)
{
    while (c->out_off < c->out_len) {
        if (stream_flush(c) < 0)
            return -1;
        if (c->out_off < c->out_len) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            poll(&p, 1, 1000);
        }
    }
    return 0;
}

static void stream_send_size(stream_conn *c)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
        return;
    char msg[96];
    snprintf(msg, sizeof(msg), "{\"resize\":{\"cols\":%u,\"rows\":%u}}", ws.ws_col, ws.ws_row);
    stream_queue_text(c, msg);
}

static void stream_write_all(int fd, const uint8_t *data, size_t n)
{
    while (n) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stdout closed: the output has nowhere to go */
        data += w, n -= (size_t)w;
    }
}

static void stream_message(stream_conn *c, const ws_message *m)
{
    switch (m->op) {
    case WS_OP_BINARY:
        if (c->tty)
            stream_write_all(STDOUT_FILENO, m->data, m->len);
        else if (m->len)
            stream_write_all(m->data[0] == 2 ? STDERR_FILENO : STDOUT_FILENO, m->data + 1,
                             m->len - 1);
        break;
    case WS_OP_TEXT: {
        _cleanup_json_ json_t *j = json_loadb((const char *)m->data, m->len, 0, NULL);
        json_t *code = json_object_get(j, "exit");
        if (json_is_integer(code))
            c->exit_code = (long)json_integer_value(code);
        break;
    }
    case WS_OP_PING:
        stream_queue(c, WS_OP_PONG, m->data, m->len);
        break;
    case WS_OP_CLOSE:
        c->closed = true;
        c->close_code = m->close_code;
        if (m->len > 2)
            snprintf(c->close_why, sizeof(c->close_why), "%.*s", (int)(m->len - 2), m->data + 2);
        stream_queue(c, WS_OP_CLOSE, m->data, m->len >= 2 ? 2 : 0);
        break;
    default:
        break;
    }
}

/* Read what the server sent; -1 when the connection is gone or broken. */
static int stream_read(stream_conn *c)
{
    for (;;) {
        uint8_t buf[STREAM_READ];
        size_t n = 0;
        CURLcode rc = curl_easy_recv(c->curl, buf, sizeof(buf), &n);
        if (rc == CURLE_AGAIN)
            return 0;
        if (rc != CURLE_OK || n == 0)
            return -1;
        ws_reader_feed(&c->reader, buf, n);
        ws_message m;
        int got;
        while (!c->closed && (got = ws_reader_next(&c->reader, &m)) != 0) {
            if (got < 0)
                return -1;
            stream_message(c, &m);
        }
        if (c->closed)
            return 0;
    }
}

/* stdin's bytes out; at its end, {"eof": true} without a TTY. */
static void stream_read_stdin(stream_conn *c)
{
    uint8_t buf[STREAM_READ];
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        c->stdin_open = false;
        if (!c->tty)
            stream_queue_text(c, "{\"eof\":true}");
        return;
    }
    stream_queue(c, WS_OP_BINARY, buf, (size_t)n);
}

/* The loop; returns when the server closed or the connection is gone. */
static int stream_pump(stream_conn *c)
{
    while (!c->closed) {
        if (c->tty && stream_winch) {
            stream_winch = 0;
            stream_send_size(c);
        }
        bool pending = c->out_off < c->out_len;
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN | (pending ? POLLOUT : 0)},
                              {.fd = -1}};
        if (c->stdin_open && c->out_len - c->out_off < STREAM_HIGH_WATER)
            p[1] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(p, 2, 1000) < 0 && errno != EINTR)
            return -1;
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && stream_read(c) < 0)
            return -1;
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
            stream_read_stdin(c);
        if (stream_flush(c) < 0)
            return -1;
    }
    stream_flush_all(c);
    return 0;
}

/* The handshake: send it and read the answer's head (what follows it is
 * the first WebSocket bytes, fed to the reader). 0 on 101; else the exit
 * code with the server's message printed. */
static int stream_handshake(cli_ctx *ctx, stream_conn *c, const char *path)
{
    uint8_t nonce[16];
    if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        return cli_fail(ctx, CLI_EXIT_ERROR, "no randomness for the WebSocket key");
    _cleanup_free_ char *key = base64_encode(nonce, sizeof(nonce));
    const char *host = strstr(ctx->host, "://") + 3;
    _cleanup_free_ char *auth =
        ctx->token ? xasprintf("Authorization: Bearer %s\r\n", ctx->token) : xstrdup("");
    _cleanup_free_ char *req =
        xasprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n%s\r\n",
                  path, host, key, auth);
    size_t len = strlen(req);
    /* Sent unmasked and unframed: it is HTTP. */
    c->out = xrealloc(c->out, len);
    memcpy(c->out, req, len);
    c->out_off = 0, c->out_len = c->out_cap = len;
    if (stream_flush_all(c) < 0)
        return cli_fail(ctx, CLI_EXIT_ERROR, "lost the connection to %s", ctx->host);
    c->out_off = c->out_len = 0;

    char *head = xmalloc(65536 + 1);
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(c->curl, head + n, 65536 - n, &got);
        if (rc == CURLE_AGAIN) {
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            poll(&p, 1, 30000);
            continue;
        }
        if (rc != CURLE_OK || got == 0 || n + got >= 65536) {
            free(head);
            return cli_fail(ctx, CLI_EXIT_ERROR, "%s closed the connection during the handshake",
                            ctx->host);
        }
        n += got;
        head[n] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    long status = 0;
    sscanf(head, "HTTP/%*s %ld", &status);
    char *body = end + 4;
    size_t have = n - (size_t)(body - head);
    if (status == 101) {
        ws_reader_feed(&c->reader, body, have);
        free(head);
        return 0;
    }
    /* An error envelope: read it whole (Content-Length) and report it. */
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    size_t want = cl ? strtoul(cl + 17, NULL, 10) : have;
    while (have < want && n < 65536) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(c->curl, head + n, 65536 - n, &got);
        if (rc == CURLE_AGAIN) {
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            poll(&p, 1, 5000);
            continue;
        }
        if (rc != CURLE_OK || got == 0)
            break;
        n += got, have += got;
        head[n] = '\0';
    }
    cli_reply r;
    int rc = cli_reply_parse(ctx, "GET", path, body, status, &r);
    cli_reply_free(&r);
    free(head);
    return rc ? rc : CLI_EXIT_ERROR;
}

/* The terminal's path and query for a's command. */
static char *stream_path(cli_ctx *ctx, const cli_args *a, bool tty)
{
    _cleanup_free_ char *base = cli_path(ctx, "/api/v1/replicaSet", a->pos[0], "terminal");
    size_t cap = strlen(base) + 64, len = 0;
    char *path = xmalloc(cap);
    len = (size_t)snprintf(path, cap, "%s?tty=%s", base, tty ? "true" : "false");
    for (size_t i = 0; i < a->nrest; i++) {
        char *arg = curl_easy_escape(ctx->curl, a->rest[i], 0);
        size_t need = len + strlen(arg) + 6;
        if (need >= cap) {
            cap = need * 2;
            path = xrealloc(path, cap);
        }
        len += (size_t)snprintf(path + len, cap - len, "&cmd=%s", arg);
        curl_free(arg);
    }
    struct winsize ws;
    if (tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
        path = xrealloc(path, len + 48);
        snprintf(path + len, 48, "&cols=%u&rows=%u", ws.ws_col, ws.ws_row);
    }
    return path;
}

static int stream_connect(cli_ctx *ctx, stream_conn *c, const char *path)
{
    _cleanup_free_ char *url = xasprintf("%s%s", ctx->host, path);
    char errbuf[CURL_ERROR_SIZE] = "";
    c->curl = curl_easy_duphandle(ctx->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c->curl);
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        rc = curl_easy_getinfo(c->curl, CURLINFO_ACTIVESOCKET, &fd);
    if (rc != CURLE_OK || fd == CURL_SOCKET_BAD)
        return cli_fail(ctx, CLI_EXIT_ERROR, "cannot reach gpuboxd at %s: %s", ctx->host,
                        errbuf[0] ? errbuf : curl_easy_strerror(rc));
    c->fd = (int)fd;
    return 0;
}

int cli_exec_stream(cli_ctx *ctx, const cli_args *a, bool tty)
{
    if (tty && !isatty(STDIN_FILENO))
        return cli_usage_error(ctx, a->cmd,
                               "-t needs a terminal on stdin; leave it out to pipe input (-i)");
    _cleanup_free_ char *path = stream_path(ctx, a, tty);
    stream_conn c = {.fd = -1, .tty = tty, .stdin_open = true, .exit_code = -1};
    ws_reader_init(&c.reader, false, STREAM_MAX_MESSAGE);
    int rc = stream_connect(ctx, &c, path);
    if (rc == 0)
        rc = stream_handshake(ctx, &c, path);
    if (rc == 0) {
        if (tty && tcgetattr(STDIN_FILENO, &stream_saved) == 0) {
            struct termios raw = stream_saved;
            cfmakeraw(&raw);
            if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0) {
                stream_raw = true;
                atexit(stream_restore_tty);
            }
            struct sigaction sa = {.sa_handler = stream_on_winch};
            sigaction(SIGWINCH, &sa, NULL);
        }
        signal(SIGPIPE, SIG_IGN);
        int lost = stream_pump(&c);
        stream_restore_tty();
        if (c.exit_code >= 0)
            rc = c.exit_code > 255 ? CLI_EXIT_ERROR : (int)c.exit_code;
        else if (lost < 0 || !c.closed)
            rc = cli_fail(ctx, CLI_EXIT_ERROR, "lost the connection to %s", ctx->host);
        else
            rc = cli_fail(ctx, CLI_EXIT_ERROR, "the terminal was closed: %s",
                          c.close_why[0] ? c.close_why : "by the server");
    }
    ws_reader_free(&c.reader);
    free(c.out);
    if (c.curl)
        curl_easy_cleanup(c.curl);
    return rc;
}
