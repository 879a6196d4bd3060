/*
 * test_cli_args.c - gpubox's command-line parser (src/cli/args.c) against
 * the real command table: commands of one and two words, options in every
 * spelling and place, repeated options, "--", and each usage error; and
 * the K=V[,K=V...] lists of --node-selector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"

#define ARGV(...) ((char *[]){"gpubox", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"gpubox", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, msg, ...) cli_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (a), (msg), sizeof(msg))
/* The words after "gpubox" are a usage error whose message holds want. */
#define ASSERT_USAGE(want, ...) assert_usage((want), ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void assert_usage(const char *want, int argc, char **argv)
{
    cli_args a;
    char msg[256] = "";
    int rc = cli_parse(argc, argv, &a, msg, sizeof(msg));
    cli_args_free(&a);
    if (rc != CLI_EXIT_USAGE || !strstr(msg, want))
        fail_msg("gpubox %s...: got %d '%s', want %d with '%s'", argv[1], rc, msg, CLI_EXIT_USAGE,
                 want);
}

static void test_run_with_everything(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "--json", "run", "foo", "--image", "img:1", "-g", "2", "-v",
                           "data:/root/data", "--volume=/srv/x:/x:ro", "-p22", "-p", "8080:80/udp",
                           "-e", "A=1", "--shared", "--", "sleep", "--inf"),
                     0);
    assert_string_equal(a.cmd->name, "run");
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "foo");
    assert_string_equal(cli_get(&a, "image"), "img:1");
    assert_string_equal(cli_get(&a, "gpus"), "2");
    assert_true(cli_flag(&a, "json"));
    assert_true(cli_flag(&a, "shared"));
    assert_false(cli_flag(&a, "help"));
    const char *vols[4];
    assert_int_equal(cli_get_all(&a, "volume", vols, 4), 2);
    assert_string_equal(vols[0], "data:/root/data");
    assert_string_equal(vols[1], "/srv/x:/x:ro");
    const char *ports[4];
    assert_int_equal(cli_get_all(&a, "publish", ports, 4), 2);
    assert_string_equal(ports[0], "22");
    assert_string_equal(ports[1], "8080:80/udp");
    assert_true(a.has_rest);
    assert_int_equal(a.nrest, 2);
    assert_string_equal(a.rest[1], "--inf");
    cli_args_free(&a);
}

/* Short flags bundle as docker's do ("-it"); a value option ends a bundle
 * and takes the rest of the word ("-iw/tmp"). */
static void test_bundled_short_flags(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "exec", "-it", "foo", "--", "bash"), 0);
    assert_true(cli_flag(&a, "interactive"));
    assert_true(cli_flag(&a, "tty"));
    assert_string_equal(a.pos[0], "foo");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "exec", "-iw/tmp", "foo", "--", "ls"), 0);
    assert_true(cli_flag(&a, "interactive"));
    assert_string_equal(cli_get(&a, "workdir"), "/tmp");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "exec", "foo", "--timeout", "5", "--", "ls"), 0);
    assert_string_equal(cli_get(&a, "timeout"), "5");
    assert_false(cli_flag(&a, "tty"));
    cli_args_free(&a);
    ASSERT_USAGE("unknown option -x", "exec", "-ix", "foo", "--", "ls");
}

static void test_group_commands(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "volume", "resize", "data", "40GB"), 0);
    assert_string_equal(a.cmd->name, "volume resize");
    assert_int_equal(a.npos, 2);
    assert_string_equal(a.pos[1], "40GB");
    cli_args_free(&a);

    assert_int_equal(PARSE(&a, msg, "--host", "http://h:1", "volume", "ls", "-q"), 0);
    assert_string_equal(a.cmd->name, "volume ls");
    assert_string_equal(cli_get(&a, "host"), "http://h:1");
    assert_true(cli_flag(&a, "quiet"));
    cli_args_free(&a);

    ASSERT_USAGE("needs a subcommand", "volume");
    ASSERT_USAGE("unknown command 'volume grow'", "volume", "grow", "x");
}

static void test_node_commands(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "nodes", "-q"), 0);
    assert_string_equal(a.cmd->name, "nodes");
    assert_true(cli_flag(&a, "quiet"));
    cli_args_free(&a);
    /* "node" is a group, "nodes" a command of its own */
    assert_int_equal(PARSE(&a, msg, "node", "cordon", "gpu-a"), 0);
    assert_string_equal(a.cmd->name, "node cordon");
    assert_string_equal(a.pos[0], "gpu-a");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "node", "uncordon", "gpu-a"), 0);
    assert_string_equal(a.cmd->name, "node uncordon");
    cli_args_free(&a);
    ASSERT_USAGE("'node' needs a subcommand", "node");
    ASSERT_USAGE("unknown command 'node frob'", "node", "frob", "a");
    assert_int_equal(PARSE(&a, msg, "node", "drain", "a", "--running"), 0);
    assert_string_equal(a.cmd->name, "node drain");
    assert_true(cli_flag(&a, "running"));
    cli_args_free(&a);
    ASSERT_USAGE("missing", "node", "cordon");
}

