/*
 * terminal_bench.c - the terminal's keystroke-to-echo round trip, four
 * ways in one run (bench/terminal.sh builds and runs it; docs/access.md,
 * "How fast", quotes it):
 *
 *   direct   Docker's own hijacked exec stream over its unix socket: the
 *            least any terminal into a container can cost;
 *   relay    the same, through a trivial forwarder process (TCP loopback
 *            in, Docker's unix socket out, one thread per direction doing
 *            blocking recv and send, nothing else);
 *   relay-poll  the same forwarder with one thread: poll over both sockets,
 *            then recv and send (gpuboxd's pump's shape, without framing).
 *            The better of the two relays is the floor for any server
 *            that sits between a TCP client and Docker;
 *   gpuboxd  gpuboxd's terminal, a WebSocket (masked binary frames out,
 *            frames in, as a browser sends them).
 *
 * Each path has its own `cat` exec with a TTY in the same container; a
 * round sends one byte on each path in turn (the order rotates from round
 * to round, so a busy moment of the machine falls on all alike) and waits
 * for the TTY's echo of it. Timed with CLOCK_MONOTONIC; written in C so
 * that the client costs the same on every path (no interpreter, and the
 * WebSocket framing is a few instructions).
 *
 * Usage: terminal_bench DOCKER_SOCKET CONTAINER GPUBOXD_HOST:PORT SET ROUNDS
 * Prints min, median, p95 in microseconds for each path and the ratios of
 * the medians; the last line is machine-readable ("result direct=...").
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 20
#define NPATHS 4

static void die(const char *what)
{
    fprintf(stderr, "terminal_bench: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static int unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connecting to Docker");
    return fd;
}

static int tcp_connect(const char *host, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        die("parsing the address");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connecting over TCP");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("sending");
        p += w;
        n -= (size_t)w;
    }
}

/* Read an HTTP head (up to the blank line), byte by byte so nothing past
 * it is consumed. Returns the status. */
static int read_head(int fd, char *head, size_t size)
{
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = recv(fd, head + n, 1, 0);
        if (r <= 0)
            die("reading an HTTP head");
        n++;
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[n] = '\0';
    int status = 0;
    sscanf(head, "HTTP/1.%*d %d", &status);
    return status;
}

/* POST /containers/C/exec for a TTY `cat`; its id into id. */
static void exec_create(const char *sock, const char *container, char id[80])
{
    int fd = unix_connect(sock);
    const char *body = "{\"AttachStdin\":true,\"AttachStdout\":true,\"AttachStderr\":true,"
                       "\"Tty\":true,\"Cmd\":[\"cat\"]}";
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "POST /v1.41/containers/%s/exec HTTP/1.1\r\nHost: docker\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     container, strlen(body), body);
    send_all(fd, req, (size_t)n);
    char resp[8192];
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof(resp) && (r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0)) > 0)
        got += (size_t)r;
    resp[got] = '\0';
    close(fd);
    const char *p = strstr(resp, "\"Id\":\"");
    if (!p || sscanf(p + 6, "%64[0-9a-f]", id) != 1) {
        fprintf(stderr, "terminal_bench: exec create answered: %s\n", resp);
        exit(1);
    }
}

/* Start exec id on fd (Docker, directly or through the relay): fd is then
 * the raw stream. */
