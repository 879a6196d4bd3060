/*
 * test_volume.c - the volume backends against the real kernel: loop devices,
 * ext4, mount(2), e2fsprogs (the tests run as root).
 *
 * Every check reads the kernel's own view, not the module's: mounts from
 * /proc/self/mountinfo, loop devices from /sys/block/loop* /loop/backing_file,
 * sizes from statvfs and stat. Data survives each operation by checksum.
 * Volumes live in a fresh data dir under /var/tmp; the group teardown
 * destroys every volume a test may have left (a failed assertion leaves
 * the test early) and removes the dir. No loop device number is assumed:
 * other test runs may use loop devices at the same time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_volume_util.h"
#include "util/proc.h"
#include "volume/volume.h"

static char data_dir[64];
static volume_env loop_env, plain_env;
static const char *const loop_names[] = {"enf", "grow",  "shr",  "rst",  "busy",
                                         "odd", "crash", "par0", "par1", "par2"};
static char bind_dirs[2][VOLUME_PATH_MAX]; /* extra mounts a test made */

/* ---- helpers: the kernel's view ------------------------------------------ */

static void vol_path(const char *name, const char *suffix, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s%s", loop_env.volumes_dir, name, suffix);
    assert_true(n > 0 && (size_t)n < len);
}

static void create_loop(const char *name, uint64_t size, char *mnt)
{
    volume_docker_opts opts;
    gb_err e = GB_ERR_INIT;
    if (volume_create(&loop_env, name, size, &opts, &e) < 0)
        fail_msg("create %s: %s", name, e.msg);
    vol_path(name, "", mnt, VOLUME_PATH_MAX);
    assert_string_equal(volume_docker_opt(&opts, "device"), mnt);
}

/* ---- setup --------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    snprintf(data_dir, sizeof(data_dir), "/var/tmp/gpubox-voltest-XXXXXX");
    if (!mkdtemp(data_dir))
        return -1;
    gb_err e = GB_ERR_INIT;
    if (volume_env_open(&loop_env, "loop", data_dir, NULL, &e) < 0 ||
        volume_env_open(&plain_env, "plain", data_dir, NULL, &e) < 0) {
        fprintf(stderr, "volume_env_open: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    for (size_t i = 0; i < sizeof(bind_dirs) / sizeof(bind_dirs[0]); i++)
        if (bind_dirs[i][0])
            umount2(bind_dirs[i], MNT_DETACH);
    volume_destroy(&plain_env, "pl", &e);
    volume_test_cleanup(&loop_env, loop_names, sizeof(loop_names) / sizeof(loop_names[0]),
                        data_dir);
    return 0;
}

/* ---- loop backend -------------------------------------------------------- */

static void test_loop_create_enforces_size(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], path[VOLUME_PATH_MAX + 16];
    gb_err e = GB_ERR_INIT;
    volume_docker_opts opts;
    assert_true(volume_enforced(&loop_env));
    assert_string_equal(volume_backend_name(&loop_env), "loop");
    assert_int_equal(volume_create(&loop_env, "enf", 64 * MiB, &opts, &e), 0);
    vol_path("enf", "", mnt, sizeof(mnt));
    vol_path("enf", ".img", image, sizeof(image));
    /* Docker binds the mountpoint. */
    assert_int_equal(opts.n, 3);
    assert_string_equal(volume_docker_opt(&opts, "type"), "none");
    assert_string_equal(volume_docker_opt(&opts, "o"), "bind");
    assert_string_equal(volume_docker_opt(&opts, "device"), mnt);
    assert_null(volume_docker_opt(&opts, "size"));

    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(loops_on(image, NULL), 1);
    assert_int_equal(file_size(image), 64 * MiB);
    uint64_t size = fs_size(mnt);
    assert_true(size > 54 * MiB && size <= 64 * MiB); /* minus journal and inodes */
    uint64_t used = 0, reported = 0;
    assert_int_equal(volume_usage(&loop_env, "enf", NULL, &used, &reported, &e), 0);
    assert_int_equal(reported, size);
    assert_true(used < 1 * MiB);

    /* Writing past the size fails with "no space left", and the image
     * never takes more than its size from the host. */
    snprintf(path, sizeof(path), "%s/big", mnt);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    uint64_t written = write_random(fd, 100 * MiB, 1);
    int saved = errno;
    if (written == 100 * MiB)
        fail_msg("wrote 100MB into a 64MB volume");
    assert_int_equal(saved, ENOSPC);
    fsync(fd);
    close(fd);
    assert_true(written > 50 * MiB);
    assert_true(file_allocated(image) <= 64 * MiB);
    assert_int_equal(volume_usage(&loop_env, "enf", NULL, &used, &reported, &e), 0);
    assert_true(used > 50 * MiB && used <= reported);

    /* The same name again is refused, and nothing changes. */
    assert_int_equal(volume_create(&loop_env, "enf", 64 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_EXISTS);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(volume_destroy(&loop_env, "enf", &e), 0);
}

