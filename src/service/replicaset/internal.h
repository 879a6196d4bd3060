/*
 * internal.h - what the replica-set service's files share: taking and
 * giving back allocations, and making a version's container.
 * Not for use outside src/service/replicaset/.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_INTERNAL_H
#define GPUBOX_SERVICE_REPLICASET_INTERNAL_H

#include "docker/docker.h"
#include "service/app.h"
#include "service/binds.h"
#include "service/engine.h"
#include "service/replicaset/doubt.h"
#include "service/journal.h"
#include "service/replicaset/record.h"
#include "service/users/users.h"
#include "util/err.h"

/* Take GPUs and host ports for r->spec into r (all or nothing), owned by
 * r->name. Only sched/ decides which; this only asks. */
int replicaset_alloc_take(app *a, replicaset_record *r, gb_err *err);
/* Give back to the pools what r lists as held (the caller has already
 * committed to the store that r no longer holds them). */
void replicaset_alloc_give_back(app *a, const replicaset_record *r);

/* What a new version needs (to->spec), starting from what `held` holds,
 * taking only the difference from the pools, all or nothing; to gets the
 * full holdings. Whole cards: held's that the spec still allows are kept
 * (growing adds cards, shrinking keeps the first ones) and new ones held
 * alongside; nothing is given back here. Shares (or a change between
 * shares and whole cards): the pool exchanges held's grant for the new one
 * at once, *swapped true. A GPU request that did not change keeps held's
 * grant. Ports the new spec still asks for keep their host port. */
int replicaset_alloc_next(app *a, const replicaset_record *held, replicaset_record *to,
                          bool *swapped, gb_err *err);
/* out's holdings become x's and y's together, each once (only y's GPUs
 * when swapped: the pool holds nothing else). */
int replicaset_alloc_union(const replicaset_record *x, const replicaset_record *y, bool swapped,
                           replicaset_record *out, gb_err *err);
/* Give back what held lists and keep does not (tenancies by card, ports). */
void replicaset_alloc_give_back_except(app *a, const replicaset_record *held,
                                       const replicaset_record *keep);
/* Undo a swap: the pool holds from's grant again instead of to's, and the
 * ports only to took go back. */
void replicaset_alloc_swap_back(app *a, const replicaset_record *to, const replicaset_record *from);
/* A stopped set's restart on the same cards: the spec's GPUs pinned to
 * lastGpus and exactly lastPorts, all or nothing (ERR_GPU_NOT_ENOUGH or
 * ERR_PORT_NOT_ENOUGH when one is no longer free). */
int replicaset_alloc_retake_last(app *a, replicaset_record *r, gb_err *err);
/* A stopped set's restart on other cards: GPUs and ports for r->spec,
 * keeping those of its last host ports that are still free. */
int replicaset_alloc_take_preferring_last(app *a, replicaset_record *r, gb_err *err);

/* The run spec of r's container from its record alone: image, cmd, the
 * spec's env, labels, ports, cards, limits; no binds and no GPU env (the
 * caller adds what it needs). p owns what ds points into. */
typedef struct replicaset_run_spec_parts {
    const char **uuids;
    docker_port *ports;
    json_t *labels;
    char *cpuset;     /* "2-3,34-35" (service/cores.h); NULL: none */
    char network[96]; /* the owner's network (replicaset_network_name) */
} replicaset_run_spec_parts;
int replicaset_run_spec_base(app *a, const replicaset_record *r, replicaset_run_spec_parts *p,
                             docker_run_spec *ds, gb_err *err);
void replicaset_run_spec_parts_free(replicaset_run_spec_parts *p);

/* gpu-docker-api's record of r's version (replicaset/compat.c): {version,
 * createTime, config, hostConfig, networkingConfig, platform,
 * containerName}, as its GET /replicaSet/{name} ("info") and each history
 * entry's "status" carry it. inspect: Docker's inspect of the version's
 * container, for the fields the spec does not set (NULL: none; they get
 * the empty values of gpu-docker-api's description). NULL when r's spec
 * cannot be shown. */
json_t *replicaset_compat_version(app *a, const replicaset_record *r, const json_t *inspect);
/* The same for a history entry of name (its spec, and the cards and ports
 * the entry lists, when it lists them). */
json_t *replicaset_compat_history_status(app *a, const char *name, const json_t *entry,
                                         const json_t *inspect);

