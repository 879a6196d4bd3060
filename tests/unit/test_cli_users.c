/*
 * test_cli_users.c - gpubox's users, quota and accounting commands
 * (src/cli/cmd_users.c, docs/users.md): the parsing of whoami, users,
 * user create|set|rm|token|revoke, quota defaults and usage; the request
 * bodies their options make ("none" is null, sizes are bytes or whole MiB);
 * every bad value (a role, a negative or broken number, a size) refused
 * with a clear message before any request is sent; the quota cells
 * ("used/quota", "-" unlimited); the hours of the usage table; and what
 * whoami, users, usage and quota defaults print for people.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cli/cli.h"

#define ARGV(...) ((char *[]){"gpubox", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"gpubox", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, msg, ...) cli_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (a), (msg), sizeof(msg))

/* ---- parsing ---- */

static void test_parse_the_new_commands(void **state)
{
    (void)state;
    cli_args a;
    char msg[256];
    assert_int_equal(PARSE(&a, msg, "whoami"), 0);
    assert_string_equal(a.cmd->name, "whoami");
    cli_args_free(&a);
    /* "user" is a group, "users" a command of its own (as node, nodes) */
    assert_int_equal(PARSE(&a, msg, "users", "-q"), 0);
    assert_string_equal(a.cmd->name, "users");
    assert_true(cli_flag(&a, "quiet"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "user", "create", "carol", "--role", "user", "--cards", "2",
                           "--share=16GB", "--instances", "3", "--volume-bytes", "500GB"),
                     0);
    assert_string_equal(a.cmd->name, "user create");
    assert_string_equal(a.pos[0], "carol");
    assert_string_equal(cli_get(&a, "role"), "user");
    assert_string_equal(cli_get(&a, "share"), "16GB");
    cli_args_free(&a);
    static const char *const words[] = {"set", "rm", "token", "revoke"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        assert_int_equal(cli_parse(4, (char *[]){"gpubox", "user", (char *)words[i], "carol", NULL},
                                   &a, msg, sizeof(msg)),
                         0);
        char want[32];
        snprintf(want, sizeof(want), "user %s", words[i]);
        assert_string_equal(a.cmd->name, want);
        assert_int_equal(a.npos, 1);
        cli_args_free(&a);
    }
    assert_int_equal(PARSE(&a, msg, "quota", "defaults", "--cards", "none"), 0);
    assert_string_equal(a.cmd->name, "quota defaults");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "usage", "-u", "alice", "--set", "train", "--from",
                           "2026-11-01T00:00:00Z", "--to", "1764547200"),
                     0);
    assert_string_equal(cli_get(&a, "user"), "alice");
    assert_string_equal(cli_get(&a, "set"), "train");
    assert_string_equal(cli_get(&a, "to"), "1764547200");
    cli_args_free(&a);
    /* a negative number is taken as the option's value, then refused */
    assert_int_equal(PARSE(&a, msg, "user", "set", "bob", "--cards", "-1"), 0);
    assert_string_equal(cli_get(&a, "cards"), "-1");
    cli_args_free(&a);

    static const char *const bad[][3] = {
        {"user", NULL, "'user' needs a subcommand"},
        {"user", "frob", "unknown command 'user frob'"},
        {"quota", NULL, "'quota' needs a subcommand"},
        {"user", "create", "missing"},
        {"user", "rm", "missing"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int argc = bad[i][1] ? 3 : 2;
        int rc = cli_parse(argc, (char *[]){"gpubox", (char *)bad[i][0], (char *)bad[i][1], NULL},
                           &a, msg, sizeof(msg));
        if (rc != CLI_EXIT_USAGE || !strstr(msg, bad[i][2]))
            fail_msg("gpubox %s %s: got %d '%s', want a usage error with '%s'", bad[i][0],
                     bad[i][1] ? bad[i][1] : "", rc, msg, bad[i][2]);
        cli_args_free(&a);
    }
    assert_int_equal(PARSE(&a, msg, "user", "create", "x", "--role", "a", "--role", "b"),
                     CLI_EXIT_USAGE);
    assert_non_null(strstr(msg, "--role is given twice"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "whoami", "--cards", "1"), CLI_EXIT_USAGE);
    assert_non_null(strstr(msg, "unknown option --cards"));
    cli_args_free(&a);
}

