/*
 * test_carry_tree_snapshot.c - a resumed pre-copy's snapshot dated back
 * to its first try (carry/carry_tree.c, carry_tree_snapshot_backdate): a
 * file changed after the first try began but before the resumed try made
 * its snapshot goes in the final stream only once the snapshot is dated
 * back; the date changes, nothing else of the file; a file that is not a
 * GNU tar snapshot is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "carry/carry.h"

static char root[64];

static void path_in(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", root, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    *len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return buf;
}

static void pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* The tree as a stream into a file; whether text is in it. */
static bool export_has(const char *dir, const char *snap_in, const char *snap_out, const char *text)
{
    char out[128], work[128];
    path_in(out, sizeof(out), "stream.tar");
    path_in(work, sizeof(work), "work.snar");
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    gb_err err = GB_ERR_INIT;
    int rc = carry_tree_export(dir, snap_in, snap_out, work, 0, 0, 0, true, fd, &err);
    close(fd);
    assert_int_equal(rc, 0);
    size_t len = 0;
    char *data = read_file(out, &len);
    return memmem(data, len, text, strlen(text)) != NULL;
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gpubox-snap-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_a_change_between_the_tries_goes_in_the_final_stream(void **state)
{
    (void)state;
    if (!carry_tree_tar_ok())
        skip();
    char dir[128], file[160], other[160], snap[128];
    path_in(dir, sizeof(dir), "tree");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof(file), "%s/a", dir);
    snprintf(other, sizeof(other), "%s/b", dir);
    path_in(snap, sizeof(snap), "pre.snar");
    write_file(file, "first-content\n");
    write_file(other, "other-content\n");
    /* The first try begins (and is cut off: its snapshot is not kept). */
    struct timespec began;
    clock_gettime(CLOCK_REALTIME, &began);
    assert_true(export_has(dir, NULL, NULL, "first-content"));
    pause_ms(30);
    write_file(file, "changed-between-the-tries\n");
    pause_ms(30);
    /* The resumed try: its snapshot dated when it began, after the change. */
    assert_true(export_has(dir, NULL, snap, "changed-between-the-tries"));
    assert_false(export_has(dir, snap, NULL, "changed-between-the-tries"));
    /* Dated back to the first try: the final stream carries the change. */
    gb_err err = GB_ERR_INIT;
    assert_int_equal(carry_tree_snapshot_backdate(snap, &began, &err), 0);
    assert_true(export_has(dir, snap, NULL, "changed-between-the-tries"));
}

static void test_only_the_date_changes_and_never_forward(void **state)
{
    (void)state;
    char snap[128];
    path_in(snap, sizeof(snap), "fake.snar");
    static const char body[] = "GNU tar-1.34-2\n200\0"
                               "500\0"
                               "0\0"
                               "7\0"
                               "dir\0";
    FILE *f = fopen(snap, "wb");
    assert_non_null(f);
    fwrite(body, 1, sizeof(body) - 1, f);
    fclose(f);
    gb_err err = GB_ERR_INIT;
    struct timespec later = {.tv_sec = 300, .tv_nsec = 0};
    assert_int_equal(carry_tree_snapshot_backdate(snap, &later, &err), 0);
    size_t len = 0;
    char *data = read_file(snap, &len);
    assert_int_equal(len, sizeof(body) - 1);
    assert_memory_equal(data, body, len);
    struct timespec earlier = {.tv_sec = 150, .tv_nsec = 25};
    assert_int_equal(carry_tree_snapshot_backdate(snap, &earlier, &err), 0);
    static const char want[] = "GNU tar-1.34-2\n150\0"
                               "25\0"
                               "0\0"
                               "7\0"
                               "dir\0";
    data = read_file(snap, &len);
    assert_int_equal(len, sizeof(want) - 1);
    assert_memory_equal(data, want, len);
}

