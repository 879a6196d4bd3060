/*
 * fuzz_image_ref.c - image references by Docker's rules, as commit's
 * newImageName and a spec's imageName arrive.
 *
 * Properties: no crash; an accepted reference splits into a repository and
 * a tag that fit their buffers, and "repo:tag" checks again to the same
 * split.
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
    free(ref);
    return 0;
}
