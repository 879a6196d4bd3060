/*
 * services_echo.c - a tiny HTTP and WebSocket server for the service
 * proxy's tests (test_services_proxy.py) and bench/proxy.sh, built
 * there with `gcc -static` and run inside the busybox test image.
 *
 *   services_echo PORT [log]
 *
 * For every connection (one process each), request after request while
 * the client keeps it open (HTTP/1.1 without "Connection: close"):
 *   - a WebSocket upgrade (RFC 6455): the handshake, then every data
 *     frame comes back with its opcode, unmasked; a close frame is
 *     answered with one and ends the connection;
 *   - GET /.../big?mb=N: N MiB of the bytes 0..255 repeated, with no
 *     Content-Length (the end is the close), written in 64 KiB pieces;
 *   - GET /.../chunked?n=N: N chunks "chunk I\n", chunked;
 *   - /.../nocontent: 204;
 *   - /.../quietclose: as any other request below, but the connection
 *     ends after the answer although the answer does not say so;
 *   - any other request: 200 with the request's head as it came
 *     (request line and headers), then "body-bytes=N" for a body framed
 *     by Content-Length (HEAD: the head alone).
 * Every answer but /big's and the WebSocket's carries X-Echo-Conn (the
 * serving process, one per connection) and X-Echo-Request (the request's
 * number on its connection), so a test sees whether a connection was
 * reused. With "log" after the port, every request line is written to
 * stdout as it comes (the container's log: what reached it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- SHA-1 (FIPS 180-1), for Sec-WebSocket-Accept only ---- */
static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = ((len + 8) / 64 + 1) * 64;
    unsigned char *m = calloc(1, total);
    memcpy(m, msg, len);
    m[len] = 0x80;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t off = 0; off < total; off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
                   (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
        for (int i = 16; i < 80; i++)
            w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20)
                f = (b & c) | (~b & d), k = 0x5A827999;
            else if (i < 40)
                f = b ^ c ^ d, k = 0x6ED9EBA1;
            else if (i < 60)
                f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
            else
                f = b ^ c ^ d, k = 0xCA62C1D6;
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d, d = c, c = rol(b, 30), b = a, a = t;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
    }
    free(m);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

static void base64(const unsigned char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static const char *header(const char *head, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            size_t len = strcspn(v, "\r\n");
            if (len >= size)
                len = size - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return out;
        }
    }
    return NULL;
}

static void websocket(int fd, const char *key)
{
    char text[320];
    unsigned char digest[20];
    char accept[64];
    snprintf(text, sizeof(text), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    sha1((const unsigned char *)text, strlen(text), digest);
    base64(digest, 20, accept);
    char resp[256];
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     accept);
    if (write_all(fd, resp, (size_t)n) < 0)
        return;
    for (;;) {
        unsigned char h[2], mask[4];
        if (read_full(fd, h, 2) < 0)
            return;
        int opcode = h[0] & 15;
        uint64_t len = h[1] & 127;
        if (len == 126) {
            unsigned char l[2];
            if (read_full(fd, l, 2) < 0)
                return;
            len = (uint64_t)l[0] << 8 | l[1];
        } else if (len == 127) {
            unsigned char l[8];
            if (read_full(fd, l, 8) < 0)
                return;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | l[i];
        }
        if ((h[1] & 128) && read_full(fd, mask, 4) < 0)
            return;
        if (len > (64u << 20))
            return;
        unsigned char *data = malloc(len ? len : 1);
        if (read_full(fd, data, len) < 0)
            return;
        if (h[1] & 128)
            for (uint64_t i = 0; i < len; i++)
                data[i] ^= mask[i % 4];
        unsigned char out[10];
        size_t hl = 2;
        out[0] = (unsigned char)(0x80 | opcode);
        if (len < 126) {
            out[1] = (unsigned char)len;
        } else if (len < 65536) {
            out[1] = 126, out[2] = (unsigned char)(len >> 8), out[3] = (unsigned char)len;
            hl = 4;
        } else {
            out[1] = 127;
            for (int i = 0; i < 8; i++)
                out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
            hl = 10;
        }
        int rc = write_all(fd, out, hl) < 0 || write_all(fd, data, len) < 0;
        free(data);
        if (rc || opcode == 8)
            return;
    }
}

static bool log_requests; /* services_echo PORT log */

/* Bytes the client sent that the current request has not used yet. */
static char in[131072];
static size_t have;

/* More bytes into in: 0, or -1 when the client closed or in is full. */
static int read_more(int fd)
{
    if (have == sizeof(in) - 1)
        return -1;
    ssize_t r = read(fd, in + have, sizeof(in) - 1 - have);
    if (r <= 0)
        return -1;
    have += (size_t)r;
    in[have] = '\0';
    return 0;
}

static void drop_in(size_t n)
{
    memmove(in, in + n, have - n);
    have -= n;
    in[have] = '\0';
}

/* One request of the connection; nth counts them from 1. 1: the
 * connection stays open for the next; 0: it ends. */
