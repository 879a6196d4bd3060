/*
 * docker_events.c - Docker's event stream, containers only: GET /events
 * answers 200 at once and then sends one JSON object a line for as long as
 * the connection stays open:
 *   {"Type":"container","Action":"die","Actor":{"ID":"...",
 *    "Attributes":{"name":"foo-1","exitCode":"0",...}},"time":...}
 * With since, Docker first sends the events it still keeps from that time
 * on (its last few hundred), then the new ones as they come.
 *
 * The sink cuts the stream into lines as bytes arrive and hands each
 * container event to the caller; an error answer is gathered whole.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* An event is short; a longer line is not Docker's. */
#define DOCKER_EVENT_LINE_MAX (256u * 1024)

struct docker_event_sink {
    struct docker_req *req;
    docker_event_fn fn;
    void *ctx;
    struct docker_buf line;
    bool stopped;
};

static void docker_event_line(struct docker_event_sink *s)
{
    _cleanup_json_ json_t *j = json_loadb(s->line.data ? s->line.data : "", s->line.len, 0, NULL);
    s->line.len = 0;
    const char *type = json_string_value(json_object_get(j, "Type"));
    if (!type || strcmp(type, "container") != 0)
        return;
    json_t *actor = json_object_get(j, "Actor"), *attrs = json_object_get(actor, "Attributes");
    docker_container_event ev = {
        .action = json_string_value(json_object_get(j, "Action")),
        .id = json_string_value(json_object_get(actor, "ID")),
        .name = json_string_value(json_object_get(attrs, "name")),
        .old_name = json_string_value(json_object_get(attrs, "oldName")),
    };
    if (ev.old_name && ev.old_name[0] == '/')
        ev.old_name++;
    if (ev.action && ev.id && !s->fn(s->ctx, &ev))
        s->stopped = true;
}

static size_t docker_event_sink_fn(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_event_sink *s = userdata;
    size_t n = size * nmemb;
    if (s->req->status != 200) /* an error answer: keep it whole */
        return docker_buf_append(&s->line, data, n) ? n : 0;
    for (size_t i = 0; i < n && !s->stopped; i++) {
        if (data[i] == '\n') {
            docker_event_line(s);
            continue;
        }
        if (!docker_buf_append(&s->line, data + i, 1))
            return 0;
    }
    return s->stopped ? 0 : n;
}

int docker_container_events(docker_client *c, const char *label, int64_t since,
                            const atomic_bool *cancel, docker_event_fn fn, void *ctx, gb_err *err)
{
    _cleanup_json_ json_t *filters = json_pack("{s:[s]}", "type", "container");
    if (label && *label)
        json_object_set_new(filters, "label", json_pack("[s]", label));
    _cleanup_free_ char *text = filters ? json_dumps(filters, JSON_COMPACT) : NULL;
    if (!text)
        return err_set(err, ERR_INTERNAL, "following Docker's events: the label is not UTF-8");
    _cleanup_free_ char *esc = docker_escape(text, NULL);
    char since_arg[40] = "";
    if (since > 0)
        snprintf(since_arg, sizeof(since_arg), "&since=%lld", (long long)since);
    _cleanup_free_ char *path = xasprintf("/events?filters=%s%s", esc, since_arg);
    struct docker_req req = {.method = "GET", .path = path, .cancel = cancel};
    struct docker_event_sink s = {
        .req = &req, .fn = fn, .ctx = ctx, .line = {.limit = DOCKER_EVENT_LINE_MAX}};
    req.sink = docker_event_sink_fn;
    req.sink_ctx = &s;
    int rc = docker_send(c, &req, err);
    _cleanup_json_ json_t *body =
        req.status != 200 ? json_loadb(s.line.data ? s.line.data : "", s.line.len, 0, NULL) : NULL;
    free(s.line.data);
    if (s.stopped || (cancel && atomic_load(cancel)))
        return 0;
    if (rc < 0)
        return err_prefix(err, "following Docker's events");
    if (req.status != 200)
        return docker_status_err(req.status, body, err, "following Docker's events");
    return 0;
}
