/*
 * move_in.c - moving a replica set to another node: the side of the node
 * it goes to (move.h has the conversation, move.c the other side).
 *
 * Its own operation ("move-in", the source's operation id), written before
 * anything is made, so a crash at any step leaves something to settle:
 *   begin       prepare: the operation (with the record and volumes the
 *               source sent), then the volumes made empty, the cards,
 *               ports and cores taken, the container made, never started
 *               (the operation written again with what it holds). A node
 *               without room refuses here, before any data moves.
 *   copied      pull: the source's stream (GET .../data: the carry's
 *               portable form, then each volume's files) extracted into
 *               the container, as it arrives: nothing is staged on disk
 *   committed   commit, once the fleet's name index says this node owns
 *               the set: the record (a new version: the source's + 1),
 *               every history entry and the operation done, in one
 *               transaction; a running set started, a paused one left
 *               holding its cards, a stopped one giving them back
 * Undone (abort, or move_settle.c when the source gave up): the
 * container, the volumes and the holdings go; the source keeps the set.
 *
 * The record travels whole (replicaset_record.unknown keeps the fields
 * this gpuboxd does not know), so what a newer node added to it moves too.
 */
#include "util/xalloc.h"
#include "service/replicaset/replicaset.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "carry/carry.h"
#include "service/keys.h"
#include "service/namelock.h"
#include "service/nodes/nodes.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/volumes/volumes.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/size.h"
#include "util/time.h"

#define MOVE_PULL_ATTEMPTS 3
/* The tree way's parts at most: the system disk and each volume. */
#define MOVE_IN_PARTS 33

static int move_in_tree_dirs(app *a, const journal_op *op, const struct replicaset_record *r,
                             char (*dirs)[MOVE_DIR_MAX], size_t max, size_t *n, gb_err *err);

static const char *const move_in_steps[] = {OP_STEP_BEGIN, OP_STEP_COPIED, OP_STEP_COMMITTED};

/* ---- this process's moves: progress, and what the pools hold for them ---------------- */

typedef struct move_live {
    char id[JOURNAL_ID_MAX];
    _Atomic uint64_t bytes;
    int64_t start_ns;
    double seconds; /* once done */
    bool done;
    bool holds; /* the pools hold the record's cards and ports for it (taken by prepare) */
    struct move_live *next;
} move_live;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static move_live *live_moves;

/* The entry of id, made when absent (create). Entries live as long as the
 * process: one per move, a few hundred bytes. */
static move_live *live_get(const char *id, bool create)
{
    pthread_mutex_lock(&live_lock);
    move_live *m = live_moves;
    while (m && strcmp(m->id, id) != 0)
        m = m->next;
    if (!m && create) {
        m = xcalloc(1, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "%s", id);
        m->start_ns = time_mono_ns();
        m->next = live_moves;
        live_moves = m;
    }
    pthread_mutex_unlock(&live_lock);
    return m;
}

static void live_hold(const char *id, bool holds)
{
    move_live *m = live_get(id, true);
    pthread_mutex_lock(&live_lock);
    m->holds = holds;
    pthread_mutex_unlock(&live_lock);
}

static bool live_holds(const char *id)
{
    move_live *m = live_get(id, false);
    pthread_mutex_lock(&live_lock);
    bool h = m && m->holds;
    pthread_mutex_unlock(&live_lock);
    return h;
}

int move_progress_get(const char *id, uint64_t *bytes, double *seconds)
{
    move_live *m = live_get(id, false);
    if (!m)
        return 0;
    pthread_mutex_lock(&live_lock);
    *bytes = m->bytes;
    *seconds = m->done ? m->seconds : time_since_s(m->start_ns);
    pthread_mutex_unlock(&live_lock);
    return 1;
}

void move_progress_set(const char *id, uint64_t bytes, double seconds, int done)
{
    move_live *m = live_get(id, true);
    pthread_mutex_lock(&live_lock);
    m->bytes = bytes;
    if (done) {
        m->done = true;
        m->seconds = seconds;
    }
    pthread_mutex_unlock(&live_lock);
}

void replicaset_move_progress_add(const char *id, uint64_t bytes, bool done)
{
    move_live *m = live_get(id, true);
    pthread_mutex_lock(&live_lock);
    m->bytes += bytes;
    if (done) {
        m->done = true;
        m->seconds = time_since_s(m->start_ns);
    }
    pthread_mutex_unlock(&live_lock);
}

/* ---- the record the set will have here -------------------------------------------------- */

/* r as it arrived, made this node's: a new version, holding nothing yet. */
static void move_in_fresh(replicaset_record *r)
{
    free(r->gpus);
    gpus_grant_free(&r->grant);
    free(r->ports);
    free(r->cpuset);
    r->gpus = NULL;
    r->ports = NULL;
    r->cpuset = NULL;
    r->ngpus = r->nports = r->ncpuset = 0;
    replicaset_record_forget_last(r);
    r->operation[0] = '\0';
    r->mod_revision = 0;
    r->version++;
    snprintf(r->container_name, sizeof(r->container_name), "%s-%d", r->name, r->version);
    r->container_id[0] = '\0';
    time_iso_now(r->update_time, sizeof(r->update_time));
}

