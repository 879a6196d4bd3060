/*
 * fleet_http.c - requests to other nodes: a change forwarded to the node
 * that owns the name, or a read asked of every node at once (curl's multi
 * interface, so a list costs the slowest node's time, not the sum).
 *
 * A forwarded request carries FLEET_FORWARDED_HEADER (so the node that gets
 * it answers alone and never forwards it again), FLEET_AUTH_HEADER (the
 * proof that this node sent it: fleet_auth.h; without it the other node
 * refuses the first header) and the caller's own Authorization header, so
 * the owner checks the caller as if asked directly. The answer's status,
 * content type and body are passed back unchanged.
 */
#include "util/xalloc.h"
#include "fleet/fleet_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet/fleet_auth.h"
#include "util/cleanup.h"

/* A node that does not take the connection within this is unreachable. */
#define FLEET_CONNECT_TIMEOUT_MS 3000
/* An answer larger than this is cut off as an error (lists of 10 000 sets
 * stay well under it). */
#define FLEET_ANSWER_MAX (256u * 1024 * 1024)

struct exchange {
    fleet_answer *answer;
    struct curl_slist *headers;
    char url[FLEET_URL_MAX + 2048];
    bool too_large;
    CURL *h;
    int (*sink)(void *ctx, const void *data, size_t n); /* fleet_send_to_sink: a 200's body */
    void *sink_ctx;
    _Atomic uint64_t *bytes;
    int status; /* known once the body begins; 0 before */
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct exchange *x = arg;
    size_t len = size * n;
    fleet_answer *a = x->answer;
    if (x->h && !x->status) {
        long status = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        x->status = (int)status;
    }
    if (x->h && x->status == 200 && x->sink) {
        if (x->sink(x->sink_ctx, data, len) < 0)
            return 0; /* the receiver gave up: curl ends the transfer */
        if (x->bytes)
            *x->bytes += len;
        return len;
    }
    if (a->body_len + len > FLEET_ANSWER_MAX) {
        x->too_large = true;
        return 0;
    }
    a->body = xrealloc(a->body, a->body_len + len + 1);
    memcpy(a->body + a->body_len, data, len);
    a->body_len += len;
    a->body[a->body_len] = '\0';
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    struct exchange *x = arg;
    size_t len = size * n;
    static const char ct[] = "content-type:";
    if (len > sizeof(ct) - 1 && strncasecmp(data, ct, sizeof(ct) - 1) == 0) {
        const char *v = data + sizeof(ct) - 1;
        size_t vlen = len - (sizeof(ct) - 1);
        while (vlen && (*v == ' ' || *v == '\t'))
            v++, vlen--;
        while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
            vlen--;
        snprintf(x->answer->content_type, sizeof(x->answer->content_type), "%.*s", (int)vlen, v);
    }
    return len;
}

static curl_pool *fleet_curls(fleet *f)
{
    pthread_mutex_lock(&f->lock);
    if (!f->curls)
        f->curls = curl_pool_new(16);
    curl_pool *p = f->curls;
    pthread_mutex_unlock(&f->lock);
    return p;
}

