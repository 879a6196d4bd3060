/*
 * test_journal.c - the operation journal against a real SQLite store: an
 * operation's JSON form, steps recorded one put at a time and read back,
 * the unfinished list (oldest first), pruning of old finished operations,
 * writing an operation inside another transaction, ids, and fault
 * injection (a child process exits 99 exactly at the named step).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/journal.h"
#include "service/keys.h"
#include "store_test_util.h"
#include "util/cleanup.h"

static const char *const steps[] = {"begin", "container-created", "carried", "committed"};

typedef struct fixture {
    char *dir;
    char url[1200];
    store *s;
} fixture;

static int setup(void **state)
{
    static fixture f;
    f.dir = store_test_mkdtemp();
    assert_non_null(f.dir);
    snprintf(f.url, sizeof(f.url), "sqlite://%s/state.db", f.dir);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_open(f.url, &f.s, &e), 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    store_close(f->s);
    store_test_rmdir(f->dir);
    return 0;
}

static void new_op(journal_op *op, enum journal_kind kind, const char *target)
{
    gb_err e = GB_ERR_INIT;
    assert_int_equal(journal_op_init(op, kind, target, steps, ARRAY_SIZE(steps),
                                     json_pack("{s:i}", "fromVersion", 3), &e),
                     0);
}

static void test_init_lists_every_step_not_done(void **state)
{
    (void)state;
    journal_op op;
    new_op(&op, JOURNAL_PATCH, "foo");
    assert_true(journal_id_valid(op.id));
    assert_int_equal(op.state, JOURNAL_RUNNING);
    assert_int_equal(op.nsteps, 4);
    _cleanup_json_ json_t *j = journal_op_to_json(&op);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "patch");
    assert_string_equal(json_string_value(json_object_get(j, "state")), "running");
    assert_string_equal(json_string_value(json_object_get(j, "target")), "foo");
    assert_null(json_object_get(j, "owner")); /* none until op_begin gives it its target's */
    json_t *s0 = json_array_get(json_object_get(j, "steps"), 0);
    assert_string_equal(json_string_value(json_object_get(s0, "name")), "begin");
    assert_true(json_is_false(json_object_get(s0, "done")));
    assert_true(json_is_null(json_object_get(s0, "time")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "data"), "fromVersion")),
                     3);
    /* Two operations never share an id. */
    journal_op other;
    new_op(&other, JOURNAL_PATCH, "foo");
    assert_string_not_equal(op.id, other.id);
    journal_op_free(&other);
    journal_op_free(&op);
}

static void test_steps_are_recorded_and_read_back(void **state)
{
    fixture *f = *state;
    journal_op op, back;
    gb_err e = GB_ERR_INIT;
    new_op(&op, JOURNAL_ROLLBACK, "bar");
    snprintf(op.owner, sizeof(op.owner), "%s", "alice"); /* who may read it */
    assert_int_equal(journal_save(f->s, &op, &e), 0);
    assert_int_equal(journal_record_step(f->s, &op, "begin", &e), 0);
    assert_int_equal(journal_record_step(f->s, &op, "container-created", &e), 0);
    json_object_set_new(op.data, "carry", json_string("overlay"));
    assert_int_equal(journal_record_step(f->s, &op, "carried", &e), 0);

    assert_int_equal(journal_load(f->s, op.id, &back, &e), 1);
    assert_string_equal(back.id, op.id);
    assert_int_equal(back.kind, JOURNAL_ROLLBACK);
    assert_string_equal(back.target, "bar");
    assert_string_equal(back.owner, "alice");
    assert_true(journal_step_done(&back, "begin"));
    assert_true(journal_step_done(&back, "carried"));
    assert_false(journal_step_done(&back, "committed"));
    assert_false(journal_step_done(&back, "no-such-step"));
    assert_true(back.steps[0].time[0] != '\0');
    assert_string_equal(json_string_value(json_object_get(back.data, "carry")), "overlay");
    journal_op_free(&back);

    journal_finish(&op, JOURNAL_UNDONE, "Docker refused");
    assert_int_equal(journal_save(f->s, &op, &e), 0);
    assert_int_equal(journal_load(f->s, op.id, &back, &e), 1);
    assert_int_equal(back.state, JOURNAL_UNDONE);
    assert_string_equal(back.error, "Docker refused");
    journal_op_free(&back);
    journal_op_free(&op);

    assert_int_equal(journal_load(f->s, "20990101T000000000-00000000", &back, &e), 0);
    assert_int_equal(journal_load(f->s, "../../etc", &back, &e), 0);
}

