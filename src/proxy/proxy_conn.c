/*
 * proxy_conn.c - one connection of the service proxy (proxy.h): read the
 * request's head, decide who the caller is and whether they may use the
 * service, then pass the request to the container and its answer back.
 *
 * The steps, in order:
 *   1. the head (at most PROXY_HEAD_MAX bytes, within PROXY_HEAD_TIMEOUT_S;
 *      malformed: 400);
 *   2. the service it names (path or host name; none: 404), and
 *      /s/SET/SERVICE without its '/' redirected to it with one;
 *   3. a ticket (?gpubox-ticket=) or a link (?gpubox-link=): spent or
 *      checked, then answered with the cookie and a redirect to the same
 *      URL without it, so the credential never reaches the service;
 *   4. the caller: a bearer token, else the cookie; the service decides
 *      (replicaset_service_resolve): no is 404 whatever the reason;
 *   5. the container's address and port, connected (502 when it does not
 *      accept);
 *   6. the head passed on without the proxy's credentials (a gpubox
 *      token in Authorization, its cookie) and with "Connection: close"
 *      (or the client's Upgrade), X-Forwarded-* added; then the body, as
 *      far as its framing says; the answer's head gets "Connection:
 *      close" too (101 Switching Protocols passes as it is and both ways
 *      are copied from then on); the rest of the answer is copied as it
 *      comes, until the container closes.
 */
#include "util/xalloc.h"
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proxy/proxy_cookie.h"
#include "proxy/proxy_head.h"
#include "service/app.h"
#include "service/replicaset/services.h"
#include "service/tickets/tickets.h"
#include "util/cleanup.h"
#include "util/log.h"

#define PROXY_BUF (64 * 1024)
#define PROXY_RESPONSE_HEAD_MAX (64 * 1024)
#define PROXY_SEND_TIMEOUT_S 120
#define PROXY_PIPE (1024 * 1024) /* a pipe's size for splice: as much as one read moves */

bool proxy_send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static int answer(int fd, int status, const char *reason, const char *extra_headers,
                  const char *body)
{
    _cleanup_free_ char *head =
        xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %zu\r\nCache-Control: no-store\r\n"
                  "X-Content-Type-Options: nosniff\r\nConnection: close\r\n%s\r\n",
                  status, reason, strlen(body), extra_headers ? extra_headers : "");
    if (proxy_send_all(fd, head, strlen(head)))
        proxy_send_all(fd, body, strlen(body));
    return 0;
}

static int answer_not_found(int fd)
{
    return answer(fd, 404, "Not Found", NULL, "404 page not found\n");
}

/* Step 1: the head into buf; its length, or 0 (answered or gone). */
static size_t read_head(int fd, char *buf, size_t *have)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        size_t end = proxy_head_end(buf, *have);
        if (end)
            return end;
        if (*have >= PROXY_HEAD_MAX) {
            answer(fd, 431, "Request Header Fields Too Large", NULL,
                   "the request head is larger than 16 KiB\n");
            return 0;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = PROXY_HEAD_TIMEOUT_S * 1000L - (now.tv_sec - start.tv_sec) * 1000L -
                       (now.tv_nsec - start.tv_nsec) / 1000000L;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left_ms <= 0 || poll(&p, 1, (int)left_ms) <= 0) {
            if (*have)
                answer(fd, 408, "Request Timeout", NULL, "the request head came too slowly\n");
            return 0;
        }
        ssize_t n = recv(fd, buf + *have, PROXY_HEAD_MAX - *have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        *have += (size_t)n;
    }
}

/* Step 5: a TCP connection to address:port within PROXY_CONNECT_TIMEOUT_S;
 * -1 when it does not accept. */
