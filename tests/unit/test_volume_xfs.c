/*
 * test_volume_xfs.c - XFS loop volumes (--volume-fs xfs) against the real
 * kernel, xfsprogs and coreutils (the tests run as root): made at 300MB or
 * more, grown while a second mount (as a container's bind) writes to them,
 * shrunk by copying with owners, modes, xattrs, hard links and holes kept,
 * an interrupted shrink settled, a failed grow put back. A daemon started
 * with --volume-fs ext4 keeps treating them as XFS.
 *
 * As in test_volume.c, every check reads the kernel's own view (mountinfo,
 * sysfs, statvfs, stat). Volumes live in a fresh data dir under /var/tmp;
 * the group teardown destroys whatever a failed test left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <time.h>

#include "test_volume_util.h"

#define XFS_MAGIC 0x58465342

static char data_dir[64];
static volume_env xfs_env, ext4_env; /* one data dir, two daemons' settings */
static const char *const names[] = {"xg", "xs", "xs4", "xk", "xr", "xf"};
static char view[VOLUME_PATH_MAX]; /* a second mount, as a container's bind */

static void vol_path(const char *name, const char *suffix, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s%s", xfs_env.volumes_dir, name, suffix);
    assert_true(n > 0 && (size_t)n < len);
}

static void create_xfs(const char *name, uint64_t size, char *mnt, char *image)
{
    volume_docker_opts opts;
    gb_err e = GB_ERR_INIT;
    if (volume_create(&xfs_env, name, size, &opts, &e) < 0)
        fail_msg("create %s: %s", name, e.msg);
    vol_path(name, "", mnt, VOLUME_PATH_MAX);
    vol_path(name, ".img", image, VOLUME_PATH_MAX);
    assert_string_equal(volume_docker_opt(&opts, "device"), mnt);
    struct statfs fs;
    assert_int_equal(statfs(mnt, &fs), 0);
    assert_int_equal(fs.f_type, XFS_MAGIC);
}

static void view_mount(const char *mnt)
{
    snprintf(view, sizeof(view), "%s/container-view", data_dir);
    assert_true(mkdir(view, 0755) == 0 || errno == EEXIST);
    assert_int_equal(mount(mnt, view, NULL, MS_BIND, NULL), 0);
}

static void view_umount(void)
{
    assert_int_equal(umount2(view, 0), 0);
    view[0] = '\0';
}

static bool read_only(const char *dir)
{
    struct statvfs v;
    assert_int_equal(statvfs(dir, &v), 0);
    return v.f_flag & ST_RDONLY;
}

