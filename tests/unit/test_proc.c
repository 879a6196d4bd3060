/*
 * test_proc.c - util/proc: finding programs, running them without a shell,
 * their output and exit status, the time limit (killing the whole process
 * group), the output cap and the descriptors a child inherits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/proc.h"

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpubox-proc-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/tool", tmpdir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/pid", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

static void test_resolve(void **state)
{
    (void)state;
    char path[256];
    gb_err e = GB_ERR_INIT;
    assert_int_equal(proc_resolve("sh", NULL, path, sizeof(path), &e), 0);
    assert_int_equal(access(path, X_OK), 0);
    assert_int_equal(proc_resolve("/bin/sh", NULL, path, sizeof(path), &e), 0);
    assert_string_equal(path, "/bin/sh");

    assert_int_equal(proc_resolve("/nonexistent/tool", NULL, path, sizeof(path), &e), -1);
    assert_non_null(strstr(e.msg, "cannot run /nonexistent/tool: No such file"));
    assert_int_equal(proc_resolve(tmpdir, NULL, path, sizeof(path), &e), -1);
    assert_non_null(strstr(e.msg, "not a file"));
    assert_int_equal(proc_resolve("gpubox-no-such-tool", NULL, path, sizeof(path), &e), -1);
    assert_string_equal(e.msg, "gpubox-no-such-tool not found on PATH");

    /* A tool outside PATH is found in the extra directories, after PATH. */
    char tool[128];
    snprintf(tool, sizeof(tool), "%s/tool", tmpdir);
    FILE *f = fopen(tool, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\necho hi\n", f);
    fclose(f);
    chmod(tool, 0755);
    assert_int_equal(proc_resolve("tool", "/nonexistent:", path, sizeof(path), &e), -1);
    assert_non_null(strstr(e.msg, "tool not found on PATH nor in /nonexistent:"));
    char dirs[128];
    snprintf(dirs, sizeof(dirs), "/nonexistent:%s", tmpdir);
    assert_int_equal(proc_resolve("tool", dirs, path, sizeof(path), &e), 0);
    assert_string_equal(path, tool);
}

