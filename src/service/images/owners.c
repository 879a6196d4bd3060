/*
 * owners.c - who may start a container from an image (docs/security.md,
 * "Images"; DESIGN.md section 10).
 *
 * Every name an image is known by (a tag "repo:tag" or a digest
 * "repo@sha256:..." as Docker lists them, in Docker's familiar form) is
 * either everyone's or some users':
 *
 *   - a name under u/<namespace>/ was made by a commit (nothing pulls such
 *     a name: images_pull refuses it); it is the user's its
 *     DOCKER_LABEL_COMMITTED_BY label names, and nobody else's (a user
 *     commits only under their own namespace: images_commit_check);
 *   - any other name is everyone's, unless a user pulled it with their own
 *     credentials (registryAuth) while it was not already here for
 *     everyone: then the store holds the users who did (keys_image), and
 *     a pull with no credentials of one's own (or any pull by an admin)
 *     makes it everyone's again, as an admin's commit to it does.
 *
 * A `user` names an image only by one of its names (an id or a short id
 * Docker would also take is not one), and only by a name that is
 * everyone's or theirs; any other is answered as an image that is not
 * there, with the same words. Admins, viewers and the daemon itself use
 * and see every image.
 */
#include "util/xalloc.h"
#include "service/images/images_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/keys.h"
#include "service/users/caller.h"
#include "store/store.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

#define IMAGES_USER_NS "u/"
#define IMAGES_RECORD_TRIES 8

void images_user_namespace(const char *user, char *buf, size_t size)
{
    /* The user's name when it is one lower-case path component already;
     * else its bytes in hex. Two users whose names map alike share a
     * prefix, never images: the label decides whose each one is. */
    char lower[USER_NAME_MAX + 1];
    size_t n = strlen(user);
    bool plain = n > 0 && n <= USER_NAME_MAX;
    for (size_t i = 0; plain && i < n; i++)
        lower[i] = (char)tolower((unsigned char)user[i]);
    if (plain) {
        lower[n] = '\0';
        char probe[USER_NAME_MAX + 16];
        snprintf(probe, sizeof(probe), IMAGES_USER_NS "%s/x", lower);
        docker_image_ref r;
        gb_err ignored = GB_ERR_INIT;
        plain = docker_image_ref_parse(probe, &r, &ignored) == 0;
    }
    if (plain) {
        snprintf(buf, size, IMAGES_USER_NS "%s/", lower);
        return;
    }
    size_t at = (size_t)snprintf(buf, size, IMAGES_USER_NS);
    for (size_t i = 0; i < n && at + 3 < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%02x", (unsigned char)user[i]);
    snprintf(buf + at, size - at, "/");
}

/* The repository part of a familiar name: before '@', else before the last
 * ':' after the last '/'. */
static size_t name_repo_len(const char *name)
{
    const char *at = strchr(name, '@');
    if (at)
        return (size_t)(at - name);
    const char *slash = strrchr(name, '/');
    const char *colon = strrchr(slash ? slash : name, ':');
    return colon ? (size_t)(colon - name) : strlen(name);
}

static bool name_is_committed(const char *name)
{
    return strncmp(name, IMAGES_USER_NS, strlen(IMAGES_USER_NS)) == 0;
}

/* The users a pull-with-credentials record of name lists: a new array, or
 * NULL when there is no record (everyone's). *rev: its revision (0: none). */
static json_t *record_users(app *a, const char *name, int64_t *rev, gb_err *err)
{
    char key[STORE_KEY_MAX];
    *rev = 0;
    if (!keys_image(key, sizeof(key), name)) {
        err_set(err, ERR_INVALID_PARAMS, "image name '%.300s' is too long", name);
        return NULL;
    }
    store_kv kv = {0};
    int found = store_get(a->store, key, &kv, err);
    if (found <= 0)
        return NULL;
    *rev = kv.mod_revision;
    json_t *j = json_loads(kv.value, 0, NULL);
    store_kv_free(&kv);
    json_t *users = json_object_get(j, "users");
    json_t *out = json_is_array(users) ? json_deep_copy(users) : json_array();
    json_decref(j);
    return out;
}

/* Whose is name, one of an image's names (labels: the image's)? NULL with
 * err clear: everyone's; else the users' array (maybe empty: an admin's). */
static json_t *name_owners(app *a, const char *name, const json_t *labels, gb_err *err)
{
    if (name_is_committed(name)) {
        const char *by = json_string_value(json_object_get(labels, DOCKER_LABEL_COMMITTED_BY));
        json_t *users = json_array();
        if (by && *by)
            json_array_append_new(users, json_string(by));
        return users;
    }
    int64_t rev;
    return record_users(a, name, &rev, err);
}

static bool users_hold(const json_t *users, const char *who)
{
    size_t i;
    json_t *u;
    json_array_foreach(users, i, u)
    {
        if (json_is_string(u) && strcmp(json_string_value(u), who) == 0)
            return true;
    }
    return false;
}

/* May the caller use name? -1 only when the store fails. */
static int name_usable(app *a, const char *name, const json_t *labels, gb_err *err)
{
    if (!users_caller_is_user())
        return 1;
    gb_err inner = GB_ERR_INIT;
    _cleanup_json_ json_t *users = name_owners(a, name, labels, &inner);
    if (inner.code != ERR_OK) {
        *err = inner;
        return -1;
    }
    return !users || users_hold(users, users_caller_owner());
}

/* The Labels of an inspect (Config.Labels) or of a list item (Labels). */
static const json_t *images_labels(const json_t *image)
{
    json_t *l = json_object_get(json_object_get(image, "Config"), "Labels");
    return l ? l : json_object_get(image, "Labels");
}

int images_not_found(gb_err *err, const char *ref)
{
    /* The words docker_image_inspect uses for an image that is not there. */
    return err_set(err, ERR_IMAGE_NOT_FOUND, "image '%s' is not on this server; pull it first",
                   ref);
}

/* Is name one of image's names (RepoTags, RepoDigests)? */
static bool images_named(const json_t *image, const char *name)
{
    const char *lists[] = {"RepoTags", "RepoDigests"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(image, lists[l]), i, t)
        {
            if (json_is_string(t) && strcmp(json_string_value(t), name) == 0)
                return true;
        }
    }
    return false;
}

