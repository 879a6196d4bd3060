/*
 * proxy_conn.c - one connection of the service proxy (proxy.h): request
 * after request, read each one's head, decide who the caller is and
 * whether they may use the service it names, then pass the request to
 * the container and its answer back.
 *
 * The steps of one request, in order:
 *   1. the head (at most PROXY_HEAD_MAX bytes, within PROXY_HEAD_TIMEOUT_S
 *      of its first byte; the first byte of a later request within
 *      PROXY_KEEPALIVE_S; malformed: 400);
 *   2. the service it names (path or host name; none: 404), and
 *      /s/SET/SERVICE without its '/' redirected to it with one;
 *   3. a ticket (?gpubox-ticket=) or a link (?gpubox-link=): spent or
 *      checked, then answered with the cookie and a redirect to the same
 *      URL without it, so the credential never reaches the service;
 *   4. the caller: a bearer token, else the cookie; the service decides
 *      (replicaset_service_resolve): no is 404 whatever the reason;
 *   5. the container's address and port: the connection the previous
 *      request of this client connection used when it went to the same
 *      set, service, address and port and was kept open, else a new one
 *      (502 when it does not accept);
 *   6. the head passed on without the proxy's credentials (a gpubox
 *      token in Authorization, its cookie) and with "Connection:
 *      keep-alive" (or "close" when the client closes after it, or the
 *      client's Upgrade), X-Forwarded-* added; then the body, as far as
 *      its framing says;
 *   7. the answer (proxy_relay.c): its head with the container's
 *      Connection headers replaced (101 Switching Protocols passes as it
 *      is and both ways are copied from then on, until either side
 *      closes), then its body as far as its framing says (Content-Length,
 *      chunked, nothing for HEAD, 1xx, 204 and 304), or until the
 *      container closes when the answer is framed by the close.
 *
 * Keep-alive without weaker authorisation: requests are served one at a
 * time. Nothing after a request's body is read or passed on before its
 * answer has ended; then the next head is parsed and goes through steps
 * 2 to 4 again for its own path, whatever the requests before it were.
 * A container connection belongs to one client connection (never
 * pooled between clients) and serves only requests for its set and
 * service. The client connection ends after an answer framed by the
 * container's close, a 101, "Connection: close" or HTTP/1.0 from the
 * client, a refusal of a request with a body, or a broken exchange; the
 * container's "Connection: close" only ends the container connection.
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

#define PROXY_SEND_TIMEOUT_S 120

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

void proxy_conn_keep(proxy_conn *c, const char *p, size_t n)
{
    if (c->in_len + n + 1 > c->in_cap) {
        c->in_cap = (c->in_len + n + 1) * 2;
        c->in = xrealloc(c->in, c->in_cap);
    }
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
}

/* The first n bytes of c->in are used up. */
static void in_drop(proxy_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

static void up_drop(proxy_conn *c)
{
    if (c->up >= 0)
        close(c->up);
    c->up = -1;
}

/* An answer of the proxy's own; keep: the connection goes on after it. */
static bool answer(int fd, bool keep, int status, const char *reason, const char *extra_headers,
                   const char *body)
{
    _cleanup_free_ char *head =
        xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %zu\r\nCache-Control: no-store\r\n"
                  "X-Content-Type-Options: nosniff\r\n%s%s\r\n",
                  status, reason, strlen(body), keep ? "" : "Connection: close\r\n",
                  extra_headers ? extra_headers : "");
    return proxy_send_all(fd, head, strlen(head)) && proxy_send_all(fd, body, strlen(body)) && keep;
}

static bool answer_not_found(int fd, bool keep)
{
    return answer(fd, keep, 404, "Not Found", NULL, "404 page not found\n");
}

static long ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t->tv_sec) * 1000L + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

/* Step 1: a whole head at the start of c->in; its length, or 0 (answered
 * or gone). first: the connection's first request, whose head must come
 * within PROXY_HEAD_TIMEOUT_S of the accept; a later one's first byte may
 * take PROXY_KEEPALIVE_S, its whole head PROXY_HEAD_TIMEOUT_S more. */
