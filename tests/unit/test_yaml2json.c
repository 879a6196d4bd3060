/*
 * test_yaml2json.c - gpubox-yaml2json, the build-time converter of
 * docs/openapi.yaml (src/tools/yaml2json.c): libyaml does the parsing, so
 * these check what the tool adds to it: plain scalars typed as YAML 1.2's
 * core schema (as js-yaml reads them), keys kept as written, aliases, and
 * refusals that name the line instead of writing a wrong document.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/cleanup.h"
#include "util/proc.h"

/* Convert yaml; 0 and the program's output in *r, which the caller frees. */
static void convert(const char *yaml, proc_result *r)
{
    const char *build = getenv("GPUBOX_BUILD_DIR");
    assert_non_null(build);
    char input[] = "/tmp/gpubox-yaml2json-XXXXXX";
    int fd = mkstemp(input);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    _cleanup_free_ char *tool = NULL;
    assert_true(asprintf(&tool, "%s/gpubox-yaml2json", build) > 0);
    char *argv[] = {tool, input, "-", NULL};
    gb_err e = GB_ERR_INIT;
    int rc = proc_run(argv, NULL, 30000, r, &e);
    unlink(input);
    if (rc < 0)
        fail_msg("gpubox-yaml2json did not run: %s", e.msg);
}

/* yaml converts to the JSON text expected (compared as values). */
static void check(const char *yaml, const char *expected_json)
{
    proc_result r = {0};
    convert(yaml, &r);
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
        fail_msg("gpubox-yaml2json failed: %s\n--- input:\n%s", r.err, yaml);
    _cleanup_json_ json_t *got = json_loads(r.out, JSON_DECODE_ANY, NULL);
    _cleanup_json_ json_t *want = json_loads(expected_json, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    if (!got || !json_equal(got, want))
        fail_msg("got %s\nwant %s\n--- input:\n%s", r.out, expected_json, yaml);
    proc_result_free(&r);
}

/* yaml is refused, with status 1 and a message naming where. */
static void check_error(const char *yaml, const char *where)
{
    proc_result r = {0};
    convert(yaml, &r);
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 1)
        fail_msg("accepted %s as %s", yaml, r.out);
    if (!strstr(r.err, where))
        fail_msg("error '%s' does not name '%s'", r.err, where);
    assert_int_equal(r.out_len, 0);
    proc_result_free(&r);
}

static void test_collections_and_scalars(void **state)
{
    (void)state;
    check("a: 1\nb:\n  c: x\n  d: [1, 2]\nlist:\n- name: x\n  in: path\n- - 1\n  - 2\n",
          "{\"a\":1,\"b\":{\"c\":\"x\",\"d\":[1,2]},\"list\":[{\"name\":\"x\",\"in\":\"path\"},"
          "[1,2]]}");
    check("a: true\nb: False\nc: -12\nd: 1.5\ne: 3.0.3\nf: 1e3\ng: 'it''s'\nh: \"x\\ty\\u00e9\"\n"
          "i: http://host:1/x\nj: a#b\n'200': ok\n201: ok\nk: {}\nl: []\nm: ~\nn:\no: 0x1F\n"
          "p: 0o17\nq: .5\nr: 'true'\ns: no\nt: 2024-01-02\n",
          "{\"a\":true,\"b\":false,\"c\":-12,\"d\":1.5,\"e\":\"3.0.3\",\"f\":1000.0,\"g\":\"it's\","
          "\"h\":\"x\\ty\\u00e9\",\"i\":\"http://host:1/x\",\"j\":\"a#b\",\"200\":\"ok\","
          "\"201\":\"ok\",\"k\":{},\"l\":[],\"m\":null,\"n\":null,\"o\":31,\"p\":15,\"q\":0.5,"
          "\"r\":\"true\",\"s\":\"no\",\"t\":\"2024-01-02\"}");
    check("d: |\n  line one\n    indented\n\n  # not a comment\nx: >-\n  a\n  b\n",
          "{\"d\":\"line one\\n  indented\\n\\n# not a comment\\n\",\"x\":\"a b\"}");
    check("base: &b {type: string}\nuse: *b\n",
          "{\"base\":{\"type\":\"string\"},\"use\":{\"type\":\"string\"}}");
    check("", "null");
}

static void test_refusals(void **state)
{
    (void)state;
    check_error("a: 1\na: 2\n", ":2:");
    check_error("a: [1, 2\nb: 3\n", ":");
    check_error("a: .inf\n", ":1:");
    check_error("a: !!int 1\n", ":1:");
    check_error("a: 99999999999999999999\n", ":1:");
    check_error("a: *nothing\n", ":1:");
    check_error("? [a]\n: 1\n", ":1:");
    check_error("a: 1\n---\nb: 2\n", ":2:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collections_and_scalars),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
