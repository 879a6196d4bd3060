/*
 * journal.c - operation records: their JSON form, their place in the store,
 * and fault injection (see journal.h).
 *
 * Writes are plain puts, not compare-and-swap: an operation is written only
 * by the request (or the start-up recovery) that owns its replica set's name
 * lock, so nobody else writes it meanwhile.
 */
#include "util/xalloc.h"
#include "service/journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "service/keys.h"
#include "service/records.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

static const char *const journal_kind_names[] = {
    [JOURNAL_CREATE] = "create",
    [JOURNAL_PATCH] = "patch",
    [JOURNAL_RESTART] = "restart",
    [JOURNAL_ROLLBACK] = "rollback",
    [JOURNAL_DELETE] = "delete",
    [JOURNAL_STOP] = "stop",
    [JOURNAL_MOVE] = "move",
    [JOURNAL_MOVE_IN] = "move-in",
    [JOURNAL_MOVE_GROUP] = "move-group",
};

static const char *const journal_state_names[] = {
    [JOURNAL_RUNNING] = "running",
    [JOURNAL_DONE] = "done",
    [JOURNAL_UNDONE] = "undone",
    [JOURNAL_FAILED] = "failed",
};

const char *journal_kind_name(enum journal_kind k)
{
    return k <= JOURNAL_MOVE_GROUP ? journal_kind_names[k] : "unknown";
}

const char *journal_state_name(enum journal_state s)
{
    return s <= JOURNAL_FAILED ? journal_state_names[s] : "unknown";
}

static int journal_parse_name(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}

/* Milliseconds from *since_ns to now (time_mono_ns); *since_ns becomes now. */
static double journal_lap(int64_t *since_ns)
{
    int64_t now = time_mono_ns();
    double ms = (double)(now - *since_ns) / 1e6;
    *since_ns = now;
    return ms;
}

void journal_new_id(char id[JOURNAL_ID_MAX])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[16];
    if (strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm) == 0)
        stamp[0] = '\0';
    uint32_t bits = 0;
    if (getrandom(&bits, sizeof(bits), 0) != (ssize_t)sizeof(bits))
        bits = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid();
    snprintf(id, JOURNAL_ID_MAX, "%s%03d-%08x", stamp, (int)(ts.tv_nsec / 1000000) % 1000, bits);
}

int journal_op_init(journal_op *op, enum journal_kind kind, const char *target,
                    const char *const *steps, size_t nsteps, json_t *data, gb_err *err)
{
    memset(op, 0, sizeof(*op));
    op->data = data ? data : json_object();
    op->steps = xcalloc(nsteps + 1, sizeof(*op->steps));
    if (strlen(target) > NAME_MAX_LEN) {
        journal_op_free(op);
        return err_set(err, ERR_INTERNAL, "operation target %s is too long", target);
    }
    for (size_t i = 0; i < nsteps; i++) {
        snprintf(op->steps[i].name, sizeof(op->steps[i].name), "%s", steps[i]);
        op->steps[i].ms = -1;
    }
    op->nsteps = nsteps;
    op->since_ns = time_mono_ns();
    journal_new_id(op->id);
    op->kind = kind;
    snprintf(op->target, sizeof(op->target), "%s", target);
    op->state = JOURNAL_RUNNING;
    time_iso_now(op->create_time, sizeof(op->create_time));
    memcpy(op->update_time, op->create_time, sizeof(op->update_time));
    return 0;
}

void journal_op_free(journal_op *op)
{
    if (!op)
        return;
    free(op->steps);
    json_decref(op->data);
    op->steps = NULL;
    op->data = NULL;
    op->nsteps = 0;
}

json_t *journal_op_to_json(const journal_op *op)
{
    json_t *steps = json_array();
    for (size_t i = 0; i < op->nsteps; i++) {
        const journal_step *s = &op->steps[i];
        /* Rounded to a microsecond: the record stays short. */
        json_t *ms = s->done && s->ms >= 0 ? json_real((double)(long long)(s->ms * 1e3 + 0.5) / 1e3)
                                           : json_null();
        json_array_append_new(
            steps, json_pack("{s:s, s:b, s:o, s:o}", "name", s->name, "done", s->done, "time",
                             s->time[0] ? json_string(s->time) : json_null(), "ms", ms));
    }
    return json_pack("{s:s, s:s, s:s, s:s*, s:s, s:o, s:O, s:s, s:s, s:s}", "id", op->id, "kind",
                     journal_kind_name(op->kind), "target", op->target, "owner",
                     op->owner[0] ? op->owner : NULL, "state", journal_state_name(op->state),
                     "steps", steps, "data", op->data, "createTime", op->create_time, "updateTime",
                     op->update_time, "error", op->error);
}

