/*
 * test_image_ref.c - image references as every route takes them
 * (docker_image_ref_parse: Docker's grammar with an optional digest), their
 * familiar form (what Docker lists in RepoTags and RepoDigests), names that
 * would walk the Engine API, and the namespace a user's commits go under.
 * No Docker: test_docker_images.c compares the grammar with the real one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "docker/docker.h"
#include "service/images/images.h"
#include "util/cleanup.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct parsed {
    const char *ref, *repo, *tag, *digest, *familiar;
};

static void test_parse_accepts(void **state)
{
    (void)state;
    const struct parsed cases[] = {
        {"ubuntu", "ubuntu", "", "", "ubuntu:latest"},
        {"ubuntu:22.04", "ubuntu", "22.04", "", "ubuntu:22.04"},
        {"library/ubuntu:22.04", "library/ubuntu", "22.04", "", "ubuntu:22.04"},
        {"docker.io/library/ubuntu", "docker.io/library/ubuntu", "", "", "ubuntu:latest"},
        {"docker.io/nvidia/cuda:12.4.0-base-ubuntu22.04", "docker.io/nvidia/cuda",
         "12.4.0-base-ubuntu22.04", "", "nvidia/cuda:12.4.0-base-ubuntu22.04"},
        {"index.docker.io/team/app:v1", "index.docker.io/team/app", "v1", "", "team/app:v1"},
        {"library/a/b", "library/a/b", "", "", "library/a/b:latest"},
        {"127.0.0.1:5000/private:v1", "127.0.0.1:5000/private", "v1", "",
         "127.0.0.1:5000/private:v1"},
        {"u/alice/model:v1", "u/alice/model", "v1", "", "u/alice/model:v1"},
        {"ubuntu@sha256:" HEX64, "ubuntu", "", "sha256:" HEX64, "ubuntu@sha256:" HEX64},
        {"reg:5000/a/b:t@sha256:" HEX64, "reg:5000/a/b", "t", "sha256:" HEX64,
         "reg:5000/a/b@sha256:" HEX64},
        {"a__b.c-d---e_f", "a__b.c-d---e_f", "", "", "a__b.c-d---e_f:latest"},
        /* found by fuzz_image_ref: a name whose familiar form is id-like */
        {"library/" HEX64, "library/" HEX64, "", "", HEX64 ":latest"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        docker_image_ref r;
        gb_err e = GB_ERR_INIT;
        if (docker_image_ref_parse(cases[i].ref, &r, &e) != 0)
            fail_msg("'%s' refused: %s", cases[i].ref, e.msg);
        assert_string_equal(r.repo, cases[i].repo);
        assert_string_equal(r.tag, cases[i].tag);
        assert_string_equal(r.digest, cases[i].digest);
        char familiar[600];
        docker_image_ref_familiar(&r, familiar, sizeof(familiar));
        assert_string_equal(familiar, cases[i].familiar);
    }
}

