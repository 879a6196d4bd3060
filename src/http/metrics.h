/*
 * metrics.h - what the HTTP server counts: requests by route pattern,
 * method and status, and their latency, for GET /metrics.
 *
 * The route label is the matched route's pattern ("/api/v1/replicaSet/{name}"),
 * never the raw path, and "unmatched" for requests no route took (404,
 * 405, 413, CORS preflights), so the number of series stays bounded
 * whatever clients send. Methods outside the usual set count as "other".
 */
#ifndef GPUBOX_HTTP_METRICS_H
#define GPUBOX_HTTP_METRICS_H

#include <stdio.h>

typedef struct http_metrics http_metrics;

http_metrics *http_metrics_new(void);
void http_metrics_free(http_metrics *m);

/* One answered request; route NULL means no route matched. */
void http_metrics_observe(http_metrics *m, const char *route, const char *method, int status,
                          double seconds);

/* gpubox_http_requests_total and gpubox_http_request_duration_seconds. */
void http_metrics_write(http_metrics *m, FILE *out);

#endif