/* ---- request bodies ---- */

/* The body cli_user_body makes of the words after "gpubox" (create when
 * they start with "user create"), as compact JSON with sorted keys; or
 * "usage: <msg>". */
static char *body_of(int argc, char **argv)
{
    cli_args a;
    char msg[512];
    assert_int_equal(cli_parse(argc, argv, &a, msg, sizeof(msg)), 0);
    json_t *body = NULL;
    char *out;
    bool create = strcmp(a.cmd->name, "user create") == 0;
    if (cli_user_body(&a, create, &body, msg, sizeof(msg)) == 0) {
        out = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(body);
    } else {
        assert_null(body);
        assert_true(asprintf(&out, "usage: %s", msg) > 0);
    }
    cli_args_free(&a);
    return out;
}
#define BODY(...) body_of(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void assert_body(char *got, const char *want)
{
    if (strcmp(got, want) != 0)
        fail_msg("got %s, want %s", got, want);
    free(got);
}

static void test_bodies(void **state)
{
    (void)state;
    assert_body(BODY("user", "create", "carol", "--role", "viewer"),
                "{\"name\":\"carol\",\"role\":\"viewer\"}");
    assert_body(BODY("user", "create", "carol", "--role", "user", "--cards", "2", "--share", "16GB",
                     "--instances", "0", "--volume-bytes", "500GB"),
                "{\"name\":\"carol\",\"quota\":{\"cards\":2,\"instances\":0,\"shareMiB\":16384,"
                "\"volumeBytes\":536870912000},\"role\":\"user\"}");
    /* --share-mib is MiB; a bare --volume-bytes number is bytes; decimals */
    assert_body(BODY("user", "create", "c", "--role", "user", "--share-mib", "8192",
                     "--volume-bytes", "1073741824"),
                "{\"name\":\"c\",\"quota\":{\"shareMiB\":8192,\"volumeBytes\":1073741824},"
                "\"role\":\"user\"}");
    assert_body(BODY("user", "create", "c", "--role", "user", "--share", "1.5GB"),
                "{\"name\":\"c\",\"quota\":{\"shareMiB\":1536},\"role\":\"user\"}");
    /* set: only what is given; none is null (unlimited) */
    assert_body(BODY("user", "set", "bob", "--role", "admin"), "{\"role\":\"admin\"}");
    assert_body(
        BODY("user", "set", "bob", "--cards", "none", "--volume-bytes", "none", "--instances", "4"),
        "{\"quota\":{\"cards\":null,\"instances\":4,\"volumeBytes\":null}}");
    assert_body(BODY("user", "set", "bob", "--share", "none"), "{\"quota\":{\"shareMiB\":null}}");
}

