/*
 * test_docker_images.c - the image reference validator (a table, the
 * length limits, a randomized comparison with Docker's grammar written as a
 * POSIX regex, and a comparison with what the real dockerd accepts), then
 * commit and image removal against the real dockerd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <regex.h>

#include "docker_test_util.h"

static int group_setup(void **state)
{
    (void)state;
    return dtu_setup("images");
}

struct good_ref {
    const char *ref, *repo, *tag;
};

static void test_ref_accepts(void **state)
{
    (void)state;
    const struct good_ref cases[] = {
        {"foo", "foo", "latest"},
        {"foo:bar", "foo", "bar"},
        {"a", "a", "latest"},
        {"team/app:v1.2-rc_3", "team/app", "v1.2-rc_3"},
        {"registry:5000/team/app:v1", "registry:5000/team/app", "v1"},
        {"registry:5000/team/app", "registry:5000/team/app", "latest"},
        {"localhost/app", "localhost/app", "latest"},
        {"localhost:5000/a/b/c:t", "localhost:5000/a/b/c", "t"},
        {"Registry.Example.COM/app", "Registry.Example.COM/app", "latest"},
        {"127.0.0.1:5000/x", "127.0.0.1:5000/x", "latest"},
        {"sub-domain.example.com:443/x/y:Z", "sub-domain.example.com:443/x/y", "Z"},
        {"my-registry.io/a__b/c.d/e--f:TAG_x", "my-registry.io/a__b/c.d/e--f", "TAG_x"},
        {"a.b_c__d-e---f", "a.b_c__d-e---f", "latest"},
        {"x:_tag", "x", "_tag"},
        {"x:0", "x", "0"},
        {"foo:5000", "foo", "5000"},      /* no '/': a tag, not a port */
        {"a_b.c/d", "a_b.c/d", "latest"}, /* not a host: read as a path */
        {"gpubox/my_env:2024.01", "gpubox/my_env", "2024.01"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
        gb_err e = GB_ERR_INIT;
        if (docker_image_ref_check(cases[i].ref, repo, sizeof(repo), tag, sizeof(tag), &e) != 0)
            fail_msg("'%s' refused: %s", cases[i].ref, e.msg);
        assert_string_equal(repo, cases[i].repo);
        assert_string_equal(tag, cases[i].tag);
    }
}

struct bad_ref {
    const char *ref;
    int code;
    const char *why; /* a piece of the message */
};

