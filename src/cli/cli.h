/*
 * cli.h - gpubox, the command-line client of gpuboxd.
 *
 * One table (commands.c: cli_commands) describes every subcommand: its
 * words ("run", "volume create"), its positional arguments, its options and
 * the function that runs it. Everything else is derived from that table:
 * the parser (args.c), `--help` of each subcommand, `gpubox help`, the man
 * page and the bash completion (help.c). Adding a subcommand for a new
 * route is one table entry plus one function that builds the request and
 * prints the answer.
 *
 * Layout of a parse: cli_args keeps the argv strings it was given (no
 * copies): the positional words, the words after "--", and one entry per
 * option occurrence in argv order, so a repeated option (-v, -e, -p) is
 * simply several entries with the same option.
 *
 * Exit codes (docs/cli.md): CLI_EXIT_OK 0, CLI_EXIT_ERROR 1 (server or
 * other error), CLI_EXIT_USAGE 2, CLI_EXIT_NOT_FOUND 3, CLI_EXIT_CONFLICT 4
 * (conflict with the current state), CLI_EXIT_SHORTAGE 5 (not enough GPUs
 * or ports). `gpubox exec` exits with the command's own exit code.
 */
#ifndef GPUBOX_CLI_CLI_H
#define GPUBOX_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_NOT_FOUND = 3,
    CLI_EXIT_CONFLICT = 4,
    CLI_EXIT_SHORTAGE = 5,
};

#define CLI_DEFAULT_HOST "http://127.0.0.1:2378"

enum cli_opt_kind {
    CLI_OPT_FLAG,  /* --all */
    CLI_OPT_VALUE, /* --image IMG, at most once */
    CLI_OPT_LIST,  /* -v SRC:DEST, as often as wanted */
};

/* What the shell completion offers for a positional argument. */
enum cli_complete {
    CLI_COMPLETE_NONE,
    CLI_COMPLETE_REPLICASET, /* names from `gpubox ps -q` */
    CLI_COMPLETE_VOLUME,     /* names from `gpubox volume ls -q` */
    CLI_COMPLETE_COMMAND,    /* subcommand words (help) */
    CLI_COMPLETE_NODE,       /* names from `gpubox nodes -q` */
    CLI_COMPLETE_USER,       /* names from `gpubox users -q` */
};

typedef struct cli_opt {
    const char *name; /* long name without "--": "gpus" */
    char short_name;  /* 'v', or 0 */
    enum cli_opt_kind kind;
    const char *metavar; /* "N", "SRC:DEST[:ro]"; NULL for flags */
    const char *help;
} cli_opt;

typedef struct cli_args cli_args;
typedef struct cli_ctx cli_ctx;

typedef struct cli_command {
    const char *name;  /* "run", or a group and a word: "volume create" */
    const char *usage; /* positional synopsis: "NAME VERSION" */
    int min_pos, max_pos;
    enum cli_complete complete; /* for the positionals */
    bool takes_rest;            /* "-- CMD..." */
    const char *rest_usage;     /* "CMD..." */
    const cli_opt *opts;        /* terminated by an entry with name NULL; may be NULL */
    int (*run)(cli_ctx *ctx, const cli_args *a);
    const char *summary;     /* one line */
    const char *description; /* a paragraph for --help and the man page; may be NULL */
} cli_command;

/* The table (commands.c) and the options every subcommand takes. */
extern const cli_command cli_commands[];
extern const size_t cli_ncommands;
extern const cli_opt cli_global_opts[];

typedef struct cli_opt_value {
    const cli_opt *opt;
    const char *value; /* "" for a flag */
} cli_opt_value;

struct cli_args {
    const cli_command *cmd; /* NULL: no subcommand given */
    const char **pos;
    size_t npos;
    const char **rest; /* after "--" when cmd->takes_rest */
    size_t nrest;
    bool has_rest;
    cli_opt_value *opts;
    size_t nopts;
    bool help; /* -h / --help */
};

/* ---- args.c: the parser (no I/O; testable apart) ---- */

/* Parse argv[1..argc) against the table. On a usage error returns
 * CLI_EXIT_USAGE with a message in msg (and a->cmd set when the subcommand
 * was recognized, so the caller can point at its --help); 0 otherwise. */
int cli_parse(int argc, char **argv, cli_args *a, char *msg, size_t msg_size);
void cli_args_free(cli_args *a);

/* The command whose words are words[0] (and words[1] for a group); *used
 * gets how many words it took. NULL when there is none. */
const cli_command *cli_find_command(const char *const *words, size_t n, size_t *used);
/* Is name the first word of a group ("volume")? */
bool cli_is_group(const char *name);