int images_use_check_inspected(app *a, const char *ref, const json_t *image, gb_err *err)
{
    if (!users_caller_is_user())
        return 0;
    if (docker_image_id_like(ref))
        return images_not_found(err, ref); /* not one of its names */
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    docker_image_ref_familiar(&r, name, sizeof(name));
    if (!images_named(image, name))
        return images_not_found(err, ref); /* an id, or a short one */
    int usable = name_usable(a, name, images_labels(image), err);
    if (usable < 0)
        return -1;
    return usable ? 0 : images_not_found(err, ref);
}

int images_use_check(app *a, const char *ref, gb_err *err)
{
    if (!users_caller_is_user())
        return 0;
    _cleanup_json_ json_t *image = NULL;
    if (docker_image_inspect(a->docker, ref, &image, err) < 0)
        return -1;
    return images_use_check_inspected(a, ref, image, err);
}

int images_remove_check_inspected(app *a, const char *ref, const json_t *image, gb_err *err)
{
    if (!users_caller_is_user())
        return 0;
    if (images_use_check_inspected(a, ref, image, err) < 0)
        return -1; /* not one of its names, or one the user may not see */
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    docker_image_ref_familiar(&r, name, sizeof(name));
    gb_err inner = GB_ERR_INIT;
    _cleanup_json_ json_t *users = name_owners(a, name, images_labels(image), &inner);
    if (inner.code != ERR_OK) {
        *err = inner;
        return -1;
    }
    if (users && users_hold(users, users_caller_owner()))
        return 0;
    return err_set(err, ERR_FORBIDDEN,
                   "image '%s' is everyone's on this server, so only an admin may remove it; you "
                   "may remove the images you committed or pulled with your own credentials",
                   ref);
}

int images_commit_check(const char *repo, gb_err *err)
{
    if (!users_caller_is_user())
        return 0;
    char ns[USER_NAME_MAX * 2 + 8];
    images_user_namespace(users_caller_owner(), ns, sizeof(ns));
    if (strncmp(repo, ns, strlen(ns)) == 0)
        return 0;
    const char *last = strrchr(repo, '/');
    return err_set(err, ERR_FORBIDDEN,
                   "a user commits only under their own namespace %s (images others start from "
                   "are an admin's to publish): name it like %s%.200s",
                   ns, ns, last ? last + 1 : repo);
}