static int op_record(const journal_op *op, replicaset_record *r, gb_err *err)
{
    return replicaset_record_from_json(json_object_get(op->data, "record"), r, err);
}

static void op_set_record(journal_op *op, const replicaset_record *r)
{
    json_object_set_new(op->data, "record", replicaset_record_to_json(r));
}

static const char *op_str(const journal_op *op, const char *key)
{
    const char *s = json_string_value(json_object_get(op->data, key));
    return s ? s : "";
}

static json_t *move_in_answer(app *a, const replicaset_record *r, const char *state)
{
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:o}", "node", nodes_self(a), "name",
                  r->name, "containerName", r->container_name, "version", r->version, "state",
                  state, "gpus", replicaset_record_gpus_json(r), "gpuShares",
                  replicaset_record_gpu_shares_json(r), "ports", replicaset_record_ports_json(r));
    return j;
}

/* ---- undo -------------------------------------------------------------------------------- */

int move_in_undo_op(app *a, journal_op *op, const char *why, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (op_record(op, &r, err) < 0)
        return -1;
    if (docker_container_remove(a->docker, r.container_name, true, err) < 0)
        return err_prefix(err, "move %s: removing container %s", op->id, r.container_name);
    replicaset_container_forget(a, r.container_name);
    if (live_holds(op->id)) {
        replicaset_alloc_give_back(a, &r);
        live_hold(op->id, false);
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(op->data, "volumes"), i, v)
    {
        const char *vname = json_string_value(json_object_get(v, "name"));
        const char *vowner = json_string_value(json_object_get(v, "owner"));
        /* The owner's ledger counts the volume where it stays, the source. */
        if (vname && users_ledger_hand_over(a, vowner ? vowner : r.owner, true, vname,
                                            op_str(op, "source"), err) < 0)
            return err_prefix(err, "move %s: volume %s in the ledger", op->id, vname);
        if (vname && volumes_move_remove(a, vname, err) < 0)
            return err_prefix(err, "move %s: removing volume %s", op->id, vname);
    }
    journal_finish(op, JOURNAL_UNDONE, why);
    if (journal_save(a->store, op, err) < 0)
        return -1;
    move_progress_set(op->id, 0, 0, 1);
    nodes_poke(a);
    log_info("move %s: %s does not come to this node: %s", op->id, r.name, why);
    return 0;
}

/* ---- prepare ------------------------------------------------------------------------------ */

/* Free bytes for gpubox on the filesystem of path (less the reserve), and
 * the filesystem's id. */
static int disk_free(const char *path, uint64_t reserve, uint64_t *free_bytes, dev_t *dev,
                     gb_err *err)
{
    struct statvfs vfs;
    struct stat st;
    if (statvfs(path, &vfs) < 0 || stat(path, &st) < 0)
        return err_set(err, ERR_INTERNAL, "cannot read the free space of %s: %s", path,
                       strerror(errno));
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    *free_bytes = avail > reserve ? avail - reserve : 0;
    *dev = st.st_dev;
    return 0;
}

/* Refused (ERR_MOVE_NO_DISK) before anything is made when Docker's disk
 * here cannot hold the system disk, or the volumes' disk their data (the
 * sum when both are one filesystem), keeping --move-disk-reserve free. */
static int move_in_disk_check(app *a, const json_t *body, gb_err *err)
{
    uint64_t system_disk = (uint64_t)json_integer_value(json_object_get(body, "systemDiskBytes"));
    uint64_t volumes = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(body, "volumes"), i, v)
    {
        json_int_t used = json_integer_value(json_object_get(v, "used"));
        volumes += used > 0 ? (uint64_t)used : 0;
    }
    char vdir[MOVE_DIR_MAX];
    volumes_dir_of_data(a, vdir, sizeof(vdir));
    const char *ddir = a->docker_root_dir[0] ? a->docker_root_dir : "/var/lib/docker";
    uint64_t reserve = a->cfg.move_disk_reserve;
    uint64_t dfree = 0, vfree = 0;
    dev_t ddev = 0, vdev = 0;
    if (disk_free(ddir, reserve, &dfree, &ddev, err) < 0)
        return -1;
    if (volumes > 0 && disk_free(vdir, reserve, &vfree, &vdev, err) < 0)
        return -1;
    bool one = volumes == 0 || ddev == vdev;
    uint64_t need_d = system_disk + (one ? volumes : 0);
    char need[32], have[32], res[32], sys[32], vol[32];
    size_format(reserve, res, sizeof(res));
    size_format(system_disk, sys, sizeof(sys));
    size_format(volumes, vol, sizeof(vol));
    if (need_d > dfree) {
        size_format(need_d, need, sizeof(need));
        size_format(dfree, have, sizeof(have));
        err_set(err, ERR_MOVE_NO_DISK,
                "node %s cannot hold the set: it needs %s (%llu bytes: system disk %s%s%s) on "
                "Docker's disk %s, which has %s (%llu bytes) free beyond the reserve of %s "
                "(--move-disk-reserve); nothing was copied: free space there or move it to "
                "another node",
                nodes_self(a), need, (unsigned long long)need_d, sys, one ? ", volumes " : "",
                one ? vol : "", ddir, have, (unsigned long long)dfree, res);
    } else if (!one && volumes > vfree) {
        size_format(volumes, need, sizeof(need));
        size_format(vfree, have, sizeof(have));
        err_set(err, ERR_MOVE_NO_DISK,
                "node %s cannot hold the set's volumes: they need %s (%llu bytes) in %s, which "
                "has %s (%llu bytes) free beyond the reserve of %s (--move-disk-reserve); "
                "nothing was copied: free space there or move it to another node",
                nodes_self(a), need, (unsigned long long)volumes, vdir, have,
                (unsigned long long)vfree, res);
    } else {
        return 0;
    }
    snprintf(err->data, sizeof(err->data),
             "{\"node\":\"%s\",\"neededBytes\":%llu,\"freeBytes\":%llu,\"reserveBytes\":%llu}",
             nodes_self(a), (unsigned long long)(need_d > dfree ? need_d : volumes),
             (unsigned long long)(need_d > dfree ? dfree : vfree), (unsigned long long)reserve);
    return -1;
}

