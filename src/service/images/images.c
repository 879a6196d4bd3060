/*
 * images.c - the image service's entry points (images.h): a pull asked for
 * by a request, an image made sure of before a container is made from it,
 * and the list of images on the node. The pulls themselves run through
 * the pull table (pulls.c).
 */
#include "util/xalloc.h"
#include "service/images/images_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/users/caller.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/time.h"

#define IMAGE_AUTH_MAX 1024

static const char *const images_policies[] = {"missing", "always", "never"};

int images_pull_policy_parse(const char *text, enum images_pull_policy *out, gb_err *err)
{
    for (size_t i = 0; text && i < ARRAY_SIZE(images_policies); i++)
        if (strcmp(text, images_policies[i]) == 0) {
            *out = (enum images_pull_policy)i;
            return 0;
        }
    return err_set(err, ERR_INVALID_PARAMS, "pull is '%.32s'; use missing, always or never",
                   text ? text : "");
}

const char *images_pull_policy_name(enum images_pull_policy p)
{
    return (size_t)p < ARRAY_SIZE(images_policies) ? images_policies[p] : "?";
}

/* One credential string: present, 1-IMAGE_AUTH_MAX characters, no control
 * characters. The message names the field, never the value. */
static int images_auth_text(const json_t *auth, const char *field, const char *key,
                            const char **out, gb_err *err)
{
    json_t *v = json_object_get(auth, key);
    if (!json_is_string(v))
        return err_set(err, ERR_INVALID_PARAMS, "%s.%s must be a string%s", field, key,
                       v ? "" : " (it is missing)");
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || n > IMAGE_AUTH_MAX || strlen(s) != n)
        return err_set(err, ERR_INVALID_PARAMS, "%s.%s must be 1-%d characters", field, key,
                       IMAGE_AUTH_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return err_set(err, ERR_INVALID_PARAMS, "%s.%s contains a control character", field,
                           key);
    *out = s;
    return 0;
}

int images_auth_from_json(const json_t *body, const char *field, images_auth *auth, gb_err *err)
{
    *auth = (images_auth){0};
    json_t *j = json_object_get(body, field);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_object(j))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s must be an object {\"username\": ..., \"password\": ...}", field);
    const char *key;
    json_t *value;
    json_object_foreach(j, key, value)
    {
        if (strcmp(key, "username") != 0 && strcmp(key, "password") != 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "unknown field '%.64s' in %s; it takes username and password", key,
                           field);
    }
    if (images_auth_text(j, field, "username", &auth->username, err) < 0 ||
        images_auth_text(j, field, "password", &auth->password, err) < 0) {
        *auth = (images_auth){0};
        return -1;
    }
    return 0;
}

/* The X-Registry-Auth value for ref: the request's credentials, else the
 * configured ones of its registry, else NULL. */
static char *images_xauth(app *a, const char *ref, const images_auth *auth)
{
    char registry[DOCKER_REPO_MAX];
    docker_image_ref_registry(ref, registry, sizeof(registry));
    /* Docker Hub's credentials are filed under its v1 index address. */
    const char *server =
        strcmp(registry, "docker.io") == 0 ? "https://index.docker.io/v1/" : registry;
    if (auth && auth->username)
        return docker_registry_auth(auth->username, auth->password, server);
    const images_cred *cred = images_registry_cred(a->images, registry);
    return cred ? docker_registry_auth(cred->username, cred->password, server) : NULL;
}

/* ref as "repo:tag" (or "repo@digest"), checked as Docker would check it;
 * *r gets its parts. */
static int images_canonical(const char *ref, docker_image_ref *r, char *out, size_t size,
                            gb_err *err)
{
    if (docker_image_ref_parse(ref, r, err) < 0)
        return -1;
    if (r->digest[0])
        snprintf(out, size, "%s@%s", r->repo, r->digest);
    else
        snprintf(out, size, "%s:%s", r->repo, r->tag[0] ? r->tag : "latest");
    return 0;
}

