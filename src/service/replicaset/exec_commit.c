/*
 * exec_commit.c - execute a command in a replica set's container, and
 * commit its container to an image.
 *
 * Neither takes the name lock: an exec may run for up to an hour and must
 * not hold up stop or delete of the same set (which simply end it).
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <string.h>

#include "service/images/images.h"
#include "service/ops_timer.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

static int replicaset_load_for(app *a, const char *name, enum replicaset_op op,
                               replicaset_record *r, gb_err *err)
{
    if (name_check_replicaset(name, err) < 0)
        return -1;
    int found = replicaset_record_load_visible(a->store, name, r, err);
    if (found < 0)
        return -1;
    if (!found || replicaset_record_is_tombstone(r))
        return err_set(err, ERR_NOT_FOUND, "no replica set named '%s'", name);
    return replicaset_lifecycle_check(op, r, err);
}

int replicaset_execute(app *a, const char *name, const replicaset_exec_request *req, json_t **out,
                       gb_err *err)
{
    OPS_TIMED(a, "execute", out, err);
    if (req->ncmd == 0)
        return err_set(err, ERR_INVALID_PARAMS, "cmd is empty; give the command to run");
    int timeout = req->timeout_s > 0 ? req->timeout_s : RS_EXEC_DEFAULT_TIMEOUT_S;
    if (timeout > RS_EXEC_MAX_TIMEOUT_S)
        return err_set(err, ERR_INVALID_PARAMS, "timeoutSeconds is %d; at most %d", timeout,
                       RS_EXEC_MAX_TIMEOUT_S);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_for(a, name, RS_OP_EXECUTE, &r, err) < 0)
        return -1;
    if (a->hooks.set_exec)
        a->hooks.set_exec(a, name); /* someone works in it: not idle */
    _cleanup_(docker_exec_result_free) docker_exec_result res = {0};
    if (docker_exec_run(a->docker, r.container_name, req->cmd, req->ncmd, req->workdir, timeout,
                        RS_EXEC_OUTPUT_CAP, &res, err) < 0) {
        if (err->code != ERR_INVALID_PARAMS && err->code != ERR_NOT_FOUND)
            err->code = ERR_EXECUTE_FAILED;
        return err_prefix(err, "running a command in %s", r.container_name);
    }
    const char *so = res.out_stdout ? res.out_stdout : "",
               *se = res.out_stderr ? res.out_stderr : "";
    *out = json_pack("{s:o, s:o, s:I, s:b, s:b, s:b}", "stdout", json_string_lossy(so, strlen(so)),
                     "stderr", json_string_lossy(se, strlen(se)), "exitCode",
                     (json_int_t)res.exit_code, "stdoutTruncated", res.stdout_truncated,
                     "stderrTruncated", res.stderr_truncated, "timedOut", res.timed_out);
    if (!*out)
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}

/* An existing tag may be replaced only when asked and only if gpubox made it. */
static int replicaset_commit_check_target(app *a, const char *image, bool overwrite, gb_err *err)
{
    _cleanup_json_ json_t *existing = NULL;
    gb_err probe = GB_ERR_INIT;
    if (docker_image_inspect(a->docker, image, &existing, &probe) < 0) {
        if (probe.code == ERR_IMAGE_NOT_FOUND || probe.code == ERR_NOT_FOUND)
            return 0;
        *err = probe;
        return -1;
    }
    if (!overwrite)
        return err_set(err, ERR_EXISTS,
                       "image %s already exists; pass \"overwrite\": true to replace it, or pick "
                       "another name",
                       image);
    json_t *labels = json_object_get(json_object_get(existing, "Config"), "Labels");
    const char *made = json_string_value(json_object_get(labels, DOCKER_LABEL_CREATED));
    if (!made || strcmp(made, "true") != 0)
        return err_set(err, ERR_FORBIDDEN,
                       "image %s was not created by gpubox; refusing to overwrite it", image);
    /* Images everyone starts from are an admin's: a user replaces only
     * what they committed themselves. */
    const char *by = json_string_value(json_object_get(labels, DOCKER_LABEL_COMMITTED_BY));
    if (users_caller_is_user() && (!by || strcmp(by, users_caller_owner()) != 0))
        return err_set(err, ERR_FORBIDDEN,
                       "image %s was not committed by %s; a user may overwrite only images they "
                       "committed",
                       image, users_caller_owner());
    return 0;
}

