/*
 * proxy.c - the service proxy's listener and its threads (proxy.h); one
 * connection is served by proxy_conn.c.
 *
 * Every connection's socket is kept in a table (slots of
 * max_connections) so that proxy_stop can cut them: a thread blocked in
 * a read or poll wakes up with an error and ends; proxy_stop then waits
 * for the count of threads to reach zero before it returns (the app the
 * threads use is closed right after).
 */
#include "util/xalloc.h"
#include "proxy/proxy_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"

struct proxy {
    proxy_config cfg;
    int listen_fd;
    int wake[2]; /* a byte on wake[1] stops the accepting thread */
    uint16_t port;
    pthread_t acceptor;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int *fds;          /* cfg.max_connections slots; -1: free */
    proxy_addr *addrs; /* each slot's client address, for the cap per address */
    unsigned active;
};

typedef struct proxy_job {
    proxy *p;
    int fd;
    unsigned slot;
    bool over_cap; /* its address has cfg.max_per_ip others open: refused */
    struct sockaddr_storage peer;
} proxy_job;

/* A client's address without its port (an IPv4 address mapped into IPv6
 * is the IPv4 address), for counting an address's connections. */
static proxy_addr proxy_addr_of(const struct sockaddr_storage *ss)
{
    proxy_addr a = {.family = ss->ss_family};
    if (ss->ss_family == AF_INET) {
        memcpy(a.bytes, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            a.family = AF_INET;
            memcpy(a.bytes, v6->s6_addr + 12, 4);
        } else {
            memcpy(a.bytes, v6->s6_addr, 16);
        }
    }
    return a;
}

static bool proxy_addr_equal(const proxy_addr *a, const proxy_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

static void *proxy_conn_thread(void *arg)
{
    proxy_job *job = arg;
    proxy *p = job->p;
    char peer[64] = "";
    getnameinfo((struct sockaddr *)&job->peer, sizeof(job->peer), peer, sizeof(peer), NULL, 0,
                NI_NUMERICHOST);
    if (job->over_cap) {
        log_debug("service proxy: %s has %u connections open; one more refused", peer,
                  p->cfg.max_per_ip);
        proxy_conn_refuse_over_cap(&p->cfg, job->fd);
    } else {
        proxy_conn_serve(&p->cfg, job->fd, peer);
    }
    pthread_mutex_lock(&p->lock);
    p->fds[job->slot] = -1;
    close(job->fd);
    if (--p->active == 0)
        pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->lock);
    free(job);
    return NULL;
}

static void proxy_refuse_busy(int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 36\r\nConnection: close\r\n\r\n"
                               "too many connections; try again soon";
    ssize_t n = send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
}

static void proxy_accept_one(proxy *p)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof(peer);
    int fd = accept4(p->listen_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    proxy_addr addr = proxy_addr_of(&peer);
    pthread_mutex_lock(&p->lock);
    unsigned slot = p->cfg.max_connections, same = 0;
    for (unsigned i = 0; i < p->cfg.max_connections; i++) {
        if (p->fds[i] < 0 && slot == p->cfg.max_connections)
            slot = i;
        else if (p->fds[i] >= 0 && proxy_addr_equal(&p->addrs[i], &addr))
            same++;
    }
    bool over_cap = p->cfg.max_per_ip && same >= p->cfg.max_per_ip;
    if (slot == p->cfg.max_connections ||
        (over_cap && same >= p->cfg.max_per_ip + PROXY_REFUSING_MAX)) {
        pthread_mutex_unlock(&p->lock);
        proxy_refuse_busy(fd);
        return;
    }
    /* one over the cap still gets a slot and a thread, for a moment (at
     * most PROXY_REFUSING_MAX at a time per address, then they are cut
     * at once): the answer that says why, and a close that lets the
     * client read it */
    p->fds[slot] = fd;
    p->addrs[slot] = addr;
    p->active++;
    pthread_mutex_unlock(&p->lock);
    proxy_job *job = xcalloc(1, sizeof(*job));
    *job = (proxy_job){.p = p, .fd = fd, .slot = slot, .over_cap = over_cap, .peer = peer};
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    if (pthread_create(&t, &attr, proxy_conn_thread, job) != 0) {
        pthread_mutex_lock(&p->lock);
        p->fds[slot] = -1;
        p->active--;
        pthread_mutex_unlock(&p->lock);
        proxy_refuse_busy(fd);
        free(job);
    }
    pthread_attr_destroy(&attr);
}

static void *proxy_acceptor(void *arg)
{
    proxy *p = arg;
    for (;;) {
        struct pollfd fds[2] = {{.fd = p->listen_fd, .events = POLLIN},
                                {.fd = p->wake[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        if (fds[0].revents & POLLIN)
            proxy_accept_one(p);
    }
    return NULL;
}

static int proxy_listen(const char *host, uint16_t port, int *out, uint16_t *bound, gb_err *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", port);
    int rc = getaddrinfo(host && *host ? host : NULL, service, &hints, &res);
    if (rc != 0)
        return err_set(err, ERR_INVALID_PARAMS, "--proxy-listen %s: %s", host, gai_strerror(rc));
    int fd = -1, why = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
            why = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return err_set(err, ERR_INVALID_PARAMS, "--proxy-listen %s:%u cannot be bound: %s", host,
                       port, strerror(why ? why : EADDRNOTAVAIL));
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    *out = fd;
    return 0;
}

int proxy_start(const proxy_config *cfg, proxy **out, gb_err *err)
{
    *out = NULL;
    proxy *p = xcalloc(1, sizeof(*p));
    p->cfg = *cfg;
    if (!p->cfg.max_connections)
        p->cfg.max_connections = PROXY_MAX_CONNECTIONS;
    if (proxy_listen(cfg->host, cfg->port, &p->listen_fd, &p->port, err) < 0) {
        free(p);
        return -1;
    }
    if (pipe2(p->wake, O_CLOEXEC) < 0) {
        close(p->listen_fd);
        free(p);
        return err_set(err, ERR_INTERNAL, "the service proxy: pipe: %s", strerror(errno));
    }
    p->fds = xcalloc(p->cfg.max_connections, sizeof(*p->fds));
    p->addrs = xcalloc(p->cfg.max_connections, sizeof(*p->addrs));
    for (unsigned i = 0; i < p->cfg.max_connections; i++)
        p->fds[i] = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->idle, NULL);
    if (pthread_create(&p->acceptor, NULL, proxy_acceptor, p) != 0) {
        close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p->fds);
        free(p->addrs);
        free(p);
        return err_set(err, ERR_INTERNAL, "the service proxy: no thread");
    }
    *out = p;
    return 0;
}

uint16_t proxy_port(const proxy *p)
{
    return p->port;
}

void proxy_stop(proxy *p)
{
    if (!p)
        return;
    ssize_t n = write(p->wake[1], "x", 1);
    (void)n;
    pthread_join(p->acceptor, NULL);
    close(p->listen_fd);
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < p->cfg.max_connections; i++)
        if (p->fds[i] >= 0)
            shutdown(p->fds[i], SHUT_RDWR);
    while (p->active > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->idle);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p->fds);
    free(p->addrs);
    free(p);
    log_info("service proxy stopped");
}
