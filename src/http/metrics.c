/*
 * metrics.c - the HTTP server's request counter and latency histogram
 * (see metrics.h), two families of util/prom.h.
 */
#include "util/xalloc.h"
#include "http/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "util/prom.h"

struct http_metrics {
    prom_family *requests;
    prom_family *duration;
};

/* Seconds: most answers come from memory in well under a millisecond;
 * creates and execs talk to Docker for seconds. */
static const double http_latency_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,   0.5,   1,      2.5,   5,    10,    30,   60};

http_metrics *http_metrics_new(void)
{
    static const char *const req_labels[] = {"route", "method", "status", NULL};
    static const char *const dur_labels[] = {"route", "method", NULL};
    http_metrics *m = xcalloc(1, sizeof(*m));
    m->requests =
        prom_counter_new("gpubox_http_requests_total",
                         "HTTP requests answered, by route pattern, method and status", req_labels);
    m->duration = prom_histogram_new(
        "gpubox_http_request_duration_seconds",
        "Time from the request's first byte to the answer being sent, by route pattern and method",
        dur_labels, http_latency_buckets,
        sizeof(http_latency_buckets) / sizeof(http_latency_buckets[0]));
    return m;
}

void http_metrics_free(http_metrics *m)
{
    if (!m)
        return;
    prom_family_free(m->requests);
    prom_family_free(m->duration);
    free(m);
}

static const char *http_metrics_method(const char *method)
{
    static const char *const known[] = {"GET",    "POST", "PUT",     "PATCH",
                                        "DELETE", "HEAD", "OPTIONS", NULL};
    for (size_t i = 0; method && known[i]; i++)
        if (strcmp(method, known[i]) == 0)
            return known[i];
    return "other";
}

void http_metrics_observe(http_metrics *m, const char *route, const char *method, int status,
                          double seconds)
{
    if (!m)
        return;
    char code[8];
    snprintf(code, sizeof(code), "%d", status);
    const char *r = route ? route : "unmatched";
    const char *meth = http_metrics_method(method);
    const char *req_values[] = {r, meth, code};
    const char *dur_values[] = {r, meth};
    prom_counter_inc(m->requests, req_values);
    prom_histogram_observe(m->duration, dur_values, seconds);
}

void http_metrics_write(http_metrics *m, FILE *out)
{
    if (!m)
        return;
    prom_family_write(m->requests, out);
    prom_family_write(m->duration, out);
}
