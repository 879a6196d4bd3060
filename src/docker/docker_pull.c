/*
 * docker_pull.c - pulling an image from a registry, and listing images.
 *
 * POST /images/create?fromImage=REPO&tag=TAG answers 200 at once and then
 * streams one JSON object a line as the pull goes:
 *   {"status":"Pulling from team/app","id":"v1"}
 *   {"status":"Downloading","progressDetail":{"current":5,"total":9},"id":"a1b2"}
 *   {"status":"Pull complete","progressDetail":{},"id":"a1b2"}
 *   {"errorDetail":{"message":"..."},"error":"..."}
 * A failure found before the stream starts (no such repository, the
 * registry refused) is an ordinary error answer (404, 500) with a message;
 * one found later is an "error" line inside the 200 stream. Both end the
 * same way here: ERR_REGISTRY_AUTH when the registry wants (other)
 * credentials, else ERR_PULL_FAILED, with Docker's words.
 *
 * The sink cuts the stream into lines as bytes arrive (a line may span two
 * network reads) and hands each parsed line to the caller's function; an
 * error answer is gathered whole instead. Credentials travel only in the
 * X-Registry-Auth header, which nothing logs.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/cleanup.h"

/* Nothing moving for this long (a registry that stopped sending) ends it. */
#define DOCKER_PULL_STALL_S 600L
/* A progress line is short; a longer one is not Docker's. */
#define DOCKER_PULL_LINE_MAX (64u * 1024)

struct docker_pull_sink {
    struct docker_req *req; /* its status tells a stream from an error answer */
    docker_pull_fn fn;
    void *ctx;
    struct docker_buf line; /* the line being gathered, or the error answer */
    char error[400];        /* the stream's first error line */
    bool stopped;           /* fn asked to stop */
};

static void docker_pull_line(struct docker_pull_sink *s)
{
    _cleanup_json_ json_t *j = json_loadb(s->line.data ? s->line.data : "", s->line.len, 0, NULL);
    s->line.len = 0;
    if (!json_is_object(j))
        return;
    const char *error = json_string_value(json_object_get(j, "error"));
    if (!error)
        error = json_string_value(json_object_get(json_object_get(j, "errorDetail"), "message"));
    if (error) {
        if (!s->error[0])
            snprintf(s->error, sizeof(s->error), "%s", *error ? error : "no message given");
        return;
    }
    json_t *detail = json_object_get(j, "progressDetail");
    json_t *cur = json_object_get(detail, "current"), *tot = json_object_get(detail, "total");
    docker_pull_event ev = {
        .status = json_string_value(json_object_get(j, "status")),
        .id = json_string_value(json_object_get(j, "id")),
        .current = json_is_integer(cur) ? (long long)json_integer_value(cur) : -1,
        .total = json_is_integer(tot) ? (long long)json_integer_value(tot) : -1,
    };
    if (ev.status && s->fn && s->fn(s->ctx, &ev) != 0)
        s->stopped = true;
}

static size_t docker_pull_sink_fn(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_pull_sink *s = userdata;
    size_t n = size * nmemb;
    if (s->req->status != 200) /* an error answer: keep it whole */
        return docker_buf_append(&s->line, data, n) ? n : 0;
    for (size_t i = 0; i < n && !s->stopped; i++) {
        if (data[i] == '\n') {
            docker_pull_line(s);
            continue;
        }
        if (!docker_buf_append(&s->line, data + i, 1))
            return 0;
    }
    return s->stopped ? 0 : n;
}

/* Does Docker's message say the registry wants (other) credentials? */
static bool docker_pull_auth_refused(const char *msg)
{
    static const char *const words[] = {"unauthorized",       "authentication required",
                                        "no basic auth",      "denied",
                                        "incorrect username", "401 Unauthorized"};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (strstr(msg, words[i]))
            return true;
    return false;
}

