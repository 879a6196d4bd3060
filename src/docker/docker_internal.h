/*
 * docker_internal.h - what the files of src/docker/ share and nobody else
 * sees: the transport (docker_transport.c) offers one way to send a request
 * and map its answer to a gb_err; the call files (docker_system.c,
 * docker_containers.c, docker_exec.c, ...) build Engine API paths and bodies
 * on top of it.
 *
 * A response body goes to a "sink", a curl write callback plus its context:
 * by default a capped growable buffer that is then parsed as JSON; logs and
 * exec plug in the demultiplexer of docker_stream.c instead, so output is
 * split into stdout and stderr as it arrives and never buffered twice; the
 * archive download plugs in a sink that writes to a file descriptor. A
 * request body is either JSON or, for the archive upload, a "source": a
 * curl read callback that streams it.
 */
#ifndef GPUBOX_DOCKER_INTERNAL_H
#define GPUBOX_DOCKER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "docker/docker.h"

/* Connecting to a local socket takes microseconds; a daemon that does not
 * accept within this is hung. */
#define DOCKER_CONNECT_TIMEOUT_S 5L
/* Total time for an ordinary call (inspect, list, create, start, remove). */
#define DOCKER_TIMEOUT_S 60L
/* docker_request's default: the generic entry point serves slow calls too
 * (commit, changes of a large container). */
#define DOCKER_LONG_TIMEOUT_S 600L
/* Largest response body buffered in memory. */
#define DOCKER_MAX_RESPONSE (64u * 1024 * 1024)

/* A growable byte buffer that refuses to grow past limit (sets overflow). The
 * data is always NUL-terminated so text can be handed out as a string. */
struct docker_buf {
    char *data;
    size_t len;
    size_t alloc;
    size_t limit;
    bool overflow;
};

/* Append n bytes; false (and overflow set) when the limit would be passed. */
bool docker_buf_append(struct docker_buf *b, const char *data, size_t n);

/* curl write callback whose userdata is a struct docker_buf. */
size_t docker_buf_sink(char *data, size_t size, size_t nmemb, void *userdata);

/* One request as a call file describes it to docker_send. Fields left zero
 * take the defaults: no body, no time limit, no stall guard. */
struct docker_req {
    const char *method; /* "GET", "POST", "PUT", "DELETE", "HEAD" */
    const char *path;   /* "/containers/x/json": the version prefix is added */
    json_t *body;       /* sent as application/json; or else */
    size_t (*source)(char *, size_t, size_t, void *); /* a streamed body (chunked) */
    void *source_ctx;
    const char *content_type;   /* of the streamed body */
    long timeout_ms;            /* the whole exchange; 0 = no limit */
    long stall_s;               /* give up when under 1 byte/s moves for this long; 0 = never */
    const char *const *headers; /* extra "Name: value" lines, NULL-terminated; may be NULL.
                                   Never logged: X-Registry-Auth carries a password */
    size_t (*sink)(char *, size_t, size_t, void *);
    void *sink_ctx;
    /* Another thread sets it to end the exchange: curl checks it about once
     * a second even while nothing arrives (a followed log). NULL: never. */
    const atomic_bool *cancel;
    long status;    /* out: the HTTP status, known as soon as the headers are */
    bool timed_out; /* out: timeout_ms (or the stall guard) ran out */
};

/* Send req. Returns 0 on any HTTP answer with req->status set; -1 when the
 * daemon could not be reached, the time ran out (req->timed_out), the sink
 * refused the body or the source failed (the caller knows its sink and
 * source, so it replaces the message with the reason). */
int docker_send(docker_client *c, struct docker_req *req, gb_err *err);

/* Send one request. body (may be NULL) is sent as JSON; the response body is
 * fed to sink(sink_ctx); timeout_s bounds the whole exchange (0 = none).
 * Returns 0 on any HTTP answer with *status set; -1 when the daemon could not
 * be reached, timed out, or the sink refused the body (the caller knows its
 * sink, so it replaces the message with the reason it refused). */
int docker_call_raw(docker_client *c, const char *method, const char *path, json_t *body,
                    long timeout_s, size_t (*sink)(char *, size_t, size_t, void *), void *sink_ctx,
                    long *status, gb_err *err);

/* docker_call_raw into a DOCKER_MAX_RESPONSE-capped buffer, then parse it:
 * *resp is the JSON body or NULL when empty or not JSON. */
int docker_call(docker_client *c, const char *method, const char *path, json_t *body,
                long timeout_s, long *status, json_t **resp, gb_err *err);

/* GET path within DOCKER_TIMEOUT_S and expect 200 with a JSON body, which
 * *out then owns; other answers become errors as docker_status_err makes
 * them, introduced by what_fmt ("inspecting container 'foo'"). */
