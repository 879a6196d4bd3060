/*
 * test_carry_move.c - the overlay way's move on plain host directories: the
 * merge rules, and that a move stopped after any number of renames (as a
 * crash would stop it) ends, when run again, exactly where an unbroken run
 * ends.
 *
 * Two directories under a temporary root play the old and new upper
 * directories. The old one holds what a user's layer holds (whiteouts,
 * an opaque directory, hard links, modes, xattrs, a Docker-owned file the
 * user also wrote); the new one what Docker may have put in a fresh
 * container's. Needs root: whiteouts are device nodes and trusted.* xattrs
 * are overlay's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "carry/carry_internal.h"
#include "util/cleanup.h"

static char base[256];

/* ---- Building trees ---- */

/* root/rel into p; a path that does not fit fails the test. */
static void path_at(char *p, size_t size, const char *root, const char *rel)
{
    int n = snprintf(p, size, "%s/%s", root, rel);
    assert_true(n > 0 && (size_t)n < size);
}

static void mk_dir(const char *root, const char *rel, mode_t mode)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static void mk_file(const char *root, const char *rel, const char *content)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void mk_whiteout(const char *root, const char *rel)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    assert_int_equal(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
}

static void set_xattr(const char *root, const char *rel, const char *name, const char *value)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    assert_int_equal(lsetxattr(p, name, value, strlen(value), 0), 0);
}

static void set_mtime(const char *root, const char *rel, time_t sec, long nsec)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    struct timespec t[2] = {{.tv_sec = sec, .tv_nsec = nsec}, {.tv_sec = sec, .tv_nsec = nsec}};
    assert_int_equal(utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW), 0);
}

/* Give every entry under root/rel one fixed time, so two builds of a tree
 * list alike (files first: setting a time does not touch the parent's). */
static void set_all_mtimes(const char *root, const char *rel)
{
    char p[4096];
    path_at(p, sizeof(p), root, rel);
    struct dirent **ents;
    int count = scandir(p, &ents, NULL, alphasort);
    for (int i = 0; i < count; i++) {
        if (strcmp(ents[i]->d_name, ".") != 0 && strcmp(ents[i]->d_name, "..") != 0) {
            char child[4096];
            snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] ? "/" : "", ents[i]->d_name);
            if (ents[i]->d_type == DT_DIR)
                set_all_mtimes(root, child);
            set_mtime(root, child, 1500000000, 0);
        }
        free(ents[i]);
    }
    free(ents);
}

/* The user's layer, in old, and what Docker put in the new container, in
 * fresh. Directory times are set last so creating entries does not move them. */
static void build_pair(const char *old, const char *fresh)
{
    assert_int_equal(mkdir(old, 0755), 0);
    assert_int_equal(mkdir(fresh, 0755), 0);

    mk_dir(old, "etc", 0750);
    set_xattr(old, "etc", "user.owner", "me");
    mk_file(old, "etc/app.conf", "app\n");
    mk_file(old, "etc/hostname", "the user's\n"); /* Docker's own: the new side keeps its */
    mk_dir(old, "opt", 0755);
    mk_dir(old, "opt/empty", 0700);
    mk_file(old, "opt/a", "a\n");
    char p[4096], q[4096];
    snprintf(p, sizeof(p), "%s/opt/a", old);
    snprintf(q, sizeof(q), "%s/opt/a-link", old);
    assert_int_equal(link(p, q), 0);
    snprintf(q, sizeof(q), "%s/opt/sym", old);
    assert_int_equal(symlink("a", q), 0);
    snprintf(p, sizeof(p), "%s/opt/a", old);
    assert_int_equal(chown(p, 1000, 1000), 0);
    assert_int_equal(chmod(p, 04755), 0);
    mk_dir(old, "tmp", 01777);
    set_xattr(old, "tmp", "trusted.overlay.opaque", "y");
    mk_file(old, "tmp/new", "t\n");
    mk_whiteout(old, "gone-file");
    mk_whiteout(old, "gone-dir");       /* the new side made a directory there */
    mk_file(old, "replaced", "user\n"); /* the new side made a file there */
    mk_dir(old, "was-file", 0755);      /* the new side made a file there */
    mk_file(old, "was-file/x", "x\n");
    mk_file(old, ".dotfile", "dot\n");
    set_all_mtimes(old, "");
    set_mtime(old, "etc", 1000000000, 111);
    set_mtime(old, "opt", 1000000001, 222);
    set_mtime(old, "tmp", 1000000002, 333);
    set_mtime(old, ".", 1000000003, 444);

    mk_dir(fresh, "etc", 0755);
    mk_file(fresh, "etc/hostname", "docker's\n");
    mk_file(fresh, "etc/hosts", "docker's hosts\n");
    mk_dir(fresh, "gone-dir", 0755);
    mk_file(fresh, "gone-dir/inside", "docker's\n");
    mk_file(fresh, "replaced", "docker's\n");
    mk_file(fresh, "was-file", "docker's\n");
    set_all_mtimes(fresh, "");
}

