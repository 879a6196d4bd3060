/*
 * test_yaml.c - the YAML subset reader: each construct it accepts gives
 * the value a full YAML parser gives, and what it does not accept is an
 * error naming the line, never a silent misreading.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/cleanup.h"
#include "util/yaml.h"

/* Parse yaml and compare with the JSON text expected. */
static void check(const char *yaml, const char *expected_json)
{
    gb_err e = GB_ERR_INIT;
    _cleanup_json_ json_t *got = yaml_parse(yaml, strlen(yaml), &e);
    if (!got)
        fail_msg("yaml_parse failed: %s\n--- input:\n%s", e.msg, yaml);
    _cleanup_json_ json_t *want = json_loads(expected_json, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        _cleanup_free_ char *text = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("got %s\nwant %s\n--- input:\n%s", text, expected_json, yaml);
    }
}

static void check_error(const char *yaml, const char *line)
{
    gb_err e = GB_ERR_INIT;
    json_t *got = yaml_parse(yaml, strlen(yaml), &e);
    if (got) {
        _cleanup_free_ char *text = json_dumps(got, JSON_ENCODE_ANY);
        json_decref(got);
        fail_msg("accepted %s as %s", yaml, text);
    }
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    if (!strstr(e.msg, line))
        fail_msg("error '%s' does not name '%s'", e.msg, line);
}

static void test_block_collections(void **state)
{
    (void)state;
    check("a: 1\nb:\n  c: x\n  d: [1, 2]\n", "{\"a\":1,\"b\":{\"c\":\"x\",\"d\":[1,2]}}");
    check("list:\n- a\n- b\n", "{\"list\":[\"a\",\"b\"]}");
    check("list:\n  - name: x\n    in: path\n  - name: y\n", "{\"list\":[{\"name\":\"x\",\"in\":"
                                                             "\"path\"},{\"name\":\"y\"}]}");
    check("- - 1\n  - 2\n- 3\n", "[[1,2],3]");
    check("a:\n\n  # comment\n  b: 1 # trailing\nc: ~\n", "{\"a\":{\"b\":1},\"c\":null}");
    check("empty:\nnext: 1\n", "{\"empty\":null,\"next\":1}");
}

static void test_scalars(void **state)
{
    (void)state;
    check("a: true\nb: False\nc: -12\nd: 1.5\ne: 3.0.3\nf: 1e3\ng: 'it''s'\nh: \"x\\ty\\u00e9\"\n"
          "i: http://host:1/x\nj: a#b\n'200': ok\nk: {}\nl: []\n",
          "{\"a\":true,\"b\":false,\"c\":-12,\"d\":1.5,\"e\":\"3.0.3\",\"f\":1000.0,\"g\":\"it's\","
          "\"h\":\"x\\ty\\u00e9\",\"i\":\"http://host:1/x\",\"j\":\"a#b\",\"200\":\"ok\","
          "\"k\":{},\"l\":[]}");
    check("s: {type: string, description: \"a, b\", enum: ['no', x]}\n",
          "{\"s\":{\"type\":\"string\",\"description\":\"a, b\",\"enum\":[\"no\",\"x\"]}}");
    check("e: [1,\n    2, 'it''s',\n    Docker's]\n", "{\"e\":[1,2,\"it's\",\"Docker's\"]}");
}

static void test_block_scalars(void **state)
{
    (void)state;
    check("d: |\n  line one\n    indented\n\n  # not a comment\nx: 1\n",
          "{\"d\":\"line one\\n  indented\\n\\n# not a comment\\n\",\"x\":1}");
    check("d: |-\n  a\n  b\n", "{\"d\":\"a\\nb\"}");
    check("d: >\n  a\n  b\n\n  c\n", "{\"d\":\"a b\\nc\\n\"}");
}

static void test_refusals(void **state)
{
    (void)state;
    check_error("a: 1\n\tb: 2\n", "line 2");
    check_error("a: &anchor 1\n", "line 1");
    check_error("a: 1\na: 2\n", "line 2");
    check_error("a: [1, 2\nb: 3\n", "line 1");
    check_error("a:\n  b: 1\n c: 2\n", "line 3");
    check_error("a: \"open\n", "line 1");
    check_error("a: 'x' y\n", "line 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_collections),
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_block_scalars),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