static void exec_start(int fd, const char *id)
{
    const char *body = "{\"Detach\":false,\"Tty\":true}";
    char req[512], head[4096];
    int n = snprintf(req, sizeof(req),
                     "POST /v1.41/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
                     "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     id, strlen(body), body);
    send_all(fd, req, (size_t)n);
    int status = read_head(fd, head, sizeof(head));
    if (status != 101 && status != 200) {
        fprintf(stderr, "terminal_bench: exec start answered: %s\n", head);
        exit(1);
    }
}

/* ---- the floor relay: a child process ----------------------------------- */

typedef struct pipe_dir {
    int from, to;
} pipe_dir;

static void *relay_copy(void *arg)
{
    pipe_dir *d = arg;
    char buf[65536];
    for (;;) {
        ssize_t n = recv(d->from, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(d->to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return NULL;
            off += w;
        }
    }
    shutdown(d->to, SHUT_WR);
    return NULL;
}

/* The same with one thread: poll over both, then a blocking recv and send
 * on the side that is ready (what gpuboxd's pump does, less the framing). */
static void relay_poll(int c, int d)
{
    char buf[65536];
    for (;;) {
        struct pollfd fds[2] = {{.fd = c, .events = POLLIN}, {.fd = d, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        for (int k = 0; k < 2; k++) {
            if (!fds[k].revents)
                continue;
            int from = fds[k].fd, to = k ? c : d;
            ssize_t n = recv(from, buf, sizeof(buf), 0);
            if (n <= 0)
                return;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
                if (w <= 0)
                    return;
                off += w;
            }
        }
    }
}

/* Serve one connection from listener ls, forwarded to Docker's socket. */
static void relay_main(int ls, const char *docker, int polled)
{
    int c = accept(ls, NULL, NULL);
    if (c < 0)
        _exit(1);
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int d = unix_connect(docker);
    if (polled) {
        relay_poll(c, d);
        _exit(0);
    }
    pipe_dir up = {c, d}, down = {d, c};
    pthread_t t;
    pthread_create(&t, NULL, relay_copy, &up);
    relay_copy(&down);
    pthread_join(t, NULL);
    _exit(0);
}

static pid_t relay_start(const char *docker, int polled, int *port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1) < 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) < 0)
        die("listening for the relay");
    *port = ntohs(sa.sin_port);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0)
        relay_main(ls, docker, polled);
    close(ls);
    return pid;
}

/* ---- gpuboxd's WebSocket ------------------------------------------------ */

