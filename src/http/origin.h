/*
 * origin.h - who a request says it is for (Host) and which web page sent
 * it (Origin, Sec-Fetch-*): the parsers of those values and the two checks
 * the server makes on them before anything else (docs/security.md,
 * "Requests from browsers: Origin and Host").
 *
 * The Host check stops DNS rebinding: a page whose name the attacker points
 * at 127.0.0.1 is, for the browser, the same origin as gpuboxd, so only the
 * name in Host tells it apart. gpuboxd answers IP literals, localhost and
 * *.localhost (browsers resolve those themselves), this machine's names
 * (given to http_guard_new) and the names of --allowed-host; "*" there
 * turns the check off. A request without Host (HTTP/1.0) is served.
 *
 * The Origin check stops cross-site requests, which browsers send without
 * a preflight when they look like a form (text/plain POST): a request with
 * an Origin is served only when that origin is the server's own (the
 * scheme it serves, and the host and port of the request's Host) or one of
 * --cors-origins; "null" and anything unparsable are foreign. Without an
 * Origin, a browser's Sec-Fetch-Site of cross-site or same-site (another
 * port of this machine is "same site") is refused too, except a top-level
 * navigation (GET or HEAD, Sec-Fetch-Mode navigate, Sec-Fetch-Dest
 * document): a link to the console, whose answer the linking page never
 * sees. Requests without Origin and Sec-Fetch-Site (curl, scripts, the CLI,
 * gpu-docker-api clients) are not browsers' and are served.
 *
 * Layout: the allowed names, lowercased, in one array; read-only after
 * start-up, so threads share one guard.
 */
#ifndef GPUBOX_HTTP_ORIGIN_H
#define GPUBOX_HTTP_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "http/cors.h"
#include "util/err.h"

#define HTTP_HOST_NAME_MAX 253
#define HTTP_GUARD_MAX_NAMES 72
#define HTTP_GUARD_OWN_NAMES 8 /* places kept for this machine's own names */

enum http_host_kind { HTTP_HOST_NAME, HTTP_HOST_IPV4, HTTP_HOST_IPV6 };

/* host[:port] as in a Host header or an origin's authority. */
typedef struct http_hostport {
    enum http_host_kind kind;
    /* Lowercased; an IPv6 literal without its brackets; a name without
     * its one trailing dot. */
    char host[HTTP_HOST_NAME_MAX + 2]; /* + a trailing dot while parsing, + NUL */
    unsigned port;                     /* 0: none given */
} http_hostport;

/* scheme://host[:port], as a browser serializes an Origin header. */
typedef struct http_origin {
    bool https; /* else http */
    http_hostport hp;
} http_origin;

/* The first len bytes of s as host[:port]: a name of letters, digits, '-',
 * '_' and '.' (labels of 1-63, not starting or ending with '-', at most 253
 * in all, one trailing dot allowed), a dotted-quad IPv4 address, or an IPv6
 * address in brackets; a port of 1-65535. 0, or -1 when it is none of
 * these. */
int http_hostport_parse(const char *s, size_t len, http_hostport *out);
/* An Origin value: http or https (any case), "://", host[:port], nothing
 * after. -1 for anything else, "null" included. */
int http_origin_parse(const char *s, http_origin *out);

typedef struct http_guard http_guard;

/* allowed: --allowed-host's comma-separated names (NULL: none), "*" for
 * any; own: this machine's names (its host name, --public-host, the
 * --listen and --advertise hosts), IP literals and NULLs among them
 * skipped, malformed ones too (they come from the system, not the
 * operator), beyond HTTP_GUARD_OWN_NAMES too. ERR_INVALID_PARAMS naming a bad entry of allowed. */
int http_guard_new(const char *allowed, const char *const *own, size_t nown, http_guard **out,
                   gb_err *err);
void http_guard_free(http_guard *g);

/* Does the guard answer this Host value? NULL guard: IP literals and
 * localhost only. A NULL host (none sent) is answered. On refusal: -1 with
 * a 421 error (ERR_HOST_NOT_ALLOWED). */
int http_guard_check_host(const http_guard *g, const char *host, gb_err *err);

/* What a request says about the page that sent it. */
typedef struct http_fetch_info {
    const char *method;
    const char *host;               /* the Host header; NULL when none */
    const char *origin;             /* NULL when none */
    const char *site, *mode, *dest; /* Sec-Fetch-Site, -Mode, -Dest; NULL when none */
} http_fetch_info;

/* Is the page behind this request allowed to make it? tls: the server
 * speaks HTTPS. cors: --cors-origins (NULL: none). On refusal: -1 with a
 * 403 error (ERR_FORBIDDEN). */
int http_guard_check_origin(const http_fetch_info *f, bool tls, const http_cors *cors, gb_err *err);

#endif
