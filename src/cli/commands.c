/*
 * commands.c - the one table of gpubox's subcommands. The parser, every
 * --help, `gpubox help`, the man page and the bash completion read it;
 * the functions it names live in cmd_*.c.
 *
 * Adding a subcommand: one entry here (words, positionals, options,
 * summary) and one function that builds the request and prints the answer.
 */
#include "cli/cli.h"

#include "util/cleanup.h"

#define CLI_OPTS_END                                                                               \
    {                                                                                              \
        0                                                                                          \
    }

const cli_opt cli_global_opts[] = {
    {"host", 'H', CLI_OPT_VALUE, "URL",
     "gpuboxd's address (default $GPUBOX_HOST, else " CLI_DEFAULT_HOST ")"},
    {"token", 0, CLI_OPT_VALUE, "TOKEN",
     "bearer token sent as Authorization (default $GPUBOX_TOKEN)"},
    {"json", 0, CLI_OPT_FLAG, NULL, "print the server's data as JSON, for scripts"},
    {"help", 'h', CLI_OPT_FLAG, NULL, "show this help"},
    CLI_OPTS_END,
};

static const cli_opt ps_opts[] = {
    {"all", 'a', CLI_OPT_FLAG, NULL, "include deleted replica sets whose history is kept"},
    {"quiet", 'q', CLI_OPT_FLAG, NULL, "print the names only"},
    CLI_OPTS_END,
};

static const cli_opt run_opts[] = {
    {"image", 'i', CLI_OPT_VALUE, "IMAGE", "the image to run (required)"},
    {"pull", 0, CLI_OPT_VALUE, "POLICY",
     "pull the image first: missing (default: when not on the host), always or never"},
    {"gpus", 'g', CLI_OPT_VALUE, "N", "whole GPUs, or cards to share with --gpu-memory/--shared"},
    {"gpu-memory", 0, CLI_OPT_VALUE, "SIZE", "a share of SIZE (\"8GB\") on each card"},
    {"shared", 0, CLI_OPT_FLAG, NULL, "a time-slice replica on each card"},
    {"gpu-cores", 0, CLI_OPT_VALUE, "PERCENT",
     "with a share: at most PERCENT (1-100) of each card's compute time"},
    {"gpu-policy", 0, CLI_OPT_VALUE, "POLICY", "where a share goes: binpack (default) or spread"},
    {"gpu-uuid", 0, CLI_OPT_LIST, "UUID", "exactly this card"},
    {"gpu-model", 0, CLI_OPT_VALUE, "TEXT", "only cards whose model contains TEXT (\"A100\")"},
    {"volume", 'v', CLI_OPT_LIST, "SRC:DEST[:ro]", "bind a gpubox volume or an allowed host path"},
    {"publish", 'p', CLI_OPT_LIST, "PORT[/udp]|HOST:PORT[/udp]",
     "publish a container port (host port allocated, or HOST)"},
    {"env", 'e', CLI_OPT_LIST, "K=V", "set an environment variable (K alone: from here)"},
    {"label", 'l', CLI_OPT_LIST, "K=V", "an extra container label"},
    {"cpus", 0, CLI_OPT_VALUE, "N", "CPU limit (decimals allowed)"},
    {"cpu-count", 0, CLI_OPT_VALUE, "N",
     "logical CPUs of its own (a cpuset near its cards; docs/cpus.md)"},
    {"memory", 'm', CLI_OPT_VALUE, "SIZE", "memory limit (\"16GB\")"},
    {"shm-size", 0, CLI_OPT_VALUE, "SIZE", "size of /dev/shm (\"1GB\")"},
    {"restart", 0, CLI_OPT_VALUE, "POLICY", "no, always, unless-stopped or on-failure"},
    {"node", 0, CLI_OPT_VALUE, "NAME", "in a fleet: run it on node NAME"},
    {"node-selector", 0, CLI_OPT_LIST, "K=V[,K=V...]",
     "in a fleet: only on a node with all these labels"},
    {"placement", 0, CLI_OPT_VALUE, "POLICY",
     "in a fleet, which node: binpack (default) or spread"},
    {"idle-stop", 0, CLI_OPT_VALUE, "DURATION",
     "stop it after its cards are idle this long (\"30m\", \"90s\", \"1h30m\")"},
    {"max-duration", 0, CLI_OPT_VALUE, "DURATION", "stop it after it has run this long (\"8h\")"},
    {"ssh-key", 0, CLI_OPT_LIST, "FILE",
     "a public key file (a .pub, or an authorized_keys) for root: ssh access"},
    {"queue", 0, CLI_OPT_FLAG, NULL,
     "when it cannot start now, wait in the queue (position and why shown) until it runs"},
    {"detach", 'd', CLI_OPT_FLAG, NULL, "with --queue: return once it is queued"},
    {"priority", 0, CLI_OPT_VALUE, "N", "with --queue: 0-100, higher served first (default 50)"},
    {"queue-timeout", 0, CLI_OPT_VALUE, "DURATION",
     "with --queue: give up after waiting this long (\"2h\")"},
    CLI_OPTS_END,
};

