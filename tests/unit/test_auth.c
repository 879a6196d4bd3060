/*
 * test_auth.c - bearer tokens: the token file's format and permissions,
 * the constant-time lookup, the Authorization header, and who may call
 * which route. Error messages must never contain a token.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/auth.h"

#define TOK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_V "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"

static char path[64];

static void write_file(const char *text, mode_t mode)
{
    strcpy(path, "/tmp/gpubox-test-tokens-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static int remove_file(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    path[0] = '\0';
    return 0;
}

static void test_file_with_comments_blanks_and_crlf(void **state)
{
    (void)state;
    write_file("# gpubox tokens\n"
               "\n"
               "alice:admin:" TOK_A "\r\n"
               "   # indented comment\n"
               "  bob.ci@example:viewer:" TOK_V "  \n",
               0600);
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_load(path, &a, &err), 0);
    assert_int_equal(http_auth_count(a), 2);
    const char *name = NULL;
    assert_int_equal(http_auth_lookup(a, TOK_A, strlen(TOK_A), &name), HTTP_ROLE_ADMIN);
    assert_string_equal(name, "alice");
    assert_int_equal(http_auth_lookup(a, TOK_V, strlen(TOK_V), &name), HTTP_ROLE_VIEWER);
    assert_string_equal(name, "bob.ci@example");
    http_auth_free(a);
}

static void test_group_readable_is_fine(void **state)
{
    (void)state;
    write_file("alice:admin:" TOK_A "\n", 0640);
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_load(path, &a, &err), 0);
    http_auth_free(a);
}

static void test_file_others_may_read_or_write_is_refused(void **state)
{
    (void)state;
    static const mode_t modes[] = {0644, 0604, 0602, 0620, 0666, 0601};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        write_file("alice:admin:" TOK_A "\n", modes[i]);
        http_auth *a = NULL;
        gb_err err = GB_ERR_INIT;
        assert_int_equal(http_auth_load(path, &a, &err), -1);
        assert_null(a);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, "chmod 600"));
        assert_non_null(strstr(err.msg, path));
        assert_null(strstr(err.msg, TOK_A));
        remove_file(NULL);
    }
}

static void test_missing_directory_and_binary_files(void **state)
{
    (void)state;
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_load("/nonexistent/tokens", &a, &err), -1);
    assert_non_null(strstr(err.msg, "cannot read token file /nonexistent/tokens"));
    assert_int_equal(http_auth_load("/tmp", &a, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));

    strcpy(path, "/tmp/gpubox-test-tokens-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char nul[] = "alice:admin:" TOK_A "\0\n";
    assert_int_equal(write(fd, nul, sizeof(nul) - 1), (ssize_t)sizeof(nul) - 1);
    close(fd);
    assert_int_equal(http_auth_load(path, &a, &err), -1);
    assert_non_null(strstr(err.msg, "NUL byte"));
}

/* Each bad line stops the parse with the line number and what to fix; no
 * message quotes the token or a field that might be one. */
static void test_bad_lines_name_the_line_never_the_token(void **state)
{
    (void)state;
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"# only comments\n\n", "holds no token"},
        {"", "holds no token"},
        {"alice:admin:" TOK_A "\n" TOK_V "\n", "t:2: expected name:role:token"},
        {"alice:" TOK_A "\n", "t:1: expected name:role:token"},
        {":admin:" TOK_A "\n", "t:1: the name (first field)"},
        {"al ice:admin:" TOK_A "\n", "t:1: the name (first field)"},
        {"al/ice:admin:" TOK_A "\n", "t:1: the name (first field)"},
        {"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn:admin:" TOK_A "\n",
         "t:1: the name (first field) must be 1-63 characters"},
        {"alice:root:" TOK_A "\n",
         "t:1: the role (second field) of 'alice' must be admin, user or viewer"},
        {"alice:" TOK_V ":admin\n", "t:1: the role (second field) of 'alice'"},
        {"alice:Admin:" TOK_A "\n", "must be admin, user or viewer"},
        {"alice:admin:short\n", "t:1: the token of 'alice' is 5 characters; use 16 to 256"},
        {"alice:admin:\n", "the token of 'alice' is 0 characters"},
        {"alice:admin:aaaaaaaa aaaaaaaaaaaaaaaa\n", "contains a blank, control or non-ASCII"},
        {"alice:admin:aaaaaaaaaaaaaaaa\xc3\xa9\n", "non-ASCII"},
        {"alice:admin:" TOK_A "\nalice:viewer:" TOK_V "\n", "t:2: the name 'alice' is used twice"},
        {"alice:admin:" TOK_A "\nbob:viewer:" TOK_A "\n",
         "t:2: the token of 'bob' is also another entry's token"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_auth *a = NULL;
        gb_err err = GB_ERR_INIT;
        assert_int_equal(http_auth_parse(cases[i].text, "t", &a, &err), -1);
        assert_null(a);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        if (!strstr(err.msg, cases[i].expect))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].expect);
        if (strstr(err.msg, TOK_A) || strstr(err.msg, TOK_V) || strstr(err.msg, "aaaaaaaa"))
            fail_msg("case %zu: message shows a token: %s", i, err.msg);
    }
}

