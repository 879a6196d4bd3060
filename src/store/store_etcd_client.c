/*
 * store_etcd_client.c - talking to etcd's v3 JSON gateway for the etcd store
 * backend: the URL, the endpoints and failover between them, a pool of curl
 * handles, authentication, and etcd's errors as gb_err.
 *
 * URL: etcd://host:port[,host:port...][/key/prefix][?option=value&...]
 * (docs/store.md lists the options). The client keeps:
 *   - endpoints[] ("host:port", as typed) and base_urls[] ("http://host:port",
 *     or https:// when a CA or client certificate is given);
 *   - current: the endpoint that answered last. Calls start there and move
 *     on to the next only when it cannot be reached, so a dead first
 *     endpoint costs one failed connect once, not on every call;
 *   - a pool of idle curl handles (util/curl_pool.h), as the Docker client
 *     keeps one: a call borrows a handle, runs without any lock held and
 *     gives it back, so the next call reuses its connection;
 *   - the auth token, when the URL names a user, fetched on first use and
 *     again when etcd says it expired.
 *
 * Failover never repeats a write: a request that reached an endpoint and got
 * no answer may have been applied there, so it fails with a message saying
 * so instead of being sent to the next endpoint. Reads and requests that
 * never left (connection refused, connect timeout, TLS handshake) move on.
 *
 * Timeouts are short (connect 1 s, whole request 5 s, both settable in the
 * URL) so that callers fail fast with ERR_STORE_UNAVAILABLE when etcd is
 * down or hung, rather than stalling the daemon's request threads.
 */
#include "util/xalloc.h"
#include "store/store_etcd_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "store/store.h"
#include "util/cleanup.h"
#include "util/curl_pool.h"
#include "util/log.h"
#include "util/time.h"

#define ETCD_DEFAULT_PORT 2379
#define ETCD_POOL_MAX 8
#define ETCD_CONNECT_TIMEOUT_MS 1000
#define ETCD_TIMEOUT_MS 5000
/* A range page is at most ETCD_RANGE_PAGE keys (store_etcd.c); with values
 * up to 1 MiB in base64 that stays below this. */
#define ETCD_REPLY_MAX (512u << 20)
#define ETCD_URL_EXAMPLE "etcd://127.0.0.1:2379[,host:port...][/key/prefix][?user=..&password=..]"

struct etcd_client {
    char **endpoints; /* "host:port" */
    char **base_urls; /* "http://host:port" or "https://host:port" */
    size_t nendpoints;
    char *endpoints_text; /* "host:port,host:port" */
    atomic_size_t current;
    char *prefix; /* "" or "/some/prefix/" */
    size_t prefix_len;
    char *user, *password;
    char *cacert, *cert, *key;
    long connect_timeout_ms, timeout_ms;
    curl_pool *pool;            /* idle handles, at most ETCD_POOL_MAX */
    pthread_mutex_t token_lock; /* guards token; held while authenticating */
    char *token;
};

static pthread_once_t etcd_curl_once = PTHREAD_ONCE_INIT;
static CURLcode etcd_curl_init_rc;

static void etcd_curl_init(void)
{
    etcd_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int etcd_oom(gb_err *err)
{
    return err_set(err, ERR_INTERNAL, "etcd store: out of memory");
}

/* ---- the URL ------------------------------------------------------------- */

static int etcd_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* %-decode n bytes of s (option values: passwords may hold '&' or '='). */
static int etcd_url_decode(const char *s, size_t n, char **out)
{
    char *d = xmalloc(n + 1), *o = d;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? etcd_hex(s[i + 1]) : -1;
        int lo = i + 2 < n ? etcd_hex(s[i + 2]) : -1;
        if (hi >= 0 && lo >= 0 && (hi | lo) != 0) { /* %00 would cut the string */
            *o++ = (char)(hi << 4 | lo);
            i += 2;
            continue;
        }
        free(d);
        return -1;
    }
    *o = '\0';
    *out = d;
    return 0;
}