/* Grow while a container uses the volume: a second mount of the filesystem
 * (as a container's bind is) and a file held open for writing. With
 * CAP_SYS_RESOURCE it grows online and both mounts see the new size; the
 * machine gpubox is developed on lacks that capability (its bounding set
 * drops it), and there the grow is refused, changing nothing. */
static void test_loop_grows_in_use(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX];
    gb_err e = GB_ERR_INIT;
    create_loop("grow", 64 * MiB, mnt);
    vol_path("grow", ".img", image, sizeof(image));
    make_file(mnt, "a", 20 * MiB, 2);
    uint64_t sum = checksum(mnt, "a");
    snprintf(bind_dirs[0], sizeof(bind_dirs[0]), "%s/container-view", data_dir);
    assert_int_equal(mkdir(bind_dirs[0], 0755), 0);
    assert_int_equal(mount(mnt, bind_dirs[0], NULL, MS_BIND, NULL), 0);
    uint64_t before = fs_size(bind_dirs[0]);
    char path[VOLUME_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/b", bind_dirs[0]);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write_random(fd, 10 * MiB, 3), 10 * MiB);

    if (!volume_grows_online(&loop_env, "grow")) {
        print_message("no CAP_SYS_RESOURCE here: checking the refusal, not an online grow\n");
        assert_int_equal(volume_resize(&loop_env, "grow", NULL, 128 * MiB, true, &e), -1);
        assert_int_equal(e.code, ERR_STATE_CONFLICT);
        assert_non_null(strstr(e.msg, "needs CAP_SYS_RESOURCE"));
        assert_non_null(strstr(e.msg, "stop or pause what uses it first"));
        assert_int_equal(file_size(image), 64 * MiB);
        assert_int_equal(fs_size(bind_dirs[0]), before);
    } else {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (volume_resize(&loop_env, "grow", NULL, 128 * MiB, true, &e) < 0)
            fail_msg("grow: %s", e.msg);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        print_message("grow 64MB -> 128MB online: %.3f s\n",
                      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        /* Both mounts show the new size at once; nothing was unmounted. */
        assert_int_equal(fs_size(mnt), fs_size(bind_dirs[0]));
        assert_true(fs_size(bind_dirs[0]) > before + 60 * MiB);
        assert_int_equal(file_size(image), 128 * MiB);
        /* The held file goes on past the old size: 20 + 10 + 60 > 64 MB. */
        assert_int_equal(write_random(fd, 60 * MiB, 4), 60 * MiB);
    }
    assert_int_equal(fsync(fd), 0);
    close(fd);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(checksum(mnt, "a"), sum);
    assert_int_equal(umount2(bind_dirs[0], 0), 0);
    bind_dirs[0][0] = '\0';
    assert_int_equal(volume_destroy(&loop_env, "grow", &e), 0);
}

/* Grow a detached volume without CAP_SYS_RESOURCE (dropped here if the
 * process has it): offline, data intact, the new size mounted. */
static void test_loop_grows_detached(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX];
    gb_err e = GB_ERR_INIT;
    create_loop("grow", 64 * MiB, mnt);
    vol_path("grow", ".img", image, sizeof(image));
    make_file(mnt, "a", 20 * MiB, 9);
    uint64_t sum = checksum(mnt, "a"), before = fs_size(mnt);
    bool had = set_cap(CAP_SYS_RESOURCE, false);
    assert_false(volume_grows_online(&loop_env, "grow"));
    int rc = volume_resize(&loop_env, "grow", NULL, 128 * MiB, false, &e);
    if (had)
        set_cap(CAP_SYS_RESOURCE, true);
    if (rc < 0)
        fail_msg("offline grow: %s", e.msg);
    assert_int_equal(file_size(image), 128 * MiB);
    assert_true(fs_size(mnt) > before + 60 * MiB && fs_size(mnt) <= 128 * MiB);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(loops_on(image, NULL), 1);
    assert_int_equal(checksum(mnt, "a"), sum);
    make_file(mnt, "b", 60 * MiB, 10); /* room past the old size */
    assert_int_equal(volume_destroy(&loop_env, "grow", &e), 0);
}

