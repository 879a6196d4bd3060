/*
 * cleanup.h - scope-bound cleanup for the error paths of a daemon that talks
 * to Docker and parses JSON on every other line.
 *
 * A variable declared `_cleanup_free_ char *s = NULL;` is freed when it goes
 * out of scope; `steal_ptr(&s)` hands ownership out of the scope. The same
 * shape exists for jansson values, curl handles, FILE streams and fds.
 */
#ifndef GPUBOX_UTIL_CLEANUP_H
#define GPUBOX_UTIL_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
    static inline void func##p(type *p)                                                            \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

static inline void freep(void *p)
{
    free(*(void **)p);
}

/* jansson >= 2.11 defines json_decrefp itself (with json_auto_t). */
#ifndef json_auto_t
static inline void json_decrefp(json_t **p)
{
    if (*p)
        json_decref(*p);
}
#endif

static inline void fclosep(FILE **p)
{
    if (*p)
        fclose(*p);
}

static inline void closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_json_ _cleanup_(json_decrefp)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_close_ _cleanup_(closep)

/* Take the pointer out of a cleanup variable so the scope no longer owns it. */
#define steal_ptr(pp)                                                                              \
    ({                                                                                             \
        __typeof__(*(pp)) _stolen = *(pp);                                                         \
        *(pp) = NULL;                                                                              \
        _stolen;                                                                                   \
    })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
