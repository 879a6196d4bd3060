/*
 * log.h - leveled logging to stderr, one line per event.
 *
 * Each line carries a timestamp, the level and, when the calling thread is
 * serving an HTTP request, that request's id (log_set_request_id), so every
 * line of one request can be found with grep.
 *
 * A message is one line whatever it holds: control characters (newline,
 * carriage return, tab, the other C0 and C1 controls, DEL) and bytes that
 * are not UTF-8 are written escaped (\n, \r, \t, \xNN), so values that
 * came from a request (a path with %0a, a name, a header) cannot forge
 * lines of the log or the audit log. A backslash is written as it is.
 */
#ifndef GPUBOX_UTIL_LOG_H
#define GPUBOX_UTIL_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* "debug" | "info" | "warn" | "error" -> level; -1 when unknown. */
int log_level_parse(const char *s);

/* The request id of the calling thread ("" or NULL clears it). */
void log_set_request_id(const char *id);
const char *log_request_id(void);

/* src[0..len) into dst (cap bytes, NUL-terminated) with the escapes above;
 * stops before an escape or a character that does not fit. Returns the
 * length written. */
size_t log_escape(char *dst, size_t cap, const char *src, size_t len);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