static int connect_target(const char *address, uint16_t port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", port);
    if (getaddrinfo(address, service, &hints, &res) != 0)
        return -1;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int so = 0;
    socklen_t len = sizeof(so);
    if (poll(&p, 1, PROXY_CONNECT_TIMEOUT_S * 1000) <= 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0 || so != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* ---- the head passed on --------------------------------------------------- */

typedef struct out_buf {
    char *p;
    size_t len, cap;
} out_buf;

static void out_add(out_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *s = xvasprintf(fmt, ap);
    va_end(ap);
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static bool header_is(const proxy_header *h, const char *name)
{
    return strcasecmp(h->name, name) == 0;
}

/* The request's head as the container gets it. */
static void forward_head(const proxy_config *cfg, const proxy_head *h, const proxy_route *route,
                         bool strip_auth, bool upgrade, const char *peer, out_buf *out)
{
    out_add(out, "%s %s %s\r\n", h->method, h->target, h->version);
    static const char *const dropped[] = {
        "Connection",       "Keep-Alive",         "Proxy-Connection",
        "Forwarded",        "X-Forwarded-For",    "X-Forwarded-Proto",
        "X-Forwarded-Host", "X-Forwarded-Prefix", NULL};
    for (size_t i = 0; i < h->nheaders; i++) {
        const proxy_header *x = &h->headers[i];
        bool drop =
            (strip_auth && header_is(x, "Authorization")) || (!upgrade && header_is(x, "Upgrade"));
        for (size_t d = 0; dropped[d] && !drop; d++)
            drop = header_is(x, dropped[d]);
        if (drop)
            continue;
        if (header_is(x, "Cookie")) {
            char kept[PROXY_HEAD_MAX];
            if (proxy_cookie_strip(x->value, kept, sizeof(kept)))
                out_add(out, "Cookie: %s\r\n", kept);
            continue;
        }
        out_add(out, "%s: %s\r\n", x->name, x->value);
    }
    const char *host = proxy_head_get(h, "Host");
    out_add(out, "Connection: %s\r\n", upgrade ? "Upgrade" : "close");
    out_add(out, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: %s\r\n", peer,
            cfg->secure_cookies ? "https" : "http");
    if (host)
        out_add(out, "X-Forwarded-Host: %s\r\n", host);
    if (route->prefix[0])
        out_add(out, "X-Forwarded-Prefix: %s\r\n", route->prefix);
    out_add(out, "\r\n");
}

/* The answer's head (buf[0..len), a whole head) with "Connection: close"
 * in place of its Connection and Keep-Alive headers. */
static void close_head(const char *buf, size_t len, out_buf *out)
{
    size_t pos = 0;
    bool first = true;
    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) + 1 : len - pos;
        pos += n;
        size_t content = n;
        while (content && (line[content - 1] == '\n' || line[content - 1] == '\r'))
            content--;
        if (content == 0) {
            out_add(out, "Connection: close\r\n\r\n");
            return;
        }
        bool drop = !first && (strncasecmp(line, "Connection:", 11) == 0 ||
                               strncasecmp(line, "Keep-Alive:", 11) == 0);
        if (!drop)
            out_add(out, "%.*s\r\n", (int)content, line);
        first = false;
    }
}

/* ---- copying ------------------------------------------------------------------ */

typedef struct relay {
    int client, up;
    bool upgrade_asked, upgraded;
    proxy_body body;
    bool head_done; /* the answer's (final) head went to the client */
    char *rhead;    /* the answer's head as it comes */
    size_t rlen;
    bool sent_any;
} relay;

/* Bytes from the client: the request body as far as it goes (all of it
 * once upgraded); what follows the body is dropped. false: stop. */
static bool relay_from_client(relay *r, const char *buf, size_t n)
{
    if (r->upgraded)
        return proxy_send_all(r->up, buf, n);
    long part = proxy_body_feed(&r->body, buf, n);
    if (part < 0)
        return false;
    return part == 0 || proxy_send_all(r->up, buf, (size_t)part);
}

/* Bytes from the container: the answer's head collected and closed (or
 * passed as it is for 101), the rest as it comes. false: stop. */
static bool relay_from_up(relay *r, const char *buf, size_t n)
{
    if (r->head_done)
        return r->sent_any = true, proxy_send_all(r->client, buf, n);
    if (r->rlen + n > PROXY_RESPONSE_HEAD_MAX)
        return false;
    r->rhead = xrealloc(r->rhead, r->rlen + n + 1);
    memcpy(r->rhead + r->rlen, buf, n);
    r->rlen += n;
    for (;;) {
        size_t end = proxy_head_end(r->rhead, r->rlen);
        if (!end)
            return true;
        int status = 0;
        if (sscanf(r->rhead, "HTTP/1.%*d %d", &status) != 1)
            return false;
        r->sent_any = true;
        if (status == 101 && r->upgrade_asked) {
            r->upgraded = r->head_done = true;
            if (!proxy_send_all(r->client, r->rhead, r->rlen))
                return false;
            r->rlen = 0;
            return true;
        }
        if (status >= 100 && status < 200 && status != 101) {
            /* 100 Continue and other interim answers pass; the final one follows */
            if (!proxy_send_all(r->client, r->rhead, end))
                return false;
            memmove(r->rhead, r->rhead + end, r->rlen - end);
            r->rlen -= end;
            continue;
        }
        out_buf head = {0};
        close_head(r->rhead, end, &head);
        bool ok = proxy_send_all(r->client, head.p, head.len) &&
                  proxy_send_all(r->client, r->rhead + end, r->rlen - end);
        free(head.p);
        r->head_done = true;
        r->rlen = 0;
        return ok;
    }
}

/* Once the answer's head has gone, its body moves from the container's
 * socket to the client's through a pipe (splice), without a copy through
 * this process: 1 moved (or nothing was there yet), 0 the container
 * closed, -1 the client is gone. A pipe that cannot be made leaves the
 * copy through relay_from_up (relay_run). */
static int relay_splice(relay *r, int pipe_fds[2])
{
    /* as long as the container has more ready (a few rounds), before
     * polling again: fewer wake-ups for a large answer */
    for (int round = 0; round < 8; round++) {
        /* the socket blocks: read again only what is there (SPLICE_F_NONBLOCK
         * is the pipe's), or a WebSocket's other direction would wait */
        struct pollfd ready = {.fd = r->up, .events = POLLIN};
        if (round > 0 && poll(&ready, 1, 0) <= 0)
            return 1;
        ssize_t n =
            splice(r->up, NULL, pipe_fds[1], NULL, PROXY_PIPE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (n <= 0)
            return (int)n;
        while (n > 0) {
            ssize_t m = splice(pipe_fds[0], NULL, r->client, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return -1;
            n -= m;
        }
    }
    return 1;
}

static void relay_run(relay *r)
{
    char *buf = xmalloc(PROXY_BUF);
    bool client_open = true, up_open = true;
    int pipe_fds[2] = {-1, -1};
    if (pipe2(pipe_fds, O_CLOEXEC) == 0)
        fcntl(pipe_fds[1], F_SETPIPE_SZ, PROXY_PIPE);
    while (up_open) {
        struct pollfd fds[2] = {{.fd = client_open ? r->client : -1, .events = POLLIN},
                                {.fd = r->up, .events = POLLIN}};
        int ready = poll(fds, 2, PROXY_IDLE_S * 1000);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        if (fds[1].revents && r->head_done && pipe_fds[0] >= 0) {
            r->sent_any = true;
            if (relay_splice(r, pipe_fds) <= 0)
                up_open = false;
        } else if (fds[1].revents) {
            ssize_t n = recv(r->up, buf, PROXY_BUF, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0 || !relay_from_up(r, buf, (size_t)n))
                up_open = false;
        }
        if (client_open && fds[0].revents) {
            ssize_t n = recv(r->client, buf, PROXY_BUF, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                client_open = false;
                shutdown(r->up, SHUT_WR);
            } else if (!relay_from_client(r, buf, (size_t)n)) {
                break;
            }
        }
    }
    if (!r->sent_any)
        answer(r->client, 502, "Bad Gateway", NULL, "the service gave no answer\n");
    if (pipe_fds[0] >= 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
    }
    free(buf);
}

/* ---- one request ---------------------------------------------------------------- */

static const char *cookie_path(const proxy_route *route)
{
    return route->prefix[0] ? route->prefix : "";
}

/* Step 3: answer a ticket or a link with the cookie and a redirect. */
static void answer_with_cookie(const proxy_config *cfg, int fd, const proxy_route *route,
                               const char *value, const char *location)
{
    _cleanup_free_ char *headers =
        xasprintf("Set-Cookie: " PROXY_COOKIE_NAME "=%s; Path=%s/; Max-Age=%d; HttpOnly; "
                  "SameSite=Lax%s\r\nLocation: %s\r\n",
                  value, cookie_path(route), PROXY_COOKIE_TTL_S,
                  cfg->secure_cookies ? "; Secure" : "", location);
    answer(fd, 303, "See Other", headers, "signed in; go on to the service\n");
}

/* Step 3. 1: answered; 0: no ticket or link in the request. */
static int exchange_credential(const proxy_config *cfg, int fd, const proxy_head *h,
                               const proxy_route *route)
{
    char value[TICKET_SIZE + 16], rest[PROXY_HEAD_MAX];
    char object[160];
    snprintf(object, sizeof(object), "%s/%s", route->set, route->service);
    replicaset_service_target target;
    gb_err err = GB_ERR_INIT;
    if (proxy_query_take(h->target, "gpubox-ticket", value, sizeof(value), rest, sizeof(rest))) {
        caller who = {0};
        bool ok = tickets_redeem(value, "service", object, &who);
        int rc = ok ? replicaset_service_resolve(cfg->app, route->set, route->service, &who, NULL,
                                                 &target, &err)
                    : -1;
        char cookie[PROXY_COOKIE_MAX];
        if (!ok || (rc < 0 && err.code == ERR_NOT_FOUND) ||
            proxy_cookie_user(&who, route->set, route->service, cookie, sizeof(cookie)) < 0) {
            answer_not_found(fd);
            return 1;
        }
        answer_with_cookie(cfg, fd, route, cookie, rest);
        return 1;
    }
    if (proxy_query_take(h->target, "gpubox-link", value, sizeof(value), rest, sizeof(rest))) {
        int rc = replicaset_service_resolve(cfg->app, route->set, route->service, NULL, value,
                                            &target, &err);
        if ((rc < 0 && err.code == ERR_NOT_FOUND) || !*target.link) {
            answer_not_found(fd);
            return 1;
        }
        char cookie[PROXY_COOKIE_MAX];
        snprintf(cookie, sizeof(cookie), "l.%s", value);
        answer_with_cookie(cfg, fd, route, cookie, rest);
        return 1;
    }
    return 0;
}

/* Step 4: who the caller is. *strip_auth: the Authorization header was a
 * gpubox token (it must not reach the service). Returns who, or NULL. */
static const caller *identify(const proxy_config *cfg, const proxy_head *h,
                              const proxy_route *route, caller *who, char *link, size_t link_size,
                              bool *strip_auth)
{
    *strip_auth = false;
    link[0] = '\0';
    if (!cfg->auth) {
        *who = (caller){.name = USER_ANONYMOUS, .role = USER_ROLE_ADMIN};
        return who;
    }
    const char *authorization = proxy_head_get(h, "Authorization");
    const char *token;
    size_t len;
    if (authorization && http_auth_bearer(authorization, &token, &len)) {
        http_identity id;
        gb_err err = GB_ERR_INIT;
        if (http_auth_check(cfg->auth, HTTP_ACCESS_VIEWER, "GET", route->prefix, authorization, &id,
                            &err) == 0) {
            *strip_auth = true;
            snprintf(who->name, sizeof(who->name), "%s", id.name);
            who->role = (enum users_role)id.role; /* the same order (users/caller.h) */
            return who;
        }
    }
    int got = proxy_cookie_read(proxy_head_get(h, "Cookie"), route->set, route->service, who, link,
                                link_size);
    return got == 1 ? who : NULL;
}

static int conn_serve(const proxy_config *cfg, int fd, const char *peer)
{
    struct timeval send_timeout = {.tv_sec = PROXY_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    _cleanup_free_ char *buf = xmalloc(PROXY_HEAD_MAX + 1);
    size_t have = 0;
    size_t end = read_head(fd, buf, &have);
    if (!end)
        return 0;
    proxy_head h;
    proxy_route route;
    if (proxy_head_parse(buf, end, &h) < 0)
        return answer(fd, 400, "Bad Request", NULL, "malformed request head\n");
    const char *host = proxy_head_get(&h, "Host");
    if (!host && strcmp(h.version, "HTTP/1.1") == 0)
        return answer(fd, 400, "Bad Request", NULL, "a request needs a Host header\n");
    if (proxy_route_of(h.target, host, cfg->domain, &route) < 0)
        return answer_not_found(fd);
    int forwarded = proxy_fleet_forward(cfg, fd, &h, route.set, buf + end, have - end);
    if (forwarded)
        return forwarded < 0 ? answer_not_found(fd) : 0;
    if (route.add_slash) {
        const char *query = h.target + 3 + strlen(route.set) + 1 + strlen(route.service);
        _cleanup_free_ char *location = xasprintf("Location: %s/%s\r\n", route.prefix, query);
        return answer(fd, 308, "Permanent Redirect", location, "the service is under its '/'\n");
    }
    if (exchange_credential(cfg, fd, &h, &route))
        return 0;
    caller who = {0};
    char link[RS_SERVICE_LINK_MAX];
    bool strip_auth = false;
    const caller *w = identify(cfg, &h, &route, &who, link, sizeof(link), &strip_auth);
    replicaset_service_target target;
    gb_err err = GB_ERR_INIT;
    if (replicaset_service_resolve(cfg->app, route.set, route.service, w, link[0] ? link : NULL,
                                   &target, &err) < 0) {
        if (err.code == ERR_NOT_FOUND)
            return answer_not_found(fd);
        log_debug("service proxy: %s/%s: %s", route.set, route.service, err.msg);
        if (err.code == ERR_STATE_CONFLICT)
            return answer(fd, 503, "Service Unavailable", "Retry-After: 5\r\n",
                          "the instance is not running; start it and try again\n");
        return answer(fd, 502, "Bad Gateway", NULL, "the service cannot be reached now\n");
    }
    relay r = {.client = fd};
    if (proxy_body_init(&h, &r.body) < 0)
        return answer(fd, 400, "Bad Request", NULL, "the request body's framing is not clear\n");
    const char *connection = proxy_head_get(&h, "Connection");
    r.upgrade_asked = proxy_head_get(&h, "Upgrade") && connection &&
                      proxy_header_has_token(connection, "upgrade");
    r.up = connect_target(target.address, target.port);
    if (r.up < 0)
        return answer(fd, 502, "Bad Gateway", NULL,
                      "the service does not answer on its port; is it running?\n");
    out_buf head = {0};
    forward_head(cfg, &h, &route, strip_auth, r.upgrade_asked, peer, &head);
    bool ok = proxy_send_all(r.up, head.p, head.len) &&
              (have == end || relay_from_client(&r, buf + end, have - end));
    free(head.p);
    if (ok)
        relay_run(&r);
    else
        answer(fd, 502, "Bad Gateway", NULL, "the service closed the connection\n");
    free(r.rhead);
    close(r.up);
    return 0;
}

/* A lingering close: what the client still sends (the rest of a refused
 * head, a request after the first) is read and dropped for a moment, so
 * that closing with unread bytes does not reset the connection before
 * the client has read the answer. */
static void conn_linger(int fd)
{
    shutdown(fd, SHUT_WR);
    char drop[4096];
    for (size_t total = 0; total < 256 * 1024;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 500) <= 0)
            return;
        ssize_t n = recv(fd, drop, sizeof(drop), 0);
        if (n <= 0)
            return;
        total += (size_t)n;
    }
}

void proxy_conn_serve(const proxy_config *cfg, int fd, const char *peer)
{
    conn_serve(cfg, fd, peer);
    conn_linger(fd);
}