static const cli_opt pull_opts[] = {
    {"username", 'u', CLI_OPT_VALUE, "USER", "the registry's user (with --password-stdin)"},
    {"password-stdin", 0, CLI_OPT_FLAG, NULL, "read the registry password from stdin"},
    CLI_OPTS_END,
};

static const cli_opt images_opts[] = {
    {"name", 0, CLI_OPT_VALUE, "REPO[:TAG]", "only images of this repository or tag"},
    {"quiet", 'q', CLI_OPT_FLAG, NULL, "print the tags only"},
    CLI_OPTS_END,
};

static const cli_opt scale_opts[] = {
    {"gpus", 'g', CLI_OPT_VALUE, "N", "the new number of GPUs"},
    {"gpu-memory", 0, CLI_OPT_VALUE, "SIZE", "the new share of each card (\"8GB\")"},
    {"gpu-cores", 0, CLI_OPT_VALUE, "PERCENT",
     "the new compute share of each card, 1-100 (\"none\": no limit); in place"},
    {"cpu-count", 0, CLI_OPT_VALUE, "N", "the new number of logical CPUs of its own (0: none)"},
    {"idle-stop", 0, CLI_OPT_VALUE, "DURATION",
     "stop it after its cards are idle this long (\"\": never)"},
    {"max-duration", 0, CLI_OPT_VALUE, "DURATION",
     "stop it after it has run this long (\"\": no limit)"},
    {"image", 'i', CLI_OPT_VALUE, "IMAGE",
     "run another image (a new version that keeps binds, env, ports and cards, not the system "
     "disk)"},
    {"ssh-key", 0, CLI_OPT_LIST, "FILE",
     "the set's new ssh keys: these files' keys replace the ones it has"},
    CLI_OPTS_END,
};

static const cli_opt update_opts[] = {
    {"env", 'e', CLI_OPT_LIST, "K=V", "set a variable, replacing its value (K alone: from here)"},
    {"env-rm", 0, CLI_OPT_LIST, "K", "remove a variable"},
    {"volume", 'v', CLI_OPT_LIST, "SRC:DEST[:ro]",
     "bind a volume or an allowed host path at DEST, in place of what DEST had"},
    {"volume-rm", 0, CLI_OPT_LIST, "DEST", "remove the bind at DEST (its volume keeps its data)"},
    {"publish", 'p', CLI_OPT_LIST, "PORT[/udp]|HOST:PORT[/udp]",
     "publish another container port (host port allocated, or HOST)"},
    {"publish-rm", 0, CLI_OPT_LIST, "PORT[/udp]", "stop publishing a container port"},
    {"cpus", 0, CLI_OPT_VALUE, "N", "the new CPU limit (0: none)"},
    {"memory", 'm', CLI_OPT_VALUE, "SIZE", "the new memory limit (\"16GB\"; 0: none)"},
    {"shm-size", 0, CLI_OPT_VALUE, "SIZE", "the new size of /dev/shm"},
    {"restart", 0, CLI_OPT_VALUE, "POLICY", "no, always, unless-stopped or on-failure"},
    {"gpu-cores", 0, CLI_OPT_VALUE, "PERCENT",
     "the new compute share of each card of a share, 1-100 (\"none\": no limit); in place"},
    CLI_OPTS_END,
};

