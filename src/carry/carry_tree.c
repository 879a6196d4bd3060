/*
 * carry_tree.c - the tree way of a move between nodes: a system disk and
 * volumes read and written as host directories, past Docker.
 *
 * When both nodes keep containers on overlay2 and gpuboxd runs as root on
 * its Docker host, a container's system disk is its upper directory: the
 * files it wrote, whiteouts (character devices 0/0) for what it deleted
 * from the image, opaque directories (a trusted.overlay.opaque xattr).
 * Carried as it is into the new container's upper directory (made from the
 * same image, created, never started), the new container sees exactly
 * what the old one saw - the same thing carry_overlay.c does with rename(2)
 * on one host. A volume is its host directory.
 *
 * GNU tar reads and writes the trees (it is on every host gpubox runs on):
 * POSIX archives with xattrs, numeric owners, in name order, without atime
 * or ctime in the headers, so the same tree gives the same bytes (a cut
 * stream resumes at an offset). Its listed-incremental mode gives the
 * pre-copy of a running set: a first stream while it runs, then, stopped,
 * a second with only what changed since the first began, and directory
 * listings from which the extraction deletes what is gone.
 *
 * tar runs with SIGPIPE at its default and an empty signal mask, so a
 * reader that went away ends it; its stderr goes to a memory file and the
 * first line of it into the error.
 */
#include "util/xalloc.h"
#include "carry/carry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/proc.h"

extern char **environ;

/* What both sides give tar: the same archive format and xattr rules.
 * trusted.overlay.origin names a file of the other host's image by its
 * file handle: meaningless here, so it stays behind. */
#define TREE_XATTRS "--xattrs", "--xattrs-include=*", "--xattrs-exclude=trusted.overlay.origin"

static int tree_tar_path(char *path, size_t size, gb_err *err)
{
    return proc_resolve("tar", "/usr/bin:/bin", path, size, err);
}

bool carry_tree_tar_ok(void)
{
    char path[512];
    gb_err e = GB_ERR_INIT;
    return tree_tar_path(path, sizeof(path), &e) == 0;
}

int carry_tree_upper(docker_client *c, const char *container, char *path, size_t size, gb_err *err)
{
    _cleanup_json_ json_t *inspect = NULL;
    if (docker_container_inspect(c, container, &inspect, err) < 0)
        return -1;
    json_t *gd = json_object_get(inspect, "GraphDriver");
    const char *driver = json_string_value(json_object_get(gd, "Name"));
    const char *upper = json_string_value(json_object_get(json_object_get(gd, "Data"), "UpperDir"));
    struct stat st;
    if (!driver || strcmp(driver, "overlay2") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "the storage driver is %s, not overlay2",
                       driver ? driver : "unknown");
    if (!upper || upper[0] != '/' || stat(upper, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_set(err, ERR_INVALID_PARAMS,
                       "the upper directory of %s cannot be reached here (gpuboxd must run as "
                       "root on the Docker host)",
                       container);
    if (!carry_tree_tar_ok())
        return err_set(err, ERR_INVALID_PARAMS, "no GNU tar on this host");
    snprintf(path, size, "%s", upper);
    return 0;
}

/* tar with argv, stdin in_fd and stdout out_fd; *pid and *errfd (its
 * stderr, a memory file) for tree_wait. */
static int tree_spawn(char *const argv[], int in_fd, int out_fd, pid_t *pid, int *errfd,
                      gb_err *err)
{
    *errfd = memfd_create("gpubox-tar-err", MFD_CLOEXEC);
    if (*errfd < 0)
        return err_set(err, ERR_INTERNAL, "moving a tree: memfd: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, *errfd, 2);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
        close(*errfd);
        *errfd = -1;
        return err_set(err, ERR_INTERNAL, "moving a tree: running %s: %s", argv[0], strerror(rc));
    }
    return 0;
}

/* Wait for tar; 0 when it succeeded (or, live, found files that changed
 * as it read them: exit 1). */
static int tree_wait(pid_t pid, int errfd, bool live, const char *what, gb_err *err)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    char msg[300] = "";
    ssize_t n = pread(errfd, msg, sizeof(msg) - 1, 0);
    close(errfd);
    msg[n > 0 ? n : 0] = '\0';
    char *nl = strchr(msg, '\n');
    if (nl)
        *nl = '\0';
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || (live && WEXITSTATUS(status) == 1)))
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
        log_warn("%s: tar: %s", what, msg);
        return 0;
    }
    if (WIFSIGNALED(status))
        return err_set(err, ERR_INTERNAL, "%s: tar ended by signal %d%s%s", what, WTERMSIG(status),
                       msg[0] ? ": " : "", msg);
    return err_set(err, ERR_INTERNAL, "%s: tar failed (exit %d): %s", what, WEXITSTATUS(status),
                   msg[0] ? msg : "no reason given");
}