static void test_fleet_run_options(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "run", "foo", "--image", "i", "--node", "a", "--placement",
                           "spread", "--node-selector", "zone=x,gpu=a100",
                           "--node-selector=rack=3"),
                     0);
    assert_string_equal(cli_get(&a, "node"), "a");
    assert_string_equal(cli_get(&a, "placement"), "spread");
    const char *sel[4];
    assert_int_equal(cli_get_all(&a, "node-selector", sel, 4), 2);
    assert_string_equal(sel[0], "zone=x,gpu=a100");
    assert_string_equal(sel[1], "rack=3");
    cli_args_free(&a);
    ASSERT_USAGE("--node is given twice", "run", "foo", "--node", "a", "--node", "b");

    assert_int_equal(PARSE(&a, msg, "volume", "create", "data", "1GB", "--node", "b"), 0);
    assert_string_equal(cli_get(&a, "node"), "b");
    cli_args_free(&a);
}

/* One --node-selector value into a fresh object: 0 and the object as JSON
 * text, or the usage error's message. */
static int pairs(const char *text, char *out, size_t size)
{
    json_t *obj = json_object();
    int rc = cli_parse_pairs("--node-selector", text, obj, out, size);
    if (rc == 0) {
        char *dump = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(out, size, "%s", dump);
        free(dump);
    }
    json_decref(obj);
    return rc;
}

static void test_node_selector_pairs(void **state)
{
    (void)state;
    char out[256];
    assert_int_equal(pairs("zone=x", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"zone\":\"x\"}");
    assert_int_equal(pairs("zone=x,gpu=a100", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"gpu\":\"a100\",\"zone\":\"x\"}");
    /* the value is everything after the first '=' */
    assert_int_equal(pairs("k=a=b", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"k\":\"a=b\"}");
    /* the same pair twice is the same selector */
    assert_int_equal(pairs("zone=x,zone=x", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"zone\":\"x\"}");

    static const char *const bad[][2] = {
        {"bad", "--node-selector 'bad': give K=V, or several as K=V,K=V"},
        {"", "an empty item"},
        {"zone=", "'zone=': give K=V"},
        {"=x", "'=x': give K=V"},
        {"a=1,,b=2", "an empty item"},
        {"a=1,", "an empty item"},
        {",a=1", "an empty item"},
        {"a=1,b", "'b' is not K=V"},
        {"a=1,a=2", "label a is given twice, as '1' and as '2'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (pairs(bad[i][0], out, sizeof(out)) != CLI_EXIT_USAGE || !strstr(out, bad[i][1]))
            fail_msg("--node-selector '%s': got '%s', want a usage error with '%s'", bad[i][0], out,
                     bad[i][1]);
    }

    /* repeated options add to one selector */
    json_t *obj = json_object();
    assert_int_equal(cli_parse_pairs("--node-selector", "zone=x", obj, out, sizeof(out)), 0);
    assert_int_equal(cli_parse_pairs("--node-selector", "rack=3", obj, out, sizeof(out)), 0);
    assert_int_equal(json_object_size(obj), 2);
    assert_int_equal(cli_parse_pairs("--node-selector", "zone=y", obj, out, sizeof(out)),
                     CLI_EXIT_USAGE);
    json_decref(obj);
}

static void test_usage_errors(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    ASSERT_USAGE("unknown command 'frobnicate'", "frobnicate");
    assert_int_equal(PARSE(&a, msg, "ps", "--bogus"), CLI_EXIT_USAGE);
    assert_non_null(strstr(msg, "unknown option --bogus"));
    assert_non_null(a.cmd); /* so main can point at `gpubox ps --help` */
    cli_args_free(&a);
    ASSERT_USAGE("missing", "rollback", "foo");
    ASSERT_USAGE("unexpected argument 'b'", "stop", "a", "b");
    ASSERT_USAGE("after \"--\"", "exec", "foo", "ls");
    ASSERT_USAGE("--image needs a value", "run", "foo", "--image");
    ASSERT_USAGE("given twice", "run", "foo", "--image", "a", "--image", "b");
    ASSERT_USAGE("takes no value", "ps", "--all=yes");
}

static void test_help_and_dashes(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    /* --help wins over missing arguments */
    assert_int_equal(PARSE(&a, msg, "rollback", "--help"), 0);
    assert_true(a.help);
    assert_string_equal(a.cmd->name, "rollback");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "-h"), 0);
    assert_true(a.help);
    assert_null(a.cmd);
    cli_args_free(&a);
    /* after "--" a command without a CMD takes more positionals */
    assert_int_equal(PARSE(&a, msg, "inspect", "--", "-odd"), 0);
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "-odd");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "help", "volume", "create"), 0);
    assert_int_equal(a.npos, 2);
    cli_args_free(&a);
}

