/*
 * version.c - making version N+1 of a replica set while keeping
 * its system disk: what patch, rollback and a restart on other cards share.
 *
 * The caller has taken from the pools what the new version needs beyond
 * what the set holds (replicaset_alloc_next), and describes the change as two
 * records: `from` (version N as it is) and `to` (version N+1: new spec, the
 * full holdings it will have, its state). The steps, each recorded in the
 * operation journal (journal.h) before the next begins:
 *
 *   begin              one transaction: the set's record holds what from
 *                      and to hold together (so nothing can be given to
 *                      anyone else meanwhile) and names the operation; the
 *                      operation record, with from and to, is written
 *   container-created  <name>-(N+1) created, not started
 *   old-stopped        <name>-N stopped
 *   carry-begin        the point of no return: from here the change goes
 *                      forward, never back
 *   carried            the system disk moved from <name>-N into <name>-(N+1)
 *                      (carry_system_disk, idempotent)
 *   new-started        <name>-(N+1) started (a paused set stays stopped)
 *   old-removed        <name>-N removed
 *   committed          one transaction: the record at version N+1 holding
 *                      only what to holds, the history entry N+1, the
 *                      operation done
 * and then the pools get back what only from held (a shrinking patch gives
 * its cards back only now, after the new container runs).
 *
 * Undo (a failure, or a crash, before carry-begin): <name>-(N+1) removed,
 * <name>-N started again if it ran, the record back to from, the operation
 * "undone", and the pools get back what only to held. A failure after
 * carry-begin but before the new container runs is undone too, with the
 * disk carried back first; after it runs, only forward. A change that can
 * go neither way stays "running" in the journal, and the set's record keeps
 * naming it: the next call on the set, or the next start of gpuboxd, tries
 * again (replicaset_version_resume).
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carry/carry.h"
#include "service/journal.h"
#include "service/keys.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

/* Everything one change works with. */
typedef struct replicaset_change {
    app *a;
    journal_op *op;
    replicaset_record from; /* version N as it was */
    replicaset_record to;   /* version N+1 as it will be */
    replicaset_record cur;  /* the record in the store now: from and to's holdings */
    bool swapped;           /* the pool exchanged from's GPUs for to's (shares) */
    int fail_code;          /* the kind's envelope code for Docker or carry failures */
} replicaset_change;

static void replicaset_change_free(replicaset_change *c)
{
    replicaset_record_free(&c->from);
    replicaset_record_free(&c->to);
    replicaset_record_free(&c->cur);
}

static int replicaset_kind_fail_code(enum journal_kind k)
{
    switch (k) {
    case JOURNAL_ROLLBACK:
        return ERR_ROLLBACK_FAILED;
    case JOURNAL_RESTART:
        return ERR_RESTART_FAILED;
    default:
        return ERR_PATCH_FAILED;
    }
}

static const char *replicaset_change_kind(const replicaset_change *c)
{
    return journal_kind_name(c->op->kind);
}

/* Keep the operation's copy of `to` current (its container id, once known). */
static void replicaset_change_note_to(replicaset_change *c)
{
    json_object_set_new(c->op->data, "to", replicaset_record_to_json(&c->to));
}

/* 1 exists (running set), 0 absent, -1 Docker did not answer. */
static int replicaset_inspect_running(app *a, const char *name, bool *running, gb_err *err)
{
    docker_container_state st;
    gb_err e = GB_ERR_INIT;
    if (docker_container_state_get(a->docker, name, &st, &e) < 0) {
        if (e.code == ERR_NOT_FOUND)
            return 0;
        *err = e;
        return -1;
    }
    *running = st.running;
    return 1;
}

static enum carry_method replicaset_carry_method(const app *a)
{
    int m = carry_method_parse(a->cfg.carry_method ? a->cfg.carry_method : "auto");
    return m < 0 ? CARRY_AUTO : (enum carry_method)m;
}

/* container-created, forward. */
static int replicaset_step_create(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    app *a = c->a;
    /* A container of this name is a leftover of this very step (created,
     * not recorded) or of an undo that could not remove it: nothing has
     * been carried into it yet, so make it afresh from `to`. */
    if (docker_container_remove(a->docker, c->to.container_name, true, err) < 0)
        return -1;
    replicaset_container_forget(a, c->to.container_name);
    _cleanup_free_ char *id = NULL;
    if (replicaset_container_create(a, &c->to, &id, err) < 0)
        return -1;
    snprintf(c->to.container_id, sizeof(c->to.container_id), "%s", id);
    replicaset_change_note_to(c);
    return 0;
}