/* The volumes, the holdings, the container; op written again with them. */
static int move_in_make(app *a, journal_op *op, replicaset_record *r, gb_err *err)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(op->data, "volumes"), i, v)
    {
        const char *vname = json_string_value(json_object_get(v, "name"));
        const char *size = json_string_value(json_object_get(v, "sizeText"));
        const char *owner = json_string_value(json_object_get(v, "owner"));
        if (!vname || !size || volumes_move_in(a, vname, size, owner ? owner : r->owner, err) < 0)
            return err_prefix(err, "node %s: making volume %s", nodes_self(a),
                              vname ? vname : "(unnamed)");
    }
    if (replicaset_alloc_take(a, r, err) < 0)
        return err_prefix(err, "node %s cannot take it", nodes_self(a));
    live_hold(op->id, true);
    _cleanup_free_ char *id = NULL;
    if (replicaset_container_create(a, r, &id, err) < 0)
        return err_prefix(err, "node %s: making container %s", nodes_self(a), r->container_name);
    snprintf(r->container_id, sizeof(r->container_id), "%s", id);
    op_set_record(op, r);
    return journal_save(a->store, op, err);
}

int replicaset_move_in_prepare(app *a, const json_t *body, json_t **out, gb_err *err)
{
    const char *id = json_string_value(json_object_get(body, "id"));
    const char *source = json_string_value(json_object_get(body, "source"));
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *record = json_object_get(body, "record");
    json_t *volumes = json_object_get(body, "volumes");
    json_t *history = json_object_get(body, "history");
    if (!id || !journal_id_valid(id) || !source || !name || !json_is_object(record) ||
        !json_is_array(volumes) || !json_is_array(history))
        return err_set(err, ERR_INVALID_PARAMS,
                       "a move's prepare needs id, source, name, record, volumes and history");
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(journal_op_free) journal_op op = {0};
    int found = journal_load(a->store, id, &op, err);
    if (found < 0)
        return -1;
    if (found) { /* asked again: the answer it had */
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        if (op.kind != JOURNAL_MOVE_IN || op.state != JOURNAL_RUNNING ||
            op_record(&op, &r, err) < 0)
            return err_set(err, ERR_CONFLICT, "move %s is over on node %s", id, nodes_self(a));
        *out = move_in_answer(a, &r, op_str(&op, "state"));
        return 0;
    }
    /* Moved away from here a moment ago, its old copy not yet removed. */
    if (move_out_finish_left(a, name, err) < 0)
        return -1;
    _cleanup_(replicaset_record_free) replicaset_record old = {0};
    found = replicaset_record_load(a->store, name, &old, err);
    if (found < 0)
        return -1;
    if (found && !replicaset_record_is_tombstone(&old))
        return err_set(err, ERR_EXISTS,
                       "node %s keeps a record of '%s' already (%s); a set moves only to a node "
                       "that has none (delete it there with purge)",
                       nodes_self(a), name, replicaset_state_name(old.state));
    if (nodes_check_uncordoned(a, NODES_REPLICASET, NULL, err) < 0 ||
        move_in_disk_check(a, body, err) < 0)
        return -1;
    /* Test hook: this node refuses the set so named (a group's later set). */
    const char *refuse = getenv("GPUBOX_MOVE_REFUSE");
    if (refuse && strcmp(refuse, name) == 0)
        return err_set(err, ERR_STATE_CONFLICT,
                       "node %s refuses '%s' (GPUBOX_MOVE_REFUSE, a test hook)", nodes_self(a),
                       name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_record_from_json(record, &r, err) < 0)
        return err_prefix(err, "the record sent for the move");
    if (strcmp(r.name, name) != 0)
        return err_set(err, ERR_INVALID_PARAMS, "the record sent is %s's, not %s's", r.name, name);
    const char *state = replicaset_state_name(r.state);
    move_in_fresh(&r);
    if (images_ensure(a, r.spec.image, IMAGE_PULL_MISSING, NULL, err) < 0)
        return err_prefix(err, "node %s", nodes_self(a));
    /* The volumes by name only: their records are made afresh here. */
    json_t *vols = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(volumes, i, v)
    {
        json_array_append_new(
            vols, json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(v, "name"), "sizeText",
                            json_object_get(v, "sizeText"), "owner", json_object_get(v, "owner")));
    }
    json_t *data =
        json_pack("{s:s, s:s, s:o, s:O, s:o}", "source", source, "state", state, "record",
                  replicaset_record_to_json(&r), "history", history, "volumes", vols);
    if (journal_op_init(&op, JOURNAL_MOVE_IN, name, move_in_steps, ARRAY_SIZE(move_in_steps), data,
                        err) < 0)
        return -1;
    snprintf(op.id, sizeof(op.id), "%s", id);
    snprintf(op.owner, sizeof(op.owner), "%s", r.owner);
    journal_mark(&op, OP_STEP_BEGIN);
    if (journal_save(a->store, &op, err) < 0)
        return -1;
    replicaset_moves_poke();
    if (move_in_make(a, &op, &r, err) < 0) {
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        op_set_record(&op, &r); /* the container's name, what it holds */
        gb_err e = GB_ERR_INIT;
        if (move_in_undo_op(a, &op, why, &e) < 0)
            log_error("move %s: undoing a failed prepare: %s", id, e.msg);
        return -1;
    }
    /* The tree way when both sides reach their directories. */
    bool tree = json_is_true(json_object_get(body, "tree"));
    if (tree) {
        char(*dirs)[MOVE_DIR_MAX] = xcalloc(MOVE_IN_PARTS, MOVE_DIR_MAX);
        size_t n = 0;
        gb_err e = GB_ERR_INIT;
        if (move_in_tree_dirs(a, &op, &r, dirs, MOVE_IN_PARTS, &n, &e) < 0) {
            log_info("move %s: the portable way: %s", id, e.msg);
            tree = false;
        }
        free(dirs);
    }
    json_object_set_new(op.data, "tree", json_boolean(tree));
    if (journal_save(a->store, &op, err) < 0)
        return -1;
    journal_fault("move-in", "prepared");
    log_info("move %s: %s prepared here as %s (from node %s, the %s way)", id, name,
             r.container_name, source, tree ? "tree" : "portable");
    *out = move_in_answer(a, &r, state);
    json_object_set_new(*out, "tree", json_boolean(tree));
    return 0;
}

