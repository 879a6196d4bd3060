/*
 * static.c - answering the embedded files (see static.h).
 */
#include "http/static.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

const http_static_file *http_static_find(const http_static_set *set, const char *path)
{
    if (!set || !path)
        return NULL;
    if (strcmp(path, "/") == 0)
        path = set->index;
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->files[i].path, path) == 0)
            return &set->files[i];
    return NULL;
}

/* The q value of one Accept-Encoding element's parameters (";q=0.5"): 1
 * when absent. */
static double coding_q(const char *params, size_t len)
{
    const char *q = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if ((params[i] == 'q' || params[i] == 'Q') && params[i + 1] == '=' &&
            (i == 0 || params[i - 1] == ';' || params[i - 1] == ' '))
            q = params + i + 2;
    return q ? strtod(q, NULL) : 1.0;
}

bool http_accepts_gzip(const char *accept_encoding)
{
    if (!accept_encoding)
        return false;
    const char *p = accept_encoding;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *name = p;
        while (name < p + len && (*name == ' ' || *name == '\t'))
            name++;
        size_t nlen = strcspn(name, ";, \t");
        if (name + nlen > p + len)
            nlen = (size_t)(p + len - name);
        bool gzip = (nlen == 4 && strncasecmp(name, "gzip", 4) == 0) ||
                    (nlen == 6 && strncasecmp(name, "x-gzip", 6) == 0) ||
                    (nlen == 1 && name[0] == '*');
        if (gzip && coding_q(name + nlen, (size_t)(p + len - name - nlen)) > 0)
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

/* Does an If-None-Match value name etag? ("*" names every one.) */
static bool etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match)
        return false;
    size_t elen = strlen(etag);
    for (const char *p = if_none_match; *p;) {
        p += strspn(p, " \t,");
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        size_t len = strcspn(p, " \t,");
        if ((len == 1 && p[0] == '*') || (len == elen && strncmp(p, etag, len) == 0))
            return true;
        p += len;
    }
    return false;
}

void http_static_answer(const http_static_file *f, const char *accept_encoding,
                        const char *if_none_match, http_response *resp)
{
    if (etag_matches(if_none_match, f->etag))
        http_response_static(resp, 304, f->content_type, NULL, 0);
    else if (f->gzip && http_accepts_gzip(accept_encoding)) {
        http_response_static(resp, 200, f->content_type, f->gzip, f->gzip_len);
        http_response_header(resp, "Content-Encoding", "gzip");
    } else
        http_response_static(resp, 200, f->content_type, f->body, f->len);
    http_response_header(resp, "Cache-Control",
                         f->immutable ? "public, max-age=31536000, immutable" : "no-cache");
    http_response_header(resp, "ETag", f->etag);
    http_response_header(resp, "Vary", "Accept-Encoding");
    http_response_header(resp, "Content-Security-Policy", HTTP_STATIC_CSP);
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
    http_response_header(resp, "X-Frame-Options", "DENY");
    http_response_header(resp, "Referrer-Policy", "no-referrer");
}