/* Option lookups by long name: the last value (NULL when absent), whether
 * a flag was given, and every value of a list option in argv order. */
const char *cli_get(const cli_args *a, const char *name);
bool cli_flag(const cli_args *a, const char *name);
size_t cli_get_all(const cli_args *a, const char *name, const char **out, size_t max);
size_t cli_count(const cli_args *a, const char *name);

/* Value checks that are usage errors (exit 2) when they fail; msg says
 * which option and what is allowed. */
int cli_parse_int(const char *opt, const char *text, long long min, long long max, long long *out,
                  char *msg, size_t msg_size);
int cli_parse_number(const char *opt, const char *text, double min, double max, double *out,
                     char *msg, size_t msg_size);
/* "K=V[,K=V...]" (one value of a list option like --node-selector) into
 * the object pairs: every item needs a key and a value; a key given twice
 * with different values is refused. On an error pairs may hold the items
 * before it. */
int cli_parse_pairs(const char *opt, const char *text, json_t *pairs, char *msg, size_t msg_size);

/* ---- ctx.c: what a run of the program shares ---- */

struct cli_ctx {
    const char *host;  /* "http://127.0.0.1:2378", no trailing slash */
    const char *token; /* NULL: no Authorization header */
    bool json;         /* --json: print the server's data as JSON */
    bool progress_tty; /* stderr is a terminal: progress on one updating line */
    FILE *out, *err;
    void *curl; /* CURL *, reused so keep-alive works across calls */
    /* The progress poller's own context (progress.c) prints no errors and
     * runs its transfers through perform (returns a CURLcode), which can be
     * interrupted; NULL: curl_easy_perform. */
    bool silent;
    int (*perform)(cli_ctx *ctx);
    /* The progress shown while a long request runs; NULL when none. */
    struct cli_progress *progress;
};

/* A usage error: prints "gpubox CMD: msg" and a pointer to --help; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(cli_ctx *ctx, const cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Any other error the client finds itself: prints "gpubox: msg" (after
 * stopping the progress shown; nothing in a silent context). */
/* A server message in the CLI's words (words.c): its neutral advice as the
 * command that does it, API paths as "this request"; into out, which it
 * returns. */
const char *cli_words(const char *msg, char *out, size_t len);