static void test_bad_values_are_usage_errors(void **state)
{
    (void)state;
    static const struct {
        char *argv[8];
        const char *want;
    } cases[] = {
        {{"user", "create", "c"}, "--role is required: admin, user or viewer"},
        {{"user", "create", "c", "--role", "root"},
         "--role must be admin, user or viewer, got 'root'"},
        {{"user", "create", "c", "--role", "Admin"}, "--role must be admin, user or viewer"},
        {{"user", "set", "c", "--role", ""}, "--role must be admin, user or viewer, got ''"},
        {{"user", "set", "c"}, "nothing to change: give --role, or a quota option"},
        {{"user", "set", "c", "--cards", "-1"},
         "--cards must be a whole number from 0 to 1000000000, or none (unlimited); got '-1'"},
        {{"user", "set", "c", "--instances", "2.5"}, "--instances must be a whole number"},
        {{"user", "set", "c", "--instances", "three"}, "got 'three'"},
        {{"user", "set", "c", "--cards", ""}, "--cards must be a whole number"},
        {{"user", "set", "c", "--cards", "99999999999999999999"}, "--cards must be a whole"},
        {{"user", "set", "c", "--share-mib", "-8192"}, "--share-mib must be a whole number"},
        {{"user", "set", "c", "--cards", "None"}, "got 'None'"},
        {{"user", "set", "c", "--share", "-5GB"},
         "--share: size '-5GB' does not start with a number"},
        {{"user", "set", "c", "--share", "16XB"}, "--share: size unit 'XB' in '16XB'"},
        {{"user", "set", "c", "--share", "100KB"}, "--share '100KB' is not a whole number of MiB"},
        {{"user", "set", "c", "--share", "16"}, "--share '16' is not a whole number of MiB"},
        {{"user", "set", "c", "--volume-bytes", "-1"}, "--volume-bytes: size '-1'"},
        {{"user", "set", "c", "--volume-bytes", "2PB"}, "--volume-bytes: size unit 'PB'"},
        {{"user", "set", "c", "--volume-bytes", "5000TB"}, "too large"},
        {{"user", "set", "c", "--share", "1GB", "--share-mib", "1024"},
         "give --share or --share-mib, not both"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int argc = 1;
        char *argv[10] = {"gpubox"};
        for (; cases[i].argv[argc - 1]; argc++)
            argv[argc] = cases[i].argv[argc - 1];
        char *got = body_of(argc, argv);
        if (strncmp(got, "usage: ", 7) != 0 || !strstr(got, cases[i].want))
            fail_msg("case %zu (%s %s ...): got '%s', want a usage error with '%s'", i, argv[1],
                     argv[2], got, cases[i].want);
        free(got);
    }
}

/* The perform hook of a context whose requests must never be sent. */
static int requests_sent;
static int no_request(cli_ctx *ctx)
{
    (void)ctx;
    requests_sent++;
    return CURLE_COULDNT_CONNECT;
}

/* Run the command the words name with a context that counts the requests
 * it would send: its exit code, and its stderr into err. */
static int run_counting(int argc, char **argv, char *err, size_t err_size)
{
    cli_args a;
    char msg[256];
    assert_int_equal(cli_parse(argc, argv, &a, msg, sizeof(msg)), 0);
    char *out_buf = NULL, *err_buf = NULL;
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&out_buf, &out_len), *errf = open_memstream(&err_buf, &err_len);
    cli_ctx ctx = {.host = "http://127.0.0.1:9", .out = out, .err = errf, .silent = false};
    ctx.curl = curl_easy_init();
    ctx.perform = no_request;
    assert_non_null(ctx.curl);
    int rc = a.cmd->run(&ctx, &a);
    curl_easy_cleanup(ctx.curl);
    fclose(out);
    fclose(errf);
    assert_string_equal(out_buf, ""); /* nothing on stdout either way */
    snprintf(err, err_size, "%s", err_buf);
    free(out_buf);
    free(err_buf);
    cli_args_free(&a);
    return rc;
}
#define RUN_COUNTING(err, ...) run_counting(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), err, sizeof(err))

static void test_refused_before_any_request(void **state)
{
    (void)state;
    char err[1024];
    requests_sent = 0;
    assert_int_equal(RUN_COUNTING(err, "user", "create", "c", "--role", "boss"), CLI_EXIT_USAGE);
    assert_string_equal(err, "gpubox user create: --role must be admin, user or viewer, got "
                             "'boss'\nRun 'gpubox user create --help' for usage.\n");
    assert_int_equal(RUN_COUNTING(err, "user", "create", "c", "--role", "user", "--cards", "-2"),
                     CLI_EXIT_USAGE);
    assert_non_null(strstr(err, "--cards must be a whole number"));
    assert_int_equal(RUN_COUNTING(err, "user", "set", "c", "--share", "12 parsecs"),
                     CLI_EXIT_USAGE);
    assert_non_null(strstr(err, "gpubox user set: --share: size unit 'parsecs'"));
    assert_int_equal(RUN_COUNTING(err, "user", "set", "c"), CLI_EXIT_USAGE);
    assert_int_equal(RUN_COUNTING(err, "quota", "defaults", "--volume-bytes", "lots"),
                     CLI_EXIT_USAGE);
    assert_non_null(strstr(err, "gpubox quota defaults: --volume-bytes: size 'lots'"));
    assert_int_equal(RUN_COUNTING(err, "quota", "defaults", "--instances", "-1"), CLI_EXIT_USAGE);
    assert_int_equal(RUN_COUNTING(err, "usage", "--user", ""), CLI_EXIT_USAGE);
    assert_non_null(strstr(err, "--user needs a value"));
    assert_int_equal(requests_sent, 0);

    /* A good command does try (and this server cannot be reached). */
    assert_int_equal(RUN_COUNTING(err, "user", "set", "c", "--cards", "none"), CLI_EXIT_ERROR);
    assert_int_equal(requests_sent, 1);
    assert_non_null(strstr(err, "cannot reach gpuboxd at http://127.0.0.1:9"));
}

