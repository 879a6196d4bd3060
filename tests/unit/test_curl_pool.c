/*
 * test_curl_pool.c - the pool of idle curl handles (util/curl_pool.h): a
 * borrowed handle is the borrower's alone, a given-back handle is borrowed
 * again (the warmest first), at most max_idle stay idle, freeing a pool with
 * idle handles leaks nothing (checked by LeakSanitizer in the test build),
 * and a connection stays open across give back and borrow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/curl_pool.h"

/* Every test makes handles: curl_global_init once for the group. */
static int curl_setup(void **state)
{
    (void)state;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int curl_teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

static void test_borrow_gives_distinct_handles(void **state)
{
    (void)state;
    curl_pool *p = curl_pool_new(4);
    CURL *a = curl_pool_borrow(p), *b = curl_pool_borrow(p), *c = curl_pool_borrow(p);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_ptr_not_equal(a, b);
    assert_ptr_not_equal(b, c);
    assert_ptr_not_equal(a, c);
    assert_int_equal(curl_pool_idle(p), 0);
    curl_pool_give_back(p, a);
    curl_pool_give_back(p, b);
    curl_pool_give_back(p, c);
    assert_int_equal(curl_pool_idle(p), 3);
    curl_pool_free(p);
}

static void test_given_back_handle_is_reused_warmest_first(void **state)
{
    (void)state;
    curl_pool *p = curl_pool_new(4);
    CURL *a = curl_pool_borrow(p), *b = curl_pool_borrow(p);
    curl_pool_give_back(p, a);
    curl_pool_give_back(p, b);
    /* b went back last: its connection is the warmest. */
    assert_ptr_equal(curl_pool_borrow(p), b);
    assert_ptr_equal(curl_pool_borrow(p), a);
    assert_int_equal(curl_pool_idle(p), 0);
    curl_pool_give_back(p, a);
    curl_pool_give_back(p, b);
    curl_pool_free(p);
}

static void test_keeps_at_most_max_idle(void **state)
{
    (void)state;
    enum { MAX_IDLE = 3, BURST = 7 };
    curl_pool *p = curl_pool_new(MAX_IDLE);
    CURL *h[BURST];
    for (size_t i = 0; i < BURST; i++)
        assert_non_null(h[i] = curl_pool_borrow(p));
    for (size_t i = 0; i < BURST; i++) {
        curl_pool_give_back(p, h[i]);
        assert_int_equal(curl_pool_idle(p), i + 1 < MAX_IDLE ? i + 1 : MAX_IDLE);
    }
    /* The first MAX_IDLE given back stayed; the rest were closed. */
    for (size_t i = MAX_IDLE; i-- > 0;)
        assert_ptr_equal(curl_pool_borrow(p), h[i]);
    assert_int_equal(curl_pool_idle(p), 0);
    for (size_t i = 0; i < MAX_IDLE; i++)
        curl_pool_give_back(p, h[i]);
    curl_pool_free(p);
}

static void test_zero_max_idle_keeps_none(void **state)
{
    (void)state;
    curl_pool *p = curl_pool_new(0);
    CURL *h = curl_pool_borrow(p);
    assert_non_null(h);
    curl_pool_give_back(p, h);
    assert_int_equal(curl_pool_idle(p), 0);
    curl_pool_free(p);
    curl_pool_free(NULL);
}

/* ---- keep-alive: a tiny HTTP/1.1 server on 127.0.0.1 -------------------- */

struct tiny_server {
    int fd;
    unsigned short port;
    atomic_int accepted;
    pthread_t thread;
};

/* Answer every request on one connection with "ok", until the client
 * closes it. Requests are GETs: they end at the blank line. */
static void tiny_serve(int conn)
{
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(conn, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return;
        len += (size_t)n;
        buf[len] = '\0';
        char *end;
        while ((end = strstr(buf, "\r\n\r\n"))) {
            if (write(conn, answer, sizeof(answer) - 1) != (ssize_t)sizeof(answer) - 1)
                return;
            size_t used = (size_t)(end + 4 - buf);
            memmove(buf, buf + used, len - used + 1);
            len -= used;
        }
        if (len == sizeof(buf) - 1)
            return;
    }
}

static void *tiny_loop(void *arg)
{
    struct tiny_server *s = arg;
    int conn;
    while ((conn = accept(s->fd, NULL, NULL)) >= 0) {
        atomic_fetch_add(&s->accepted, 1);
        tiny_serve(conn);
        close(conn);
    }
    return NULL;
}

static void tiny_start(struct tiny_server *s)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(addr);
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->fd >= 0);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(s->fd, 8), 0);
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&addr, &alen), 0);
    s->port = ntohs(addr.sin_port);
    atomic_init(&s->accepted, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, tiny_loop, s), 0);
}

static void tiny_stop(struct tiny_server *s)
{
    shutdown(s->fd, SHUT_RDWR); /* accept() returns with an error */
    pthread_join(s->thread, NULL);
    close(s->fd);
}

static size_t discard(char *data, size_t size, size_t nmemb, void *userdata)
{
    (void)data;
    (void)userdata;
    return size * nmemb;
}

/* One GET through a borrowed handle; the connections it opened. */
static long pooled_get(curl_pool *p, const char *url)
{
    CURL *h = curl_pool_borrow(p);
    assert_non_null(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    long connects = -1;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    curl_pool_give_back(p, h);
    return connects;
}

static void test_connection_survives_give_back(void **state)
{
    (void)state;
    struct tiny_server s;
    tiny_start(&s);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", s.port);
    curl_pool *p = curl_pool_new(2);
    assert_int_equal(pooled_get(p, url), 1);
    assert_int_equal(pooled_get(p, url), 0); /* the warm connection, reused */
    assert_int_equal(pooled_get(p, url), 0);
    curl_pool_free(p); /* closes the connection: the server goes back to accept */
    tiny_stop(&s);
    assert_int_equal(atomic_load(&s.accepted), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrow_gives_distinct_handles),
        cmocka_unit_test(test_given_back_handle_is_reused_warmest_first),
        cmocka_unit_test(test_keeps_at_most_max_idle),
        cmocka_unit_test(test_zero_max_idle_keeps_none),
        cmocka_unit_test(test_connection_survives_give_back),
    };
    return cmocka_run_group_tests(tests, curl_setup, curl_teardown);
}
