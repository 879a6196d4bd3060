/*
 * ports.c - the host-port allocator (see ports.h).
 *
 * Held ports are one bit each in a bitmap covering every TCP/UDP port
 * (8 KiB), so ports taken explicitly outside the range are tracked the same
 * way as allocated ones; held_in_range counts the held bits inside
 * [start, end] so "available" needs no scan. One mutex guards it all; the
 * host check (a bind test per port) runs under it too, which keeps
 * "lowest free" exact at the cost of serializing allocations, a few
 * microseconds each.
 */
#include "util/xalloc.h"
#include "sched/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORTS_ALL 65536

struct ports_pool {
    pthread_mutex_t lock;
    uint16_t start, end;
    size_t held_in_range;
    uint64_t held[PORTS_ALL / 64];
};

static bool ports_is_held(const ports_pool *p, unsigned port)
{
    return p->held[port / 64] >> (port % 64) & 1;
}

static void ports_set(ports_pool *p, unsigned port, bool held)
{
    if (ports_is_held(p, port) == held)
        return;
    if (held)
        p->held[port / 64] |= 1ULL << (port % 64);
    else
        p->held[port / 64] &= ~(1ULL << (port % 64));
    if (port >= p->start && port <= p->end)
        p->held_in_range += held ? 1 : (size_t)-1;
}

/* "123" -> 123 within 1..65535; digits only, no sign or spaces. */
static bool ports_parse_port(const char *s, size_t len, uint16_t *port)
{
    unsigned long v = 0;
    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

int ports_range_parse(const char *s, uint16_t *start, uint16_t *end, gb_err *err)
{
    const char *dash = s ? strchr(s, '-') : NULL;
    uint16_t a = 0, b = 0;
    if (!dash || !ports_parse_port(s, (size_t)(dash - s), &a) ||
        !ports_parse_port(dash + 1, strlen(dash + 1), &b) || a > b)
        return err_set(err, ERR_INVALID_PARAMS,
                       "port range '%.40s' is not START-END with 1 <= START <= END <= 65535, as in "
                       "40000-65535",
                       s ? s : "");
    *start = a;
    *end = b;
    return 0;
}

ports_pool *ports_pool_new(uint16_t start, uint16_t end)
{
    if (start == 0 || start > end)
        return NULL;
    ports_pool *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->start = start;
    p->end = end;
    return p;
}

void ports_pool_free(ports_pool *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Bind without SO_REUSEADDR: refused with EADDRINUSE if anything holds the
 * port (a listener, a bound socket, a connection's local end). Other
 * failures say nothing about the port, so they do not count as "in use". */
static bool ports_bind_refused(int type, uint16_t port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    int saved = errno;
    close(fd);
    return rc < 0 && saved == EADDRINUSE;
}

bool ports_host_in_use(uint16_t port)
{
    return port != 0 &&
           (ports_bind_refused(SOCK_STREAM, port) || ports_bind_refused(SOCK_DGRAM, port));
}

int ports_pool_alloc(ports_pool *p, size_t n, uint16_t *out, gb_err *err)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    size_t found = 0;
    unsigned port = p->start;
    for (; port <= p->end && found < n; port++)
        if (!ports_is_held(p, port) && !ports_host_in_use((uint16_t)port))
            out[found++] = (uint16_t)port;
    if (found < n) {
        /* The whole range was scanned, so found is exactly what is free. */
        pthread_mutex_unlock(&p->lock);
        return err_set(err, ERR_PORT_NOT_ENOUGH,
                       "port not enough: asked %zu, %zu free in %u-%u; release ports or widen "
                       "--port-range",
                       n, found, p->start, p->end);
    }
    for (size_t i = 0; i < n; i++)
        ports_set(p, out[i], true);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

/* Why this explicit list cannot be taken, or 0 if it can. Called locked. */
static int ports_check_take(ports_pool *p, const uint16_t *ports, size_t n, bool check_host,
                            gb_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (ports[i] == 0)
            return err_set(err, ERR_INVALID_PARAMS, "host port 0 is not a port; use 1-65535");
        for (size_t j = 0; j < i; j++)
            if (ports[j] == ports[i])
                return err_set(err, ERR_INVALID_PARAMS, "host port %u is asked for twice",
                               ports[i]);
        if (ports_is_held(p, ports[i]))
            return err_set(err, ERR_PORT_NOT_ENOUGH,
                           "host port %u is already allocated to a replica set", ports[i]);
        if (check_host && ports_host_in_use(ports[i]))
            return err_set(err, ERR_PORT_NOT_ENOUGH,
                           "host port %u is in use on the host by another program", ports[i]);
    }
    return 0;
}

int ports_pool_take(ports_pool *p, const uint16_t *ports, size_t n, bool check_host, gb_err *err)
{
    pthread_mutex_lock(&p->lock);
    int rc = ports_check_take(p, ports, n, check_host, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        ports_set(p, ports[i], true);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void ports_pool_release(ports_pool *p, const uint16_t *ports, size_t n)
{
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < n; i++)
        ports_set(p, ports[i], false);
    pthread_mutex_unlock(&p->lock);
}

uint16_t ports_pool_start(const ports_pool *p)
{
    return p->start;
}

uint16_t ports_pool_end(const ports_pool *p)
{
    return p->end;
}

/* The lock is not part of the pool's logical state, so readers that take
 * a const pool may still lock it. */
static pthread_mutex_t *ports_lock_of(const ports_pool *p)
{
    return (pthread_mutex_t *)&p->lock;
}

size_t ports_pool_available(const ports_pool *p)
{
    pthread_mutex_lock(ports_lock_of(p));
    size_t n = (size_t)(p->end - p->start + 1) - p->held_in_range;
    pthread_mutex_unlock(ports_lock_of(p));
    return n;
}

void ports_pool_used(const ports_pool *p, uint16_t **out, size_t *n)
{
    pthread_mutex_lock(ports_lock_of(p));
    size_t count = 0;
    for (size_t w = 0; w < PORTS_ALL / 64; w++)
        count += (size_t)__builtin_popcountll(p->held[w]);
    uint16_t *list = xmalloc((count ? count : 1) * sizeof(*list));
    size_t k = 0;
    for (unsigned port = 1; port < PORTS_ALL && k < count; port++)
        if (ports_is_held(p, port))
            list[k++] = (uint16_t)port;
    pthread_mutex_unlock(ports_lock_of(p));
    *out = list;
    *n = count;
}