/* ---- Listing a tree: every entry with its metadata, all xattrs but the mark ---- */

/* times: list mtimes (the old side's change with every move out of it). */
static void list_into(const char *root, const char *rel, bool times, char **out, size_t *len)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s%s%s", root, rel[0] ? "/" : "", rel);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    char line[1024];
    int n = snprintf(line, sizeof(line), "%s %o %u:%u %lld.%09ld ino-links=%lu", rel[0] ? rel : ".",
                     (unsigned)st.st_mode, (unsigned)st.st_uid, (unsigned)st.st_gid,
                     times ? (long long)st.st_mtim.tv_sec : 0LL, times ? st.st_mtim.tv_nsec : 0L,
                     S_ISDIR(st.st_mode) ? 0UL : (unsigned long)st.st_nlink);
    if (S_ISCHR(st.st_mode))
        n += snprintf(line + n, sizeof(line) - (size_t)n, " dev=%u:%u", major(st.st_rdev),
                      minor(st.st_rdev));
    if (S_ISREG(st.st_mode)) {
        char content[128] = "";
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        size_t got = fread(content, 1, sizeof(content) - 1, f);
        content[got] = '\0';
        fclose(f);
        content[strcspn(content, "\n")] = '\0';
        n += snprintf(line + n, sizeof(line) - (size_t)n, " \"%s\"", content);
    }
    char names[1024];
    ssize_t nl = llistxattr(p, names, sizeof(names));
    for (ssize_t i = 0; i < nl; i += (ssize_t)strlen(names + i) + 1) {
        if (strcmp(names + i, CARRY_MARK_XATTR) == 0)
            continue;
        char value[128];
        ssize_t vl = lgetxattr(p, names + i, value, sizeof(value) - 1);
        assert_true(vl >= 0);
        value[vl] = '\0';
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%s", names + i, value);
    }
    size_t add = strlen(line) + 1;
    *out = realloc(*out, *len + add + 1);
    memcpy(*out + *len, line, add - 1);
    (*out)[*len + add - 1] = '\n';
    *len += add;
    (*out)[*len] = '\0';
    if (!S_ISDIR(st.st_mode))
        return;
    struct dirent **ents;
    int count = scandir(p, &ents, NULL, alphasort);
    assert_true(count >= 0);
    for (int i = 0; i < count; i++) {
        if (strcmp(ents[i]->d_name, ".") != 0 && strcmp(ents[i]->d_name, "..") != 0) {
            char child[4096];
            snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] ? "/" : "", ents[i]->d_name);
            list_into(root, child, times, out, len);
        }
        free(ents[i]);
    }
    free(ents);
}

static char *listing_times(const char *root, bool times)
{
    char *out = NULL;
    size_t len = 0;
    list_into(root, "", times, &out, &len);
    return out;
}

static char *listing(const char *root)
{
    return listing_times(root, true);
}