/* container-created, back: <name>-(N+1) removed. */
static int replicaset_step_create_back(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    if (docker_container_remove(c->a->docker, c->to.container_name, true, err) < 0)
        return -1;
    replicaset_container_forget(c->a, c->to.container_name);
    return 0;
}

/* old-stopped, forward. */
static int replicaset_step_stop_old(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    if (replicaset_container_stop(c->a, c->from.container_name, err) < 0 &&
        err->code != ERR_NOT_FOUND)
        return err_prefix(err, "stopping %s", c->from.container_name);
    return 0;
}

/* old-stopped, back: <name>-N started again if it ran (a failure is only
 * logged: the record goes back to version N all the same). */
static int replicaset_step_stop_old_back(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    bool old_running = false;
    int old_exists = replicaset_inspect_running(c->a, c->from.container_name, &old_running, err);
    if (old_exists < 0)
        return -1;
    gb_err start = GB_ERR_INIT;
    if (c->from.state == RS_STATE_RUNNING && old_exists &&
        replicaset_container_start(c->a, &c->from, &start) < 0)
        log_warn("%s %s: could not start %s again: %s", replicaset_change_kind(c), c->from.name,
                 c->from.container_name, start.msg);
    return 0;
}

/* A system disk records changes against its image's layers: a version of
 * another image starts from that image alone (docs/replicasets.md). */
static bool replicaset_change_same_image(const replicaset_change *c)
{
    return strcmp(c->from.spec.image, c->to.spec.image) == 0;
}

/* carried, forward. */
static int replicaset_step_carry(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    app *a = c->a;
    if (!replicaset_change_same_image(c)) {
        json_object_set_new(c->op->data, "carry",
                            json_pack("{s:s, s:I, s:I, s:f, s:I, s:s}", "method", "none", "entries",
                                      (json_int_t)0, "bytes", (json_int_t)0, "seconds", 0.0,
                                      "unapplied", (json_int_t)0, "note",
                                      "another image: the system disk was not carried, so files "
                                      "written outside binds and volumes under the other "
                                      "image are not in this version; binds and volumes are"));
        return 0;
    }
    bool running = false, old_running = false;
    int new_exists = replicaset_inspect_running(a, c->to.container_name, &running, err);
    int old_exists = replicaset_inspect_running(a, c->from.container_name, &old_running, err);
    if (new_exists < 0 || old_exists < 0)
        return -1;
    if (!new_exists)
        return err_set(err, ERR_INTERNAL,
                       "container %s disappeared before the system disk was "
                       "carried into it",
                       c->to.container_name);
    if (running || !old_exists) {
        /* Started already (the carry ran before it), or the old container
         * is gone (removed after the start): nothing left to carry. */
        if (!old_exists && !running)
            log_error("%s %s: container %s is gone; its system disk could not be carried",
                      replicaset_change_kind(c), c->to.name, c->from.container_name);
        return 0;
    }
    carry_stats st = {0};
    if (carry_system_disk(a->docker, c->from.container_name, c->to.container_name,
                          replicaset_carry_method(a), &st, err) < 0)
        return err_prefix(err, "carrying the system disk of %s into %s", c->from.container_name,
                          c->to.container_name);
    json_object_set_new(c->op->data, "carry",
                        json_pack("{s:s, s:I, s:I, s:f, s:I, s:s}", "method",
                                  carry_method_name(st.used), "entries", (json_int_t)st.entries,
                                  "bytes", (json_int_t)st.bytes, "seconds", st.seconds, "unapplied",
                                  (json_int_t)st.unapplied, "note", st.note));
    return 0;
}

/* carried, back (the carry began): the disk carried back into <name>-N,
 * <name>-(N+1) stopped first. */
static int replicaset_step_carry_back(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    app *a = c->a;
    bool new_running = false, old_running = false;
    int new_exists = replicaset_inspect_running(a, c->to.container_name, &new_running, err);
    int old_exists = replicaset_inspect_running(a, c->from.container_name, &old_running, err);
    if (new_exists < 0 || old_exists < 0)
        return -1;
    if (!new_exists || !replicaset_change_same_image(c))
        return 0;
    if (!old_exists)
        return err_set(err, ERR_INTERNAL, "container %s is gone; version %d can only go forward",
                       c->from.container_name, c->to.version);
    if (new_running && replicaset_container_stop(a, c->to.container_name, err) < 0)
        return -1;
    if (carry_system_disk(a->docker, c->to.container_name, c->from.container_name,
                          replicaset_carry_method(a), NULL, err) < 0)
        return err_prefix(err, "carrying the system disk back into %s", c->from.container_name);
    return 0;
}

