/*
 * fuzz_util.h - what the libFuzzer targets share: the input as a
 * NUL-terminated string, and a check that aborts (so libFuzzer records the
 * input) when a property the code promises does not hold.
 */
#ifndef GPUBOX_FUZZ_UTIL_H
#define GPUBOX_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input up to its first NUL, as a malloc'd C string (what a C API
 * taking const char * would see). */
static inline char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz check failed: %s: ", #cond);                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