static int etcd_parse_ms(const char *v, long *ms)
{
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n <= 0 || n > 3600 * 1000)
        return -1;
    *ms = n;
    return 0;
}

/* One name=value option of the query string. */
static int etcd_parse_option(etcd_client *c, const char *shown, const char *opt, size_t len,
                             gb_err *err)
{
    const char *eq = memchr(opt, '=', len);
    size_t name_len = eq ? (size_t)(eq - opt) : len;
    _cleanup_free_ char *value = NULL;
    if (!eq || etcd_url_decode(eq + 1, len - name_len - 1, &value) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s': option '%.*s' needs a value as name=value, "
                       "%%-encoded where needed (no %%00)",
                       shown, (int)name_len, opt);
    struct {
        const char *name;
        char **slot;
    } strings[] = {
        {"user", &c->user}, {"password", &c->password}, {"cacert", &c->cacert},
        {"cert", &c->cert}, {"key", &c->key},
    };
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
        if (strlen(strings[i].name) == name_len && !strncmp(opt, strings[i].name, name_len)) {
            free(*strings[i].slot);
            *strings[i].slot = steal_ptr(&value);
            return 0;
        }
    }
    long *ms = name_len == 10 && !strncmp(opt, "timeout_ms", 10)           ? &c->timeout_ms
               : name_len == 18 && !strncmp(opt, "connect_timeout_ms", 18) ? &c->connect_timeout_ms
                                                                           : NULL;
    if (ms) {
        if (etcd_parse_ms(value, ms) < 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "store URL '%s': %.*s must be a whole number of milliseconds "
                           "between 1 and 3600000",
                           shown, (int)name_len, opt);
        return 0;
    }
    return err_set(err, ERR_INVALID_PARAMS,
                   "store URL '%s': unknown option '%.*s'; known: user, password, cacert, cert, "
                   "key, timeout_ms, connect_timeout_ms",
                   shown, (int)name_len, opt);
}

static int etcd_parse_query(etcd_client *c, const char *shown, const char *query, gb_err *err)
{
    for (const char *p = query; *p;) {
        size_t len = strcspn(p, "&");
        if (len > 0 && etcd_parse_option(c, shown, p, len, err) < 0)
            return -1;
        p += len + (p[len] == '&');
    }
    if (!c->user != !c->password)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s': give both user and password, or neither", shown);
    if (c->key && !c->cert)
        return err_set(err, ERR_INVALID_PARAMS,
                       "store URL '%s': key (a client key) needs cert (its certificate)", shown);
    return 0;
}

/* "host:port,host:port" -> endpoints[] and base_urls[]. */
static int etcd_parse_endpoints(etcd_client *c, const char *shown, const char *hosts, size_t len,
                                gb_err *err)
{
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += hosts[i] == ',';
    c->endpoints = xcalloc(n, sizeof(char *));
    c->base_urls = xcalloc(n, sizeof(char *));
    c->endpoints_text = xstrndup(hosts, len);
    if (!c->endpoints || !c->base_urls || !c->endpoints_text)
        return etcd_oom(err);
    const char *scheme = c->cacert || c->cert ? "https" : "http";
    const char *p = hosts, *end = hosts + len;
    for (size_t i = 0; i < n; i++) {
        size_t l = strcspn(p, ",");
        if (p + l > end)
            l = (size_t)(end - p);
        const char *colon = memrchr(p, ':', l);
        bool bracketed = l > 0 && p[0] == '[';
        bool has_port = colon && (!bracketed || colon > (const char *)memchr(p, ']', l));
        if (memchr(p, '@', l))
            return err_set(err, ERR_INVALID_PARAMS,
                           "store URL '%s': give credentials as ?user=NAME&password=SECRET, "
                           "not before the host",
                           shown);
        if (l == 0 || (has_port && colon == p + l - 1))
            return err_set(err, ERR_INVALID_PARAMS,
                           "store URL '%s': endpoint %zu is empty or malformed; write host:port, "
                           "as in %s",
                           shown, i + 1, ETCD_URL_EXAMPLE);
        c->endpoints[i] = has_port ? xasprintf("%.*s", (int)l, p)
                                   : xasprintf("%.*s:%d", (int)l, p, ETCD_DEFAULT_PORT);
        c->base_urls[i] = xasprintf("%s://%s", scheme, c->endpoints[i]);
        c->nendpoints = i + 1;
        p += l + 1;
    }
    return 0;
}

