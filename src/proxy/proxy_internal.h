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

/* Serve the requests of connection fd from peer (its address in text),
 * one after another, then return; the caller closes fd. */
void proxy_conn_serve(const proxy_config *cfg, int fd, const char *peer);

/* All of buf[len] to the socket fd (EINTR retried, no SIGPIPE): false when
 * the peer went or the send timed out. */
bool proxy_send_all(int fd, const char *buf, size_t len);

#endif