static void test_loop_shrinks_safely(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX];
    gb_err e = GB_ERR_INIT;
    create_loop("shr", 64 * MiB, mnt);
    vol_path("shr", ".img", image, sizeof(image));
    make_file(mnt, "a", 20 * MiB, 5);
    uint64_t sum = checksum(mnt, "a");

    /* In use: refused, with what to do, and nothing changed. */
    assert_int_equal(volume_resize(&loop_env, "shr", NULL, 48 * MiB, true, &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "must be detached"));
    assert_int_equal(file_size(image), 64 * MiB);

    /* Detached and the data fits: smaller, data intact. */
    if (volume_resize(&loop_env, "shr", NULL, 48 * MiB, false, &e) < 0)
        fail_msg("shrink: %s", e.msg);
    assert_int_equal(file_size(image), 48 * MiB);
    uint64_t size = fs_size(mnt);
    assert_true(size > 40 * MiB && size <= 48 * MiB);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(loops_on(image, NULL), 1);
    assert_int_equal(checksum(mnt, "a"), sum);

    /* Below the data: refused naming both sizes; nothing changed. */
    assert_int_equal(volume_resize(&loop_env, "shr", NULL, 16 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_USED_TOO_LARGE);
    assert_non_null(strstr(e.msg, "holds 20"));
    assert_non_null(strstr(e.msg, "16MB"));
    assert_int_equal(file_size(image), 48 * MiB);
    assert_int_equal(fs_size(mnt), size);
    assert_int_equal(mount_count(mnt), 1);

    /* The caller said "not in use", but the filesystem is still mounted
     * elsewhere (a container the caller missed): refused after the
     * unmount, mounted back, nothing changed. */
    snprintf(bind_dirs[1], sizeof(bind_dirs[1]), "%s/other-ns", data_dir);
    assert_int_equal(mkdir(bind_dirs[1], 0755), 0);
    assert_int_equal(mount(mnt, bind_dirs[1], NULL, MS_BIND, NULL), 0);
    assert_int_equal(volume_resize(&loop_env, "shr", NULL, 40 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "still in use"));
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(file_size(image), 48 * MiB);
    assert_int_equal(fs_size(mnt), size);
    assert_int_equal(umount2(bind_dirs[1], 0), 0);
    bind_dirs[1][0] = '\0';
    assert_int_equal(checksum(mnt, "a"), sum);
    assert_int_equal(volume_destroy(&loop_env, "shr", &e), 0);
}