/* The path is the key prefix, taken literally; a '/' is added at its end so
 * that etcd://h/gpubox keeps keys under "/gpubox/", never "/gpuboxrs/...". */
static void etcd_parse_prefix(etcd_client *c, const char *path, size_t len)
{
    if (len <= 1) /* "" or "/" */
        c->prefix = xstrdup("");
    else
        c->prefix = xasprintf("%.*s%s", (int)len, path, path[len - 1] == '/' ? "" : "/");
    c->prefix_len = strlen(c->prefix);
}

static int etcd_parse_url(etcd_client *c, const char *url, gb_err *err)
{
    static const char scheme[] = "etcd://";
    /* Messages show the URL without its password: they end up in logs. */
    _cleanup_free_ char *shown = store_url_redact(url);
    if (!shown)
        return etcd_oom(err);
    if (strncmp(url, scheme, strlen(scheme)) != 0)
        return err_set(err, ERR_INVALID_PARAMS, "store URL '%s' is not an etcd:// URL, as in %s",
                       shown, ETCD_URL_EXAMPLE);
    const char *hosts = url + strlen(scheme);
    size_t hosts_len = strcspn(hosts, "/?");
    const char *path = hosts + hosts_len;
    size_t path_len = *path == '/' ? strcspn(path, "?") : 0;
    const char *query = path + path_len;
    if (hosts_len == 0)
        return err_set(err, ERR_INVALID_PARAMS, "store URL '%s' names no etcd endpoint, as in %s",
                       shown, ETCD_URL_EXAMPLE);
    /* The query first: it decides http or https for the endpoints. */
    if ((*query == '?' && etcd_parse_query(c, shown, query + 1, err) < 0) ||
        etcd_parse_endpoints(c, shown, hosts, hosts_len, err) < 0)
        return -1;
    etcd_parse_prefix(c, path, path_len);
    return 0;
}

void etcd_client_free(etcd_client *c)
{
    if (!c)
        return;
    curl_pool_free(c->pool);
    for (size_t i = 0; i < c->nendpoints; i++) {
        free(c->endpoints[i]);
        free(c->base_urls[i]);
    }
    free(c->endpoints);
    free(c->base_urls);
    free(c->endpoints_text);
    free(c->prefix);
    free(c->user);
    free(c->password);
    free(c->cacert);
    free(c->cert);
    free(c->key);
    free(c->token);
    pthread_mutex_destroy(&c->token_lock);
    free(c);
}

