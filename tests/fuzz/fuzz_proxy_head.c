/*
 * fuzz_proxy_head.c - request heads as the service proxy reads them
 * (proxy/proxy_head.h): the head, its route, its query parameters and its
 * body framing.
 *
 * The input is the bytes a client sends. Properties: no crash; a parsed
 * head is no longer than the input and its route names a set and a
 * service of letters, digits, '_' and '.' only; a query parameter taken
 * leaves a target no longer than before; body framing consumes no more
 * than it is fed and, once done, nothing more. The same bytes read as a
 * container's answer head: no crash, and a body that is done takes
 * nothing more.
 */
#include "fuzz_util.h"

#include <ctype.h>
#include <stdbool.h>

#include "proxy/proxy_head.h"

static void check_name(const char *s, const char *input)
{
    FUZZ_CHECK(*s, "'%s': an empty name in a route", input);
    for (; *s; s++)
        FUZZ_CHECK(isalnum((unsigned char)*s) || *s == '_' || *s == '.',
                   "'%s': a route name holds 0x%02x", input, (unsigned char)*s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > PROXY_HEAD_MAX)
        return 0;
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t end = proxy_head_end(buf, size);
    proxy_head h;
    if (end && proxy_head_parse(buf, end, &h) == 0) {
        FUZZ_CHECK(h.length <= size, "head of %zu bytes from %zu", h.length, size);
        proxy_route r;
        const char *host = proxy_head_get(&h, "Host");
        if (proxy_route_of(h.target, host, "apps.example.org", &r) == 0) {
            check_name(r.set, h.target);
            check_name(r.service, h.target);
        }
        char value[128], rest[PROXY_HEAD_MAX + 1];
        if (proxy_query_take(h.target, "gpubox-ticket", value, sizeof(value), rest, sizeof(rest)) ==
            1)
            FUZZ_CHECK(strlen(rest) < strlen(h.target), "'%s' grew to '%s'", h.target, rest);
        proxy_body b;
        if (proxy_body_init(&h, &b) == 0) {
            size_t left = size - end;
            long n = proxy_body_feed(&b, buf + end, left);
            FUZZ_CHECK(n <= (long)left, "fed %zu, took %ld", left, n);
            if (b.done)
                FUZZ_CHECK(proxy_body_feed(&b, "x", 1) == 0, "took bytes after its end");
        }
    }
    proxy_response resp;
    if (end && proxy_response_parse(buf, end, size % 2 ? "HEAD" : "GET", &resp) == 0) {
        FUZZ_CHECK(resp.status >= 100 && resp.status <= 999, "status %d", resp.status);
        size_t left = size - end;
        long n = proxy_body_feed(&resp.body, buf + end, left);
        FUZZ_CHECK(n <= (long)left, "fed %zu, took %ld", left, n);
        if (resp.body.done)
            FUZZ_CHECK(proxy_body_feed(&resp.body, "x", 1) == 0, "took bytes after its end");
    }
    free(buf);
    return 0;
}