static int copy_file(const char *from, const char *to, gb_err *err)
{
    _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (in < 0 || out < 0)
        return err_set(err, ERR_INTERNAL, "moving a tree: copying %s: %s", from, strerror(errno));
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: reading %s: %s", from,
                           strerror(errno));
        if (n == 0)
            return 0;
        if (carry_write_all(out, buf, (size_t)n) < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: writing %s: %s", to, strerror(errno));
    }
}

/* The first head_len bytes after the skip, read whole: their sum must be
 * head_hash (the same entry's headers as the receiving side has). */
static int head_check(int fd, uint64_t head_len, uint64_t head_hash, int out_fd, gb_err *err)
{
    if (head_len > (2u << 20))
        return err_set(err, ERR_CONFLICT, "the headers asked to resume at are too long");
    _cleanup_free_ unsigned char *head = xmalloc((size_t)head_len);
    size_t have = 0;
    while (have < head_len) {
        ssize_t n = read(fd, head + have, (size_t)head_len - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: reading tar: %s", strerror(errno));
        if (n == 0)
            return err_set(err, ERR_CONFLICT,
                           "the stream is shorter than the offset asked to resume at");
        have += (size_t)n;
    }
    if (carry_tar_head_hash(0, head, have) != head_hash)
        return err_set(err, ERR_CONFLICT,
                       "the tree changed: another entry begins at the offset asked to resume at");
    if (carry_write_all(out_fd, head, have) < 0)
        return err_set(err, ERR_INTERNAL, "moving a tree: sending: %s", strerror(errno));
    return 0;
}

/* Read and drop skip bytes of fd, then check a header begins there (with
 * head_len, that the same entry's headers do) and pass the rest to
 * out_fd. */
static int skip_then_copy(int fd, uint64_t skip, uint64_t head_len, uint64_t head_hash, int out_fd,
                          gb_err *err)
{
    size_t cap = 1u << 20;
    _cleanup_free_ unsigned char *buf = xmalloc(cap);
    unsigned char block[CARRY_TAR_BLOCK];
    size_t have = 0;
    bool checked = false;
    for (;;) {
        if (skip == 0 && !checked && head_len > 0) {
            if (head_check(fd, head_len, head_hash, out_fd, err) < 0)
                return -1;
            checked = true;
        }
        size_t want = skip > 0   ? (skip < cap ? (size_t)skip : cap)
                      : !checked ? sizeof(block) - have
                                 : cap;
        ssize_t n = read(fd, skip > 0 || checked ? buf : block + have, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: reading tar: %s", strerror(errno));
        if (n == 0)
            return skip > 0 || !checked
                       ? err_set(err, ERR_CONFLICT,
                                 "the stream is shorter than the offset asked to resume at")
                       : 0;
        if (skip > 0) {
            skip -= (uint64_t)n;
            continue;
        }
        if (!checked) {
            have += (size_t)n;
            if (have < sizeof(block))
                continue;
            if (!carry_tar_block_starts_entry(block))
                return err_set(err, ERR_CONFLICT,
                               "the stream changed: no entry begins at the offset asked to "
                               "resume at");
            checked = true;
            if (carry_write_all(out_fd, block, sizeof(block)) < 0)
                return err_set(err, ERR_INTERNAL, "moving a tree: sending: %s", strerror(errno));
            continue;
        }
        if (carry_write_all(out_fd, buf, (size_t)n) < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: sending: %s", strerror(errno));
    }
}

int carry_tree_export(const char *dir, const char *snapshot_in, const char *snapshot_out,
                      const char *work, uint64_t skip, uint64_t head_len, uint64_t head_hash,
                      bool live, int out_fd, gb_err *err)
{
    char tar[512];
    if (tree_tar_path(tar, sizeof(tar), err) < 0)
        return -1;
    /* tar rewrites the snapshot it is given: a copy, so a stream made
     * again (resumed) starts from the same one. */
    unlink(work);
    if (snapshot_in && copy_file(snapshot_in, work, err) < 0)
        return -1;
    _cleanup_free_ char *dir_arg = xasprintf("--directory=%s", dir);
    _cleanup_free_ char *snap_arg = xasprintf("--listed-incremental=%s", work);
    char *argv[] = {tar,
                    "--create",
                    "--file=-",
                    dir_arg,
                    snap_arg,
                    "--sort=name",
                    "--format=posix",
                    "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
                    "--numeric-owner",
                    TREE_XATTRS,
                    live ? "--warning=no-file-changed" : "--warning=all",
                    live ? "--warning=no-file-removed" : "--warning=all",
                    live ? "--ignore-failed-read" : "--warning=all",
                    ".",
                    NULL};
    _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int p[2] = {-1, -1};
    if (skip > 0 && pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "moving a tree: pipe: %s", strerror(errno));
    if (p[1] >= 0)
        carry_pipe_widen(p[1]);
    pid_t pid;
    int errfd;
    int rc = tree_spawn(argv, devnull, skip > 0 ? p[1] : out_fd, &pid, &errfd, err);
    if (p[1] >= 0)
        close(p[1]);
    if (rc < 0) {
        if (p[0] >= 0)
            close(p[0]);
        unlink(work);
        return -1;
    }
    int copied = 0;
    if (skip > 0) {
        copied = skip_then_copy(p[0], skip, head_len, head_hash, out_fd, err);
        close(p[0]); /* tar, if still writing, ends */
    }
    gb_err werr = GB_ERR_INIT;
    rc = tree_wait(pid, errfd, live, "reading a tree", &werr);
    if (copied < 0 || rc < 0) {
        if (copied == 0)
            *err = werr;
        unlink(work);
        return -1;
    }
    if (snapshot_out) {
        if (rename(work, snapshot_out) < 0)
            return err_set(err, ERR_INTERNAL, "moving a tree: keeping %s: %s", snapshot_out,
                           strerror(errno));
    } else {
        unlink(work);
    }
    return 0;
}

/* GNU tar's snapshot, format 2: "GNU tar-VERSION-2\n", then the time the
 * stream began as "SECONDS\0NANOSECONDS\0", then the directories. */
int carry_tree_snapshot_backdate(const char *snapshot, const struct timespec *since, gb_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    {
        _cleanup_fclose_ FILE *f = fopen(snapshot, "rb");
        if (!f)
            return err_set(err, ERR_INTERNAL, "moving a tree: reading %s: %s", snapshot,
                           strerror(errno));
        size_t cap = 1 << 16;
        text = xmalloc(cap + 1);
        size_t n;
        while ((n = fread(text + len, 1, cap - len, f)) > 0) {
            len += n;
            if (len == cap) {
                cap *= 2;
                text = xrealloc(text, cap + 1);
            }
        }
        if (ferror(f))
            return err_set(err, ERR_INTERNAL, "moving a tree: reading %s: %s", snapshot,
                           strerror(errno));
        text[len] = '\0';
    }
    const char *nl = memchr(text, '\n', len);
    const char *sec = nl ? nl + 1 : NULL;
    const char *sec_end = sec ? memchr(sec, '\0', len - (size_t)(sec - text)) : NULL;
    const char *nsec_end =
        sec_end ? memchr(sec_end + 1, '\0', len - (size_t)(sec_end + 1 - text)) : NULL;
    if (strncmp(text, "GNU tar-", 8) != 0 || !nl || nl - text < 2 || nl[-2] != '-' ||
        nl[-1] != '2' || !nsec_end)
        return err_set(err, ERR_CONFLICT, "moving a tree: %s is not a GNU tar snapshot (format 2)",
                       snapshot);
    long long s_then = strtoll(sec, NULL, 10), ns_then = strtoll(sec_end + 1, NULL, 10);
    if ((long long)since->tv_sec > s_then ||
        ((long long)since->tv_sec == s_then && (long long)since->tv_nsec >= ns_then))
        return 0; /* dated no later already */
    char stamp[64];
    int slen = snprintf(stamp, sizeof(stamp), "%lld%c%ld%c", (long long)since->tv_sec, '\0',
                        (long)since->tv_nsec, '\0');
    _cleanup_free_ char *tmp = xasprintf("%s.backdate", snapshot);
    _cleanup_fclose_ FILE *out = fopen(tmp, "wb");
    const char *rest = nsec_end + 1;
    size_t head = (size_t)(sec - text), tail = len - (size_t)(rest - text);
    if (!out || fwrite(text, 1, head, out) != head ||
        fwrite(stamp, 1, (size_t)slen, out) != (size_t)slen || fwrite(rest, 1, tail, out) != tail ||
        fflush(out) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, ERR_INTERNAL, "moving a tree: writing %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, snapshot) < 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, ERR_INTERNAL, "moving a tree: keeping %s: %s", snapshot, strerror(e));
    }
    return 0;
}

int carry_tree_import(const char *dir, int in_fd, gb_err *err)
{
    char tar[512];
    if (tree_tar_path(tar, sizeof(tar), err) < 0)
        return -1;
    _cleanup_free_ char *dir_arg = xasprintf("--directory=%s", dir);
    char *argv[] = {tar,
                    "--extract",
                    "--file=-",
                    dir_arg,
                    "--listed-incremental=/dev/null",
                    "--numeric-owner",
                    "--same-permissions",
                    "--same-owner",
                    TREE_XATTRS,
                    NULL};
    _cleanup_close_ int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    pid_t pid;
    int errfd;
    int rc = tree_spawn(argv, in_fd, devnull, &pid, &errfd, err);
    close(in_fd);
    if (rc < 0)
        return -1;
    return tree_wait(pid, errfd, false, "writing a tree", err);
}