static void test_quota_exceeded_is_exit_1(void **state)
{
    (void)state;
    assert_int_equal(cli_exit_for_code(CLI_CODE_QUOTA_EXCEEDED), CLI_EXIT_ERROR);
    assert_int_equal(cli_exit_for_code(1109), CLI_EXIT_ERROR);
}

/* ---- cells and hours ---- */

static char *quota_text(const char *json, enum cli_quota_kind kind)
{
    static char buf[64];
    json_t *v = json ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
    cli_quota_text(v, kind, buf, sizeof(buf));
    json_decref(v);
    return buf;
}

static void test_quota_text_and_cells(void **state)
{
    (void)state;
    assert_string_equal(quota_text(NULL, CLI_QUOTA_COUNT), "-"); /* absent: unlimited */
    assert_string_equal(quota_text("null", CLI_QUOTA_COUNT), "-");
    assert_string_equal(quota_text("2", CLI_QUOTA_COUNT), "2");
    assert_string_equal(quota_text("0", CLI_QUOTA_COUNT), "0");
    assert_string_equal(quota_text("16384", CLI_QUOTA_MIB), "16GB");
    assert_string_equal(quota_text("1536", CLI_QUOTA_MIB), "1.5GB");
    assert_string_equal(quota_text("512", CLI_QUOTA_MIB), "512MB");
    assert_string_equal(quota_text("0", CLI_QUOTA_MIB), "0");
    assert_string_equal(quota_text("536870912000", CLI_QUOTA_BYTES), "500GB");
    assert_string_equal(quota_text("1099511627776", CLI_QUOTA_BYTES), "1TB");
    assert_string_equal(quota_text("\"500GB\"", CLI_QUOTA_BYTES), "500GB"); /* a size as text */
    assert_string_equal(quota_text("\"512000MB\"", CLI_QUOTA_BYTES), "500GB");
    assert_string_equal(quota_text("true", CLI_QUOTA_COUNT), "?");

    char cell[64];
    json_t *one = json_integer(1), *two = json_integer(2), *mib = json_integer(8192),
           *quota = json_integer(16384);
    cli_quota_cell(one, two, CLI_QUOTA_COUNT, cell, sizeof(cell));
    assert_string_equal(cell, "1/2");
    cli_quota_cell(one, NULL, CLI_QUOTA_COUNT, cell, sizeof(cell));
    assert_string_equal(cell, "1/-");
    cli_quota_cell(one, json_null(), CLI_QUOTA_COUNT, cell, sizeof(cell));
    assert_string_equal(cell, "1/-");
    cli_quota_cell(mib, quota, CLI_QUOTA_MIB, cell, sizeof(cell));
    assert_string_equal(cell, "8GB/16GB");
    cli_quota_cell(NULL, two, CLI_QUOTA_COUNT, cell, sizeof(cell)); /* no usage in the answer */
    assert_string_equal(cell, "?/2");
    json_decref(one);
    json_decref(two);
    json_decref(mib);
    json_decref(quota);
}