static void test_a_file_that_is_no_snapshot_is_refused(void **state)
{
    (void)state;
    char snap[128];
    path_in(snap, sizeof(snap), "not.snar");
    write_file(snap, "hello\n");
    gb_err err = GB_ERR_INIT;
    struct timespec t = {.tv_sec = 1, .tv_nsec = 0};
    assert_int_equal(carry_tree_snapshot_backdate(snap, &t, &err), -1);
    assert_int_equal(err.code, ERR_CONFLICT);
}

/* The tree as a stream from byte skip (head: as carry_tree_export takes
 * it); *rc its answer, the bytes malloc'd. */
static unsigned char *export_from(const char *dir, uint64_t skip, uint64_t head_len,
                                  uint64_t head_hash, size_t *len, int *rc, gb_err *err)
{
    char out[128], work[128];
    path_in(out, sizeof(out), "from.tar");
    path_in(work, sizeof(work), "from.snar");
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    *rc = carry_tree_export(dir, NULL, NULL, work, skip, head_len, head_hash, false, fd, err);
    close(fd);
    char *data = read_file(out, len);
    unsigned char *copy = malloc(*len + 1);
    memcpy(copy, data, *len);
    return copy;
}

/* Files of one size and whole-second times: every entry is as long as
 * the next, so with the first file gone another entry begins exactly at
 * the byte a cut stream resumes at. Only the head tells them apart. */
static void test_a_resume_finds_the_same_entry_or_refuses(void **state)
{
    (void)state;
    if (!carry_tree_tar_ok())
        skip();
    char dir[128], file[160];
    path_in(dir, sizeof(dir), "same");
    assert_int_equal(mkdir(dir, 0755), 0);
    static char content[2048];
    for (int i = 1; i <= 6; i++) {
        snprintf(file, sizeof(file), "%s/f%d", dir, i);
        memset(content, 'a' + i, sizeof(content) - 1);
        write_file(file, content);
        struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
        assert_int_equal(utimensat(AT_FDCWD, file, t, 0), 0);
    }
    size_t len = 0;
    int rc = 0;
    gb_err err = GB_ERR_INIT;
    unsigned char *whole_stream = export_from(dir, 0, 0, 0, &len, &rc, &err);
    assert_int_equal(rc, 0);
    /* cut in the middle of the fourth file's data */
    const unsigned char *at = memmem(whole_stream, len, "eeee", 4);
    assert_non_null(at);
    size_t cut = (size_t)(at - whole_stream) + 1000;
    int devnull = open("/dev/null", O_WRONLY);
    carry_relay *r = carry_relay_new(devnull);
    assert_int_equal(carry_relay_feed(r, whole_stream, cut), 0);
    uint64_t head_len = 0, head_hash = 0, whole = 0;
    bool complete = false;
    assert_true(carry_relay_head(r, &head_len, &head_hash));
    assert_int_equal(carry_relay_end(r, &whole, &complete, &err), 0);
    close(devnull);
    /* the same tree: the rest of the same stream */
    size_t rest_len = 0;
    unsigned char *rest = export_from(dir, whole, head_len, head_hash, &rest_len, &rc, &err);
    assert_int_equal(rc, 0);
    assert_int_equal(rest_len, len - whole);
    assert_memory_equal(rest, whole_stream + whole, rest_len);
    free(rest);
    /* the first file gone: f5's entry begins there now */
    snprintf(file, sizeof(file), "%s/f1", dir);
    assert_int_equal(unlink(file), 0);
    rest = export_from(dir, whole, 0, 0, &rest_len, &rc, &err);
    assert_int_equal(rc, 0); /* by the offset alone it would go on, a file short */
    free(rest);
    err = (gb_err)GB_ERR_INIT;
    rest = export_from(dir, whole, head_len, head_hash, &rest_len, &rc, &err);
    assert_int_equal(rc, -1);
    assert_int_equal(err.code, ERR_CONFLICT);
    free(rest);
    free(whole_stream);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_change_between_the_tries_goes_in_the_final_stream),
        cmocka_unit_test(test_only_the_date_changes_and_never_forward),
        cmocka_unit_test(test_a_file_that_is_no_snapshot_is_refused),
        cmocka_unit_test(test_a_resume_finds_the_same_entry_or_refuses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
