/*
 * time.c - the monotonic clock and ISO 8601 UTC timestamps (time.h).
 */
#include "util/time.h"

#include <stdio.h>

#define TIME_ISO_FORMAT "%Y-%m-%dT%H:%M:%SZ"

int64_t time_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t time_mono_ms(void)
{
    return time_mono_ns() / 1000000;
}

double time_since_s(int64_t start_ns)
{
    return (double)(time_mono_ns() - start_ns) / 1e9;
}

int time_iso_format(time_t t, char *buf, size_t size)
{
    struct tm tm;
    if (gmtime_r(&t, &tm) && strftime(buf, size, TIME_ISO_FORMAT, &tm) > 0)
        return 0;
    if (size)
        buf[0] = '\0';
    return -1;
}

void time_iso_now(char *buf, size_t size)
{
    time_iso_format(time(NULL), buf, size);
}

time_t time_iso_parse(const char *s)
{
    struct tm tm = {0};
    const char *end = s ? strptime(s, TIME_ISO_FORMAT, &tm) : NULL;
    return end && !*end ? timegm(&tm) : 0;
}
