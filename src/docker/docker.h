/*
 * docker.h - the Docker Engine API client: the only place that builds
 * Engine API requests.
 *
 * Talks HTTP over the unix socket (default /var/run/docker.sock, or
 * DOCKER_HOST / --docker-host as "unix:///path" or "tcp://host:port") with
 * libcurl, keeping connections alive; bodies are JSON (jansson), or tar
 * streams for the archive calls. The API
 * version is pinned (DOCKER_API_VERSION) so requests mean the same on any
 * daemon that supports it (Docker 20.10 speaks 1.41).
 *
 * Thread-safe: each call borrows a curl handle from a small pool and gives
 * it back, so connections are reused across calls and threads
 * (docs/docker.md). Every call has a total timeout, except those that
 * stream (wait, exec without a limit, archives), which have their own
 * bounds; buffered response bodies are capped at 64 MiB.
 *
 * Errors: ERR_DOCKER_UNAVAILABLE when the daemon cannot be reached or does
 * not answer in time, ERR_NOT_FOUND for 404s (no such container),
 * ERR_IMAGE_NOT_FOUND for an absent image, ERR_CONFLICT for 409s (name in
 * use, container running), ERR_INVALID_PARAMS for bad arguments and for
 * Docker's 400s (a parameter it refused), ERR_INTERNAL otherwise; messages
 * carry Docker's own "message".
 */
#ifndef GPUBOX_DOCKER_DOCKER_H
#define GPUBOX_DOCKER_DOCKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

#define DOCKER_API_VERSION "v1.41"

typedef struct docker_client docker_client;

/* host: "unix:///path" or "tcp://host:port"; NULL or "" = $DOCKER_HOST if
 * set, else unix:///var/run/docker.sock. Other schemes are refused with
 * ERR_INVALID_PARAMS. Nothing is contacted yet (see docker_ping). */
docker_client *docker_client_new(const char *host, gb_err *err);
/* Only when no call is running on c. */
void docker_client_free(docker_client *c);
const char *docker_client_host(const docker_client *c);
/* Connections opened so far: stays low while keep-alive works (metrics). */
unsigned long docker_client_connects(const docker_client *c);
/* fn(ctx, id_or_name) runs after each call of this client that may change a
 * container's state (create, start, stop, remove, rename: both names),
 * whatever its outcome, on the calling thread: it must be quick and
 * thread-safe. Set once, before any call runs; NULL: none. */
typedef void (*docker_change_fn)(void *ctx, const char *id_or_name);
void docker_client_on_change(docker_client *c, docker_change_fn fn, void *ctx);

/* Generic request: method "GET"/"POST"/..., path such as "/containers/json?all=1"
 * (the version prefix is added), body may be NULL. On any HTTP answer returns
 * 0 with *status set and *resp the parsed JSON body (NULL if empty or not
 * JSON); -1 only when the daemon could not be reached or did not answer in
 * time, or its answer was larger than 64 MiB. */
int docker_request(docker_client *c, const char *method, const char *path, json_t *body,
                   long *status, json_t **resp, gb_err *err);
/* docker_request takes up to 600 s (it serves slow calls such as commit);
 * this one takes at most timeout_s (0 = no limit). */
int docker_request_timeout(docker_client *c, const char *method, const char *path, json_t *body,
                           long timeout_s, long *status, json_t **resp, gb_err *err);

int docker_ping(docker_client *c, gb_err *err);
/* GET /version and GET /info; caller decrefs *out. */
int docker_version(docker_client *c, json_t **out, gb_err *err);
int docker_info(docker_client *c, json_t **out, gb_err *err);

/* ---- The labels gpubox puts on what it makes in Docker. Users' own
 * labels may not start with DOCKER_LABEL_PREFIX. ---- */
