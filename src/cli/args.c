/*
 * args.c - the command-line parser, driven by the table in commands.c.
 *
 * Grammar: gpubox [global options] COMMAND [words and options...] [-- REST...]
 *   - COMMAND is one word, or two for a group ("volume create");
 *   - options may come before or after the command and between positionals:
 *     --name VALUE, --name=VALUE, -n VALUE, -nVALUE; flags take no value;
 *   - the global options (--host, --token, --json, --help) are accepted
 *     everywhere;
 *   - "--" ends the options: what follows is the command to run for a
 *     subcommand that takes one (run, exec), else more positionals.
 * Values are checked by the subcommands (cli_parse_int and friends), so
 * the parser knows only shapes, and every check gives exit status 2.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int args_error(char *msg, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int args_error(char *msg, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

bool cli_is_group(const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strncmp(cli_commands[i].name, name, len) == 0 && cli_commands[i].name[len] == ' ')
            return true;
    return false;
}

const cli_command *cli_find_command(const char *const *words, size_t n, size_t *used)
{
    if (n == 0)
        return NULL;
    for (size_t i = 0; i < cli_ncommands; i++) {
        const char *name = cli_commands[i].name;
        const char *space = strchr(name, ' ');
        if (!space && strcmp(name, words[0]) == 0) {
            *used = 1;
            return &cli_commands[i];
        }
        if (space && n >= 2 && strlen(words[0]) == (size_t)(space - name) &&
            strncmp(name, words[0], (size_t)(space - name)) == 0 &&
            strcmp(space + 1, words[1]) == 0) {
            *used = 2;
            return &cli_commands[i];
        }
    }
    return NULL;
}

/* The option named by a long name (len bytes) or a short letter, looked up
 * in the command's options and then the global ones. */
static const cli_opt *args_find_opt(const cli_command *cmd, const char *name, size_t len,
                                    char short_name)
{
    const cli_opt *tables[2] = {cmd ? cmd->opts : NULL, cli_global_opts};
    for (size_t t = 0; t < 2; t++) {
        for (const cli_opt *o = tables[t]; o && o->name; o++) {
            if (short_name ? o->short_name == short_name
                           : strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                return o;
        }
    }
    return NULL;
}

static int args_add_opt(cli_args *a, const cli_opt *o, const char *value, char *msg, size_t size)
{
    if (o->kind == CLI_OPT_VALUE) {
        for (size_t i = 0; i < a->nopts; i++)
            if (a->opts[i].opt == o)
                return args_error(msg, size, "--%s is given twice; give it once", o->name);
    }
    a->opts[a->nopts++] = (cli_opt_value){.opt = o, .value = value ? value : ""};
    if (strcmp(o->name, "help") == 0)
        a->help = true;
    return 0;
}

/* One option word at argv[*i] ("--name", "--name=v", "-n", "-nv"); takes
 * the next word as its value when it needs one. */
static int args_option(cli_args *a, int argc, char **argv, int *i, char *msg, size_t size)
{
    const char *word = argv[*i];
    const cli_opt *o;
    const char *inline_value = NULL;
    if (word[1] == '-') {
        const char *name = word + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        o = args_find_opt(a->cmd, name, len, 0);
        if (!o)
            return args_error(msg, size, "unknown option --%.*s", (int)len, name);
        if (eq)
            inline_value = eq + 1;
    } else {
        /* Short flags may be bundled ("-it"); an option that takes a value
         * ends the bundle, with the rest of the word as its value. */
        for (word++;; word++) {
            o = args_find_opt(a->cmd, "", 0, word[0]);
            if (!o)
                return args_error(msg, size, "unknown option -%c", word[0]);
            if (o->kind != CLI_OPT_FLAG || !word[1])
                break;
            int rc = args_add_opt(a, o, NULL, msg, size);
            if (rc)
                return rc;
        }
        if (word[1])
            inline_value = word + 1;
    }
    if (o->kind == CLI_OPT_FLAG) {
        if (inline_value)
            return args_error(msg, size, "--%s takes no value", o->name);
        return args_add_opt(a, o, NULL, msg, size);
    }
    if (!inline_value) {
        if (*i + 1 >= argc)
            return args_error(msg, size, "--%s needs a value (%s)", o->name, o->metavar);
        inline_value = argv[++*i];
    }
    return args_add_opt(a, o, inline_value, msg, size);
}

/* A word that is an option: starts with '-' and is not "-" alone. */
static bool args_is_option(const char *word)
{
    return word[0] == '-' && word[1] != '\0';
}

/* Find the command among the leading words (after global options). */
static int args_command(cli_args *a, const char **words, size_t nwords, char *msg, size_t size)
{
    size_t used = 0;
    a->cmd = cli_find_command(words, nwords, &used);
    if (a->cmd) {
        memmove(a->pos, a->pos + used, (a->npos - used) * sizeof(*a->pos));
        a->npos -= used;
        return 0;
    }
    if (cli_is_group(words[0]))
        return args_error(msg, size,
                          nwords > 1 ? "unknown command '%s %s'; see gpubox help"
                                     : "'%s' needs a subcommand%s; see gpubox help",
                          words[0], nwords > 1 ? words[1] : "");
    return args_error(msg, size, "unknown command '%s'; see gpubox help", words[0]);
}

int cli_parse(int argc, char **argv, cli_args *a, char *msg, size_t size)
{
    *a = (cli_args){0};
    msg[0] = '\0';
    size_t cap = argc > 0 ? (size_t)argc : 1;
    a->pos = xcalloc(cap, sizeof(*a->pos));
    a->opts = xcalloc(cap, sizeof(*a->opts));

    /* The first one or two words name the command, and the command must
     * be known before its own options can be told apart: so before it,
     * only global options are accepted ("gpubox --json volume ls"). */
    int i = 1;
    for (; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0)
            break;
        if (args_is_option(w)) {
            if (!a->cmd && a->npos > 0) {
                int rc = args_command(a, a->pos, a->npos, msg, size);
                if (rc)
                    return rc;
            }
            int rc = args_option(a, argc, argv, &i, msg, size);
            if (rc)
                return rc;
            continue;
        }
        a->pos[a->npos++] = w;
        if (!a->cmd && (a->npos == 2 || !cli_is_group(w))) {
            int rc = args_command(a, a->pos, a->npos, msg, size);
            if (rc)
                return rc;
        }
    }
    if (!a->cmd && a->npos > 0) {
        int rc = args_command(a, a->pos, a->npos, msg, size);
        if (rc)
            return rc;
    }
    if (i < argc) { /* "--" */
        i++;
        if (a->cmd && a->cmd->takes_rest) {
            a->has_rest = true;
            a->rest = (const char **)argv + i;
            a->nrest = (size_t)(argc - i);
        } else {
            for (; i < argc; i++)
                a->pos[a->npos++] = argv[i];
        }
    }
    if (!a->cmd || a->help)
        return 0;
    const cli_command *c = a->cmd;
    if ((int)a->npos < c->min_pos)
        return args_error(msg, size, "missing %s (usage: gpubox %s %s)",
                          a->npos == 0 ? "arguments" : "an argument", c->name, c->usage);
    if (c->max_pos >= 0 && (int)a->npos > c->max_pos) {
        if (c->takes_rest)
            return args_error(msg, size,
                              "unexpected argument '%s'; put the command after \"--\": "
                              "gpubox %s %s -- %s",
                              a->pos[c->max_pos], c->name, c->usage, c->rest_usage);
        return args_error(msg, size, "unexpected argument '%s' (usage: gpubox %s %s)",
                          a->pos[c->max_pos], c->name, c->usage);
    }
    return 0;
}