static void test_hours(void **state)
{
    (void)state;
    char buf[32];
    static const struct {
        double seconds, per;
        const char *want;
    } cases[] = {
        {7200, 1, "2.00"},
        {5400, 1, "1.50"},
        {0, 1, "0.00"},
        {3, 1, "<0.01"},               /* a few seconds of one card */
        {20, 1, "0.01"},               /* 0.0056 h */
        {17, 1, "<0.01"},              /* 0.0047 h */
        {8192.0 * 3600, 1024, "8.00"}, /* 8 GiB of share for an hour */
        {512.0 * 1800, 1024, "0.25"},
        {360000000, 1, "100000.00"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cli_hours(cases[i].seconds, cases[i].per, buf, sizeof(buf));
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("%g seconds per %g: got '%s', want '%s'", cases[i].seconds, cases[i].per, buf,
                     cases[i].want);
    }
}

/* ---- what people see ---- */

/* What print prints for data (JSON text), arg its argument. */
static char *printed(cli_print_fn *print, const char *data_text, const void *arg)
{
    json_error_t jerr;
    json_t *data = json_loads(data_text, 0, &jerr);
    if (!data)
        fail_msg("bad test JSON: %s", jerr.text);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_ctx ctx = {.out = f, .err = stderr};
    print(&ctx, data, arg);
    fclose(f);
    json_decref(data);
    return buf;
}

static void assert_printed(char *got, const char *want)
{
    if (strcmp(got, want) != 0)
        fail_msg("got:\n%s\nwant:\n%s", got, want);
    free(got);
}

static void test_whoami_print(void **state)
{
    (void)state;
    assert_printed(printed(cli_whoami_print,
                           "{\"name\": \"bob\", \"role\": \"user\", \"source\": \"api\", "
                           "\"quota\": {\"cards\": 2, \"shareMiB\": 16384, \"instances\": null, "
                           "\"volumeBytes\": 536870912000}, "
                           "\"usage\": {\"cards\": 1, \"shareMiB\": 8192, \"instances\": 2, "
                           "\"volumeBytes\": 21474836480}}",
                           NULL),
                   "Name:    bob\nRole:    user\nSource:  api\n\n"
                   "RESOURCE   USED  QUOTA\n"
                   "cards      1     2\n"
                   "share      8GB   16GB\n"
                   "instances  2     -\n"
                   "volumes    20GB  500GB\n");
    /* An admin: no quota (all unlimited), nothing held, and the note. */
    assert_printed(printed(cli_whoami_print,
                           "{\"name\": \"alice\", \"role\": \"admin\", \"source\": \"file\", "
                           "\"quota\": {}, \"usage\": {}}",
                           NULL),
                   "Name:    alice\nRole:    admin\nSource:  file\n\n"
                   "RESOURCE   USED  QUOTA\n"
                   "cards      0     -\n"
                   "share      0     -\n"
                   "instances  0     -\n"
                   "volumes    0     -\n"
                   "(quotas do not limit the admin role; its use is counted all the same)\n");
}

static void test_users_print(void **state)
{
    (void)state;
    static const char *const data =
        "{\"users\": ["
        "{\"name\": \"alice\", \"role\": \"admin\", \"source\": \"file\", \"quota\": {}, "
        "\"usage\": {\"cards\": 2}, \"createTime\": \"2026-11-20T10:00:00Z\"}, "
        "{\"name\": \"bob\", \"role\": \"user\", \"source\": \"api\", "
        "\"quota\": {\"cards\": 2, \"shareMiB\": 16384, \"instances\": 3, "
        "\"volumeBytes\": 536870912000}, "
        "\"usage\": {\"cards\": 1, \"shareMiB\": 8192, \"instances\": 2, "
        "\"volumeBytes\": 21474836480}, \"createTime\": \"2026-11-21T09:30:00Z\"}]}";
    cli_args a;
    char msg[64];
    assert_int_equal(PARSE(&a, msg, "users"), 0);
    assert_printed(printed(cli_users_print, data, &a),
                   "NAME   ROLE   SOURCE  CARDS  SHARE     INSTANCES  VOLUMES     CREATED\n"
                   "alice  admin  file    2/-    0/-       0/-        0/-         "
                   "2026-11-20T10:00:00Z\n"
                   "bob    user   api     1/2    8GB/16GB  2/3        20GB/500GB  "
                   "2026-11-21T09:30:00Z\n");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, msg, "users", "-q"), 0);
    assert_printed(printed(cli_users_print, data, &a), "alice\nbob\n");
    cli_args_free(&a);
}

