/*
 * services.h - a replica set's web services (JupyterLab, TensorBoard, any
 * HTTP or WebSocket server in the instance), reached through gpuboxd's
 * proxy (src/proxy/, docs/services.md).
 *
 * A service is a name and a port of the container: {"name": "jupyter",
 * "port": 8888}. The proxy reaches it on the container's own address on
 * its owner's Docker network, so a service needs no host port and no
 * new container: like the run limits, services belong to the set, not to
 * a version (record.h), and a create or patch that changes only them
 * changes the record in place, in any state but deleted.
 *
 * In the record: "services": [{"name", "port", "public"?, "linkToken"?}].
 *   name       letters (lower case), digits and '_', a letter first, at
 *              most RS_SERVICE_NAME_MAX: it is a path segment and a part
 *              of a host name (SERVICE--SET.DOMAIN), so no '-' and no '.'
 *   public     anyone who reaches the proxy may use it (only an admin may
 *              turn it on; a patch by the owner may keep it on)
 *   linkToken  whoever holds the link (the URL with ?gpubox-link=TOKEN)
 *              may use it; made when a body says "link": true, kept by
 *              later patches that say so again, gone with "link": false
 * Who else may use a service: the set's owner and admins (the proxy's
 * authentication: the Authorization header, or a cookie it gave for a
 * ticket). Everyone else is answered as if the set did not exist.
 */
#ifndef GPUBOX_SERVICE_REPLICASET_SERVICES_H
#define GPUBOX_SERVICE_REPLICASET_SERVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "service/users/caller.h"
#include "util/err.h"
#include "util/names.h"

struct app;
struct app_config;

#define RS_SERVICES_MAX 16
#define RS_SERVICE_NAME_MAX 32
#define RS_SERVICE_LINK_MAX 80

/* A body's "services" (a list of {name, port, public?, link?}) checked
 * and made the record's form into *out (a new list). cur: the set's
 * services now (NULL for a create): a link keeps its token, a service
 * public before may stay public. Errors name the entry and field
 * (ERR_INVALID_PARAMS, ERR_WRONG_TYPE; ERR_FORBIDDEN when someone other
 * than an admin makes a service public). */
int replicaset_services_parse(const json_t *value, const json_t *cur, json_t **out, gb_err *err);

/* The answer's services of set: [{name, port, public, link, url,
 * linkUrl?}] (url null while the proxy is off, or cfg is NULL; linkUrl
 * only for the owner and admins). */
json_t *replicaset_services_answer(const struct app_config *cfg, const char *set, const char *owner,
                                   const json_t *services);

/* The URL of a service: path form <proxy>/s/SET/SERVICE/, or with
 * --proxy-domain SERVICE--SET.DOMAIN when the set's name can be a host
 * name. -1 when the proxy is off (or cfg NULL) or buf is too small. */
int replicaset_service_url(const struct app_config *cfg, const char *set, const char *service,
                           char *buf, size_t size);

/* Where the proxy sends a request for set/service, and what it needs to
 * check a link cookie. */
typedef struct replicaset_service_target {
    char address[64]; /* the container's IP address on its network */
    uint16_t port;
    char link[RS_SERVICE_LINK_MAX]; /* the service's link token; "" when none */
} replicaset_service_target;

/* May who (NULL: nobody signed in) reach set/service, or whoever holds
 * link (NULL: none)? 0 and *out filled when yes and it runs;
 * ERR_NOT_FOUND for every no (no such set or service, someone else's, a
 * wrong link), so nobody learns what exists; ERR_STATE_CONFLICT when
 * allowed but the set is not running; ERR_DOCKER_UNAVAILABLE when its
 * address cannot be learnt. auth_on false: everyone is an admin. */
int replicaset_service_resolve(struct app *a, const char *set, const char *service,
                               const caller *who, const char *link, replicaset_service_target *out,
                               gb_err *err);

/* POST /replicaSet/{name}/services/{service}/ticket: a single-use ticket
 * (service/tickets) for the caller, with the URL that spends it:
 * {ticket, url, expiresIn}. Only the owner and admins; others and
 * unknown names ERR_NOT_FOUND; the proxy off ERR_PROXY_OFF. */
int replicaset_service_ticket(struct app *a, const char *set, const char *service, json_t **out,
                              gb_err *err);

/* Is name a service name? (the rules above) */
int replicaset_service_name_check(const char *name, gb_err *err);

#endif