int docker_get(docker_client *c, const char *path, json_t **out, gb_err *err, const char *what_fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* Turn a non-2xx answer into an error: 400 -> ERR_INVALID_PARAMS (Docker
 * refused a parameter), 404 -> ERR_NOT_FOUND, 409 -> ERR_CONFLICT, else
 * ERR_INTERNAL. The message is "<what>: <Docker's message>
 * (HTTP <status>)", what being printf-formatted. Always returns -1. */
int docker_status_err(long status, json_t *resp, gb_err *err, const char *what_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Docker's own "message" field of an error body, or "" when there is none. */
const char *docker_message(json_t *resp);

/* A new connection to the daemon, for a request whose answer turns into
 * a raw two-way stream (an exec's hijacked stdin and output): the fd, or
 * -1 with err set. */
int docker_connect_raw(docker_client *c, gb_err *err);
/* "/v1.41": what a raw request's path begins with. */
const char *docker_api_prefix(void);

/* Tell the client's change observer (docker_client_on_change) that
 * id_or_name may have changed state. */
void docker_note_change(docker_client *c, const char *id_or_name);
/* "/containers/<escaped id><rest>"; NULL when id is empty (ERR_INVALID_PARAMS). */
char *docker_container_path(const char *id, const char *rest, gb_err *err);

/* The multiplexed output of a container or exec without a TTY: frames of an
 * 8-byte header (stream type 0/1/2 = stdin/stdout/stderr, three zero bytes,
 * payload length as big-endian uint32) followed by the payload.
 * docker_demux_sink splits it into two capped buffers as bytes arrive, so no
 * frame boundary in a network read can confuse it (docker_stream.c). */
struct docker_demux {
    bool tty;           /* a TTY's output is unframed: all of it is stdout */
    bool truncate;      /* past a buffer's limit: drop the rest and set overflow,
                           rather than refuse the body */
    size_t drain_limit; /* with truncate: past this many bytes in all, drop
                           everything and set drain_exceeded (0 = never) */
    size_t total;       /* bytes received so far */
    bool drain_exceeded;
    unsigned char header[8];  /* the frame header being gathered */
    size_t header_len;        /* its bytes gathered so far */
    uint32_t frame_left;      /* payload bytes still due in the current frame */
    unsigned char stream;     /* the current frame's stream type */
    bool malformed;           /* a header made no sense; the rest is ignored */
    struct docker_buf out[2]; /* stdout (and stdin echoes), stderr */
    struct docker_buf head;   /* the first bytes as sent: an error body if any */
    /* In place of the buffers: each payload piece handed on as it comes
     * (stream 0 stdout, 1 stderr); false refuses the body (the followed
     * log's reader went away). NULL: the buffers. */
    bool (*emit)(void *ctx, int stream, const char *data, size_t n);
    void *emit_ctx;
};

/* Set up d with each stream capped at cap bytes; the first 4 KiB are also
 * kept raw in d->head. */
void docker_demux_init(struct docker_demux *d, size_t cap, bool truncate);
size_t docker_demux_sink(char *data, size_t size, size_t nmemb, void *userdata);
/* The stream ended in the middle of a frame or was not framed at all. */
bool docker_demux_broken(const struct docker_demux *d);
/* Docker's JSON error body among the first bytes (for a non-2xx answer). */
json_t *docker_demux_error_body(const struct docker_demux *d);
void docker_demux_free(struct docker_demux *d);

/* Docker's log stream cut into lines (docker_logs.c): the demultiplexer's
 * emit feeds it; each stream gathers its own line. */
struct docker_log_reader {
    docker_log_fn fn;
    void *ctx;
    struct docker_buf part[2]; /* the line being gathered, per stream */
    bool continued[2];         /* the last line handed on was a partial piece */
    char time[2][48];          /* the timestamp of the line being handed on */
    bool stopped;              /* fn asked to stop */
};
void docker_log_reader_init(struct docker_log_reader *r, docker_log_fn fn, void *ctx);
/* emit for struct docker_demux (ctx: the reader; stream 0 stdout, 1 stderr). */
bool docker_log_reader_feed(void *ctx, int stream, const char *data, size_t n);
/* Hand on the lines still gathering (the stream ended without a "\n"). */
bool docker_log_reader_flush(struct docker_log_reader *r);
void docker_log_reader_free(struct docker_log_reader *r);

/* Hand a buffer's bytes out as a malloc'd string ("" when empty). The
 * buffer no longer owns them. */
char *docker_buf_take(struct docker_buf *b);

/* What docker_exec.c shares with its watchdog (docker_exec_watch.c). */
/* What GET /exec/{eid}/json says of an exec. */
struct docker_exec_state {
    bool running;
    long pid;              /* on Docker's host; 0 = never started */
    long exit_code;        /* -1 while it runs or before it starts */
    char container_id[80]; /* the full id of its container */
};
int docker_exec_inspect(docker_client *c, const char *eid, struct docker_exec_state *st,
                        gb_err *err);

/* A thread that kills exec eid's process tree at deadline_ms (of
 * time_mono_ms; 0 = never) or when fired, whichever comes first. */
struct docker_exec_watch;
struct docker_exec_watch *docker_exec_watch_start(docker_client *c, const char *eid,
                                                  long deadline_ms, gb_err *err);
/* Kill exec eid's process tree now, on this thread, if it still runs
 * (the same checks as the watchdog's). */
int docker_exec_kill_tree(docker_client *c, const char *eid, gb_err *err);
/* The output passed the drain limit: kill now. */
void docker_exec_watch_fire(struct docker_exec_watch *w);
/* The stream ended: stand the watchdog down, wait for it and free it.
 * *killed says whether it killed the tree, *by_deadline whether the time
 * ran out (rather than a fire). -1 when killing failed (err says why). */
int docker_exec_watch_finish(struct docker_exec_watch *w, bool *killed, bool *by_deadline,
                             gb_err *err);

/* Percent-encode s for a URL; characters in keep (besides the unreserved
 * ones) stay as they are, so "/" can be kept in image references. */
char *docker_escape(const char *s, const char *keep);

#endif
