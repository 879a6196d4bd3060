/*
 * metrics.h - what the services count and what GET /metrics shows of the
 * application: GPUs, ports, replica sets, the store's health, and the
 * operations the services run (by kind and result, with their duration).
 *
 * The metrics observe the services, never the other way round: operations
 * report through a->hooks.op_done (ops_timer.h: OPS_TIMED), which app_open
 * points at ops_metrics_observe.
 */
#ifndef GPUBOX_SERVICE_METRICS_H
#define GPUBOX_SERVICE_METRICS_H

#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

typedef struct ops_metrics ops_metrics;

ops_metrics *ops_metrics_new(void);
void ops_metrics_free(ops_metrics *m);
void ops_metrics_observe(ops_metrics *m, const char *kind, const char *result, double seconds);

/* The application's part of GET /metrics, in the Prometheus text format.
 * Asks the store (replica-set records, a health ping); never Docker. */
int metrics_write(app *a, FILE *out, gb_err *err);

#endif