#define DOCKER_LABEL_PREFIX "gpubox."
#define DOCKER_LABEL_REPLICASET "gpubox.replicaset"        /* a container: its replica set */
#define DOCKER_LABEL_VERSION "gpubox.version"              /* a container: its version number */
#define DOCKER_LABEL_VOLUME "gpubox.volume"                /* a Docker volume: its gpubox volume */
#define DOCKER_LABEL_CREATED "gpubox.created"              /* an image gpubox committed: "true" */
#define DOCKER_LABEL_COMMITTED_FROM "gpubox.committedFrom" /* ... from this container */
#define DOCKER_LABEL_COMMITTED_BY "gpubox.committed-by"    /* the owner who committed it */
#define DOCKER_LABEL_NETWORK "gpubox.network"              /* a network: the user it is for */
#define DOCKER_LABEL_OWNER "gpubox.owner"                  /* a network: its owner, the same */

/* ---- The run spec (docker_spec.c): a container as gpubox's services
 * describe it; only docker/ turns it into Engine API JSON. ---- */

typedef struct docker_bind {
    const char *src;  /* an absolute host path, or a Docker volume name */
    const char *dest; /* an absolute path in the container */
    bool read_only;
    uint64_t tmpfs_bytes; /* > 0: instead, a tmpfs of this size (mode 1777) at dest; no src */
} docker_bind;

typedef struct docker_port {
    uint16_t container_port; /* 1-65535 */
    uint16_t host_port;      /* 1-65535: gpubox allocates host ports, Docker never picks */
    const char *protocol;    /* "tcp" (NULL means tcp) or "udp" */
} docker_port;

/* How GPUs reach a container (docs/docker.md, "GPU attach modes"). */
enum docker_gpu_attach {
    DOCKER_GPU_NVIDIA,  /* DeviceRequests driver "nvidia", as `docker run --gpus` */
    DOCKER_GPU_CDI,     /* DeviceRequests driver "cdi", "nvidia.com/gpu=<uuid>" (Docker >= 25) */
    DOCKER_GPU_RUNTIME, /* Runtime "nvidia" + NVIDIA_VISIBLE_DEVICES */
};

/* PidsLimit when the spec says 0: a fork bomb stops there, while threaded
 * training jobs (threads count against the limit) stay well below it. */
#define DOCKER_DEFAULT_PIDS_LIMIT 16384

typedef struct docker_run_spec {
    const char *image;      /* required */
    const char *const *cmd; /* ncmd == 0: the image's CMD */
    size_t ncmd;
    const char *const *env; /* "KEY=VALUE" */
    size_t nenv;
    json_t *labels; /* object of strings; may be NULL */
    const docker_bind *binds;
    size_t nbinds;
    const docker_port *ports;
    size_t nports;
    enum docker_gpu_attach gpu_attach;
    const char *const *gpu_uuids; /* ngpus == 0: no GPU (see docs/docker.md) */
    size_t ngpus;
    double cpus;                /* 0 = no limit */
    const char *cpuset_cpus;    /* HostConfig.CpusetCpus, "0-1,32-33"; NULL/"": any */
    int64_t memory_bytes;       /* 0 = no limit */
    int64_t shm_bytes;          /* 0 = Docker's default (64 MiB) */
    const char *restart_policy; /* NULL/"no", "always", "unless-stopped", "on-failure" */
    int64_t pids_limit;         /* 0 = DOCKER_DEFAULT_PIDS_LIMIT, < 0 = no limit */
    bool tty;                   /* Tty + OpenStdin: a shell CMD stays up */
    const char *hostname;       /* NULL: Docker's (the short id) */
    const char *network;        /* HostConfig.NetworkMode: a network's name; NULL: Docker's
                                 * default bridge */
    const char *network_alias;  /* another name the container answers to on network (its
                                 * replica set's); NULL: its own name only */
} docker_run_spec;

/* The ContainerConfig (HostConfig and NetworkingConfig inside) for spec, with gpubox's safety
 * defaults always on: not privileged, no-new-privileges, a pids limit, an
 * init process, private IPC, Docker's default capabilities, no host
 * namespaces. A bad spec gives ERR_INVALID_PARAMS naming the field. */
