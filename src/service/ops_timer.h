/*
 * ops_timer.h - operations are timed in one place: a service function that
 * changes state starts with
 *     OPS_TIMED(a, "stop", out, err);
 * and, when it returns, one observation goes to a->hooks.op_done (the
 * metrics, metrics.h, listen there; app_open sets it): result "ok" when it
 * produced its answer (*out set), else the error's name in lower case
 * ("gpu_not_enough", "state_conflict"): a bounded set of values.
 *
 * The services name no metric: they report here, and whoever listens
 * observes, so the metrics sit above the services and never below them.
 */
#ifndef GPUBOX_SERVICE_OPS_TIMER_H
#define GPUBOX_SERVICE_OPS_TIMER_H

#include <stdint.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

typedef struct ops_timer {
    app *a;
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

#endif