static void test_ref_refuses(void **state)
{
    (void)state;
    const struct bad_ref cases[] = {
        {"", ERR_IMAGE_EMPTY, "empty"},
        {"Foo", ERR_INVALID_PARAMS, "must be lowercase"},
        {"foo/Bar:v1", ERR_INVALID_PARAMS, "must be lowercase"},
        {"UPPER:tag", ERR_INVALID_PARAMS, "must be lowercase"},
        {"foo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         ERR_INVALID_PARAMS, "digest"},
        {"foo:bar@sha256:abc", ERR_INVALID_PARAMS, "digest"},
        {":tag", ERR_INVALID_PARAMS, "repository name is empty"},
        {"foo:", ERR_INVALID_PARAMS, "the tag must be"},
        {"foo:.bad", ERR_INVALID_PARAMS, "the tag must be"},
        {"foo:-bad", ERR_INVALID_PARAMS, "the tag must be"},
        {"foo:ba d", ERR_INVALID_PARAMS, "the tag must be"},
        {"foo:b\xc3\xa4"
         "d",
         ERR_INVALID_PARAMS, "the tag must be"},
        {"foo//bar", ERR_INVALID_PARAMS, "not a valid path component"},
        {"/foo", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo/", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo..bar", ERR_INVALID_PARAMS, "'foo..bar' is not a valid path component"},
        {"foo___bar", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo.-bar", ERR_INVALID_PARAMS, "not a valid path component"},
        {"-foo", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo-", ERR_INVALID_PARAMS, "not a valid path component"},
        {".foo", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo_", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo bar", ERR_INVALID_PARAMS, "not a valid path component"},
        {"foo\n", ERR_INVALID_PARAMS, "not a valid path component"},
        {"a:b:c", ERR_INVALID_PARAMS, "'a:b' is not a valid path component"},
        {"host:abc/x", ERR_INVALID_PARAMS, "registry 'host:abc'"},
        {"host:/x", ERR_INVALID_PARAMS, "registry 'host:'"},
        {"-host.com/x", ERR_INVALID_PARAMS, "registry '-host.com'"},
        {"host-.com/x", ERR_INVALID_PARAMS, "registry"},
        {"host..com/x", ERR_INVALID_PARAMS, "registry"},
        {"[::1]:5000/x", ERR_INVALID_PARAMS, "registry"},
        {"reg.io/", ERR_INVALID_PARAMS, "not a valid path component"},
        {"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ERR_INVALID_PARAMS,
         "image id"},
        {"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef:v1", ERR_INVALID_PARAMS,
         "image id"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char repo[DOCKER_REPO_MAX] = "x", tag[DOCKER_TAG_MAX] = "x";
        gb_err e = GB_ERR_INIT;
        if (docker_image_ref_check(cases[i].ref, repo, sizeof(repo), tag, sizeof(tag), &e) != -1)
            fail_msg("'%s' accepted as %s:%s", cases[i].ref, repo, tag);
        if (e.code != cases[i].code || !strstr(e.msg, cases[i].why))
            fail_msg("'%s': want %d with '%s', got %d '%s'", cases[i].ref, cases[i].code,
                     cases[i].why, e.code, e.msg);
        assert_string_equal(repo, "");
        assert_string_equal(tag, "");
    }
    gb_err e = GB_ERR_INIT;
    char repo[8], tag[8];
    assert_int_equal(docker_image_ref_check(NULL, repo, sizeof(repo), tag, sizeof(tag), &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_EMPTY);
}

/* Check ref built from parts: n copies of fill after prefix, then suffix. */
static int check_built(const char *prefix, char fill, size_t n, const char *suffix, gb_err *e)
{
    char ref[1024];
    size_t len = (size_t)snprintf(ref, sizeof(ref), "%s", prefix);
    memset(ref + len, fill, n);
    snprintf(ref + len + n, sizeof(ref) - len - n, "%s", suffix);
    char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
    return docker_image_ref_check(ref, repo, sizeof(repo), tag, sizeof(tag), e);
}

/* 255 characters as Docker counts the name: normalized with docker.io/
 * (and library/ for one component) on Docker Hub; the tag up to 128. */
static void test_ref_lengths(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    assert_int_equal(check_built("", 'a', 237, "", &e), 0); /* docker.io/library/ + 237 */
    assert_int_equal(check_built("", 'a', 238, "", &e), -1);
    assert_non_null(strstr(e.msg, "longer than 255"));
    assert_int_equal(check_built("team/", 'a', 240, "", &e), 0); /* docker.io/ + 245 */
    assert_int_equal(check_built("team/", 'a', 241, "", &e), -1);
    assert_int_equal(check_built("reg.io/", 'a', 248, "", &e), 0); /* 255 as given */
    assert_int_equal(check_built("reg.io/", 'a', 249, "", &e), -1);
    assert_int_equal(check_built("docker.io/", 'a', 237, "", &e), 0);
    assert_int_equal(check_built("docker.io/", 'a', 238, "", &e), -1);
    /* index.docker.io/team/x is docker.io/team/x normalized, 6 shorter:
     * then the length as given is what limits it. */
    assert_int_equal(check_built("index.docker.io/team/", 'a', 234, "", &e), 0);
    assert_int_equal(check_built("index.docker.io/team/", 'a', 235, "", &e), -1);
    assert_int_equal(check_built("index.docker.io/", 'a', 237, "", &e), 0);
    assert_int_equal(check_built("index.docker.io/", 'a', 238, "", &e), -1);
    assert_int_equal(check_built("x:", 'T', 128, "", &e), 0);
    assert_int_equal(check_built("x:", 'T', 129, "", &e), -1);
    assert_non_null(strstr(e.msg, "the tag must be 1-128"));

    /* Buffers too small for what is valid: the caller's mistake. */
    char repo[4], tag[DOCKER_TAG_MAX];
    assert_int_equal(docker_image_ref_check("abcd:x", repo, sizeof(repo), tag, sizeof(tag), &e),
                     -1);
    assert_int_equal(e.code, ERR_INTERNAL);
    assert_int_equal(docker_image_ref_check("abc:xyzw", repo, sizeof(repo), repo, sizeof(repo), &e),
                     -1);
    assert_int_equal(e.code, ERR_INTERNAL);
    assert_int_equal(docker_image_ref_check("abc:xyz", repo, sizeof(repo), tag, sizeof(tag), &e),
                     0);
    assert_string_equal(repo, "abc");
}

/* Docker's grammar as one POSIX extended regex: an independent statement
 * of the rules the scanner implements by hand. */
#define RX_DC "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?"
#define RX_DOMAIN RX_DC "(\\." RX_DC ")*(:[0-9]+)?"
#define RX_PC "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*"
#define RX_NAME "(" RX_DOMAIN "/)?" RX_PC "(/" RX_PC ")*"
#define RX_TAG "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"

static bool oracle_accepts(const regex_t *full, const char *ref)
{
    if (regexec(full, ref, 0, NULL, 0) != 0)
        return false;
    const char *last_slash = strrchr(ref, '/');
    const char *colon = strrchr(last_slash ? last_slash : ref, ':');
    size_t n = colon ? (size_t)(colon - ref) : strlen(ref);
    if (n == 64 && strspn(ref, "0123456789abcdef") >= 64)
        return false;
    /* Normalized length, the way Docker's splitDockerDomain does it. */
    const char *slash = memchr(ref, '/', n);
    size_t first = slash ? (size_t)(slash - ref) : n;
    bool lower = true;
    for (size_t i = 0; i < first; i++)
        lower = lower && !(ref[i] >= 'A' && ref[i] <= 'Z');
    bool domain = slash && (memchr(ref, '.', first) || memchr(ref, ':', first) || !lower ||
                            (first == 9 && !strncmp(ref, "localhost", 9)));
    size_t total;
    if (!domain)
        total = strlen("docker.io/") + (slash ? 0 : strlen("library/")) + n;
    else if ((first == 9 && !strncmp(ref, "docker.io", 9)) ||
             (first == 15 && !strncmp(ref, "index.docker.io", 15)))
        total =
            strlen("docker.io/") + (memchr(slash + 1, '/', n - first - 1) ? 0 : 8) + n - first - 1;
    else
        total = n;
    return total <= 255 && n <= 255;
}

/* Random references from pieces that make up real ones (and pieces that
 * break them): the scanner and the regex must agree on every one, and what
 * is accepted must split back into the input. */
static void test_ref_random_against_regex(void **state)
{
    (void)state;
    regex_t full;
    assert_int_equal(regcomp(&full, "^" RX_NAME "(:" RX_TAG ")?$", REG_EXTENDED | REG_NOSUB), 0);
    const char *pieces[] = {"a",  "z", "0",   "9", "ab", "Q",     ".",         "_",
                            "__", "-", "--",  "/", ":",  "5000",  "localhost", "docker.io",
                            "@",  " ", "x.y", "A", "é",  "latest"};
    unsigned seed = 20240611;
    size_t accepted = 0, total = 200000;
    for (size_t round = 0; round < total; round++) {
        char ref[512] = "";
        size_t len = 0;
        int npieces = (int)(rand_r(&seed) % 10);
        for (int p = 0; p < npieces; p++) {
            const char *piece = pieces[rand_r(&seed) % ARRAY_SIZE(pieces)];
            len += (size_t)snprintf(ref + len, sizeof(ref) - len, "%s", piece);
        }
        /* Now and then a long run, to cross the length limits. */
        if (rand_r(&seed) % 50 == 0) {
            size_t run = 200 + rand_r(&seed) % 80;
            memset(ref + len, "ab"[rand_r(&seed) % 2], run);
            ref[len + run] = '\0';
        }
        char repo[DOCKER_REPO_MAX], tag[DOCKER_TAG_MAX];
        gb_err e = GB_ERR_INIT;
        bool ours = docker_image_ref_check(ref, repo, sizeof(repo), tag, sizeof(tag), &e) == 0;
        bool want = ref[0] && !strchr(ref, '@') && oracle_accepts(&full, ref);
        if (ours != want)
            fail_msg("'%s': scanner says %s, regex says %s (%s)", ref, ours ? "ok" : "bad",
                     want ? "ok" : "bad", e.msg);
        if (!ours) {
            assert_true(e.code == ERR_INVALID_PARAMS || e.code == ERR_IMAGE_EMPTY);
            continue;
        }
        accepted++;
        char joined[600];
        snprintf(joined, sizeof(joined), "%s:%s", repo, tag);
        if (strcmp(joined, ref) != 0) /* no tag given: it must be the default */
            assert_true(strcmp(repo, ref) == 0 && strcmp(tag, "latest") == 0);
    }
    regfree(&full);
    assert_true(accepted > total / 20); /* both verdicts were exercised */
}

/* What the real dockerd accepts as commit's repo and tag. */
static bool docker_accepts(const char *container, const char *repo, const char *tag)
{
    _cleanup_free_ char *r = NULL;
    _cleanup_free_ char *t = NULL;
    /* Percent-encode by hand: the test must not lean on the client's escaping. */
    r = malloc(3 * strlen(repo) + 1);
    t = malloc(3 * strlen(tag) + 1);
    assert_non_null(r);
    assert_non_null(t);
    const char *src[] = {repo, tag};
    char *dst[] = {r, t};
    for (int k = 0; k < 2; k++) {
        char *o = dst[k];
        for (const unsigned char *p = (const unsigned char *)src[k]; *p; p++)
            o += sprintf(o, "%%%02X", *p);
        *o = '\0';
    }
    char path[2048];
    snprintf(path, sizeof(path), "/commit?container=%s&repo=%s&tag=%s", container, r, t);
    long status = 0;
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_request(dtu_client, "POST", path, NULL, &status, &resp, &e) != 0)
        fail_msg("%s", e.msg);
    if (status != 201 && getenv("GBTEST_VERBOSE"))
        fprintf(stderr, "docker: %s:%s -> %ld %s\n", repo, tag, status,
                json_string_value(json_object_get(resp, "message")));
    return status == 201;
}

static void test_ref_matches_docker(void **state)
{
    (void)state;
    _cleanup_free_ char *id = dtu_create("refsrc", dtu_config(NULL));
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "gbtest-dk-images-%s", dtu_pid);
    /* The prefix as a first component: a path, or with '.' or ':' a
     * registry, which when it is not a valid host is read as a path. */
    const char *suffixes[] = {"-a",        "-a.b_c__d-e---f",
                              "/team/app", "-A",
                              "/Team",     "..x",
                              "___x",      "-",
                              "/",         "//x",
                              " x",        "-é",
                              ".io/z",     ":5000/z",
                              "_y.io/z",   ":abc/z",
                              ".io/Z",     "_Y.io/z"};
    /* (A repo holding ":tag" is left out: Docker then quietly replaces
     * that tag with the other, where docker_container_commit refuses.) */
    const char *tags[] = {"v1", "_t", "T.1-x", ".t", "-t", "t t", "t/x"};
    char repo[256];
    for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
        for (size_t j = 0; j < ARRAY_SIZE(tags); j++) {
            snprintf(repo, sizeof(repo), "%s%s", prefix, suffixes[i]);
            char ref[300], r[DOCKER_REPO_MAX], t[DOCKER_TAG_MAX];
            snprintf(ref, sizeof(ref), "%s:%s", repo, tags[j]);
            gb_err e = GB_ERR_INIT;
            bool ours = docker_image_ref_check(ref, r, sizeof(r), t, sizeof(t), &e) == 0;
            /* A tag holding '/' or ':' splits differently once joined, so
             * only Docker's repo+tag form can say what it thinks of it. */
            bool split_same = ours && strcmp(r, repo) == 0 && strcmp(t, tags[j]) == 0;
            bool theirs = docker_accepts(id, repo, tags[j]);
            if (split_same != theirs)
                fail_msg("repo '%s' tag '%s': we say %s, Docker says %s", repo, tags[j],
                         split_same ? "ok" : "bad", theirs ? "ok" : "bad");
        }
    }
    /* Length limits as Docker counts them. */
    char long_name[300];
    memset(long_name, 'a', sizeof(long_name));
    size_t plen = strlen(prefix);
    memcpy(long_name, prefix, plen);
    const size_t lengths[] = {237, 238};
    for (size_t i = 0; i < ARRAY_SIZE(lengths); i++) {
        long_name[lengths[i]] = '\0';
        char r[DOCKER_REPO_MAX], t[DOCKER_TAG_MAX];
        gb_err e = GB_ERR_INIT;
        bool ours = docker_image_ref_check(long_name, r, sizeof(r), t, sizeof(t), &e) == 0;
        assert_true(ours == docker_accepts(id, long_name, "v1"));
        assert_true(ours == (lengths[i] == 237));
        long_name[lengths[i]] = 'a';
    }
}

static void test_commit_and_remove(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    _cleanup_free_ char *src =
        dtu_start_sh("src", "echo made-in-container > /root/made-here; sleep 600");
    _cleanup_free_ char *check = dtu_exec_sh(src, "sleep 0.2; cat /root/made-here");
    assert_string_equal(check, "made-in-container\n");

    char repo[128], ref[160];
    snprintf(repo, sizeof(repo), "gbtest-dk-images-%s/commit", dtu_pid);
    snprintf(ref, sizeof(ref), "%s:v1", repo);
    _cleanup_json_ json_t *labels = dtu_labels();
    json_object_set_new(labels, "gpubox.created", json_string("true"));
    _cleanup_free_ char *image_id = NULL;
    if (docker_container_commit(dtu_client, src, repo, "v1", "made by the test", labels, NULL,
                                &image_id, &e) != 0)
        fail_msg("%s", e.msg);
    assert_non_null(image_id);
    assert_memory_equal(image_id, "sha256:", 7);

    _cleanup_json_ json_t *img = NULL;
    assert_int_equal(docker_image_inspect(dtu_client, ref, &img, &e), 0);
    assert_string_equal(json_string_value(json_object_get(img, "Id")), image_id);
    assert_string_equal(json_string_value(json_object_get(img, "Comment")), "made by the test");
    json_t *config = json_object_get(img, "Config");
    json_t *img_labels = json_object_get(config, "Labels");
    assert_string_equal(json_string_value(json_object_get(img_labels, "gpubox.created")), "true");
    /* The container's own config is kept: Docker merged our labels in. */
    json_t *cmd = json_object_get(config, "Cmd");
    assert_string_equal(json_string_value(json_array_get(cmd, 0)), "sh");

    /* A container from the new image has the file. */
    json_t *cfg = dtu_config(json_pack("[s,s]", "cat", "/root/made-here"));
    json_object_set_new(cfg, "Image", json_string(ref));
    _cleanup_free_ char *child = dtu_create("child", cfg);
    assert_int_equal(docker_container_start(dtu_client, child, &e), 0);
    long code = -1;
    assert_int_equal(docker_container_wait(dtu_client, child, &code, &e), 0);
    assert_int_equal(code, 0);
    _cleanup_free_ char *out = NULL;
    _cleanup_free_ char *err_out = NULL;
    assert_int_equal(docker_container_logs(dtu_client, child, &out, &err_out, 0, &e), 0);
    assert_string_equal(out, "made-in-container\n");

    /* No tag: "latest". Committing to a taken tag moves it. */
    _cleanup_free_ char *latest_id = NULL;
    assert_int_equal(
        docker_container_commit(dtu_client, src, repo, NULL, NULL, labels, NULL, &latest_id, &e),
        0);
    snprintf(ref, sizeof(ref), "%s:latest", repo);
    _cleanup_json_ json_t *latest = NULL;
    assert_int_equal(docker_image_inspect(dtu_client, ref, &latest, &e), 0);
    assert_string_equal(json_string_value(json_object_get(latest, "Id")), latest_id);

    /* In use by a container: refused without force. */
    snprintf(ref, sizeof(ref), "%s:v1", repo);
    assert_int_equal(docker_image_remove(dtu_client, image_id, false, &e), -1);
    assert_int_equal(e.code, ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "being used by"));
    assert_int_equal(docker_container_remove(dtu_client, child, true, &e), 0);
    assert_int_equal(docker_image_remove(dtu_client, ref, false, &e), 0);
    assert_int_equal(docker_image_remove(dtu_client, ref, false, &e), 0); /* already gone */
    json_t *gone = NULL;
    assert_int_equal(docker_image_inspect(dtu_client, ref, &gone, &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_NOT_FOUND);
}

static void test_commit_errors(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char *id = (char *)"unset";
    assert_int_equal(docker_container_commit(dtu_client, "gbtest-dk-images-absent", "gbtest-x",
                                             "v1", NULL, NULL, NULL, &id, &e),
                     -1);
    assert_null(id);
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "No such container"));

    _cleanup_free_ char *src = dtu_create("errsrc", dtu_config(NULL));
    assert_int_equal(
        docker_container_commit(dtu_client, src, "Bad/Name", "v1", NULL, NULL, NULL, NULL, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "must be lowercase"));
    assert_int_equal(
        docker_container_commit(dtu_client, src, "gbtest-x", ".v1", NULL, NULL, NULL, NULL, &e),
        -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(
        docker_container_commit(dtu_client, src, "gbtest-x:v1", "v2", NULL, NULL, NULL, NULL, &e),
        -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_int_equal(docker_container_commit(dtu_client, src, "gbtest-x@sha256:00", "v2", NULL,
                                             NULL, NULL, NULL, &e),
                     -1);
    assert_non_null(strstr(e.msg, "digest"));
    _cleanup_json_ json_t *bad_labels = json_pack("{s:b}", "gpubox.created", true);
    assert_int_equal(docker_container_commit(dtu_client, src, "gbtest-x", "v1", NULL, bad_labels,
                                             NULL, NULL, &e),
                     -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "labels"));

    assert_int_equal(docker_image_remove(dtu_client, "", false, &e), -1);
    assert_int_equal(e.code, ERR_IMAGE_EMPTY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_accepts),
        cmocka_unit_test(test_ref_refuses),
        cmocka_unit_test(test_ref_lengths),
        cmocka_unit_test(test_ref_random_against_regex),
        cmocka_unit_test_teardown(test_ref_matches_docker, dtu_cleanup),
        cmocka_unit_test_teardown(test_commit_and_remove, dtu_cleanup),
        cmocka_unit_test_teardown(test_commit_errors, dtu_cleanup),
    };
    return cmocka_run_group_tests(tests, group_setup, dtu_teardown);
}
