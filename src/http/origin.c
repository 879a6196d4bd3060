/*
 * origin.c - parsing Host and Origin values, and the checks on them (see
 * origin.h).
 */
#include "util/xalloc.h"
#include "http/origin.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

struct http_guard {
    bool any; /* --allowed-host '*' */
    char *names[HTTP_GUARD_MAX_NAMES];
    size_t n;
};

/* ":PORT" at s[0..len): 1-65535, digits only. */
static int parse_port(const char *s, size_t len, unsigned *port)
{
    if (len < 2 || len > 6 || s[0] != ':')
        return -1;
    unsigned v = 0;
    for (size_t i = 1; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* A DNS name (see origin.h), already lowercased, NUL-terminated. A name
 * whose last label is all digits is not one: browsers read it as an
 * address, and a malformed address is no name. */
static bool name_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > HTTP_HOST_NAME_MAX)
        return false;
    const char *label = s;
    bool digits_only = true;
    for (const char *p = s;; p++) {
        if (*p == '.' || *p == '\0') {
            size_t n = (size_t)(p - label);
            if (n == 0 || n > 63 || label[0] == '-' || p[-1] == '-')
                return false;
            if (*p == '\0')
                return !digits_only;
            label = p + 1;
            digits_only = true;
            continue;
        }
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
            return false;
        if (!isdigit((unsigned char)*p))
            digits_only = false;
    }
}

int http_hostport_parse(const char *s, size_t len, http_hostport *out)
{
    *out = (http_hostport){0};
    if (!s || len == 0)
        return -1;
    size_t host_len;
    const char *rest;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return -1;
        host_len = (size_t)(close - s - 1);
        if (host_len < 2 || host_len > 45)
            return -1;
        for (size_t i = 0; i < host_len; i++) {
            char c = s[1 + i];
            if (!isxdigit((unsigned char)c) && c != ':' && c != '.')
                return -1;
            out->host[i] = (char)tolower((unsigned char)c);
        }
        out->host[host_len] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, out->host, &a6) != 1)
            return -1;
        out->kind = HTTP_HOST_IPV6;
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        host_len = colon ? (size_t)(colon - s) : len;
        if (host_len == 0 || host_len > HTTP_HOST_NAME_MAX + 1)
            return -1;
        bool dotted = true; /* digits and dots only: an IPv4 address or nothing */
        for (size_t i = 0; i < host_len; i++) {
            char c = s[i];
            if (c == '\0')
                return -1;
            if (!isdigit((unsigned char)c) && c != '.')
                dotted = false;
            out->host[i] = (char)tolower((unsigned char)c);
        }
        out->host[host_len] = '\0';
        struct in_addr a4;
        if (dotted) {
            if (inet_pton(AF_INET, out->host, &a4) != 1)
                return -1;
            out->kind = HTTP_HOST_IPV4;
        } else {
            if (out->host[host_len - 1] == '.')
                out->host[--host_len] = '\0';
            if (!name_ok(out->host))
                return -1;
            out->kind = HTTP_HOST_NAME;
        }
        rest = s + (colon ? (size_t)(colon - s) : len);
    }
    size_t rest_len = len - (size_t)(rest - s);
    if (rest_len && parse_port(rest, rest_len, &out->port) < 0)
        return -1;
    return 0;
}

int http_origin_parse(const char *s, http_origin *out)
{
    *out = (http_origin){0};
    if (!s)
        return -1;
    size_t skip;
    if (strncasecmp(s, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(s, "https://", 8) == 0)
        skip = 8, out->https = true;
    else
        return -1;
    return http_hostport_parse(s + skip, strlen(s + skip), &out->hp);
}

void http_guard_free(http_guard *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        free(g->names[i]);
    free(g);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(http_guard *, http_guard_free)

static bool guard_has(const http_guard *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->names[i], name) == 0)
            return true;
    return false;
}

/* Add a parsed host unless it is an address, already there, or there is no
 * room left. */
static void guard_add(http_guard *g, const http_hostport *hp)
{
    if (hp->kind == HTTP_HOST_NAME && !guard_has(g, hp->host) && g->n < HTTP_GUARD_MAX_NAMES)
        g->names[g->n++] = xstrdup(hp->host);
}

