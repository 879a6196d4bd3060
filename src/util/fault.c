/*
 * fault.c - exiting at a named step when GPUBOX_FAULT asks (see fault.h).
 */
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

static void fault_exit(const char *want)
{
    log_warn("%s=%s: exiting here on purpose (fault injection)", FAULT_ENV, want);
    _exit(FAULT_EXIT_CODE);
}

void fault_point(const char *step)
{
    const char *want = getenv(FAULT_ENV);
    if (want && strcmp(want, step) == 0)
        fault_exit(want);
}

void fault_point_at(const char *kind, const char *step)
{
    const char *want = getenv(FAULT_ENV);
    if (!want || !*want)
        return;
    size_t klen = strlen(kind);
    if (strncmp(want, kind, klen) == 0 && want[klen] == ':' && strcmp(want + klen + 1, step) == 0)
        fault_exit(want);
}
