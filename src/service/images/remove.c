/*
 * remove.c - removing an image name from this node (gpubox images rm,
 * DELETE /api/v1/images?name=REF; docs/api.md, "Images").
 *
 * In order: the reference by Docker's grammar; the image must be here
 * (inspect); the caller may remove that name (owners.c: an admin any, a
 * user only their own); no replica set that is not deleted may run it
 * (its spec names the image: a new version of the set would need it
 * again); then Docker's rmi without force, which takes the name away and
 * the image with it when no other name is left, and refuses while a
 * container, gpubox's or not, was made from it. Nothing is recorded: the
 * store holds no image (a pull record of the name stays, harmless: it
 * says whose the name is when it comes back).
 */
#include "util/xalloc.h"
#include "service/images/images_internal.h"

#include <stdio.h>
#include <string.h>

#include "service/replicaset/record.h"
#include "service/users/caller.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The sets (not deleted) whose spec runs the image named name (familiar
 * form): the names the caller may see, "a, b", and how many others. */
struct images_users_ctx {
    const char *name;
    char seen[256];
    size_t nseen, nhidden;
};

static int images_user_one(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    struct images_users_ctx *u = ctx;
    if (r->state == RS_STATE_DELETED || !r->spec.image)
        return 0;
    docker_image_ref ref;
    char familiar[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    gb_err ignored = GB_ERR_INIT;
    if (docker_image_ref_parse(r->spec.image, &ref, &ignored) < 0)
        return 0;
    docker_image_ref_familiar(&ref, familiar, sizeof(familiar));
    if (strcmp(familiar, u->name) != 0)
        return 0;
    if (!users_caller_sees(r->owner)) {
        u->nhidden++;
        return 0;
    }
    size_t used = strlen(u->seen);
    snprintf(u->seen + used, sizeof(u->seen) - used, "%s%s", u->nseen ? ", " : "", r->name);
    u->nseen++;
    return 0;
}

static int images_not_in_use(app *a, const char *ref, const char *name, gb_err *err)
{
    struct images_users_ctx u = {.name = name};
    if (replicaset_records_each(a->store, images_user_one, &u, err) < 0)
        return err_prefix(err, "finding the replica sets that run image %s", ref);
    if (u.nseen == 0 && u.nhidden == 0)
        return 0;
    if (u.nseen == 0)
        return err_set(err, ERR_STATE_CONFLICT,
                       "image '%s' is run by %zu replica set(s) of other users; it stays", ref,
                       u.nhidden);
    return err_set(err, ERR_STATE_CONFLICT,
                   "image '%s' is run by replica set(s) %s%s; delete them first (gpubox rm NAME), "
                   "or move them to another image (gpubox scale NAME --image OTHER)",
                   ref, u.seen, u.nhidden ? " and some of other users" : "");
}

int images_remove(app *a, const char *ref, json_t **out, gb_err *err)
{
    *out = NULL;
    docker_image_ref r;
    if (docker_image_id_like(ref))
        return err_set(err, ERR_INVALID_PARAMS,
                       "give the image's name (repo:tag), not its id '%.80s': gpubox removes one "
                       "name at a time",
                       ref);
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    char name[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX];
    docker_image_ref_familiar(&r, name, sizeof(name));
    _cleanup_json_ json_t *image = NULL;
    if (docker_image_inspect(a->docker, ref, &image, err) < 0 ||
        images_remove_check_inspected(a, ref, image, err) < 0 ||
        images_not_in_use(a, ref, name, err) < 0)
        return -1;
    const char *id = json_string_value(json_object_get(image, "Id"));
    _cleanup_free_ char *image_id = xstrdup(id ? id : "");
    if (docker_image_remove(a->docker, ref, false, err) < 0) {
        if (err && err->code == ERR_CONFLICT)
            err->code = ERR_STATE_CONFLICT; /* a container gpubox does not know uses it */
        return -1;
    }
    /* The image itself went unless another name still holds it. */
    _cleanup_json_ json_t *left = NULL;
    gb_err gone = GB_ERR_INIT;
    bool deleted = !image_id[0] || (docker_image_inspect(a->docker, image_id, &left, &gone) < 0 &&
                                    gone.code == ERR_IMAGE_NOT_FOUND);
    log_info("image %s: removed%s", name,
             deleted ? ", the image with it" : " (the image keeps its other names)");
    *out = json_pack("{s:s, s:s, s:b}", "imageName", name, "imageId", image_id, "deleted", deleted);
    return 0;
}