/* Create r's container (r->container_name) from r->spec and its holdings,
 * without starting it (the caller starts it, a new version once its system
 * disk is carried in); its host binds are pinned first (binds_stage). *id
 * gets its id (malloc'd). On failure nothing is left behind. */
int replicaset_container_create(app *a, const replicaset_record *r, char **id, gb_err *err);

/* Start r's container, its host binds pinned again first where a host
 * reboot took their staging mounts (binds_ensure). Every start gpuboxd
 * makes of a set's container goes through here. */
int replicaset_container_start(app *a, const replicaset_record *r, gb_err *err);

/* What gpuboxd keeps on the host for a container, gone once Docker no
 * longer has it: its GPU env file and its staged binds. */
void replicaset_container_forget(app *a, const char *container);

/* Start r's existing container (r->container_name): first onto its
 * owner's network (replicaset_network_attach), then started; starting a running
 * container is success. */
int replicaset_container_start(app *a, const replicaset_record *r, gb_err *err);

/* network.c: each user's sets on a network of their own (docs/security.md,
 * "Networks between users"). */
#define RS_NETWORK_NAME_MAX 96
/* "gpubox-u-<owner>" (characters Docker refuses in names made safe). */
void replicaset_network_name(const char *owner, char *buf, size_t size);
/* Make owner's network if Docker lacks it; name gets its name. A network
 * of that name that is not gpubox's for owner gives ERR_CONFLICT. */
int replicaset_network_ensure(app *a, const char *owner, char *name, size_t name_size, gb_err *err);
/* Before r's existing container starts: its owner's network made if
 * missing, and the container, when not running, moved onto it if it is
 * on anything else (another network, or the same name with an old id).
 * An absent container is left to the start to report. */
int replicaset_network_attach(app *a, const replicaset_record *r, gb_err *err);
/* After a set of owner's was deleted: their network goes when no set of
 * theirs is left (a container still on it is logged, not an error). */
void replicaset_network_release(app *a, const char *owner);
/* Start-up: the network of every owner in owners (an object keyed by
 * owner) made if missing; gpubox's networks of anyone else removed. */
void replicaset_network_reconcile(app *a, const json_t *owners);

/* Stop a set's container (idempotent, as docker_container_stop), giving
 * its processes RS_STOP_TIMEOUT_S to end on SIGTERM, or no time at all when
 * the signal reaches no process that acts on it
 * (docker_container_stop_promptly). */
int replicaset_container_stop(app *a, const char *container, gb_err *err);

/* replicaset/version.c: make version N+1 (`to`: new spec, full holdings,
 * state) from `from` (the record as loaded, under the name lock), carrying
 * the system disk, through the journal as an operation of `kind`. What
 * `to` took beyond `from` (replicaset_alloc_next; swapped as it said) is owned by
 * the change from here:
 * given back if it fails, and what only `from` held is given back once
 * version N+1 runs. reason goes into the history ("patch", "rollback to
 * 2"). data: {name, replicaSetName, containerName, containerId, version,
 * state, gpus, ports, changed: true, operationId, carry}. */
int replicaset_version_change(app *a, const op_kind *kind, const replicaset_record *from,
                              replicaset_record *to, bool swapped, const char *reason, json_t **out,
                              gb_err *err);
/* The old container must exist: its system disk is what a new version
 * carries (code: the kind's envelope code when it does not). */
int replicaset_version_check_container(app *a, const replicaset_record *r, int code, gb_err *err);
/* Version N+1 of from, with spec (copied), in the state from's is heading
 * for: a paused set stays paused, anything else runs. */
void replicaset_version_next(const replicaset_record *from, const replicaset_spec *spec,
                             replicaset_record *to);
/* replicaset/patch.c: the spec r's next version will have: its
 * pendingSpec (record.h) when a change was made while it was stopped, else
 * its spec (a copy either way). ERR_INTERNAL when the stored one does not
 * parse. */
int replicaset_record_next_spec(const replicaset_record *r, replicaset_spec *out, gb_err *err);
/* Start-up or a later call: finish or undo an unfinished change; cur is
 * the set's record (it names op). */
int replicaset_version_resume(app *a, journal_op *op, const replicaset_record *cur, gb_err *err);

/* Load name's record for a change: 404 when absent; an operation the
 * record names that is still unfinished is finished or undone first (and
 * the record loaded again). */