/* A group of moves (move_group.c) is a kind of its own, read back as one
 * and listed among the unfinished ones until it ends. */
static void test_move_group_kind_reads_back(void **state)
{
    fixture *f = *state;
    journal_op op, back, *ops = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    assert_string_equal(journal_kind_name(JOURNAL_MOVE_GROUP), "move-group");
    new_op(&op, JOURNAL_MOVE_GROUP, "mvg");
    assert_int_equal(journal_record_step(f->s, &op, "begin", &e), 0);
    assert_int_equal(journal_load(f->s, op.id, &back, &e), 1);
    assert_int_equal(back.kind, JOURNAL_MOVE_GROUP);
    journal_op_free(&back);
    assert_int_equal(journal_unfinished(f->s, &ops, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0].kind, JOURNAL_MOVE_GROUP);
    journal_ops_free(ops, n);
    journal_op_free(&op);
}

/* Each step's time runs from the step before it was recorded to its own
 * record written; a step not done has none (null), and a record read back
 * keeps what its steps took. */
static void test_steps_are_timed(void **state)
{
    fixture *f = *state;
    journal_op op, back;
    gb_err e = GB_ERR_INIT;
    new_op(&op, JOURNAL_PATCH, "timed");
    assert_int_equal(journal_save(f->s, &op, &e), 0);
    assert_int_equal(journal_record_step(f->s, &op, "begin", &e), 0);
    usleep(30000); /* the work of the next step */
    assert_int_equal(journal_record_step(f->s, &op, "container-created", &e), 0);
    assert_true(op.steps[0].ms >= 0);
    assert_true(op.steps[1].ms >= 30 && op.steps[1].ms < 5000);
    assert_true(op.steps[2].ms < 0);

    _cleanup_json_ json_t *j = journal_op_to_json(&op);
    json_t *steps = json_object_get(j, "steps");
    assert_true(json_is_number(json_object_get(json_array_get(steps, 1), "ms")));
    assert_true(json_is_null(json_object_get(json_array_get(steps, 2), "ms")));

    assert_int_equal(journal_record_step(f->s, &op, "carried", &e), 0);
    assert_int_equal(journal_load(f->s, op.id, &back, &e), 1);
    /* The record holds a step's write from the next write on. */
    assert_true(back.steps[1].ms >= op.steps[1].ms - 0.01 &&
                back.steps[1].ms <= op.steps[1].ms + 0.01);
    assert_true(back.steps[2].ms >= 0);
    assert_true(back.steps[3].ms < 0);

    /* A step written by the caller's own transaction counts up to its mark,
     * then its write once the caller says it landed. */
    journal_mark(&op, "committed");
    double marked = op.steps[3].ms;
    assert_true(marked >= 0);
    usleep(20000);
    journal_step_written(&op, "committed");
    assert_true(op.steps[3].ms >= marked + 20);
    journal_op_free(&back);
    journal_op_free(&op);

    /* A record written before steps were timed reads as unknown times. */
    _cleanup_json_ json_t *old = json_pack(
        "{s:s, s:s, s:s, s:s, s:[{s:s, s:b, s:s}], s:{}, s:s, s:s, s:s}", "id",
        "20260101T000000000-0000abcd", "kind", "patch", "target", "old", "state", "running",
        "steps", "name", "begin", "done", 1, "time", "2026-01-01T00:00:00Z", "data", "createTime",
        "2026-01-01T00:00:00Z", "updateTime", "2026-01-01T00:00:00Z", "error", "");
    assert_int_equal(journal_op_from_json(old, &back, &e), 0);
    assert_true(back.steps[0].ms < 0);
    assert_string_equal(back.owner, ""); /* nor an owner: not in the answer */
    _cleanup_json_ json_t *again = journal_op_to_json(&back);
    assert_null(json_object_get(again, "owner"));
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(again, "steps"), 0), "ms")));
    journal_op_free(&back);
}

