/*
 * test_docker_exec.c - docker_exec_run against the real dockerd: output
 * split by stream, exit codes, workdir, the output cap, the time limit
 * (the process tree is gone afterwards), errors, and concurrent execs.
 *
 * One long-running container ("box") serves most tests; it is created in
 * the group setup and everything labelled for this suite is removed at the
 * end (docker_test_util.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "docker_test_util.h"

static char *box; /* id of the running container the tests exec in */

static int group_setup(void **state)
{
    (void)state;
    if (dtu_setup("exec") != 0)
        return -1;
    box = dtu_start_sh("box", "sleep 600");
    return 0;
}

static int group_teardown(void **state)
{
    free(box);
    return dtu_teardown(state);
}

static void test_streams_and_exit_code(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    const char *cmd[] = {"sh", "-c",
                         "echo out1; echo err1 >&2; echo out2; printf err2 >&2; exit 7"};
    assert_int_equal(docker_exec_run(dtu_client, box, cmd, 3, NULL, 30, 0, &r, &e), 0);
    assert_string_equal(r.out_stdout, "out1\nout2\n");
    assert_string_equal(r.out_stderr, "err1\nerr2");
    assert_int_equal(r.exit_code, 7);
    assert_false(r.stdout_truncated);
    assert_false(r.stderr_truncated);
    assert_false(r.timed_out);
    docker_exec_result_free(&r);

    const char *quiet[] = {"true"};
    assert_int_equal(docker_exec_run(dtu_client, box, quiet, 1, NULL, 30, 0, &r, &e), 0);
    assert_string_equal(r.out_stdout, "");
    assert_string_equal(r.out_stderr, "");
    assert_int_equal(r.exit_code, 0);
    docker_exec_result_free(&r);

    /* Arguments reach the process as given: no shell splits them. */
    const char *args[] = {"printf", "[%s]", "a b", "*", ""};
    assert_int_equal(docker_exec_run(dtu_client, box, args, 5, NULL, 30, 0, &r, &e), 0);
    assert_string_equal(r.out_stdout, "[a b][*][]");
    docker_exec_result_free(&r);
}

static void test_workdir(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    const char *pwd[] = {"pwd"};
    assert_int_equal(docker_exec_run(dtu_client, box, pwd, 1, "/tmp", 30, 0, &r, &e), 0);
    assert_string_equal(r.out_stdout, "/tmp\n");
    docker_exec_result_free(&r);
    assert_int_equal(docker_exec_run(dtu_client, box, pwd, 1, NULL, 30, 0, &r, &e), 0);
    assert_string_equal(r.out_stdout, "/\n");
    docker_exec_result_free(&r);

    assert_int_equal(docker_exec_run(dtu_client, box, pwd, 1, "/no/such/dir", 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "/no/such/dir"));
    assert_null(r.out_stdout);
    assert_null(r.out_stderr);
}

/* More output than the cap: the first cap bytes of each stream are kept,
 * the flags say so, and the command still runs to its end. */