/* The length of env entry e's name (up to its '=', else all of it). */
static size_t env_key_len(const char *e)
{
    return strcspn(e, "=");
}

static bool env_has_key(const json_t *env, const char *e)
{
    size_t n = env_key_len(e), i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        const char *s = json_string_value(v);
        if (s && env_key_len(s) == n && strncmp(s, e, n) == 0)
            return true;
    }
    return false;
}

/* The environment a commit gives its image when the instance's is not
 * kept: that of the image the container started from, and every variable
 * the container added (the request's env, gpubox's own) named without a
 * value. Docker adds back any variable of the container the commit's Env
 * does not name; a name without '=' is one it unsets at every start. */
static json_t *replicaset_commit_env(app *a, const char *container, gb_err *err)
{
    _cleanup_json_ json_t *c = NULL;
    _cleanup_json_ json_t *img = NULL;
    if (docker_container_inspect(a->docker, container, &c, err) < 0)
        return NULL;
    const char *image_id = json_string_value(json_object_get(c, "Image"));
    if (!image_id || docker_image_inspect(a->docker, image_id, &img, err) < 0) {
        if (!image_id)
            err_set(err, ERR_INTERNAL, "container %s: Docker names no image", container);
        return NULL;
    }
    json_t *base = json_object_get(json_object_get(img, "Config"), "Env");
    json_t *env = json_is_array(base) ? json_deep_copy(base) : json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(c, "Config"), "Env"), i, v)
    {
        const char *e = json_string_value(v);
        if (e && !env_has_key(env, e))
            json_array_append_new(env, json_stringn(e, env_key_len(e)));
    }
    return env;
}

int replicaset_commit(app *a, const char *name, const char *image, bool overwrite, bool keep_env,
                      json_t **out, gb_err *err)
{
    OPS_TIMED(a, "commit", out, err);
    char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
    if (!image || !*image)
        return err_set(err, ERR_INVALID_PARAMS,
                       "newImageName is empty; give it like "
                       "\"myimage:v1\"");
    if (docker_image_ref_check(image, repo, sizeof(repo), tag, sizeof(tag), err) < 0)
        return err_prefix(err, "newImageName");
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_load_for(a, name, RS_OP_COMMIT, &r, err) < 0)
        return -1;
    /* A user's images go under their own namespace (images/owners.c). */
    if (images_commit_check(repo, err) < 0)
        return -1;
    char full[DOCKER_REPO_MAX + DOCKER_TAG_MAX + 1];
    snprintf(full, sizeof(full), "%s:%s", repo, tag);
    if (replicaset_commit_check_target(a, full, overwrite, err) < 0)
        return -1;
    _cleanup_json_ json_t *env = keep_env ? NULL : replicaset_commit_env(a, r.container_name, err);
    if (!keep_env && !env) {
        err->code = ERR_COMMIT_FAILED; /* as a failed commit answers */
        return err_prefix(err, "committing %s", r.container_name);
    }
    _cleanup_json_ json_t *labels =
        json_pack("{s:s, s:s, s:s}", DOCKER_LABEL_CREATED, "true", DOCKER_LABEL_COMMITTED_FROM,
                  r.container_name, DOCKER_LABEL_COMMITTED_BY, users_caller_owner());
    _cleanup_free_ char *image_id = NULL;
    char comment[128];
    snprintf(comment, sizeof(comment), "gpubox commit of %s", r.container_name);
    if (docker_container_commit(a->docker, r.container_name, repo, tag, comment, labels, env,
                                &image_id, err) < 0) {
        err->code = ERR_COMMIT_FAILED;
        return err_prefix(err, "committing %s", r.container_name);
    }
    /* An admin's image is everyone's, whoever pulled that name before. */
    if (!users_caller_is_user() && !images_ref_is_committed(repo) &&
        images_committed_public(a, full, err) < 0)
        return err_prefix(err, "committed %s as %s, but", r.container_name, full);
    log_info("replica set %s: committed %s as %s%s", name, r.container_name, full,
             keep_env ? " (with its environment)" : "");
    *out = json_pack("{s:s, s:s, s:b}", "imageName", full, "imageId", image_id ? image_id : "",
                     "keptEnv", keep_env);
    return 0;
}
