/*
 * ctx.c - what every subcommand shares: reporting usage errors and
 * failures (one line on stderr, the exit code returned; a progress line
 * shown meanwhile is ended first; the progress poller's own context
 * reports nothing), and the commands about the client itself: help and
 * completion.
 */
#include "cli/cli.h"

#include <stdarg.h>
#include <string.h>

int cli_usage_error(cli_ctx *ctx, const cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(ctx->err, "gpubox%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    vfprintf(ctx->err, fmt, ap);
    va_end(ap);
    fprintf(ctx->err, "\nRun 'gpubox %s%s--help' for usage.\n", cmd ? cmd->name : "",
            cmd ? " " : "");
    return CLI_EXIT_USAGE;
}

int cli_fail(cli_ctx *ctx, int exit_code, const char *fmt, ...)
{
    if (ctx->silent)
        return exit_code;
    cli_progress_stop(ctx); /* the error goes after the progress, not into it */
    va_list ap;
    va_start(ap, fmt);
    fputs("gpubox: ", ctx->err);
    vfprintf(ctx->err, fmt, ap);
    va_end(ap);
    fputc('\n', ctx->err);
    return exit_code;
}

int cli_cmd_help(cli_ctx *ctx, const cli_args *a)
{
    if (cli_flag(a, "man")) {
        cli_help_man(ctx->out);
        return CLI_EXIT_OK;
    }
    if (a->npos == 0) {
        cli_help_main(ctx->out);
        return CLI_EXIT_OK;
    }
    size_t used = 0;
    const cli_command *c = cli_find_command(a->pos, a->npos, &used);
    if (!c || used != a->npos)
        return cli_usage_error(ctx, a->cmd, "no command '%s%s%s'", a->pos[0],
                               a->npos > 1 ? " " : "", a->npos > 1 ? a->pos[1] : "");
    cli_help_command(c, ctx->out);
    return CLI_EXIT_OK;
}

int cli_cmd_completion(cli_ctx *ctx, const cli_args *a)
{
    if (strcmp(a->pos[0], "bash") != 0)
        return cli_usage_error(ctx, a->cmd, "only bash completion exists, not '%s'", a->pos[0]);
    cli_completion_bash(ctx->out);
    return CLI_EXIT_OK;
}