int docker_run_spec_to_json(const docker_run_spec *spec, json_t **config, gb_err *err);
/* The same container in the shape of the record gpu-docker-api keeps of a
 * version: {config, hostConfig, networkingConfig, platform}, as the Engine
 * API's create body splits them. hostConfig.Binds gets bind_strings
 * ("src:dest[:ro]"), the form gpu-docker-api shows, in place of Mounts. */
int docker_run_spec_view(const docker_run_spec *spec, const char *const *bind_strings,
                         size_t nbind_strings, json_t **view, gb_err *err);
/* A created container's configuration in that shape, as Docker's inspect
 * (inspect: GET /containers/{id}/json's answer) reports it: {config,
 * hostConfig}, copies of its Config and HostConfig ({} where inspect has
 * none). It shows what Docker filled in that no spec sets (Hostname,
 * LogConfig, CgroupnsMode, ...). */
json_t *docker_container_config_view(const json_t *inspect);

/* ---- Images (docker_images.c, docker_imageref.c) ---- */

/* GET /images/{name}/json. image is a reference docker_image_ref_parse
 * takes, or an image id "sha256:<64 hex>"; anything else is
 * ERR_INVALID_PARAMS with no call made. ERR_IMAGE_NOT_FOUND (naming the
 * image) when absent. */
int docker_image_inspect(docker_client *c, const char *image, json_t **out, gb_err *err);

/* Buffer sizes that hold any repository and tag docker_image_ref_check accepts. */
#define DOCKER_REPO_MAX 256 /* 255 characters and the NUL */
#define DOCKER_TAG_MAX 129  /* 128 characters and the NUL */

#define DOCKER_DIGEST_MAX 72 /* "sha256:", 64 hex digits and the NUL */

/* An image reference split by Docker's grammar (docker_imageref.c). */
typedef struct docker_image_ref {
    char repo[DOCKER_REPO_MAX];     /* "registry:5000/team/app", as given */
    char tag[DOCKER_TAG_MAX];       /* "" when none was given */
    char digest[DOCKER_DIGEST_MAX]; /* "sha256:<64 hex>", or "" */
} docker_image_ref;

/* Check ref, "name[:tag][@sha256:<64 hex>]", by Docker's grammar and split
 * it into *out. ERR_INVALID_PARAMS says what is wrong (ERR_IMAGE_EMPTY for
 * NULL or ""). Every image name a request gives passes here before any
 * Docker call: a name Docker's grammar refuses never reaches a URL. */
int docker_image_ref_parse(const char *ref, docker_image_ref *out, gb_err *err);
/* r as Docker shows it in RepoTags and RepoDigests ("familiar" form):
 * without docker.io/ and library/, with ":latest" when no tag was given;
 * "name@digest" (the tag dropped) when it has a digest. */
void docker_image_ref_familiar(const docker_image_ref *r, char *buf, size_t size);
/* Is s an image id, "sha256:<64 hex>" or the 64 hex digits alone? */
bool docker_image_id_like(const char *s);

/* Check an image reference "repo[:tag]" by Docker's rules and split it:
 * *repo gets the repository ("registry:5000/team/app"), *tag the tag
 * ("latest" when none is given). Digest references ("@sha256:...") are
 * refused: gpubox only writes tags. ERR_INVALID_PARAMS says what is wrong
 * (ERR_IMAGE_EMPTY for NULL or ""); ERR_INTERNAL when a buffer is too small. */
int docker_image_ref_check(const char *ref, char *repo, size_t repo_size, char *tag,
                           size_t tag_size, gb_err *err);

/* The registry a reference pulls from, into buf: its first component when
 * that names a host as docker_image_ref_check reads it ("127.0.0.1:5000",
 * "ghcr.io"), else "docker.io" (index.docker.io and registry-1.docker.io
 * are docker.io too). */
void docker_image_ref_registry(const char *ref, char *buf, size_t size);

