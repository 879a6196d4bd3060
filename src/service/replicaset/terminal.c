/*
 * terminal.c - an interactive process in a replica set's container: the
 * terminal of the console and of `gpubox exec -it` (docs/access.md).
 *
 * Opening one checks what an execute checks (the set exists, the caller
 * may see it, it runs), then counts it against the caller's open
 * terminals (at most terminal_max_per_user each: a terminal holds a
 * process, a thread and two sockets for as long as it is open), and starts
 * the process with its stream (docker_exec_stream.c). Without a command it
 * is bash when the image has one, else sh.
 *
 * The count is a small table of users and their open terminals under one
 * mutex, in this process's memory: terminals do not outlive gpuboxd.
 */
#include "util/xalloc.h"
#include "service/replicaset/replicaset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/replicaset/internal.h"
#include "service/tickets/tickets.h"
#include "service/users/caller.h"
#include "util/cleanup.h"
#include "util/log.h"

#define TERMINAL_USERS_MAX 1024

struct replicaset_terminal {
    app *a;
    char owner[USER_NAME_MAX + 1]; /* whose count it is in */
    char name[NAME_MAX_LEN + 1];
    docker_exec_stream *stream;
};

typedef struct terminal_count {
    char user[USER_NAME_MAX + 1];
    unsigned open;
} terminal_count;

static pthread_mutex_t terminal_lock = PTHREAD_MUTEX_INITIALIZER;
static terminal_count terminal_counts[TERMINAL_USERS_MAX];

static unsigned terminal_limit(const app *a)
{
    return a->cfg.terminal_max_per_user ? a->cfg.terminal_max_per_user
                                        : TERMINAL_MAX_PER_USER_DEFAULT;
}

/* Count one more terminal for user, unless they are at the limit. */
static int terminal_count_take(const app *a, const char *user, gb_err *err)
{
    unsigned limit = terminal_limit(a);
    pthread_mutex_lock(&terminal_lock);
    terminal_count *slot = NULL, *free_slot = NULL;
    for (size_t i = 0; i < TERMINAL_USERS_MAX && !slot; i++) {
        if (terminal_counts[i].open && strcmp(terminal_counts[i].user, user) == 0)
            slot = &terminal_counts[i];
        else if (!terminal_counts[i].open && !free_slot)
            free_slot = &terminal_counts[i];
    }
    int rc = 0;
    if (slot && slot->open >= limit)
        rc = err_set(err, ERR_TERMINAL_LIMIT,
                     "%s has %u terminals open, the most one user may (--terminal-max-per-user); "
                     "close one (exit its shell) and try again",
                     user, slot->open);
    else if (!slot && !free_slot)
        rc = err_set(err, ERR_TERMINAL_LIMIT, "too many users have terminals open; try later");
    else if (slot)
        slot->open++;
    else {
        snprintf(free_slot->user, sizeof(free_slot->user), "%s", user);
        free_slot->open = 1;
    }
    pthread_mutex_unlock(&terminal_lock);
    return rc;
}

static void terminal_count_give(const char *user)
{
    pthread_mutex_lock(&terminal_lock);
    for (size_t i = 0; i < TERMINAL_USERS_MAX; i++)
        if (terminal_counts[i].open && strcmp(terminal_counts[i].user, user) == 0) {
            terminal_counts[i].open--;
            break;
        }
    pthread_mutex_unlock(&terminal_lock);
}

/* The set, visible to the caller and running. */
static int terminal_load(app *a, const char *name, replicaset_record *r, gb_err *err)
{
    if (name_check_replicaset(name, err) < 0)
        return -1;
    int found = replicaset_record_load_visible(a->store, name, r, err);
    if (found < 0)
        return -1;
    if (!found || replicaset_record_is_tombstone(r))
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    return replicaset_lifecycle_check(RS_OP_EXECUTE, r, err);
}

/* bash when the image has one, else sh. */
static const char *terminal_default_shell(app *a, const char *container)
{
    static const char *const bashes[] = {"/bin/bash", "/usr/bin/bash"};
    for (size_t i = 0; i < ARRAY_SIZE(bashes); i++) {
        bool exists = false;
        gb_err e = GB_ERR_INIT;
        if (docker_container_path_exists(a->docker, container, bashes[i], &exists, &e) == 0 &&
            exists)
            return bashes[i];
    }
    return "/bin/sh";
}