/* Nothing of a shrink's copy is left: no file, no mountpoint, no device. */
static void assert_no_copy(const char *name)
{
    char copy[VOLUME_PATH_MAX], copy_mnt[VOLUME_PATH_MAX];
    vol_path(name, ".img-shrink", copy, sizeof(copy));
    vol_path(name, "-shrink", copy_mnt, sizeof(copy_mnt));
    assert_int_equal(access(copy, F_OK), -1);
    assert_int_equal(access(copy_mnt, F_OK), -1);
    assert_int_equal(mount_count(copy_mnt), 0);
    assert_true(loops_gone(copy));
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(data_dir, sizeof(data_dir), "/var/tmp/gpubox-volxfs-XXXXXX");
    if (!mkdtemp(data_dir))
        return -1;
    gb_err e = GB_ERR_INIT;
    if (volume_env_open(&xfs_env, "loop", data_dir, NULL, &e) < 0 ||
        volume_env_set_fs(&xfs_env, "xfs", &e) < 0 ||
        volume_env_open(&ext4_env, "loop", data_dir, NULL, &e) < 0) {
        fprintf(stderr, "volume_env_open: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (view[0])
        umount2(view, MNT_DETACH);
    volume_test_cleanup(&xfs_env, names, sizeof(names) / sizeof(names[0]), data_dir);
    return 0;
}

/* Grow 300MB -> 400MB while a second mount holds a file open for writing:
 * both mounts see the new size at once, the held file goes on past the old
 * size and stops at the new one. Asked through a daemon set to ext4: the
 * volume is XFS whatever new volumes get. */
static void test_xfs_grows_in_use(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], path[VOLUME_PATH_MAX + 16];
    gb_err e = GB_ERR_INIT;
    create_xfs("xg", 300 * MiB, mnt, image);
    assert_int_equal(file_size(image), 300 * MiB);
    uint64_t before = fs_size(mnt);
    assert_true(before > 200 * MiB && before < 300 * MiB); /* XFS's log is 64MB */
    assert_true(volume_grows_online(&xfs_env, NULL));
    assert_true(volume_grows_online(&ext4_env, "xg"));

    make_file(mnt, "a", 100 * MiB, 1);
    uint64_t sum = checksum(mnt, "a");
    view_mount(mnt);
    snprintf(path, sizeof(path), "%s/b", view);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write_random(fd, 50 * MiB, 2), 50 * MiB);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (volume_resize(&ext4_env, "xg", NULL, 400 * MiB, true, &e) < 0)
        fail_msg("grow: %s", e.msg);
    print_message("xfs grow 300MB -> 400MB in use: %.3f s\n", seconds_since(&t0));
    assert_int_equal(file_size(image), 400 * MiB);
    assert_int_equal(fs_size(view), fs_size(mnt));
    assert_int_equal(fs_size(mnt), before + 100 * MiB);
    /* Past the old size (100 + 200 > 236MB usable before) ... */
    assert_int_equal(write_random(fd, 150 * MiB, 3), 150 * MiB);
    /* ... and not past the new one. */
    uint64_t more = write_random(fd, 100 * MiB, 4);
    int saved = errno;
    assert_true(more < 100 * MiB);
    assert_int_equal(saved, ENOSPC);
    assert_int_equal(fsync(fd), 0);
    close(fd);
    view_umount();
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(checksum(mnt, "a"), sum);

    /* Full: a shrink the data cannot fit in is refused first, whatever the
     * use; with room, in use is refused, saying why. Nothing changed. */
    assert_int_equal(volume_resize(&xfs_env, "xg", NULL, 300 * MiB, true, &e), -1);
    assert_int_equal(e.code, ERR_VOLUME_USED_TOO_LARGE);
    snprintf(path, sizeof(path), "%s/b", mnt);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(volume_resize(&xfs_env, "xg", NULL, 300 * MiB, true, &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "XFS cannot shrink"));
    assert_int_equal(file_size(image), 400 * MiB);
    assert_int_equal(fs_size(mnt), before + 100 * MiB);
    assert_int_equal(volume_destroy(&xfs_env, "xg", &e), 0);
    assert_int_equal(access(image, F_OK), -1);
}