void cli_args_free(cli_args *a)
{
    free(a->pos);
    free(a->opts);
    *a = (cli_args){0};
}

const char *cli_get(const cli_args *a, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < a->nopts; i++)
        if (strcmp(a->opts[i].opt->name, name) == 0)
            v = a->opts[i].value;
    return v;
}

bool cli_flag(const cli_args *a, const char *name)
{
    return cli_get(a, name) != NULL;
}

size_t cli_get_all(const cli_args *a, const char *name, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nopts; i++)
        if (strcmp(a->opts[i].opt->name, name) == 0 && n < max)
            out[n++] = a->opts[i].value;
    return n;
}

size_t cli_count(const cli_args *a, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nopts; i++)
        n += strcmp(a->opts[i].opt->name, name) == 0;
    return n;
}

int cli_parse_int(const char *opt, const char *text, long long min, long long max, long long *out,
                  char *msg, size_t size)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!text[0] || *end || errno)
        return args_error(msg, size, "%s must be a whole number, got '%s'", opt, text);
    if (v < min || v > max)
        return args_error(msg, size, "%s must be between %lld and %lld, got %lld", opt, min, max,
                          v);
    *out = v;
    return 0;
}

int cli_parse_number(const char *opt, const char *text, double min, double max, double *out,
                     char *msg, size_t size)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (!text[0] || *end || errno || !isfinite(v))
        return args_error(msg, size, "%s must be a number, got '%s'", opt, text);
    if (v < min || v > max)
        return args_error(msg, size, "%s must be between %g and %g, got %s", opt, min, max, text);
    *out = v;
    return 0;
}

/* Item by item between the commas; a key and a value each at least one
 * byte long, the value everything after the first '='. */
int cli_parse_pairs(const char *opt, const char *text, json_t *pairs, char *msg, size_t size)
{
    const char *item = text;
    for (;;) {
        const char *end = strchr(item, ',');
        size_t len = end ? (size_t)(end - item) : strlen(item);
        const char *eq = memchr(item, '=', len);
        if (len == 0)
            return args_error(msg, size, "%s '%s': an empty item; give K=V, or several as K=V,K=V",
                              opt, text);
        if ((!eq || eq == item || eq + 1 == item + len) && len == strlen(text))
            return args_error(msg, size, "%s '%s': give K=V, or several as K=V,K=V", opt, text);
        if (!eq || eq == item || eq + 1 == item + len)
            return args_error(msg, size,
                              "%s '%s': '%.*s' is not K=V; give K=V, or several as K=V,K=V", opt,
                              text, (int)len, item);
        char *key = xstrndup(item, (size_t)(eq - item));
        char *value = xstrndup(eq + 1, len - (size_t)(eq - item) - 1);
        const char *had = json_string_value(json_object_get(pairs, key));
        int rc = 0;
        if (had && strcmp(had, value) != 0)
            rc = args_error(msg, size, "%s: label %s is given twice, as '%s' and as '%s'", opt, key,
                            had, value);
        else
            json_object_set_new(pairs, key, json_string(value));
        free(key);
        free(value);
        if (rc)
            return rc;
        if (!end)
            return 0;
        item = end + 1;
    }
}
