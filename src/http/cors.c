/*
 * cors.c - parsing --cors-origins and matching a request's Origin (see
 * cors.h).
 */
#include "util/xalloc.h"
#include "http/cors.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

struct http_cors {
    char *origins[HTTP_CORS_MAX_ORIGINS];
    size_t n;
};

void http_cors_free(http_cors *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->origins[i]);
    free(c);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(http_cors *, http_cors_free)

/* scheme://host[:port], as a browser serializes an Origin header. */
static bool cors_origin_ok(const char *s)
{
    const char *host;
    if (strncmp(s, "http://", 7) == 0)
        host = s + 7;
    else if (strncmp(s, "https://", 8) == 0)
        host = s + 8;
    else
        return false;
    const char *p = host;
    if (*p == '[') { /* an IPv6 literal */
        p++;
        while (isxdigit((unsigned char)*p) || *p == ':' || *p == '.')
            p++;
        if (*p++ != ']' || p - host < 4)
            return false;
    } else {
        while (isalnum((unsigned char)*p) || *p == '-' || *p == '.')
            p++;
        if (p == host)
            return false;
    }
    if (*p == ':') {
        const char *digits = ++p;
        while (isdigit((unsigned char)*p))
            p++;
        if (p == digits || p - digits > 5 || atoi(digits) < 1 || atoi(digits) > 65535)
            return false;
    }
    return *p == '\0';
}

int http_cors_parse(const char *list, http_cors **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *copy = xstrdup(list ? list : "");
    _cleanup_(http_cors_freep) http_cors *c = xcalloc(1, sizeof(*c));
    char *save = NULL;
    for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
        while (*o == ' ')
            o++;
        size_t n = strlen(o);
        while (n && o[n - 1] == ' ')
            o[--n] = '\0';
        if (!n)
            continue;
        if (!cors_origin_ok(o))
            return err_set(err, ERR_INVALID_PARAMS,
                           "'%s' is not an origin; write scheme://host[:port] with scheme http "
                           "or https and no path or wildcard, e.g. https://console.example.com",
                           o);
        if (c->n == HTTP_CORS_MAX_ORIGINS)
            return err_set(err, ERR_INVALID_PARAMS, "more than %d origins", HTTP_CORS_MAX_ORIGINS);
        for (char *p = o; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        c->origins[c->n] = xstrdup(o);
        c->n++;
    }
    if (c->n == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "no origin given; list origins such as https://console.example.com");
    *out = steal_ptr(&c);
    return 0;
}

const char *http_cors_match(const http_cors *c, const char *origin)
{
    if (!c || !origin)
        return NULL;
    for (size_t i = 0; i < c->n; i++)
        if (strcasecmp(c->origins[i], origin) == 0)
            return c->origins[i];
    return NULL;
}

bool http_cors_is_preflight(const char *method, const char *origin, const char *request_method)
{
    return method && strcmp(method, "OPTIONS") == 0 && origin && request_method;
}
