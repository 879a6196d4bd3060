/*
 * time.c - the monotonic clock and ISO 8601 UTC timestamps (time.h).
 */
#include "util/time.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

static const struct {
    char unit;
    int64_t seconds;
} time_units[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};

int time_duration_parse(const char *s, int64_t *seconds)
{
    int64_t total = 0;
    unsigned seen = 0;
    if (!s || !*s)
        return -1;
    while (*s) {
        if (*s < '0' || *s > '9')
            return -1;
        int64_t n = 0;
        while (*s >= '0' && *s <= '9') {
            n = n * 10 + (*s++ - '0');
            if (n > INT32_MAX)
                return -1;
        }
        size_t u = 0;
        while (u < sizeof(time_units) / sizeof(time_units[0]) && time_units[u].unit != *s)
            u++;
        if (!*s) /* a bare number: seconds, only on its own */
            u = seen ? sizeof(time_units) / sizeof(time_units[0]) : 3;
        else
            s++;
        if (u >= sizeof(time_units) / sizeof(time_units[0]) || (seen & (1u << u)))
            return -1;
        seen |= 1u << u;
        total += n * time_units[u].seconds;
        if (total > INT32_MAX)
            return -1;
    }
    *seconds = total;
    return 0;
}

void time_duration_format(int64_t seconds, char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (size_t u = 0; u < sizeof(time_units) / sizeof(time_units[0]) && len < size; u++) {
        int64_t n = seconds / time_units[u].seconds;
        seconds %= time_units[u].seconds;
        if (n > 0)
            len +=
                (size_t)snprintf(buf + len, size - len, "%lld%c", (long long)n, time_units[u].unit);
    }
    if (size && !buf[0])
        snprintf(buf, size, "0s");
}

int time_rfc3339_parse(const char *v, int64_t *out)
{
    size_t n = strlen(v);
    if (n < 20 || v[10] != 'T')
        return -1;
    char whole[TIME_ISO_MAX];
    snprintf(whole, sizeof(whole), "%.19sZ", v);
    time_t t = time_iso_parse(whole);
    const char *p = v + 19;
    if (!t)
        return -1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    int off = 0;
    if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && isdigit((unsigned char)p[1]) &&
        isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
        isdigit((unsigned char)p[5])) {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
        off = p[0] == '+' ? off : -off;
    } else if (strcmp(p, "Z") != 0) {
        return -1;
    }
    *out = (int64_t)t - off;
    return 0;
}