/* ---- pull ------------------------------------------------------------------------------- */

/* Where one attempt's stream ends up: Docker's archive PUT into the
 * container (the portable way), or tar into a directory (the tree way). */
struct put_job {
    app *a;
    const char *container;
    const char *dir; /* the tree way */
    int fd;
    int rc;
    gb_err err;
};

static void *put_thread(void *arg)
{
    struct put_job *j = arg;
    if (j->dir) {
        j->rc = carry_tree_import(j->dir, j->fd, &j->err); /* closes fd */
    } else {
        j->rc = docker_container_archive_put(j->a->docker, j->container, "/", j->fd, &j->err);
        close(j->fd); /* the writer sees EPIPE if the PUT ended early */
    }
    j->fd = -1;
    return NULL;
}

/* The stream as curl hands it over, on the calling thread: decoded
 * (move_zstd.c), then through the relay that notes where whole entries
 * end (carry_tar_relay), into the pipe the extraction reads. */
struct pull_sink {
    uint64_t received; /* bytes curl handed over */
    move_zstd_decoder *dec;
    carry_relay *rel;
    bool failed;
    gb_err err;
};

static int relay_sink(void *ctx, const void *data, size_t n)
{
    return carry_relay_feed(ctx, data, n);
}

static int curl_sink(void *ctx, const void *data, size_t n)
{
    struct pull_sink *ps = ctx;
    ps->received += n;
    if (ps->failed || move_zstd_decoder_push(ps->dec, data, n, &ps->err) < 0) {
        ps->failed = true;
        return -1;
    }
    return 0;
}

/* One part of a pull: which, and into where. */
typedef struct move_part {
    int part;        /* the tree way's part (0 the system disk, 1.. volumes); -1 portable */
    bool pre;        /* the pre-copy, while the set runs */
    const char *dir; /* the tree way: the directory it goes into */
} move_part;

/* One attempt: the source's stream of part from offset into the
 * container or directory, as it comes: curl -> decoder -> relay -> pipe
 * -> Docker's archive PUT or tar. *whole: bytes of the stream (from
 * offset) extracted whole; *complete: it reached its end. */