int cli_fail(cli_ctx *ctx, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- client.c: one HTTP call, the envelope, the exit code ---- */

typedef struct cli_reply {
    long status; /* HTTP status */
    int code;    /* the envelope's code (200 success) */
    const char *msg;
    json_t *data; /* borrowed from body */
    json_t *body; /* the whole parsed answer (owned) */
} cli_reply;

/* METHOD host+path with body (borrowed, may be NULL). On success (code 200)
 * returns 0 and fills *r; otherwise prints the server's msg (or why the
 * server could not be reached) and returns the exit code for it. *r must be
 * released with cli_reply_free either way. */
int cli_call(cli_ctx *ctx, const char *method, const char *path, const json_t *body, cli_reply *r);
/* The same; with report false an error answer is not printed (the
 * transport errors still are). */
int cli_request(cli_ctx *ctx, const char *method, const char *path, const json_t *body,
                cli_reply *r, bool report);
void cli_reply_free(cli_reply *r);
/* gpubox exec -i / -it (cmd_exec_stream.c): a's command joined to stdin
 * and stdout through the terminal WebSocket; the command's exit code. */
int cli_exec_stream(cli_ctx *ctx, const cli_args *a, bool tty);
/* An answer read some other way (a refused WebSocket handshake): its body
 * raw and HTTP status into *r, the error printed, the exit code as
 * cli_call's. */
int cli_reply_parse(cli_ctx *ctx, const char *method, const char *path, const char *raw,
                    long status, cli_reply *r);
/* GET host+path whose answer may be streamed (a followed log): a 200
 * answer of type application/x-ndjson goes to on_line one line at a time
 * (without its "\n") as the lines arrive, and 0 is returned when it ends;
 * a non-zero answer of on_line ends the transfer and is returned. Any other
 * answer is an envelope, handled as cli_call does (success fills *r). */
int cli_get_stream(cli_ctx *ctx, const char *path,
                   int (*on_line)(void *arg, const char *line, size_t n), void *arg, cli_reply *r);
/* The envelope code of a change refused because it would take a `user`
 * past a quota (HTTP 403, docs/users.md); like a refusal by role (1109) it
 * exits CLI_EXIT_ERROR, with the server's message as it is. */
#define CLI_CODE_QUOTA_EXCEEDED 1115
/* The exit code for an envelope code (see the top of this file). */
int cli_exit_for_code(int code);
/* A path segment escaped for a URL (malloc'd). */
char *cli_escape(cli_ctx *ctx, const char *segment);
/* Print data as indented JSON on ctx->out (for --json). */
void cli_print_json(cli_ctx *ctx, const json_t *data);

/* ---- operation.c: following long operations ---- */

/* If data names an operation (operationId, or operation.id) that is not
 * finished, poll GET /api/v1/operations/{id} until it is, showing progress
 * on stderr. Returns 0, or an exit code when the operation failed. A server
 * without the operations route is taken to have finished already. */
int cli_follow_operation(cli_ctx *ctx, const json_t *data);
/* The progress line for an operation's JSON, and whether it has ended:
 * 1 finished, -1 failed, 0 still running. */
void cli_operation_line(const json_t *op, char *buf, size_t size);
int cli_operation_state(const json_t *op);

/* ---- progress.c: progress while a long request runs ---- */

/* gpuboxd answers run, scale, stop, restart, rollback and rm when their
 * operation is over; while such a request runs, a second thread polls the
 * set's in-flight operation and shows its steps on ctx->err. Start it just
 * before the request (it first reads which operation the set names
 * already: that one is not shown), stop it as soon as the request returns.
 * Nothing happens when GPUBOX_PROGRESS is 0/no/off/false, or when the
 * server cannot be read. cli_fail stops it too, so errors never mix with
 * progress. */
void cli_progress_start(cli_ctx *ctx, const char *verb, const char *name);
void cli_progress_stop(cli_ctx *ctx);
/* cli_call with progress shown for the replica set name while it runs;
 * verb labels the lines ("scale"). */
int cli_call_progress(cli_ctx *ctx, const char *verb, const char *name, const char *method,
                      const char *path, const json_t *body, cli_reply *r);
/* "scale train: carry-begin (4/8) 1.2s": the last step of op done, how
 * many of its steps are done, and elapsed_s (left out when negative; a
 * state other than running shows instead of the step). */
void cli_progress_line(const char *verb, const char *name, const json_t *op, double elapsed_s,
                       char *buf, size_t size);

/* ---- table.c: aligned tables for people ---- */

typedef struct cli_table cli_table;
/* Columns named by the NULL-terminated headers. */
cli_table *cli_table_new(const char *const *headers);
/* The column named header is printed only when some row has a value (a
 * non-NULL cell) in it: NODE, which only a fleet's lists fill. */
void cli_table_optional(cli_table *t, const char *header);
/* Append one row of ncols cells (copied; NULL prints as "-"). */
void cli_table_add(cli_table *t, const char *const *cells);
void cli_table_print(cli_table *t, FILE *out);
void cli_table_free(cli_table *t);
static inline void cli_table_freep(cli_table **t)
{
    if (*t)
        cli_table_free(*t);
}

/* ---- help.c: everything generated from the table ---- */

void cli_help_main(FILE *out);                            /* gpubox help */
void cli_help_command(const cli_command *cmd, FILE *out); /* gpubox CMD --help */
void cli_help_man(FILE *out);                             /* gpubox help --man */
void cli_completion_bash(FILE *out);                      /* gpubox completion bash */

/* ---- cmd_common.c: what the subcommands share ---- */

/* The one request most subcommands are. */
typedef struct cli_req {
    const char *method;
    const char *path;
    const json_t *body; /* borrowed; NULL: none */
    /* Progress of replica set `name` shown labelled verb ("scale") while the
     * request runs (cli_call_progress); NULL: a short request, none shown. */
    const char *verb;
    const char *name;
    bool follow; /* follow the operation the answer names (cli_follow_operation) */
} cli_req;

/* Print an answer's data for people on ctx->out; arg is the subcommand's
 * own (its cli_args, mostly). */
typedef void cli_print_fn(cli_ctx *ctx, const json_t *data, const void *arg);

/* Send req and print its answer: the data as JSON for --json, else through
 * human. Returns 0, or the exit code of an error already reported. */
int cli_exchange(cli_ctx *ctx, const cli_req *req, cli_print_fn *human, const void *arg);
/* "<base>/<name escaped>[/suffix]" (malloc'd). */
char *cli_path(cli_ctx *ctx, const char *base, const char *name, const char *suffix);
/* The string field of obj, or "-" when there is none. */
const char *cli_str(const json_t *obj, const char *field);
/* printf onto the end of the string in buf, cut to size. */
void cli_appendf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The strings of a JSON array joined by sep into buf ("?" for a non-string). */
void cli_join(const json_t *list, const char *sep, char *buf, size_t size);
/* The name field of each object in list, one a line (for --quiet). */
void cli_print_names(cli_ctx *ctx, const json_t *list);
/* How long before now the time iso ("2026-11-24T10:00:00Z") was: "2s ago",
 * "5m ago", "3h ago", "2d ago" ("0s ago" for a time ahead of this clock);
 * "-" when iso is NULL, iso itself when it is in another form. */
void cli_age(const char *iso, time_t now, char *buf, size_t size);
/* The OWNER column of ps and volume ls (docs/cli.md): shown only when the
 * items of list carry at least two different `owner`s, so a server without
 * owners, and a user's own list, print the tables they printed before.
 * cli_owner_cell is an item's cell: NULL (no value; the column left out
 * when no row has one) unless shown. */
bool cli_owners_differ(const json_t *list);
const char *cli_owner_cell(const json_t *item, bool shown);

/* ---- the subcommands (cmd_*.c) ---- */

int cli_cmd_gpus(cli_ctx *ctx, const cli_args *a);
int cli_cmd_ports(cli_ctx *ctx, const cli_args *a);
int cli_cmd_cpus(cli_ctx *ctx, const cli_args *a);
int cli_cmd_version(cli_ctx *ctx, const cli_args *a);
int cli_cmd_help(cli_ctx *ctx, const cli_args *a);
int cli_cmd_completion(cli_ctx *ctx, const cli_args *a);

int cli_cmd_ps(cli_ctx *ctx, const cli_args *a);
int cli_cmd_run(cli_ctx *ctx, const cli_args *a);
/* cmd_queue.c */
int cli_cmd_queue(cli_ctx *ctx, const cli_args *a);
/* POST body (a create with queue: true) and, when it is queued (202),
 * wait for it to run unless --detach; human prints the set it ends with. */
int cli_run_queued(cli_ctx *ctx, const cli_args *a, const json_t *body, cli_print_fn *human);
/* cmd_images.c */
int cli_cmd_pull(cli_ctx *ctx, const cli_args *a);
int cli_cmd_images(cli_ctx *ctx, const cli_args *a);
int cli_cmd_image_rm(cli_ctx *ctx, const cli_args *a);
int cli_cmd_inspect(cli_ctx *ctx, const cli_args *a);
int cli_cmd_history(cli_ctx *ctx, const cli_args *a);
int cli_cmd_scale(cli_ctx *ctx, const cli_args *a);
/* --gpu-cores PERCENT (1-100, or "none": null) into a gpuPatch object;
 * text NULL: nothing. 0, or a usage error's exit status. */
int cli_gpu_cores_value(cli_ctx *ctx, const cli_args *a, const char *text, json_t *patch);
int cli_cmd_update(cli_ctx *ctx, const cli_args *a);
int cli_cmd_stop(cli_ctx *ctx, const cli_args *a);
int cli_cmd_start(cli_ctx *ctx, const cli_args *a);
int cli_cmd_pause(cli_ctx *ctx, const cli_args *a);
int cli_cmd_restart(cli_ctx *ctx, const cli_args *a);
int cli_cmd_rollback(cli_ctx *ctx, const cli_args *a);
int cli_cmd_exec(cli_ctx *ctx, const cli_args *a);
int cli_cmd_commit(cli_ctx *ctx, const cli_args *a);
int cli_cmd_rm(cli_ctx *ctx, const cli_args *a);
int cli_cmd_logs(cli_ctx *ctx, const cli_args *a);

int cli_cmd_volume_create(cli_ctx *ctx, const cli_args *a);
int cli_cmd_volume_ls(cli_ctx *ctx, const cli_args *a);
int cli_cmd_volume_inspect(cli_ctx *ctx, const cli_args *a);
int cli_cmd_volume_resize(cli_ctx *ctx, const cli_args *a);
int cli_cmd_volume_rm(cli_ctx *ctx, const cli_args *a);

int cli_cmd_top(cli_ctx *ctx, const cli_args *a);
int cli_cmd_events(cli_ctx *ctx, const cli_args *a);
int cli_cmd_gpu_healthy(cli_ctx *ctx, const cli_args *a);

int cli_cmd_nodes(cli_ctx *ctx, const cli_args *a);
int cli_cmd_node_cordon(cli_ctx *ctx, const cli_args *a);
int cli_cmd_node_uncordon(cli_ctx *ctx, const cli_args *a);
int cli_cmd_node_drain(cli_ctx *ctx, const cli_args *a);
int cli_cmd_move(cli_ctx *ctx, const cli_args *a);

int cli_cmd_whoami(cli_ctx *ctx, const cli_args *a);
int cli_cmd_users(cli_ctx *ctx, const cli_args *a);
int cli_cmd_user_create(cli_ctx *ctx, const cli_args *a);
int cli_cmd_user_set(cli_ctx *ctx, const cli_args *a);
int cli_cmd_user_rm(cli_ctx *ctx, const cli_args *a);
int cli_cmd_user_token(cli_ctx *ctx, const cli_args *a);
int cli_cmd_user_revoke(cli_ctx *ctx, const cli_args *a);
int cli_cmd_quota_defaults(cli_ctx *ctx, const cli_args *a);
int cli_cmd_usage(cli_ctx *ctx, const cli_args *a);

/* The printers for people of ps and volume ls (arg: their cli_args, for
 * -q), apart so the tests can feed them answers. */
void cli_ps_print(cli_ctx *ctx, const json_t *data, const void *arg);
void cli_volume_ls_print(cli_ctx *ctx, const json_t *data, const void *arg);
/* inspect's printer (data: the answer of GET /api/v1/replicaSet/{name}). */
void cli_inspect_print(cli_ctx *ctx, const json_t *data, const void *arg);

/* ---- cmd_top.c: live usage and health of the cards ---- */

/* One frame of `gpubox top` from data, the answer of GET
 * /api/v1/resources/gpus, read at now: a header line, the cards table and
 * the instances table (one row per tenant and card, most memory used
 * first). clear: begin with the escape codes that clear a terminal. */
void cli_top_render(const json_t *data, time_t now, bool clear, FILE *out);
/* A device's HEALTH cell: "ok", "XID 79", "lost", "unhealthy"; and whether
 * it is marked unhealthy (healthy false, or an `unhealthy` object). */
void cli_gpu_health(const json_t *device, char *buf, size_t size);
bool cli_gpu_unhealthy(const json_t *device);
/* The table of `gpubox events` (data: the answer of GET /api/v1/events). */
void cli_events_print(cli_ctx *ctx, const json_t *data, const void *arg);

/* ---- cmd_users.c: users, quotas and accounting (docs/users.md) ---- */

/* What a quota field counts, for its text: whole cards or sets, MiB of
 * GPU shares, bytes of volumes. */
enum cli_quota_kind {
    CLI_QUOTA_COUNT, /* cards, instances */
    CLI_QUOTA_MIB,   /* shareMiB: shown as a size, "16GB" */
    CLI_QUOTA_BYTES, /* volumeBytes: shown as a size, "500GB" */
};
/* One quota or usage value: "-" when unlimited (absent or null), else the
 * count or the size in human units ("2", "16GB"). A size given as text
 * ("500GB") is shown in the same units. */
void cli_quota_text(const json_t *value, enum cli_quota_kind kind, char *buf, size_t size);
/* "used/quota" as `gpubox users` shows it: "1/2", "8GB/16GB", "0/-". */
void cli_quota_cell(const json_t *used, const json_t *quota, enum cli_quota_kind kind, char *buf,
                    size_t size);
/* --role: admin, user or viewer; else CLI_EXIT_USAGE with msg. */
int cli_check_role(const char *role, char *msg, size_t size);
/* The quota options given in a (--cards, --share-mib or --share,
 * --instances, --volume-bytes, --cores, --max-priority 0-100) into the
 * object quota as its fields (cards, shareMiB, instances, volumeBytes,
 * cores, maxPriority): a number, or null for "none" (unlimited). Returns
 * how many were given (0: none), or -1 after a usage error's message in
 * msg: a value that is not a whole number 0 or more (0-100 for
 * --max-priority), a size that is not one (or, for --share, not whole
 * MiB), or both --share and --share-mib. */
int cli_quota_flags(const cli_args *a, json_t *quota, char *msg, size_t size);
/* The body of POST /api/v1/users (create) or PATCH /api/v1/users/{name}
 * from a's arguments, checked: 0 and *out, or CLI_EXIT_USAGE with msg. */
int cli_user_body(const cli_args *a, bool create, json_t **out, char *msg, size_t size);
/* seconds of a unit (cards, MiB) as hours of per units (1 card, 1024 MiB)
 * with two decimals: "2.00"; a value above 0 that would show as 0.00 is
 * "<0.01". */
void cli_hours(double seconds, double per, char *buf, size_t size);
/* The printers for people of whoami, users, usage and quota defaults. */
void cli_whoami_print(cli_ctx *ctx, const json_t *data, const void *arg);
void cli_users_print(cli_ctx *ctx, const json_t *data, const void *arg);
void cli_usage_print(cli_ctx *ctx, const json_t *data, const void *arg);
void cli_quota_print(cli_ctx *ctx, const json_t *data, const void *arg);

#endif