static int journal_copy(const json_t *j, const char *field, char *dst, size_t size, gb_err *err)
{
    const char *v = "";
    if (json_field_string(j, "operation", field, &v, false, err) < 0)
        return -1;
    if (strlen(v) >= size)
        return err_set(err, ERR_INTERNAL, "operation field %s is too long", field);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int journal_steps_from_json(const json_t *steps, journal_op *out, gb_err *err)
{
    size_t n = json_array_size(steps);
    out->steps = xcalloc(n + 1, sizeof(*out->steps));
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(steps, i);
        journal_step *st = &out->steps[i];
        if (journal_copy(s, "name", st->name, sizeof(st->name), err) < 0 ||
            journal_copy(s, "time", st->time, sizeof(st->time), err) < 0)
            return -1;
        st->done = json_is_true(json_object_get(s, "done"));
        /* Records written before steps were timed have no "ms". */
        json_t *ms = json_object_get(s, "ms");
        st->ms = json_is_number(ms) ? json_number_value(ms) : -1;
    }
    out->nsteps = n;
    return 0;
}

int journal_op_from_json(const json_t *j, journal_op *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *kind = NULL, *state = NULL;
    json_t *steps = json_object_get(j, "steps"), *data = json_object_get(j, "data");
    if (!json_is_object(j) || !json_is_array(steps) || !json_is_object(data)) {
        err_set(err, ERR_INTERNAL, "an operation record lacks its steps or data");
        goto fail;
    }
    if (journal_copy(j, "id", out->id, sizeof(out->id), err) < 0 ||
        journal_copy(j, "target", out->target, sizeof(out->target), err) < 0 ||
        journal_copy(j, "owner", out->owner, sizeof(out->owner), err) < 0 ||
        journal_copy(j, "createTime", out->create_time, sizeof(out->create_time), err) < 0 ||
        journal_copy(j, "updateTime", out->update_time, sizeof(out->update_time), err) < 0 ||
        journal_copy(j, "error", out->error, sizeof(out->error), err) < 0 ||
        json_field_string(j, "operation", "kind", &kind, true, err) < 0 ||
        json_field_string(j, "operation", "state", &state, true, err) < 0)
        goto fail;
    int k = journal_parse_name(journal_kind_names, ARRAY_SIZE(journal_kind_names), kind);
    int s = journal_parse_name(journal_state_names, ARRAY_SIZE(journal_state_names), state);
    if (k < 0 || s < 0) {
        err_set(err, ERR_INTERNAL, "operation %s has kind '%s', state '%s'", out->id, kind, state);
        goto fail;
    }
    out->kind = (enum journal_kind)k;
    out->state = (enum journal_state)s;
    out->data = json_incref(data);
    if (journal_steps_from_json(steps, out, err) < 0)
        goto fail;
    /* A resumed operation times its next step from its load. */
    out->since_ns = time_mono_ns();
    return 0;
fail:
    if (err)
        err->code = ERR_INTERNAL;
    journal_op_free(out);
    return -1;
}

static journal_step *journal_find(const journal_op *op, const char *step)
{
    for (size_t i = 0; i < op->nsteps; i++)
        if (strcmp(op->steps[i].name, step) == 0)
            return &op->steps[i];
    return NULL;
}

bool journal_step_done(const journal_op *op, const char *step)
{
    const journal_step *s = journal_find(op, step);
    return s && s->done;
}

void journal_mark(journal_op *op, const char *step)
{
    journal_step *s = journal_find(op, step);
    if (!s) {
        log_error("journal: operation %s (%s) has no step '%s'", op->id,
                  journal_kind_name(op->kind), step);
        return;
    }
    /* A step marked again (a create marks its recorded step once more in
     * its last transaction) keeps its time: the time since belongs to the
     * next step. */
    if (s->done)
        return;
    s->done = true;
    time_iso_now(s->time, sizeof(s->time));
    s->ms = journal_lap(&op->since_ns);
}

void journal_finish(journal_op *op, enum journal_state state, const char *error)
{
    op->state = state;
    snprintf(op->error, sizeof(op->error), "%s", error ? error : "");
}