int replicaset_load_settled(app *a, const char *name, replicaset_record *r, gb_err *err);

/* restart (restart.c) of r, loaded under its lock and checked. */
int replicaset_restart_locked(app *a, replicaset_record *r, bool no_gpu, json_t **out, gb_err *err);
/* move_in.c: start-up: the containers (keys of known) and owners (keys of
 * owners) of moves coming here that are not settled yet, so that what
 * start-up sweeps (env files, staged binds, networks) keeps theirs. */
void replicaset_move_in_known(app *a, json_t *known, json_t *owners);

/* The kind-specific resumes (each file owns its kind's steps). */
int replicaset_create_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err);
/* Give back r's owner's quota reservation for r->name (create.c, step
 * 1b), if it is still one: a create whose record never landed. */
void replicaset_create_quota_release(app *a, const replicaset_record *r);
int replicaset_stop_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err);
int replicaset_delete_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err);
int replicaset_restart_same_resume(app *a, journal_op *op, const replicaset_record *r, gb_err *err);
/* The "creating" record of a create that left no operation (a data dir of
 * a gpuboxd before the journal): finished if its container exists, else
 * undone. */
void replicaset_create_conclude_legacy(app *a, replicaset_record *r);

/* replicaset/lifecycle.c: continue, with the name lock held and r loaded. */
int replicaset_continue_locked(app *a, replicaset_record *r, json_t **out, gb_err *err);

/* replicaset/ssh.c: SSH access. After gpubox started r's container (or
 * made a paused version's): r's sshKeys written as /root/.ssh/
 * authorized_keys (an empty list when before, the spec of the version r
 * replaces, had keys and r has none; before NULL: none), and, when r runs,
 * the image's SSH server started. Never fails: answer (may be NULL) gets
 * "ssh" saying how it went when r has keys. */
void replicaset_ssh_after_start(app *a, const replicaset_record *r, const replicaset_spec *before,
                                json_t *answer);
/* GET's "ssh" for r, looked up now: JSON null when r has no keys. */
json_t *replicaset_ssh_info(app *a, const replicaset_record *r);
/* The command that reaches r over SSH ("ssh -p 40012 root@host", malloc'd),
 * as replicaset_ssh_info says it, without looking into the container; NULL when r
 * has no SSH keys or no port for 22/tcp. */
char *replicaset_ssh_command(app *a, const replicaset_record *r);

/* container.c: whether every volume r binds can be mounted now
 * (logs why not). */
bool replicaset_volumes_ready(app *a, const replicaset_record *r);

/* The replica-set kinds of the operation engine's table (op_kinds.c), each
 * defined in the file that holds its steps. */
extern const op_kind replicaset_op_create, replicaset_op_stop, replicaset_op_delete,
    replicaset_op_restart_same, replicaset_op_restart_new, replicaset_op_patch,
    replicaset_op_rollback, replicaset_op_move, replicaset_op_move_group;

#define RS_STOP_TIMEOUT_S 10

/* query.c: the record of set name as the caller may see it. A bad name
 * fails as name_check_replicaset says; a set that is absent, a tombstone
 * or not the caller's is ERR_NOT_FOUND ("no replica set named ..."). */
int replicaset_record_load_named(app *a, const char *name, replicaset_record *r, gb_err *err);

/* logs.c: keep the last RS_LOGS_KEEP_LINES lines of version's container
 * before it is removed (best effort: trouble is logged); forget every
 * kept line of a purged set. */
void replicaset_logs_keep(app *a, const char *name, int version, const char *container);
void replicaset_logs_forget(app *a, const char *name);
/* The bytes a set's kept logs may take (--kept-logs-mib), those one
 * version's may take (a quarter), and those they take now. */
uint64_t replicaset_logs_set_cap(const app *a);
uint64_t replicaset_logs_version_cap(const app *a);
uint64_t replicaset_logs_kept_bytes(const app *a, const char *name);

/* A patch's spec that changes only the size of r's memory share, applied
 * in place (resize.c): 1 with *out the answer (inPlace true; r saved with
 * the new spec and grant), 0 when it does not apply or the cards have no
 * room (nothing changed: make a new version), -1 with err. */
int replicaset_share_resize(app *a, replicaset_record *r, const replicaset_spec *spec, json_t **out,
                            gb_err *err);

#endif