static void test_usage_print(void **state)
{
    (void)state;
    /* No set names a node: no NODE column; a total row after each user. */
    assert_printed(
        printed(cli_usage_print,
                "{\"from\": \"2026-11-01T00:00:00Z\", \"to\": \"2026-12-01T00:00:00Z\", "
                "\"users\": [{\"user\": \"alice\", \"cardSeconds\": 9000.0, "
                "\"shareMiBSeconds\": 0.0, \"sets\": ["
                "{\"name\": \"train\", \"cardSeconds\": 7200.0, \"shareMiBSeconds\": 0.0}, "
                "{\"name\": \"eval\", \"cardSeconds\": 1800, \"shareMiBSeconds\": 0}]}, "
                "{\"user\": \"bob\", \"cardSeconds\": 3, \"shareMiBSeconds\": 44236800, "
                "\"sets\": [{\"name\": \"nb\", \"cardSeconds\": 3, "
                "\"shareMiBSeconds\": 44236800}]}, "
                "{\"user\": \"carol\", \"cardSeconds\": 0, \"shareMiBSeconds\": 0, "
                "\"sets\": []}]}",
                NULL),
        "USER   SET      CARD-HOURS  SHARE-GIB-HOURS\n"
        "alice  train    2.00        0.00\n"
        "alice  eval     0.50        0.00\n"
        "alice  (total)  2.50        0.00\n"
        "bob    nb       <0.01       12.00\n"
        "bob    (total)  <0.01       12.00\n"
        "carol  (total)  0.00        0.00\n"
        "(from 2026-11-01T00:00:00Z to 2026-12-01T00:00:00Z)\n");
    /* A fleet: NODE after SET; the total row has none. */
    assert_printed(printed(cli_usage_print,
                           "{\"from\": null, \"to\": \"2026-12-01T00:00:00Z\", "
                           "\"users\": [{\"user\": \"alice\", \"cardSeconds\": 3600, "
                           "\"shareMiBSeconds\": 0, \"sets\": [{\"name\": \"train\", \"node\": "
                           "\"gpu1\", \"cardSeconds\": 3600, \"shareMiBSeconds\": 0}]}]}",
                           NULL),
                   "USER   SET      NODE  CARD-HOURS  SHARE-GIB-HOURS\n"
                   "alice  train    gpu1  1.00        0.00\n"
                   "alice  (total)  -     1.00        0.00\n"
                   "(from the beginning to 2026-12-01T00:00:00Z)\n");
    /* Nobody used anything. */
    assert_printed(printed(cli_usage_print, "{\"users\": []}", NULL),
                   "USER  SET  CARD-HOURS  SHARE-GIB-HOURS\n(from the beginning to now)\n");
}

static void test_quota_print(void **state)
{
    (void)state;
    static const char *const want = "RESOURCE   QUOTA\n"
                                    "cards      2\n"
                                    "share      -\n"
                                    "instances  4\n"
                                    "volumes    1TB\n";
    assert_printed(printed(cli_quota_print,
                           "{\"cards\": 2, \"shareMiB\": null, \"instances\": 4, "
                           "\"volumeBytes\": 1099511627776}",
                           NULL),
                   want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_the_new_commands),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_bad_values_are_usage_errors),
        cmocka_unit_test(test_refused_before_any_request),
        cmocka_unit_test(test_quota_exceeded_is_exit_1),
        cmocka_unit_test(test_quota_text_and_cells),
        cmocka_unit_test(test_hours),
        cmocka_unit_test(test_whoami_print),
        cmocka_unit_test(test_users_print),
        cmocka_unit_test(test_usage_print),
        cmocka_unit_test(test_quota_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