static void test_token_length_bounds(void **state)
{
    (void)state;
    char text[AUTH_TOKEN_MAX + 64];
    char token[AUTH_TOKEN_MAX + 2];
    memset(token, 'x', sizeof(token));
    token[AUTH_TOKEN_MAX] = '\0';
    snprintf(text, sizeof(text), "max:admin:%s\n", token);
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_parse(text, "t", &a, &err), 0);
    const char *name;
    assert_int_equal(http_auth_lookup(a, token, AUTH_TOKEN_MAX, &name), HTTP_ROLE_ADMIN);
    /* one more character is a different token, even though the compare
     * covers only AUTH_TOKEN_MAX bytes */
    token[AUTH_TOKEN_MAX] = 'x';
    assert_int_equal(http_auth_lookup(a, token, AUTH_TOKEN_MAX + 1, &name), HTTP_ROLE_NONE);
    assert_null(name);
    http_auth_free(a);

    snprintf(text, sizeof(text), "max:admin:%.*s\n", AUTH_TOKEN_MAX + 1, token);
    assert_int_equal(http_auth_parse(text, "t", &a, &err), -1);
    assert_non_null(strstr(err.msg, "257 characters"));
    snprintf(text, sizeof(text), "min:admin:%.*s\n", AUTH_TOKEN_MIN, token);
    assert_int_equal(http_auth_parse(text, "t", &a, &err), 0);
    http_auth_free(a);
}

static void test_lookup_needs_the_whole_token(void **state)
{
    (void)state;
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(
        http_auth_parse("alice:admin:" TOK_A "\nbob:viewer:" TOK_V "\n", "t", &a, &err), 0);
    const char *name = "unchanged";
    assert_int_equal(http_auth_lookup(a, TOK_A, strlen(TOK_A) - 1, &name), HTTP_ROLE_NONE);
    assert_null(name);
    assert_int_equal(http_auth_lookup(a, TOK_A "a", strlen(TOK_A) + 1, &name), HTTP_ROLE_NONE);
    assert_int_equal(http_auth_lookup(a, "", 0, &name), HTTP_ROLE_NONE);
    assert_int_equal(http_auth_lookup(a, NULL, 0, &name), HTTP_ROLE_NONE);
    char almost[] = TOK_A;
    almost[sizeof(almost) - 2] = 'b';
    assert_int_equal(http_auth_lookup(a, almost, strlen(almost), &name), HTTP_ROLE_NONE);
    assert_int_equal(http_auth_lookup(NULL, TOK_A, strlen(TOK_A), &name), HTTP_ROLE_NONE);
    http_auth_free(a);
}

static void test_lookup_finds_any_entry_of_many(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < 100; i++)
        fprintf(f, "user%d:%s:token-number-%04d-padding\n", i, i % 2 ? "viewer" : "admin", i);
    fclose(f);
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_parse(text, "t", &a, &err), 0);
    free(text);
    assert_int_equal(http_auth_count(a), 100);
    for (int i = 0; i < 100; i += 33) {
        char token[64], want[16];
        snprintf(token, sizeof(token), "token-number-%04d-padding", i);
        snprintf(want, sizeof(want), "user%d", i);
        const char *name = NULL;
        assert_int_equal(http_auth_lookup(a, token, strlen(token), &name),
                         i % 2 ? HTTP_ROLE_VIEWER : HTTP_ROLE_ADMIN);
        assert_string_equal(name, want);
    }
    http_auth_free(a);
}

static void test_equal_fixed(void **state)
{
    (void)state;
    unsigned char a[AUTH_TOKEN_MAX] = {0}, b[AUTH_TOKEN_MAX] = {0};
    memcpy(a, "secret-token-123", 16);
    memcpy(b, "secret-token-123", 16);
    assert_true(http_auth_equal_fixed(a, 16, b, 16));
    assert_false(http_auth_equal_fixed(a, 16, b, 15)); /* same bytes, other length */
    b[15] = '4';
    assert_false(http_auth_equal_fixed(a, 16, b, 16));
    b[15] = '3';
    a[AUTH_TOKEN_MAX - 1] = 1; /* a difference in the padding counts too */
    assert_false(http_auth_equal_fixed(a, 16, b, 16));
}

