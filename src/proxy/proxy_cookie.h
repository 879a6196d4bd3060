/*
 * proxy_cookie.h - the cookie the service proxy gives a browser for a
 * service, in exchange for a ticket or a link (docs/services.md).
 *
 * Its value is one of
 *   u.<expiry>.<role>.<hex of the user's name>.<HMAC-SHA256 in hex>
 *       a user: the MAC (a key this gpuboxd drew at start) covers the
 *       expiry, the role, the name, the set and the service, so the
 *       cookie is good for that one service, until it expires or gpuboxd
 *       restarts; the proxy still asks the store at every request whether
 *       that user may use the service (the owner, or an admin);
 *   l.<link token>
 *       a link: good as long as the service keeps that link token.
 * The cookie is HttpOnly, SameSite=Lax, Secure when the proxy's URL is
 * https, and scoped to the service (its path, or its own host name).
 */
#ifndef GPUBOX_PROXY_PROXY_COOKIE_H
#define GPUBOX_PROXY_PROXY_COOKIE_H

#include <stdbool.h>
#include <stddef.h>

#include "service/users/caller.h"

#define PROXY_COOKIE_NAME "gpubox_service"
#define PROXY_COOKIE_TTL_S (12 * 3600)
#define PROXY_COOKIE_MAX 320

/* The value of a user's cookie for set/service into out; -1 when it does
 * not fit. */
int proxy_cookie_user(const caller *who, const char *set, const char *service, char *out,
                      size_t size);

/* Read the proxy's cookies in a Cookie header for set/service: 1 a valid
 * user's (*who filled), 2 a link's (link filled), 0 none that holds. */
int proxy_cookie_read(const char *header, const char *set, const char *service, caller *who,
                      char *link, size_t link_size);

/* The Cookie header without the proxy's cookies into out; false when
 * nothing is left (drop the header). */
bool proxy_cookie_strip(const char *header, char *out, size_t size);

#endif