static void test_truncation(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    const char *cmd[] = {"sh", "-c", "seq 1 100000; seq 1 100000 >&2; echo done >&2; exit 3"};
    assert_int_equal(docker_exec_run(dtu_client, box, cmd, 3, NULL, 60, 100, &r, &e), 0);
    assert_int_equal(strlen(r.out_stdout), 100);
    assert_int_equal(strlen(r.out_stderr), 100);
    assert_memory_equal(r.out_stdout, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", 21);
    assert_memory_equal(r.out_stderr, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", 21);
    assert_true(r.stdout_truncated);
    assert_true(r.stderr_truncated);
    assert_false(r.timed_out);
    assert_int_equal(r.exit_code, 3); /* it ran to the end: not killed */
    docker_exec_result_free(&r);

    /* Exactly at the cap is not truncated; one byte over is. */
    const char *exact[] = {"printf", "12345"};
    assert_int_equal(docker_exec_run(dtu_client, box, exact, 2, NULL, 30, 5, &r, &e), 0);
    assert_string_equal(r.out_stdout, "12345");
    assert_false(r.stdout_truncated);
    docker_exec_result_free(&r);
    assert_int_equal(docker_exec_run(dtu_client, box, exact, 2, NULL, 30, 4, &r, &e), 0);
    assert_string_equal(r.out_stdout, "1234");
    assert_true(r.stdout_truncated);
    assert_false(r.stderr_truncated);
    docker_exec_result_free(&r);
}

static bool box_runs(const char *needle)
{
    _cleanup_free_ char *ps = dtu_exec_sh(box, "ps -o pid,args");
    return strstr(ps, needle) != NULL;
}

/* The time limit: the exec returns about when it passes, with the output
 * so far, and the process and its children are gone. */
static void test_timeout_kills_tree(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    /* The shell forks a child (sleep in a pipeline) and waits: killing only
     * the shell would leave sleep 31 running. */
    const char *cmd[] = {"sh", "-c", "echo started; echo warn >&2; sleep 31 | cat; echo never"};
    double t0 = dtu_now();
    assert_int_equal(docker_exec_run(dtu_client, box, cmd, 3, NULL, 1, 0, &r, &e), 0);
    double took = dtu_now() - t0;
    /* Upper bounds leave room for a slow, loaded machine; without the
     * limit the command would run for 31 s. */
    assert_true(took >= 0.9);
    assert_true(took < 10);
    assert_true(r.timed_out);
    assert_string_equal(r.out_stdout, "started\n");
    assert_string_equal(r.out_stderr, "warn\n");
    assert_int_equal(r.exit_code, 137); /* 128 + SIGKILL */
    docker_exec_result_free(&r);
    assert_false(box_runs("sleep 31"));
    assert_false(box_runs("echo never"));

    /* A single process, no shell. */
    const char *sleeper[] = {"sleep", "32"};
    t0 = dtu_now();
    assert_int_equal(docker_exec_run(dtu_client, box, sleeper, 2, NULL, 1, 0, &r, &e), 0);
    assert_true(dtu_now() - t0 < 10);
    assert_true(r.timed_out);
    docker_exec_result_free(&r);
    assert_false(box_runs("sleep 32"));

    /* A chatty loop that ignores SIGTERM and SIGPIPE: it writes right up
     * to the kill, and nothing of it survives. */
    const char *chatty[] = {"sh", "-c",
                            "trap '' TERM PIPE; while :; do echo gbtest-chatty; sleep 0.01; done"};
    assert_int_equal(docker_exec_run(dtu_client, box, chatty, 3, NULL, 1, 0, &r, &e), 0);
    assert_true(r.timed_out);
    assert_int_equal(r.exit_code, 137);
    assert_non_null(strstr(r.out_stdout, "gbtest-chatty\ngbtest-chatty\n"));
    docker_exec_result_free(&r);
    assert_false(box_runs("gbtest-chatty"));

    /* A command that ends in time is not flagged. */
    const char *quick[] = {"sh", "-c", "sleep 0.2; echo ok"};
    assert_int_equal(docker_exec_run(dtu_client, box, quick, 3, NULL, 5, 0, &r, &e), 0);
    assert_false(r.timed_out);
    assert_string_equal(r.out_stdout, "ok\n");
    assert_int_equal(r.exit_code, 0);
    docker_exec_result_free(&r);
}

/* With no time limit, endless output is drained up to the hard limit and
 * then the process is killed. */
static void test_drain_limit(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    const char *cmd[] = {"yes", "gpubox-drain-test"};
    assert_int_equal(docker_exec_run(dtu_client, box, cmd, 2, NULL, 0, 64, &r, &e), 0);
    assert_false(r.timed_out);
    assert_true(r.stdout_truncated);
    assert_int_equal(strlen(r.out_stdout), 64);
    assert_memory_equal(r.out_stdout, "gpubox-drain-test\ngpubox-drain-test\n", 36);
    assert_int_equal(r.exit_code, 137);
    docker_exec_result_free(&r);
    assert_false(box_runs("yes gpubox-drain-test"));
}

static void test_errors(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    docker_exec_result r;
    const char *missing[] = {"gbtest-no-such-command", "x"};
    assert_int_equal(docker_exec_run(dtu_client, box, missing, 2, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "gbtest-no-such-command"));
    assert_non_null(strstr(e.msg, "executable file not found"));

    /* A shell that cannot find a command is the command's own failure: its
     * exit code and words pass through. */
    const char *shell_missing[] = {"sh", "-c", "gbtest-no-such-command"};
    assert_int_equal(docker_exec_run(dtu_client, box, shell_missing, 3, NULL, 30, 0, &r, &e), 0);
    assert_int_equal(r.exit_code, 127);
    assert_non_null(strstr(r.out_stderr, "gbtest-no-such-command: not found"));
    docker_exec_result_free(&r);

    const char *echo[] = {"echo", "hi"};
    assert_int_equal(
        docker_exec_run(dtu_client, "gbtest-dk-exec-absent", echo, 2, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "No such container"));

    _cleanup_free_ char *stopped = dtu_create("stopped", dtu_config(NULL));
    assert_int_equal(docker_exec_run(dtu_client, stopped, echo, 2, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "is not running"));

    assert_int_equal(docker_exec_run(dtu_client, box, echo, 0, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    const char *empty[] = {""};
    assert_int_equal(docker_exec_run(dtu_client, box, empty, 1, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    const char *with_null[] = {"echo", NULL};
    assert_int_equal(docker_exec_run(dtu_client, box, with_null, 2, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(docker_exec_run(dtu_client, "", echo, 2, NULL, 30, 0, &r, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

struct exec_job {
    int index;
    int rc;
    docker_exec_result r;
    gb_err e;
};

static void *exec_thread(void *arg)
{
    struct exec_job *job = arg;
    /* Each job says it has started, then waits (up to 30 s) until all
     * eight have: execs run one after another would never get there. */
    char script[512];
    snprintf(script, sizeof(script),
             "touch /tmp/started.%d; n=0; "
             "while [ $(ls /tmp/started.* | wc -l) -lt 8 ] && [ $n -lt 300 ]; do "
             "sleep 0.1; n=$((n+1)); done; [ $n -lt 300 ] || exit 99; "
             "echo job%d; echo e%d >&2; exit %d",
             job->index, job->index, job->index, job->index);
    const char *cmd[] = {"sh", "-c", script};
    job->e = (gb_err)GB_ERR_INIT;
    job->rc = docker_exec_run(dtu_client, box, cmd, 3, NULL, 30, 0, &job->r, &job->e);
    return NULL;
}

/* Execs in parallel each get their own output and exit code, and they run
 * at the same time rather than one after another (each waits in its
 * container for the others to start, whatever the machine's speed). */
static void test_concurrent(void **state)
{
    (void)state;
    struct exec_job jobs[8];
    pthread_t threads[8];
    const char *clear[] = {"sh", "-c", "rm -f /tmp/started.*"};
    docker_exec_result cleared = {0};
    gb_err e = GB_ERR_INIT;
    assert_int_equal(docker_exec_run(dtu_client, box, clear, 3, NULL, 30, 0, &cleared, &e), 0);
    docker_exec_result_free(&cleared);
    for (int i = 0; i < 8; i++) {
        jobs[i].index = i;
        assert_int_equal(pthread_create(&threads[i], NULL, exec_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 8; i++) {
        if (jobs[i].rc != 0)
            fail_msg("job %d: %s", i, jobs[i].e.msg);
        char want_out[16], want_err[16];
        snprintf(want_out, sizeof(want_out), "job%d\n", i);
        snprintf(want_err, sizeof(want_err), "e%d\n", i);
        assert_string_equal(jobs[i].r.out_stdout, want_out);
        assert_string_equal(jobs[i].r.out_stderr, want_err);
        assert_int_equal(jobs[i].r.exit_code, i);
        docker_exec_result_free(&jobs[i].r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_and_exit_code),
        cmocka_unit_test(test_workdir),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_timeout_kills_tree),
        cmocka_unit_test(test_drain_limit),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
