/*
 * etcd_test_util.h - a real etcd (Debian's etcd-server) for the tests: one
 * member on two free loopback ports, its data dir and log in a fresh
 * temporary directory.
 *
 * A struct etcd_test is one such server. etcd_test_start starts it and
 * waits until it serves; etcd_test_signal / etcd_test_restart let outage
 * tests stop, freeze and bring it back on the same data dir and ports;
 * etcd_test_stop ends it and removes its directory. The server is started
 * with PR_SET_PDEATHSIG, so a test binary that crashes takes its etcd with
 * it: none is ever left running.
 *
 * etcd_test_post sends one JSON request to the gateway (compaction, auth
 * set-up) with libcurl, as the backend under test does.
 */
#ifndef GPUBOX_TESTS_ETCD_TEST_UTIL_H
#define GPUBOX_TESTS_ETCD_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "store_test_util.h"

#define ETCD_TEST_MAX_ARGS 16

struct etcd_test {
    pid_t pid;          /* 0 when not running */
    int client_port;    /* clients: http(s)://127.0.0.1:client_port */
    int peer_port;      /* raft, unused by a single member but required */
    char *dir;          /* holds data/ and etcd.log */
    char endpoint[32];  /* "127.0.0.1:<client_port>" */
    const char *scheme; /* "http", or "https" when started with TLS args */
    /* Extra arguments (TLS files), kept for restarts. */
    const char *extra[ETCD_TEST_MAX_ARGS];
};

/* A TCP port nothing listens on at the moment. */
static inline int etcd_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static inline size_t etcd_test_sink(char *data, size_t size, size_t nmemb, void *userdata)
{
    char **buf = userdata;
    size_t old = *buf ? strlen(*buf) : 0, n = size * nmemb;
    char *grown = realloc(*buf, old + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + old, data, n);
    grown[old + n] = '\0';
    *buf = grown;
    return n;
}

/* POST json to path on the server; the HTTP status (0 when it could not be
 * reached), and the answer in *reply (may be NULL; free it). Extra curl
 * options for TLS come from cacert/cert/key (may be NULL). */
