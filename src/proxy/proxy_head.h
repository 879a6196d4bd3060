/*
 * proxy_head.h - what the service proxy reads of a request: its head
 * (request line and headers), which service it is for (path or host
 * name), the proxy's own query parameters, and where its body ends; and
 * of the container's answer, where it ends (proxy_response_parse).
 *
 * Everything here works on bytes the caller read and owns; nothing does
 * I/O, so the parsers are unit-tested and fuzzed alone
 * (tests/unit/test_proxy_head.c, tests/fuzz/fuzz_proxy_head.c).
 *
 * A head is parsed in place: the line ends become NULs and the pieces
 * point into the buffer. What is refused (400): a request line that is not
 * METHOD SP /TARGET SP HTTP/1.x, a header line without a ':' or with
 * blanks before it, folded lines, control bytes, more than
 * PROXY_MAX_HEADERS headers, a body framed two ways (Content-Length and
 * Transfer-Encoding), a Transfer-Encoding other than chunked, a
 * Content-Length that is not one number.
 */
#ifndef GPUBOX_PROXY_PROXY_HEAD_H
#define GPUBOX_PROXY_PROXY_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_HEAD_MAX (16 * 1024) /* a longer request head is refused (431) */
#define PROXY_MAX_HEADERS 100

typedef struct proxy_header {
    const char *name;
    const char *value; /* blanks around it trimmed */
} proxy_header;

typedef struct proxy_head {
    const char *method;
    const char *target;  /* "/s/set/svc/lab?x=1" */
    const char *version; /* "HTTP/1.1" */
    proxy_header headers[PROXY_MAX_HEADERS];
    size_t nheaders;
    size_t length; /* bytes of the head, the blank line included */
} proxy_head;

/* Where buf[0..len) holds a whole head: its length (the blank line
 * included), or 0 when the blank line has not come yet. */
size_t proxy_head_end(const char *buf, size_t len);

/* Parse the head in buf[0..end) (end from proxy_head_end), in place. 0, or
 * -1 for a malformed head. */
int proxy_head_parse(char *buf, size_t end, proxy_head *out);

/* The value of the first header called name (any case); NULL: none. */
const char *proxy_head_get(const proxy_head *h, const char *name);

/* Does the comma-separated value hold token (any case)? ("keep-alive,
 * Upgrade" holds "upgrade".) */
bool proxy_header_has_token(const char *value, const char *token);

/* Which service a request is for. */
typedef struct proxy_route {
    char set[64];
    char service[64];
    char prefix[160]; /* the path the service lives under: "/s/set/svc" ("" for a host name) */
    bool add_slash;   /* the target is the prefix itself without its '/': redirect */
} proxy_route;

/* The route of target and host: with domain (NULL: none), a host
 * SERVICE--SET.DOMAIN[:port] (any case); otherwise a path /s/SET/SERVICE
 * followed by '/', '?' or nothing. 0, or -1 when it names no service. */
int proxy_route_of(const char *target, const char *host, const char *domain, proxy_route *out);

/* The value of query parameter name in target into out (NUL-terminated;
 * a value longer than size is not found), and target without it into
 * rest (rest_size bytes). 1 found, 0 not. */
int proxy_query_take(const char *target, const char *name, char *out, size_t size, char *rest,
                     size_t rest_size);

/* Where a body ends: no body, after Content-Length bytes, after the last
 * chunk, or (answers only) when the container closes its connection. */
enum proxy_body_kind { PROXY_BODY_NONE, PROXY_BODY_LENGTH, PROXY_BODY_CHUNKED, PROXY_BODY_CLOSE };

typedef struct proxy_body {
    enum proxy_body_kind kind;
    uint64_t left; /* LENGTH: bytes still to come; CHUNKED: of the chunk being read */
    int state;     /* CHUNKED: where in the framing */
    bool done;
} proxy_body;

/* The body framing of head: 0, or -1 when it is framed two ways or not
 * understood. */
int proxy_body_init(const proxy_head *h, proxy_body *b);

/* Feed len bytes that follow what was fed before: how many of them belong
 * to the body (the rest comes after it, and b->done is true), or -1 when
 * chunked framing is malformed. A PROXY_BODY_CLOSE body takes everything
 * and is never done. */
long proxy_body_feed(proxy_body *b, const char *buf, size_t len);

/* What the proxy reads of an answer's head, to know where the answer
 * ends and whether the container's connection can carry the next
 * request. */
typedef struct proxy_response {
    int status;
    bool keep_alive; /* HTTP/1.1, no "Connection: close", framing that cannot be misread */
    proxy_body body; /* NONE for HEAD, 1xx, 204, 304; else as the head frames it */
} proxy_response;

/* The answer head in buf[0..end) (end from proxy_head_end; not changed)
 * to a request with method: 0, or -1 when its status line or its framing
 * (Content-Length values that differ or are not numbers) is not
 * understood. A Transfer-Encoding whose last coding is not chunked, or
 * neither header, ends the body with the connection. */
int proxy_response_parse(const char *buf, size_t end, const char *method, proxy_response *out);

#endif
