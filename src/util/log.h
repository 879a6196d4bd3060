/*
 * log.h - leveled logging to stderr, one line per event.
 *
 * Each line carries a timestamp, the level and, when the calling thread is
 * serving an HTTP request, that request's id (log_set_request_id), so every
 * line of one request can be found with grep.
 */
#ifndef GPUBOX_UTIL_LOG_H
#define GPUBOX_UTIL_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* "debug" | "info" | "warn" | "error" -> level; -1 when unknown. */
int log_level_parse(const char *s);

/* The request id of the calling thread ("" or NULL clears it). */
void log_set_request_id(const char *id);
const char *log_request_id(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
