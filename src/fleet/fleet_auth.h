/*
 * fleet_auth.h - the proof that a request came from a node of the fleet
 * (docs/security.md, "Between nodes").
 *
 * A node that forwards a request, or asks the others for their part of a
 * list, adds FLEET_AUTH_HEADER next to FLEET_FORWARDED_HEADER:
 *
 *   X-Gpubox-Fleet-Auth: v1 node=<sending node> ts=<Unix seconds> sig=<hex>
 *
 * sig is the HMAC-SHA256, with the fleet's secret as the key, of these
 * lines, each ended by "\n":
 *
 *   gpubox-fleet-v1
 *   <sending node>
 *   <ts, decimal>
 *   <method>
 *   <path and query as sent, encoded (api_fleet_path_query)>
 *   <SHA-256 of the body, lower-case hex; of nothing for no body>
 *   <the caller's Authorization header as passed on; empty for none>
 *
 * so a proof holds for one method, path, body and caller, from one node,
 * within FLEET_AUTH_SKEW_S of the receiving node's clock. Nothing here
 * remembers proofs: the same request sent again within that window is
 * accepted again - what it does is what the caller's own token allows
 * anyway, and it needs the caller's Authorization, which the copy carries.
 *
 * Pure functions: no clock, no store. fleet.c keeps the secret and the
 * time (fleet_request_sign, fleet_request_verify).
 */
#ifndef GPUBOX_FLEET_FLEET_AUTH_H
#define GPUBOX_FLEET_FLEET_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet.h"
#include "util/err.h"

/* How far the sender's time may be from the receiver's, either way: the
 * nodes' clocks must agree to within this (NTP keeps them far closer). */
#define FLEET_AUTH_SKEW_S 60
/* "v1 node=" + a node name + " ts=" + 20 digits + " sig=" + 64 hex + NUL */
#define FLEET_AUTH_VALUE_MAX (8 + FLEET_NODE_MAX + 4 + 20 + 5 + 64 + 1)
/* A secret given in a file: at least this many characters. */
#define FLEET_SECRET_MIN 32
#define FLEET_SECRET_MAX 1024

/* The header's value for req, sent by node at time ts, into out. */
void fleet_auth_sign(const unsigned char *key, size_t key_len, const char *node, int64_t ts,
                     const fleet_request *req, char out[FLEET_AUTH_VALUE_MAX]);

/* Read a header value: 0 with node (FLEET_NODE_MAX bytes), ts and the 32
 * bytes of sig filled; -1 with ERR_FORBIDDEN saying what is wrong. */
int fleet_auth_parse(const char *value, char *node, int64_t *ts, unsigned char sig[32],
                     gb_err *err);

/* Whether value (FLEET_AUTH_HEADER's, NULL when absent) proves that a node
 * holding key sent req at a time within FLEET_AUTH_SKEW_S of now.
 * forwarded_by, FLEET_FORWARDED_HEADER's value (NULL when absent), must
 * name the same node. 0 yes (node filled when not NULL); -1 with
 * ERR_FORBIDDEN naming the headers and what is wrong. The signature is
 * compared in constant time. */
int fleet_auth_check(const unsigned char *key, size_t key_len, const char *value,
                     const char *forwarded_by, int64_t now, const fleet_request *req, char *node,
                     gb_err *err);

#endif