/* One line of a pull's progress as Docker streams it (docker_pull.c). */
typedef struct docker_pull_event {
    const char *status;       /* "Pulling fs layer", "Downloading", "Pull complete", ... */
    const char *id;           /* the layer, or the tag on the first line; NULL when none */
    long long current, total; /* progressDetail; -1 when absent */
} docker_pull_event;
/* Called for each event; a nonzero return ends the pull (it fails). */
typedef int (*docker_pull_fn)(void *ctx, const docker_pull_event *ev);

/* POST /images/create?fromImage=REPO&tag=TAG: pull ref (checked by
 * docker_image_ref_check), calling fn (may be NULL) for each progress line.
 * registry_auth (NULL: none) is the X-Registry-Auth value
 * (docker_registry_auth). Errors: the registry refused the credentials or
 * asks for some -> ERR_REGISTRY_AUTH; no such repository or tag, registry
 * unreachable, or an error line in the stream -> ERR_PULL_FAILED; Docker
 * itself unreachable -> ERR_DOCKER_UNAVAILABLE. Messages never hold the
 * credentials. No total time limit: it gives up when nothing moves for 10
 * minutes. */
int docker_image_pull(docker_client *c, const char *ref, const char *registry_auth,
                      docker_pull_fn fn, void *ctx, gb_err *err);
/* The X-Registry-Auth value for username and password at server: base64url
 * of {"username","password","serveraddress"}, malloc'd. The caller wipes it
 * (explicit_bzero) before freeing: it holds the password. */
char *docker_registry_auth(const char *username, const char *password, const char *server);
/* GET /images/json: the images Docker holds, as Docker lists them (Id,
 * RepoTags, Size, Created, Labels, ...); caller decrefs *out. */
int docker_image_list(docker_client *c, json_t **out, gb_err *err);

/* POST /commit: the container's filesystem and config as image repo:tag
 * (repo checked by docker_image_ref_check; tag NULL or "" = "latest").
 * labels (an object of strings, may be NULL) are added to the image's, so
 * gpubox can mark images it made. The container is paused while its
 * filesystem is read. *image_id (may be NULL) gets "sha256:...", malloc'd.
 * env (an array of strings, may be NULL: the container's) is the image's
 * environment; Docker adds back any variable of the container it does not
 * name, and an entry without '=' ("KEY") is one Docker unsets at every
 * start of a container made from the image.
 * An existing tag is moved to the new image: check first if that matters. */
int docker_container_commit(docker_client *c, const char *id_or_name, const char *repo,
                            const char *tag, const char *comment, json_t *labels, const json_t *env,
                            char **image_id, gb_err *err);
/* DELETE /images/{name}. An absent image is success; an image a container
 * uses gives ERR_CONFLICT unless force. Only the tag goes when other tags
 * share the image. */
int docker_image_remove(docker_client *c, const char *name, bool force, gb_err *err);

/* POST /containers/create?name=... (name NULL: Docker picks one); config is
 * the Engine API ContainerConfig with HostConfig inside. *id_out is malloc'd.
 * Name in use -> ERR_CONFLICT; image absent -> ERR_IMAGE_NOT_FOUND. */
int docker_container_create(docker_client *c, const char *name, json_t *config, char **id_out,
                            gb_err *err);
/* Starting a running container is success. */
int docker_container_start(docker_client *c, const char *id_or_name, gb_err *err);
/* timeout_s: seconds before SIGKILL (< 0: Docker's default). Stopping a
 * stopped container is success. */
int docker_container_stop(docker_client *c, const char *id_or_name, int timeout_s, gb_err *err);
int docker_container_inspect(docker_client *c, const char *id_or_name, json_t **out, gb_err *err);
/* Bytes of the container's own writable layer (inspect's SizeRw, which
 * Docker measures by walking the layer: slow for a large one). */
int docker_container_size_rw(docker_client *c, const char *id_or_name, uint64_t *bytes,
                             gb_err *err);
/* The container's IPv4 address on network (NetworkSettings.Networks;
 * NULL or not there: the first network that gave it one) into addr.
 * ERR_NOT_FOUND when there is no container, ERR_STATE_CONFLICT when it has
 * no address (not running, or on no network). */
int docker_container_address(docker_client *c, const char *id_or_name, const char *network,
                             char *addr, size_t size, gb_err *err);