int http_guard_new(const char *allowed, const char *const *own, size_t nown, http_guard **out,
                   gb_err *err)
{
    *out = NULL;
    _cleanup_(http_guard_freep) http_guard *g = xcalloc(1, sizeof(*g));
    if (allowed) {
        _cleanup_free_ char *copy = xstrdup(allowed);
        bool any_entry = false;
        char *save = NULL;
        for (char *h = strtok_r(copy, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
            while (*h == ' ')
                h++;
            size_t n = strlen(h);
            while (n && h[n - 1] == ' ')
                h[--n] = '\0';
            if (!n)
                continue;
            any_entry = true;
            if (strcmp(h, "*") == 0) {
                g->any = true;
                continue;
            }
            http_hostport hp;
            if (http_hostport_parse(h, n, &hp) < 0 || hp.port)
                return err_set(err, ERR_INVALID_PARAMS,
                               "'%.100s' is not a host name; write names such as "
                               "gpu1.example.com (no scheme, no port), or * to answer any name",
                               h);
            /* the last places are kept for this machine's own names */
            if (g->n >= HTTP_GUARD_MAX_NAMES - HTTP_GUARD_OWN_NAMES && !guard_has(g, hp.host))
                return err_set(err, ERR_INVALID_PARAMS, "more than %d host names",
                               HTTP_GUARD_MAX_NAMES - HTTP_GUARD_OWN_NAMES);
            guard_add(g, &hp);
        }
        if (!any_entry)
            return err_set(err, ERR_INVALID_PARAMS,
                           "no host name given; list names such as gpu1.example.com, or *");
    }
    for (size_t i = 0; i < nown; i++) {
        http_hostport hp;
        if (own[i] && http_hostport_parse(own[i], strlen(own[i]), &hp) == 0)
            guard_add(g, &hp);
    }
    *out = steal_ptr(&g);
    return 0;
}

static bool host_is_localhost(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "localhost") == 0 || (n > 10 && strcmp(name + n - 10, ".localhost") == 0);
}

int http_guard_check_host(const http_guard *g, const char *host, gb_err *err)
{
    if (!host || (g && g->any))
        return 0;
    http_hostport hp;
    bool parsed = http_hostport_parse(host, strlen(host), &hp) == 0;
    if (parsed &&
        (hp.kind != HTTP_HOST_NAME || host_is_localhost(hp.host) || (g && guard_has(g, hp.host))))
        return 0;
    return err_set(err, ERR_HOST_NOT_ALLOWED,
                   "this server does not answer to the name '%.100s' (Host): it answers IP "
                   "addresses, localhost, this machine's own names and those of --allowed-host, "
                   "so that a web page whose DNS name was pointed at it (DNS rebinding) cannot "
                   "call it; if this is how you reach it, its operator adds --allowed-host %.100s",
                   host, parsed ? hp.host : "NAME");
}

static bool fetch_is_navigation(const http_fetch_info *f)
{
    return f->method && (strcmp(f->method, "GET") == 0 || strcmp(f->method, "HEAD") == 0) &&
           f->mode && strcasecmp(f->mode, "navigate") == 0 && f->dest &&
           strcasecmp(f->dest, "document") == 0;
}

/* Is the origin this server's own: the scheme it speaks and the host and
 * port the request was sent to? */
static bool origin_is_own(const http_fetch_info *f, bool tls)
{
    http_origin o;
    http_hostport h;
    if (!f->host || http_origin_parse(f->origin, &o) < 0 ||
        http_hostport_parse(f->host, strlen(f->host), &h) < 0 || o.https != tls)
        return false;
    unsigned dflt = tls ? 443 : 80;
    return strcmp(o.hp.host, h.host) == 0 &&
           (o.hp.port ? o.hp.port : dflt) == (h.port ? h.port : dflt);
}

int http_guard_check_origin(const http_fetch_info *f, bool tls, const http_cors *cors, gb_err *err)
{
    if (f->origin) {
        if (http_cors_match(cors, f->origin) || origin_is_own(f, tls))
            return 0;
        return err_set(err, ERR_FORBIDDEN,
                       "cross-origin requests from %.200s are refused: only this server's own "
                       "pages (the console) and the origins in --cors-origins may call the API "
                       "from a browser; requests without Origin (curl, scripts, the CLI) are not "
                       "affected",
                       f->origin);
    }
    if (f->site &&
        (strcasecmp(f->site, "cross-site") == 0 || strcasecmp(f->site, "same-site") == 0) &&
        !fetch_is_navigation(f))
        return err_set(err, ERR_FORBIDDEN,
                       "a browser's request from another site (Sec-Fetch-Site: %.20s) is "
                       "refused: only this server's own pages (the console) and the origins in "
                       "--cors-origins may call the API from a browser",
                       f->site);
    return 0;
}