static void exchange_setup(fleet *f, CURL *h, struct exchange *x, const char *advertise,
                           const fleet_request *req)
{
    snprintf(x->url, sizeof(x->url), "%s%s", advertise, req->path_query);
    char line[FLEET_NODE_MAX + 64];
    snprintf(line, sizeof(line), FLEET_FORWARDED_HEADER ": %s", f->node);
    x->headers = curl_slist_append(NULL, line);
    char proof[FLEET_AUTH_VALUE_MAX];
    fleet_auth_sign(f->secret, f->secret_len, f->node, (int64_t)time(NULL), req, proof);
    char proof_line[sizeof(FLEET_AUTH_HEADER) + 2 + FLEET_AUTH_VALUE_MAX];
    snprintf(proof_line, sizeof(proof_line), FLEET_AUTH_HEADER ": %s", proof);
    x->headers = curl_slist_append(x->headers, proof_line);
    if (req->authorization) {
        _cleanup_free_ char *auth = xasprintf("Authorization: %s", req->authorization);
        x->headers = curl_slist_append(x->headers, auth);
    }
    x->headers = curl_slist_append(x->headers, "Content-Type: application/json");
    x->headers = curl_slist_append(x->headers, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, x->url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)FLEET_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    if (req->body_len) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (strcmp(req->method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
}

static void exchange_finish(CURL *h, struct exchange *x, CURLcode rc, const char *advertise)
{
    fleet_answer *a = x->answer;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK) {
        a->status = (int)status;
    } else {
        a->status = 0;
        free(a->body);
        a->body = NULL;
        a->body_len = 0;
        err_set(&a->err, ERR_NODE_UNAVAILABLE, "node at %s did not answer: %s", advertise,
                x->too_large ? "its answer is over 256 MiB" : curl_easy_strerror(rc));
    }
    curl_slist_free_all(x->headers);
    x->headers = NULL;
}

int fleet_send(fleet *f, const char *advertise, const fleet_request *req, fleet_answer *out,
               gb_err *err)
{
    *out = (fleet_answer){.err = GB_ERR_INIT};
    curl_pool *pool = fleet_curls(f);
    CURL *h = curl_pool_borrow(pool);
    if (!h)
        return err_set(err, ERR_INTERNAL, "curl_easy_init failed");
    struct exchange x = {.answer = out};
    exchange_setup(f, h, &x, advertise, req);
    CURLcode rc = curl_easy_perform(h);
    exchange_finish(h, &x, rc, advertise);
    curl_pool_give_back(pool, h);
    if (out->status == 0) {
        *err = out->err;
        return -1;
    }
    return 0;
}

static int send_streamed(fleet *f, const char *advertise, const fleet_request *req,
                         struct exchange *x, fleet_answer *out, gb_err *err)
{
    *out = (fleet_answer){.err = GB_ERR_INIT};
    /* A reader that is gone gives EPIPE here, never the signal. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    CURL *h = curl_easy_init();
    if (!h)
        return err_set(err, ERR_INTERNAL, "curl_easy_init failed");
    x->answer = out;
    x->h = h;
    exchange_setup(f, h, x, advertise, req);
    /* A stream of data: larger reads, fewer calls (curl's default is 16 KiB). */
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
    CURLcode rc = curl_easy_perform(h);
    exchange_finish(h, x, rc, advertise);
    curl_easy_cleanup(h);
    if (out->status == 0) {
        *err = out->err;
        return -1;
    }
    return 0;
}

int fleet_send_to_sink(fleet *f, const char *advertise, const fleet_request *req,
                       int (*sink)(void *ctx, const void *data, size_t n), void *ctx,
                       _Atomic uint64_t *bytes, fleet_answer *out, gb_err *err)
{
    struct exchange x = {.sink = sink, .sink_ctx = ctx, .bytes = bytes};
    return send_streamed(f, advertise, req, &x, out, err);
}

static CURLM *multi_borrow(fleet *f)
{
    pthread_mutex_lock(&f->lock);
    CURLM *m = f->n_idle_multis ? f->idle_multis[--f->n_idle_multis] : NULL;
    pthread_mutex_unlock(&f->lock);
    return m ? m : curl_multi_init();
}

static void multi_give_back(fleet *f, CURLM *m)
{
    pthread_mutex_lock(&f->lock);
    if (f->n_idle_multis < ARRAY_SIZE(f->idle_multis)) {
        f->idle_multis[f->n_idle_multis++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&f->lock);
    if (m)
        curl_multi_cleanup(m);
}

void fleet_http_free(fleet *f)
{
    for (size_t i = 0; i < f->n_idle_multis; i++)
        curl_multi_cleanup(f->idle_multis[i]);
    f->n_idle_multis = 0;
    curl_pool_free(f->curls);
    f->curls = NULL;
}

void fleet_send_many(fleet *f, const char *const *advertise, size_t n, const fleet_request *req,
                     fleet_answer *answers)
{
    if (n == 0)
        return;
    curl_pool *pool = fleet_curls(f);
    CURLM *multi = multi_borrow(f);
    CURL **handles = xcalloc(n, sizeof(*handles));
    struct exchange *xs = xcalloc(n, sizeof(*xs));
    for (size_t i = 0; i < n; i++) {
        answers[i] = (fleet_answer){.err = GB_ERR_INIT};
        handles[i] = curl_pool_borrow(pool);
        xs[i].answer = &answers[i];
        if (!handles[i]) {
            err_set(&answers[i].err, ERR_INTERNAL, "curl_easy_init failed");
            continue;
        }
        exchange_setup(f, handles[i], &xs[i], advertise[i], req);
        curl_easy_setopt(handles[i], CURLOPT_PRIVATE, &xs[i]);
        curl_multi_add_handle(multi, handles[i]);
    }
    int running = 0;
    do {
        curl_multi_perform(multi, &running);
        if (running)
            curl_multi_poll(multi, NULL, 0, 200, NULL);
    } while (running);
    CURLMsg *msg;
    int left = 0;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        for (size_t i = 0; i < n; i++)
            if (handles[i] == msg->easy_handle)
                exchange_finish(handles[i], &xs[i], msg->data.result, advertise[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (!handles[i])
            continue;
        curl_multi_remove_handle(multi, handles[i]);
        curl_slist_free_all(xs[i].headers); /* when it never finished */
        curl_pool_give_back(pool, handles[i]);
    }
    multi_give_back(f, multi);
    free(handles);
    free(xs);
}

void fleet_answer_clear(fleet_answer *a)
{
    free(a->body);
    *a = (fleet_answer){.err = GB_ERR_INIT};
}