static void test_value_checks(void **state)
{
    (void)state;
    char msg[256];
    long long n;
    double d;
    assert_int_equal(cli_parse_int("--gpus", "4", 0, 1024, &n, msg, sizeof(msg)), 0);
    assert_int_equal(n, 4);
    assert_int_equal(cli_parse_int("--gpus", "four", 0, 1024, &n, msg, sizeof(msg)),
                     CLI_EXIT_USAGE);
    assert_non_null(strstr(msg, "whole number"));
    assert_int_equal(cli_parse_int("--gpus", "-1", 0, 1024, &n, msg, sizeof(msg)), CLI_EXIT_USAGE);
    assert_non_null(strstr(msg, "between 0 and 1024"));
    assert_int_equal(cli_parse_int("--gpus", "", 0, 1024, &n, msg, sizeof(msg)), CLI_EXIT_USAGE);
    assert_int_equal(cli_parse_number("--cpus", "1.5", 0, 1024, &d, msg, sizeof(msg)), 0);
    assert_true(d == 1.5);
    assert_int_equal(cli_parse_number("--cpus", "nan", 0, 1024, &d, msg, sizeof(msg)),
                     CLI_EXIT_USAGE);
}

/* Every command and option has what help, man and completion print. */
static void test_table_is_complete(void **state)
{
    (void)state;
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_command *c = &cli_commands[i];
        assert_non_null(c->run);
        assert_non_null(c->summary);
        assert_non_null(c->usage);
        assert_true(c->min_pos <= c->max_pos);
        assert_true(!c->takes_rest || c->rest_usage);
        for (const cli_opt *o = c->opts; o && o->name; o++) {
            assert_non_null(o->help);
            assert_true(o->kind == CLI_OPT_FLAG || o->metavar);
        }
        size_t used = 0;
        char words[64];
        snprintf(words, sizeof(words), "%s", c->name);
        char *space = strchr(words, ' ');
        const char *w[2] = {words, space ? space + 1 : NULL};
        if (space)
            *space = '\0';
        assert_ptr_equal(cli_find_command(w, space ? 2 : 1, &used), c);
    }
}

static void test_exit_codes_for_envelope_codes(void **state)
{
    (void)state;
    assert_int_equal(cli_exit_for_code(200), CLI_EXIT_OK);
    assert_int_equal(cli_exit_for_code(1100), CLI_EXIT_NOT_FOUND);
    assert_int_equal(cli_exit_for_code(1013), CLI_EXIT_SHORTAGE);
    assert_int_equal(cli_exit_for_code(1014), CLI_EXIT_SHORTAGE);
    assert_int_equal(cli_exit_for_code(1107), CLI_EXIT_CONFLICT);
    assert_int_equal(cli_exit_for_code(1008), CLI_EXIT_CONFLICT);
    assert_int_equal(cli_exit_for_code(1029), CLI_EXIT_USAGE);
    assert_int_equal(cli_exit_for_code(1004), CLI_EXIT_ERROR);
    assert_int_equal(cli_exit_for_code(1101), CLI_EXIT_ERROR);
    assert_int_equal(cli_exit_for_code(1112), CLI_EXIT_ERROR);
}

static void test_operation_progress_lines(void **state)
{
    (void)state;
    char line[256];
    json_t *op =
        json_pack("{s:s, s:s, s:s, s:[{s:s, s:b}, {s:s, s:b}, {s:s, s:b}]}", "kind", "create",
                  "name", "foo", "state", "running", "steps", "name", "allocate", "done", 1, "name",
                  "start-container", "done", 0, "name", "commit", "done", 0);
    cli_operation_line(op, line, sizeof(line));
    assert_string_equal(line, "create foo: running, start-container [1/3]");
    assert_int_equal(cli_operation_state(op), 0);
    json_object_set_new(op, "state", json_string("done"));
    assert_int_equal(cli_operation_state(op), 1);
    json_object_set_new(op, "state", json_string("failed"));
    assert_int_equal(cli_operation_state(op), -1);
    json_decref(op);
    op = json_pack("{s:s, s:s, s:i, s:i}", "status", "running", "step", "carry", "steps", 4,
                   "stepsDone", 2);
    cli_operation_line(op, line, sizeof(line));
    assert_string_equal(line, "operation: running, carry [2/4]");
    json_decref(op);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_with_everything),
        cmocka_unit_test(test_bundled_short_flags),
        cmocka_unit_test(test_group_commands),
        cmocka_unit_test(test_node_commands),
        cmocka_unit_test(test_fleet_run_options),
        cmocka_unit_test(test_node_selector_pairs),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help_and_dashes),
        cmocka_unit_test(test_value_checks),
        cmocka_unit_test(test_table_is_complete),
        cmocka_unit_test(test_exit_codes_for_envelope_codes),
        cmocka_unit_test(test_operation_progress_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