/* docker_container_stop_promptly (docker_stop.c): the same, with no grace
 * at all when the stop signal reaches no process in the container that
 * acts on it (an interactive shell under docker-init ignores SIGTERM), as
 * far as the Docker host's /proc tells; timeout_s otherwise. */
int docker_container_stop_promptly(docker_client *c, const char *id_or_name, int timeout_s,
                                   gb_err *err);
/* Removing an absent container is success. force kills a running one
 * (without it, a running container gives ERR_CONFLICT). Anonymous volumes
 * are kept (v=0): they may hold data a later version takes over. */
int docker_container_remove(docker_client *c, const char *id_or_name, bool force, gb_err *err);
/* GET /containers/json?all=1&filters={"label":[label]}; label is "k" or "k=v"
 * (NULL: every container). *out is the JSON array Docker returns. */
int docker_container_list(docker_client *c, const char *label, json_t **out, gb_err *err);

/* ---- A container's state, typed (docker_state.c) ---- */

typedef struct docker_container_state {
    bool exists;     /* false when Docker has no such container (or did not answer) */
    bool running;    /* State.Running: true while paused too */
    bool paused;     /* State.Paused */
    char status[16]; /* State.Status: "created", "running", "paused", "restarting",
                      * "removing", "exited", "dead"; "" when Docker did not say */
    int pid;         /* State.Pid: its PID 1 as the host sees it; 0 when not running */
    char id[65];     /* the full id */
} docker_container_state;

/* GET /containers/{id}/json, read into *out (zeroed on any error: exists
 * false). An absent container is ERR_NOT_FOUND, as docker_container_inspect. */
int docker_container_state_get(docker_client *c, const char *id_or_name,
                               docker_container_state *out, gb_err *err);
/* The same from an inspect the caller already holds. */
void docker_container_state_of(const json_t *inspect, docker_container_state *out);

/* The host path the container was created to bind at target
 * (HostConfig.Mounts, Type "bind"), into *source (malloc'd): 1 found, 0
 * no such bind, -1 Docker did not answer (ERR_NOT_FOUND: no container). */
int docker_container_bind_source(docker_client *c, const char *id_or_name, const char *target,
                                 char **source, gb_err *err);

/* One container of a list. */
typedef struct docker_container_brief {
    char *name;       /* its own name, without Docker's leading '/'; NULL when none */
    char *status;     /* State: "created", "running", "paused", ...; NULL when none */
    char *replicaset; /* its DOCKER_LABEL_REPLICASET label; NULL when it has none */
} docker_container_brief;

typedef struct docker_container_briefs {
    docker_container_brief *items;
    size_t n;
} docker_container_briefs;

/* docker_container_list, typed: every container (label as there), or with
 * volume not NULL only those that mount that Docker volume. Free *out with
 * docker_container_briefs_free (also after an error). */
int docker_container_list_briefs(docker_client *c, const char *label, const char *volume,
                                 docker_container_briefs *out, gb_err *err);
void docker_container_briefs_free(docker_container_briefs *l);

/* One container event of Docker's stream (docker_events.c). */
typedef struct docker_container_event {
    const char *action;   /* "create", "start", "die", "pause", "unpause", "destroy",
                           * "rename", "kill", "exec_start: ...", ... */
    const char *id;       /* the container's full id */
    const char *name;     /* its name now, without '/'; NULL when Docker did not say */
    const char *old_name; /* "rename": its name before, without '/'; else NULL */
} docker_container_event;
/* Called for each event, on the calling thread; false ends the stream. */
typedef bool (*docker_event_fn)(void *ctx, const docker_container_event *ev);
/* GET /events?filters={"type":["container"],"label":[label]} (label NULL:
 * every container), from unix time since on (Docker replays the events it
 * still keeps; 0: only new ones). Blocks while the stream lasts: returns 0
 * when Docker closed it, fn said stop or cancel was set; -1 when Docker
 * could not be reached or refused (the caller lists again and reconnects). */
