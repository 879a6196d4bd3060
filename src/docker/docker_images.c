/*
 * docker_images.c - the image calls: inspect, commit a container to an
 * image, remove an image. References are checked by docker_imageref.c
 * before Docker sees them.
 *
 * An image reference in a path keeps its '/' (registry/repo) and ':'/'@'
 * (tag, digest) as the docker CLI sends them; anything else is escaped.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err)
{
    *out = NULL;
    if (!image || !*image)
        return err_set(err, ERR_IMAGE_EMPTY, "image name is empty");
    _cleanup_free_ char *ref = docker_escape(image, "/:@");
    _cleanup_free_ char *path = xasprintf("/images/%s/json", ref);
    gb_err inner = GB_ERR_INIT;
    if (docker_get(c, path, out, &inner, "inspecting image '%s'", image) == 0)
        return 0;
    if (inner.code == ERR_NOT_FOUND)
        return err_set(err, ERR_IMAGE_NOT_FOUND,
                       "image '%s' is not present locally; pull or import it first "
                       "(docker pull %s)",
                       image, image);
    return err_set(err, inner.code, "%s", inner.msg);
}

/* The commit body: a ContainerConfig holding only Labels, which Docker
 * merges into the container's config (keeping its Cmd, Env, ...). */
static int docker_commit_body(json_t *labels, json_t **body, gb_err *err)
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
    return 0;
}

int docker_container_commit(docker_client *c, const char *id_or_name, const char *repo,
                            const char *tag, const char *comment, json_t *labels, char **image_id,
                            gb_err *err)
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
    if (docker_commit_body(labels, &body, err) < 0)
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
    if (!name || !*name)
        return err_set(err, ERR_IMAGE_EMPTY, "removing an image: the image name is empty");
    _cleanup_free_ char *ref = docker_escape(name, "/:@");
    _cleanup_free_ char *path = xasprintf("/images/%s?force=%d&noprune=0", ref, force ? 1 : 0);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "DELETE", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "removing image '%s'", name);
    if (status == 200 || status == 404)
        return 0;
    return docker_status_err(status, resp, err, "removing image '%s'", name);
}