static double lookup_seconds(const http_auth *a, const char *token, size_t len)
{
    /* The fastest of many batches: noise from other processes only ever
     * adds time, so the minimum is what the code itself costs. */
    double best = 1e9;
    for (int batch = 0; batch < 200; batch++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 50; i++) {
            const char *name;
            (void)http_auth_lookup(a, token, len, &name);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (s < best)
            best = s;
    }
    return best;
}

/* A compare that stopped at the first wrong byte would answer a guess that
 * is wrong from its first byte far sooner than the right token (256 bytes
 * compared). The lookup takes as long for both, and for a miss. */
static void test_lookup_time_does_not_depend_on_the_guess(void **state)
{
    (void)state;
    char token[AUTH_TOKEN_MAX + 1], text[AUTH_TOKEN_MAX + 64];
    memset(token, 'k', AUTH_TOKEN_MAX);
    token[AUTH_TOKEN_MAX] = '\0';
    snprintf(text, sizeof(text), "one:admin:%s\n", token);
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(http_auth_parse(text, "t", &a, &err), 0);
    char wrong_first[AUTH_TOKEN_MAX + 1];
    memcpy(wrong_first, token, sizeof(token));
    wrong_first[0] = 'x';
    /* A busy machine can still skew one measurement (another process
     * steals every batch of one side); an early-exit compare is slower for
     * the right token in every attempt, so one attempt within 1.5x passes. */
    double right = 0, wrong = 0, ratio = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        right = lookup_seconds(a, token, AUTH_TOKEN_MAX);
        wrong = lookup_seconds(a, wrong_first, AUTH_TOKEN_MAX);
        ratio = right > wrong ? right / wrong : wrong / right;
        if (ratio <= 1.5)
            break;
    }
    if (ratio > 1.5)
        fail_msg("right token %.3g s, wrong first byte %.3g s: ratio %.2f", right, wrong, ratio);
    http_auth_free(a);
}