bool images_ref_is_committed(const char *repo)
{
    /* As Docker lists it: docker.io/u/x is u/x too. */
    docker_image_ref r = {0};
    snprintf(r.repo, sizeof(r.repo), "%s", repo);
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    docker_image_ref_familiar(&r, name, sizeof(name));
    return name_is_committed(name);
}

/* ---- records of pulls with a user's credentials ------------------------------------- */

/* Add user to name's record, or take them out of it (add false); user
 * NULL: no record (everyone's). *changed (may be NULL): whether the user
 * was not there before (add) or was (remove). */
static int record_set(app *a, const char *name, const char *user, bool add, bool *changed,
                      gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (changed)
        *changed = false;
    if (!keys_image(key, sizeof(key), name))
        return err_set(err, ERR_INVALID_PARAMS, "image name '%.300s' is too long", name);
    if (!user)
        return store_delete(a->store, key, err);
    for (int attempt = 0; attempt < IMAGES_RECORD_TRIES; attempt++) {
        int64_t rev = 0;
        gb_err inner = GB_ERR_INIT;
        _cleanup_json_ json_t *users = record_users(a, name, &rev, &inner);
        if (inner.code != ERR_OK) {
            *err = inner;
            return -1;
        }
        if (!users)
            users = json_array();
        bool holds = users_hold(users, user);
        if (add ? holds && rev : !holds)
            return 0;
        if (add && !holds) {
            json_array_append_new(users, json_string(user));
        } else if (!add) {
            for (size_t i = json_array_size(users); i-- > 0;)
                if (strcmp(json_string_value(json_array_get(users, i)), user) == 0)
                    json_array_remove(users, i);
        }
        char when[32];
        time_iso_now(when, sizeof(when));
        _cleanup_json_ json_t *value = json_pack("{s:O, s:s}", "users", users, "updateTime", when);
        _cleanup_free_ char *text = json_dumps(value, JSON_COMPACT);
        store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
        store_op op = {.kind = STORE_OP_PUT, .key = key, .value = text};
        if (json_array_size(users) == 0)
            op = (store_op){.kind = STORE_OP_DELETE, .key = key}; /* as before the claim */
        bool landed = false;
        if (store_txn(a->store, &cmp, 1, &op, 1, &landed, NULL, err) < 0)
            return -1;
        if (landed) {
            if (changed)
                *changed = add ? !holds : holds;
            return 0;
        }
    }
    return err_set(err, ERR_CONFLICT, "image %.300s: its record kept changing; try again", name);
}

/* name in Docker's familiar form. */
static int familiar_name(const char *ref, char *name, size_t size, gb_err *err)
{
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    docker_image_ref_familiar(&r, name, size);
    return 0;
}

int images_claim(app *a, const char *ref, const char *user, bool claim, bool *changed, gb_err *err)
{
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    if (familiar_name(ref, name, sizeof(name), err) < 0)
        return -1;
    return record_set(a, name, user, claim, changed, err);
}

int images_record_pull(app *a, const char *ref, const char *user, gb_err *err)
{
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    if (familiar_name(ref, name, sizeof(name), err) < 0 ||
        record_set(a, name, user, true, NULL, err) < 0)
        return -1;
    /* The digests of the repository pulled name the same bytes. */
    _cleanup_json_ json_t *image = NULL;
    gb_err inner = GB_ERR_INIT;
    if (docker_image_inspect(a->docker, ref, &image, &inner) < 0)
        return 0; /* not here (a failed pull): only the name is claimed */
    size_t repo_len = name_repo_len(name), i;
    json_t *d;
    json_array_foreach(json_object_get(image, "RepoDigests"), i, d)
    {
        const char *digest = json_string_value(d);
        if (digest && strncmp(digest, name, repo_len) == 0 && digest[repo_len] == '@' &&
            record_set(a, digest, user, true, NULL, err) < 0)
            return -1;
    }
    return 0;
}

int images_committed_public(app *a, const char *ref, gb_err *err)
{
    return images_record_pull(a, ref, NULL, err);
}