static void test_unfinished_oldest_first(void **state)
{
    fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    journal_op a, b, c;
    new_op(&a, JOURNAL_CREATE, "one");
    usleep(2000); /* ids carry milliseconds */
    new_op(&b, JOURNAL_DELETE, "two");
    usleep(2000);
    new_op(&c, JOURNAL_STOP, "three");
    /* Written out of order: the listing sorts by id, i.e. by start time. */
    assert_int_equal(journal_save(f->s, &c, &e), 0);
    assert_int_equal(journal_save(f->s, &a, &e), 0);
    journal_finish(&b, JOURNAL_DONE, NULL);
    assert_int_equal(journal_save(f->s, &b, &e), 0);

    journal_op *ops = NULL;
    size_t n = 0;
    assert_int_equal(journal_unfinished(f->s, &ops, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ops[0].id, a.id);
    assert_string_equal(ops[1].id, c.id);
    assert_int_equal(ops[1].kind, JOURNAL_STOP);
    journal_ops_free(ops, n);
    journal_op_free(&a);
    journal_op_free(&b);
    journal_op_free(&c);
}

static void test_prune_removes_only_old_finished(void **state)
{
    fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    journal_op fresh, running;
    new_op(&fresh, JOURNAL_PATCH, "x");
    journal_finish(&fresh, JOURNAL_DONE, NULL);
    assert_int_equal(journal_save(f->s, &fresh, &e), 0);
    new_op(&running, JOURNAL_PATCH, "y");
    assert_int_equal(journal_save(f->s, &running, &e), 0);
    /* Two old ones, written as an older gpuboxd would have left them. */
    const char *old_done = "{\"id\":\"20200101T000000000-00000001\",\"kind\":\"stop\","
                           "\"target\":\"z\",\"state\":\"done\",\"steps\":[],\"data\":{},"
                           "\"createTime\":\"2020-01-01T00:00:00Z\",\"updateTime\":"
                           "\"2020-01-01T00:00:00Z\",\"error\":\"\"}";
    const char *old_running = "{\"id\":\"20200101T000000000-00000002\",\"kind\":\"stop\","
                              "\"target\":\"z\",\"state\":\"running\",\"steps\":[],\"data\":{},"
                              "\"createTime\":\"2020-01-01T00:00:00Z\",\"updateTime\":"
                              "\"2020-01-01T00:00:00Z\",\"error\":\"\"}";
    assert_int_equal(
        store_put(f->s, KEYS_OPERATIONS "20200101T000000000-00000001", old_done, NULL, &e), 0);
    assert_int_equal(
        store_put(f->s, KEYS_OPERATIONS "20200101T000000000-00000002", old_running, NULL, &e), 0);
    size_t pruned = 0;
    assert_int_equal(journal_prune(f->s, 3600, &pruned, &e), 0);
    assert_int_equal(pruned, 1);
    journal_op back;
    assert_int_equal(journal_load(f->s, "20200101T000000000-00000001", &back, &e), 0);
    /* An unfinished operation is never pruned, however old. */
    assert_int_equal(journal_load(f->s, "20200101T000000000-00000002", &back, &e), 1);
    journal_op_free(&back);
    assert_int_equal(journal_load(f->s, fresh.id, &back, &e), 1);
    journal_op_free(&back);
    journal_op_free(&fresh);
    journal_op_free(&running);
}

static void test_written_inside_another_transaction(void **state)
{
    fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    journal_op op;
    new_op(&op, JOURNAL_PATCH, "foo");
    journal_mark(&op, "begin");
    char key[STORE_KEY_MAX];
    _cleanup_free_ char *value = NULL;
    store_op ops[2] = {{.kind = STORE_OP_PUT, .key = KEYS_REPLICASETS "foo", .value = "{}"}};
    assert_int_equal(journal_txn_op(&op, key, &value, &ops[1], &e), 0);
    /* A failed comparison writes neither. */
    store_cmp cmp = {.kind = STORE_CMP_EXISTS, .key = KEYS_REPLICASETS "foo"};
    bool ok = true;
    assert_int_equal(store_txn(f->s, &cmp, 1, ops, 2, &ok, NULL, &e), 0);
    assert_false(ok);
    journal_op back;
    assert_int_equal(journal_load(f->s, op.id, &back, &e), 0);
    cmp.kind = STORE_CMP_ABSENT;
    assert_int_equal(store_txn(f->s, &cmp, 1, ops, 2, &ok, NULL, &e), 0);
    assert_true(ok);
    assert_int_equal(journal_load(f->s, op.id, &back, &e), 1);
    assert_true(journal_step_done(&back, "begin"));
    journal_op_free(&back);
    journal_op_free(&op);
}

static void test_malformed_records_are_errors(void **state)
{
    fixture *f = *state;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(store_put(f->s, KEYS_OPERATIONS "bad1", "not json", NULL, &e), 0);
    journal_op back;
    assert_int_equal(journal_load(f->s, "bad1", &back, &e), -1);
    assert_int_equal(e.code, ERR_INTERNAL);
    assert_int_equal(store_put(f->s, KEYS_OPERATIONS "bad2",
                               "{\"id\":\"bad2\",\"kind\":\"dance\",\"state\":\"running\","
                               "\"steps\":[],\"data\":{}}",
                               NULL, &e),
                     0);
    assert_int_equal(journal_load(f->s, "bad2", &back, &e), -1);
    assert_non_null(strstr(e.msg, "dance"));
}

static void test_ids(void **state)
{
    (void)state;
    assert_true(journal_id_valid("20260512T101530123-a1b2c3d4"));
    assert_false(journal_id_valid(""));
    assert_false(journal_id_valid(NULL));
    assert_false(journal_id_valid("../x"));
    assert_false(journal_id_valid("a/b"));
    assert_false(journal_id_valid("a b"));
    assert_false(journal_id_valid("0123456789012345678901234567890123456789"));
}

/* Run record_step(step) in a child with GPUBOX_FAULT=fault; its exit
 * status. The child opens the store itself: an SQLite connection must not
 * cross a fork. */
static int child_status(const char *url, const char *fault, const char *step)
{
    journal_op op;
    new_op(&op, JOURNAL_PATCH, "foo");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv(JOURNAL_FAULT_ENV, fault, 1);
        gb_err e = GB_ERR_INIT;
        store *s = NULL;
        if (store_open(url, &s, &e) < 0)
            _exit(2);
        _exit(journal_record_step(s, &op, step, &e) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    journal_op_free(&op);
    return WEXITSTATUS(status);
}

static void test_fault_injection(void **state)
{
    fixture *f = *state;
    assert_int_equal(child_status(f->url, "patch:carried", "carried"), JOURNAL_FAULT_EXIT);
    assert_int_equal(child_status(f->url, "patch:before:carried", "carried"), JOURNAL_FAULT_EXIT);
    assert_int_equal(child_status(f->url, "patch:begin", "carried"), 0);
    assert_int_equal(child_status(f->url, "rollback:carried", "carried"), 0);
    assert_int_equal(child_status(f->url, "patch:carrie", "carried"), 0);
    assert_int_equal(child_status(f->url, "", "carried"), 0);
    /* After the step's fault the record is in the store; before it, not. */
    journal_op *ops = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(journal_unfinished(f->s, &ops, &n, &e), 0);
    assert_int_equal(n, 5); /* all but the "before:" child wrote theirs */
    journal_ops_free(ops, n);
    /* In this process the switch is off: nothing exits. */
    journal_fault("patch", "carried");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_lists_every_step_not_done),
        cmocka_unit_test_setup_teardown(test_steps_are_recorded_and_read_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_are_timed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_oldest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_removes_only_old_finished, setup, teardown),
        cmocka_unit_test_setup_teardown(test_written_inside_another_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_records_are_errors, setup, teardown),
        cmocka_unit_test(test_ids),
        cmocka_unit_test_setup_teardown(test_move_group_kind_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_injection, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