static const cli_opt start_opts[] = {
    {"no-gpu", 0, CLI_OPT_FLAG, NULL,
     "start without the set's cards (a new version; the next start takes them again)"},
    CLI_OPTS_END,
};

static const cli_opt move_opts[] = {
    {"node", 0, CLI_OPT_VALUE, "NODE", "the node it goes to (default: where placement puts it)"},
    {"with-sharers", 0, CLI_OPT_FLAG, NULL,
     "move every set that shares one of its volumes with it, to the same node"},
    CLI_OPTS_END,
};

static const cli_opt drain_opts[] = {
    {"running", 0, CLI_OPT_FLAG, NULL, "move only the running sets (the others stay)"},
    CLI_OPTS_END,
};

static const cli_opt top_opts[] = {
    {"interval", 'n', CLI_OPT_VALUE, "SECONDS",
     "redraw every SECONDS (default 1; decimals allowed)"},
    {"once", 0, CLI_OPT_FLAG, NULL, "print one frame and exit"},
    {"iterations", 0, CLI_OPT_VALUE, "N", "print N frames and exit"},
    CLI_OPTS_END,
};

static const cli_opt events_opts[] = {
    {"limit", 0, CLI_OPT_VALUE, "N", "at most the N newest events"},
    CLI_OPTS_END,
};

static const cli_opt exec_opts[] = {
    {"interactive", 'i', CLI_OPT_FLAG, NULL,
     "pass stdin to the command as it comes (through the terminal WebSocket)"},
    {"tty", 't', CLI_OPT_FLAG, NULL,
     "with -i: a terminal (raw mode, the window's size); -it runs a shell or any program"},
    {"workdir", 'w', CLI_OPT_VALUE, "DIR", "working directory in the container (without -i)"},
    {"timeout", 0, CLI_OPT_VALUE, "SECONDS",
     "kill the command after this long (1-3600; without -i)"},
    CLI_OPTS_END,
};

static const cli_opt logs_opts[] = {
    {"follow", 'f', CLI_OPT_FLAG, NULL, "keep printing new lines until the container stops"},
    {"tail", 'n', CLI_OPT_VALUE, "N", "only the last N lines (a number, or all: the default)"},
    {"since", 0, CLI_OPT_VALUE, "TIME",
     "only lines since TIME: RFC 3339, a duration back from now (10m, 1h30m) or unix seconds"},
    {"timestamps", 't', CLI_OPT_FLAG, NULL, "put the time each line was written before it"},
    {"all-versions", 0, CLI_OPT_FLAG, NULL,
     "every version's lines, oldest first, each prefixed [vN]"},
    CLI_OPTS_END,
};

static const cli_opt commit_opts[] = {
    {"overwrite", 0, CLI_OPT_FLAG, NULL, "replace the tag if gpubox made it"},
    {"keep-env", 0, CLI_OPT_FLAG, NULL,
     "keep the instance's environment in the image (by default only the base image's)"},
    CLI_OPTS_END,
};

static const cli_opt rm_opts[] = {
    {"purge", 0, CLI_OPT_FLAG, NULL, "forget the history too; the name starts again at 1"},
    CLI_OPTS_END,
};

static const cli_opt volume_create_opts[] = {
    {"node", 0, CLI_OPT_VALUE, "NAME", "in a fleet: create it on node NAME"},
    CLI_OPTS_END,
};

static const cli_opt volume_ls_opts[] = {
    {"quiet", 'q', CLI_OPT_FLAG, NULL, "print the names only"},
    CLI_OPTS_END,
};

static const cli_opt nodes_opts[] = {
    {"quiet", 'q', CLI_OPT_FLAG, NULL, "print the names only"},
    CLI_OPTS_END,
};

/* The fields of a quota (docs/users.md), in create, set and quota defaults;
 * "none" makes a field unlimited. */
