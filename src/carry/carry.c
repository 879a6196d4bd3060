/*
 * carry.c - carry_system_disk: check the two containers, pick the way
 * (overlay or portable, see carry.h) and run it.
 *
 * Everything this file knows about a container comes from one inspect
 * (struct side): its state, image, storage driver, upper directory and
 * mount points. The checks refuse what would corrupt a layer (a running
 * container, an upper directory mounted right now, different images);
 * the choice takes the overlay way whenever its conditions hold.
 */
#include "carry/carry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

static const char *const method_names[] = {"auto", "overlay", "portable"};

int carry_method_parse(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(method_names); i++)
        if (strcmp(s, method_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *carry_method_name(enum carry_method m)
{
    return (unsigned)m < ARRAY_SIZE(method_names) ? method_names[m] : "unknown";
}

/* What one inspect says about a container. Strings point into inspect. */
struct side {
    const char *role; /* "old" or "new", for messages */
    const char *ref;  /* as the caller named it */
    json_t *inspect;  /* borrowed */
    const char *id, *image, *status, *driver, *upper;
    bool network_files; /* Docker made its hosts/hostname/resolv.conf (it ran) */
};

static const char *str_at(json_t *obj, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(obj, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return json_string_value(v);
}

/* *inspect gets Docker's answer, which the caller frees; s points into it. */
static int side_load(docker_client *c, const char *role, const char *ref, struct side *s,
                     json_t **inspect, gb_err *err)
{
    *s = (struct side){.role = role, .ref = ref};
    if (docker_container_inspect(c, ref, inspect, err) < 0)
        return err_prefix(err, "carrying the system disk: the %s container", role);
    s->inspect = *inspect;
    s->id = str_at(s->inspect, "Id", NULL, NULL);
    s->image = str_at(s->inspect, "Image", NULL, NULL);
    s->status = str_at(s->inspect, "State", "Status", NULL);
    s->driver = str_at(s->inspect, "GraphDriver", "Name", NULL);
    s->upper = str_at(s->inspect, "GraphDriver", "Data", "UpperDir");
    const char *files[] = {"HostsPath", "HostnamePath", "ResolvConfPath"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        const char *p = str_at(s->inspect, files[i], NULL, NULL);
        if (p && p[0])
            s->network_files = true;
    }
    if (!s->id || !s->image || !s->status)
        return err_set(err, ERR_INTERNAL,
                       "carrying the system disk: Docker's description of '%s' lacks its id, "
                       "image or state",
                       ref);
    return 0;
}

static bool is_stopped(const struct side *s)
{
    return strcmp(s->status, "created") == 0 || strcmp(s->status, "exited") == 0;
}

/* Mount points of the container: volumes, binds, tmpfs. */
static void add_mounts(carry_paths *set, const struct side *s)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(s->inspect, "Mounts"), i, m)
    {
        carry_paths_add(set, json_string_value(json_object_get(m, "Destination")));
    }
    json_t *host = json_object_get(s->inspect, "HostConfig");
    json_array_foreach(json_object_get(host, "Mounts"), i, m)
    {
        carry_paths_add(set, json_string_value(json_object_get(m, "Target")));
    }
    const char *dest;
    json_t *value;
    json_object_foreach(json_object_get(host, "Tmpfs"), dest, value)
    {
        carry_paths_add(set, dest);
    }
}

static void add_docker_files(carry_paths *set)
{
    char path[64];
    for (size_t i = 0; i < carry_docker_own_files_count; i++) {
        snprintf(path, sizeof(path), "/%s", carry_docker_own_files[i]);
        carry_paths_add(set, path);
    }
}

/* ---- The choice ---- */

/* Whether rename(2) may move entries from a to b as far as project quotas
 * go: the kernel refuses (EXDEV) when b inherits a project id that differs
 * from a's. Filesystems without project ids are one project. */
static bool same_quota_project(const char *a, const char *b)
{
    struct fsxattr fa, fb;
    _cleanup_close_ int fda = open(a, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int fdb = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fda < 0 || fdb < 0 || ioctl(fda, FS_IOC_FSGETXATTR, &fa) < 0 ||
        ioctl(fdb, FS_IOC_FSGETXATTR, &fb) < 0)
        return true;
    return !(fb.fsx_xflags & FS_XFLAG_PROJINHERIT) || fa.fsx_projid == fb.fsx_projid;
}

/* Whether the overlay way can be used; why not in why. A mounted upper
 * directory sets *busy: then nothing may touch it. */
static bool overlay_usable(const struct side *from, const struct side *to, bool *busy, char *why,
                           size_t why_size)
{
    *busy = false;
    const struct side *sides[] = {from, to};
    struct stat st[2];
    for (size_t i = 0; i < 2; i++) {
        const struct side *s = sides[i];
        if (!s->driver || strcmp(s->driver, "overlay2") != 0) {
            snprintf(why, why_size, "the %s container's storage driver is %s, not overlay2",
                     s->role, s->driver ? s->driver : "unknown");
            return false;
        }
        if (!s->upper || s->upper[0] != '/') {
            snprintf(why, why_size, "Docker names no upper directory for the %s container",
                     s->role);
            return false;
        }
        if (stat(s->upper, &st[i]) < 0 || !S_ISDIR(st[i].st_mode)) {
            snprintf(why, why_size,
                     "the %s container's upper directory %s cannot be reached here (%s): "
                     "gpuboxd must run as root on the Docker host",
                     s->role, s->upper, strerror(errno));
            return false;
        }
        if (carry_path_in_mount(s->upper)) {
            *busy = true;
            snprintf(why, why_size, "the %s container's upper directory %s is mounted right now",
                     s->role, s->upper);
            return false;
        }
    }
    if (st[0].st_dev != st[1].st_dev) {
        snprintf(why, why_size, "the upper directories are on different filesystems (%s, %s)",
                 from->upper, to->upper);
        return false;
    }
    if (!same_quota_project(from->upper, to->upper)) {
        /* overlay2.size puts each layer in its own project quota; rename(2)
         * between them fails with EXDEV. */
        snprintf(why, why_size, "the upper directories are in different project quotas (%s, %s)",
                 from->upper, to->upper);
        return false;
    }
    snprintf(why, why_size, "both containers use overlay2 on one filesystem");
    return true;
}

static int check_pair(const struct side *from, const struct side *to, gb_err *err)
{
    if (strcmp(from->id, to->id) == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "carrying the system disk: '%s' and '%s' are the same container", from->ref,
                       to->ref);
    const struct side *sides[] = {from, to};
    for (size_t i = 0; i < 2; i++)
        if (!is_stopped(sides[i]))
            return err_set(err, ERR_STATE_CONFLICT,
                           "carrying the system disk: the %s container '%s' is %s; it must be "
                           "stopped (or created and not started)",
                           sides[i]->role, sides[i]->ref, sides[i]->status);
    if (strcmp(from->image, to->image) != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "carrying the system disk: '%s' and '%s' are made from different images "
                       "(%.19s, %.19s); a system disk records changes against one image",
                       from->ref, to->ref, from->image, to->image);
    return 0;
}

static int run_portable(docker_client *c, const struct side *from, const struct side *to,
                        carry_stats *stats, gb_err *err)
{
    carry_paths skip = {0}, guard = {0};
    carry_paths_add(&skip, "/proc");
    carry_paths_add(&skip, "/sys");
    carry_paths_add(&skip, "/dev");
    add_docker_files(&skip);
    add_mounts(&skip, from);
    add_mounts(&skip, to);
    add_mounts(&guard, to);
    if (to->network_files)
        add_docker_files(&guard);
    carry_portable_input in = {
        .from = from->id, .to = to->id, .to_name = to->ref, .skip = &skip, .guard = &guard};
    int rc = carry_portable(c, &in, stats, err);
    carry_paths_free(&skip);
    carry_paths_free(&guard);
    return rc;
}

static int carry_run(docker_client *c, const char *from_ref, const char *to_ref,
                     enum carry_method method, carry_stats *st, gb_err *err)
{
    struct side from, to;
    _cleanup_json_ json_t *from_json = NULL, *to_json = NULL;
    if (side_load(c, "old", from_ref, &from, &from_json, err) < 0 ||
        side_load(c, "new", to_ref, &to, &to_json, err) < 0 || check_pair(&from, &to, err) < 0)
        return -1;

    bool busy;
    char why[200];
    bool overlay = overlay_usable(&from, &to, &busy, why, sizeof(why));
    if (method == CARRY_OVERLAY && !overlay)
        return err_set(err, busy ? ERR_STATE_CONFLICT : ERR_INVALID_PARAMS,
                       "carrying the system disk: the overlay way cannot be used: %s", why);
    if (method == CARRY_AUTO && !overlay)
        log_info("carry: %s -> %s the portable way: %s", from_ref, to_ref, why);
    st->used = (method == CARRY_PORTABLE || !overlay) ? CARRY_PORTABLE : CARRY_OVERLAY;
    if (method == CARRY_AUTO)
        snprintf(st->note, sizeof(st->note), "auto: %s", why);
    else
        snprintf(st->note, sizeof(st->note), "%s, as asked", carry_method_name(method));
    if (st->used == CARRY_OVERLAY)
        return carry_overlay_move(from.upper, to.upper, NULL, st, err);
    return run_portable(c, &from, &to, st, err);
}

int carry_system_disk(docker_client *c, const char *from, const char *to, enum carry_method method,
                      carry_stats *stats, gb_err *err)
{
    carry_stats local = {0};
    carry_stats *st = stats ? stats : &local;
    *st = (carry_stats){.used = CARRY_PORTABLE};
    if (!c || !from || !from[0] || !to || !to[0])
        return err_set(err, ERR_INVALID_PARAMS,
                       "carrying the system disk: both containers must be named");
    if ((unsigned)method > CARRY_PORTABLE)
        return err_set(err, ERR_INVALID_PARAMS, "carrying the system disk: unknown method %d",
                       (int)method);
    int64_t start = time_mono_ns();
    int rc = carry_run(c, from, to, method, st, err);
    st->seconds = time_since_s(start);
    if (rc == 0)
        log_info("carry: %s -> %s by %s: %llu entries, %llu bytes in %.3f s%s", from, to,
                 carry_method_name(st->used), (unsigned long long)st->entries,
                 (unsigned long long)st->bytes, st->seconds,
                 st->unapplied ? " (some changes could not be carried, see above)" : "");
    return rc;
}

int carry_export(docker_client *c, const char *from, const char *const *volumes, size_t nvolumes,
                 int out_fd, carry_stats *stats, gb_err *err)
{
    carry_stats local = {0};
    carry_stats *st = stats ? stats : &local;
    *st = (carry_stats){.used = CARRY_PORTABLE};
    struct side s;
    _cleanup_json_ json_t *inspect = NULL;
    if (side_load(c, "old", from, &s, &inspect, err) < 0)
        return -1;
    if (!is_stopped(&s))
        return err_set(err, ERR_STATE_CONFLICT,
                       "carrying the system disk: the container '%s' is %s; it must be stopped",
                       from, s.status);
    int64_t start = time_mono_ns();
    /* The new container is made from the same spec on the other node: its
     * mount points are these. */
    carry_paths skip = {0}, guard = {0};
    carry_paths_add(&skip, "/proc");
    carry_paths_add(&skip, "/sys");
    carry_paths_add(&skip, "/dev");
    add_docker_files(&skip);
    add_mounts(&skip, &s);
    add_mounts(&guard, &s);
    carry_portable_input in = {.from = s.id,
                               .to = "",
                               .to_name = "the other node's container",
                               .skip = &skip,
                               .guard = &guard};
    int rc = carry_portable_export(c, &in, volumes, nvolumes, out_fd, st, err);
    carry_paths_free(&skip);
    carry_paths_free(&guard);
    st->seconds = time_since_s(start);
    if (rc == 0)
        log_info("carry: %s exported with %zu volume(s): %llu entries, %llu bytes in %.3f s", from,
                 nvolumes, (unsigned long long)st->entries, (unsigned long long)st->bytes,
                 st->seconds);
    return rc;
}