static void remove_all(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* ---- Tests ---- */

static void test_merge_rules(void **state)
{
    (void)state;
    char old[512], fresh[512], p[1024];
    snprintf(old, sizeof(old), "%s/rules-old", base);
    snprintf(fresh, sizeof(fresh), "%s/rules-new", base);
    build_pair(old, fresh);
    gb_err e = GB_ERR_INIT;
    carry_stats st = {0};
    if (carry_overlay_move(old, fresh, NULL, &st, &e) != 0)
        fail_msg("%s", e.msg);
    _cleanup_free_ char *got = listing(fresh);

    /* The user's entries, whiteouts and opaque directory moved as they are. */
    assert_non_null(
        strstr(got, "\netc 40750 0:0 1000000000.000000111 ino-links=0 user.owner=me\n"));
    assert_non_null(strstr(got, "\netc/app.conf 100644 0:0"));
    assert_non_null(strstr(got, "\nopt/a 104755 1000:1000"));
    assert_non_null(strstr(got, "\nopt/a-link 104755 1000:1000"));
    assert_non_null(strstr(got, "ino-links=2 \"a\"\n"));
    assert_non_null(strstr(got, "\nopt/empty 40700 "));
    assert_non_null(strstr(got, "\ntmp 41777 0:0 1000000002.000000333 ino-links=0 "
                                "trusted.overlay.opaque=y\n"));
    assert_non_null(strstr(got, "\ngone-file 20000 0:0"));
    assert_non_null(strstr(got, "\n.dotfile 100644"));
    /* Docker's own file stays the new container's; its other files too. */
    assert_non_null(strstr(got, "\netc/hostname 100644 0:0"));
    assert_non_null(strstr(got, "\"docker's\"\n"));
    assert_non_null(strstr(got, "\netc/hosts 100644"));
    /* Elsewhere the user's version wins, whatever the types. */
    assert_non_null(strstr(got, "\nreplaced 100644 0:0"));
    assert_non_null(strstr(got, "\"user\"\n"));
    assert_non_null(strstr(got, "\ngone-dir 20000 0:0"));
    assert_null(strstr(got, "gone-dir/inside"));
    assert_non_null(strstr(got, "\nwas-file 40755 "));
    assert_non_null(strstr(got, "\nwas-file/x 100644 "));
    /* The root directory takes the old root's metadata and times. */
    const char *root_line = ". 40755 0:0 1000000003.000000444 ";
    assert_true(strncmp(got, root_line, strlen(root_line)) == 0);

    /* What stayed behind: only the user's copy of Docker's own file. */
    _cleanup_free_ char *left = listing(old);
    assert_non_null(strstr(left, "\netc/hostname 100644"));
    assert_null(strstr(left, "app.conf"));
    assert_null(strstr(left, "\nopt"));
    snprintf(p, sizeof(p), "%s/etc/hostname", old);
    assert_int_equal(access(p, F_OK), 0);

    /* Once more: nothing to do, nothing changes. */
    carry_stats again = {0};
    assert_int_equal(carry_overlay_move(old, fresh, NULL, &again, &e), 0);
    assert_int_equal(again.entries, 0);
    _cleanup_free_ char *got2 = listing(fresh);
    assert_string_equal(got, got2);
    remove_all(old);
    remove_all(fresh);
}

/* Stop after k renames for every k, then finish: always the same result. */
static void test_every_crash_point_resumes(void **state)
{
    (void)state;
    char old[512], fresh[512];
    snprintf(old, sizeof(old), "%s/ref-old", base);
    snprintf(fresh, sizeof(fresh), "%s/ref-new", base);
    build_pair(old, fresh);
    gb_err e = GB_ERR_INIT;
    carry_stats st = {0};
    assert_int_equal(carry_overlay_move(old, fresh, NULL, &st, &e), 0);
    _cleanup_free_ char *want_new = listing(fresh);
    _cleanup_free_ char *want_old = listing_times(old, false);
    remove_all(old);
    remove_all(fresh);
    long total = (long)st.entries;
    assert_true(total >= 8);

    for (long k = 0; k <= total; k++) {
        build_pair(old, fresh);
        carry_overlay_opts stop = {.stop_after_moves = k};
        carry_stats part = {0};
        int rc = carry_overlay_move(old, fresh, &stop, &part, &e);
        assert_int_equal(rc, k < total ? 1 : 0);
        assert_int_equal(part.entries, k);
        /* A second interruption on the way does not matter either. */
        carry_overlay_opts stop_again = {.stop_after_moves = 1};
        rc = carry_overlay_move(old, fresh, &stop_again, &part, &e);
        assert_true(rc == 0 || rc == 1);
        if (carry_overlay_move(old, fresh, NULL, &part, &e) != 0)
            fail_msg("k=%ld: %s", k, e.msg);
        assert_int_equal(part.entries, total);
        _cleanup_free_ char *got_new = listing(fresh);
        _cleanup_free_ char *got_old = listing_times(old, false);
        if (strcmp(got_new, want_new) != 0)
            fail_msg("stopped after %ld moves, the new side differs:\n%s\nwanted:\n%s", k, got_new,
                     want_new);
        if (strcmp(got_old, want_old) != 0)
            fail_msg("stopped after %ld moves, the old side differs:\n%s\nwanted:\n%s", k, got_old,
                     want_old);
        remove_all(old);
        remove_all(fresh);
    }
}

static void test_refuses_two_filesystems(void **state)
{
    (void)state;
    char old[512], other[512];
    snprintf(old, sizeof(old), "%s/fs-old", base);
    assert_int_equal(mkdir(old, 0755), 0);
    mk_file(old, "f", "f\n");
    snprintf(other, sizeof(other), "/dev/shm/gbtest-carry-move-%d", (int)getpid());
    assert_int_equal(mkdir(other, 0755), 0);
    struct stat a, b;
    assert_int_equal(stat(old, &a), 0);
    assert_int_equal(stat(other, &b), 0);
    assert_true(a.st_dev != b.st_dev);
    gb_err e = GB_ERR_INIT;
    assert_int_equal(carry_overlay_move(old, other, NULL, NULL, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "different filesystems"));
    char p[1024];
    snprintf(p, sizeof(p), "%s/f", old);
    assert_int_equal(access(p, F_OK), 0);
    e = (gb_err)GB_ERR_INIT;
    assert_int_equal(carry_overlay_move(old, old, NULL, NULL, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    remove_all(old);
    remove_all(other);
}

static int setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "test_carry_move needs root (whiteouts, trusted xattrs)\n");
        return -1;
    }
    snprintf(base, sizeof(base), "/var/tmp/gbtest-carry-move-%d", (int)getpid());
    return mkdir(base, 0755);
}

static int teardown(void **state)
{
    (void)state;
    remove_all(base);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_every_crash_point_resumes),
        cmocka_unit_test(test_refuses_two_filesystems),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
