/*
 * test_volume_util.h - what the volume layer's tests (test_volume.c: ext4
 * and the other backends; test_volume_xfs.c: XFS loop volumes) share: the
 * kernel's own view of mounts, loop devices and sizes, files of
 * pseudo-random data with their checksums, tools run by hand, and the
 * process's capabilities.
 */
#ifndef GPUBOX_TESTS_TEST_VOLUME_UTIL_H
#define GPUBOX_TESTS_TEST_VOLUME_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/proc.h"
#include "volume/volume.h"

#define MiB (1024ULL * 1024)

/* How many mounts /proc/self/mountinfo lists at dir. */
static inline int mount_count(const char *dir)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    assert_non_null(f);
    char line[4096], point[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && strcmp(point, dir) == 0)
            n++;
    fclose(f);
    return n;
}

/* Loop devices bound to image (the backing_file of each /sys/block/loop*),
 * the last one's number in *index. */
static inline int loops_on(const char *image, int *index)
{
    DIR *d = opendir("/sys/block");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "loop", 4) != 0)
            continue;
        char path[512], buf[4096] = "";
        snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof(buf), f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
        if (strcmp(buf, image) == 0) {
            n++;
            if (index)
                *index = atoi(e->d_name + 4);
        }
    }
    closedir(d);
    return n;
}

/* Wait (up to 5 s) until no loop device is bound to image. */
static inline bool loops_gone(const char *image)
{
    for (int i = 0; i < 250; i++) {
        if (loops_on(image, NULL) == 0)
            return true;
        usleep(20000);
    }
    return false;
}

static inline uint64_t fs_size(const char *dir)
{
    struct statvfs v;
    assert_int_equal(statvfs(dir, &v), 0);
    return (uint64_t)v.f_blocks * v.f_frsize;
}

static inline uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

static inline uint64_t file_allocated(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_blocks * 512;
}

/* Write bytes of pseudo-random data (by seed) to fd; returns how many were
 * written before an error (errno kept). */
static inline uint64_t write_random(int fd, uint64_t bytes, uint64_t seed)
{
    static uint64_t buf[8192];
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1, done = 0;
    while (done < bytes) {
        for (size_t i = 0; i < 8192; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = x;
        }
        size_t chunk = bytes - done < sizeof(buf) ? (size_t)(bytes - done) : sizeof(buf);
        ssize_t n = write(fd, buf, chunk);
        if (n <= 0)
            return done;
        done += (uint64_t)n;
    }
    return done;
}

static inline void make_file(const char *dir, const char *name, uint64_t bytes, uint64_t seed)
{
    char path[VOLUME_PATH_MAX + 64];
    int len = snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_true(len > 0 && (size_t)len < sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write_random(fd, bytes, seed), bytes);
    assert_int_equal(fsync(fd), 0);
    close(fd);
}

/* FNV-1a of a file's bytes. */
static inline uint64_t checksum(const char *dir, const char *name)
{
    char path[VOLUME_PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t h = 0xcbf29ce484222325ULL;
    unsigned char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 0x100000001b3ULL;
    close(fd);
    return h;
}

/* Run a tool by hand (to play a crash or an operator). */
static inline int run(const char *tool, const char *a1, const char *a2, const char *a3)
{
    char path[512];
    gb_err e = GB_ERR_INIT;
    assert_int_equal(proc_resolve(tool, "/usr/sbin:/sbin", path, sizeof(path), &e), 0);
    char *const argv[] = {path, (char *)a1, (char *)a2, (char *)a3, NULL};
    proc_result r;
    assert_int_equal(proc_run(argv, NULL, 60000, &r, &e), 0);
    int status = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
    proc_result_free(&r);
    return status;
}

/* Raise or drop capability cap in this process's effective set (it stays
 * permitted, so it can come back); false when it is not permitted. */
static inline bool set_cap(int cap, bool on)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct caps[2];
    memset(caps, 0, sizeof(caps));
    assert_int_equal(syscall(SYS_capget, &hdr, caps), 0);
    uint32_t bit = 1U << (cap % 32);
    if (!(caps[cap / 32].permitted & bit))
        return false;
    if (on)
        caps[cap / 32].effective |= bit;
    else
        caps[cap / 32].effective &= ~bit;
    assert_int_equal(syscall(SYS_capset, &hdr, caps), 0);
    return true;
}

/* A group's teardown: destroy each named volume of env; one a failed test
 * still holds (a file open in it) is detached lazily instead, and the
 * kernel finishes (the loop device clears) at exit. Then remove data_dir. */
static inline void volume_test_cleanup(const volume_env *env, const char *const *names, size_t n,
                                       const char *data_dir)
{
    gb_err e = GB_ERR_INIT;
    for (size_t i = 0; i < n; i++) {
        if (volume_destroy(env, names[i], &e) == 0)
            continue;
        fprintf(stderr, "cleanup of %s: %s\n", names[i], e.msg);
        char mnt[VOLUME_PATH_MAX + NAME_MAX + 2];
        snprintf(mnt, sizeof(mnt), "%s/%s", env->volumes_dir, names[i]);
        umount2(mnt, MNT_DETACH);
    }
    char *const rm[] = {"/bin/rm", "-rf", "--one-file-system", (char *)data_dir, NULL};
    proc_result r;
    if (proc_run(rm, NULL, 60000, &r, &e) == 0)
        proc_result_free(&r);
}

#endif