static int move_in_attempt(app *a, journal_op *op, const replicaset_record *r, const char *auth,
                           move_live *live, const move_part *pt, uint64_t offset, uint64_t head[2],
                           uint64_t *whole, bool *complete, uint64_t *received, gb_err *err)
{
    *received = 0;
    *whole = 0;
    *complete = false;
    char advertise[NODES_URL_MAX];
    if (nodes_reach(a, op_str(op, "source"), advertise, sizeof(advertise), err) < 0)
        return -1;
    int s[2];
    if (pipe2(s, O_CLOEXEC) < 0)
        return err_set(err, ERR_INTERNAL, "move %s: pipe: %s", op->id, strerror(errno));
    carry_pipe_widen(s[1]);
    struct put_job job = {.a = a, .container = r->container_id, .dir = pt->dir, .fd = s[0]};
    job.err = (gb_err)GB_ERR_INIT;
    pthread_t t;
    if (pthread_create(&t, NULL, put_thread, &job) != 0) {
        close(s[0]);
        close(s[1]);
        return err_set(err, ERR_INTERNAL, "move %s: starting a thread", op->id);
    }
    struct pull_sink ps = {.rel = carry_relay_new(s[1])};
    ps.err = (gb_err)GB_ERR_INIT;
    ps.dec = move_zstd_decoder_new(relay_sink, ps.rel);
    char path[320];
    if (pt->part >= 0 && head[0])
        snprintf(path, sizeof(path),
                 MOVE_PATH "/%s/data?part=%d&phase=%s&offset=%llu&head=%llu.%llx", op->id, pt->part,
                 pt->pre ? "pre" : "final", (unsigned long long)offset, (unsigned long long)head[0],
                 (unsigned long long)head[1]);
    else if (pt->part >= 0)
        snprintf(path, sizeof(path), MOVE_PATH "/%s/data?part=%d&phase=%s&offset=%llu", op->id,
                 pt->part, pt->pre ? "pre" : "final", (unsigned long long)offset);
    else
        snprintf(path, sizeof(path), MOVE_PATH "/%s/data?offset=%llu", op->id,
                 (unsigned long long)offset);
    nodes_request rq = {.method = "GET", .path_query = path, .authorization = auth};
    nodes_answer ans = {0};
    gb_err get_err = GB_ERR_INIT;
    int rc = nodes_send_to_sink(a, advertise, &rq, curl_sink, &ps, &live->bytes, &ans, &get_err);
    *received = ps.received;
    gb_err dec_err = GB_ERR_INIT;
    bool dec_failed = ps.failed || move_zstd_decoder_end(ps.dec, &dec_err) < 0;
    if (ps.failed)
        dec_err = ps.err;
    gb_err rel_err = GB_ERR_INIT;
    if (!carry_relay_head(ps.rel, &head[0], &head[1]))
        head[0] = head[1] = 0;
    int rel_rc = carry_relay_end(ps.rel, whole, complete, &rel_err);
    move_zstd_decoder_free(ps.dec);
    close(s[1]);
    pthread_join(t, NULL);
    if (rc == 0 && ans.status != 200) {
        _cleanup_json_ json_t *env = ans.body ? json_loads(ans.body, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(env, "msg"));
        rc = err_set(&get_err, ERR_INTERNAL, "node %s did not send the data: %s",
                     op_str(op, "source"), msg ? msg : "no reason given");
    }
    nodes_answer_clear(&ans);
    if (rel_rc < 0)
        *complete = false;
    if (job.rc < 0) {
        *err = job.err;
        return err_prefix(err, "extracting the data into %s", r->container_name);
    }
    if (rc < 0) {
        *err = get_err;
        return -1;
    }
    if (rel_rc < 0) {
        *err = rel_err;
        return -1;
    }
    if (dec_failed && *complete) {
        *err = dec_err;
        return -1;
    }
    return 0;
}

/* The parts of one pull run at once and note their resumes in one list. */
static pthread_mutex_t resumed_lock = PTHREAD_MUTEX_INITIALIZER;

/* A part, whole: pulled again after a dropped connection from where the
 * extraction stopped taking whole entries. A pre-copy, read while the set
 * runs, too, when the cut fell inside a file's data: the source resumes
 * only where the same entry's headers (carry_relay_head: their length and
 * sum, which name the file) begin at that byte again, else it sends
 * nothing and the pre-copy is pulled again from its start. Entries come
 * in name order, so the file at that byte being the same, the bytes kept
 * hold every file before it; what changed in them since the first try
 * goes in the final stream (the source dates its snapshot back). resumed gets
 * [{part, from}] for each resumed pull. */
static int move_in_part(app *a, journal_op *op, const replicaset_record *r, const char *auth,
                        move_live *live, const move_part *pt, json_t *resumed, gb_err *err)
{
    uint64_t offset = 0, head[2] = {0, 0};
    for (int attempt = 1;; attempt++) {
        uint64_t received = 0, whole = 0;
        bool complete = false;
        int rc = move_in_attempt(a, op, r, auth, live, pt, offset, head, &whole, &complete,
                                 &received, err);
        if (rc == 0 && complete)
            return 0;
        if (rc == 0) /* the source ended its stream early (it says why in its log) */
            err_set(err, ERR_NODE_UNAVAILABLE, "node %s ended the stream early",
                    op_str(op, "source"));
        if (err->code != ERR_NODE_UNAVAILABLE || attempt == MOVE_PULL_ATTEMPTS)
            return -1;
        /* Resumed where the whole entries end; a resumed pull that brought
         * nothing (the source's stream no longer matches) starts over. */
        uint64_t from = offset > 0 && whole == 0 ? 0 : offset + whole;
        if (pt->pre && !head[0]) /* cut between entries: no head to find the place by */
            from = 0;
        log_warn("move %s: the data stream from node %s broke off after %llu bytes (%s); "
                 "pulling it again (try %d of %d) from byte %llu",
                 op->id, op_str(op, "source"), (unsigned long long)received, err->msg, attempt + 1,
                 MOVE_PULL_ATTEMPTS, (unsigned long long)from);
        if (from > 0) {
            pthread_mutex_lock(&resumed_lock);
            json_array_append_new(resumed,
                                  json_pack("{s:i, s:I}", "part", pt->part < 0 ? 0 : pt->part,
                                            "from", (json_int_t)from));
            pthread_mutex_unlock(&resumed_lock);
        }
        offset = from;
        err_clear(err);
        sleep(1);
    }
}