int docker_container_events(docker_client *c, const char *label, int64_t since,
                            const atomic_bool *cancel, docker_event_fn fn, void *ctx, gb_err *err);

/* POST /containers/{id}/wait?condition=not-running: blocks until the
 * container is not running (at once if it already exited) and sets
 * *exit_code. No time limit: the container decides how long it runs. */
int docker_container_wait(docker_client *c, const char *id_or_name, long *exit_code, gb_err *err);
/* The same, giving up with ERR_INTERNAL after timeout_s (0 = no limit). */
int docker_container_wait_timeout(docker_client *c, const char *id_or_name, long timeout_s,
                                  long *exit_code, gb_err *err);

/* POST /containers/{id}/rename. A taken name gives ERR_CONFLICT; a name
 * Docker cannot accept gives ERR_INVALID_PARAMS. */
int docker_container_rename(docker_client *c, const char *id_or_name, const char *new_name,
                            gb_err *err);

/* ---- Logs (docker_logs.c) ---- */

/* GET /containers/{id}/logs?stdout=1&stderr=1: everything the container
 * wrote so far, split into two malloc'd strings (a TTY container's output is
 * all stdout). cap bounds each (0 = 64 MiB); more is ERR_INTERNAL. */
int docker_container_logs(docker_client *c, const char *id_or_name, char **out_stdout,
                          char **out_stderr, size_t cap, gb_err *err);

/* Which lines, and whether to wait for more. */
typedef struct docker_logs_opts {
    long tail;                 /* the last this many lines; < 0: all */
    int64_t since;             /* unix seconds: only lines written at or after it; 0: all */
    bool follow;               /* read on until the container stops or cancel is set */
    const atomic_bool *cancel; /* set by another thread to end a follow; may be NULL */
} docker_logs_opts;

/* A line longer than this comes in pieces. */
#define DOCKER_LOG_LINE_MAX (16 * 1024)

typedef struct docker_log_line {
    int stream;       /* 1 stdout, 2 stderr (a TTY container's output is all stdout) */
    const char *time; /* Docker's RFC 3339 time with nanoseconds; "" if none came */
    const char *text; /* without its line end; NUL-terminated; any bytes, not only UTF-8 */
    size_t len;
    bool partial; /* a piece of a line longer than DOCKER_LOG_LINE_MAX; more follows */
} docker_log_line;

/* Called for each line, on the calling thread; false ends the read. */
typedef bool (*docker_log_fn)(void *ctx, const docker_log_line *line);

/* GET /containers/{id}/logs with timestamps, line by line as Docker sends
 * them. Returns 0 when the log ended (without follow: at once; with it:
 * when the container stopped), when fn said stop, or when cancel was set;
 * -1 when the container is absent (ERR_NOT_FOUND) or Docker failed. No
 * time limit with follow (cancel bounds it); without, 600 s. */
int docker_container_log_lines(docker_client *c, const char *id_or_name, const docker_logs_opts *o,
                               docker_log_fn fn, void *ctx, gb_err *err);

/* ---- Exec (docker_exec.c) ---- */

typedef struct docker_exec_result {
    char *out_stdout; /* malloc'd, NUL-terminated; at most cap bytes */
    char *out_stderr;
    long exit_code; /* -1 when unknown (the process would not die in time) */
    bool stdout_truncated, stderr_truncated;
    bool timed_out; /* the time ran out; the process and its children were killed */
} docker_exec_result;

/* The default output cap per stream (cap_bytes 0). */
#define DOCKER_EXEC_DEFAULT_CAP (1024u * 1024)
/* Output read in total (both streams) before the process is killed: past
 * the cap it is only drained so the process does not block on a full pipe. */
#define DOCKER_EXEC_DRAIN_MAX (256u * 1024 * 1024)