static int docker_pull_fail(const char *ref, const char *msg, long status, gb_err *err)
{
    char where[48] = "";
    if (status && status != 200)
        snprintf(where, sizeof(where), " (Docker answered HTTP %ld)", status);
    if (docker_pull_auth_refused(msg))
        return err_set(err, ERR_REGISTRY_AUTH,
                       "pulling %s: the registry refused: %s%s; give registryAuth (username and "
                       "password) or configure the registry's credentials on gpuboxd "
                       "(--registry-auth-file)",
                       ref, msg, where);
    return err_set(err, ERR_PULL_FAILED, "pulling %s failed: %s%s", ref, msg, where);
}

int docker_image_pull(docker_client *c, const char *ref, const char *registry_auth,
                      docker_pull_fn fn, void *ctx, gb_err *err)
{
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    /* Docker's tag parameter takes a digest too (a digest wins over a tag). */
    const char *tag = r.digest[0] ? r.digest : r.tag[0] ? r.tag : "latest";
    _cleanup_free_ char *r_esc = docker_escape(r.repo, NULL);
    _cleanup_free_ char *t_esc = docker_escape(tag, NULL);
    _cleanup_free_ char *path = xasprintf("/images/create?fromImage=%s&tag=%s", r_esc, t_esc);
    _cleanup_free_ char *header =
        registry_auth ? xasprintf("X-Registry-Auth: %s", registry_auth) : NULL;
    const char *headers[] = {header, NULL};
    struct docker_req req = {.method = "POST",
                             .path = path,
                             .stall_s = DOCKER_PULL_STALL_S,
                             .headers = header ? headers : NULL,
                             .sink = docker_pull_sink_fn};
    struct docker_pull_sink s = {
        .req = &req, .fn = fn, .ctx = ctx, .line = {.limit = DOCKER_PULL_LINE_MAX}};
    req.sink_ctx = &s;
    int rc = docker_send(c, &req, err);
    if (header) {
        explicit_bzero(header, strlen(header));
    }
    if (rc == 0 && req.status == 200 && s.line.len)
        docker_pull_line(&s); /* a last line without its newline */
    _cleanup_json_ json_t *body =
        req.status != 200 ? json_loadb(s.line.data ? s.line.data : "", s.line.len, 0, NULL) : NULL;
    free(s.line.data);
    if (s.stopped)
        return err_set(err, ERR_PULL_FAILED, "pulling %s: stopped before it finished", ref);
    if (rc < 0 && s.line.overflow)
        return err_set(err, ERR_PULL_FAILED, "pulling %s: Docker sent a line longer than %u bytes",
                       ref, DOCKER_PULL_LINE_MAX);
    if (rc < 0)
        return err_prefix(err, "pulling %s", ref);
    if (req.status != 200) {
        const char *msg = docker_message(body);
        return docker_pull_fail(ref, *msg ? msg : "no message given", req.status, err);
    }
    if (s.error[0])
        return docker_pull_fail(ref, s.error, 0, err);
    return 0;
}

char *docker_registry_auth(const char *username, const char *password, const char *server)
{
    _cleanup_json_ json_t *j =
        json_pack("{s:s, s:s, s:s}", "username", username ? username : "", "password",
                  password ? password : "", "serveraddress", server ? server : "");
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!text)
        return NULL;
    char *enc = base64_encode(text, strlen(text));
    explicit_bzero(text, strlen(text));
    free(text);
    /* base64url, as Docker decodes it: '-' and '_' for '+' and '/'. */
    for (char *p = enc; p && *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return enc;
}

int docker_image_list(docker_client *c, json_t **out, gb_err *err)
{
    if (docker_get(c, "/images/json", out, err, "listing images") < 0)
        return -1;
    if (!json_is_array(*out)) {
        json_decref(*out);
        *out = NULL;
        return err_set(err, ERR_INTERNAL, "listing images: Docker's answer is not a list");
    }
    return 0;
}