/* The directories of the tree way: the container's upper directory, then
 * each volume's, in the order the source sends them. */
static int move_in_tree_dirs(app *a, const journal_op *op, const replicaset_record *r,
                             char (*dirs)[MOVE_DIR_MAX], size_t max, size_t *n, gb_err *err)
{
    *n = 0;
    if (carry_tree_upper(a->docker, r->container_id, dirs[0], MOVE_DIR_MAX, err) < 0)
        return -1;
    *n = 1;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(op->data, "volumes"), i, v)
    {
        const char *vname = json_string_value(json_object_get(v, "name"));
        if (*n == max)
            return err_set(err, ERR_INVALID_PARAMS, "too many volumes");
        if (!vname || volumes_host_dir(a, vname, dirs[*n], MOVE_DIR_MAX, err) < 0)
            return -1;
        (*n)++;
    }
    return 0;
}

/* Every part of the data (the tree way) or the one stream (portable). */
struct part_job {
    app *a;
    journal_op *op;
    const replicaset_record *r;
    const char *auth;
    move_live *live;
    move_part pt;
    json_t *resumed;
    pthread_t thread;
    bool started;
    int rc;
    gb_err err;
};

static void *part_thread(void *arg)
{
    struct part_job *j = arg;
    j->rc = move_in_part(j->a, j->op, j->r, j->auth, j->live, &j->pt, j->resumed, &j->err);
    return NULL;
}

/* Every part of the data (the tree way: the system disk and each volume,
 * side by side, each its own stream, so one's reading and another's
 * writing overlap) or the one stream (portable). */
static int move_in_stream(app *a, journal_op *op, const replicaset_record *r, const char *auth,
                          move_live *live, bool pre, json_t *resumed, gb_err *err)
{
    if (!json_is_true(json_object_get(op->data, "tree"))) {
        move_part pt = {.part = -1};
        return move_in_part(a, op, r, auth, live, &pt, resumed, err);
    }
    char(*dirs)[MOVE_DIR_MAX] = xcalloc(MOVE_IN_PARTS, MOVE_DIR_MAX);
    size_t n = 0;
    int rc = move_in_tree_dirs(a, op, r, dirs, MOVE_IN_PARTS, &n, err);
    struct part_job *jobs = xcalloc(n ? n : 1, sizeof(*jobs));
    for (size_t i = 0; rc == 0 && i < n; i++) {
        jobs[i] = (struct part_job){.a = a,
                                    .op = op,
                                    .r = r,
                                    .auth = auth,
                                    .live = live,
                                    .pt = {.part = (int)i, .pre = pre, .dir = dirs[i]},
                                    .resumed = resumed};
        jobs[i].err = (gb_err)GB_ERR_INIT;
        jobs[i].started = pthread_create(&jobs[i].thread, NULL, part_thread, &jobs[i]) == 0;
        if (!jobs[i].started) /* no thread: on this one */
            part_thread(&jobs[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].started)
            pthread_join(jobs[i].thread, NULL);
        if (rc == 0 && jobs[i].rc < 0) {
            *err = jobs[i].err;
            rc = -1;
        }
    }
    free(jobs);
    free(dirs);
    return rc;
}

/* Load id's running move-in op; ERR_NOT_FOUND when there is none. */
static int move_in_load(app *a, const char *id, journal_op *op, gb_err *err)
{
    if (!journal_id_valid(id))
        return err_set(err, ERR_NOT_FOUND, "no move '%.64s' on this node", id ? id : "");
    int found = journal_load(a->store, id, op, err);
    if (found < 0)
        return -1;
    if (!found || op->kind != JOURNAL_MOVE_IN)
        return err_set(err, ERR_NOT_FOUND, "no move '%s' on node %s", id, nodes_self(a));
    return 0;
}

