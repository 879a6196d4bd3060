/*
 * docker_transport.c - the client object, sending one request, and mapping
 * Docker's answers to gb_err.
 *
 * A docker_client holds the host as the user gave it, how to reach it (a
 * unix socket path, or an http://host:port base URL for tcp://) and a pool
 * of idle curl handles (util/curl_pool.h says why a pool): a call borrows a
 * handle, runs with no lock held and gives it back, so the next call reuses
 * its connection. At most DOCKER_POOL_MAX idle connections stay open.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/cleanup.h"
#include "util/curl_pool.h"
#include "util/log.h"

#define DOCKER_DEFAULT_HOST "unix:///var/run/docker.sock"
#define DOCKER_POOL_MAX 8

struct docker_client {
    char *host;            /* as configured: unix:///path or tcp://host:port */
    char *socket_path;     /* the unix socket; NULL for tcp */
    char *base_url;        /* "http://localhost" (unix) or "http://host:port" */
    curl_pool *pool;       /* idle handles, at most DOCKER_POOL_MAX */
    atomic_ulong connects; /* connections opened over the client's life */
    docker_change_fn on_change;
    void *on_change_ctx;
};

/* curl_global_init must run once before any handle exists, whatever thread
 * makes the first client. */
static pthread_once_t docker_curl_once = PTHREAD_ONCE_INIT;
static CURLcode docker_curl_init_rc;

static void docker_curl_init(void)
{
    docker_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int docker_parse_host(docker_client *c, const char *host, gb_err *err)
{
    if (strncmp(host, "unix://", 7) == 0) {
        const char *path = host + 7;
        if (path[0] != '/')
            return err_set(err, ERR_INVALID_PARAMS,
                           "Docker host '%s': the socket path must be absolute, as in %s", host,
                           DOCKER_DEFAULT_HOST);
        if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
            return err_set(err, ERR_INVALID_PARAMS,
                           "Docker host '%s': a unix socket path must be shorter than %zu bytes",
                           host, sizeof(((struct sockaddr_un *)NULL)->sun_path));
        c->socket_path = xstrdup(path);
        c->base_url = xstrdup("http://localhost");
    } else if (strncmp(host, "tcp://", 6) == 0) {
        const char *addr = host + 6;
        size_t n = strcspn(addr, "/");
        if (n == 0 || (addr[n] != '\0' && strcmp(addr + n, "/") != 0))
            return err_set(err, ERR_INVALID_PARAMS,
                           "Docker host '%s': expected tcp://host:port with nothing after the port",
                           host);
        c->base_url = xasprintf("http://%.*s", (int)n, addr);
    } else {
        return err_set(err, ERR_INVALID_PARAMS,
                       "Docker host '%s' is not supported; use unix:///path/to/docker.sock or "
                       "tcp://host:port (ssh:// and TLS are not supported)",
                       host);
    }
    return 0;
}

docker_client *docker_client_new(const char *host, gb_err *err)
{
    pthread_once(&docker_curl_once, docker_curl_init);
    if (docker_curl_init_rc != CURLE_OK) {
        err_set(err, ERR_INTERNAL, "cannot initialize libcurl: %s",
                curl_easy_strerror(docker_curl_init_rc));
        return NULL;
    }
    if (!host || !*host) {
        const char *env = getenv("DOCKER_HOST");
        host = env && *env ? env : DOCKER_DEFAULT_HOST;
    }
    docker_client *c = xcalloc(1, sizeof(*c));
    c->pool = curl_pool_new(DOCKER_POOL_MAX);
    c->host = xstrdup(host);
    if (docker_parse_host(c, host, err) < 0) {
        docker_client_free(c);
        return NULL;
    }
    return c;
}

void docker_client_free(docker_client *c)
{
    if (!c)
        return;
    curl_pool_free(c->pool);
    free(c->host);
    free(c->socket_path);
    free(c->base_url);
    free(c);
}

const char *docker_client_host(const docker_client *c)
{
    return c->host;
}

unsigned long docker_client_connects(const docker_client *c)
{
    return atomic_load(&c->connects);
}

void docker_client_on_change(docker_client *c, docker_change_fn fn, void *ctx)
{
    c->on_change = fn;
    c->on_change_ctx = ctx;
}

void docker_note_change(docker_client *c, const char *id_or_name)
{
    if (c->on_change && id_or_name && *id_or_name)
        c->on_change(c->on_change_ctx, id_or_name);
}

int docker_connect_raw(docker_client *c, gb_err *err)
{
    if (c->socket_path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return err_set(err, ERR_INTERNAL, "cannot reach Docker at %s: %s", c->host,
                           strerror(e));
        }
        atomic_fetch_add(&c->connects, 1);
        return fd;
    }
    /* tcp: base_url is "http://host:port" */
    const char *hp = c->base_url + strlen("http://");
    const char *colon = strrchr(hp, ':');
    if (!colon)
        return err_set(err, ERR_INVALID_PARAMS, "Docker host %s names no port", c->host);
    _cleanup_free_ char *host = xstrndup(hp, (size_t)(colon - hp));
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0)
        return err_set(err, ERR_INTERNAL, "cannot resolve Docker host %s: %s", c->host,
                       gai_strerror(rc));
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return err_set(err, ERR_INTERNAL, "cannot reach Docker at %s", c->host);
    atomic_fetch_add(&c->connects, 1);
    return fd;
}

