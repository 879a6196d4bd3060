/*
 * ops_timer.c - an operation's duration and result, handed to
 * a->hooks.op_done (see ops_timer.h).
 */
#include "service/ops_timer.h"

#include <ctype.h>

#include "util/time.h"

ops_timer ops_timer_start(app *a, const char *kind, json_t **out, const gb_err *err)
{
    ops_timer t = {.a = a, .kind = kind, .out = out, .err = err};
    if (out)
        *out = NULL; /* set means success when the timer ends */
    t.start_ns = time_mono_ns();
    return t;
}

void ops_timer_done(ops_timer *t)
{
    if (!t->a || !t->a->hooks.op_done)
        return;
    double s = time_since_s(t->start_ns);
    char result[48] = "ok";
    if (!t->out || !*t->out) {
        const char *name = err_name(t->err ? t->err->code : ERR_INTERNAL);
        size_t i = 0;
        for (; name[i] && i + 1 < sizeof(result); i++)
            result[i] = (char)tolower((unsigned char)name[i]);
        result[i] = '\0';
    }
    t->a->hooks.op_done(t->a, t->kind, result, s);
}