int replicaset_move_in_pull(app *a, const char *id, const char *auth, bool pre, json_t **out,
                            gb_err *err)
{
    _cleanup_(journal_op_free) journal_op op = {0};
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", op.target);
    journal_op_free(&op);
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    if (op.state != JOURNAL_RUNNING)
        return err_set(err, ERR_STATE_CONFLICT, "move %s is %s on node %s", id,
                       journal_state_name(op.state), nodes_self(a));
    if (journal_step_done(&op, OP_STEP_COPIED)) {
        *out = json_deep_copy(json_object_get(op.data, "copied"));
        return 0;
    }
    bool tree = json_is_true(json_object_get(op.data, "tree"));
    if (pre && !tree)
        return err_set(err, ERR_INVALID_PARAMS,
                       "move %s goes the portable way, which copies only a stopped set", id);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (op_record(&op, &r, err) < 0)
        return -1;
    move_live *live = live_get(id, true);
    live->done = false;
    uint64_t pre_bytes = pre ? 0
                             : (uint64_t)json_integer_value(
                                   json_object_get(json_object_get(op.data, "preCopied"), "bytes"));
    live->bytes = pre_bytes;
    int64_t start = time_mono_ns();
    _cleanup_json_ json_t *resumed = json_array();
    if (move_in_stream(a, &op, &r, auth, live, pre, resumed, err) < 0)
        return -1;
    double seconds = time_since_s(start);
    uint64_t bytes = live->bytes - pre_bytes;
    json_t *got = json_pack("{s:I, s:f, s:f, s:s, s:O}", "bytes", (json_int_t)bytes, "seconds",
                            seconds, "bytesPerSecond", seconds > 0 ? (double)bytes / seconds : 0.0,
                            "way", tree ? "tree" : "portable", "resumed", resumed);
    if (pre) { /* kept for the final pull's answer; no step: before it, a crash undoes */
        json_object_set(op.data, "preCopied", got);
        if (journal_save(a->store, &op, err) < 0) {
            json_decref(got);
            return -1;
        }
        log_info("move %s: %llu bytes from node %s copied while the set runs, in %.3f s", id,
                 (unsigned long long)bytes, op_str(&op, "source"), seconds);
        *out = got;
        return 0;
    }
    json_t *pc = json_object_get(op.data, "preCopied");
    if (pc)
        json_object_set(got, "preCopied", pc);
    move_progress_set(id, live->bytes, seconds, 1);
    json_object_set_new(op.data, "copied", got);
    if (journal_record_step(a->store, &op, OP_STEP_COPIED, err) < 0)
        return -1;
    log_info("move %s: %llu bytes from node %s into %s in %.3f s (%s way%s)", id,
             (unsigned long long)bytes, op_str(&op, "source"), r.container_name, seconds,
             tree ? "tree" : "portable", pc ? ", after a pre-copy" : "");
    *out = json_deep_copy(json_object_get(op.data, "copied"));
    return 0;
}

/* ---- commit -------------------------------------------------------------------------------- */

/* What the set holds here as it lands in state: taken again after a
 * restart of this gpuboxd (the pools forgot prepare's), given back for a
 * stopped set. Returns the state it lands in. */
static enum replicaset_state move_in_settle_holdings(app *a, journal_op *op, replicaset_record *r,
                                                     enum replicaset_state state)
{
    bool holds = live_holds(op->id);
    if (state == RS_STATE_STOPPED) {
        if (holds)
            replicaset_alloc_give_back(a, r);
        replicaset_record_remember_holdings(r);
        return state;
    }
    if (holds)
        return state;
    replicaset_record_remember_holdings(r);
    gb_err e = GB_ERR_INIT;
    if (replicaset_alloc_retake_last(a, r, &e) < 0) {
        log_warn("move %s: %s lands stopped: the cards it was given are taken (%s)", op->id,
                 r->name, e.msg);
        return RS_STATE_STOPPED;
    }
    replicaset_record_forget_last(r);
    return state;
}

int move_in_commit_op(app *a, journal_op *op, json_t **out, gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (op_record(op, &r, err) < 0)
        return -1;
    int st = -1;
    for (int s = RS_STATE_CREATING; s <= RS_STATE_DELETED; s++)
        if (strcmp(replicaset_state_name((enum replicaset_state)s), op_str(op, "state")) == 0)
            st = s;
    enum replicaset_state state =
        move_in_settle_holdings(a, op, &r, st < 0 ? RS_STATE_STOPPED : (enum replicaset_state)st);
    live_hold(op->id, false);
    r.state = state;
    time_iso_now(r.update_time, sizeof(r.update_time));
    /* The history it had, and this version's entry. */
    json_t *history = json_object_get(op->data, "history");
    size_t nh = json_array_size(history);
    store_op *ops = xcalloc(nh + 2, sizeof(*ops));
    char(*keys)[STORE_KEY_MAX] = xcalloc(nh + 1, sizeof(*keys));
    char **values = xcalloc(nh + 1, sizeof(*values));
    size_t n = 0;
    for (size_t i = 0; i < nh; i++) {
        json_t *e = json_array_get(history, i);
        json_int_t v = json_integer_value(json_object_get(e, "version"));
        if (v <= 0 || v >= r.version)
            continue;
        keys_replicaset_history(keys[n], sizeof(keys[n]), r.name, (long)v);
        values[n] = json_dumps(e, JSON_COMPACT);
        ops[n] = (store_op){.kind = STORE_OP_PUT, .key = keys[n], .value = values[n]};
        n++;
    }
    char reason[96];
    snprintf(reason, sizeof(reason), "move from %s", op_str(op, "source"));
    _cleanup_json_ json_t *entry = replicaset_record_history_entry(&r, reason);
    keys_replicaset_history(keys[n], sizeof(keys[n]), r.name, r.version);
    values[n] = json_dumps(entry, JSON_COMPACT);
    ops[n] = (store_op){.kind = STORE_OP_PUT, .key = keys[n], .value = values[n]};
    n++;
    journal_mark(op, OP_STEP_COMMITTED);
    journal_finish(op, JOURNAL_DONE, NULL);
    char okey[STORE_KEY_MAX];
    _cleanup_free_ char *oval = NULL;
    int rc = journal_txn_op(op, okey, &oval, &ops[n], err);
    if (rc == 0)
        rc = replicaset_record_save(a, &r, ops, n + 1, err);
    for (size_t i = 0; i < n; i++)
        free(values[i]);
    free(values);
    free(keys);
    free(ops);
    if (rc < 0) {
        op->state = JOURNAL_RUNNING;
        return err_prefix(err, "move %s: writing the record here", op->id);
    }
    journal_fault("move-in", "committed");
    gb_err e = GB_ERR_INIT;
    if (state == RS_STATE_RUNNING) {
        if (replicaset_container_start(a, &r, &e) < 0)
            log_error("move %s: starting %s: %s (started again at the next start of gpuboxd)",
                      op->id, r.container_name, e.msg);
        else
            replicaset_ssh_after_start(a, &r, NULL, NULL);
    }
    nodes_poke(a);
    log_info("move %s: %s is on this node now, %s, version %d", op->id, r.name,
             replicaset_state_name(state), r.version);
    if (out)
        *out = move_in_answer(a, &r, replicaset_state_name(state));
    return 0;
}

