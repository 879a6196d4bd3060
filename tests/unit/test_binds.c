/*
 * test_binds.c - how a host bind's source is opened (service/binds.c):
 * under an allowed prefix, never through a symlink, never a system path,
 * a directory or a regular file; the same answers with openat2 and with
 * the component-by-component walk used where the kernel has no openat2
 * (forced here with a seccomp filter in a child process).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/binds.h"
#include "util/cleanup.h"

static char root[64];
static char prefixes[256], data_dir[128];

/* One case: a path under root, and what opening it must give. */
typedef struct bind_case {
    const char *src; /* "%s" is root */
    int code;        /* 0: opened */
    const char *says;
} bind_case;

static const bind_case cases[] = {
    {"%s/P/ok", 0, NULL},
    {"%s/P/ok/file", 0, NULL},
    {"%s/P//ok/./sub/", 0, NULL},
    {"%s/P", ERR_FORBIDDEN, "system path"}, /* it holds the data dir */
    {"%s/Plink/ok/sub", 0, NULL}, /* the prefix as written, through the operator's symlink */
    {"%s/P/link", ERR_FORBIDDEN, "symlink"},
    {"%s/P/link/sub", ERR_FORBIDDEN, "symlink"},
    {"%s/P/ok/up", ERR_FORBIDDEN, "symlink"},
    {"%s/P/ok/dangling", ERR_FORBIDDEN, "symlink"},
    {"%s/P/nope", ERR_INVALID_PARAMS, "does not exist"},
    {"%s/P/ok/file/x", ERR_INVALID_PARAMS, "does not exist"},
    {"%s/P/ok/fifo", ERR_INVALID_PARAMS, "neither a directory nor a regular file"},
    {"%s/outside", ERR_FORBIDDEN, "not under an allowed host directory"},
    {"%s/elsewhere", ERR_FORBIDDEN, "symlink"}, /* a symlink into P from outside it */
    {"%s/P/data", ERR_FORBIDDEN, "system path"},
    {"/etc", ERR_FORBIDDEN, "system path"},
    {"/", ERR_FORBIDDEN, "system path"},
};

static void make(const char *fmt, int kind, const char *target)
{
    char path[256];
    snprintf(path, sizeof(path), fmt, root);
    switch (kind) {
    case 'd':
        assert_int_equal(mkdir(path, 0755), 0);
        break;
    case 'f':
        close(open(path, O_CREAT | O_WRONLY, 0644));
        break;
    case 'p':
        assert_int_equal(mkfifo(path, 0644), 0);
        break;
    default: {
        char to[256];
        snprintf(to, sizeof(to), target, root);
        assert_int_equal(symlink(to, path), 0);
    }
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gpubox-binds-XXXXXX");
    assert_non_null(mkdtemp(root));
    make("%s/P", 'd', NULL);
    make("%s/P/ok", 'd', NULL);
    make("%s/P/ok/sub", 'd', NULL);
    make("%s/P/ok/file", 'f', NULL);
    make("%s/P/ok/fifo", 'p', NULL);
    make("%s/P/data", 'd', NULL);
    make("%s/outside", 'd', NULL);
    make("%s/P/link", 'l', "%s/P/ok");
    make("%s/P/ok/up", 'l', "/");
    make("%s/P/ok/dangling", 'l', "%s/P/nope");
    make("%s/Plink", 'l', "%s/P");
    make("%s/elsewhere", 'l', "%s/P/ok");
    snprintf(prefixes, sizeof(prefixes), "%s/Plink", root);
    snprintf(data_dir, sizeof(data_dir), "%s/P/data", root);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every case; the number that went wrong (printed). */
static int run_cases(const char *how)
{
    app a = {.cfg = {.data_dir = data_dir, .bind_prefixes = prefixes}};
    int wrong = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char src[256];
        snprintf(src, sizeof(src), cases[i].src, root);
        gb_err err = GB_ERR_INIT;
        int fd = binds_open_host(&a, src, &err);
        bool ok = cases[i].code == 0 ? fd >= 0
                                     : fd < 0 && err.code == cases[i].code &&
                                           strstr(err.msg, cases[i].says) != NULL;
        if (!ok) {
            fprintf(stderr, "%s: %s: fd %d, code %d, %s\n", how, src, fd, err.code, err.msg);
            wrong++;
        }
        if (fd >= 0)
            close(fd);
    }
    return wrong;
}

static void test_openat2(void **state)
{
    (void)state;
    assert_int_equal(run_cases("openat2"), 0);
}

/* In a child whose openat2 answers ENOSYS, as an old kernel's would. */
static void test_walk_without_openat2(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
            _exit(100);
        long probe = syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0);
        if (probe >= 0 || errno != ENOSYS)
            _exit(101);
        _exit(run_cases("walk") ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openat2),
        cmocka_unit_test(test_walk_without_openat2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