static size_t read_head(proxy_conn *c, bool first)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool waiting = !first && c->in_len == 0; /* for a later request's first byte */
    for (;;) {
        size_t look = c->in_len < PROXY_HEAD_MAX ? c->in_len : PROXY_HEAD_MAX;
        size_t end = proxy_head_end(c->in, look);
        if (end)
            return end;
        if (c->in_len >= PROXY_HEAD_MAX) {
            answer(c->fd, false, 431, "Request Header Fields Too Large", NULL,
                   "the request head is larger than 16 KiB\n");
            return 0;
        }
        long left_ms =
            (waiting ? PROXY_KEEPALIVE_S : PROXY_HEAD_TIMEOUT_S) * 1000L - ms_since(&start);
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (left_ms <= 0 || poll(&p, 1, (int)left_ms) <= 0) {
            if (c->in_len)
                answer(c->fd, false, 408, "Request Timeout", NULL,
                       "the request head came too slowly\n");
            return 0;
        }
        if (c->in_len + PROXY_HEAD_MAX + 1 > c->in_cap) {
            c->in_cap = c->in_len + PROXY_HEAD_MAX + 1;
            c->in = xrealloc(c->in, c->in_cap);
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, PROXY_HEAD_MAX - c->in_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        c->in_len += (size_t)n;
        if (waiting) {
            waiting = false;
            clock_gettime(CLOCK_MONOTONIC, &start);
        }
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
    /* a blocking connect bounded by the send timeout (Linux applies
     * SO_SNDTIMEO to connect): fewer calls than a non-blocking one and a
     * poll, on a path every new connection takes */
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval connect_timeout = {.tv_sec = PROXY_CONNECT_TIMEOUT_S};
    int one = 1;
    if (fd >= 0 &&
        (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connect_timeout, sizeof(connect_timeout)) < 0 ||
         connect(fd, res->ai_addr, res->ai_addrlen) < 0)) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval send_timeout = {.tv_sec = PROXY_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    return fd;
}

/* Step 5: the container connection for route at target: the one kept
 * from the previous request when it is for the same service and still
 * open with nothing unread, else a new one. -1 when none. */
static int up_for(proxy_conn *c, const proxy_route *route, const replicaset_service_target *target,
                  bool *reused)
{
    *reused = false;
    if (c->up >= 0 && strcmp(c->up_set, route->set) == 0 &&
        strcmp(c->up_service, route->service) == 0 && strcmp(c->up_address, target->address) == 0 &&
        c->up_port == target->port) {
        struct pollfd p = {.fd = c->up, .events = POLLIN};
        if (poll(&p, 1, 0) == 0) {
            *reused = true;
            return c->up;
        }
    }
    up_drop(c);
    c->up = connect_target(target->address, target->port);
    c->up_grown = false;
    snprintf(c->up_set, sizeof(c->up_set), "%s", route->set);
    snprintf(c->up_service, sizeof(c->up_service), "%s", route->service);
    snprintf(c->up_address, sizeof(c->up_address), "%s", target->address);
    c->up_port = target->port;
    return c->up;
}

/* ---- the head passed on ------------------------------------------------------- */

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

/* The request's head as the container gets it; connection: the value of
 * its Connection header ("keep-alive", "close" or "Upgrade"). */
static void forward_head(const proxy_config *cfg, const proxy_head *h, const proxy_route *route,
                         bool strip_auth, const char *connection, const char *peer, out_buf *out)
{
    bool upgrade = strcmp(connection, "Upgrade") == 0;
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
    out_add(out, "Connection: %s\r\n", connection);
    out_add(out, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: %s\r\n", peer,
            cfg->secure_cookies ? "https" : "http");
    if (host)
        out_add(out, "X-Forwarded-Host: %s\r\n", host);
    if (route->prefix[0])
        out_add(out, "X-Forwarded-Prefix: %s\r\n", route->prefix);
    out_add(out, "\r\n");
}

/* ---- one request ---------------------------------------------------------------- */

static const char *cookie_path(const proxy_route *route)
{
    return route->prefix[0] ? route->prefix : "";
}

/* Step 3: answer a ticket or a link with the cookie and a redirect. */
static bool answer_with_cookie(const proxy_config *cfg, int fd, bool keep, const proxy_route *route,
                               const char *value, const char *location)
{
    _cleanup_free_ char *headers =
        xasprintf("Set-Cookie: " PROXY_COOKIE_NAME "=%s; Path=%s/; Max-Age=%d; HttpOnly; "
                  "SameSite=Lax%s\r\nLocation: %s\r\n",
                  value, cookie_path(route), PROXY_COOKIE_TTL_S,
                  cfg->secure_cookies ? "; Secure" : "", location);
    return answer(fd, keep, 303, "See Other", headers, "signed in; go on to the service\n");
}

/* Step 3. 1: answered (*keep: the connection goes on); 0: no ticket or
 * link in the request. */
static int exchange_credential(const proxy_config *cfg, int fd, const proxy_head *h,
                               const proxy_route *route, bool *keep)
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
            *keep = answer_not_found(fd, *keep);
            return 1;
        }
        *keep = answer_with_cookie(cfg, fd, *keep, route, cookie, rest);
        return 1;
    }
    if (proxy_query_take(h->target, "gpubox-link", value, sizeof(value), rest, sizeof(rest))) {
        int rc = replicaset_service_resolve(cfg->app, route->set, route->service, NULL, value,
                                            &target, &err);
        if ((rc < 0 && err.code == ERR_NOT_FOUND) || !*target.link) {
            *keep = answer_not_found(fd, *keep);
            return 1;
        }
        char cookie[PROXY_COOKIE_MAX];
        snprintf(cookie, sizeof(cookie), "l.%s", value);
        *keep = answer_with_cookie(cfg, fd, *keep, route, cookie, rest);
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

/* Steps 5 to 7 for an authorised request (head h, c->in[0..end)): true
 * when the client's connection may carry another request. */
static bool conn_pass(proxy_conn *c, const proxy_head *h, size_t end, const proxy_route *route,
                      const replicaset_service_target *target, bool strip_auth, proxy_relay *r)
{
    const char *connection = proxy_head_get(h, "Connection");
    r->upgrade_asked =
        proxy_head_get(h, "Upgrade") && connection && proxy_header_has_token(connection, "upgrade");
    bool reused;
    if (up_for(c, route, target, &reused) < 0)
        return answer(c->fd, false, 502, "Bad Gateway", NULL,
                      "the service does not answer on its port; is it running?\n");
    out_buf head = {0};
    forward_head(c->cfg, h, route, strip_auth,
                 r->upgrade_asked ? "Upgrade"
                 : r->client_keep ? "keep-alive"
                                  : "close",
                 c->peer, &head);
    r->method = strcmp(h->method, "HEAD") == 0 ? "HEAD" : "GET";
    /* the head is used up: what follows it is the body, then the next request */
    in_drop(c, end);
    long part = proxy_body_feed(&r->body, c->in, c->in_len);
    size_t head_len = head.len;
    if (part > 0) {
        /* with the body bytes that came with the head, in one send */
        head.p = xrealloc(head.p, head.len + (size_t)part + 1);
        memcpy(head.p + head.len, c->in, (size_t)part);
        head.len += (size_t)part;
        in_drop(c, (size_t)part);
    }
    bool ok = part >= 0 && proxy_send_all(c->up, head.p, head.len);
    ok = ok && proxy_relay_run(r);
    if (!ok && reused && !r->sent_any && r->rlen == 0 && r->body.kind == PROXY_BODY_NONE) {
        /* the kept connection was closed by the container as the request
         * went: once more on a new one */
        up_drop(c);
        r->up_kept = true;
        r->done = false;
        if (up_for(c, route, target, &reused) >= 0 && proxy_send_all(c->up, head.p, head_len))
            ok = proxy_relay_run(r);
    }
    free(head.p);
    if (!ok && !r->sent_any)
        answer(c->fd, false, 502, "Bad Gateway", NULL, "the service gave no answer\n");
    if (!ok || !r->up_kept || !r->client_keep)
        up_drop(c);
    return ok && r->client_keep;
}

/* One request of the connection, steps 1 to 7: true when the connection
 * goes on to the next. */
static bool conn_serve_one(proxy_conn *c, bool first)
{
    const proxy_config *cfg = c->cfg;
    int fd = c->fd;
    size_t end = read_head(c, first);
    if (!end)
        return false;
    proxy_head h;
    proxy_route route;
    if (proxy_head_parse(c->in, end, &h) < 0)
        return answer(fd, false, 400, "Bad Request", NULL, "malformed request head\n");
    const char *connection = proxy_head_get(&h, "Connection");
    proxy_relay r = {.c = c, .up_kept = true, .client_open = true};
    bool framed = proxy_body_init(&h, &r.body) == 0;
    r.client_keep = strcmp(h.version, "HTTP/1.1") == 0 &&
                    !(connection && proxy_header_has_token(connection, "close"));
    /* after an answer of the proxy's own, the connection goes on only when
     * there is no request body to skip */
    bool keep = r.client_keep && framed && r.body.kind == PROXY_BODY_NONE;
    const char *host = proxy_head_get(&h, "Host");
    if (!host && strcmp(h.version, "HTTP/1.1") == 0)
        return answer(fd, false, 400, "Bad Request", NULL, "a request needs a Host header\n");
    bool answered = true;
    if (proxy_route_of(h.target, host, cfg->domain, &route) < 0) {
        keep = answer_not_found(fd, keep);
    } else {
        /* in a fleet, a set another node runs: the rest of the connection
         * goes to that node's proxy, which authorises each request again */
        int forwarded = proxy_fleet_forward(cfg, fd, &h, route.set, c->in + end, c->in_len - end);
        if (forwarded)
            return forwarded < 0 ? answer_not_found(fd, false) : false;
        answered = false;
    }
    if (!answered && route.add_slash) {
        const char *query = h.target + 3 + strlen(route.set) + 1 + strlen(route.service);
        _cleanup_free_ char *location = xasprintf("Location: %s/%s\r\n", route.prefix, query);
        keep =
            answer(fd, keep, 308, "Permanent Redirect", location, "the service is under its '/'\n");
        answered = true;
    }
    if (!answered && exchange_credential(cfg, fd, &h, &route, &keep))
        answered = true;
    if (answered) {
        if (keep)
            in_drop(c, end);
        return keep;
    }
    caller who = {0};
    char link[RS_SERVICE_LINK_MAX];
    bool strip_auth = false;
    const caller *w = identify(cfg, &h, &route, &who, link, sizeof(link), &strip_auth);
    replicaset_service_target target;
    gb_err err = GB_ERR_INIT;
    if (replicaset_service_resolve(cfg->app, route.set, route.service, w, link[0] ? link : NULL,
                                   &target, &err) < 0) {
        if (err.code == ERR_NOT_FOUND)
            keep = answer_not_found(fd, keep);
        else if (err.code == ERR_STATE_CONFLICT)
            keep = answer(fd, keep, 503, "Service Unavailable", "Retry-After: 5\r\n",
                          "the instance is not running; start it and try again\n");
        else
            keep =
                answer(fd, keep, 502, "Bad Gateway", NULL, "the service cannot be reached now\n");
        if (err.code != ERR_NOT_FOUND)
            log_debug("service proxy: %s/%s: %s", route.set, route.service, err.msg);
        if (keep)
            in_drop(c, end);
        return keep;
    }
    if (!framed)
        return answer(fd, false, 400, "Bad Request", NULL,
                      "the request body's framing is not clear\n");
    bool more = conn_pass(c, &h, end, &route, &target, strip_auth, &r);
    free(r.rhead);
    return more;
}

/* A lingering close: what the client still sends (the rest of a refused
 * head, a request after the last one served) is read and dropped for a
 * moment (at most PROXY_LINGER_MS, however slowly it comes), so that
 * closing with unread bytes does not reset the connection before the
 * client has read the answer. */
static void conn_linger(int fd)
{
    shutdown(fd, SHUT_WR);
    char drop[4096];
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t total = 0; total < 256 * 1024;) {
        long left_ms = PROXY_LINGER_MS - ms_since(&start);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left_ms <= 0 || poll(&p, 1, left_ms < 500 ? (int)left_ms : 500) <= 0)
            return;
        ssize_t n = recv(fd, drop, sizeof(drop), 0);
        if (n <= 0)
            return;
        total += (size_t)n;
    }
}

void proxy_conn_refuse_over_cap(const proxy_config *cfg, int fd)
{
    struct timeval send_timeout = {.tv_sec = PROXY_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    _cleanup_free_ char *body =
        xasprintf("too many connections from your address: at most %u at once; close some "
                  "(or wait for them to end) and try again\n",
                  cfg->max_per_ip);
    answer(fd, false, 429, "Too Many Requests", "Retry-After: 5\r\n", body);
    conn_linger(fd);
}

void proxy_conn_serve(const proxy_config *cfg, int fd, const char *peer)
{
    struct timeval send_timeout = {.tv_sec = PROXY_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    proxy_conn c = {.cfg = cfg, .fd = fd, .peer = peer, .up = -1, .pipe_fds = {-1, -1}};
    c.in_cap = PROXY_HEAD_MAX + 1;
    c.in = xmalloc(c.in_cap);
    c.buf = xmalloc(PROXY_BUF);
    for (bool first = true; conn_serve_one(&c, first); first = false)
        ;
    up_drop(&c);
    if (c.pipe_fds[0] >= 0) {
        close(c.pipe_fds[0]);
        close(c.pipe_fds[1]);
    }
    free(c.in);
    free(c.buf);
    conn_linger(fd);
}