int images_pull_owner(app *a, const char *ref, const images_auth *auth, bool *private_pull,
                      bool *absent, gb_err *err)
{
    *private_pull = *absent = false;
    if (!users_caller_is_user() || !auth || !auth->username)
        return 0;
    _cleanup_json_ json_t *image = NULL;
    gb_err inner = GB_ERR_INIT;
    if (docker_image_inspect(a->docker, ref, &image, &inner) < 0) {
        if (inner.code != ERR_IMAGE_NOT_FOUND) {
            *err = inner;
            return -1;
        }
        *private_pull = *absent = true;
        return 0;
    }
    /* Here for everyone already: the registry's bytes behind a name that is
     * everyone's stay everyone's (else one user's pull could take an image
     * away from all the others). */
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    if (familiar_name(ref, name, sizeof(name), err) < 0)
        return -1;
    int64_t rev;
    _cleanup_json_ json_t *users = record_users(a, name, &rev, &inner);
    if (inner.code != ERR_OK) {
        *err = inner;
        return -1;
    }
    *private_pull = !images_named(image, name) || users != NULL;
    return 0;
}

/* ---- the list ------------------------------------------------------------------------ */

int images_list_filter(app *a, json_t *item, const json_t *docker_item, gb_err *err)
{
    const json_t *labels = images_labels(docker_item);
    const char *lists[] = {"repoTags", "repoDigests"};
    bool everyone = false;
    _cleanup_json_ json_t *owners = json_array();
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        json_t *names = json_object_get(item, lists[l]);
        for (size_t i = 0; i < json_array_size(names);) {
            const char *name = json_string_value(json_array_get(names, i));
            gb_err inner = GB_ERR_INIT;
            _cleanup_json_ json_t *users = name ? name_owners(a, name, labels, &inner) : NULL;
            if (inner.code != ERR_OK) {
                *err = inner;
                return -1;
            }
            everyone = everyone || !users;
            size_t j;
            json_t *u;
            json_array_foreach(users, j, u)
            {
                if (!users_hold(owners, json_string_value(u)))
                    json_array_append(owners, u);
            }
            if (users_caller_is_user() && users && !users_hold(users, users_caller_owner())) {
                json_array_remove(names, i);
                continue;
            }
            i++;
        }
    }
    if (users_caller_is_user() && json_array_size(json_object_get(item, "repoTags")) == 0 &&
        json_array_size(json_object_get(item, "repoDigests")) == 0)
        return 0; /* nothing the caller may name */
    json_object_set_new(item, "owners", everyone ? json_array() : json_incref(owners));
    return 1;
}

/* ---- a user's removal ------------------------------------------------------------------ */

/* Is user among the owners of one of image's names? The first such name. */
static const char *images_owned_name(app *a, const json_t *image, const char *user, gb_err *err)
{
    const char *lists[] = {"RepoTags", "RepoDigests"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(image, lists[l]), i, t)
        {
            const char *name = json_string_value(t);
            if (!name || strncmp(name, "<none>", 6) == 0)
                continue;
            gb_err inner = GB_ERR_INIT;
            _cleanup_json_ json_t *users = name_owners(a, name, images_labels(image), &inner);
            if (inner.code != ERR_OK) {
                *err = inner;
                return NULL;
            }
            if (users && users_hold(users, user))
                return name;
        }
    }
    return NULL;
}

int images_user_left(app *a, const char *user, json_t *left, gb_err *err)
{
    _cleanup_json_ json_t *list = NULL;
    if (docker_image_list(a->docker, &list, err) < 0)
        return -1;
    size_t i;
    json_t *image;
    json_array_foreach(list, i, image)
    {
        gb_err inner = GB_ERR_INIT;
        const char *name = images_owned_name(a, image, user, &inner);
        if (inner.code != ERR_OK) {
            *err = inner;
            return -1;
        }
        if (name)
            json_array_append_new(left, json_string(name));
    }
    images_pulls_running_for(a, user, left);
    return 0;
}

int images_user_forget(app *a, const char *user, gb_err *err)
{
    /* What images_user_left found nothing under: records of names no
     * longer here (removed with docker rmi). A record that keeps other
     * users keeps them; one left empty goes, as a pull's claim given back
     * does (the name is not here: whoever pulls it next decides anew). */
    store_kvs kvs = {0};
    if (store_range(a->store, KEYS_IMAGES, &kvs, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < kvs.n && rc == 0; i++) {
        const char *name = keys_image_ref(kvs.items[i].key);
        if (!name)
            continue;
        _cleanup_json_ json_t *j = json_loads(kvs.items[i].value, 0, NULL);
        if (users_hold(json_object_get(j, "users"), user))
            rc = record_set(a, name, user, false, NULL, err);
    }
    store_kvs_free(&kvs);
    images_pulls_forget_user(a, user);
    return rc < 0 ? err_prefix(err, "forgetting the image records of %s", user) : 0;
}