static void test_loop_restart_and_destroy(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], dev[64];
    gb_err e = GB_ERR_INIT;
    create_loop("rst", 32 * MiB, mnt);
    vol_path("rst", ".img", image, sizeof(image));
    make_file(mnt, "a", 5 * MiB, 6);
    uint64_t sum = checksum(mnt, "a");

    /* A daemon restart after a reboot: nothing mounted, no device. */
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image)); /* autoclear: the unmount freed it */
    /* Until it is attached, nothing can land in the bare mountpoint (a
     * container binding it now would otherwise fill the host's disk). */
    char stray[VOLUME_PATH_MAX + 16];
    snprintf(stray, sizeof(stray), "%s/stray", mnt);
    assert_int_equal(open(stray, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EPERM);
    uint64_t used = 0, size = 0;
    assert_int_equal(volume_usage(&loop_env, "rst", NULL, &used, &size, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_INFO_FAILED);
    assert_int_equal(volume_attach(&loop_env, "rst", &e), 0);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(checksum(mnt, "a"), sum);
    /* Idempotent: no second device, no second mount. */
    int index = -1, again = -1;
    assert_int_equal(loops_on(image, &index), 1);
    assert_int_equal(volume_attach(&loop_env, "rst", &e), 0);
    assert_int_equal(loops_on(image, &again), 1);
    assert_int_equal(again, index);
    assert_int_equal(mount_count(mnt), 1);

    /* Bound by hand without autoclear, not mounted: attach uses that
     * device, and destroy still unbinds it. */
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image));
    assert_int_equal(run("losetup", "--find", image, NULL), 0);
    assert_int_equal(loops_on(image, &index), 1);
    assert_int_equal(volume_attach(&loop_env, "rst", &e), 0);
    assert_int_equal(loops_on(image, &again), 1);
    assert_int_equal(again, index);
    assert_int_equal(checksum(mnt, "a"), sum);

    assert_int_equal(volume_destroy(&loop_env, "rst", &e), 0);
    assert_int_equal(mount_count(mnt), 0);
    assert_int_equal(loops_on(image, NULL), 0);
    assert_int_equal(access(image, F_OK), -1);
    assert_int_equal(access(mnt, F_OK), -1);
    snprintf(dev, sizeof(dev), "/sys/block/loop%d/loop/backing_file", index);
    assert_int_equal(access(dev, F_OK), -1); /* the device itself is unbound */
    /* Idempotent; and the volume is gone for good. */
    assert_int_equal(volume_destroy(&loop_env, "rst", &e), 0);
    assert_int_equal(volume_attach(&loop_env, "rst", &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_int_equal(volume_resize(&loop_env, "rst", NULL, 64 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

/* A tool from a crashed daemon's resize (e2fsck, resize2fs) still holds the
 * device exclusively: attach must not mount under it. */
static void test_loop_busy_device(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], dev[32];
    gb_err e = GB_ERR_INIT;
    create_loop("busy", 32 * MiB, mnt);
    vol_path("busy", ".img", image, sizeof(image));
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image));
    int index = -1;
    assert_int_equal(run("losetup", "--find", image, NULL), 0);
    assert_int_equal(loops_on(image, &index), 1);
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    int fd = open(dev, O_RDWR | O_EXCL);
    assert_true(fd >= 0);
    assert_int_equal(volume_attach(&loop_env, "busy", &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "busy"));
    assert_int_equal(mount_count(mnt), 0);
    close(fd);
    assert_int_equal(volume_attach(&loop_env, "busy", &e), 0);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(volume_destroy(&loop_env, "busy", &e), 0);
    assert_int_equal(loops_on(image, NULL), 0);
}

/* A resize killed part-way, played by doing its first steps by hand: the
 * same resize run again finishes it, data intact. */
static void test_loop_resize_resumes(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], dev[32];
    gb_err e = GB_ERR_INIT;
    create_loop("crash", 64 * MiB, mnt);
    vol_path("crash", ".img", image, sizeof(image));
    make_file(mnt, "a", 10 * MiB, 7);
    uint64_t sum = checksum(mnt, "a"), size = fs_size(mnt);

    /* Grow died after extending the file: works at the old size. */
    assert_int_equal(truncate(image, 128 * MiB), 0);
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image));
    assert_int_equal(volume_attach(&loop_env, "crash", &e), 0);
    assert_int_equal(fs_size(mnt), size);
    assert_int_equal(volume_resize(&loop_env, "crash", NULL, 128 * MiB, false, &e), 0);
    assert_true(fs_size(mnt) > size + 60 * MiB);
    assert_int_equal(checksum(mnt, "a"), sum);

    /* Shrink died after resize2fs, before the truncate. */
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image));
    int index = -1;
    assert_int_equal(run("losetup", "--find", image, NULL), 0);
    assert_int_equal(loops_on(image, &index), 1);
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    assert_true(run("e2fsck", "-f", "-y", dev) <= 1);
    assert_int_equal(run("resize2fs", dev, "40M", NULL), 0);
    assert_int_equal(run("losetup", "-d", dev, NULL), 0);
    assert_true(loops_gone(image));
    assert_int_equal(file_size(image), 128 * MiB);
    assert_int_equal(volume_attach(&loop_env, "crash", &e), 0);
    assert_true(fs_size(mnt) <= 40 * MiB);
    if (volume_resize(&loop_env, "crash", NULL, 40 * MiB, false, &e) < 0)
        fail_msg("resume shrink: %s", e.msg);
    assert_int_equal(file_size(image), 40 * MiB);
    assert_int_equal(checksum(mnt, "a"), sum);
    assert_int_equal(volume_destroy(&loop_env, "crash", &e), 0);
}

