/*
 * test_cli_words.c - the server's messages in the CLI's words (cli_words,
 * src/cli/words.c): neutral advice becomes the gpubox command that does it,
 * with the name the message quotes; an API path becomes "this request";
 * anything else passes unchanged, and a long message is cut, never overrun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"

static void assert_words(const char *msg, const char *want)
{
    char out[512];
    assert_string_equal(cli_words(msg, out, sizeof(out)), want);
}

static void test_advice_names_the_command(void **state)
{
    (void)state;
    assert_words("image 'ubuntu:22.04' is not on this server; pull it first",
                 "image 'ubuntu:22.04' is not on this server; pull it with `gpubox pull "
                 "ubuntu:22.04`");
    assert_words("creating container 'a-1': image 'x:1' is not on this server; pull it first",
                 "creating container 'a-1': image 'x:1' is not on this server; pull it with "
                 "`gpubox pull x:1`");
    assert_words("bind source 'data' is not a gpubox volume; create the volume first, or give an "
                 "absolute host path",
                 "bind source 'data' is not a gpubox volume; create it with `gpubox volume create "
                 "data SIZE`, or give an absolute host path");
    assert_words("give a GPU's UUID, as the list of GPUs shows them",
                 "give a GPU's UUID, as `gpubox gpus` shows them");
}

static void test_api_paths_become_this_request(void **state)
{
    (void)state;
    assert_words("token 'bob' has role viewer; POST /api/v1/replicaSet needs role user",
                 "token 'bob' has role viewer; this request needs role user");
    assert_words("see GET /api/v1/operations/abc, then retry", "see this request, then retry");
    assert_words("no replica set named 'foo'", "no replica set named 'foo'");
}

static void test_cut_not_overrun(void **state)
{
    (void)state;
    char out[16];
    const char *w = cli_words("image 'a-very-long-name:1' is not on this server; pull it first",
                              out, sizeof(out));
    assert_ptr_equal(w, out);
    assert_int_equal(strlen(out), sizeof(out) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_advice_names_the_command),
        cmocka_unit_test(test_api_paths_become_this_request),
        cmocka_unit_test(test_cut_not_overrun),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