int etcd_client_new(const char *url, etcd_client **out, gb_err *err)
{
    pthread_once(&etcd_curl_once, etcd_curl_init);
    if (etcd_curl_init_rc != CURLE_OK)
        return err_set(err, ERR_INTERNAL, "cannot initialize libcurl: %s",
                       curl_easy_strerror(etcd_curl_init_rc));
    etcd_client *c = xcalloc(1, sizeof(*c));
    c->pool = curl_pool_new(ETCD_POOL_MAX);
    pthread_mutex_init(&c->token_lock, NULL);
    c->connect_timeout_ms = ETCD_CONNECT_TIMEOUT_MS;
    c->timeout_ms = ETCD_TIMEOUT_MS;
    if (etcd_parse_url(c, url, err) < 0) {
        etcd_client_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

const char *etcd_client_prefix(const etcd_client *c, size_t *len)
{
    *len = c->prefix_len;
    return c->prefix;
}

const char *etcd_client_endpoints(const etcd_client *c)
{
    return c->endpoints_text;
}

/* ---- one HTTP exchange --------------------------------------------------- */

struct etcd_buf {
    char *data;
    size_t len, alloc;
    bool overflow;
};

static size_t etcd_buf_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct etcd_buf *b = userdata;
    size_t n = size * nmemb;
    if (n > ETCD_REPLY_MAX - b->len) {
        b->overflow = true;
        return 0;
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
    return n;
}

struct etcd_exchange {
    long status;
    struct etcd_buf reply;
    bool sent; /* the request (or part of it) left this host */
    char why[CURL_ERROR_SIZE];
};

/* POST payload to endpoint i. CURLE_OK means an HTTP answer came back. */
static CURLcode etcd_post(etcd_client *c, size_t i, const char *path, const char *payload,
                          struct curl_slist *headers, struct etcd_exchange *x)
{
    _cleanup_free_ char *url = xasprintf("%s%s", c->base_urls[i], path);
    CURL *h = curl_pool_borrow(c->pool);
    if (!h)
        return CURLE_OUT_OF_MEMORY;
    x->why[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* http_proxy must never see the store */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->why);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_buf_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->reply);
    if (c->cacert)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
    if (c->cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
    if (c->key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
    CURLcode rc = curl_easy_perform(h);
    long request_size = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
    x->sent = request_size > 0;
    if (rc != CURLE_OK && !x->why[0])
        snprintf(x->why, sizeof(x->why), "%s", curl_easy_strerror(rc));
    curl_pool_give_back(c->pool, h);
    return rc;
}

/* Send to the current endpoint, moving on to the next ones as failover
 * allows; on success *used is the endpoint that answered. */
static int etcd_send(etcd_client *c, const char *path, const char *payload, const char *token,
                     bool writes, struct etcd_exchange *x, size_t *used, gb_err *err)
{
    _cleanup_free_ char *auth = token ? xasprintf("Authorization: %s", token) : NULL;
    /* "Expect:" stops curl from waiting for a 100-continue on large bodies. */
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = headers ? curl_slist_append(headers, "Expect:") : NULL;
    struct curl_slist *h3 = h2 && auth ? curl_slist_append(h2, auth) : h2;
    if (!h3) {
        curl_slist_free_all(headers);
        return etcd_oom(err);
    }

    char reasons[400] = "";
    size_t start = atomic_load(&c->current) % c->nendpoints;
    int r = -1;
    for (size_t k = 0; k < c->nendpoints; k++) {
        size_t i = (start + k) % c->nendpoints;
        free(x->reply.data);
        x->reply = (struct etcd_buf){0};
        CURLcode rc = etcd_post(c, i, path, payload, headers, x);
        if (rc == CURLE_OK) {
            if (i != start) {
                atomic_store(&c->current, i);
                log_warn("etcd store: cannot reach %s; now using %s", reasons, c->endpoints[i]);
            }
            *used = i;
            r = 0;
            break;
        }
        if (rc == CURLE_OUT_OF_MEMORY || x->reply.overflow) {
            r = x->reply.overflow ? err_set(err, ERR_INTERNAL,
                                            "etcd's answer to %s is larger than %u MiB; "
                                            "refusing to hold it in memory",
                                            path, ETCD_REPLY_MAX >> 20)
                                  : etcd_oom(err);
            break;
        }
        if (x->sent && writes) {
            r = err_set(err, ERR_STORE_UNAVAILABLE,
                        "etcd at %s received a write (POST %s) but gave no answer: %s; it may or "
                        "may not have been applied - read the keys again before retrying",
                        c->endpoints[i], path, x->why);
            break;
        }
        /* "host:port: why; host:port: why", or just "why" for one endpoint. */
        size_t used_len = strlen(reasons);
        bool several = c->nendpoints > 1;
        snprintf(reasons + used_len, sizeof(reasons) - used_len, "%s%s%s%s", used_len ? "; " : "",
                 several ? c->endpoints[i] : "", several ? ": " : "", x->why);
        r = -2; /* every endpoint tried so far was unreachable */
    }
    curl_slist_free_all(headers);
    if (r == -2)
        r = err_set(err, ERR_STORE_UNAVAILABLE, "etcd at %s is unreachable: %s", c->endpoints_text,
                    reasons);
    return r;
}

/* ---- answers and errors -------------------------------------------------- */

/* etcd's error answer, {"error": "...", "code": N, "message": "..."}, as a
 * gb_err a user can act on. */
static int etcd_answer_err(etcd_client *c, size_t i, const char *path, json_t *answer, gb_err *err)
{
    const char *msg = json_string_value(json_object_get(answer, "error"));
    if (!msg)
        msg = json_string_value(json_object_get(answer, "message"));
    if (!msg)
        msg = "no message given";
    json_int_t code = json_integer_value(json_object_get(answer, "code"));
    const char *at = c->endpoints[i];
    switch (code) {
    case ETCD_GRPC_UNAUTHENTICATED:
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "etcd at %s does not accept user '%s': %s; check user and password in "
                       "the store URL",
                       at, c->user ? c->user : "", msg);
    case ETCD_GRPC_INVALID_ARGUMENT:
        if (strstr(msg, "user name is empty"))
            return err_set(err, ERR_STORE_UNAVAILABLE,
                           "etcd at %s has authentication enabled (%s); add "
                           "?user=NAME&password=SECRET to the store URL",
                           at, msg);
        if (strstr(msg, "authentication failed"))
            return err_set(err, ERR_STORE_UNAVAILABLE,
                           "etcd at %s does not accept user '%s': %s; check user and password "
                           "in the store URL",
                           at, c->user ? c->user : "", msg);
        return err_set(err, ERR_INVALID_PARAMS, "etcd at %s refused %s: %s", at, path, msg);
    case ETCD_GRPC_PERMISSION_DENIED:
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "etcd at %s: user '%s' may not do %s (%s); grant it a role with "
                       "readwrite on the keys under '%s'",
                       at, c->user ? c->user : "", path, msg, c->prefix);
    case ETCD_GRPC_UNAVAILABLE:
    case ETCD_GRPC_DEADLINE_EXCEEDED:
    case ETCD_GRPC_RESOURCE_EXHAUSTED:
        return err_set(err, ERR_STORE_UNAVAILABLE, "etcd at %s cannot serve %s now: %s", at, path,
                       msg);
    default:
        return err_set(err, ERR_INTERNAL, "etcd at %s answered %s with an error: %s (gRPC code %d)",
                       at, path, msg, (int)code);
    }
}

/* Ask etcd for a token for the URL's user. */
static int etcd_authenticate(etcd_client *c, char **token, gb_err *err)
{
    _cleanup_json_ json_t *body = json_pack("{s:s, s:s}", "name", c->user, "password", c->password);
    _cleanup_free_ char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (!payload)
        return etcd_oom(err);
    struct etcd_exchange x = {0};
    size_t i = 0;
    int r = etcd_send(c, "/v3/auth/authenticate", payload, NULL, false, &x, &i, err);
    _cleanup_json_ json_t *answer = r == 0 ? json_loadb(x.reply.data, x.reply.len, 0, NULL) : NULL;
    free(x.reply.data);
    if (r < 0)
        return -1;
    if (x.status != 200 && answer)
        return etcd_answer_err(c, i, "/v3/auth/authenticate", answer, err);
    const char *t = json_string_value(json_object_get(answer, "token"));
    if (!t || !*t)
        return err_set(err, ERR_STORE_UNAVAILABLE,
                       "etcd at %s gave no auth token for user '%s' (HTTP %ld); is "
                       "authentication enabled there?",
                       c->endpoints[i], c->user, x.status);
    *token = xstrdup(t);
    return *token ? 0 : etcd_oom(err);
}

/* A copy of the current token, fetching one first if there is none - or
 * when the one the caller used (stale) was just refused. Several threads
 * may find the same token refused; the first fetches a new one and the
 * others take it. */
static int etcd_token(etcd_client *c, const char *stale, char **out, gb_err *err)
{
    *out = NULL;
    if (!c->user)
        return 0;
    pthread_mutex_lock(&c->token_lock);
    int r = 0;
    if (!c->token || (stale && strcmp(c->token, stale) == 0)) {
        char *fresh = NULL;
        r = etcd_authenticate(c, &fresh, err);
        if (r == 0) {
            free(c->token);
            c->token = fresh;
        }
    }
    if (r == 0 && !(*out = xstrdup(c->token)))
        r = etcd_oom(err);
    pthread_mutex_unlock(&c->token_lock);
    return r;
}

/* While a member is lost, the others elect a new leader (a few seconds):
 * meanwhile etcd answers UNAVAILABLE - "leader changed", "no leader". A
 * read is asked again; a write only when etcd says it has no leader, which
 * it says before anything is proposed (so nothing was applied). "leader
 * changed" on a write may come after it was applied, and is passed on.
 * An election takes one to two election timeouts (etcd's default 1 s; a
 * cluster across sites sets more) after the loss is noticed, and longer on
 * a loaded machine: 6 s of waiting was seen to run out, so 15 s. */
#define ETCD_ELECTION_WAIT_MS 15000
#define ETCD_ELECTION_RETRY_MS 200

static bool etcd_retry_for_election(json_t *answer, bool writes, int64_t start_ns)
{
    if (json_integer_value(json_object_get(answer, "code")) != ETCD_GRPC_UNAVAILABLE ||
        time_mono_ns() - start_ns > (int64_t)ETCD_ELECTION_WAIT_MS * 1000000)
        return false;
    const char *msg = json_string_value(json_object_get(answer, "error"));
    if (!msg)
        msg = json_string_value(json_object_get(answer, "message"));
    if (writes && !(msg && strstr(msg, "no leader")))
        return false;
    struct timespec ts = {0, ETCD_ELECTION_RETRY_MS * 1000000L};
    nanosleep(&ts, NULL);
    return true;
}

int etcd_client_call(etcd_client *c, const char *path, json_t *body, bool writes, json_t **reply,
                     int *grpc_code, gb_err *err)
{
    int64_t start_ns = time_mono_ns();
    *reply = NULL;
    if (grpc_code)
        *grpc_code = 0;
    _cleanup_free_ char *payload = json_dumps(body, JSON_COMPACT);
    if (!payload)
        return etcd_oom(err);
    _cleanup_free_ char *token = NULL;
    for (int attempt = 0;; attempt++) {
        char *stale = steal_ptr(&token);
        int r = etcd_token(c, stale, &token, err);
        free(stale);
        if (r < 0)
            return -1;
        struct etcd_exchange x = {0};
        size_t i = 0;
        r = etcd_send(c, path, payload, token, writes, &x, &i, err);
        _cleanup_json_ json_t *answer =
            r == 0 ? json_loadb(x.reply.data, x.reply.len, 0, NULL) : NULL;
        free(x.reply.data);
        if (r < 0)
            return -1;
        if (!answer || !json_is_object(answer))
            return err_set(err, ERR_STORE_UNAVAILABLE,
                           "%s answered POST %s with HTTP %ld and no JSON; is it etcd 3.4 or "
                           "newer, serving its gateway at /v3/?",
                           c->endpoints[i], path, x.status);
        if (x.status == 200) {
            *reply = steal_ptr(&answer);
            return 0;
        }
        json_int_t code = json_integer_value(json_object_get(answer, "code"));
        if (grpc_code)
            *grpc_code = (int)code;
        /* An expired token (etcd's simple tokens live 5 minutes by default):
         * fetch a new one and try once more. Nothing was applied. */
        if (code == ETCD_GRPC_UNAUTHENTICATED && c->user && attempt == 0)
            continue;
        if (etcd_retry_for_election(answer, writes, start_ns))
            continue;
        return etcd_answer_err(c, i, path, answer, err);
    }
}
