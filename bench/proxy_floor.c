/*
 * proxy_floor.c - a bare TCP forwarder, the floor for the service proxy
 * (bench/proxy.sh builds and runs two of it beside gpuboxd's proxy; the
 * figures are in docs/services.md, "Performance").
 *
 * It listens on a loopback port and forwards every connection, byte for
 * byte, to one address (the container's service): no HTTP, no
 * authorisation, no store, nothing but moving bytes, as cheaply as a
 * relay process can: splice(2) from each socket into a pipe (1 MiB) and
 * from the pipe into the other socket, so the bytes never pass through
 * user space, and 4 MiB socket buffers asked for both sockets both ways
 * (the kernel caps them at net.core.rmem_max/wmem_max). Two shapes, each a
 * thread per connection as gpuboxd's proxy has:
 *
 *   thread  two threads per connection, one per direction, each blocking
 *           in splice (socket to pipe, then pipe to socket);
 *   poll    one thread per connection polling both sockets and splicing
 *           whichever way is ready (what is there, a few rounds while
 *           more comes), the pipe emptied blocking: gpuboxd's shape.
 *
 * The better of the two in a run is the floor: what any process placed
 * between the client and the container costs on that machine.
 *
 * Usage: proxy_floor thread|poll TARGET_IP TARGET_PORT [SOCKET_BUF]
 * Listens on 127.0.0.1 on a port the kernel picks and prints it as the
 * first line of stdout; runs until killed. SOCKET_BUF: bytes asked for
 * each socket buffer (default 4 MiB; 0 leaves them to the kernel's tuning).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#define PIPE_SIZE (1024 * 1024)

static struct sockaddr_in target;
static int socket_buf = 4 * 1024 * 1024;
static int polled;

static void die(const char *what)
{
    fprintf(stderr, "proxy_floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void tune(int fd)
{
    if (socket_buf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &socket_buf, sizeof(socket_buf));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &socket_buf, sizeof(socket_buf));
    }
}

/* One direction of a connection: from's bytes through pipe p into to. */
typedef struct way {
    int from, to;
    int p[2];
    int done; /* from has closed, to has been shut for writing */
} way;

static int way_open(way *w, int from, int to)
{
    *w = (way){.from = from, .to = to};
    if (pipe2(w->p, O_CLOEXEC) < 0)
        return -1;
    fcntl(w->p[1], F_SETPIPE_SZ, PIPE_SIZE);
    return 0;
}

static void way_close(way *w)
{
    close(w->p[0]);
    close(w->p[1]);
}

/* Blocking: move until from closes; 0 then, -1 when either side broke. */
static int way_run_blocking(way *w)
{
    for (;;) {
        ssize_t n = splice(w->from, NULL, w->p[1], NULL, PIPE_SIZE, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            shutdown(w->to, SHUT_WR);
            return 0;
        }
        while (n > 0) {
            ssize_t m = splice(w->p[0], NULL, w->to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return -1;
            n -= m;
        }
    }
}

static void *way_thread(void *arg)
{
    way *w = arg;
    if (way_run_blocking(w) < 0) {
        /* wake the other direction too */
        shutdown(w->from, SHUT_RDWR);
        shutdown(w->to, SHUT_RDWR);
    }
    return NULL;
}

/* Polled: move what from has ready now (the socket blocks, the pipe does
 * not: SPLICE_F_NONBLOCK takes only what is there), and again while more
 * is ready, a few rounds before polling again; each time the pipe is
 * emptied into to, blocking. 1 moved, 0 from closed, -1 broken. */
static int way_step(way *w)
{
    for (int round = 0; round < 8; round++) {
        struct pollfd ready = {.fd = w->from, .events = POLLIN};
        if (round > 0 && poll(&ready, 1, 0) <= 0)
            return 1;
        ssize_t n =
            splice(w->from, NULL, w->p[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (n <= 0)
            return (int)n;
        while (n > 0) {
            ssize_t m = splice(w->p[0], NULL, w->to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return -1;
            n -= m;
        }
    }
    return 1;
}

static void run_polled(int c, int s)
{
    way up, down;
    if (way_open(&up, c, s) < 0)
        return;
    if (way_open(&down, s, c) < 0) {
        way_close(&up);
        return;
    }
    while (!(up.done && down.done)) {
        struct pollfd fds[2] = {{.fd = up.done ? -1 : c, .events = POLLIN},
                                {.fd = down.done ? -1 : s, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        way *ways[2] = {&up, &down};
        int broken = 0;
        for (int k = 0; k < 2 && !broken; k++) {
            if (!fds[k].revents)
                continue;
            int r = way_step(ways[k]);
            if (r < 0)
                broken = 1;
            else if (r == 0) {
                shutdown(ways[k]->to, SHUT_WR);
                ways[k]->done = 1;
            }
        }
        if (broken)
            break;
    }
    way_close(&up);
    way_close(&down);
}

static void run_threaded(int c, int s)
{
    way up, down;
    if (way_open(&up, c, s) < 0)
        return;
    if (way_open(&down, s, c) < 0) {
        way_close(&up);
        return;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, way_thread, &up) == 0) {
        way_thread(&down);
        pthread_join(t, NULL);
    }
    way_close(&up);
    way_close(&down);
}

static void *serve(void *arg)
{
    int c = (int)(intptr_t)arg;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
        if (connect(s, (struct sockaddr *)&target, sizeof(target)) == 0) {
            /* after the handshakes, as gpuboxd does */
            int one = 1;
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            tune(s);
            tune(c);
            if (polled)
                run_polled(c, s);
            else
                run_threaded(c, s);
        }
        close(s);
    }
    close(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (strcmp(argv[1], "thread") && strcmp(argv[1], "poll"))) {
        fprintf(stderr, "usage: proxy_floor thread|poll TARGET_IP TARGET_PORT [SOCKET_BUF]\n");
        return 2;
    }
    polled = strcmp(argv[1], "poll") == 0;
    target =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &target.sin_addr) != 1) {
        fprintf(stderr, "proxy_floor: not an IPv4 address: %s\n", argv[2]);
        return 2;
    }
    if (argc == 5)
        socket_buf = atoi(argv[4]);
    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (ls < 0)
        die("socket");
    if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 128) < 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) < 0)
        die("listening");
    printf("%d\n", ntohs(sa.sin_port));
    fflush(stdout);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            die("accept");
        }
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pthread_t t;
        if (pthread_create(&t, &attr, serve, (void *)(intptr_t)c) != 0)
            close(c);
    }
}
