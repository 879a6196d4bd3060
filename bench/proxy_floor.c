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
 *   poll    one thread per connection polling both non-blocking sockets
 *           and splicing whichever way is ready (gpuboxd's shape).
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
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (socket_buf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &socket_buf, sizeof(socket_buf));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &socket_buf, sizeof(socket_buf));
    }
}

/* One direction of a connection: from's bytes through pipe p into to. */
typedef struct way {
    int from, to;
    int p[2];
    size_t in_pipe; /* bytes in p not yet sent on */
    int eof;        /* from has closed (to has been shut for writing once in_pipe is 0) */
    int done;
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

/* Non-blocking: move what can be moved now; -1 when either side broke. */
static int way_step(way *w)
{
    for (;;) {
        if (w->in_pipe) {
            ssize_t m =
                splice(w->p[0], NULL, w->to, NULL, w->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (m < 0 && errno == EINTR)
                continue;
            if (m < 0)
                return errno == EAGAIN ? 0 : -1;
            w->in_pipe -= (size_t)m;
            continue;
        }
        if (w->eof) {
            if (!w->done)
                shutdown(w->to, SHUT_WR);
            w->done = 1;
            return 0;
        }
        ssize_t n =
            splice(w->from, NULL, w->p[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        if (n == 0)
            w->eof = 1;
        w->in_pipe += (size_t)n;
    }
}

/* The events way w waits for on fd. */
static short way_events(const way *w, int fd)
{
    short ev = 0;
    if (w->done)
        return 0;
    if (w->in_pipe && w->to == fd)
        ev |= POLLOUT;
    if (!w->in_pipe && !w->eof && w->from == fd)
        ev |= POLLIN;
    return ev;
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
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    while (!(up.done && down.done)) {
        struct pollfd fds[2] = {{.fd = c, .events = way_events(&up, c) | way_events(&down, c)},
                                {.fd = s, .events = way_events(&up, s) | way_events(&down, s)}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        /* a way runs when one of its two sockets has news (an error or a
         * hang-up included) */
        if ((fds[0].revents || fds[1].revents) && !up.done && way_step(&up) < 0)
            break;
        if ((fds[0].revents || fds[1].revents) && !down.done && way_step(&down) < 0)
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
        tune(s);
        if (connect(s, (struct sockaddr *)&target, sizeof(target)) == 0) {
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
    tune(ls); /* accepted sockets inherit the buffers (and the window scale they imply) */
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