static void test_output_and_status(void **state)
{
    (void)state;
    proc_result r;
    gb_err e = GB_ERR_INIT;
    /* Arguments reach the program untouched: no shell expands them. */
    char *const echo[] = {"/bin/echo", "a  b", "$HOME", "; rm -rf /", "*", NULL};
    assert_int_equal(proc_run(echo, NULL, 5000, &r, &e), 0);
    assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    assert_string_equal(r.out, "a  b $HOME ; rm -rf / *\n");
    assert_int_equal(r.out_len, strlen(r.out));
    assert_string_equal(r.err, "");
    assert_int_equal(proc_check_exit("echo", &r, ERR_INTERNAL, &e), 0);
    proc_result_free(&r);

    char *const sh[] = {"/bin/sh", "-c", "echo out; echo '  first problem.  ' >&2; exit 3", NULL};
    assert_int_equal(proc_run(sh, NULL, 5000, &r, &e), 0);
    assert_string_equal(r.out, "out\n");
    assert_string_equal(r.err, "  first problem.  \n");
    char line[64];
    assert_string_equal(proc_first_line(&r, line, sizeof(line)), "out");
    assert_int_equal(proc_check_exit("mytool", &r, ERR_VOLUME_PATCH_FAILED, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_PATCH_FAILED);
    assert_string_equal(e.msg, "mytool exited with status 3: out");
    proc_result_free(&r);

    /* Only stderr said something: that is the line quoted. */
    char *const quiet[] = {"/bin/sh", "-c", "printf '\\n\\n  disk \\001 full...\\n' >&2; exit 1",
                           NULL};
    assert_int_equal(proc_run(quiet, NULL, 5000, &r, &e), 0);
    assert_string_equal(proc_first_line(&r, line, sizeof(line)), "disk ? full");
    proc_result_free(&r);

    char *const killed[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
    assert_int_equal(proc_run(killed, NULL, 5000, &r, &e), 0);
    assert_int_equal(proc_check_exit("sh", &r, ERR_INTERNAL, &e), -1);
    assert_string_equal(e.msg, "sh was killed by signal 15");
    proc_result_free(&r);

    char *const silent[] = {"/bin/true", NULL};
    assert_int_equal(proc_run(silent, NULL, 5000, &r, &e), 0);
    assert_string_equal(proc_first_line(&r, line, sizeof(line)), "(no output)");
    proc_result_free(&r);
}

static void test_environment_and_fds(void **state)
{
    (void)state;
    proc_result r;
    gb_err e = GB_ERR_INIT;
    char *const env[] = {"ONLY=this", NULL};
    char *const show[] = {"/bin/sh", "-c", "echo \"$ONLY-$HOME\"", NULL};
    assert_int_equal(proc_run(show, env, 5000, &r, &e), 0);
    assert_string_equal(r.out, "this-\n");
    proc_result_free(&r);

    /* The child gets stdin, stdout and stderr and nothing else of ours;
     * stdin reads as empty (/dev/null). */
    FILE *held = tmpfile(); /* an fd the daemon holds without O_CLOEXEC */
    assert_non_null(held);
    char *const fds[] = {"/bin/sh", "-c", "ls /proc/$$/fd; cat", NULL};
    assert_int_equal(proc_run(fds, NULL, 5000, &r, &e), 0);
    fclose(held);
    assert_true(strncmp(r.out, "0\n1\n2\n", 6) == 0);
    /* dash may keep one extra fd of its own (>= 10); none of ours (3..9). */
    for (int fd = 3; fd < 10; fd++) {
        char name[8];
        snprintf(name, sizeof(name), "\n%d\n", fd);
        if (strstr(r.out, name))
            fail_msg("child inherited fd %d: %s", fd, r.out);
    }
    proc_result_free(&r);
}

static void test_timeout_kills_group(void **state)
{
    (void)state;
    proc_result r;
    gb_err e = GB_ERR_INIT;
    char script[256];
    snprintf(script, sizeof(script), "sleep 30 & echo $! > %s/pid; sleep 30", tmpdir);
    char *const hang[] = {"/bin/sh", "-c", script, NULL};
    time_t start = time(NULL);
    assert_int_equal(proc_run(hang, NULL, 300, &r, &e), -1);
    assert_true(time(NULL) - start < 5);
    assert_string_equal(e.msg, "/bin/sh did not finish within 300 ms; killed it");
    assert_null(r.out);

    /* The background sleep it started died with it. */
    char path[128];
    snprintf(path, sizeof(path), "%s/pid", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int pid = 0;
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        char stat[64], buf[256] = "";
        snprintf(stat, sizeof(stat), "/proc/%d/stat", pid);
        FILE *s = fopen(stat, "r");
        /* gone, or a zombie waiting for init to reap it */
        gone = !s || !fgets(buf, sizeof(buf), s) || strstr(buf, ") Z ");
        if (s)
            fclose(s);
        if (!gone)
            usleep(10000);
    }
    assert_true(gone);
}

static void test_output_cap(void **state)
{
    (void)state;
    proc_result r;
    gb_err e = GB_ERR_INIT;
    char *const flood[] = {"/bin/sh", "-c", "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done",
                           NULL};
    assert_int_equal(proc_run(flood, NULL, 20000, &r, &e), -1);
    assert_string_equal(e.msg, "/bin/sh printed more than 1 MiB; killed it");

    /* Without a time limit a slow tool is waited for. */
    char *const slow[] = {"/bin/sh", "-c", "sleep 0.3; echo done", NULL};
    assert_int_equal(proc_run(slow, NULL, PROC_NO_TIMEOUT, &r, &e), 0);
    assert_string_equal(r.out, "done\n");
    proc_result_free(&r);

    char *const missing[] = {"/nonexistent/tool", NULL};
    assert_int_equal(proc_run(missing, NULL, 5000, &r, &e), 0);
    assert_int_equal(WEXITSTATUS(r.status), 127);
    proc_result_free(&r);
}

/* What /proc says of a process: its SIGTERM disposition, its only child. */
static void test_proc_status(void **state)
{
    (void)state;
    proc_signals s;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    assert_int_equal(sigaction(SIGTERM, &ign, &old), 0);
    assert_int_equal(proc_signals_of(getpid(), &s), 0);
    assert_true(s.ignored & PROC_SIG_BIT(SIGTERM));
    assert_false(s.caught & PROC_SIG_BIT(SIGTERM));
    assert_true(s.ns_pid > 0);
    assert_int_equal(sigaction(SIGTERM, &old, NULL), 0);
    assert_int_equal(proc_signals_of(getpid(), &s), 0);
    assert_false(s.ignored & PROC_SIG_BIT(SIGTERM));
    assert_int_equal(proc_signals_of(-1, &s), -1);

    assert_false(proc_cgroup_mentions(getpid(), "no-such-cgroup-name"));
    assert_true(proc_cgroup_mentions(getpid(), ":")); /* every line is id:controllers:path */

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    /* the children file lists the child once it exists */
    for (int i = 0; i < 100 && proc_only_child(getpid()) != child; i++)
        usleep(10000);
    assert_int_equal(proc_only_child(getpid()), child);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_int_equal(proc_only_child(getpid()), 0);
}

/* A process's container from its cgroup lines, as each driver names it. */
static void test_cgroup_container(void **state)
{
    (void)state;
    const char *id = "4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a";
    char line[256], got[PROC_CONTAINER_ID_LEN + 1] = "";
    const char *forms[] = {"0::/system.slice/docker-%s.scope\n", "4:memory:/docker/%s\n",
                           "0::/sandbox/ci/docker/%s\n"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        snprintf(line, sizeof(line), forms[i], id);
        memset(got, 0, sizeof(got));
        assert_true(proc_cgroup_line_container(line, got));
        assert_string_equal(got, id);
    }
    /* nested: the innermost container wins */
    snprintf(line, sizeof(line), "0::/docker/%s/docker/%.63s0\n", id, id);
    assert_true(proc_cgroup_line_container(line, got));
    assert_int_equal(got[63], '0');
    /* 63 or 65 hex digits, or none, are no container */
    assert_false(proc_cgroup_line_container("0::/user.slice/session-3.scope\n", got));
    snprintf(line, sizeof(line), "0::/docker/%.63s\n", id);
    assert_false(proc_cgroup_line_container(line, got));
    snprintf(line, sizeof(line), "0::/docker/%sa\n", id);
    assert_false(proc_cgroup_line_container(line, got));
    /* a process that does not exist runs in no container */
    assert_false(proc_container_id(-1, got));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_output_and_status),
        cmocka_unit_test(test_environment_and_fds),
        cmocka_unit_test(test_timeout_kills_group),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_proc_status),
        cmocka_unit_test(test_cgroup_container),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
