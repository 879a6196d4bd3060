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

/* Serve the one request of connection fd from peer (its address in
 * text), then return; the caller closes fd. */
void proxy_conn_serve(const proxy_config *cfg, int fd, const char *peer);

#endif
