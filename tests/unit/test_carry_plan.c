/*
 * test_carry_plan.c - the portable way's two pure pieces: the plan made
 * from Docker's list of changes, and the tar rewriter, checked against GNU
 * tar (an independent reader and writer of the same format).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "carry/carry_internal.h"
#include "util/cleanup.h"

static char base[256];

static void paths_of(carry_paths *s, const char *const *v)
{
    for (; *v; v++)
        carry_paths_add(s, *v);
}

static const char *kind_name(enum carry_op_kind k)
{
    return k == CARRY_OP_SHALLOW ? "shallow" : k == CARRY_OP_DEEP ? "deep" : "replace";
}

static void test_path_order(void **state)
{
    (void)state;
    assert_true(carry_path_cmp("/a", "/a/b") < 0);
    assert_true(carry_path_cmp("/a/b", "/a-b") < 0); /* a subtree follows its root */
    assert_true(carry_path_cmp("/a/zzz", "/a0") < 0);
    assert_true(carry_path_cmp("/b", "/a/b") > 0);
    assert_int_equal(carry_path_cmp("/a", "/a"), 0);
    assert_true(carry_path_within("/a/b", "/a"));
    assert_true(carry_path_within("/a", "/a"));
    assert_false(carry_path_within("/ab", "/a"));
    assert_true(carry_path_within("/x", "/"));
}

/* A list as Docker 20.10 gives it for a container that installed, changed
 * and removed things, with volumes at /data and /work/vol (old) and /data
 * and /mnt/vol2 (new). */
static void test_plan_from_changes(void **state)
{
    (void)state;
    json_t *changes = json_loads("["
                                 "{\"Path\":\"/var/lib/a\",\"Kind\":0},"
                                 "{\"Path\":\"/bin\",\"Kind\":0},"
                                 "{\"Path\":\"/bin/sh\",\"Kind\":0},"
                                 "{\"Path\":\"/bin/true\",\"Kind\":2},"
                                 "{\"Path\":\"/bin/false\",\"Kind\":2},"
                                 "{\"Path\":\"/opt\",\"Kind\":1},"
                                 "{\"Path\":\"/opt/app\",\"Kind\":1},"
                                 "{\"Path\":\"/opt/app/x\",\"Kind\":1},"
                                 "{\"Path\":\"/root\",\"Kind\":0},"
                                 "{\"Path\":\"/root/.profile\",\"Kind\":1},"
                                 "{\"Path\":\"/etc\",\"Kind\":0},"
                                 "{\"Path\":\"/etc/app.conf\",\"Kind\":1},"
                                 "{\"Path\":\"/etc/hosts\",\"Kind\":0},"
                                 "{\"Path\":\"/data\",\"Kind\":1},"
                                 "{\"Path\":\"/work\",\"Kind\":1},"
                                 "{\"Path\":\"/work/vol\",\"Kind\":1},"
                                 "{\"Path\":\"/work/vol/x\",\"Kind\":1},"
                                 "{\"Path\":\"/work/src\",\"Kind\":1},"
                                 "{\"Path\":\"/work/src/main.c\",\"Kind\":1},"
                                 "{\"Path\":\"/srv\",\"Kind\":2},"
                                 "{\"Path\":\"/mnt\",\"Kind\":0},"
                                 "{\"Path\":\"/mnt/gone\",\"Kind\":2},"
                                 "{\"Path\":\"/var\",\"Kind\":0},"
                                 "{\"Path\":\"/var/lib\",\"Kind\":0},"
                                 "{\"Path\":\"/usr/share/doc\",\"Kind\":0},"
                                 "{\"Path\":\"/usr/share/doc/pkg\",\"Kind\":2},"
                                 "{\"Path\":\"/usr/share/doc/pkg/README\",\"Kind\":1}"
                                 "]",
                                 0, NULL);
    assert_non_null(changes);
    const char *const skip_v[] = {"/proc",
                                  "/sys",
                                  "/dev",
                                  "/etc/hosts",
                                  "/etc/hostname",
                                  "/etc/resolv.conf",
                                  "/.dockerenv",
                                  "/data",
                                  "/work/vol",
                                  "/mnt/vol2",
                                  NULL};
    const char *const guard_v[] = {"/data", "/mnt/vol2", NULL};
    carry_paths skip = {0}, guard = {0};
    paths_of(&skip, skip_v);
    paths_of(&guard, guard_v);
    carry_plan_input in = {.changes = changes, .skip = &skip, .guard = &guard};
    carry_plan plan;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(carry_plan_build(&in, &plan, &e), 0);

    const char *want[] = {
        "replace /bin",       /* deletions inside: the whole directory again */
        "shallow /etc",       /* its metadata, after what is written into it */
        "deep /etc/app.conf", /* /etc/hosts is Docker's */
        "shallow /mnt",       /* /mnt/gone cannot be deleted: /mnt holds a mount */
        "deep /opt",          /* added: everything under it in one stream */
        "shallow /root",
        "deep /root/.profile",
        "shallow /usr/share",         /* the parent of /usr/share/doc, which may be a file */
        "shallow /usr/share/doc",     /* the parent of a replaced directory */
        "replace /usr/share/doc/pkg", /* a directory emptied and refilled */
        "shallow /var",
        "shallow /var/lib",
        "shallow /var/lib/a",
        "shallow /work", /* added, but the old container mounted /work/vol: split */
        "deep /work/src",
    };
    char got[4096] = "";
    for (size_t i = 0; i < plan.nops; i++) {
        size_t used = strlen(got);
        snprintf(got + used, sizeof(got) - used, "%s %s\n", kind_name(plan.ops[i].kind),
                 plan.ops[i].path);
    }
    char wanted[4096] = "";
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        size_t used = strlen(wanted);
        snprintf(wanted + used, sizeof(wanted) - used, "%s\n", want[i]);
    }
    assert_string_equal(got, wanted);
    assert_int_equal(plan.probe.n, 1);
    assert_string_equal(plan.probe.v[0], "/srv");
    assert_int_equal(plan.unapplied.n, 1);
    assert_string_equal(plan.unapplied.v[0], "/mnt/gone");
    carry_plan_free(&plan);
    carry_paths_free(&skip);
    carry_paths_free(&guard);
    json_decref(changes);
}