/* new-started, forward (a paused set's stays stopped). */
static int replicaset_step_start_new(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    if (c->to.state == RS_STATE_RUNNING && replicaset_container_start(c->a, &c->to, err) < 0)
        return err_prefix(err, "starting %s", c->to.container_name);
    return 0;
}

/* old-removed, forward. */
static int replicaset_step_remove_old(void *ctx, gb_err *err)
{
    replicaset_change *c = ctx;
    replicaset_logs_keep(c->a, c->from.name, c->from.version, c->from.container_name);
    if (docker_container_remove(c->a->docker, c->from.container_name, true, err) < 0)
        return err_prefix(err, "removing %s", c->from.container_name);
    replicaset_container_forget(c->a, c->from.container_name);
    return 0;
}

/* The steps (the file comment says what each does). Back runs, the latest
 * first, over the steps begun; from new-started on there is no back. */
static const op_step_def replicaset_version_steps[] = {
    {OP_STEP_BEGIN, NULL, NULL},
    {OP_STEP_CONTAINER_CREATED, replicaset_step_create, replicaset_step_create_back},
    {OP_STEP_OLD_STOPPED, replicaset_step_stop_old, replicaset_step_stop_old_back},
    {OP_STEP_CARRY_BEGIN, NULL, NULL},
    {OP_STEP_CARRIED, replicaset_step_carry, replicaset_step_carry_back},
    {OP_STEP_NEW_STARTED, replicaset_step_start_new, NULL},
    {OP_STEP_OLD_REMOVED, replicaset_step_remove_old, NULL},
    {OP_STEP_COMMITTED, NULL, NULL},
};

/* The last transaction of either way: the record as `final` (with no
 * operation), the operation in its final state, plus extra (may be NULL:
 * the history entry going forward); then the pools get back what only cur
 * held (or, undoing a swap, hold from's GPUs again). */
static int replicaset_change_close(replicaset_change *c, enum journal_state state, const char *why,
                                   replicaset_record *final, const store_op *extra, gb_err *err)
{
    final->mod_revision = c->cur.mod_revision;
    if (op_close(c->a, c->op, state, why, final, extra, extra ? 1 : 0, err) < 0)
        return -1;
    if (c->swapped && final == &c->from)
        replicaset_alloc_swap_back(c->a, &c->cur, &c->from);
    else
        replicaset_alloc_give_back_except(c->a, &c->cur, final);
    return 0;
}

static int replicaset_change_commit(replicaset_change *c, gb_err *err)
{
    char hkey[STORE_KEY_MAX];
    keys_replicaset_history(hkey, sizeof(hkey), c->to.name, c->to.version);
    const char *reason = json_string_value(json_object_get(c->op->data, "reason"));
    time_iso_now(c->to.update_time, sizeof(c->to.update_time));
    _cleanup_json_ json_t *hist =
        replicaset_record_history_entry(&c->to, reason ? reason : "patch");
    _cleanup_free_ char *htext = json_dumps(hist, JSON_COMPACT);
    store_op hop = {.kind = STORE_OP_PUT, .key = hkey, .value = htext};
    replicaset_record_forget_last(&c->to);
    if (replicaset_change_close(c, JOURNAL_DONE, NULL, &c->to, &hop, err) < 0)
        return err_prefix(err, "recording version %d of %s", c->to.version, c->to.name);
    log_info("%s %s: version %d (%s) runs%s, %zu GPU(s), %zu port(s)", replicaset_change_kind(c),
             c->to.name, c->to.version, c->to.container_name,
             c->to.state == RS_STATE_PAUSED ? " (paused)" : "", c->to.ngpus, c->to.nports);
    return 0;
}

/* Back to version N (see the file comment): each step begun goes back,
 * the latest first (replicaset_version_steps), then the record and the pools. */
static int replicaset_change_undo(replicaset_change *c, const char *why, gb_err *err)
{
    const op_kind *k = op_kind_of(c->a->op_kinds, c->op);
    if (!k || op_back(k, c->op, c, err) < 0)
        return -1;
    if (replicaset_change_close(c, JOURNAL_UNDONE, why, &c->from, NULL, err) < 0)
        return -1;
    log_info("%s %s: undone, back at version %d: %s", replicaset_change_kind(c), c->from.name,
             c->from.version, why);
    return 0;
}

/* Forward, and when that fails, back while back is still possible. The
 * caller's error says what failed; when neither way worked the operation
 * stays pending and the message says so. */
