/*
 * proxy_internal.h - what the service proxy's files share. Not for use
 * outside src/proxy/.
 */
#ifndef GPUBOX_PROXY_PROXY_INTERNAL_H
#define GPUBOX_PROXY_PROXY_INTERNAL_H

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>

#include "proxy/proxy.h"

#include "proxy/proxy_head.h"

/* The header a request forwarded by another node's proxy carries: that
 * node's name (proxy_fleet.c). */
#define PROXY_PROXIED_BY "X-Gpubox-Proxied-By"

/* In a fleet, hand a request for set over to the proxy of the node that
 * runs it (proxy_fleet.c), with the rest of the connection: 1 done, 0
 * this node answers, -1 that node cannot be reached (answer 404, as for
 * a set nobody has). rest: the bytes read after the head. */
int proxy_fleet_forward(const proxy_config *cfg, int fd, const proxy_head *h, const char *set,
                        const char *rest, size_t rest_len);

/* A client address without its port (proxy.c counts each one's
 * connections against cfg.max_per_ip). */
typedef struct proxy_addr {
    int family;
    unsigned char bytes[16];
} proxy_addr;

/* Connections past an address's cap answered 429 at a time (each for at
 * most PROXY_LINGER_MS); more are closed at once with a 503. */
#define PROXY_REFUSING_MAX 16
#define PROXY_LINGER_MS 2000 /* a closing connection's lingering read, at most */

/* Answer connection fd, one past its address's cap (cfg->max_per_ip), 429
 * and close it; the caller closes fd. */
void proxy_conn_refuse_over_cap(const proxy_config *cfg, int fd);

/* Serve the requests of connection fd from peer (its address in text),
 * one after another, then return; the caller closes fd. */
void proxy_conn_serve(const proxy_config *cfg, int fd, const char *peer);

/* All of buf[len] to the socket fd (EINTR retried, no SIGPIPE): false when
 * the peer went or the send timed out. */
bool proxy_send_all(int fd, const char *buf, size_t len);

#define PROXY_BUF (64 * 1024)
#define PROXY_RESPONSE_HEAD_MAX (64 * 1024)
#define PROXY_PIPE (1024 * 1024) /* a pipe's size for splice: as much as one read moves */
/* the container socket's receive and the client socket's send buffer once a body streams */
#define PROXY_SOCKET_BUF (4 * 1024 * 1024)

/* One client connection (proxy_conn.c): the bytes it sent that no request
 * has used yet, and the container connection the last request used. */
typedef struct proxy_conn {
    const proxy_config *cfg;
    int fd;
    const char *peer;
    char *in;
    size_t in_len, in_cap;
    int up; /* -1: none kept */
    char up_set[64], up_service[64], up_address[64];
    uint16_t up_port;
    int pipe_fds[2]; /* for splice, made when a first body needs it; -1: none */
    bool pipe_tried;
    bool up_grown; /* c->up's buffers made larger (relay_pipe) */
    char *buf;     /* PROXY_BUF bytes for what is in flight */
} proxy_conn;

/* Keep p[0..n) (what the client sent after a request's body) for the
 * next request of c. */
void proxy_conn_keep(proxy_conn *c, const char *p, size_t n);

/* One exchange (proxy_relay.c): the request's head has gone to c->up,
 * with the body bytes that came with it. */
typedef struct proxy_relay {
    proxy_conn *c;
    bool upgrade_asked, upgraded;
    bool client_keep;   /* the client's connection may carry another request */
    const char *method; /* the request's, for the answer's framing */
    proxy_body body;    /* the request body still to pass on */
    proxy_response resp;
    bool head_done; /* the answer's (final) head went to the client */
    bool done;      /* the answer has ended */
    bool up_kept;   /* false once anything makes the container connection unfit for more */
    char *rhead;    /* the answer's head as it comes */
    size_t rlen;
    bool sent_any; /* something went to the client */
    bool client_open;
} proxy_relay;

/* Copy both ways until the answer ends (or a tunnel closes): true when it
 * did, false when the exchange broke. */
bool proxy_relay_run(proxy_relay *r);

#endif
