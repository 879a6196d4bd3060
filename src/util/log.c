/*
 * log.c - leveled logging with a per-thread request id.
 *
 * Lines are formatted into one buffer and written with a single write(2), so
 * lines of concurrent requests never interleave mid-line.
 */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static enum log_level current_level = LOG_INFO;
static _Thread_local char request_id[40];

void log_set_level(enum log_level level)
{
    current_level = level;
}

enum log_level log_get_level(void)
{
    return current_level;
}

int log_level_parse(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (s && strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

void log_set_request_id(const char *id)
{
    if (!id)
        request_id[0] = '\0';
    else
        snprintf(request_id, sizeof(request_id), "%s", id);
}

const char *log_request_id(void)
{
    return request_id;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < current_level)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, tags[level]);
    if (request_id[0] && n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - n, "[req %s] ", request_id);
    if (n < (int)sizeof(line)) {
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
        va_end(ap);
    }
    if (n >= (int)sizeof(line) - 1)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
