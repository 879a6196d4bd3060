/*
 * metrics.h - what the services count and what GET /metrics shows of the
 * application: GPUs, ports, replica sets, the store's health, and the
 * operations the services run (by kind and result, with their duration).
 *
 * Operations are timed in one place: a service function that changes
 * state starts with
 *     OPS_TIMED(a, "stop", out, err);
 * and, when it returns, one observation is made: result "ok" when it
 * produced its answer (*out set), else the error's name in lower case
 * ("gpu_not_enough", "state_conflict"): a bounded set of values.
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

typedef struct ops_timer {
    ops_metrics *m;
    const char *kind;
    json_t **out;
    const gb_err *err;
    int64_t start_ns; /* time_mono_ns */
} ops_timer;

ops_timer ops_timer_start(app *a, const char *kind, json_t **out, const gb_err *err);
void ops_timer_done(ops_timer *t);

#define OPS_TIMED(a, kind, out, err)                                                               \
    __attribute__((cleanup(ops_timer_done))) ops_timer ops_timer_ =                                \
        ops_timer_start((a), (kind), (out), (err))

/* The application's part of GET /metrics, in the Prometheus text format.
 * Asks the store (replica-set records, a health ping); never Docker. */
int metrics_write(app *a, FILE *out, gb_err *err);

#endif
