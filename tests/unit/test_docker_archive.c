/*
 * test_docker_archive.c - what the portable way of carrying a system disk
 * is built from, against the real dockerd: the changes of a container
 * against its image, tar streams out of one container and into another
 * (through a file, and straight through a pipe for more data than the
 * client would ever buffer), their errors, and renaming a container.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>

#include "docker_test_util.h"

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* as gpuboxd does: a closed pipe is an error, not a death */
    return dtu_setup("archive");
}

/* The changes as "Kind Path" lines, in the order the client gives them. */
static char *changes_text(json_t *changes)
{
    size_t size = 4096, len = 0;
    char *text = calloc(1, size);
    assert_non_null(text);
    size_t i;
    json_t *item;
    json_array_foreach(changes, i, item)
    {
        len += (size_t)snprintf(text + len, size - len, "%lld %s\n",
                                (long long)json_integer_value(json_object_get(item, "Kind")),
                                json_string_value(json_object_get(item, "Path")));
        assert_true(len < size);
    }
    return text;
}

static void test_changes(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *id = dtu_create("changes", dtu_config(json_pack("[s,s]", "sleep", "600")));
    _cleanup_json_ json_t *fresh = NULL;
    assert_int_equal(docker_container_changes(dtu_client, id, &fresh, &e), 0);
    assert_true(json_is_array(fresh)); /* Docker says null; we say [] */
    assert_int_equal(json_array_size(fresh), 0);

    assert_int_equal(docker_container_start(dtu_client, id, &e), 0);
    /* Add a file and a directory, replace an image file (modified), delete
     * another (a whiteout in the upper layer). */
    free(dtu_exec_sh(id, "mkdir /root/newdir; echo hi > /root/new.txt;"
                         "rm /bin/arch && echo replaced > /bin/arch; rm /bin/true"));
    _cleanup_json_ json_t *changes = NULL;
    assert_int_equal(docker_container_changes(dtu_client, id, &changes, &e), 0);
    _cleanup_free_ char *text = changes_text(changes);
    assert_string_equal(text, "0 /bin\n"
                              "0 /bin/arch\n"
                              "2 /bin/true\n"
                              "0 /root\n"
                              "1 /root/new.txt\n"
                              "1 /root/newdir\n");
    assert_int_equal(DOCKER_CHANGE_MODIFIED, 0);
    assert_int_equal(DOCKER_CHANGE_ADDED, 1);
    assert_int_equal(DOCKER_CHANGE_DELETED, 2);

    json_t *none = NULL;
    assert_int_equal(docker_container_changes(dtu_client, "gbtest-dk-archive-absent", &none, &e),
                     -1);
    assert_null(none);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

/* A tree copied out of A into a created-but-not-started B through a file:
 * contents, a symlink, modes and owners survive. */
static void test_archive_roundtrip(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *a = dtu_start_sh("src", "sleep 600");
    free(dtu_exec_sh(a, "mkdir -p /root/payload/sub; echo alpha > /root/payload/a.txt;"
                        "echo beta > /root/payload/sub/b.txt; ln -s a.txt /root/payload/link;"
                        "chmod 640 /root/payload/a.txt; chown 1234:5678 /root/payload/sub/b.txt;"
                        "echo .hidden > /root/payload/.dot"));

    char tmpl[] = "/tmp/gbtest-dk-archive-tar-XXXXXX";
    _cleanup_close_ int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    unlink(tmpl);
    if (docker_container_archive_get(dtu_client, a, "/root/payload", fd, &e) != 0)
        fail_msg("%s", e.msg);
    off_t size = lseek(fd, 0, SEEK_CUR);
    assert_true(size > 1024); /* tar blocks of 512 bytes, several entries */
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);

    const char *show = "cd /root/payload && cat a.txt sub/b.txt .dot && readlink link &&"
                       "stat -c '%a %u:%g %n' a.txt sub/b.txt";
    _cleanup_free_ char *b = dtu_create("dst", dtu_config(json_pack("[s,s,s]", "sh", "-c", show)));
    if (docker_container_archive_put(dtu_client, b, "/root", fd, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(docker_container_start(dtu_client, b, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(dtu_client, b, &code, &e), 0);
    _cleanup_free_ char *out = NULL;
    _cleanup_free_ char *err_out = NULL;
    assert_int_equal(docker_container_logs(dtu_client, b, &out, &err_out, 0, &e), 0);
    assert_string_equal(err_out, "");
    assert_string_equal(out,
                        "alpha\nbeta\n.hidden\na.txt\n640 0:0 a.txt\n644 1234:5678 sub/b.txt\n");
    assert_int_equal(code, 0);

    /* One file: the tar holds it under its base name. */
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(docker_container_archive_get(dtu_client, a, "/root/payload/a.txt", fd, &e), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(docker_container_archive_put(dtu_client, a, "/tmp", fd, &e), 0);
    _cleanup_free_ char *copied = dtu_exec_sh(a, "cat /tmp/a.txt");
    assert_string_equal(copied, "alpha\n");
}

struct pump {
    const char *container;
    const char *path;
    int fd; /* the pipe's write end: closed when done, so the reader sees EOF */
    int rc;
    gb_err e;
};

static void *pump_out(void *arg)
{
    struct pump *p = arg;
    p->e = (gb_err)GB_ERR_INIT;
    p->rc = docker_container_archive_get(dtu_client, p->container, p->path, p->fd, &p->e);
    close(p->fd);
    return NULL;
}

/* 80 MiB straight from A into B through a pipe: more than the 64 MiB the
 * client ever buffers, so it can only pass as a stream. */
static void test_archive_stream_through_pipe(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *a = dtu_start_sh("bigsrc", "sleep 600");
    _cleanup_free_ char *sum_a =
        dtu_exec_sh(a, "dd if=/dev/urandom of=/root/big.bin bs=1M count=80 2>/dev/null;"
                       "md5sum /root/big.bin | cut -d' ' -f1");
    _cleanup_free_ char *b = dtu_create(
        "bigdst",
        dtu_config(json_pack("[s,s,s]", "sh", "-c", "md5sum /root/big.bin | cut -d' ' -f1")));

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct pump p = {.container = a, .path = "/root/big.bin", .fd = fds[1]};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, pump_out, &p), 0);
    int rc = docker_container_archive_put(dtu_client, b, "/root", fds[0], &e);
    pthread_join(thread, NULL);
    close(fds[0]);
    if (p.rc != 0)
        fail_msg("out of A: %s", p.e.msg);
    if (rc != 0)
        fail_msg("into B: %s", e.msg);

    assert_int_equal(docker_container_start(dtu_client, b, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(dtu_client, b, &code, &e), 0);
    assert_int_equal(code, 0);
    _cleanup_free_ char *sum_b = NULL;
    _cleanup_free_ char *err_out = NULL;
    assert_int_equal(docker_container_logs(dtu_client, b, &sum_b, &err_out, 0, &e), 0);
    assert_int_equal(strlen(sum_a), 33);
    assert_string_equal(sum_b, sum_a);
}

static void test_archive_errors(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *a = dtu_start_sh("errs", "sleep 600");
    char tmpl[] = "/tmp/gbtest-dk-archive-err-XXXXXX";
    _cleanup_close_ int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    unlink(tmpl);

    assert_int_equal(docker_container_archive_get(dtu_client, a, "/no/such/path", fd, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "Could not find the file /no/such/path"));
    assert_int_equal(lseek(fd, 0, SEEK_END), 0); /* the error body never reached the file */

    assert_int_equal(
        docker_container_archive_get(dtu_client, "gbtest-dk-archive-absent", "/root", fd, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_int_equal(docker_container_archive_get(dtu_client, a, "root", fd, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(docker_container_archive_get(dtu_client, a, "/root", -1, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);

    /* A reader that went away: the write fails and says so. */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    assert_int_equal(docker_container_archive_get(dtu_client, a, "/bin", fds[1], &e), -1);
    close(fds[1]);
    assert_non_null(strstr(e.msg, "writing the archive failed: Broken pipe"));

    /* Not a tar; a missing destination; a descriptor that cannot be read. */
    assert_int_equal(write(fd, "not a tar at all\n", 17), 17);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(docker_container_archive_put(dtu_client, a, "/root", fd, &e), -1);
    assert_non_null(strstr(e.msg, "Error processing tar file"));
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(docker_container_archive_put(dtu_client, a, "/no/such/dir", fd, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    int write_only = open("/dev/null", O_WRONLY);
    assert_true(write_only >= 0);
    assert_int_equal(docker_container_archive_put(dtu_client, a, "/root", write_only, &e), -1);
    close(write_only);
    assert_non_null(strstr(e.msg, "reading the archive failed: Bad file descriptor"));
}

static void test_rename(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *id = dtu_create("old", dtu_config(NULL));
    _cleanup_free_ char *other = dtu_create("other", dtu_config(NULL));
    char new_name[160], other_name[160];
    dtu_name(new_name, sizeof(new_name), "new");
    dtu_name(other_name, sizeof(other_name), "other");

    assert_int_equal(docker_container_rename(dtu_client, id, new_name, &e), 0);
    _cleanup_json_ json_t *info = NULL;
    assert_int_equal(docker_container_inspect(dtu_client, new_name, &info, &e), 0);
    assert_string_equal(json_string_value(json_object_get(info, "Id")), id);

    assert_int_equal(docker_container_rename(dtu_client, id, other_name, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "already in use"));
    assert_int_equal(docker_container_rename(dtu_client, id, "bad/name", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "Invalid container name"));
    assert_int_equal(docker_container_rename(dtu_client, id, "", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(
        docker_container_rename(dtu_client, "gbtest-dk-archive-absent", "gbtest-dk-x", &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_changes, dtu_cleanup),
        cmocka_unit_test_teardown(test_archive_roundtrip, dtu_cleanup),
        cmocka_unit_test_teardown(test_archive_stream_through_pipe, dtu_cleanup),
        cmocka_unit_test_teardown(test_archive_errors, dtu_cleanup),
        cmocka_unit_test_teardown(test_rename, dtu_cleanup),
    };
    return cmocka_run_group_tests(tests, group_setup, dtu_teardown);
}
