/*
 * images.h - images on this node: pulling them from a registry (with
 * progress as an operation record), making sure one is there before a
 * container is made from it, and listing them (docs/api.md, "Images").
 *
 * A pull is one Docker call that streams progress. It is not journalled:
 * it changes nothing gpubox records, Docker keeps the layers it already has
 * when it is cut short, and pulling again finishes the job. Its operation
 * record lives in memory (pulls.c): GET /api/v1/operations/{id} shows it
 * while it runs (every layer with its bytes done and total) and for an hour
 * after (at most IMAGES_KEEP_MAX records); a restart of gpuboxd forgets it.
 *
 * Two pulls of the same reference with the same credentials at once are
 * one pull: the second joins the first (same operation id, same outcome).
 *
 * Credentials: a request's own (images_auth), else the ones configured for
 * the reference's registry (--registry-auth-file, registry_auth.c), else
 * none. They reach Docker only in the X-Registry-Auth header; no log line,
 * operation record, store record or error message holds them.
 */
#ifndef GPUBOX_SERVICE_IMAGES_IMAGES_H
#define GPUBOX_SERVICE_IMAGES_IMAGES_H

#include <stdbool.h>

#include <jansson.h>

#include "service/app.h"
#include "util/err.h"

/* Finished pull records kept in memory, at most, and for how long. */
#define IMAGES_KEEP_MAX 100
#define IMAGES_KEEP_S 3600

/* When a create (or a patch of imageName) pulls its image. */
enum images_pull_policy {
    IMAGE_PULL_MISSING, /* only when it is not on the node (the default) */
    IMAGE_PULL_ALWAYS,  /* every time: a newer image behind the same tag is taken */
    IMAGE_PULL_NEVER,   /* never: an absent image is ERR_IMAGE_NOT_FOUND */
};

/* "missing", "always" or "never"; anything else is ERR_INVALID_PARAMS. */
int images_pull_policy_parse(const char *text, enum images_pull_policy *out, gb_err *err);
const char *images_pull_policy_name(enum images_pull_policy p);

/* A request's registry credentials, borrowed. username NULL: none given
 * (the configured ones for the registry, if any, are used). */
typedef struct images_auth {
    const char *username;
    const char *password;
} images_auth;

/* registryAuth of a request body: absent -> auth zeroed and 0; else an
 * object {username, password} (strings, 1-1024 characters, no control
 * characters), borrowed from body. Errors never echo the values. */
int images_auth_from_json(const json_t *body, const char *field, images_auth *auth, gb_err *err);

/* Make sure image ref is on this node before a container is made from it,
 * as policy says; auth may be NULL. 0 when it is there (pulled or not).
 * Errors: never (or missing, when the pull fails) -> ERR_IMAGE_NOT_FOUND
 * (422, as a create answered before pulls existed), the message saying why
 * the pull failed; always -> the pull's error (ERR_REGISTRY_AUTH,
 * ERR_PULL_FAILED, ERR_INVALID_PARAMS for a reference Docker would refuse);
 * ERR_DOCKER_UNAVAILABLE either way. Blocks until a pull is over. */
int images_ensure(app *a, const char *ref, enum images_pull_policy policy, const images_auth *auth,
                  gb_err *err);

/* POST /images/pull: pull ref (docker_image_ref_check'ed). wait: answer
 * when it is over (errors as docker_image_pull's); else at once, the
 * record saying how it goes. *out: {operationId, operation: the record}. */
int images_pull(app *a, const char *ref, const images_auth *auth, bool wait, json_t **out,
                gb_err *err);

/* GET /images: {images: [{id, repoTags, repoDigests, size, created,
 * gpuboxCreated, owners}]}, newest first; name (NULL: all) keeps the images
 * with a tag equal to it, or whose repository is it. A `user` gets only
 * the names they may use (owners.c), and no image they may name none of. */
int images_list(app *a, const char *name, json_t **out, gb_err *err);

/* DELETE /images?name=REF (remove.c): remove name ref from this node,
 * and the image with it when it was its last name (Docker's rmi without
 * force). Refused with ERR_STATE_CONFLICT while a replica set that is not
 * deleted runs it, naming the sets, and when a container gpubox does not
 * know uses it; the caller's right as images_remove_check_inspected.
 * *out: {imageName, imageId, deleted: the image itself went (false: only
 * the name)}. */
int images_remove(app *a, const char *ref, json_t **out, gb_err *err);

/* ---- Owners (owners.c; docs/security.md, "Images") ---- */

/* Where user's commits go: "u/<user>/" (the name in lower case when it is
 * a path component by Docker's rules, else its bytes in hex). */
void images_user_namespace(const char *user, char *buf, size_t size);
/* May the caller start a container from ref, which is here? 0 yes (any
 * admin, viewer or the daemon itself); a user gets ERR_IMAGE_NOT_FOUND,
 * worded as for an image that is not here, for a name that is another's
 * or is not one of the image's names (an id); ERR_INVALID_PARAMS for a
 * name Docker's grammar refuses. */
int images_use_check(app *a, const char *ref, gb_err *err);
/* The same with the image's inspect at hand. */
int images_use_check_inspected(app *a, const char *ref, const json_t *image, gb_err *err);
/* May the caller remove name ref of image (its inspect)? Admins any; a
 * user only a name that is theirs (committed by them, or pulled with
 * their own credentials and nobody's else): ERR_FORBIDDEN for a name that
 * is everyone's, as images_use_check_inspected for one they may not see. */
int images_remove_check_inspected(app *a, const char *ref, const json_t *image, gb_err *err);
/* May the caller commit to repository repo? A user only under their own
 * namespace: else ERR_FORBIDDEN naming the name to use. */
int images_commit_check(const char *repo, gb_err *err);
/* Does repo lie under u/ (names only commits make, never pulled), as
 * Docker lists it (docker.io/u/... too)? */
bool images_ref_is_committed(const char *repo);
/* After an admin's commit to ref: everyone's (a record of a user's pull of
 * that name goes). */
int images_committed_public(app *a, const char *ref, gb_err *err);

/* Before user is removed (service/ownership.c): what of theirs is here,
 * appended to left: the first name of every image one of whose names is
 * theirs (committed under their namespace, or pulled with their own
 * credentials), and "pull of REF" for each such pull that runs. */
int images_user_left(app *a, const char *user, json_t *left, gb_err *err);
/* Once images_user_left found nothing: user out of every pull record
 * (names no longer here, removed with docker rmi) and out of the pull
 * table's readers, so a new user of that name inherits none of it. */
int images_user_forget(app *a, const char *user, gb_err *err);

/* The record of pull id into *out (a `user` reads a pull that is
 * everyone's, or one they asked for or joined): 1 found, 0 not (not a
 * pull's id, or one the caller may not read). */
int images_pull_record(app *a, const char *id, json_t **out);

/* Start-up: the pull table, and the credentials of auth_file (NULL: none;
 * lines "registry username password", '#' comments; the file must not be
 * readable by other users). Shut-down: running pulls are stopped and
 * waited for. */
int images_open(app *a, const char *auth_file, gb_err *err);
void images_close(app *a);

#endif