// clang-format off
#define QUOTA_OPTS                                                                                 \
    {"cards", 0, CLI_OPT_VALUE, "N", "whole cards held at once (none: unlimited)"},                \
    {"share-mib", 0, CLI_OPT_VALUE, "N",                                                           \
     "MiB of GPU shares held at once, summed over cards (none: unlimited)"},                       \
    {"share", 0, CLI_OPT_VALUE, "SIZE", "the same as a size, \"16GB\" (instead of --share-mib)"},  \
    {"instances", 0, CLI_OPT_VALUE, "N", "replica sets, stopped ones included (none: unlimited)"}, \
    {"volume-bytes", 0, CLI_OPT_VALUE, "SIZE",                                                     \
     "the sizes of their volumes, summed: \"500GB\" or bytes (none: unlimited)"},                  \
    {"cores", 0, CLI_OPT_VALUE, "N", "logical CPUs of their own (cpuCount) (none: unlimited)"}, \
    {"max-priority", 0, CLI_OPT_VALUE, "N",                                                        \
     "the highest queue priority they may ask, 0-100 (none: any)"}
// clang-format on

static const cli_opt users_opts[] = {
    {"quiet", 'q', CLI_OPT_FLAG, NULL, "print the names only"},
    CLI_OPTS_END,
};

static const cli_opt user_create_opts[] = {
    {"role", 0, CLI_OPT_VALUE, "ROLE", "admin, user or viewer (required)"},
    QUOTA_OPTS,
    CLI_OPTS_END,
};

static const cli_opt user_set_opts[] = {
    {"role", 0, CLI_OPT_VALUE, "ROLE", "the new role: admin, user or viewer"},
    QUOTA_OPTS,
    CLI_OPTS_END,
};

static const cli_opt quota_opts[] = {
    QUOTA_OPTS,
    CLI_OPTS_END,
};

static const cli_opt usage_opts[] = {
    {"user", 'u', CLI_OPT_VALUE, "NAME", "only this user (a user sees only themself)"},
    {"set", 's', CLI_OPT_VALUE, "NAME", "only this replica set"},
    {"from", 0, CLI_OPT_VALUE, "TIME",
     "from this time: a date (2026-11-01, from its start in UTC), RFC 3339 or Unix seconds"},
    {"to", 0, CLI_OPT_VALUE, "TIME",
     "to this time (default: now); a date counts to its end, so the day is included"},
    CLI_OPTS_END,
};

static const cli_opt help_opts[] = {
    {"man", 0, CLI_OPT_FLAG, NULL, "print the manual page (roff)"},
    CLI_OPTS_END,
};

