/*
 * help.c - every text derived from the command table (commands.c):
 * `gpubox help`, `gpubox CMD --help`, the man page (`gpubox help --man`)
 * and the bash completion (`gpubox completion bash`). None of them lists
 * a command or an option by hand, so they cannot disagree with the parser.
 */
#include "cli/cli.h"

#include <string.h>

static const char *const help_exit_codes[][2] = {
    {"0", "success"},
    {"1", "server or other error (including gpuboxd not reachable, and a refusal by role or "
          "quota)"},
    {"2", "usage error: a bad flag or argument, or a request the server refuses as invalid"},
    {"3", "not found: no such replica set, volume or image"},
    {"4", "conflict: the state forbids it now, or it exists already"},
    {"5", "shortage: not enough free GPUs or host ports"},
};

/* "-v, --volume SRC:DEST[:ro]" */
static void help_opt_label(const cli_opt *o, char *buf, size_t size)
{
    char shortpart[8] = "";
    if (o->short_name)
        snprintf(shortpart, sizeof(shortpart), "-%c, ", o->short_name);
    snprintf(buf, size, "%s--%s%s%s", shortpart, o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
}

static void help_opts(const cli_opt *opts, FILE *out)
{
    for (const cli_opt *o = opts; o && o->name; o++) {
        char label[80];
        help_opt_label(o, label, sizeof(label));
        if (strlen(label) > 26)
            fprintf(out, "  %s\n  %28s%s%s\n", label, "", o->help,
                    o->kind == CLI_OPT_LIST ? " (repeatable)" : "");
        else
            fprintf(out, "  %-26s  %s%s\n", label, o->help,
                    o->kind == CLI_OPT_LIST ? " (repeatable)" : "");
    }
}

/* "gpubox run NAME [options] [-- CMD...]" */
static void help_synopsis(const cli_command *c, char *buf, size_t size)
{
    snprintf(buf, size, "gpubox %s%s%s%s%s%s", c->name, c->usage[0] ? " " : "", c->usage,
             c->opts ? " [options]" : "", c->takes_rest ? " [-- " : "",
             c->takes_rest ? c->rest_usage : "");
    if (c->takes_rest && strlen(buf) + 2 < size)
        strcat(buf, "]");
}

/* Print text wrapped at 78 columns, each line after `indent` spaces. */
static void help_wrap(const char *text, int indent, FILE *out)
{
    const int width = 78 - indent;
    while (*text) {
        int len = (int)strlen(text);
        int cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = width;
        }
        fprintf(out, "%*s%.*s\n", indent, "", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
    }
}

void cli_help_main(FILE *out)
{
    fputs("Usage: gpubox [--host URL] [--token TOKEN] [--json] COMMAND [ARGS...]\n\n"
          "The command-line client of gpuboxd: GPU containers (replica sets), volumes,\n"
          "GPUs and ports, the nodes of a fleet, and users, quotas and usage.\n\nCommands:\n",
          out);
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_command *c = &cli_commands[i];
        char head[64];
        snprintf(head, sizeof(head), "%s %s", c->name, c->usage);
        fprintf(out, "  %-24s  %s\n", head, c->summary);
    }
    fputs("\nGlobal options (with any command):\n", out);
    help_opts(cli_global_opts, out);
    fputs("\nExit status:\n", out);
    for (size_t i = 0; i < sizeof(help_exit_codes) / sizeof(help_exit_codes[0]); i++)
        fprintf(out, "  %s  %s\n", help_exit_codes[i][0], help_exit_codes[i][1]);
    fputs("  gpubox exec exits with the command's own exit code.\n"
          "\nRun 'gpubox COMMAND --help' for a command's options.\n",
          out);
}

void cli_help_command(const cli_command *c, FILE *out)
{
    char synopsis[160];
    help_synopsis(c, synopsis, sizeof(synopsis));
    fprintf(out, "Usage: %s\n\n%s.\n", synopsis, c->summary);
    if (c->description) {
        fputc('\n', out);
        help_wrap(c->description, 0, out);
    }
    if (c->opts) {
        fputs("\nOptions:\n", out);
        help_opts(c->opts, out);
    }
    fputs("\nGlobal options:\n", out);
    help_opts(cli_global_opts, out);
}

