/*
 * docker_exec.c - run a command in a running container and collect its
 * output and exit code, within a time limit and an output cap.
 *
 * Three calls, as `docker exec` makes them: POST /containers/{id}/exec
 * creates the exec (no TTY, stdout and stderr attached), POST
 * /exec/{eid}/start runs it and answers with the multiplexed output stream
 * until the process ends (read by the demultiplexer of docker_stream.c, in
 * truncate mode), and GET /exec/{eid}/json gives the exit code.
 *
 * Two things end an exec early, and both kill the process tree (the
 * watchdog of docker_exec_watch.c), since Docker has no call to end an exec:
 *   - the deadline, timeout_s after docker_exec_run began;
 *   - the drain limit: past cap_bytes output is read and dropped so the
 *     process never blocks on a full pipe, but after DOCKER_EXEC_DRAIN_MAX
 *     bytes in all it is killed, so `yes` without a time limit cannot keep a
 *     worker busy for ever.
 * A watchdog thread does the killing while the reader keeps reading, so the
 * stream ends the ordinary way, with everything written before the kill
 * and the exit code (137) Docker records.
 *
 * When Docker cannot start the command (no such executable, no such
 * workdir), it writes its error text into the stream and records an exit
 * code of 126 and no process id; that is turned into ERR_INVALID_PARAMS
 * with Docker's words rather than passed off as the command's output.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/time.h"

/* After the stream ends (or the kill), how long to wait for Docker to
 * record the exit code. */
#define DOCKER_EXEC_EXIT_WAIT_MS 5000
/* After the deadline, how long the killed processes have to close the
 * stream before the reader gives up on it (Docker itself closes it 2 s
 * after the process exits, should a stray process hold the pipes). */
#define DOCKER_EXEC_KILL_GRACE_MS 15000

/* POST /containers/{id}/exec: *exec_id (malloc'd) names the new exec. */
static int docker_exec_create(docker_client *c, const char *id, const char *user,
                              const char *const *cmd, size_t ncmd, const char *workdir,
                              char **exec_id, gb_err *err)
{
    _cleanup_json_ json_t *body =
        json_pack("{s:b, s:b, s:b, s:b, s:[]}", "AttachStdin", false, "AttachStdout", true,
                  "AttachStderr", true, "Tty", false, "Cmd");
    for (size_t i = 0; i < ncmd; i++)
        json_array_append_new(json_object_get(body, "Cmd"), json_string(cmd[i]));
    if (workdir && *workdir)
        json_object_set_new(body, "WorkingDir", json_string(workdir));
    if (user && *user)
        json_object_set_new(body, "User", json_string(user));
    _cleanup_free_ char *path = docker_container_path(id, "/exec", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "running '%s' in container '%s'", cmd[0], id);
    if (status != 201)
        return docker_status_err(status, resp, err, "running '%s' in container '%s'", cmd[0], id);
    const char *eid = json_string_value(json_object_get(resp, "Id"));
    if (!eid)
        return err_set(err, ERR_INTERNAL,
                       "running '%s' in container '%s': Docker's answer has no Id", cmd[0], id);
    *exec_id = xstrdup(eid);
    return 0;
}

int docker_exec_inspect(docker_client *c, const char *eid, struct docker_exec_state *st,
                        gb_err *err)
{
    char path[160];
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    _cleanup_json_ json_t *info = NULL;
    if (docker_get(c, path, &info, err, "inspecting exec %.12s", eid) < 0)
        return -1;
    st->running = json_is_true(json_object_get(info, "Running"));
    st->pid = (long)json_integer_value(json_object_get(info, "Pid"));
    json_t *code = json_object_get(info, "ExitCode");
    st->exit_code = json_is_integer(code) ? (long)json_integer_value(code) : -1;
    const char *cid = json_string_value(json_object_get(info, "ContainerID"));
    snprintf(st->container_id, sizeof(st->container_id), "%s", cid ? cid : "");
    return 0;
}

/* Wait until Docker has recorded the exec's end, up to DOCKER_EXEC_EXIT_WAIT_MS. */
static int docker_exec_wait_exit(docker_client *c, const char *eid, long *pid, long *exit_code,
                                 gb_err *err)
{
    long until = time_mono_ms() + DOCKER_EXEC_EXIT_WAIT_MS;
    for (;;) {
        struct docker_exec_state st;
        if (docker_exec_inspect(c, eid, &st, err) < 0)
            return -1;
        *pid = st.pid;
        *exit_code = st.running ? -1 : st.exit_code;
        if (!st.running || time_mono_ms() >= until)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    }
}

/* The reader's sink: the demultiplexer, and a word to the watchdog when
 * the drain limit passes. */
struct docker_exec_reader {
    struct docker_demux *demux;
    struct docker_exec_watch *watch;
};

static size_t docker_exec_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_exec_reader *r = userdata;
    bool was_exceeded = r->demux->drain_exceeded;
    size_t n = docker_demux_sink(data, size, nmemb, r->demux);
    if (r->demux->drain_exceeded && !was_exceeded)
        docker_exec_watch_fire(r->watch);
    return n;
}

/* Docker's words when it could not start the command: the first line of
 * what it wrote into the stream. */
static void docker_exec_start_error(const struct docker_demux *d, char *buf, size_t size)
{
    const struct docker_buf *b = d->out[0].len ? &d->out[0] : &d->out[1];
    const char *text = b->data ? b->data : "no reason given";
    snprintf(buf, size, "%.*s", (int)strcspn(text, "\r\n"), text);
}

