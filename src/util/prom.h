/*
 * prom.h - metrics in the Prometheus text exposition format (version
 * 0.0.4): labeled counters and histograms that the HTTP layer and the
 * services update, and the writers /metrics uses to print them and any
 * gauge computed on the spot.
 *
 * A family is one metric name with fixed label names ("route", "method",
 * "status"); each distinct tuple of label values is one series, created on
 * first use with copies of the values. A family holds at most
 * PROM_MAX_SERIES series: callers pass bounded values (route patterns, not
 * raw paths), and a runaway caller is cut off rather than eating memory.
 *
 * Thread-safe: one mutex per family. Updates cost a linear scan over the
 * family's series (tens of them), far below a request's own cost.
 */
#ifndef GPUBOX_UTIL_PROM_H
#define GPUBOX_UTIL_PROM_H

#include <stddef.h>
#include <stdio.h>

#define PROM_MAX_LABELS 4
#define PROM_MAX_SERIES 1024
#define PROM_MAX_BUCKETS 20

typedef struct prom_family prom_family;

/* name: the full name, "_total" included for a counter. labels:
 * NULL-terminated label names (at most PROM_MAX_LABELS). Never NULL. */
prom_family *prom_counter_new(const char *name, const char *help, const char *const *labels);
/* buckets: ascending upper bounds (the +Inf bucket is implied). */
prom_family *prom_histogram_new(const char *name, const char *help, const char *const *labels,
                                const double *buckets, size_t nbuckets);
void prom_family_free(prom_family *f);

/* values: one per label name, in order. */
void prom_counter_inc(prom_family *f, const char *const *values);
void prom_histogram_observe(prom_family *f, const char *const *values, double v);

/* text (an exposition) with label name="value" first on every sample;
 * value is escaped. Free it. */
char *prom_add_label(const char *text, size_t len, const char *name, const char *value,
                     size_t *out_len);

/* The family's # HELP, # TYPE and every series. */
void prom_family_write(prom_family *f, FILE *out);

/* For gauges computed at scrape time: the header once, then samples.
 * labels and values are NULL-terminated / matching (both may be NULL);
 * label values are escaped as the format requires. */
void prom_write_header(FILE *out, const char *name, const char *type, const char *help);
void prom_write_sample(FILE *out, const char *name, const char *const *labels,
                       const char *const *values, double v);

#endif
