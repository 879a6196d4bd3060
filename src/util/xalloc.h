/*
 * xalloc.h - allocation that cannot fail: out of memory aborts in one place,
 * as Redis's zmalloc and git's xmalloc do.
 *
 * Why abort: every multi-step change gpuboxd makes is journalled
 * (service/journal.c) and resumes or rolls back at the next start, so a
 * daemon killed mid-operation loses nothing. A branch that tries to carry on
 * after malloc returned NULL is never exercised by a test and, half handled,
 * is worse than a crash: it can run an operation without its lock or leave a
 * record half written. So callers use these wrappers and carry no
 * out-of-memory branches; on failure they print "gpuboxd: out of memory
 * allocating N bytes" to stderr and abort().
 *
 * xalloc_init() names the program for that line (default "gpuboxd") and
 * makes jansson allocate through these wrappers too, after which
 * json_object(), json_array(), json_string() of valid UTF-8 and json_pack()
 * of a valid format cannot return NULL for lack of memory. They still can for
 * bad input (a NULL argument to "s", invalid UTF-8): keep those checks.
 * curl, sqlite and libmicrohttpd allocate on their own; their error codes
 * stay handled where they are returned.
 */
#ifndef GPUBOX_UTIL_XALLOC_H
#define GPUBOX_UTIL_XALLOC_H

#include <stdarg.h>
#include <stddef.h>

#if defined(__GNUC__)
#define XALLOC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define XALLOC_PRINTF(a, b)
#endif

/* Log "<program>: out of memory allocating N bytes" and abort(). */
_Noreturn void xalloc_die(size_t size);

void *xmalloc(size_t size);
/* Zeroed; aborts also when n * size overflows. */
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
/* realloc of n * size bytes, aborting when the product overflows. */
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* The formatted string, malloc'd. */
char *xasprintf(const char *fmt, ...) XALLOC_PRINTF(1, 2);
/* xasprintf with a va_list (left unusable, as after vsnprintf). */
char *xvasprintf(const char *fmt, va_list ap) XALLOC_PRINTF(1, 0);

/* Call first thing in main(), before any JSON value exists: `progname`
 * (a string literal) prefixes the out-of-memory line, and jansson's
 * allocations go through xmalloc/free. Safe to call again. */
void xalloc_init(const char *progname);

#endif