int replicaset_terminal_ticket(app *a, const char *name, char out[TICKET_SIZE], gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (terminal_load(a, name, &r, err) < 0)
        return -1;
    const caller *who = users_caller_current();
    caller daemon = {.role = USER_ROLE_ADMIN};
    snprintf(daemon.name, sizeof(daemon.name), "%s", USER_ANONYMOUS);
    return tickets_issue(who ? who : &daemon, "terminal", name, TICKET_TTL_S, out, err);
}

int replicaset_terminal_open(app *a, const char *name, const replicaset_terminal_request *req,
                             replicaset_terminal **out, gb_err *err)
{
    *out = NULL;
    if ((req->cols || req->rows) && (req->cols < 1 || req->cols > RS_TERMINAL_SIZE_MAX ||
                                     req->rows < 1 || req->rows > RS_TERMINAL_SIZE_MAX))
        return err_set(err, ERR_INVALID_PARAMS,
                       "cols and rows are %u and %u; give both, each from 1 to %u", req->cols,
                       req->rows, RS_TERMINAL_SIZE_MAX);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (terminal_load(a, name, &r, err) < 0)
        return -1;
    const char *owner = users_caller_owner();
    if (terminal_count_take(a, owner, err) < 0)
        return -1;
    const char *shell[1];
    docker_exec_stream_opts o = {
        .cmd = req->cmd, .ncmd = req->ncmd, .tty = req->tty, .cols = req->cols, .rows = req->rows};
    if (req->ncmd == 0) {
        shell[0] = terminal_default_shell(a, r.container_name);
        o.cmd = shell;
        o.ncmd = 1;
    }
    replicaset_terminal *t = xcalloc(1, sizeof(*t));
    t->a = a;
    snprintf(t->owner, sizeof(t->owner), "%s", owner);
    snprintf(t->name, sizeof(t->name), "%s", name);
    if (docker_exec_stream_open(a->docker, r.container_name, &o, &t->stream, err) < 0) {
        terminal_count_give(t->owner);
        free(t);
        if (err->code != ERR_INVALID_PARAMS && err->code != ERR_NOT_FOUND)
            err->code = ERR_EXECUTE_FAILED;
        return err_prefix(err, "opening a terminal in %s", r.container_name);
    }
    if (a->hooks.set_exec)
        a->hooks.set_exec(a, name); /* someone works in it: not idle */
    log_info("terminal opened in %s for %s (%s)", name, owner, o.cmd[0]);
    *out = t;
    return 0;
}

int replicaset_terminal_fd(const replicaset_terminal *t)
{
    return docker_exec_stream_fd(t->stream);
}

int replicaset_terminal_resize(replicaset_terminal *t, unsigned cols, unsigned rows, gb_err *err)
{
    if (cols < 1 || cols > RS_TERMINAL_SIZE_MAX || rows < 1 || rows > RS_TERMINAL_SIZE_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "cols and rows must be from 1 to %u",
                       RS_TERMINAL_SIZE_MAX);
    return docker_exec_stream_resize(t->stream, cols, rows, err);
}

int replicaset_terminal_output(replicaset_terminal *t, const uint8_t *data, size_t n,
                               docker_exec_emit_fn emit, void *ctx)
{
    return docker_exec_stream_split(t->stream, data, n, emit, ctx);
}

long replicaset_terminal_exit_code(replicaset_terminal *t)
{
    return docker_exec_stream_exit_code(t->stream);
}

unsigned replicaset_terminal_idle_s(const app *a)
{
    return a->cfg.terminal_idle_s;
}

void replicaset_terminal_close(replicaset_terminal *t, bool kill)
{
    if (!t)
        return;
    docker_exec_stream_close(t->stream, kill);
    terminal_count_give(t->owner);
    log_info("terminal in %s for %s closed%s", t->name, t->owner,
             kill ? " (its process killed if it still ran)" : "");
    free(t);
}
