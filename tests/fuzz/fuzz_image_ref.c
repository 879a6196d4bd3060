/*
 * fuzz_image_ref.c - image references by Docker's rules, as commit's
 * newImageName and a spec's imageName arrive.
 *
 * Properties: no crash; an accepted reference splits into a repository and
 * a tag that fit their buffers, and "repo:tag" checks again to the same
 * split. With a digest (docker_image_ref_parse, what every route takes):
 * an accepted reference is the concatenation of its parts, holds nothing
 * that could leave a URL's path segment ('?', '#', '%', a "." or ".."
 * segment, a leading or doubled '/'), and its familiar form (what Docker
 * lists) is a reference too (but for "library/<64 hex>", whose familiar
 * form Docker would read as an id, as it does).
 */
#include "fuzz_util.h"

#include "docker/docker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *ref = fuzz_cstring(data, size);
    char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
    gb_err err;
    if (docker_image_ref_check(ref, repo, sizeof(repo), tag, sizeof(tag), &err) == 0) {
        FUZZ_CHECK(repo[0] && tag[0], "'%s' split into '%s' and '%s'", ref, repo, tag);
        char joined[DOCKER_REPO_MAX + DOCKER_TAG_MAX + 1];
        snprintf(joined, sizeof(joined), "%s:%s", repo, tag);
        char repo2[DOCKER_REPO_MAX], tag2[DOCKER_TAG_MAX];
        FUZZ_CHECK(docker_image_ref_check(joined, repo2, sizeof(repo2), tag2, sizeof(tag2), &err) ==
                       0,
                   "'%s' rejoined as '%s' is refused: %s", ref, joined, err.msg);
        FUZZ_CHECK(strcmp(repo, repo2) == 0 && strcmp(tag, tag2) == 0, "'%s' changed on rejoin",
                   ref);
    }
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, &err) == 0) {
        char joined[DOCKER_REPO_MAX + DOCKER_TAG_MAX + DOCKER_DIGEST_MAX + 2];
        snprintf(joined, sizeof(joined), "%s%s%s%s%s", r.repo, r.tag[0] ? ":" : "", r.tag,
                 r.digest[0] ? "@" : "", r.digest);
        FUZZ_CHECK(strcmp(joined, ref) == 0, "'%s' split and joined is '%s'", ref, joined);
        FUZZ_CHECK(strlen(r.repo) <= 255 && strlen(r.tag) <= 128, "'%s' too long", ref);
        FUZZ_CHECK(!r.digest[0] || docker_image_id_like(r.digest), "'%s': digest '%s'", ref,
                   r.digest);
        FUZZ_CHECK(!strpbrk(ref, "?#% \t\r\n\\") && ref[0] != '/' && !strstr(ref, "//") &&
                       !strstr(ref, "/./") && !strstr(ref, "/../") && strncmp(ref, "./", 2) &&
                       strncmp(ref, "../", 3),
                   "'%s' could leave its path segment", ref);
        char familiar[sizeof(joined)];
        docker_image_ref_familiar(&r, familiar, sizeof(familiar));
        docker_image_ref r2;
        /* As Docker's: "library/<64 hex>" is a name, its familiar form an id. */
        bool id_like = strspn(familiar, "0123456789abcdef") == 64;
        FUZZ_CHECK(id_like || docker_image_ref_parse(familiar, &r2, &err) == 0,
                   "'%s' familiar '%s': %s", ref, familiar, err.msg);
    }
    free(ref);
    return 0;
}
