/*
 * xalloc.c - see xalloc.h: the one place that handles out of memory.
 */
#include "util/xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *xalloc_progname = "gpuboxd";

_Noreturn void xalloc_die(size_t size)
{
    /* No allocation here: stdio to an unbuffered stderr only. */
    fprintf(stderr, "%s: out of memory allocating %zu bytes\n", xalloc_progname, size);
    abort();
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        xalloc_die(size);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        xalloc_die(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        xalloc_die(n * size);
    return p;
}

void *xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q)
        xalloc_die(size);
    return q;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        xalloc_die(SIZE_MAX);
    return xrealloc(p, n * size);
}

char *xstrdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *p = xmalloc(len);
    memcpy(p, s, len);
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    if (len < 0) {
        /* Only an invalid format gets here; treat as the programming error it is. */
        va_end(ap2);
        fprintf(stderr, "%s: invalid format \"%s\"\n", xalloc_progname, fmt);
        abort();
    }
    char *s = xmalloc((size_t)len + 1);
    vsnprintf(s, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

void xalloc_init(const char *progname)
{
    xalloc_progname = progname;
    json_set_alloc_funcs(xmalloc, free);
}
