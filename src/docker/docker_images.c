/*
 * docker_images.c - the image calls: inspect, commit a container to an
 * image, remove an image. References are checked by docker_imageref.c
 * before Docker sees them.
 *
 * An image name reaches a URL only once it is a reference by Docker's
 * grammar (docker_image_ref_parse) or an image id: "../containers/x" is
 * refused before any call, so a name cannot walk to another route. In the
 * path it keeps its '/' (registry/repo) and ':' (port, tag) as the docker
 * CLI sends them; anything else ('@' of a digest included) is escaped.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* image as a path segment: a reference by Docker's grammar or an id. */
static char *docker_image_path_ref(const char *image, gb_err *err)
{
    docker_image_ref parsed;
    if (!docker_image_id_like(image) && docker_image_ref_parse(image, &parsed, err) < 0)
        return NULL;
    return docker_escape(image, "/:");
}

int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *ref = docker_image_path_ref(image, err);
    if (!ref)
        return -1;
    _cleanup_free_ char *path = xasprintf("/images/%s/json", ref);
    gb_err inner = GB_ERR_INIT;
    if (docker_get(c, path, out, &inner, "inspecting image '%s'", image) == 0)
        return 0;
    if (inner.code == ERR_NOT_FOUND)
        return err_set(err, ERR_IMAGE_NOT_FOUND, "image '%s' is not on this server; pull it first",
                       image);
    return err_set(err, inner.code, "%s", inner.msg);
}

/* The commit body: a ContainerConfig holding Labels and (when not NULL)
 * Env, which Docker merges into the container's config (keeping its Cmd,
 * WorkingDir, ...; a variable of the container that env does not name is
 * added back, so env names every one to drop, without a value). */
static int docker_commit_body(json_t *labels, const json_t *env, json_t **body, gb_err *err)
{
    if (labels) {
        const char *key;
        json_t *value;
        bool strings = json_is_object(labels);
        json_object_foreach(labels, key, value) strings = strings && json_is_string(value);
        if (!strings)
            return err_set(err, ERR_INVALID_PARAMS, "image labels must be an object of strings");
    }
    *body = labels ? json_pack("{s:O}", "Labels", labels) : json_object();
    if (env)
        json_object_set_new(*body, "Env", json_deep_copy(env));
    return 0;
}

int docker_container_commit(docker_client *c, const char *id_or_name, const char *repo,
                            const char *tag, const char *comment, json_t *labels, const json_t *env,
                            char **image_id, gb_err *err)
{
    if (image_id)
        *image_id = NULL;
    if (!id_or_name || !*id_or_name)
        return err_set(err, ERR_INVALID_PARAMS, "committing: container name or id is empty");
    _cleanup_free_ char *ref = xasprintf("%s:%s", repo ? repo : "", tag && *tag ? tag : "latest");
    char repo_ok[DOCKER_REPO_MAX], tag_ok[DOCKER_TAG_MAX];
    if (docker_image_ref_check(ref, repo_ok, sizeof(repo_ok), tag_ok, sizeof(tag_ok), err) < 0)
        return err_prefix(err, "committing container '%s'", id_or_name);
    _cleanup_json_ json_t *body = NULL;
    if (docker_commit_body(labels, env, &body, err) < 0)
        return err_prefix(err, "committing container '%s'", id_or_name);

    _cleanup_free_ char *c_esc = docker_escape(id_or_name, NULL);
    _cleanup_free_ char *r_esc = docker_escape(repo_ok, NULL);
    _cleanup_free_ char *t_esc = docker_escape(tag_ok, NULL);
    _cleanup_free_ char *m_esc = docker_escape(comment ? comment : "", NULL);
    /* pause=1: the container is frozen while its filesystem is read, so
     * the image is one moment's state. */
    _cleanup_free_ char *path = xasprintf("/commit?container=%s&repo=%s&tag=%s&comment=%s&pause=1",
                                          c_esc, r_esc, t_esc, m_esc);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, body, DOCKER_LONG_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "committing container '%s' to %s", id_or_name, ref);
    if (status != 201)
        return docker_status_err(status, resp, err, "committing container '%s' to %s", id_or_name,
                                 ref);
    const char *id = json_string_value(json_object_get(resp, "Id"));
    if (!id)
        return err_set(err, ERR_INTERNAL, "committing container '%s': Docker's answer has no Id",
                       id_or_name);
    if (image_id)
        *image_id = xstrdup(id);
    return 0;
}

int docker_image_remove(docker_client *c, const char *name, bool force, gb_err *err)
{
    _cleanup_free_ char *ref = docker_image_path_ref(name, err);
    if (!ref)
        return err_prefix(err, "removing an image");
    _cleanup_free_ char *path = xasprintf("/images/%s?force=%d&noprune=0", ref, force ? 1 : 0);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "DELETE", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "removing image '%s'", name);
    if (status == 200 || status == 404)
        return 0;
    return docker_status_err(status, resp, err, "removing image '%s'", name);
}