static int ws_open(const char *host, int port, const char *set)
{
    int fd = tcp_connect(host, port);
    char req[1024], head[8192];
    int n = snprintf(req, sizeof(req),
                     "GET /api/v1/replicaSet/%s/terminal?cmd=cat HTTP/1.1\r\nHost: %s:%d\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                     set, host, port);
    send_all(fd, req, (size_t)n);
    if (read_head(fd, head, sizeof(head)) != 101) {
        fprintf(stderr, "terminal_bench: gpuboxd refused the terminal: %s\n", head);
        exit(1);
    }
    return fd;
}

/* ---- one path ----------------------------------------------------------- */

typedef struct path {
    const char *name;
    int fd;
    int ws; /* WebSocket framing */
    uint8_t buf[65536];
    size_t have; /* bytes in buf not yet used (ws: an unfinished frame) */
    double *t;
} path;

/* Read until key appears in the output; 0, or -1 when the stream ended. */
static int wait_echo(path *p, uint8_t key)
{
    for (;;) {
        ssize_t r = recv(p->fd, p->buf + p->have, sizeof(p->buf) - p->have, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (!p->ws) {
            if (memchr(p->buf, key, (size_t)r))
                return 0;
            continue;
        }
        p->have += (size_t)r;
        int seen = 0;
        size_t off = 0;
        for (;;) { /* whole frames in buf: server frames are unmasked */
            if (p->have - off < 2)
                break;
            uint8_t op = p->buf[off] & 0x0f;
            uint64_t len = p->buf[off + 1] & 0x7f;
            size_t hl = 2;
            if (len == 126) {
                if (p->have - off < 4)
                    break;
                len = ((uint64_t)p->buf[off + 2] << 8) | p->buf[off + 3];
                hl = 4;
            } else if (len == 127) {
                if (p->have - off < 10)
                    break;
                len = 0;
                for (int i = 0; i < 8; i++)
                    len = (len << 8) | p->buf[off + 2 + i];
                hl = 10;
            }
            if (len > sizeof(p->buf) - hl) {
                fprintf(stderr, "terminal_bench: a frame of %llu bytes\n", (unsigned long long)len);
                exit(1);
            }
            if (p->have - off < hl + len)
                break;
            if (op == 8)
                return -1;
            if (op == 2 && memchr(p->buf + off + hl, key, len))
                seen = 1;
            off += hl + len;
        }
        memmove(p->buf, p->buf + off, p->have - off);
        p->have -= off;
        if (seen)
            return 0;
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double keystroke(path *p, int i)
{
    uint8_t key = (uint8_t)('a' + i % 26);
    uint8_t frame[7] = {0x82, 0x81, 0x12, 0x34, 0x56, 0x78, (uint8_t)(key ^ 0x12)};
    double t0 = now_us();
    if (p->ws)
        send_all(p->fd, frame, sizeof(frame));
    else
        send_all(p->fd, &key, 1);
    if (wait_echo(p, key) < 0) {
        fprintf(stderr, "terminal_bench: the %s path ended\n", p->name);
        exit(1);
    }
    return now_us() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: terminal_bench DOCKER_SOCKET CONTAINER GPUBOXD_HOST:PORT SET "
                        "ROUNDS\n");
        return 2;
    }
    const char *docker = argv[1], *container = argv[2], *set = argv[4];
    int rounds = atoi(argv[5]);
    char host[64];
    int gport = 0;
    if (sscanf(argv[3], "%63[^:]:%d", host, &gport) != 2 || rounds < 1) {
        fprintf(stderr, "terminal_bench: give HOST:PORT and a number of rounds\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    path paths[NPATHS] = {{.name = "direct"},
                          {.name = "relay"},
                          {.name = "relay-poll"},
                          {.name = "gpuboxd", .ws = 1}};
    char id[80];
    exec_create(docker, container, id);
    paths[0].fd = unix_connect(docker);
    exec_start(paths[0].fd, id);

    pid_t relay[2];
    for (int k = 0; k < 2; k++) {
        int rport = 0;
        relay[k] = relay_start(docker, k, &rport);
        exec_create(docker, container, id);
        paths[1 + k].fd = tcp_connect("127.0.0.1", rport);
        exec_start(paths[1 + k].fd, id);
    }

    paths[3].fd = ws_open(host, gport, set);

    for (int k = 0; k < NPATHS; k++)
        paths[k].t = calloc((size_t)rounds, sizeof(double));
    for (int i = 0; i < rounds + WARMUP; i++)
        for (int j = 0; j < NPATHS; j++) {
            path *p = &paths[(i + j) % NPATHS];
            double t = keystroke(p, i);
            if (i >= WARMUP)
                p->t[i - WARMUP] = t;
        }

    double med[NPATHS];
    printf("keystroke to echo, %d rounds, the paths in turn (microseconds):\n", rounds);
    static const char *const what[NPATHS] = {
        "direct (Docker's hijacked exec)",
        "relay (bare forwarder, thread/direction)",
        "relay-poll (bare forwarder, one poll)",
        "gpuboxd (its terminal WebSocket)",
    };
    for (int k = 0; k < NPATHS; k++) {
        qsort(paths[k].t, (size_t)rounds, sizeof(double), cmp_double);
        med[k] = paths[k].t[rounds / 2];
        printf("  %-42s min %6.0f  median %6.0f  p95 %6.0f\n", what[k], paths[k].t[0], med[k],
               paths[k].t[(size_t)(rounds * 0.95) > 0 ? (size_t)(rounds * 0.95) - 1 : 0]);
    }
    double best = med[1] < med[2] ? med[1] : med[2];
    printf("  ratio of medians to direct: gpuboxd %.2fx (target <= 1.2x), the better relay "
           "%.2fx (the floor); gpuboxd/floor %.2fx\n",
           med[3] / med[0], best / med[0], med[3] / best);
    printf("result direct=%.0f relay=%.0f relay_poll=%.0f gpuboxd=%.0f gpuboxd_ratio=%.2f "
           "floor_ratio=%.2f\n",
           med[0], med[1], med[2], med[3], med[3] / med[0], best / med[0]);

    for (int k = 0; k < NPATHS; k++)
        close(paths[k].fd);
    for (int k = 0; k < 2; k++) {
        kill(relay[k], SIGTERM); /* its Docker side stays open while `cat` runs */
        waitpid(relay[k], NULL, 0);
    }
    return 0;
}
