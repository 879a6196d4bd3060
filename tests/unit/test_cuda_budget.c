/*
 * test_cuda_budget.c - the CUDA limiter's container budget
 * (src/cuda/budget.h): charges within and past the limit, two processes
 * (fork) drawing on one budget file, the memory of a process killed with
 * SIGKILL coming back, the robust mutex after its holder died holding it,
 * a private budget when there is no file, and a budget file of another
 * layout.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda/budget.h"
#include "cuda/limits.h"

#define MIB (1ULL << 20)

static char tmpdir[64], path[128];
static const unsigned char uuid_a[16] = {0xaa, 1}, uuid_b[16] = {0xbb, 2};

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpubox-cuda-budget-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(path, sizeof(path), "%s/budget", tmpdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(tmpdir);
    return 0;
}

static void test_charge_and_refund(void **state)
{
    (void)state;
    gpucuda_budget b;
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    assert_true(b.shared);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666); /* every user of the container */

    int a = gpucuda_budget_device(&b, uuid_a);
    int c = gpucuda_budget_device(&b, uuid_b);
    assert_int_equal(a, 0);
    assert_int_equal(c, 1);
    assert_int_equal(gpucuda_budget_device(&b, uuid_a), 0); /* found again */

    assert_int_equal(gpucuda_budget_charge(&b, a, 3 * MIB, 4 * MIB), 0);
    assert_int_equal(gpucuda_budget_charge(&b, a, 2 * MIB, 4 * MIB), -1);
    assert_int_equal(gpucuda_budget_charge(&b, a, 1 * MIB, 4 * MIB), 0); /* exactly the share */
    assert_int_equal(gpucuda_budget_charge(&b, a, 1, 4 * MIB), -1);
    assert_int_equal(gpucuda_budget_charge(&b, c, 4 * MIB, 4 * MIB), 0); /* cards apart */
    assert_int_equal(gpucuda_budget_used(&b, a), 4 * MIB);
    /* A share made smaller than what is held: nothing more fits. */
    assert_int_equal(gpucuda_budget_charge(&b, a, 1, 2 * MIB), -1);
    gpucuda_budget_refund(&b, a, 3 * MIB);
    assert_int_equal(gpucuda_budget_used(&b, a), 1 * MIB);
    gpucuda_budget_refund(&b, a, 100 * MIB); /* never below zero */
    assert_int_equal(gpucuda_budget_used(&b, a), 0);
    assert_int_equal(gpucuda_budget_charge(&b, 99, 1, 4 * MIB), -1);

    /* Closing gives the process's bytes back; a new mapping sees the rest. */
    gpucuda_budget_close(&b);
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    assert_int_equal(gpucuda_budget_used(&b, c), 0);
    assert_int_equal(gpucuda_budget_device(&b, uuid_b), 1);
    gpucuda_budget_close(&b);
}

/* A child that charges bytes on card 0, says so on the pipe, and waits to
 * be killed (or exits when told, after closing the budget). */