int images_pull(app *a, const char *ref, const images_auth *auth, bool wait, json_t **out,
                gb_err *err)
{
    *out = NULL;
    docker_image_ref r;
    char canonical[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    if (images_canonical(ref, &r, canonical, sizeof(canonical), err) < 0)
        return -1;
    if (images_ref_is_committed(r.repo))
        return err_set(err, ERR_INVALID_PARAMS,
                       "image '%.300s' lies under u/, where gpubox keeps the images users "
                       "commit on this node: such a name is never pulled",
                       ref);
    bool private_pull = false, absent = false;
    if (images_pull_owner(a, canonical, auth, &private_pull, &absent, err) < 0)
        return -1;
    const char *owner = private_pull ? users_caller_owner() : NULL;
    json_t *record = NULL;
    int rc =
        images_pull_run(a, canonical, images_xauth(a, canonical, auth),
                        (images_pull_for){.owner = owner, .claim = absent}, wait, &record, err);
    if (rc < 0) {
        json_decref(record);
        return -1;
    }
    /* A pull this one joined was someone else's: it is this caller's (or
     * everyone's) as well now. */
    if (wait && images_record_pull(a, canonical, owner, err) < 0) {
        json_decref(record);
        return -1;
    }
    *out = json_pack("{s:s, s:o}", "operationId", json_string_value(json_object_get(record, "id")),
                     "operation", record);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

/* Is ref here, for the caller to use? 1 yes, 0 no (not here, or another's:
 * *err says so as for an image not here), -1 another error. */
static int images_here(app *a, const char *ref, gb_err *err)
{
    _cleanup_json_ json_t *found = NULL;
    gb_err inner = GB_ERR_INIT;
    if (docker_image_inspect(a->docker, ref, &found, &inner) == 0 &&
        images_use_check_inspected(a, ref, found, &inner) == 0)
        return 1;
    *err = inner;
    return inner.code == ERR_IMAGE_NOT_FOUND ? 0 : -1;
}

int images_ensure(app *a, const char *ref, enum images_pull_policy policy, const images_auth *auth,
                  gb_err *err)
{
    /* Docker's grammar first: no name it refuses reaches a URL. */
    docker_image_ref r;
    bool id = docker_image_id_like(ref); /* an admin's; never pulled */
    if (!id && docker_image_ref_parse(ref, &r, err) < 0)
        return err_prefix(err, "imageName");
    /* A name under u/ is made by commits on this node, never pulled. */
    bool local_only = id || images_ref_is_committed(r.repo);
    if (policy != IMAGE_PULL_ALWAYS || local_only) {
        int here = images_here(a, ref, err);
        if (here != 0)
            return here > 0 ? 0 : -1;
        if (policy == IMAGE_PULL_NEVER || local_only)
            return images_not_found(err, ref);
    }
    _cleanup_json_ json_t *answer = NULL;
    gb_err pull = GB_ERR_INIT;
    if (images_pull(a, ref, auth, true, &answer, &pull) == 0)
        return images_use_check(a, ref, err);
    if (policy == IMAGE_PULL_ALWAYS || pull.code == ERR_DOCKER_UNAVAILABLE) {
        *err = pull;
        return -1;
    }
    /* Not there and not to be had: what a create answered before pulls. */
    return err_set(err, ERR_IMAGE_NOT_FOUND,
                   "image '%.300s' is not on this server, and pulling it failed: %s", ref,
                   pull.msg);
}

/* One image of Docker's list as the API shows it. */
static json_t *images_item(const json_t *d)
{
    json_t *tags = json_object_get(d, "RepoTags"), *digests = json_object_get(d, "RepoDigests");
    json_t *created = json_object_get(d, "Created");
    char when[32] = "";
    if (json_is_integer(created))
        time_iso_format((time_t)json_integer_value(created), when, sizeof(when));
    const char *mark =
        json_string_value(json_object_get(json_object_get(d, "Labels"), DOCKER_LABEL_CREATED));
    return json_pack("{s:s?, s:o, s:o, s:I, s:s, s:b}", "id",
                     json_string_value(json_object_get(d, "Id")), "repoTags",
                     json_is_array(tags) ? json_deep_copy(tags) : json_array(), "repoDigests",
                     json_is_array(digests) ? json_deep_copy(digests) : json_array(), "size",
                     (json_int_t)json_integer_value(json_object_get(d, "Size")), "created", when,
                     "gpuboxCreated", mark && strcmp(mark, "true") == 0);
}

/* Does a tag "repo:tag" match name: equal, or its repository is name? */
static bool images_tag_matches(const char *tag, const char *name)
{
    if (strcmp(tag, name) == 0)
        return true;
    const char *colon = strrchr(tag, ':');
    size_t n = colon ? (size_t)(colon - tag) : strlen(tag);
    return strlen(name) == n && strncmp(tag, name, n) == 0;
}

static bool images_wanted(const json_t *d, const char *name)
{
    if (!name)
        return true;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(d, "RepoTags"), i, t)
    {
        if (json_is_string(t) && images_tag_matches(json_string_value(t), name))
            return true;
    }
    return false;
}

int images_list(app *a, const char *name, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_json_ json_t *list = NULL;
    if (docker_image_list(a->docker, &list, err) < 0)
        return -1;
    json_t *images = json_array();
    size_t i;
    json_t *d;
    /* Docker lists the newest first already. */
    json_array_foreach(list, i, d)
    {
        if (!images_wanted(d, name))
            continue;
        json_t *item = images_item(d);
        int keep = images_list_filter(a, item, d, err);
        if (keep > 0)
            json_array_append_new(images, item);
        else
            json_decref(item);
        if (keep < 0) {
            json_decref(images);
            return -1;
        }
    }
    *out = json_pack("{s:o}", "images", images);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