/* Run cmd in the running container id, as `docker exec` without a TTY:
 * stdout and stderr apart, at most cap_bytes of each kept (0 =
 * DOCKER_EXEC_DEFAULT_CAP; the rest is read and dropped, and the truncated
 * flag set), in workdir (NULL: the image's). After timeout_s (<= 0: no
 * limit; services should always pass one) the process and its descendants
 * are killed and timed_out is set, with what output came so far. Returns 0
 * whenever the command ran, whatever its exit code. Errors: the container
 * absent (ERR_NOT_FOUND) or not running (ERR_CONFLICT, Docker's words); a
 * command or workdir that cannot be used (ERR_INVALID_PARAMS, Docker's
 * words). On error *out is zeroed. Free *out with docker_exec_result_free. */
int docker_exec_run(docker_client *c, const char *id, const char *const *cmd, size_t ncmd,
                    const char *workdir, int timeout_s, size_t cap_bytes, docker_exec_result *out,
                    gb_err *err);
/* The same as user ("root", "1000:1000"; NULL: the container's user). */
int docker_exec_run_as(docker_client *c, const char *id, const char *user, const char *const *cmd,
                       size_t ncmd, const char *workdir, int timeout_s, size_t cap_bytes,
                       docker_exec_result *out, gb_err *err);
void docker_exec_result_free(docker_exec_result *r);
/* ---- Interactive exec (docker_exec_stream.c) ---- */

typedef struct docker_exec_stream docker_exec_stream;
typedef struct docker_exec_stream_opts {
    const char *const *cmd;
    size_t ncmd;
    bool tty;            /* a TTY: raw output; else stdout and stderr multiplexed */
    unsigned cols, rows; /* the TTY's first size; 0: Docker's default */
} docker_exec_stream_opts;

/* Start cmd in running container id with its stdin and output one stream
 * (docker_exec_stream_fd): written bytes are its input, shutdown(SHUT_WR)
 * closes its input, read bytes its output (with a TTY as the terminal
 * shows them; else in Docker's multiplexed frames). Errors as
 * docker_exec_run's. */
int docker_exec_stream_open(docker_client *c, const char *id, const docker_exec_stream_opts *o,
                            docker_exec_stream **out, gb_err *err);
int docker_exec_stream_fd(const docker_exec_stream *s);
/* The TTY's new size. */
int docker_exec_stream_resize(docker_exec_stream *s, unsigned cols, unsigned rows, gb_err *err);
/* Hand bytes read from the stream on as output: emit(ctx, 1 (stdout) or 2
 * (stderr), piece). With a TTY all of it is 1; without, Docker's frames
 * are taken apart, whatever way reads cut them. -1: the bytes are not in
 * Docker's format. */
typedef void (*docker_exec_emit_fn)(void *ctx, int stream, const uint8_t *data, size_t n);
int docker_exec_stream_split(docker_exec_stream *s, const uint8_t *data, size_t n,
                             docker_exec_emit_fn emit, void *ctx);
/* Once the stream has ended: the process's exit code (-1: not known). */
long docker_exec_stream_exit_code(docker_exec_stream *s);
/* Close the stream and free s; kill: end the process and its children
 * first if they still run. NULL is fine. */
void docker_exec_stream_close(docker_exec_stream *s, bool kill);

/* GET /containers/{id}/top: *out is an array of the command lines
 * (strings, ps's CMD column) of the processes running in the container.
 * A container that is not running gives ERR_CONFLICT (Docker's words). */
int docker_container_commands(docker_client *c, const char *id, json_t **out, gb_err *err);

/* ---- Volumes (docker_volumes.c) ---- */

/* POST /volumes/create. driver NULL = "local"; driver_opts and labels are
 * objects of strings (may be NULL). *out (may be NULL) gets the volume as
 * Docker describes it. A volume of that name that already exists is
 * returned as it is (Docker's rule: create is idempotent), whatever its
 * options: inspect first if that matters. */
int docker_volume_create(docker_client *c, const char *name, const char *driver,
                         json_t *driver_opts, json_t *labels, json_t **out, gb_err *err);
/* GET /volumes/{name}: ERR_NOT_FOUND when absent. */
int docker_volume_inspect(docker_client *c, const char *name, json_t **out, gb_err *err);
/* DELETE /volumes/{name}. Absent is success; in use by any container
 * (running or not) gives ERR_CONFLICT with Docker's message, even with force:
 * force only lets a volume whose driver is gone be forgotten. */
