/*
 * tickets.h - single-use, short-lived tickets that stand for a caller where
 * a browser cannot send the Authorization header: opening a WebSocket (the
 * terminal) or a first visit to an instance's service through the proxy.
 *
 * A ticket is issued to an authenticated caller for one purpose and one
 * object (e.g. purpose "terminal", object the replica set's name) and is
 * good once, within its lifetime. It lives in this gpuboxd's memory only:
 * the node that issues it is the node that redeems it (in a fleet, requests
 * for a set are forwarded to the set's node, so issue and use meet there).
 * A restart forgets every ticket, which only costs a browser a new one.
 */
#ifndef GPUBOX_SERVICE_TICKETS_H
#define GPUBOX_SERVICE_TICKETS_H

#include <stdbool.h>

#include "service/users/caller.h"
#include "util/err.h"

/* 32 random bytes in lower-case hex, and the NUL. */
#define TICKET_LEN 64
#define TICKET_SIZE (TICKET_LEN + 1)
/* How long a ticket is good for unless the issuer says otherwise. */
#define TICKET_TTL_S 30
/* At most this many live tickets in all, and per user; past either,
 * issuing answers ERR_QUOTA_EXCEEDED and never evicts a live ticket. */
#define TICKET_MAX_LIVE 4096
#define TICKET_MAX_PER_USER 64

/* A new ticket for who, good for ttl_s seconds (<= 0: TICKET_TTL_S), for
 * purpose and object (both copied, at most 127 and 255 bytes). */
int tickets_issue(const caller *who, const char *purpose, const char *object, int ttl_s,
                  char out[TICKET_SIZE], gb_err *err);

/* Spend ticket: true, and *who filled, when it was issued for exactly this
 * purpose and object and has neither been spent nor expired. A ticket that
 * does not match is spent anyway (it cannot be tried against other
 * objects). */
bool tickets_redeem(const char *ticket, const char *purpose, const char *object, caller *who);

/* Forget every ticket (tests, shutdown). */
void tickets_reset(void);

#endif