static int replicaset_change_run(replicaset_change *c, bool try_forward, gb_err *err)
{
    gb_err fwd = GB_ERR_INIT;
    const op_kind *k = op_kind_of(c->a->op_kinds, c->op);
    if (!k)
        return err_set(err, ERR_INTERNAL, "operation %s has an unknown kind", c->op->id);
    if (try_forward && op_forward(c->a, k, c->op, c, &fwd) == 0 &&
        replicaset_change_commit(c, &fwd) == 0)
        return 0;
    if (!try_forward)
        snprintf(fwd.msg, sizeof(fwd.msg), "gpuboxd stopped before the system disk was carried");
    gb_err back = GB_ERR_INIT;
    if (!journal_step_done(c->op, OP_STEP_NEW_STARTED) &&
        replicaset_change_undo(c, fwd.msg, &back) == 0) {
        if (!try_forward)
            return 0;
        /* Errors that tell the user what to change keep their code; the
         * rest are the kind's "failed". */
        *err = fwd;
        if (fwd.code != ERR_INVALID_PARAMS && fwd.code != ERR_FORBIDDEN &&
            fwd.code != ERR_IMAGE_NOT_FOUND)
            err->code = c->fail_code;
        return err_prefix(err, "%s of %s undone", replicaset_change_kind(c), c->from.name);
    }
    /* Neither way: leave it pending, saying why, for the next attempt. */
    snprintf(c->op->error, sizeof(c->op->error), "%.250s%s%.250s", fwd.msg,
             back.msg[0] ? "; undo: " : "", back.msg);
    gb_err ignored = GB_ERR_INIT;
    journal_save(c->a->store, c->op, &ignored);
    return err_set(err, c->fail_code,
                   "%s of %s stopped part way (%s); operation %s will be finished by the next call "
                   "on the set or the next start of gpuboxd",
                   replicaset_change_kind(c), c->from.name, c->op->error, c->op->id);
}

static json_t *replicaset_change_answer(const replicaset_change *c)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:o, s:o, s:b, s:s, s:O*, s:b, "
                     "s:O*}",
                     "name", c->to.container_name, "replicaSetName", c->to.name, "containerName",
                     c->to.container_name, "containerId", c->to.container_id, "version",
                     c->to.version, "state", replicaset_state_name(c->to.state), "imageName",
                     c->to.spec.image, "gpus", replicaset_record_gpus_json(&c->to), "gpuShares",
                     replicaset_record_gpu_shares_json(&c->to), "ports",
                     replicaset_record_ports_json(&c->to), "changed", 1, "operationId", c->op->id,
                     "carry", json_object_get(c->op->data, "carry"), "systemDiskCarried",
                     replicaset_change_same_image(c), "gpusAside", c->to.gpus_aside);
}

/* begin: the record holds from and to together, and the operation is
 * written, in one transaction (compare-and-swap on the record as loaded). */
static int replicaset_change_begin(replicaset_change *c, gb_err *err)
{
    replicaset_record_copy(&c->from, &c->cur);
    if (replicaset_alloc_union(&c->from, &c->to, c->swapped, &c->cur, err) < 0)
        return -1;
    /* The quota counts what `to` keeps, not the moment both are held. */
    c->cur.quota_as = &c->to;
    int rc = op_begin(c->a, c->op, &c->cur, &c->from, NULL, 0, err);
    c->cur.quota_as = NULL;
    return rc;
}

/* The old container must exist: its system disk is what a new version
 * carries. code is the kind's envelope code. */
int replicaset_version_check_container(app *a, const replicaset_record *r, int code, gb_err *err)
{
    docker_container_state st;
    gb_err e = GB_ERR_INIT;
    if (docker_container_state_get(a->docker, r->container_name, &st, &e) == 0)
        return 0;
    if (e.code != ERR_NOT_FOUND) {
        *err = e;
        return -1;
    }
    return err_set(err, code,
                   "container %s of replica set '%s' is missing from Docker (removed by hand?), "
                   "so there is no system disk to carry; delete the set and create it again",
                   r->container_name, r->name);
}

/* Version N+1 of from, with spec (copied), in the state from's is heading
 * for: a paused set stays paused, anything else runs. */