static pid_t holder(uint64_t bytes, int *ready_fd, bool hold_lock)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        gpucuda_budget b;
        if (gpucuda_budget_open(&b, path) != 0)
            _exit(2);
        int d = gpucuda_budget_device(&b, uuid_a);
        char r = gpucuda_budget_charge(&b, d, bytes, 8 * MIB) == 0 ? 'y' : 'n';
        if (hold_lock && gpucuda_budget_lock(&b) != 0)
            r = 'n';
        if (write(p[1], &r, 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    close(p[1]);
    *ready_fd = p[0];
    return pid;
}

static char wait_ready(int fd)
{
    char r = 0;
    assert_int_equal(read(fd, &r, 1), 1);
    close(fd);
    return r;
}

static void kill_and_reap(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

static void test_two_processes_and_kill(void **state)
{
    (void)state;
    gpucuda_budget b;
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    int d = gpucuda_budget_device(&b, uuid_a);

    int fd1, fd2;
    pid_t p1 = holder(5 * MIB, &fd1, false);
    assert_int_equal(wait_ready(fd1), 'y');
    /* The second process sees the first one's bytes. */
    pid_t p2 = holder(4 * MIB, &fd2, false);
    assert_int_equal(wait_ready(fd2), 'n');
    kill_and_reap(p2);
    assert_int_equal(gpucuda_budget_used(&b, d), 5 * MIB);
    assert_int_equal(gpucuda_budget_charge(&b, d, 4 * MIB, 8 * MIB), -1);
    assert_int_equal(gpucuda_budget_charge(&b, d, 3 * MIB, 8 * MIB), 0);

    /* kill -9: no destructor ran, the slot is still there until a charge
     * that does not fit looks for dead processes. */
    kill_and_reap(p1);
    assert_int_equal(gpucuda_budget_used(&b, d), 8 * MIB);
    assert_int_equal(gpucuda_budget_charge(&b, d, 5 * MIB, 8 * MIB), 0);
    assert_int_equal(gpucuda_budget_used(&b, d), 8 * MIB);
    gpucuda_budget_refund(&b, d, 8 * MIB);
    assert_int_equal(gpucuda_budget_used(&b, d), 0);

    /* A live child is never reaped; a dead one is, by reap. */
    pid_t p3 = holder(2 * MIB, &fd1, false);
    assert_int_equal(wait_ready(fd1), 'y');
    assert_int_equal(gpucuda_budget_reap(&b), 0);
    assert_int_equal(gpucuda_budget_used(&b, d), 2 * MIB);
    kill(p3, SIGKILL);
    /* Not yet waited for: a zombie counts as dead too. */
    usleep(100 * 1000);
    assert_int_equal(gpucuda_budget_reap(&b), 1);
    assert_int_equal(gpucuda_budget_used(&b, d), 0);
    assert_int_equal(waitpid(p3, NULL, 0), p3);
    gpucuda_budget_close(&b);
}

static void test_holder_dies_holding_lock(void **state)
{
    (void)state;
    gpucuda_budget b;
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    int d = gpucuda_budget_device(&b, uuid_a);
    int fd;
    pid_t p = holder(6 * MIB, &fd, true);
    assert_int_equal(wait_ready(fd), 'y');
    kill_and_reap(p);
    /* The next lock comes back EOWNERDEAD: the dead holder's slot goes,
     * the totals are recounted, the mutex is made consistent. */
    assert_int_equal(gpucuda_budget_charge(&b, d, 8 * MIB, 8 * MIB), 0);
    assert_int_equal(gpucuda_budget_used(&b, d), 8 * MIB);
    /* And it keeps working. */
    assert_int_equal(gpucuda_budget_lock(&b), 0);
    gpucuda_budget_unlock(&b);
    gpucuda_budget_refund(&b, d, 8 * MIB);
    assert_int_equal(gpucuda_budget_used(&b, d), 0);
    gpucuda_budget_close(&b);
}

/* A forked child with the parent's mapping takes a slot of its own. */
static void test_forked_child_own_slot(void **state)
{
    (void)state;
    gpucuda_budget b;
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    int d = gpucuda_budget_device(&b, uuid_a);
    assert_int_equal(gpucuda_budget_charge(&b, d, 1 * MIB, 8 * MIB), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = gpucuda_budget_charge(&b, d, 2 * MIB, 8 * MIB) == 0 && b.slot >= 0 &&
                 b.shm->slot[b.slot].pid == getpid();
        _exit(ok ? 0 : 1); /* dies without leaving: its 2 MiB stay until reaped */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(gpucuda_budget_used(&b, d), 3 * MIB);
    assert_int_equal(gpucuda_budget_reap(&b), 1);
    assert_int_equal(gpucuda_budget_used(&b, d), 1 * MIB);
    gpucuda_budget_close(&b);
}

static void test_private_and_foreign(void **state)
{
    (void)state;
    gpucuda_budget b;
    assert_int_equal(gpucuda_budget_open(&b, NULL), 0);
    assert_false(b.shared);
    int d = gpucuda_budget_device(&b, uuid_a);
    assert_int_equal(gpucuda_budget_charge(&b, d, 8 * MIB, 8 * MIB), 0);
    assert_int_equal(gpucuda_budget_charge(&b, d, 1, 8 * MIB), -1);
    gpucuda_budget_close(&b);

    /* A file of another size (another layout): a private budget instead. */
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0666);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a budget", 12), 12);
    close(fd);
    assert_int_equal(gpucuda_budget_open(&b, path), 0);
    assert_false(b.shared);
    gpucuda_budget_close(&b);

    /* A directory that does not exist: private too. */
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none/budget", tmpdir);
    assert_int_equal(gpucuda_budget_open(&b, missing), 0);
    assert_false(b.shared);
    gpucuda_budget_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_charge_and_refund, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes_and_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_dies_holding_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forked_child_own_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_and_foreign, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