static void test_plan_refuses_malformed_changes(void **state)
{
    (void)state;
    carry_paths none = {0};
    const char *bad[] = {"{}", "[{\"Path\":\"relative\",\"Kind\":1}]",
                         "[{\"Path\":\"/a\",\"Kind\":7}]", "[{\"Kind\":1}]"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        json_t *changes = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null(changes);
        carry_plan_input in = {.changes = changes, .skip = &none, .guard = &none};
        carry_plan plan;
        gb_err e = GB_ERR_INIT;
        assert_int_equal(carry_plan_build(&in, &plan, &e), -1);
        assert_int_equal(e.code, ERR_INTERNAL);
        json_decref(changes);
    }
}

/* ---- Tar ---- */

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    char buf[256];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

/* Rewrite every entry of in_tar under prefix (as the portable way does with
 * an archive of "tree" read out of /prefix), into out_tar. */
static int rewrite(const char *in_tar, const char *out_tar, const char *prefix, gb_err *e)
{
    _cleanup_close_ int in = open(in_tar, O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int out = open(out_tar, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(in >= 0 && out >= 0);
    carry_tar_reader *r = carry_tar_reader_new(in);
    int rc = 0, entries = 0;
    for (;;) {
        carry_tar_entry ent;
        int got = carry_tar_next(r, &ent, e);
        if (got <= 0) {
            rc = got;
            break;
        }
        _cleanup_free_ char *name = NULL, *link = NULL;
        assert_true(asprintf(&name, "%s%s", prefix, ent.name) > 0);
        if (ent.type == '1')
            assert_true(asprintf(&link, "%s%s", prefix, ent.linkname) > 0);
        rc = carry_tar_write_header(out, &ent, name, link, e);
        if (rc == 0)
            rc = carry_tar_data(r, &ent, out, e);
        if (rc == 0)
            rc = carry_tar_pad(out, ent.size, e);
        carry_tar_entry_clear(&ent);
        if (rc < 0)
            break;
        entries++;
    }
    carry_tar_reader_free(r);
    if (rc == 0)
        rc = carry_tar_write_end(out, e);
    return rc < 0 ? rc : entries;
}

static void test_tar_rewrite_against_gnu_tar(void **state)
{
    (void)state;
    /* Names over 100 bytes, a link target over 100 bytes, a hard link, a
     * fifo, a setuid file with an owner, an xattr, a file of 1 MiB + 1. */
    const char *longdir = "a-directory-name-that-is-long-enough/and-another-one-that-is-long-"
                          "enough/and-a-third-one";
    run("set -e; cd %s; rm -rf src dst; mkdir -p src/tree/%s dst; cd src/tree; "
        "echo hello > %s/file-with-a-long-name-at-the-end-of-a-long-path.txt; "
        "ln %s/file-with-a-long-name-at-the-end-of-a-long-path.txt hard; "
        "ln -s /%s/target-of-a-symlink-that-is-longer-than-a-hundred-bytes sym; "
        "mkfifo fifo; head -c 1048577 /dev/urandom > big; echo s > suid; chown 1234:5678 suid; "
        "chmod 4750 suid",
        base, longdir, longdir, longdir, longdir);
    char in_tar[512], out_tar[512], path[1024];
    snprintf(path, sizeof(path), "%s/src/tree/suid", base);
    assert_int_equal(lsetxattr(path, "user.color", "blue", 4, 0), 0);
    run("cd %s/src && tar --format=pax --xattrs --xattrs-include='user.*' -cf ../in.tar tree",
        base);
    snprintf(in_tar, sizeof(in_tar), "%s/in.tar", base);
    snprintf(out_tar, sizeof(out_tar), "%s/out.tar", base);
    gb_err e = GB_ERR_INIT;
    int entries = rewrite(in_tar, out_tar, "pre/fix/", &e);
    if (entries < 0)
        fail_msg("%s", e.msg);
    assert_true(entries >= 8);
    run("cd %s && tar --xattrs --xattrs-include='user.*' --same-owner -xpf out.tar -C dst && "
        "cmp src/tree/big dst/pre/fix/tree/big",
        base);

    snprintf(path, sizeof(path),
             "%s/dst/pre/fix/tree/%s/file-with-a-long-name-at-the-end-of-a-long-path.txt", base,
             longdir);
    _cleanup_free_ char *text = read_text(path);
    assert_string_equal(text, "hello\n");
    struct stat a, b;
    assert_int_equal(stat(path, &a), 0);
    snprintf(path, sizeof(path), "%s/dst/pre/fix/tree/hard", base);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_ino == b.st_ino && a.st_nlink == 2);
    snprintf(path, sizeof(path), "%s/dst/pre/fix/tree/sym", base);
    char target[512];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    assert_true(n > 100);
    target[n] = '\0';
    assert_non_null(strstr(target, "target-of-a-symlink-that-is-longer"));
    snprintf(path, sizeof(path), "%s/dst/pre/fix/tree/fifo", base);
    assert_int_equal(lstat(path, &a), 0);
    assert_true(S_ISFIFO(a.st_mode));
    snprintf(path, sizeof(path), "%s/dst/pre/fix/tree/suid", base);
    assert_int_equal(lstat(path, &a), 0);
    assert_int_equal(a.st_mode & 07777, 04750);
    assert_int_equal(a.st_uid, 1234);
    assert_int_equal(a.st_gid, 5678);
    char value[32] = "";
    assert_int_equal(lgetxattr(path, "user.color", value, sizeof(value)), 4);
    assert_memory_equal(value, "blue", 4);
}

static void test_tar_placeholder_and_bad_input(void **state)
{
    (void)state;
    char tar_path[512];
    snprintf(tar_path, sizeof(tar_path), "%s/placeholder.tar", base);
    int fd = open(tar_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(carry_tar_write_placeholder(fd, "usr/share/doc", &e), 0);
    assert_int_equal(carry_tar_write_end(fd, &e), 0);
    close(fd);
    run("cd %s && test \"$(tar -tvf placeholder.tar | awk '{print $1, $3, $6}')\" = "
        "'-rw------- 0 usr/share/doc'",
        base);

    /* Cut inside an entry's data, and a header whose checksum is wrong. */
    run("cd %s && head -c 1048576 in.tar > cut.tar && cp in.tar corrupt.tar && "
        "printf 'X' | dd of=corrupt.tar bs=1 seek=10 conv=notrunc 2>/dev/null",
        base);
    const char *bad[] = {"cut.tar", "corrupt.tar"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char in_path[512], out_path[512];
        snprintf(in_path, sizeof(in_path), "%s/%s", base, bad[i]);
        snprintf(out_path, sizeof(out_path), "%s/bad-out.tar", base);
        e = (gb_err)GB_ERR_INIT;
        assert_int_equal(rewrite(in_path, out_path, "", &e), -1);
        assert_int_equal(e.code, ERR_INTERNAL);
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof(base), "/var/tmp/gbtest-carry-plan-%d", (int)getpid());
    return mkdir(base, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_order),
        cmocka_unit_test(test_plan_from_changes),
        cmocka_unit_test(test_plan_refuses_malformed_changes),
        cmocka_unit_test(test_tar_rewrite_against_gnu_tar),
        cmocka_unit_test(test_tar_placeholder_and_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