void replicaset_version_next(const replicaset_record *from, const replicaset_spec *spec,
                             replicaset_record *to)
{
    replicaset_record_copy(from, to);
    replicaset_spec_free(&to->spec);
    replicaset_spec_copy(spec, &to->spec);
    to->version = from->version + 1;
    snprintf(to->container_name, sizeof(to->container_name), "%s-%d", from->name, to->version);
    to->container_id[0] = '\0';
    to->operation[0] = '\0';
    to->state = from->state == RS_STATE_PAUSED ? RS_STATE_PAUSED : RS_STATE_RUNNING;
    /* A change made while stopped is this version's spec now (record.h). */
    json_decref(to->pending_spec);
    to->pending_spec = NULL;
    /* A version that asks for cards itself has none set aside (record.h). */
    if (replicaset_spec_gpu_asks(&to->spec)) {
        json_decref(to->gpus_aside);
        to->gpus_aside = NULL;
    }
}

int replicaset_version_change(app *a, const op_kind *kind, const replicaset_record *from,
                              replicaset_record *to, bool swapped, const char *reason, json_t **out,
                              gb_err *err)
{
    _cleanup_(replicaset_change_free) replicaset_change c = {
        .a = a, .swapped = swapped, .fail_code = replicaset_kind_fail_code(kind->kind)};
    journal_op op = {0};
    _cleanup_json_ json_t *data =
        json_pack("{s:o, s:o, s:s, s:b}", "from", replicaset_record_to_json(from), "to",
                  replicaset_record_to_json(to), "reason", reason, "gpuSwap", swapped);
    int rc = -1;
    if (!data) {
        err_set(err, ERR_INTERNAL, "%s of %s: its operation cannot be written as JSON", kind->name,
                from->name);
        goto give_back;
    }
    replicaset_record_copy(from, &c.from);
    replicaset_record_copy(to, &c.to);
    c.from.operation[0] = '\0';
    if (op_init(&op, kind, from->name, json_incref(data), err) < 0)
        goto give_back;
    c.op = &op;
    if (replicaset_change_begin(&c, err) < 0) {
        journal_op_free(&op);
        /* A begin the store did not confirm may have landed, the record
         * listing what `to` took: op_begin handed it to replicaset/doubt.c, which
         * finds out, and gives it back or undoes the change. */
        if (err && err->code == ERR_STORE_UNAVAILABLE)
            return -1;
        goto give_back;
    }
    rc = replicaset_change_run(&c, true, err);
    if (rc == 0) {
        *out = replicaset_change_answer(&c);
        replicaset_ssh_after_start(a, &c.to, &c.from.spec, *out);
    }
    journal_op_free(&op);
    return rc;
give_back:
    /* Nothing was recorded: what was taken for `to` goes straight back. */
    if (swapped)
        replicaset_alloc_swap_back(a, to, from);
    else
        replicaset_alloc_give_back_except(a, to, from);
    return -1;
}

int replicaset_version_resume(app *a, journal_op *op, const replicaset_record *cur, gb_err *err)
{
    _cleanup_(replicaset_change_free)
        replicaset_change c = {.a = a,
                               .op = op,
                               .swapped = json_is_true(json_object_get(op->data, "gpuSwap")),
                               .fail_code = replicaset_kind_fail_code(op->kind)};
    json_t *from = json_object_get(op->data, "from"), *to = json_object_get(op->data, "to");
    if (replicaset_record_from_json(from, &c.from, err) < 0 ||
        replicaset_record_from_json(to, &c.to, err) < 0)
        return err_prefix(err, "operation %s", op->id);
    replicaset_record_copy(cur, &c.cur);
    /* Before the carry began, back; from there on, forward. */
    return replicaset_change_run(&c, journal_step_done(op, OP_STEP_CARRY_BEGIN), err);
}

/* patch, rollback and restart-new are one change under three names.
 * Forward: the record holds what both
 * versions need and names the operation; <name>-(N+1) is created; <name>-N
 * stopped; the point of no return (carry-begin); the system disk carried;
 * <name>-(N+1) started; <name>-N removed; the record at N+1 with its history
 * entry, and the pools get back what only version N held. Back, before
 * carry-begin (or before the new container runs, the disk carried back
 * first): <name>-(N+1) removed, <name>-N started again, the record back at
 * N, the pools get back what only N+1 held. */
#define RS_VERSION_KIND(label, journal_kind)                                                       \
    {                                                                                              \
        .name = label, .journalled = true, .kind = journal_kind,                                   \
        OP_STEPS(replicaset_version_steps), .resume = replicaset_version_resume,                   \
    }

const op_kind replicaset_op_patch = RS_VERSION_KIND("patch", JOURNAL_PATCH);
const op_kind replicaset_op_rollback = RS_VERSION_KIND("rollback", JOURNAL_ROLLBACK);
/* A stopped set's restart when its cards or ports were taken meanwhile. */
const op_kind replicaset_op_restart_new = RS_VERSION_KIND("restart-new", JOURNAL_RESTART);
