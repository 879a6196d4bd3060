/*
 * store_test_util.h - temporary directories for the store tests: each test
 * gets a fresh directory under $TMPDIR (or /tmp), removed with everything in
 * it when the test ends.
 */
#ifndef GPUBOX_TESTS_STORE_TEST_UTIL_H
#define GPUBOX_TESTS_STORE_TEST_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new empty directory; free the result with store_test_rmdir. */
static inline char *store_test_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    char *dir = NULL;
    if (asprintf(&dir, "%s/gpubox-store-test-XXXXXX", base && *base ? base : "/tmp") < 0)
        return NULL;
    if (!mkdtemp(dir)) {
        free(dir);
        return NULL;
    }
    return dir;
}

static inline int store_test_rm_entry(const char *path, const struct stat *st, int type,
                                      struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* Remove dir and everything below it, then free the string. */
static inline void store_test_rmdir(char *dir)
{
    if (!dir)
        return;
    nftw(dir, store_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

#endif