const cli_command cli_commands[] = {
    /* resources */
    {"gpus", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_gpus,
     "List the GPUs: memory, what is held, tenants", NULL},
    {"gpu healthy", "UUID", 1, 1, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_gpu_healthy,
     "Clear a card's unhealthy mark (admin): it is scheduled again",
     "A card is marked unhealthy by a critical XID error or when it is lost. Prints the card's "
     "health afterwards."},
    {"top", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, top_opts, cli_cmd_top,
     "Show the live use and health of the cards and their instances",
     "On a terminal the view is redrawn every --interval seconds until Ctrl-C; with --once, "
     "or when stdout is not a terminal, one frame is printed. Instances are listed one row "
     "per card, the most memory used first; OVER flags one using more than its share. \"-\" "
     "is no reading (gpuboxd started with --usage-interval 0 samples no usage)."},
    {"events", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, events_opts, cli_cmd_events,
     "List automatic stops and card health changes, newest first", NULL},
    {"ports", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_ports,
     "Show the host port range and the ports in use", NULL},
    {"cpus", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_cpus,
     "List the CPU cores: NUMA nodes, free, and which replica sets hold which (cpuCount)", NULL},

    /* replica sets */
    {"queue", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_queue,
     "List the replica sets waiting in the queue, in the order they will start",
     "POS is the position (* marks the first in line, which holds a reservation on the cards "
     "it waits for); WHY says what keeps each one waiting now. A user sees the others' "
     "entries without their names (docs/queue.md)."},
    {"ps", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, ps_opts, cli_cmd_ps,
     "List replica sets with their live status", NULL},
    {"run", "NAME", 1, 1, CLI_COMPLETE_NONE, true, "CMD...", run_opts, cli_cmd_run,
     "Create replica set NAME and start its first container (NAME-1)",
     "GPUs, host ports and CPU cores (--cpu-count) are taken all or nothing; if anything is "
     "missing nothing is "
     "taken and the exit status is 5. In a fleet the set runs on one node: --node names it, "
     "else gpuboxd picks one among the nodes whose labels match --node-selector, by "
     "--placement. --idle-stop and --max-duration are passed to gpuboxd as given; it stops "
     "the set when its cards have been idle that long, or when it has run that long. "
     "--ssh-key puts the file's keys into the container's /root/.ssh/authorized_keys, "
     "publishes port 22 and starts the image's SSH server (OpenSSH or dropbear); the ssh "
     "command to log in with is printed. With --queue a set that cannot start now waits in the "
     "queue: its position and why are shown until it runs (exit status 5 if it is dropped); "
     "--detach returns at once."},
    {"inspect", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, NULL, cli_cmd_inspect,
     "Show one replica set: spec, state, container, GPUs, ports", NULL},
    {"history", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, NULL, cli_cmd_history,
     "List every version of a replica set, newest first", NULL},
    {"scale", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, scale_opts, cli_cmd_scale,
     "Change a replica set's GPUs, image or ssh keys (a new version), or its automatic stops",
     "A new version of the same image keeps the system disk; with --image it starts from the "
     "other image and keeps only binds and volumes (roll back to return to the old image). "
     "A stopped set takes nothing now: the change waits for its next start (gpubox inspect "
     "shows it as Pending), which makes the new version and takes the cards it asks for. "
     "--idle-stop and --max-duration change when the set stops by itself; \"\" removes the "
     "limit. --ssh-key replaces the set's keys with those of the files given."},
    {"update", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, update_opts, cli_cmd_update,
     "Change an instance's environment, volumes, ports or limits (a new version)",
     "All the changes given make one new version, which keeps the system disk, the cards and "
     "the ports it still publishes (their host ports too). -v SRC:DEST binds SRC at DEST, "
     "replacing what was bound there; --volume-rm DEST takes a bind out (the volume and its "
     "data stay, so gpubox volume rm can delete it). -p adds a published port, --publish-rm "
     "takes one out. Prints \"nothing changed\" when the instance already has what was "
     "asked. Cards, image, ssh keys and automatic stops: gpubox scale."},
    {"stop", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, NULL, cli_cmd_stop,
     "Stop the container and release its GPUs and ports", NULL},
    {"start", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, start_opts, cli_cmd_start,
     "Start a paused or stopped replica set again, or take back the cards --no-gpu set aside",
     "A paused set continues in the same container with the GPUs it kept. A stopped set "
     "takes its GPUs and ports again: if the cards it held are still free it starts the "
     "same container (no new version); otherwise it takes other cards and starts a new "
     "version that keeps the system disk. A set changed while stopped (scale, rollback) "
     "starts as a new version with the change; if its cards are not free it stays stopped, "
     "the change kept. With --no-gpu it starts as a new version without cards (to copy data "
     "out cheaply); the next start without --no-gpu, running or stopped, takes cards again."},
    {"pause", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, NULL, cli_cmd_pause,
     "Stop the container, keeping its GPUs and ports", NULL},
    {"restart", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, start_opts, cli_cmd_restart,
     "Restart the container; a stopped set takes its GPUs and ports again",
     "A running or paused set is restarted in place. A stopped set starts the same "
     "container if the cards it held are still free, or a new version on other cards "
     "that keeps the system disk. --no-gpu: a new version without cards; a set whose cards "
     "are aside takes them again on a restart without it."},
    {"rollback", "NAME VERSION", 2, 2, CLI_COMPLETE_REPLICASET, false, NULL, NULL, cli_cmd_rollback,
     "Run version VERSION's spec again as a new version",
     "A stopped set takes nothing now: version VERSION's spec waits for its next start. Rolling "
     "a stopped set back to the version it has drops a change made while it was stopped."},
    {"exec", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, true, "CMD...", exec_opts, cli_cmd_exec,
     "Run a command in the container; exit with its exit code",
     "The command's stdout goes to stdout and its stderr to stderr. A command killed by "
     "--timeout exits 124. With -i the command reads this stdin as it comes (echo data | "
     "gpubox exec -i NAME -- cat); with -it it runs in a terminal, as ssh or docker exec -it "
     "would (gpubox exec -it NAME -- bash). Without a command after --, -it opens bash if the "
     "image has it, else sh (docs/access.md)."},
    {"logs", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, logs_opts, cli_cmd_logs,
     "Print what the replica set's container wrote",
     "The container's output goes to stdout as it is (its stderr to stderr when the container "
     "has no TTY; gpubox's containers have one, so everything is stdout). With --follow new "
     "lines are printed as they come until the container stops or you press Ctrl-C. "
     "--all-versions adds the lines gpubox kept of earlier versions' containers; a version "
     "whose lines are gone is named on stderr."},
    {"commit", "NAME IMAGE", 2, 2, CLI_COMPLETE_REPLICASET, false, NULL, commit_opts,
     cli_cmd_commit, "Commit the container's filesystem to image IMAGE", NULL},
    {"rm", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, rm_opts, cli_cmd_rm,
     "Delete a replica set: remove its container and free everything it holds", NULL},

    /* volumes */
    {"pull", "IMAGE", 1, 1, CLI_COMPLETE_NONE, false, NULL, pull_opts, cli_cmd_pull,
     "Pull an image from its registry onto the host, showing progress",
     "Credentials: --username with --password-stdin, else those gpuboxd has for the registry "
     "(--registry-auth-file), else none. Prints the image and its id when done."},
    /* before "images": the parser takes the first entry whose words match */
    {"images rm", "REF...", 1, 16, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_image_rm,
     "Remove images from the host by name (repo:tag)",
     "Each name goes, and the image with it when it was its last name. Refused while an "
     "instance runs the image (delete it or move it to another image first, gpubox scale "
     "NAME --image OTHER) or a container made from it is left. An admin removes any name; a "
     "user only the images they committed or pulled with their own credentials."},
    {"images", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, images_opts, cli_cmd_images,
     "List the images on the host (in a fleet, on every node)", NULL},
    {"volume create", "NAME SIZE", 2, 2, CLI_COMPLETE_NONE, false, NULL, volume_create_opts,
     cli_cmd_volume_create, "Create a volume of SIZE (\"20GB\": KB, MB, GB, TB)", NULL},
    {"volume ls", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, volume_ls_opts, cli_cmd_volume_ls,
     "List volumes", NULL},
    {"volume inspect", "NAME", 1, 1, CLI_COMPLETE_VOLUME, false, NULL, NULL, cli_cmd_volume_inspect,
     "Show one volume: size, bytes used, who uses it", NULL},
    {"volume resize", "NAME SIZE", 2, 2, CLI_COMPLETE_VOLUME, false, NULL, NULL,
     cli_cmd_volume_resize, "Grow or shrink a volume, keeping its data", NULL},
    {"volume rm", "NAME", 1, 1, CLI_COMPLETE_VOLUME, false, NULL, NULL, cli_cmd_volume_rm,
     "Delete a volume and its data", NULL},

    /* the nodes of a fleet */
    {"nodes", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, nodes_opts, cli_cmd_nodes,
     "List the nodes of a fleet: state, free GPUs and ports, labels",
     "Only a gpuboxd started with --node is in a fleet; any other says it is not, and the exit "
     "status is not 0. GPUS is free/total, PORTS the free host ports, HEARTBEAT how long ago "
     "the node last reported, by this machine's clock."},
    {"node cordon", "NAME", 1, 1, CLI_COMPLETE_NODE, false, NULL, NULL, cli_cmd_node_cordon,
     "Place no new replica sets or volumes on node NAME",
     "What already runs there keeps running. Prints the node's new state."},
    {"node uncordon", "NAME", 1, 1, CLI_COMPLETE_NODE, false, NULL, NULL, cli_cmd_node_uncordon,
     "Let new replica sets and volumes be placed on node NAME again",
     "Prints the node's new state."},
    {"node drain", "NAME", 1, 1, CLI_COMPLETE_NODE, false, NULL, drain_opts, cli_cmd_node_drain,
     "Cordon node NAME and move every replica set off it",
     "Each set (running, paused or stopped; only running ones with --running) moves with its "
     "system disk and volumes to the node placement picks, one after the other. Prints each "
     "move, and each set that could not move with why; the exit status is not 0 when one could "
     "not. The node stays cordoned: `gpubox node uncordon NAME` after the maintenance."},
    {"move", "NAME", 1, 1, CLI_COMPLETE_REPLICASET, false, NULL, move_opts, cli_cmd_move,
     "Move a replica set to another node, with its system disk and volumes",
     "A new version on the other node (--node, or where placement puts it): the same name, "
     "owner, history, spec and SSH keys, the system disk and the data of every volume it "
     "binds. A running set runs there, a paused or stopped one stays so. Host ports are new "
     "there (printed). Refused before anything is copied when the node has no room, or when "
     "another set binds one of its volumes too (--with-sharers moves those sets with it, one "
     "after the other, when the node has room for all of them). Progress shows while it runs."},

    /* users, quotas and accounting */
    {"whoami", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_whoami,
     "Show who the token is: name, role, quota and what is held",
     "Quotas bind the user role; an admin's use is counted but not limited. \"-\" is "
     "unlimited."},
    {"users", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, users_opts, cli_cmd_users,
     "List the users (admin): role, and used/quota of each resource",
     "Each quota cell is what the user holds now and their quota, \"-\" when unlimited."},
    {"user create", "NAME", 1, 1, CLI_COMPLETE_NONE, false, NULL, user_create_opts,
     cli_cmd_user_create, "Create user NAME (admin); print their token, shown only once",
     "The token goes alone on a line of stdout, and is never shown again. The user gets the "
     "default quota (gpubox quota defaults) with the fields given as options put over it."},
    {"user set", "NAME", 1, 1, CLI_COMPLETE_USER, false, NULL, user_set_opts, cli_cmd_user_set,
     "Change a user's role or quota (admin)",
     "Only the fields given change; none makes a field unlimited. The role of a user from the "
     "token file is the file's; their quota may be set."},
    {"user rm", "NAME", 1, 1, CLI_COMPLETE_USER, false, NULL, NULL, cli_cmd_user_rm,
     "Delete a user (admin); refused while they own replica sets or volumes", NULL},
    {"user token", "NAME", 1, 1, CLI_COMPLETE_USER, false, NULL, NULL, cli_cmd_user_token,
     "Give a user a new token (admin); the old one stops working", NULL},
    {"user revoke", "NAME", 1, 1, CLI_COMPLETE_USER, false, NULL, NULL, cli_cmd_user_revoke,
     "Revoke a user's token (admin); the user stays",
     "The token stops working at once; gpubox user token NAME lets them in again."},
    {"quota defaults", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, quota_opts, cli_cmd_quota_defaults,
     "Show the quota new users get, or change its fields (admin)",
     "With quota options only those fields change; none makes a field unlimited. Users made "
     "before keep their quota."},
    {"usage", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, usage_opts, cli_cmd_usage,
     "Show card-hours and share GiB-hours used, per user and replica set",
     "Hours of whole cards held, and of GPU shares in GiB, in [--from, --to] (default: from "
     "the beginning to now). Each user's sets are followed by their total. A user sees only "
     "themself."},

    /* the client itself */
    {"version", "", 0, 0, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_version,
     "Show the client's, gpuboxd's and Docker's versions", NULL},
    {"help", "[COMMAND]", 0, 2, CLI_COMPLETE_COMMAND, false, NULL, help_opts, cli_cmd_help,
     "Show help for gpubox or one command", NULL},
    {"completion", "bash", 1, 1, CLI_COMPLETE_NONE, false, NULL, NULL, cli_cmd_completion,
     "Print the bash completion script", "Load it with: source <(gpubox completion bash)"},
};

const size_t cli_ncommands = ARRAY_SIZE(cli_commands);