/* roff needs '-' as "\-" and a leading '.' or '\'' escaped. */
static void man_text(const char *s, FILE *out)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", out);
    for (; *s; s++) {
        if (*s == '-' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void man_opts(const cli_opt *opts, FILE *out)
{
    for (const cli_opt *o = opts; o && o->name; o++) {
        char label[80];
        help_opt_label(o, label, sizeof(label));
        fputs(".TP\n.B ", out);
        man_text(label, out);
        fputc('\n', out);
        man_text(o->help, out);
        fputs(o->kind == CLI_OPT_LIST ? " (repeatable)\n" : "\n", out);
    }
}

void cli_help_man(FILE *out)
{
    fputs(
        ".TH GPUBOX 1 \"\" \"gpubox " GPUBOX_VERSION "\" \"User Commands\"\n"
        ".SH NAME\ngpubox \\- command\\-line client of gpuboxd\n"
        ".SH SYNOPSIS\n.B gpubox\n[\\-\\-host URL] [\\-\\-token TOKEN] [\\-\\-json] COMMAND "
        "[ARGS...]\n"
        ".SH DESCRIPTION\ngpubox runs and manages GPU containers (replica sets), volumes, "
        "GPUs and ports, the nodes of a fleet, and users, quotas and usage, through gpuboxd's HTTP "
        "API.\n"
        ".SH COMMANDS\n",
        out);
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_command *c = &cli_commands[i];
        char synopsis[160];
        help_synopsis(c, synopsis, sizeof(synopsis));
        fputs(".SS ", out);
        man_text(synopsis, out);
        fputc('\n', out);
        man_text(c->summary, out);
        fputs(".\n", out);
        if (c->description) {
            fputs(".PP\n", out);
            man_text(c->description, out);
            fputc('\n', out);
        }
        man_opts(c->opts, out);
    }
    fputs(".SH GLOBAL OPTIONS\n", out);
    man_opts(cli_global_opts, out);
    fputs(".SH ENVIRONMENT\n.TP\n.B GPUBOX_HOST\ngpuboxd's address (default " CLI_DEFAULT_HOST
          ")\n.TP\n.B GPUBOX_TOKEN\nbearer token\n.TP\n.B GPUBOX_PROGRESS\n0, no, off or "
          "false: no progress on stderr while a long operation runs\n.SH EXIT STATUS\n",
          out);
    for (size_t i = 0; i < sizeof(help_exit_codes) / sizeof(help_exit_codes[0]); i++) {
        fprintf(out, ".TP\n.B %s\n", help_exit_codes[i][0]);
        man_text(help_exit_codes[i][1], out);
        fputc('\n', out);
    }
}

/* The options of c (and the global ones) as one word list for compgen. */
static void completion_opts(const cli_opt *opts, FILE *out)
{
    for (const cli_opt *o = opts; o && o->name; o++) {
        fprintf(out, " --%s", o->name);
        if (o->short_name)
            fprintf(out, " -%c", o->short_name);
    }
}

/* Options that take a value: after them, complete no option or name. */
static void completion_value_opts(FILE *out)
{
    fputs("    local valued=\"", out);
    for (size_t i = 0; i <= cli_ncommands; i++) {
        const cli_opt *opts = i < cli_ncommands ? cli_commands[i].opts : cli_global_opts;
        for (const cli_opt *o = opts; o && o->name; o++) {
            if (o->kind == CLI_OPT_FLAG)
                continue;
            fprintf(out, " --%s", o->name);
            if (o->short_name)
                fprintf(out, " -%c", o->short_name);
        }
    }
    fputs("\"\n", out);
}

/* The command named by the first len bytes of group alone, or NULL. */
static const cli_command *completion_alone(const char *group, size_t len)
{
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strlen(cli_commands[i].name) == len && strncmp(cli_commands[i].name, group, len) == 0)
            return &cli_commands[i];
    return NULL;
}

