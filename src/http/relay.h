/*
 * relay.h - pass bytes both ways between two sockets until one side ends:
 * a connection switched to another protocol that this server only carries
 * (a terminal forwarded to the node that holds it). Neither socket is
 * written with a blocking call: what one side cannot take yet waits, and
 * the side that fills it is not read meanwhile (as http/ws_pump.h).
 */
#ifndef GPUBOX_HTTP_RELAY_H
#define GPUBOX_HTTP_RELAY_H

#include <stdatomic.h>
#include <stddef.h>

/* Relay between a and b, first sending extra (bytes already read from a)
 * to b. Returns when either side closed (after passing on what it sent) or
 * *stop is set (may be NULL). Closes neither. */
void http_relay(int a, const char *extra, size_t extra_len, int b, const atomic_bool *stop);

#endif