int journal_txn_op(journal_op *op, char key[STORE_KEY_MAX], char **value, store_op *out,
                   gb_err *err)
{
    if (!keys_operation(key, STORE_KEY_MAX, op->id))
        return err_set(err, ERR_INTERNAL, "operation id %s is too long", op->id);
    time_iso_now(op->update_time, sizeof(op->update_time));
    _cleanup_json_ json_t *j = journal_op_to_json(op);
    *value = json_dumps(j, JSON_COMPACT);
    *out = (store_op){.kind = STORE_OP_PUT, .key = key, .value = *value};
    return 0;
}

int journal_save(store *s, journal_op *op, gb_err *err)
{
    char key[STORE_KEY_MAX];
    _cleanup_free_ char *value = NULL;
    store_op put;
    if (journal_txn_op(op, key, &value, &put, err) < 0)
        return -1;
    if (store_put(s, key, value, NULL, err) < 0)
        return err_prefix(err, "recording operation %s", op->id);
    return 0;
}

void journal_step_written(journal_op *op, const char *step)
{
    journal_step *st = journal_find(op, step);
    if (!st || !st->done || st->ms < 0)
        return;
    /* The write counts in the step's time; the record's next write
     * carries it. */
    double work = st->ms, write = journal_lap(&op->since_ns);
    st->ms = work + write;
    log_debug("%s %s (%s): step %s took %.1f ms (%.1f ms work, %.1f ms store write)",
              journal_kind_name(op->kind), op->target, op->id, step, work + write, work, write);
}

int journal_record_step(store *s, journal_op *op, const char *step, gb_err *err)
{
    const char *kind = journal_kind_name(op->kind);
    char before[JOURNAL_STEP_MAX + 8];
    snprintf(before, sizeof(before), "before:%s", step);
    journal_fault(kind, before);
    bool again = journal_step_done(op, step);
    journal_mark(op, step);
    if (journal_save(s, op, err) < 0)
        return -1;
    if (!again)
        journal_step_written(op, step);
    journal_fault(kind, step);
    return 0;
}

int journal_load(store *s, const char *id, journal_op *out, gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (!journal_id_valid(id) || !keys_operation(key, sizeof(key), id))
        return 0;
    char what[JOURNAL_ID_MAX + 16];
    snprintf(what, sizeof(what), "operation %s", id);
    _cleanup_json_ json_t *j = NULL;
    int found = records_get_json(s, key, what, &j, NULL, err);
    if (found <= 0)
        return found;
    if (journal_op_from_json(j, out, err) < 0)
        return err_prefix(err, "reading operation %s", id);
    return 1;
}

void journal_ops_free(journal_op *ops, size_t n)
{
    for (size_t i = 0; ops && i < n; i++)
        journal_op_free(&ops[i]);
    free(ops);
}

/* Keep an operation record if it is still running (records_fn). */
static int journal_keep_running(void *elem, const char *key, json_t *value, int64_t mod_revision,
                                gb_err *err)
{
    journal_op *op = elem;
    (void)key, (void)mod_revision;
    if (journal_op_from_json(value, op, err) < 0)
        return -1;
    if (op->state == JOURNAL_RUNNING)
        return 1;
    journal_op_free(op);
    return 0;
}

static void journal_op_drop(void *op)
{
    journal_op_free(op);
}

int journal_unfinished(store *s, journal_op **out, size_t *n, gb_err *err)
{
    /* Ids sort by time, and so do the keys: oldest first. */
    *out = records_load_all(s, KEYS_OPERATIONS, NULL, sizeof(**out), journal_keep_running,
                            journal_op_drop, n, err);
    return *out ? 0 : err_prefix(err, "reading the operation journal");
}

int journal_prune(store *s, long max_age_s, size_t *deleted, gb_err *err)
{
    if (deleted)
        *deleted = 0;
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(s, KEYS_OPERATIONS, &kvs, err) < 0)
        return err_prefix(err, "reading the operation journal");
    time_t now = time(NULL);
    for (size_t i = 0; i < kvs.n; i++) {
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        const char *state = json_string_value(json_object_get(j, "state"));
        const char *updated = json_string_value(json_object_get(j, "updateTime"));
        if (!state || strcmp(state, "running") == 0 || !updated)
            continue;
        time_t t = time_iso_parse(updated);
        if (t == 0 || now - t <= max_age_s)
            continue;
        if (store_delete(s, kvs.items[i].key, err) < 0)
            return err_prefix(err, "pruning the operation journal");
        if (deleted)
            (*deleted)++;
    }
    return 0;
}

bool journal_id_valid(const char *id)
{
    size_t len = id ? strlen(id) : 0;
    if (len == 0 || len >= JOURNAL_ID_MAX || id[0] == '.')
        return false;
    return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

void journal_fault(const char *kind, const char *step)
{
    fault_point_at(kind, step);
}