void cli_completion_bash(FILE *out)
{
    fputs("# bash completion for gpubox; generated by `gpubox completion bash`.\n"
          "# Load it with: source <(gpubox completion bash)\n"
          "_gpubox() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local words=() w i\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        w=${COMP_WORDS[i]}\n"
          "        [[ $w == -* ]] && continue\n"
          "        words+=(\"$w\")\n"
          "    done\n",
          out);
    completion_value_opts(out);
    fputs("    [[ \" $valued \" == *\" $prev \"* ]] && return 0\n"
          "    local cmd=${words[0]} sub=${words[1]}\n"
          "    local globals=\"",
          out);
    completion_opts(cli_global_opts, out);
    fputs("\"\n    case \"$cmd\" in\n", out);

    /* Groups: the second word. */
    fputs("    '')\n        COMPREPLY=($(compgen -W \"", out);
    const char *last_group = NULL;
    size_t last_len = 0;
    for (size_t i = 0; i < cli_ncommands; i++) {
        const char *name = cli_commands[i].name, *space = strchr(name, ' ');
        size_t len = space ? (size_t)(space - name) : strlen(name);
        if (last_group && len == last_len && strncmp(name, last_group, len) == 0)
            continue;
        fprintf(out, " %.*s", (int)len, name);
        last_group = name;
        last_len = len;
    }
    fputs(" $globals\" -- \"$cur\")) ;;\n", out);

    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_command *c = &cli_commands[i];
        const char *space = strchr(c->name, ' ');
        if (space) {
            size_t glen = (size_t)(space - c->name);
            if (i > 0 && strncmp(cli_commands[i - 1].name, c->name, glen) == 0 &&
                cli_commands[i - 1].name[glen] == ' ')
                continue; /* the group's case was written with its first member */
            fprintf(out, "    %.*s)\n        case \"$sub\" in\n", (int)glen, c->name);
            for (size_t k = i;
                 k < cli_ncommands && strncmp(cli_commands[k].name, c->name, glen) == 0 &&
                 cli_commands[k].name[glen] == ' ';
                 k++) {
                const cli_command *m = &cli_commands[k];
                fprintf(out, "        %s)\n            _gpubox_args %d %s \"", m->name + glen + 1,
                        m->complete, "2");
                completion_opts(m->opts, out);
                fputs(" $globals\" ;;\n", out);
            }
            /* A group that is also a command alone ("images", "images rm"):
             * an option after it is the lone command's. */
            const cli_command *alone = completion_alone(c->name, glen);
            fputs("        *) ", out);
            if (alone) {
                fprintf(out, "if [[ $cur == -* ]]; then _gpubox_args %d 1 \"", alone->complete);
                completion_opts(alone->opts, out);
                fputs(" $globals\"; return 0; fi\n           ", out);
            }
            fputs(" COMPREPLY=($(compgen -W \"", out);
            for (size_t k = i;
                 k < cli_ncommands && strncmp(cli_commands[k].name, c->name, glen) == 0 &&
                 cli_commands[k].name[glen] == ' ';
                 k++)
                fprintf(out, " %s", cli_commands[k].name + glen + 1);
            fputs("\" -- \"$cur\")) ;;\n        esac ;;\n", out);
            continue;
        }
        if (cli_is_group(c->name))
            continue; /* written with its group */
        fprintf(out, "    %s)\n        _gpubox_args %d 1 \"", c->name, c->complete);
        completion_opts(c->opts, out);
        fputs(" $globals\" ;;\n", out);
    }
    fputs("    esac\n}\n", out);

    /* _gpubox_args KIND NWORDS OPTIONS: options after '-', else names. */
    fprintf(out,
            "_gpubox_args() {\n"
            "    local kind=$1 used=$2 opts=$3 names=\n"
            "    if [[ $cur == -* ]]; then\n"
            "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
            "        return 0\n"
            "    fi\n"
            "    case $kind in\n"
            "    %d) names=$(gpubox ps -q 2>/dev/null) ;;\n"
            "    %d) names=$(gpubox volume ls -q 2>/dev/null) ;;\n"
            "    %d) names=\"",
            CLI_COMPLETE_REPLICASET, CLI_COMPLETE_VOLUME, CLI_COMPLETE_COMMAND);
    for (size_t i = 0; i < cli_ncommands; i++)
        if (!strchr(cli_commands[i].name, ' '))
            fprintf(out, " %s", cli_commands[i].name);
    fprintf(out,
            "\" ;;\n"
            "    %d) names=$(gpubox nodes -q 2>/dev/null) ;;\n"
            "    %d) names=$(gpubox users -q 2>/dev/null) ;;\n"
            "    esac\n"
            "    [[ ${#words[@]} -gt $used ]] && [[ $kind != %d ]] && names=\n"
            "    COMPREPLY=($(compgen -W \"$names\" -- \"$cur\"))\n"
            "}\n"
            "complete -F _gpubox gpubox\n",
            CLI_COMPLETE_NODE, CLI_COMPLETE_USER, CLI_COMPLETE_COMMAND);
}