static void test_xfs_sizes(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    volume_docker_opts opts;
    char image[VOLUME_PATH_MAX], mnt[VOLUME_PATH_MAX], tmp[VOLUME_PATH_MAX];
    vol_path("xs", ".img", image, sizeof(image));
    vol_path("xs", ".img.tmp", tmp, sizeof(tmp));
    assert_int_equal(volume_create(&xfs_env, "xs", 200 * MiB, &opts, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "volume size 200MB is too small: xfs loop volumes are at least "
                               "300MB (mkfs.xfs makes none smaller); ask for 300MB or more, or "
                               "make the volume ext4 (--volume-fs ext4)");
    assert_int_equal(access(image, F_OK), -1);
    assert_int_equal(access(tmp, F_OK), -1);

    /* ext4 volumes in the same place keep ext4's minimum (and its rules). */
    assert_int_equal(volume_create(&ext4_env, "xs4", 200 * MiB, &opts, &e), 0);
    assert_int_equal(volume_grows_online(&xfs_env, "xs4"), volume_grows_online(&ext4_env, NULL));
    assert_int_equal(volume_destroy(&xfs_env, "xs4", &e), 0);

    /* An XFS volume never goes under 300MB, however it is asked. */
    create_xfs("xs", 300 * MiB, mnt, image);
    assert_int_equal(volume_resize(&ext4_env, "xs", NULL, 299 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_string_equal(e.msg, "volume size 299MB is too small: xfs loop volumes are at least "
                               "300MB (mkfs.xfs makes none smaller); ask for 300MB or more");
    assert_int_equal(file_size(image), 300 * MiB);
    assert_int_equal(volume_destroy(&xfs_env, "xs", &e), 0);
}

/* A tree with what a copy could lose: owners, modes, an xattr, a hard
 * link, a symlink, a hole, a fifo, the root's own mode. */
static void make_tree(const char *mnt, uint64_t *sum)
{
    char path[VOLUME_PATH_MAX + 32], other[VOLUME_PATH_MAX + 32];
    assert_int_equal(chmod(mnt, 01777), 0);
    snprintf(path, sizeof(path), "%s/d", mnt);
    assert_int_equal(mkdir(path, 0750), 0);
    assert_int_equal(chown(path, 123, 456), 0);
    make_file(path, "f", 60 * MiB, 5);
    *sum = checksum(path, "f");
    snprintf(path, sizeof(path), "%s/d/f", mnt);
    assert_int_equal(chown(path, 1000, 1000), 0);
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(setxattr(path, "user.k", "v", 1, 0), 0);
    snprintf(other, sizeof(other), "%s/d/g", mnt);
    assert_int_equal(link(path, other), 0);
    snprintf(other, sizeof(other), "%s/s", mnt);
    assert_int_equal(symlink("d/f", other), 0);
    snprintf(path, sizeof(path), "%s/p", mnt);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(path, sizeof(path), "%s/sparse", mnt);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "end", 3, 1024 * MiB - 3), 3);
    close(fd);
}

static void assert_tree(const char *mnt, uint64_t sum)
{
    char path[VOLUME_PATH_MAX + 32], target[64] = "", value[8] = "";
    struct stat st, st2;
    assert_int_equal(stat(mnt, &st), 0);
    assert_int_equal(st.st_mode & 07777, 01777);
    snprintf(path, sizeof(path), "%s/d", mnt);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_mode == (S_IFDIR | 0750) && st.st_uid == 123 && st.st_gid == 456);
    snprintf(path, sizeof(path), "%s/d", mnt);
    assert_int_equal(checksum(path, "f"), sum);
    snprintf(path, sizeof(path), "%s/d/f", mnt);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_mode == (S_IFREG | 0640) && st.st_uid == 1000 && st.st_nlink == 2);
    assert_int_equal(getxattr(path, "user.k", value, sizeof(value)), 1);
    assert_memory_equal(value, "v", 1);
    snprintf(path, sizeof(path), "%s/d/g", mnt);
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st2.st_ino, st.st_ino);
    snprintf(path, sizeof(path), "%s/s", mnt);
    assert_int_equal(readlink(path, target, sizeof(target) - 1), 3);
    assert_string_equal(target, "d/f");
    snprintf(path, sizeof(path), "%s/p", mnt);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    snprintf(path, sizeof(path), "%s/sparse", mnt);
    assert_int_equal(file_size(path), 1024 * MiB);
    assert_true(file_allocated(path) < 1 * MiB);
}

static void test_xfs_shrinks_by_copy(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX];
    gb_err e = GB_ERR_INIT;
    uint64_t sum = 0;
    create_xfs("xk", 600 * MiB, mnt, image);
    make_tree(mnt, &sum);

    /* The caller says "not in use", but a mount it did not know about
     * has it: refused after the copy was made; the copy goes, the volume
     * is mounted writable again as it was. */
    view_mount(mnt);
    assert_int_equal(volume_resize(&xfs_env, "xk", NULL, 300 * MiB, false, &e), -1);
    assert_int_equal(e.code, ERR_STATE_CONFLICT);
    assert_non_null(strstr(e.msg, "still in use"));
    view_umount();
    assert_no_copy("xk");
    assert_int_equal(file_size(image), 600 * MiB);
    assert_int_equal(mount_count(mnt), 1);
    assert_false(read_only(mnt));
    assert_tree(mnt, sum);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (volume_resize(&xfs_env, "xk", NULL, 300 * MiB, false, &e) < 0)
        fail_msg("shrink: %s", e.msg);
    print_message("xfs shrink 600MB -> 300MB holding 60MB, by copy: %.3f s\n", seconds_since(&t0));
    assert_int_equal(file_size(image), 300 * MiB);
    assert_true(fs_size(mnt) < 300 * MiB);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(loops_on(image, NULL), 1);
    assert_false(read_only(mnt));
    assert_no_copy("xk");
    assert_tree(mnt, sum);
    make_file(mnt, "after", 1 * MiB, 6); /* writable */
    assert_int_equal(volume_destroy(&xfs_env, "xk", &e), 0);
}

/* A shrink killed part-way, played by hand. Before the swap: the copy
 * half made and mounted, the volume left read-only; attach removes the
 * copy and makes the volume writable, and the resize run again does it.
 * After the swap: the new image under the real name, not mounted; the
 * same resize run again only attaches it. */