static inline long etcd_test_post_tls(const char *base_url, const char *path, const char *json,
                                      const char *token, const char *cacert, const char *cert,
                                      const char *key, char **reply)
{
    char url[256], auth[300];
    snprintf(url, sizeof(url), "%s%s", base_url, path);
    snprintf(auth, sizeof(auth), "Authorization: %s", token ? token : "");
    char *buf = NULL;
    long status = 0;
    CURL *h = curl_easy_init();
    struct curl_slist *headers = token ? curl_slist_append(NULL, auth) : NULL;
    if (!h)
        return 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_test_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
    if (cacert)
        curl_easy_setopt(h, CURLOPT_CAINFO, cacert);
    if (cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, cert);
    if (key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    if (reply)
        *reply = buf;
    else
        free(buf);
    return status;
}

static inline long etcd_test_post(const struct etcd_test *e, const char *path, const char *json,
                                  char **reply)
{
    char base[64];
    snprintf(base, sizeof(base), "http://%s", e->endpoint);
    return etcd_test_post_tls(base, path, json, NULL, NULL, NULL, NULL, reply);
}

static inline double etcd_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Fork and exec etcd on e's dir and ports; its output goes to dir/etcd.log. */
static inline int etcd_test_spawn(struct etcd_test *e)
{
    char data[512], log[512], client[64], peer[64], cluster[96];
    snprintf(data, sizeof(data), "%s/data", e->dir);
    snprintf(log, sizeof(log), "%s/etcd.log", e->dir);
    snprintf(client, sizeof(client), "%s://%s", e->scheme, e->endpoint);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof(cluster), "default=%s", peer);
    const char *argv[16 + ETCD_TEST_MAX_ARGS] = {
        "etcd",    "--name",
        "default", "--data-dir",
        data,      "--listen-client-urls",
        client,    "--advertise-client-urls",
        client,    "--listen-peer-urls",
        peer,      "--initial-advertise-peer-urls",
        peer,      "--initial-cluster",
        cluster,
    };
    size_t n = 15;
    for (size_t i = 0; i < ETCD_TEST_MAX_ARGS && e->extra[i]; i++)
        argv[n++] = e->extra[i];
    argv[n] = NULL;
    const char *bin = getenv("GPUBOX_ETCD");
    bin = bin && *bin ? bin : "etcd";

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Die with the test binary, whatever way it ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(bin, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    e->pid = pid;
    return 0;
}

/* Wait until the server answers a range (up to 20 s); -1 if it exits or
 * never answers. */
static inline int etcd_test_wait_ready(struct etcd_test *e)
{
    double deadline = etcd_test_now_ms() + 20000;
    char base[64];
    snprintf(base, sizeof(base), "%s://%s", e->scheme, e->endpoint);
    while (etcd_test_now_ms() < deadline) {
        int status = 0;
        if (waitpid(e->pid, &status, WNOHANG) == e->pid) {
            e->pid = 0;
            return -1;
        }
        const char *cacert = NULL, *cert = NULL, *key = NULL;
        for (size_t i = 0; i + 1 < ETCD_TEST_MAX_ARGS && e->extra[i]; i++) {
            if (!strcmp(e->extra[i], "--trusted-ca-file"))
                cacert = e->extra[i + 1];
            if (!strcmp(e->extra[i], "--cert-file"))
                cert = e->extra[i + 1];
            if (!strcmp(e->extra[i], "--key-file"))
                key = e->extra[i + 1];
        }
        /* With TLS, the server's own certificate doubles as a client one. */
        if (etcd_test_post_tls(base, "/v3/kv/range", "{\"key\":\"AA==\"}", NULL, cacert, cert, key,
                               NULL) == 200)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* Send sig to the server. SIGKILL and SIGTERM also reap it. */
static inline void etcd_test_signal(struct etcd_test *e, int sig)
{
    if (e->pid <= 0)
        return;
    kill(e->pid, sig);
    if (sig == SIGSTOP) {
        /* A stop is delivered asynchronously: wait until the process is
         * really stopped ('T' in /proc/PID/stat), or a request may still be
         * answered right after the signal was sent. */
        char path[64], stat[256];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)e->pid);
        for (int i = 0; i < 500; i++) {
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(stat, 1, sizeof(stat) - 1, f) : 0;
            if (f)
                fclose(f);
            stat[n] = '\0';
            const char *paren = strrchr(stat, ')');
            if (paren && paren[1] == ' ' && paren[2] == 'T')
                break;
            usleep(2000);
        }
    }
    if (sig == SIGKILL || sig == SIGTERM) {
        if (sig == SIGTERM) {
            /* etcd stops in well under a second; don't wait forever. */
            for (int i = 0; i < 100; i++) {
                if (waitpid(e->pid, NULL, WNOHANG) == e->pid) {
                    e->pid = 0;
                    return;
                }
                usleep(50 * 1000);
            }
            kill(e->pid, SIGKILL);
        }
        waitpid(e->pid, NULL, 0);
        e->pid = 0;
    }
}

/* Start the server again on the same data dir and ports. */
static inline int etcd_test_restart(struct etcd_test *e)
{
    if (etcd_test_spawn(e) < 0)
        return -1;
    if (etcd_test_wait_ready(e) < 0) {
        etcd_test_signal(e, SIGKILL);
        return -1;
    }
    return 0;
}

/* Start a new server on client_port (0: any free port). extra: more etcd
 * arguments (NULL-terminated, may be NULL), kept for restarts; they must
 * outlive e. After a failure, etcd_test_stop still removes the directory. */
static inline int etcd_test_start_args(struct etcd_test *e, int client_port,
                                       const char *const *extra)
{
    memset(e, 0, sizeof(*e));
    e->scheme = "http";
    for (size_t i = 0; extra && extra[i] && i < ETCD_TEST_MAX_ARGS - 1; i++) {
        e->extra[i] = extra[i];
        if (!strcmp(extra[i], "--cert-file"))
            e->scheme = "https";
    }
    e->dir = store_test_mkdtemp();
    if (!e->dir)
        return -1;
    /* A port found free can be taken before etcd binds it: try again. */
    for (int attempt = 0; attempt < 3; attempt++) {
        e->client_port = client_port > 0 ? client_port : etcd_test_free_port();
        e->peer_port = etcd_test_free_port();
        if (e->client_port <= 0 || e->peer_port <= 0 || e->client_port == e->peer_port)
            continue;
        snprintf(e->endpoint, sizeof(e->endpoint), "127.0.0.1:%d", e->client_port);
        if (etcd_test_restart(e) == 0)
            return 0;
    }
    fprintf(stderr, "etcd did not start; see %s/etcd.log\n", e->dir);
    return -1;
}

static inline int etcd_test_start(struct etcd_test *e)
{
    return etcd_test_start_args(e, 0, NULL);
}

/* Stop the server and remove its directory. */
static inline void etcd_test_stop(struct etcd_test *e)
{
    if (e->pid > 0)
        kill(e->pid, SIGCONT); /* a frozen server cannot act on SIGTERM */
    etcd_test_signal(e, SIGTERM);
    store_test_rmdir(e->dir);
    e->dir = NULL;
}

/* One etcd for a whole cmocka group, for the files whose tests share a
 * server (each test takes a key prefix of its own): pass
 * etcd_test_group_setup and etcd_test_group_teardown to
 * cmocka_run_group_tests and read etcd_test_shared.endpoint. */
__attribute__((unused)) static struct etcd_test etcd_test_shared;

static inline int etcd_test_group_setup(void **state)
{
    (void)state;
    if (etcd_test_start(&etcd_test_shared) < 0) {
        etcd_test_stop(&etcd_test_shared);
        return -1;
    }
    return 0;
}

static inline int etcd_test_group_teardown(void **state)
{
    (void)state;
    etcd_test_stop(&etcd_test_shared);
    return 0;
}

#endif