const char *docker_api_prefix(void)
{
    return "/" DOCKER_API_VERSION;
}

/* Options that depend on the method: GET, POST (always with a body, empty if
 * none, so curl does not wait for one on stdin), HEAD, or any other verb
 * (DELETE, PUT) sent as a custom request. */
static void docker_set_method(CURL *h, const char *method, const char *payload)
{
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        return;
    }
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        return;
    }
    if (payload || strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload ? payload : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, payload ? (long)strlen(payload) : 0L);
    }
    if (strcmp(method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

/* curl words a failed unix socket connect as "Failed to connect to localhost
 * port 80", which sends a reader the wrong way; connecting once more here
 * gives the errno that names the real cause (no such file, permission). */
static const char *docker_unix_reason(const char *socket_path, char *buf, size_t size)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    int saved = errno;
    close(fd);
    if (rc == 0)
        return NULL; /* it answers now: curl's own words are all we have */
    snprintf(buf, size, "connecting to %s: %s", socket_path, strerror(saved));
    return buf;
}

static int docker_transfer_err(docker_client *c, CURLcode rc, const char *errbuf,
                               const char *method, const char *path, long timeout_ms, gb_err *err)
{
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    char unix_why[256];
    if (rc == CURLE_COULDNT_CONNECT && c->socket_path) {
        const char *reason = docker_unix_reason(c->socket_path, unix_why, sizeof(unix_why));
        why = reason ? reason : why;
    }
    switch (rc) {
    case CURLE_WRITE_ERROR:
        return err_set(err, ERR_INTERNAL, "reading Docker's answer to %s %s failed: %s", method,
                       path, why);
    case CURLE_READ_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
        return err_set(err, ERR_INTERNAL, "sending the body of %s %s failed: %s", method, path,
                       why);
    case CURLE_OUT_OF_MEMORY:
        return err_set(err, ERR_INTERNAL, "%s %s: out of memory", method, path);
    case CURLE_OPERATION_TIMEDOUT:
        if (timeout_ms == 0) /* no total limit: the stall guard fired */
            return err_set(err, ERR_DOCKER_UNAVAILABLE,
                           "Docker at %s stopped moving data for %s %s (%s); is dockerd hung?",
                           c->host, method, path, why);
        return err_set(err, ERR_DOCKER_UNAVAILABLE,
                       "Docker at %s did not answer %s %s within %ld s (%s); is dockerd hung?",
                       c->host, method, path, (timeout_ms + 999) / 1000, why);
    default:
        return err_set(err, ERR_DOCKER_UNAVAILABLE,
                       "cannot reach Docker at %s: %s; is dockerd running?", c->host, why);
    }
}

/* curl header callback: remember the status of the last status line, so a
 * sink can tell an error body from the stream it asked for while the body is
 * still arriving. */
static size_t docker_header_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct docker_req *req = userdata;
    size_t n = size * nmemb;
    char line[64];
    if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
        snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1),
                 data);
        long code = 0;
        if (sscanf(line, "HTTP/%*s %ld", &code) == 1)
            req->status = code;
    }
    return n;
}

/* curl's progress callback, about once a second even while nothing moves:
 * a non-zero answer ends the transfer (CURLE_ABORTED_BY_CALLBACK). */
static int docker_cancel_check(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                               curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load((const atomic_bool *)ctx) ? 1 : 0;
}

/* Options for a streamed upload: curl pulls the body from the source
 * callback and sends it chunked, as its length is not known up front. */
static void docker_set_upload(CURL *h, const struct docker_req *req)
{
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, req->source);
    curl_easy_setopt(h, CURLOPT_READDATA, req->source_ctx);
    if (strcmp(req->method, "PUT") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
}

