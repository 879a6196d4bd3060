/*
 * log.c - leveled logging with a per-thread request id.
 *
 * Lines are formatted into one buffer and written with a single write(2), so
 * lines of concurrent requests never interleave mid-line.
 *
 * One event is one line, whatever its text: the message is escaped
 * (log_escape) after formatting, so a value that came from a request (a
 * path with %0a, a name, a header) can never end the line and write one of
 * its own, nor send a terminal's escape sequences to whoever reads the log.
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

/* The length of the well-formed UTF-8 sequence at s[0..len), or 0 when the
 * bytes there are not one (stray continuation byte, overlong form,
 * surrogate, beyond U+10FFFF, cut short). */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
    unsigned c = s[0];
    size_t n;
    unsigned min, cp;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    /* C1 controls (U+0080-U+009F) act on terminals as the C0 ones do */
    if (cp <= 0x9f)
        return 0;
    return n;
}

size_t log_escape(char *dst, size_t cap, const char *src, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        char esc[4];
        const char *piece = esc;
        size_t piece_len, take = 1;
        if (c == '\n' || c == '\r' || c == '\t') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            piece_len = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            piece = (const char *)s + i;
            piece_len = 1;
        } else if (c >= 0x80 && (take = utf8_sequence(s + i, len - i)) > 0) {
            piece = (const char *)s + i;
            piece_len = take;
        } else { /* another control, DEL, or a byte that is not UTF-8 */
            take = 1;
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[c >> 4];
            esc[3] = hex[c & 15];
            piece_len = 4;
        }
        if (o + piece_len >= cap) /* never half an escape or a character */
            break;
        memcpy(dst + o, piece, piece_len);
        o += piece_len;
        i += take;
    }
    dst[o] = '\0';
    return o;
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
    if (n < (int)sizeof(line) - 1) {
        char msg[sizeof(line)];
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (m < 0)
            m = 0;
        if (m >= (int)sizeof(msg))
            m = sizeof(msg) - 1;
        /* one byte is kept for the newline */
        n += (int)log_escape(line + n, sizeof(line) - 1 - n, msg, (size_t)m);
    }
    if (n >= (int)sizeof(line) - 1)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