static void test_xfs_shrink_resumes(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], copy[VOLUME_PATH_MAX];
    char copy_mnt[VOLUME_PATH_MAX], dev[32];
    gb_err e = GB_ERR_INIT;
    create_xfs("xr", 400 * MiB, mnt, image);
    make_file(mnt, "a", 20 * MiB, 7);
    uint64_t sum = checksum(mnt, "a");

    vol_path("xr", ".img-shrink", copy, sizeof(copy));
    vol_path("xr", "-shrink", copy_mnt, sizeof(copy_mnt));
    int fd = open(copy, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 300 * MiB), 0);
    close(fd);
    assert_int_equal(run("mkfs.xfs", "-q", "-K", copy), 0);
    int index = -1;
    assert_int_equal(run("losetup", "--find", copy, NULL), 0);
    assert_int_equal(loops_on(copy, &index), 1);
    snprintf(dev, sizeof(dev), "/dev/loop%d", index);
    assert_int_equal(mkdir(copy_mnt, 0755), 0);
    assert_int_equal(mount(dev, copy_mnt, "xfs", 0, NULL), 0);
    make_file(copy_mnt, "a", 5 * MiB, 8);
    assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
                     0);
    assert_true(read_only(mnt));

    if (volume_attach(&xfs_env, "xr", &e) < 0)
        fail_msg("attach after a crash mid-copy: %s", e.msg);
    assert_no_copy("xr");
    assert_false(read_only(mnt));
    assert_int_equal(file_size(image), 400 * MiB);
    assert_int_equal(checksum(mnt, "a"), sum);
    if (volume_resize(&xfs_env, "xr", NULL, 300 * MiB, false, &e) < 0)
        fail_msg("shrink run again: %s", e.msg);
    assert_int_equal(file_size(image), 300 * MiB);

    /* After the swap, before the attach. */
    assert_int_equal(umount2(mnt, 0), 0);
    assert_true(loops_gone(image));
    if (volume_resize(&xfs_env, "xr", NULL, 300 * MiB, false, &e) < 0)
        fail_msg("shrink run again after the swap: %s", e.msg);
    assert_int_equal(mount_count(mnt), 1);
    assert_int_equal(file_size(image), 300 * MiB);
    assert_int_equal(checksum(mnt, "a"), sum);
    assert_int_equal(volume_destroy(&xfs_env, "xr", &e), 0);
}

/* A grow whose device step fails (CAP_SYS_ADMIN dropped for a moment, so
 * LOOP_SET_CAPACITY is refused): the image goes back to its size, the
 * device and the filesystem never changed, and the error says so. */
static void test_xfs_failed_grow_puts_back(void **state)
{
    (void)state;
    char mnt[VOLUME_PATH_MAX], image[VOLUME_PATH_MAX], sys[64], buf[32] = "";
    gb_err e = GB_ERR_INIT;
    create_xfs("xf", 300 * MiB, mnt, image);
    make_file(mnt, "a", 10 * MiB, 9);
    uint64_t sum = checksum(mnt, "a"), before = fs_size(mnt);
    int index = -1;
    assert_int_equal(loops_on(image, &index), 1);

    assert_true(set_cap(CAP_SYS_ADMIN, false));
    int rc = volume_resize(&xfs_env, "xf", NULL, 400 * MiB, true, &e);
    set_cap(CAP_SYS_ADMIN, true);
    assert_int_equal(rc, -1);
    assert_int_equal(e.code, ERR_VOLUME_PATCH_FAILED);
    assert_non_null(strstr(e.msg, "cannot refresh the size"));
    assert_int_equal(file_size(image), 300 * MiB);
    snprintf(sys, sizeof(sys), "/sys/block/loop%d/size", index);
    FILE *f = fopen(sys, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_int_equal(strtoull(buf, NULL, 10) * 512, 300 * MiB);
    assert_int_equal(fs_size(mnt), before);
    assert_int_equal(checksum(mnt, "a"), sum);

    if (volume_resize(&xfs_env, "xf", NULL, 400 * MiB, true, &e) < 0)
        fail_msg("grow again: %s", e.msg);
    assert_int_equal(fs_size(mnt), before + 100 * MiB);
    assert_int_equal(volume_destroy(&xfs_env, "xf", &e), 0);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_volume_xfs needs root (loop devices, mount)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xfs_grows_in_use),          cmocka_unit_test(test_xfs_sizes),
        cmocka_unit_test(test_xfs_shrinks_by_copy),       cmocka_unit_test(test_xfs_shrink_resumes),
        cmocka_unit_test(test_xfs_failed_grow_puts_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
