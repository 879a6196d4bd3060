/*
 * main.c - gpubox: parse the command line against the table, set up the
 * context (address, token, output mode, one curl handle) and run the
 * subcommand. Its return value is the exit status (cli.h lists them).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/xalloc.h"
#include "cli/cli.h"

/* The address without trailing slashes, with http:// when no scheme is
 * given ("127.0.0.1:2378" works as GPUBOX_HOST). The result lives for the
 * whole run. */
static const char *main_host(const char *flag)
{
    const char *h = flag ? flag : getenv("GPUBOX_HOST");
    if (!h || !h[0])
        h = CLI_DEFAULT_HOST;
    static char buf[1024];
    snprintf(buf, sizeof(buf), "%s%s", strstr(h, "://") ? "" : "http://", h);
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == '/')
        buf[--len] = '\0';
    return buf;
}

int main(int argc, char **argv)
{
    xalloc_init("gpubox");
    cli_ctx ctx = {.out = stdout, .err = stderr};
    cli_args a;
    char msg[512];
    int rc = cli_parse(argc, argv, &a, msg, sizeof(msg));
    if (rc) {
        cli_usage_error(&ctx, a.cmd, "%s", msg);
        cli_args_free(&a);
        return rc;
    }
    if (!a.cmd) { /* "gpubox" alone is a usage error; "gpubox --help" is not */
        bool asked = a.help;
        cli_help_main(asked ? stdout : stderr);
        cli_args_free(&a);
        return asked ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (a.help) {
        cli_help_command(a.cmd, stdout);
        cli_args_free(&a);
        return CLI_EXIT_OK;
    }

    ctx.host = main_host(cli_get(&a, "host"));
    ctx.token = cli_get(&a, "token");
    if (!ctx.token)
        ctx.token = getenv("GPUBOX_TOKEN");
    ctx.json = cli_flag(&a, "json");
    ctx.progress_tty = isatty(STDERR_FILENO);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ctx.curl = curl_easy_init();
    if (!ctx.curl) {
        rc = cli_fail(&ctx, CLI_EXIT_ERROR, "cannot initialize libcurl");
    } else {
        rc = a.cmd->run(&ctx, &a);
        curl_easy_cleanup(ctx.curl);
    }
    curl_global_cleanup();
    cli_args_free(&a);
    if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
        rc = CLI_EXIT_ERROR; /* e.g. a full disk or a closed pipe */
    return rc;
}