static int serve_one(int fd, int nth)
{
    char *end;
    while (!(end = strstr(in, "\r\n\r\n")))
        if (read_more(fd) < 0)
            return 0;
    size_t head_len = (size_t)(end - in) + 4;
    static char head[131072];
    memcpy(head, in, head_len);
    head[head_len] = '\0';
    char seen[600]; /* the request line in the container's log */
    int sl = snprintf(seen, sizeof(seen), "services_echo: %.*s\n",
                      (int)(strstr(head, "\r\n") - head), head);
    if (log_requests && write_all(1, seen, sl < (int)sizeof(seen) ? (size_t)sl : sizeof(seen) - 1))
        log_requests = false;
    char value[256];
    if (header(head, "Upgrade", value, sizeof(value)) && strcasecmp(value, "websocket") == 0 &&
        header(head, "Sec-WebSocket-Key", value, sizeof(value))) {
        websocket(fd, value);
        return 0;
    }
    const char *line_end = strstr(head, "\r\n");
    bool keep = strstr(head, " HTTP/1.1\r\n") == line_end - 9 &&
                !(header(head, "Connection", value, sizeof(value)) && strcasestr(value, "close"));
    char *q = strstr(head, "/big?mb=");
    if (q && q < line_end) {
        long mb = atol(q + 8);
        static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                "Connection: close\r\n\r\n";
        if (write_all(fd, h, sizeof(h) - 1) < 0)
            return 0;
        static unsigned char block[65536];
        for (size_t i = 0; i < sizeof(block); i++)
            block[i] = (unsigned char)i;
        for (long i = 0; i < mb * 16; i++)
            if (write_all(fd, block, sizeof(block)) < 0)
                return 0;
        return 0;
    }
    long body = 0;
    drop_in(head_len);
    if (header(head, "Content-Length", value, sizeof(value))) {
        for (long want = atol(value); body < want;) {
            if (!have && read_more(fd) < 0)
                return 0;
            size_t take = have < (size_t)(want - body) ? have : (size_t)(want - body);
            drop_in(take);
            body += (long)take;
        }
    }
    char conn_id[64];
    snprintf(conn_id, sizeof(conn_id), "X-Echo-Conn: %ld\r\nX-Echo-Request: %d\r\n", (long)getpid(),
             nth);
    const char *connection = keep ? "" : "Connection: close\r\n";
    char resp[512];
    q = strstr(head, "/chunked?n=");
    if (q && q < line_end) {
        /* N chunks "chunk I\n", each written alone, then the last chunk */
        int n = snprintf(resp, sizeof(resp),
                         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         "Transfer-Encoding: chunked\r\n%s%s\r\n",
                         conn_id, connection);
        if (write_all(fd, resp, (size_t)n) < 0)
            return 0;
        for (long i = 0, count = atol(q + 11); i < count; i++) {
            char text[32], chunk[64];
            int tl = snprintf(text, sizeof(text), "chunk %ld\n", i);
            int cl = snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", tl, text);
            if (write_all(fd, chunk, (size_t)cl) < 0)
                return 0;
        }
        return write_all(fd, "0\r\n\r\n", 5) == 0 && keep;
    }
    q = strstr(head, "/nocontent");
    if (q && q < line_end) {
        int n = snprintf(resp, sizeof(resp), "HTTP/1.1 204 No Content\r\n%s%s\r\n", conn_id,
                         connection);
        return write_all(fd, resp, (size_t)n) == 0 && keep;
    }
    /* /.../quietclose: the answer says nothing of closing, then the
     * connection ends (as a server whose idle connections time out) */
    q = strstr(head, "/quietclose");
    if (q && q < line_end)
        keep = false, connection = "";
    char tail[64];
    int tl = snprintf(tail, sizeof(tail), "body-bytes=%ld\n", body);
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "%s%s\r\n",
                     head_len + (size_t)tl, conn_id, connection);
    if (strncmp(head, "HEAD ", 5) == 0)
        return write_all(fd, resp, (size_t)n) == 0 && keep;
    /* one write: the answer's pieces in separate small writes would wait
     * for the client's delayed ACK (Nagle) on a kept connection */
    static char out[sizeof(resp) + sizeof(head) + sizeof(tail)];
    memcpy(out, resp, (size_t)n);
    memcpy(out + n, head, head_len);
    memcpy(out + (size_t)n + head_len, tail, (size_t)tl);
    return write_all(fd, out, (size_t)n + head_len + (size_t)tl) == 0 && keep;
}

static void serve(int fd)
{
    for (int nth = 1; serve_one(fd, nth); nth++)
        ;
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 9000;
    log_requests = argc > 2 && strcmp(argv[2], "log") == 0;
    signal(SIGCHLD, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0) {
        perror("services_echo");
        return 1;
    }
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (fork() == 0) {
            close(s);
            serve(c);
            shutdown(c, SHUT_WR);
            char drain[4096];
            while (read(c, drain, sizeof(drain)) > 0)
                ;
            _exit(0);
        }
        close(c);
    }
}