static void test_bearer_header(void **state)
{
    (void)state;
    const char *t;
    size_t n;
    assert_true(http_auth_bearer("Bearer abc", &t, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(t, "abc", 3);
    assert_true(http_auth_bearer("  bearer \t abc:def  ", &t, &n));
    assert_int_equal(n, 7);
    assert_memory_equal(t, "abc:def", 7);
    assert_true(http_auth_bearer("BEARER x", &t, &n));
    static const char *no[] = {"Basic YWxpY2U6eA==", "Bearer", "Bearer ",  "Bearer   ",
                               "Bearerabc",          "",       "Token abc"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        assert_false(http_auth_bearer(no[i], &t, &n));
        assert_null(t);
    }
    assert_false(http_auth_bearer(NULL, &t, &n));
}

static void test_access_by_method(void **state)
{
    (void)state;
    assert_int_equal(http_access_required(HTTP_ACCESS_BY_METHOD, "GET"), HTTP_ROLE_VIEWER);
    assert_int_equal(http_access_required(HTTP_ACCESS_BY_METHOD, "HEAD"), HTTP_ROLE_VIEWER);
    static const char *writes[] = {"POST", "PATCH", "PUT", "DELETE", "OPTIONS", "get", "TRACE"};
    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++)
        assert_int_equal(http_access_required(HTTP_ACCESS_BY_METHOD, writes[i]), HTTP_ROLE_USER);
    assert_int_equal(http_access_required(HTTP_ACCESS_OBSERVER, "GET"), HTTP_ROLE_VIEWER);
    assert_int_equal(http_access_required(HTTP_ACCESS_OPEN, "GET"), HTTP_ROLE_NONE);
    assert_int_equal(http_access_required(HTTP_ACCESS_VIEWER, "POST"), HTTP_ROLE_VIEWER);
    assert_int_equal(http_access_required(HTTP_ACCESS_USER, "GET"), HTTP_ROLE_USER);
    assert_int_equal(http_access_required(HTTP_ACCESS_USER, "POST"), HTTP_ROLE_USER);
    assert_int_equal(http_access_required(HTTP_ACCESS_ADMIN, "GET"), HTTP_ROLE_ADMIN);
}

static void test_check_decides_401_403_or_go(void **state)
{
    (void)state;
    http_auth *a = NULL;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(
        http_auth_parse("alice:admin:" TOK_A "\nbob:viewer:" TOK_V "\n", "t", &a, &err), 0);
    http_identity who;

    /* no auth configured: everyone is an anonymous admin */
    assert_int_equal(http_auth_check(NULL, HTTP_ACCESS_BY_METHOD, "DELETE", "/x", NULL, &who, &err),
                     0);
    assert_string_equal(who.name, "anonymous");
    assert_int_equal(who.role, HTTP_ROLE_ADMIN);

    /* open routes need nothing, but a token still names the caller */
    assert_int_equal(http_auth_check(a, HTTP_ACCESS_OPEN, "GET", "/healthz", NULL, &who, &err), 0);
    assert_string_equal(who.name, "-");
    assert_int_equal(
        http_auth_check(a, HTTP_ACCESS_OPEN, "GET", "/healthz", "Bearer " TOK_V, &who, &err), 0);
    assert_string_equal(who.name, "bob");

    /* 401: no token, another scheme, an unknown token */
    err = (gb_err)GB_ERR_INIT;
    assert_int_equal(http_auth_check(a, HTTP_ACCESS_BY_METHOD, "GET", "/x", NULL, &who, &err), -1);
    assert_int_equal(err.code, ERR_UNAUTHORIZED);
    assert_non_null(strstr(err.msg, "Authorization: Bearer"));
    assert_false(who.bad_token);
    assert_int_equal(
        http_auth_check(a, HTTP_ACCESS_BY_METHOD, "GET", "/x", "Basic " TOK_A, &who, &err), -1);
    assert_int_equal(err.code, ERR_UNAUTHORIZED);
    assert_int_equal(http_auth_check(a, HTTP_ACCESS_BY_METHOD, "GET", "/x",
                                     "Bearer nottherightone-000000", &who, &err),
                     -1);
    assert_int_equal(err.code, ERR_UNAUTHORIZED);
    assert_true(who.bad_token);
    assert_null(strstr(err.msg, "nottherightone"));
    /* unmatched routes (404/405 to come) need a token too */
    assert_int_equal(http_auth_check(a, HTTP_ACCESS_VIEWER, "POST", "/nope", NULL, &who, &err), -1);
    assert_int_equal(err.code, ERR_UNAUTHORIZED);

    /* viewers read; writing is 403 naming the token's name, not the token */
    assert_int_equal(
        http_auth_check(a, HTTP_ACCESS_BY_METHOD, "GET", "/x", "Bearer " TOK_V, &who, &err), 0);
    assert_int_equal(
        http_auth_check(a, HTTP_ACCESS_BY_METHOD, "HEAD", "/x", "Bearer " TOK_V, &who, &err), 0);
    err = (gb_err)GB_ERR_INIT;
    assert_int_equal(http_auth_check(a, HTTP_ACCESS_BY_METHOD, "POST", "/api/v1/replicaSet",
                                     "Bearer " TOK_V, &who, &err),
                     -1);
    assert_int_equal(err.code, ERR_FORBIDDEN);
    assert_string_equal(err.msg,
                        "token 'bob' has role viewer; POST /api/v1/replicaSet needs role user");
    assert_string_equal(who.name, "bob");
    assert_int_equal(who.role, HTTP_ROLE_VIEWER);
    assert_int_equal(
        http_auth_check(a, HTTP_ACCESS_ADMIN, "GET", "/x", "Bearer " TOK_V, &who, &err), -1);
    assert_int_equal(err.code, ERR_FORBIDDEN);

    /* admins do everything */
    static const char *methods[] = {"GET", "POST", "PATCH", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        assert_int_equal(http_auth_check(a, HTTP_ACCESS_BY_METHOD, methods[i], "/x",
                                         "Bearer " TOK_A, &who, &err),
                         0);
        assert_string_equal(who.name, "alice");
    }
    http_auth_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_file_with_comments_blanks_and_crlf, remove_file),
        cmocka_unit_test_teardown(test_group_readable_is_fine, remove_file),
        cmocka_unit_test_teardown(test_file_others_may_read_or_write_is_refused, remove_file),
        cmocka_unit_test_teardown(test_missing_directory_and_binary_files, remove_file),
        cmocka_unit_test(test_bad_lines_name_the_line_never_the_token),
        cmocka_unit_test(test_token_length_bounds),
        cmocka_unit_test(test_lookup_needs_the_whole_token),
        cmocka_unit_test(test_lookup_finds_any_entry_of_many),
        cmocka_unit_test(test_equal_fixed),
        cmocka_unit_test(test_lookup_time_does_not_depend_on_the_guess),
        cmocka_unit_test(test_bearer_header),
        cmocka_unit_test(test_access_by_method),
        cmocka_unit_test(test_check_decides_401_403_or_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