int docker_send(docker_client *c, struct docker_req *req, gb_err *err)
{
    req->status = 0;
    req->timed_out = false;
    const char *method = req->method, *path = req->path;
    _cleanup_free_ char *url = xasprintf("%s/%s%s", c->base_url, DOCKER_API_VERSION, path);
    _cleanup_free_ char *payload = NULL;
    if (req->body && !(payload = json_dumps(req->body, JSON_COMPACT)))
        return err_set(err, ERR_INTERNAL, "%s %s: cannot serialize the request body", method, path);
    /* With no body, "Content-Type:" stops curl from sending its default
     * form type on a POST, which calls such as /commit refuse. */
    char content_type[128] = "Content-Type:";
    if (payload || req->content_type)
        snprintf(content_type, sizeof(content_type), "Content-Type: %s",
                 payload ? "application/json" : req->content_type);

    /* "Expect:" stops curl from pausing for a 100-continue on larger bodies. */
    struct curl_slist *headers = curl_slist_append(NULL, "Expect:");
    struct curl_slist *with_type = headers ? curl_slist_append(headers, content_type) : NULL;
    for (size_t i = 0; with_type && req->headers && req->headers[i]; i++)
        with_type = curl_slist_append(headers, req->headers[i]);
    CURL *h = with_type ? curl_pool_borrow(c->pool) : NULL;
    if (!h) {
        curl_slist_free_all(headers);
        return err_set(err, ERR_INTERNAL, "%s %s: out of memory", method, path);
    }

    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (c->socket_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* http_proxy must never see Docker calls */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, DOCKER_CONNECT_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    if (req->stall_s > 0) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, req->stall_s);
    }
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, docker_header_sink);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, req);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, req->sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, req->sink_ctx);
    if (req->cancel) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, docker_cancel_check);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)req->cancel);
    }
    if (req->source)
        docker_set_upload(h, req);
    else
        docker_set_method(h, method, payload);

    CURLcode rc = curl_easy_perform(h);
    long connects = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    atomic_fetch_add(&c->connects, (unsigned long)connects);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &req->status);
    curl_pool_give_back(c->pool, h);
    curl_slist_free_all(headers);

    if (rc != CURLE_OK) {
        req->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
        return docker_transfer_err(c, rc, errbuf, method, path, req->timeout_ms, err);
    }
    log_debug("docker %s %s -> %ld", method, path, req->status);
    return 0;
}

int docker_call_raw(docker_client *c, const char *method, const char *path, json_t *body,
                    long timeout_s, size_t (*sink)(char *, size_t, size_t, void *), void *sink_ctx,
                    long *status, gb_err *err)
{
    struct docker_req req = {.method = method,
                             .path = path,
                             .body = body,
                             .timeout_ms = timeout_s * 1000,
                             .sink = sink,
                             .sink_ctx = sink_ctx};
    int rc = docker_send(c, &req, err);
    *status = req.status;
    return rc;
}

bool docker_buf_append(struct docker_buf *b, const char *data, size_t n)
{
    if (n > b->limit - b->len) {
        b->overflow = true;
        return false;
    }
    if (b->len + n + 1 > b->alloc) {
        size_t want = b->alloc ? b->alloc : 4096;
        while (want < b->len + n + 1)
            want *= 2;
        char *grown = xrealloc(b->data, want);
        b->data = grown;
        b->alloc = want;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

size_t docker_buf_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    return docker_buf_append(userdata, data, size * nmemb) ? size * nmemb : 0;
}

int docker_call(docker_client *c, const char *method, const char *path, json_t *body,
                long timeout_s, long *status, json_t **resp, gb_err *err)
{
    *resp = NULL;
    struct docker_buf buf = {.limit = DOCKER_MAX_RESPONSE};
    int rc = docker_call_raw(c, method, path, body, timeout_s, docker_buf_sink, &buf, status, err);
    if (rc < 0 && buf.overflow)
        err_set(err, ERR_INTERNAL,
                "Docker's answer to %s %s is larger than %u MiB; refusing to hold it in memory",
                method, path, DOCKER_MAX_RESPONSE >> 20);
    if (rc == 0 && buf.len > 0)
        *resp = json_loadb(buf.data, buf.len, 0, NULL);
    free(buf.data);
    return rc;
}

int docker_request_timeout(docker_client *c, const char *method, const char *path, json_t *body,
                           long timeout_s, long *status, json_t **resp, gb_err *err)
{
    return docker_call(c, method, path, body, timeout_s, status, resp, err);
}

int docker_request(docker_client *c, const char *method, const char *path, json_t *body,
                   long *status, json_t **resp, gb_err *err)
{
    return docker_call(c, method, path, body, DOCKER_LONG_TIMEOUT_S, status, resp, err);
}

int docker_get(docker_client *c, const char *path, json_t **out, gb_err *err, const char *what_fmt,
               ...)
{
    *out = NULL;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "GET", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return -1;
    char what[256];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof(what), what_fmt, ap);
    va_end(ap);
    if (status != 200)
        return docker_status_err(status, resp, err, "%s", what);
    if (!resp)
        return err_set(err, ERR_INTERNAL, "%s: Docker's answer is not JSON", what);
    *out = steal_ptr(&resp);
    return 0;
}

const char *docker_message(json_t *resp)
{
    const char *msg = json_string_value(json_object_get(resp, "message"));
    return msg ? msg : "";
}

int docker_status_err(long status, json_t *resp, gb_err *err, const char *what_fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof(what), what_fmt, ap);
    va_end(ap);
    int code = status == 400   ? ERR_INVALID_PARAMS
               : status == 404 ? ERR_NOT_FOUND
               : status == 409 ? ERR_CONFLICT
                               : ERR_INTERNAL;
    const char *msg = docker_message(resp);
    return err_set(err, code, "%s: %s (Docker answered HTTP %ld)", what,
                   *msg ? msg : "no message given", status);
}

char *docker_escape(const char *s, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = xmalloc(3 * strlen(s) + 1);
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep && strchr(keep, *p));
        if (plain) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