struct par_job {
    const char *name;
    int rc;
    gb_err err;
};

static void *par_create(void *arg)
{
    struct par_job *job = arg;
    volume_docker_opts opts;
    job->rc = volume_create(&loop_env, job->name, 32 * MiB, &opts, &job->err);
    return NULL;
}

/* Volumes made at the same moment race for the same free loop device;
 * each still ends up on its own. */
static void test_loop_parallel_creates(void **state)
{
    (void)state;
    struct par_job jobs[3] = {{.name = "par0"}, {.name = "par1"}, {.name = "par2"}};
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, par_create, &jobs[i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    int devices[3];
    for (int i = 0; i < 3; i++) {
        if (jobs[i].rc < 0)
            fail_msg("create %s: %s", jobs[i].name, jobs[i].err.msg);
        char image[VOLUME_PATH_MAX], mnt[VOLUME_PATH_MAX];
        vol_path(jobs[i].name, ".img", image, sizeof(image));
        vol_path(jobs[i].name, "", mnt, sizeof(mnt));
        assert_int_equal(loops_on(image, &devices[i]), 1);
        assert_int_equal(mount_count(mnt), 1);
    }
    assert_true(devices[0] != devices[1] && devices[1] != devices[2] && devices[0] != devices[2]);
    gb_err e = GB_ERR_INIT;
    for (int i = 0; i < 3; i++)
        assert_int_equal(volume_destroy(&loop_env, jobs[i].name, &e), 0);
}

static void test_sizes_and_names(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    volume_docker_opts opts;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX];
    assert_int_equal(volume_create(&loop_env, "tiny", 8 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "volume size 8MB is too small: loop volumes are at least 16MB");
    assert_int_equal(volume_create(&loop_env, "huge", 2048ULL * 1024 * 1024 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "at most 1PB"));
    /* Sparse, but never more than the host could hold right now. */
    assert_int_equal(volume_create(&loop_env, "huge", 1024ULL * 1024 * 1024 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "available"));
    vol_path("huge", ".img", image, sizeof(image));
    assert_int_equal(access(image, F_OK), -1);

    assert_int_equal(volume_create(&loop_env, "a-b", 64 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_HAS_DASH);
    assert_int_equal(volume_create(&loop_env, "", 64 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_EMPTY);
    assert_int_equal(volume_resize(&loop_env, "/etc", NULL, 64 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_NAME_SLASH);
    assert_int_equal(volume_destroy(&loop_env, "..", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_NAME);

    /* Sizes are whole 4 KiB blocks. */
    create_loop("odd", 64 * MiB + 123, mnt);
    vol_path("odd", ".img", image, sizeof(image));
    assert_int_equal(file_size(image), 64 * MiB);
    assert_int_equal(volume_destroy(&loop_env, "odd", &e), 0);

    volume_env env;
    assert_int_equal(volume_env_open(&env, "zfs", data_dir, NULL, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "unknown volume backend 'zfs'; known: loop, xfsquota, plain");

    /* The filesystem choice: ext4 unless set; only loop has one. */
    assert_string_equal(volume_fs(&loop_env), "ext4");
    assert_null(volume_fs(&plain_env));
    assert_int_equal(volume_env_set_fs(&loop_env, "btrfs", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "unknown volume filesystem 'btrfs'; known: ext4, xfs");
    assert_string_equal(volume_fs(&loop_env), "ext4");
    assert_int_equal(volume_env_open(&env, "plain", data_dir, NULL, &e), 0);
    assert_int_equal(volume_env_set_fs(&env, "ext4", &e), 0);
    assert_int_equal(volume_env_set_fs(&env, "xfs", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "--volume-fs xfs needs --volume-backend loop (the plain backend "
                               "makes no filesystem)");
}

/* ---- plain and xfsquota -------------------------------------------------- */

static void test_plain_backend(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    volume_docker_opts opts;
    char dir[VOLUME_PATH_MAX], path[VOLUME_PATH_MAX + 64], lnk[VOLUME_PATH_MAX + 64];
    assert_false(volume_enforced(&plain_env));
    assert_int_equal(volume_create(&plain_env, "pl", 1 * MiB, &opts, &e), 0);
    vol_path("pl", "", dir, sizeof(dir));
    assert_string_equal(volume_docker_opt(&opts, "type"), "none");
    assert_string_equal(volume_docker_opt(&opts, "o"), "bind");
    assert_string_equal(volume_docker_opt(&opts, "device"), dir);
    assert_int_equal(volume_create(&plain_env, "pl", 1 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_EXISTS);
    assert_int_equal(volume_attach(&plain_env, "pl", &e), 0);

    /* 3MB in a nested file, a hard link to it (counted once), a symlink to
     * /usr (not followed), a sparse file (its holes cost nothing). */
    snprintf(path, sizeof(path), "%s/sub", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    make_file(path, "data", 3 * MiB, 8);
    snprintf(path, sizeof(path), "%s/sub/data", dir);
    snprintf(lnk, sizeof(lnk), "%s/hardlink", dir);
    assert_int_equal(link(path, lnk), 0);
    snprintf(lnk, sizeof(lnk), "%s/usr", dir);
    assert_int_equal(symlink("/usr", lnk), 0);
    snprintf(path, sizeof(path), "%s/sparse", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 1024 * MiB), 0);
    close(fd);

    uint64_t used = 0, size = 1;
    assert_int_equal(volume_usage(&plain_env, "pl", NULL, &used, &size, &e), 0);
    assert_int_equal(size, 0); /* not enforced */
    assert_true(used >= 3 * MiB && used < 3 * MiB + 64 * 1024);

    assert_int_equal(volume_resize(&plain_env, "pl", NULL, 2 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_USED_TOO_LARGE);
    assert_non_null(strstr(e.msg, "holds 3"));
    assert_int_equal(volume_resize(&plain_env, "pl", NULL, 10 * MiB, true, &e), 0);

    assert_int_equal(volume_destroy(&plain_env, "pl", &e), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(access("/usr/bin", F_OK), 0);
    assert_int_equal(volume_destroy(&plain_env, "pl", &e), 0);
    assert_int_equal(volume_attach(&plain_env, "pl", &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_int_equal(volume_usage(&plain_env, "pl", NULL, &used, &size, &e), -1);
    assert_int_equal(e.code, ERR_NOT_FOUND);
}

/* This host has no XFS project quotas: the backend refuses at start-up,
 * saying why and what to use. (The rest of it cannot run here.) */
static void test_xfsquota_refuses_here(void **state)
{
    (void)state;
    volume_env env;
    gb_err e = GB_ERR_INIT;
    /* /proc is never XFS, on any host. */
    assert_int_equal(volume_env_open(&env, "xfsquota", data_dir, "/proc", &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "the xfsquota volume backend needs the Docker root on XFS mounted "
                               "with prjquota; /proc is on a filesystem other than XFS; use "
                               "--volume-backend loop");
    /* This host's Docker root, and its data dirs, are on ext4. */
    struct statfs fs;
    char want[512];
    const char *roots[] = {"/var/lib/docker", data_dir};
    for (size_t i = 0; i < 2; i++) {
        if (statfs(roots[i], &fs) < 0 || fs.f_type != 0xEF53)
            continue;
        assert_int_equal(volume_env_open(&env, "xfsquota", data_dir, roots[i], &e), -1);
        snprintf(want, sizeof(want),
                 "the xfsquota volume backend needs the Docker root on XFS mounted with "
                 "prjquota; %s is on ext4; use --volume-backend loop",
                 roots[i]);
        assert_string_equal(e.msg, want);
    }
    /* Without a Docker root given, /var/lib/docker is the one checked. */
    assert_int_equal(volume_env_open(&env, "xfsquota", data_dir, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "/var/lib/docker"));
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_volume needs root (loop devices, mount)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_create_enforces_size),
        cmocka_unit_test(test_loop_grows_in_use),
        cmocka_unit_test(test_loop_grows_detached),
        cmocka_unit_test(test_loop_shrinks_safely),
        cmocka_unit_test(test_loop_restart_and_destroy),
        cmocka_unit_test(test_loop_busy_device),
        cmocka_unit_test(test_loop_resize_resumes),
        cmocka_unit_test(test_loop_parallel_creates),
        cmocka_unit_test(test_sizes_and_names),
        cmocka_unit_test(test_plain_backend),
        cmocka_unit_test(test_xfsquota_refuses_here),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
