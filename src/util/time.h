/*
 * time.h - the clocks gpubox reads and the one timestamp format it writes.
 *
 * Durations and deadlines use the monotonic clock (CLOCK_MONOTONIC), which
 * no change of the wall clock moves. Times that are stored or shown
 * (records, history, the operation journal, the store's owner) are UTC, ISO
 * 8601 to the second: "2026-11-22T01:28:28Z".
 */
#ifndef GPUBOX_UTIL_TIME_H
#define GPUBOX_UTIL_TIME_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* "2026-11-22T01:28:28Z" and its NUL. */
#define TIME_ISO_MAX 21

/* The monotonic clock, in nanoseconds and in milliseconds. */
int64_t time_mono_ns(void);
int64_t time_mono_ms(void);
/* Seconds (with the fraction) since start_ns, a time_mono_ns() reading. */
double time_since_s(int64_t start_ns);

/* t as "2026-11-22T01:28:28Z" into buf; -1 (buf "" if size allows) when it
 * does not fit or t has no such date. */
int time_iso_format(time_t t, char *buf, size_t size);
/* The wall clock now, as time_iso_format writes it. */
void time_iso_now(char *buf, size_t size);
/* The time s names in that form; 0 unless s is exactly that form. */
time_t time_iso_parse(const char *s);
/* RFC 3339 as Docker and people write it: "2026-11-22T01:28:28" with an
 * optional fraction and "Z" or "+hh:mm" / "-hh:mm", as unix seconds (the
 * fraction dropped). 0, or -1 for anything else. */
int time_rfc3339_parse(const char *s, int64_t *out);

/* A duration as people write it: one or more NUMBER UNIT parts, units d,
 * h, m, s ("30m", "1h30m", "90s", "2d"); a bare number is seconds. 0 with
 * *seconds set, -1 for anything else (empty, negative, unknown unit, a unit
 * twice, beyond ~68 years). */
int time_duration_parse(const char *s, int64_t *seconds);
/* The shortest such form: 5400 -> "1h30m", 0 -> "0s". */
void time_duration_format(int64_t seconds, char *buf, size_t size);

#endif
