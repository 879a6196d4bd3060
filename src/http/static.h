/*
 * static.h - files the server answers by themselves, outside the API: the
 * web console (docs/web.md), embedded into gpuboxd at build time
 * (scripts/web-embed.mjs writes the table as C).
 *
 * A GET or HEAD of a path in the set is answered before the token check:
 * the files are the console's code, not data, and the login page must load
 * without a token. Every answer carries a strict Content-Security-Policy
 * (HTTP_STATIC_CSP: this origin's scripts, styles and API only, no inline
 * code, no frames), is sent gzip-compressed to a client that accepts it,
 * and is cached according to its name: files whose names carry a content
 * hash for a year (immutable), the others (index.html) revalidated each
 * time by ETag.
 */
#ifndef GPUBOX_HTTP_STATIC_H
#define GPUBOX_HTTP_STATIC_H

#include <stdbool.h>
#include <stddef.h>

#include "http/response.h"

typedef struct http_static_file {
    const char *path;         /* "/index.html", "/assets/index-3fa2b1c0.js" */
    const char *content_type; /* "text/html; charset=utf-8" */
    const unsigned char *body;
    size_t len;
    const unsigned char *gzip; /* the same bytes gzip-compressed */
    size_t gzip_len;
    const char *etag; /* quoted: "\"3fa2b1c0d4e5\"" */
    bool immutable;   /* the name changes with the content */
} http_static_file;

typedef struct http_static_set {
    const http_static_file *files;
    size_t count;
    const char *index; /* what "/" answers: "/index.html" */
} http_static_set;

#define HTTP_STATIC_CSP                                                                            \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "                  \
    "form-action 'none'; frame-ancestors 'none'"

/* The file a path names ("/" the index), or NULL. A query string is not
 * part of path. */
const http_static_file *http_static_find(const http_static_set *set, const char *path);

/* Fill resp with f: 304 when if_none_match names its ETag, the gzip bytes
 * when accept_encoding takes gzip; the cache, ETag, Vary and security
 * headers. Either header may be NULL. */
void http_static_answer(const http_static_file *f, const char *accept_encoding,
                        const char *if_none_match, http_response *resp);

/* Does an Accept-Encoding value take gzip? ("gzip", "gzip;q=0.5", "*"; not
 * "gzip;q=0"). */
bool http_accepts_gzip(const char *accept_encoding);

#endif