static void test_parse_refuses_engine_api_walks(void **state)
{
    (void)state;
    const char *bad[] = {
        "../containers/foo",
        "..%2fcontainers/foo",
        "ubuntu/../../containers/foo",
        "./ubuntu",
        "ubuntu/.",
        "ubuntu/..",
        "a//b",
        "/ubuntu",
        "ubuntu/",
        "ubuntu?x=1",
        "ubuntu#x",
        "ubuntu%00",
        "ubuntu/json?",
        "Ubuntu",
        "ubuntu:",
        "ubuntu:.x",
        "ubuntu:-x",
        "ubuntu:a/b",
        "ubuntu@",
        "ubuntu@sha256:" HEX64 "0",
        "ubuntu@sha256:0123",
        "ubuntu@sha512:" HEX64,
        "ubuntu@sha256:"
        "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        "ubuntu@sha256:" HEX64 "@sha256:" HEX64,
        "@sha256:" HEX64,
        HEX64,
        "a b",
        "a\nb",
        "reg:port/x",
        "-ubuntu",
        "ubuntu-",
        "a..b",
        "a___b",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        docker_image_ref r;
        gb_err e = GB_ERR_INIT;
        if (docker_image_ref_parse(bad[i], &r, &e) == 0)
            fail_msg("'%s' accepted as repo '%s' tag '%s' digest '%s'", bad[i], r.repo, r.tag,
                     r.digest);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
    }
    docker_image_ref r;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(docker_image_ref_parse("", &r, &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_EMPTY);
    assert_int_equal(docker_image_ref_parse(NULL, &r, &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_EMPTY);
}

static void test_parse_lengths(void **state)
{
    (void)state;
    char ref[600];
    docker_image_ref r;
    gb_err e = GB_ERR_INIT;
    /* A registry name of 255 characters with a tag of 128 and a digest. */
    memset(ref, 'a', 255);
    memcpy(ref, "reg.io/", 7);
    snprintf(ref + 255, sizeof(ref) - 255, ":%0128d@sha256:" HEX64, 0);
    if (docker_image_ref_parse(ref, &r, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(strlen(r.repo), 255);
    assert_int_equal(strlen(r.tag), 128);
    /* One more of either is refused. */
    memset(ref, 'a', 256);
    memcpy(ref, "reg.io/", 7);
    snprintf(ref + 256, sizeof(ref) - 256, ":t");
    assert_int_equal(docker_image_ref_parse(ref, &r, &e), -1);
    snprintf(ref, sizeof(ref), "x:%0129d", 0);
    assert_int_equal(docker_image_ref_parse(ref, &r, &e), -1);
}

static void test_id_like(void **state)
{
    (void)state;
    assert_true(docker_image_id_like("sha256:" HEX64));
    assert_true(docker_image_id_like(HEX64));
    assert_false(docker_image_id_like("ubuntu"));
    assert_false(docker_image_id_like("sha256:" HEX64 "0"));
    assert_false(docker_image_id_like("sha256:../containers/x"));
    assert_false(docker_image_id_like(NULL));
}

static void test_check_still_refuses_digests(void **state)
{
    (void)state;
    char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
    gb_err e = GB_ERR_INIT;
    assert_int_equal(
        docker_image_ref_check("ubuntu@sha256:" HEX64, repo, sizeof(repo), tag, sizeof(tag), &e),
        -1);
    assert_non_null(strstr(e.msg, "digest"));
    assert_int_equal(docker_image_ref_check("u/bob/x", repo, sizeof(repo), tag, sizeof(tag), &e),
                     0);
    assert_string_equal(tag, "latest");
}

static void test_user_namespace(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"alice", "u/alice/"},
        {"Bob", "u/bob/"},
        {"carol.x_y", "u/carol.x_y/"},
        {"dave@example", "u/64617665406578616d706c65/"}, /* '@': hex */
        {"-x", "u/2d78/"},
        {"a..b", "u/612e2e62/"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char ns[200];
        images_user_namespace(cases[i][0], ns, sizeof(ns));
        if (strcmp(ns, cases[i][1]) != 0)
            fail_msg("'%s' -> '%s', expected '%s'", cases[i][0], ns, cases[i][1]);
        /* Whatever the name, the namespace makes valid references. */
        char ref[300];
        snprintf(ref, sizeof(ref), "%smodel:v1", ns);
        docker_image_ref r;
        gb_err e = GB_ERR_INIT;
        if (docker_image_ref_parse(ref, &r, &e) != 0)
            fail_msg("'%s' from user '%s': %s", ref, cases[i][0], e.msg);
        assert_true(images_ref_is_committed(r.repo));
    }
    assert_true(images_ref_is_committed("docker.io/u/alice/x"));
    assert_true(images_ref_is_committed("index.docker.io/u/alice/x"));
    assert_false(images_ref_is_committed("reg.io/u/alice/x"));
    assert_false(images_ref_is_committed("ubuntu"));
    assert_false(images_ref_is_committed("uu/x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),
        cmocka_unit_test(test_parse_refuses_engine_api_walks),
        cmocka_unit_test(test_parse_lengths),
        cmocka_unit_test(test_id_like),
        cmocka_unit_test(test_check_still_refuses_digests),
        cmocka_unit_test(test_user_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
