/*
 * fault.c - exiting at a named step when GPUBOX_FAULT asks (see fault.h).
 */
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

void fault_point(const char *step)
{
    const char *want = getenv("GPUBOX_FAULT");
    if (!want || strcmp(want, step) != 0)
        return;
    log_error("GPUBOX_FAULT=%s: exiting here on purpose (fault injection)", step);
    _exit(FAULT_EXIT_CODE);
}