static void docker_exec_results(struct docker_demux *d, docker_exec_result *out)
{
    out->stdout_truncated = d->out[0].overflow;
    out->stderr_truncated = d->out[1].overflow;
    /* Past the drain limit the output was cut even if (tiny frames) no
     * stream reached its cap. */
    if (d->drain_exceeded && !out->stdout_truncated && !out->stderr_truncated)
        out->stdout_truncated = true;
    out->out_stdout = docker_buf_take(&d->out[0]);
    out->out_stderr = docker_buf_take(&d->out[1]);
}

/* POST /exec/{eid}/start and read the stream while the watchdog w (already
 * running) keeps the time. */
static int docker_exec_read(docker_client *c, const char *eid, long deadline_ms,
                            struct docker_exec_watch *w, struct docker_demux *d,
                            struct docker_req *req, gb_err *err)
{
    char path[160];
    snprintf(path, sizeof(path), "/exec/%s/start", eid);
    _cleanup_json_ json_t *body = json_pack("{s:b, s:b}", "Detach", false, "Tty", false);
    struct docker_exec_reader reader = {.demux = d, .watch = w};
    *req = (struct docker_req){.method = "POST",
                               .path = path,
                               .body = body,
                               .sink = docker_exec_sink,
                               .sink_ctx = &reader};
    /* A backstop only: the watchdog ends the stream at the deadline. */
    if (deadline_ms)
        req->timeout_ms = deadline_ms - time_mono_ms() + DOCKER_EXEC_KILL_GRACE_MS;
    int rc = docker_send(c, req, err);
    req->path = NULL; /* both die with this frame */
    req->body = NULL;
    return rc;
}

/* Start the exec with its watchdog, read it to its end, and fill out. */
static int docker_exec_start(docker_client *c, const char *id, const char *cmd0, const char *eid,
                             long deadline_ms, struct docker_demux *d, docker_exec_result *out,
                             gb_err *err)
{
    struct docker_exec_watch *w = docker_exec_watch_start(c, eid, deadline_ms, err);
    if (!w)
        return err_prefix(err, "running '%s' in container '%s'", cmd0, id);
    struct docker_req req;
    int rc = docker_exec_read(c, eid, deadline_ms, w, d, &req, err);
    bool killed = false, by_deadline = false;
    gb_err watch_err = GB_ERR_INIT;
    if (docker_exec_watch_finish(w, &killed, &by_deadline, &watch_err) < 0)
        return err_set(err, watch_err.code, "stopping '%s' in container '%s': %s", cmd0, id,
                       watch_err.msg);
    if (rc < 0)
        return err_prefix(err, "running '%s' in container '%s'", cmd0, id);
    if (req.status != 200) {
        _cleanup_json_ json_t *resp = docker_demux_error_body(d);
        return docker_status_err(req.status, resp, err, "running '%s' in container '%s'", cmd0, id);
    }
    long pid = 0;
    if (docker_exec_wait_exit(c, eid, &pid, &out->exit_code, err) < 0)
        return err_prefix(err, "running '%s' in container '%s'", cmd0, id);
    if (pid == 0 && (out->exit_code == 126 || out->exit_code == 127)) {
        char why[400];
        docker_exec_start_error(d, why, sizeof(why));
        return err_set(err, ERR_INVALID_PARAMS, "cannot run '%s' in container '%s': %s", cmd0, id,
                       why);
    }
    if (docker_demux_broken(d) && !killed)
        return err_set(err, ERR_INTERNAL,
                       "running '%s' in container '%s': Docker's output stream is not in the "
                       "multiplexed format",
                       cmd0, id);
    out->timed_out = killed && by_deadline;
    docker_exec_results(d, out);
    return 0;
}

int docker_exec_run(docker_client *c, const char *id, const char *const *cmd, size_t ncmd,
                    const char *workdir, int timeout_s, size_t cap_bytes, docker_exec_result *out,
                    gb_err *err)
{
    return docker_exec_run_as(c, id, NULL, cmd, ncmd, workdir, timeout_s, cap_bytes, out, err);
}

int docker_exec_run_as(docker_client *c, const char *id, const char *user, const char *const *cmd,
                       size_t ncmd, const char *workdir, int timeout_s, size_t cap_bytes,
                       docker_exec_result *out, gb_err *err)
{
    *out = (docker_exec_result){.exit_code = -1};
    long deadline_ms = timeout_s > 0 ? time_mono_ms() + (long)timeout_s * 1000 : 0;
    if (!cmd || ncmd == 0 || !cmd[0] || !*cmd[0])
        return err_set(err, ERR_INVALID_PARAMS, "exec in container '%s': the command is empty",
                       id ? id : "");
    for (size_t i = 0; i < ncmd; i++)
        if (!cmd[i])
            return err_set(err, ERR_INVALID_PARAMS,
                           "exec in container '%s': command argument %zu is NULL", id ? id : "", i);
    _cleanup_free_ char *eid = NULL;
    if (docker_exec_create(c, id, user, cmd, ncmd, workdir, &eid, err) < 0)
        return -1;

    if (cap_bytes == 0)
        cap_bytes = DOCKER_EXEC_DEFAULT_CAP;
    if (cap_bytes > DOCKER_MAX_RESPONSE)
        cap_bytes = DOCKER_MAX_RESPONSE;
    struct docker_demux d;
    docker_demux_init(&d, cap_bytes, true);
    d.drain_limit = DOCKER_EXEC_DRAIN_MAX;
    int rc = docker_exec_start(c, id, cmd[0], eid, deadline_ms, &d, out, err);
    docker_demux_free(&d);
    if (rc < 0)
        docker_exec_result_free(out);
    return rc;
}

void docker_exec_result_free(docker_exec_result *r)
{
    if (!r)
        return;
    free(r->out_stdout);
    free(r->out_stderr);
    *r = (docker_exec_result){.exit_code = -1};
}