int docker_volume_remove(docker_client *c, const char *name, bool force, gb_err *err);
/* GET /volumes?filters={"label":[label]}; label "k" or "k=v", NULL = all.
 * *out is the array of volumes (empty when none). */
int docker_volume_list(docker_client *c, const char *label, json_t **out, gb_err *err);

/* ---- A container's filesystem (docker_archive.c): what the portable way
 * of carrying a system disk uses. ---- */

enum docker_change_kind {
    DOCKER_CHANGE_MODIFIED = 0,
    DOCKER_CHANGE_ADDED = 1,
    DOCKER_CHANGE_DELETED = 2
};

/* GET /containers/{id}/changes: *out is an array of {"Path", "Kind"} against
 * the image (Kind per enum docker_change_kind), sorted by path so that a
 * directory comes before what is in it; empty when nothing changed. */
int docker_container_changes(docker_client *c, const char *id_or_name, json_t **out, gb_err *err);
/* GET /containers/{id}/archive?path=: a tar of path (a file or a directory,
 * named by its base name inside the tar) written to fd as it arrives, never
 * held in memory. A missing path gives ERR_NOT_FOUND. On error, part of a
 * tar may have been written. No total time limit; a stream that stalls for
 * 60 s is an error. With fd a pipe, SIGPIPE must be ignored (gpuboxd does):
 * a reader that went away is then an error, not the end of the process. */
int docker_container_archive_get(docker_client *c, const char *id_or_name, const char *path, int fd,
                                 gb_err *err);
/* PUT /containers/{id}/archive?path=dir: extract the tar read from fd (to
 * its end) into dir, which must exist in the container. Works on a created,
 * not started container. Owners and modes come from the tar. */
int docker_container_archive_put(docker_client *c, const char *id_or_name, const char *dir, int fd,
                                 gb_err *err);
/* HEAD /containers/{id}/archive?path=: whether path exists in the
 * container's filesystem (any state, no process needed). */
int docker_container_path_exists(docker_client *c, const char *id_or_name, const char *path,
                                 bool *exists, gb_err *err);

/* ---- Networks (docker_networks.c) ---- */

/* POST /networks/create: a bridge network name (CheckDuplicate on: a name
 * taken gives ERR_CONFLICT) whose containers reach each other, with labels
 * (an object of strings; may be NULL). *id (may be NULL) gets its id,
 * malloc'd. Docker without a free address range for it gives ERR_INTERNAL
 * saying to widen default-address-pools. */
int docker_network_create(docker_client *c, const char *name, json_t *labels, char **id,
                          gb_err *err);
/* GET /networks/{name}: ERR_NOT_FOUND when absent. */
int docker_network_inspect(docker_client *c, const char *name, json_t **out, gb_err *err);
/* DELETE /networks/{name}. Absent is success; a running container on it
 * gives ERR_CONFLICT (Docker's "has active endpoints"). Containers that
 * are not running do not keep it: they fail to start until they are
 * connected to a network of that name again. */
int docker_network_remove(docker_client *c, const char *name, gb_err *err);
/* GET /networks?filters={"label":[label]}; label "k" or "k=v", NULL = all.
 * *out is the array of networks (empty when none). */
int docker_network_list(docker_client *c, const char *label, json_t **out, gb_err *err);
/* POST /networks/{name}/connect: container joins network, answering there
 * to aliases too. A container that is not running is only recorded as on
 * it, and joins when it starts. */
int docker_network_connect(docker_client *c, const char *network, const char *container,
                           const char *const *aliases, size_t naliases, gb_err *err);
/* POST /networks/{name}/disconnect. For a container that is not running
 * this only forgets the network in its config (even one Docker no longer
 * has); force also disconnects from a network Docker lost. */
int docker_network_disconnect(docker_client *c, const char *network, const char *container,
                              bool force, gb_err *err);

#endif