int replicaset_move_in_commit(app *a, const char *id, json_t **out, gb_err *err)
{
    _cleanup_(journal_op_free) journal_op op = {0};
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", op.target);
    journal_op_free(&op);
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    if (op.state == JOURNAL_DONE) {
        _cleanup_(replicaset_record_free) replicaset_record r = {0};
        if (replicaset_record_load(a->store, op.target, &r, err) <= 0)
            return err_set(err, ERR_NOT_FOUND, "move %s: no record of %s here", id, op.target);
        *out = move_in_answer(a, &r, replicaset_state_name(r.state));
        return 0;
    }
    if (op.state != JOURNAL_RUNNING)
        return err_set(err, ERR_STATE_CONFLICT, "move %s is %s on node %s", id,
                       journal_state_name(op.state), nodes_self(a));
    if (!journal_step_done(&op, OP_STEP_COPIED))
        return err_set(err, ERR_STATE_CONFLICT, "move %s: the data has not come yet", id);
    char owner[NODES_NAME_MAX] = "";
    if (nodes_name_owner(a, NODES_REPLICASET, op.target, owner, sizeof(owner), err) < 0)
        return -1;
    if (strcmp(owner, nodes_self(a)) != 0)
        return err_set(err, ERR_CONFLICT,
                       "move %s: the fleet's name index says %s belongs to node %s, not this one",
                       id, op.target, owner[0] ? owner : "none");
    return move_in_commit_op(a, &op, out, err);
}

int replicaset_move_in_abort(app *a, const char *id, const char *why, json_t **out, gb_err *err)
{
    _cleanup_(journal_op_free) journal_op op = {0};
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", op.target);
    journal_op_free(&op);
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    if (op.state == JOURNAL_DONE)
        return err_set(err, ERR_STATE_CONFLICT, "move %s is committed: %s is on node %s now", id,
                       op.target, nodes_self(a));
    if (op.state == JOURNAL_RUNNING &&
        move_in_undo_op(a, &op, why && why[0] ? why : "the source gave the move up", err) < 0)
        return -1;
    *out = json_pack("{s:s, s:s}", "id", id, "state", journal_state_name(op.state));
    return 0;
}

int replicaset_move_abandon(app *a, const char *id, json_t **out, gb_err *err)
{
    _cleanup_(journal_op_free) journal_op op = {0};
    if (!journal_id_valid(id))
        return err_set(err, ERR_NOT_FOUND, "no operation '%.64s'", id ? id : "");
    int found = journal_load(a->store, id, &op, err);
    if (found < 0)
        return -1;
    if (!found)
        return err_set(err, ERR_NOT_FOUND, "no operation '%s' (finished ones are kept 7 days)", id);
    if (op.kind != JOURNAL_MOVE_IN)
        return err_set(err, ERR_STATE_CONFLICT,
                       "operation %s is a %s: only the half of a move on the node a set was going "
                       "to (move-in) can be abandoned; the others settle by themselves",
                       id, journal_kind_name(op.kind));
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", op.target);
    journal_op_free(&op);
    if (move_in_load(a, id, &op, err) < 0)
        return -1;
    if (op.state == JOURNAL_RUNNING) {
        char owner[NODES_NAME_MAX] = "";
        if (nodes_name_owner(a, NODES_REPLICASET, op.target, owner, sizeof(owner), err) < 0)
            return -1;
        if (strcmp(owner, nodes_self(a)) == 0)
            return err_set(err, ERR_STATE_CONFLICT,
                           "move %s: %s is this node's already (the name index says so): it is "
                           "committed, not abandoned",
                           id, op.target);
        if (move_in_undo_op(a, &op, "abandoned by an admin", err) < 0)
            return -1;
    }
    *out = journal_op_to_json(&op);
    return 0;
}

void replicaset_move_in_known(app *a, json_t *known, json_t *owners)
{
    journal_op *ops = NULL;
    size_t n = 0;
    gb_err e = GB_ERR_INIT;
    if (journal_unfinished(a->store, &ops, &n, &e) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != JOURNAL_MOVE_IN)
            continue;
        json_t *rec = json_object_get(ops[i].data, "record");
        const char *container = json_string_value(json_object_get(rec, "containerName"));
        const char *owner = json_string_value(json_object_get(rec, "owner"));
        if (container)
            json_object_set_new(known, container, json_true());
        json_object_set_new(owners, owner && owner[0] ? owner : USER_ANONYMOUS, json_true());
    }
    journal_ops_free(ops, n);
}
