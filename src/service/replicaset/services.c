/*
 * services.c - a replica set's web services: their rules, their URLs,
 * and the proxy's one question, "may this caller reach it, and where is
 * it?" (services.h).
 *
 * The container's address is asked of Docker once per container and kept
 * in a small cache keyed by container id: a new version is a new
 * container (a new id) and so a new question; a container that restarts
 * keeps its address on a user-defined network. Who may use a service is
 * always the store's word: the fields of the record the proxy needs
 * (service_view) are parsed once per write of the record and kept, and
 * every request first asks the store whether the record's mod_revision
 * is still the one they were read at.
 */
#include "service/replicaset/services.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/keys.h"
#include "service/records.h"
#include "service/replicaset/internal.h"
#include "service/tickets/tickets.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/token.h"

int replicaset_service_name_check(const char *name, gb_err *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0)
        return err_set(err, ERR_INVALID_NAME, "service name is empty");
    if (len > RS_SERVICE_NAME_MAX)
        return err_set(err, ERR_INVALID_NAME, "service name is %zu characters long; at most %d",
                       len, RS_SERVICE_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (i > 0 && ((c >= '0' && c <= '9') || c == '_'));
        if (!ok)
            return err_set(err, ERR_INVALID_NAME,
                           "service name '%.40s' may hold only lower-case letters, digits and "
                           "'_', and starts with a letter (it is part of a URL and a host name)",
                           name);
    }
    return 0;
}

static const json_t *services_find(const json_t *list, const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *n = json_string_value(json_object_get(s, "name"));
        if (n && strcmp(n, name) == 0)
            return s;
    }
    return NULL;
}

static bool caller_is_admin(void)
{
    const caller *c = users_caller_current();
    return !c || c->role == USER_ROLE_ADMIN;
}

/* One entry of a body's list, i its place (for messages), into the
 * record's form. */
static int service_parse(const json_t *v, size_t i, const json_t *cur, json_t **out, gb_err *err)
{
    static const char *const fields[] = {"name", "port", "public", "link", NULL};
    if (!json_is_object(v))
        return err_set(err, ERR_WRONG_TYPE,
                       "services[%zu] must be an object {\"name\": \"jupyter\", \"port\": 8888}, "
                       "not %s",
                       i, json_type_name(v));
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x)
    {
        bool known = false;
        for (size_t f = 0; fields[f]; f++)
            known = known || strcmp(key, fields[f]) == 0;
        if (!known)
            return err_set(err, ERR_INVALID_PARAMS,
                           "services[%zu] has the unknown field '%.40s'; a service takes name, "
                           "port, public and link",
                           i, key);
    }
    json_t *name = json_object_get(v, "name"), *port = json_object_get(v, "port");
    json_t *pub = json_object_get(v, "public"), *link = json_object_get(v, "link");
    if (!json_is_string(name))
        return err_set(err, ERR_INVALID_PARAMS,
                       "services[%zu].name must be a string such as "
                       "\"jupyter\"",
                       i);
    if (replicaset_service_name_check(json_string_value(name), err) < 0)
        return err_prefix(err, "services[%zu]", i);
    if (!json_is_integer(port) || json_integer_value(port) < 1 || json_integer_value(port) > 65535)
        return err_set(err, ERR_INVALID_PARAMS,
                       "services[%zu].port must be the container's port, a whole number from 1 "
                       "to 65535",
                       i);
    if ((pub && !json_is_boolean(pub)) || (link && !json_is_boolean(link)))
        return err_set(err, ERR_WRONG_TYPE, "services[%zu].%s must be true or false", i,
                       pub && !json_is_boolean(pub) ? "public" : "link");
    const json_t *before = cur ? services_find(cur, json_string_value(name)) : NULL;
    bool was_public = before && json_is_true(json_object_get(before, "public"));
    if (json_is_true(pub) && !was_public && !caller_is_admin())
        return err_set(err, ERR_FORBIDDEN,
                       "services[%zu] (%s): only an admin may make a service public; use "
                       "\"link\": true for a link to share",
                       i, json_string_value(name));
    *out = json_pack("{s:O, s:O}", "name", name, "port", port);
    if (json_is_true(pub))
        json_object_set_new(*out, "public", json_true());
    if (json_is_true(link)) {
        const char *old = before ? json_string_value(json_object_get(before, "linkToken")) : NULL;
        char token[RS_SERVICE_LINK_MAX];
        if (!old && token_new(token, sizeof(token), err) < 0) {
            json_decref(*out);
            return -1;
        }
        json_object_set_new(*out, "linkToken", json_string(old ? old : token));
    }
    return 0;
}

int replicaset_services_parse(const json_t *value, const json_t *cur, json_t **out, gb_err *err)
{
    *out = NULL;
    if (json_is_null(value)) {
        *out = json_array();
        return 0;
    }
    if (!json_is_array(value))
        return err_set(err, ERR_WRONG_TYPE,
                       "services must be a list such as [{\"name\": \"jupyter\", \"port\": 8888}], "
                       "not %s",
                       json_type_name(value));
    if (json_array_size(value) > RS_SERVICES_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "services lists %zu services; at most %d",
                       json_array_size(value), RS_SERVICES_MAX);
    _cleanup_json_ json_t *list = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(value, i, v)
    {
        json_t *s = NULL;
        if (service_parse(v, i, cur, &s, err) < 0)
            return -1;
        const char *name = json_string_value(json_object_get(s, "name"));
        if (services_find(list, name)) {
            json_decref(s);
            return err_set(err, ERR_INVALID_PARAMS,
                           "services names '%s' twice; each service needs its own name", name);
        }
        json_array_append_new(list, s);
    }
    *out = steal_ptr(&list);
    return 0;
}

/* Can name be a label of a host name as it is (lower-case letters and
 * digits; '_' and '.' cannot, and case would be lost)? */
static bool services_host_label(const char *name)
{
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            return false;
    return *name != '\0';
}

int replicaset_service_url(const app_config *cfg, const char *set, const char *service, char *buf,
                           size_t size)
{
    if (!cfg || !cfg->proxy_url)
        return -1;
    int n;
    if (cfg->proxy_domain && services_host_label(set)) {
        /* scheme://host[:port] -> scheme://SERVICE--SET.DOMAIN[:port] */
        const char *scheme_end = strstr(cfg->proxy_url, "://");
        const char *host = scheme_end ? scheme_end + 3 : cfg->proxy_url;
        const char *port = host[0] == '[' ? strchr(host, ']') : host;
        port = port ? strrchr(port, ':') : NULL;
        n = snprintf(buf, size, "%.*s%s--%s.%s%s/", (int)(host - cfg->proxy_url), cfg->proxy_url,
                     service, set, cfg->proxy_domain, port ? port : "");
    } else {
        n = snprintf(buf, size, "%s/s/%s/%s/", cfg->proxy_url, set, service);
    }
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

json_t *replicaset_services_answer(const app_config *cfg, const char *set, const char *owner,
                                   const json_t *services)
{
    json_t *list = json_array();
    const caller *c = users_caller_current();
    bool may_link = !c || c->role == USER_ROLE_ADMIN ||
                    (c->role == USER_ROLE_USER && strcmp(c->name, owner) == 0);
    size_t i;
    json_t *s;
    json_array_foreach(services, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *link = json_string_value(json_object_get(s, "linkToken"));
        char url[512];
        bool has_url = name && replicaset_service_url(cfg, set, name, url, sizeof(url)) == 0;
        json_t *e = json_pack("{s:s?, s:O?, s:b, s:b, s:s?}", "name", name, "port",
                              json_object_get(s, "port"), "public",
                              json_is_true(json_object_get(s, "public")), "link", link != NULL,
                              "url", has_url ? url : NULL);
        if (!e)
            continue;
        if (!has_url)
            json_object_set_new(e, "url", json_null());
        if (has_url && link && may_link) {
            char with[640];
            snprintf(with, sizeof(with), "%s?gpubox-link=%s", url, link);
            json_object_set_new(e, "linkUrl", json_string(with));
        }
        json_array_append_new(list, e);
    }
    return list;
}

/* ---- the proxy's question ------------------------------------------------------ */

#define ADDRESS_CACHE 64

typedef struct address_entry {
    char container_id[80];
    char address[64];
} address_entry;

static pthread_mutex_t address_lock = PTHREAD_MUTEX_INITIALIZER;
static address_entry address_cache[ADDRESS_CACHE];
static size_t address_next;

static int service_address(app *a, const char *container_id, const char *owner, char *out,
                           size_t size, gb_err *err)
{
    pthread_mutex_lock(&address_lock);
    for (size_t i = 0; i < ADDRESS_CACHE; i++) {
        if (address_cache[i].container_id[0] &&
            strcmp(address_cache[i].container_id, container_id) == 0) {
            snprintf(out, size, "%s", address_cache[i].address);
            pthread_mutex_unlock(&address_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&address_lock);
    char network[96];
    replicaset_network_name(owner, network, sizeof(network));
    char addr[64];
    if (docker_container_address(a->docker, container_id, network, addr, sizeof(addr), err) < 0)
        return -1;
    pthread_mutex_lock(&address_lock);
    address_entry *e = &address_cache[address_next++ % ADDRESS_CACHE];
    snprintf(e->container_id, sizeof(e->container_id), "%s", container_id);
    snprintf(e->address, sizeof(e->address), "%s", addr);
    pthread_mutex_unlock(&address_lock);
    snprintf(out, size, "%s", addr);
    return 0;
}

static bool link_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* ---- the records the proxy reads, kept while the store says they are current ---- */

/* What the proxy needs of a set's record (its owner, state, container
 * and services), copied out of it: the record's spec and holdings are
 * never parsed for a request. */
typedef struct service_entry {
    char name[RS_SERVICE_NAME_MAX + 1];
    uint16_t port;
    bool public;
    char link[RS_SERVICE_LINK_MAX]; /* "" when none */
} service_entry;

typedef struct service_view {
    const store *store; /* whose record: one process may hold more than one store */
    char set[NAME_MAX_LEN + 1];
    int64_t mod_revision; /* of the record these fields came from */
    char owner[USER_NAME_MAX + 1];
    char state[24];
    char container_id[80];
    size_t nservices;
    service_entry services[RS_SERVICES_MAX];
} service_view;

/* The views read last, one per set, in a small ring. An entry is used
 * only when the store says the record's mod_revision is still the one it
 * was read at (store_get_revision: one small read, no value, no parse),
 * so every write of the record (a service removed or made private, the
 * set stopped, deleted, made again by someone else) applies to the very
 * next request. */
#define VIEW_CACHE 64

static pthread_mutex_t view_lock = PTHREAD_MUTEX_INITIALIZER;
static service_view view_cache[VIEW_CACHE];
static size_t view_next;

static bool view_copy(char *dst, size_t size, const char *src)
{
    return src && (size_t)snprintf(dst, size, "%s", src) < size;
}

/* The fields of record into *v; false when one is missing or larger than
 * a record written by gpubox can hold (then nobody may use the set). */
static bool view_from_record(const json_t *record, service_view *v)
{
    const char *owner = json_string_value(json_object_get(record, "owner"));
    const char *id = json_string_value(json_object_get(record, "containerId"));
    if (!view_copy(v->state, sizeof(v->state),
                   json_string_value(json_object_get(record, "state"))) ||
        !view_copy(v->owner, sizeof(v->owner), owner ? owner : "") ||
        !view_copy(v->container_id, sizeof(v->container_id), id ? id : ""))
        return false;
    const json_t *list = json_object_get(record, "services");
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        if (v->nservices == RS_SERVICES_MAX)
            return false;
        service_entry *e = &v->services[v->nservices++];
        const char *link = json_string_value(json_object_get(s, "linkToken"));
        if (!view_copy(e->name, sizeof(e->name), json_string_value(json_object_get(s, "name"))) ||
            !view_copy(e->link, sizeof(e->link), link ? link : ""))
            return false;
        e->port = (uint16_t)json_integer_value(json_object_get(s, "port"));
        e->public = json_is_true(json_object_get(s, "public"));
    }
    return true;
}

/* set's view as the store has it now: 1 filled, 0 no such record (or one
 * the proxy cannot read), -1 store error. */
static int service_view_load(app *a, const char *set, service_view *v, gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset(key, sizeof(key), set);
    int64_t rev = 0;
    int found = store_get_revision(a->store, key, &rev, err);
    if (found <= 0)
        return found;
    pthread_mutex_lock(&view_lock);
    for (size_t i = 0; i < VIEW_CACHE; i++) {
        if (view_cache[i].store == a->store && view_cache[i].mod_revision == rev &&
            strcmp(view_cache[i].set, set) == 0) {
            *v = view_cache[i];
            pthread_mutex_unlock(&view_lock);
            return 1;
        }
    }
    pthread_mutex_unlock(&view_lock);
    _cleanup_json_ json_t *record = NULL;
    found = records_get_json(a->store, key, "replica set", &record, &rev, err);
    if (found <= 0)
        return found;
    memset(v, 0, sizeof(*v));
    v->store = a->store;
    snprintf(v->set, sizeof(v->set), "%s", set);
    v->mod_revision = rev;
    if (!view_from_record(record, v))
        return 0;
    pthread_mutex_lock(&view_lock);
    size_t slot = VIEW_CACHE;
    for (size_t i = 0; i < VIEW_CACHE && slot == VIEW_CACHE; i++)
        if (view_cache[i].store == a->store && strcmp(view_cache[i].set, set) == 0)
            slot = i; /* an older revision of the same set: replaced */
    if (slot == VIEW_CACHE)
        slot = view_next++ % VIEW_CACHE;
    view_cache[slot] = *v;
    pthread_mutex_unlock(&view_lock);
    return 1;
}

static const service_entry *view_service(const service_view *v, const char *name)
{
    for (size_t i = 0; i < v->nservices; i++)
        if (strcmp(v->services[i].name, name) == 0)
            return &v->services[i];
    return NULL;
}

int replicaset_service_resolve(app *a, const char *set, const char *service, const caller *who,
                               const char *link, replicaset_service_target *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    gb_err ignored = GB_ERR_INIT;
    service_view v;
    bool named = name_check_replicaset(set, &ignored) == 0 &&
                 replicaset_service_name_check(service, &ignored) == 0;
    int found = named ? service_view_load(a, set, &v, err) : 0;
    if (found < 0)
        return -1;
    const service_entry *s =
        found > 0 && strcmp(v.state, "deleted") != 0 ? view_service(&v, service) : NULL;
    const char *token = s && s->link[0] ? s->link : NULL;
    bool allowed =
        s && (!a->cfg.auth_on || s->public ||
              (who && (who->role == USER_ROLE_ADMIN || strcmp(who->name, v.owner) == 0)) ||
              (link && token && link_equal(link, token)));
    if (!allowed)
        return err_set(err, ERR_NOT_FOUND, "no service %.40s of a replica set %.64s", service, set);
    if (token)
        snprintf(out->link, sizeof(out->link), "%s", token);
    out->port = s->port;
    if (strcmp(v.state, "running") != 0 || !v.container_id[0])
        return err_set(err, ERR_STATE_CONFLICT, "replica set %s is %s; start it to reach %s", set,
                       v.state, service);
    return service_address(a, v.container_id, v.owner, out->address, sizeof(out->address), err);
}

int replicaset_service_ticket(app *a, const char *set, const char *service, json_t **out,
                              gb_err *err)
{
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    if (replicaset_record_load_named(a, set, &r, err) < 0)
        return -1;
    const caller *c = users_caller_current();
    bool may = !c || c->role == USER_ROLE_ADMIN ||
               (c->role == USER_ROLE_USER && strcmp(c->name, r.owner) == 0);
    if (!may || r.state == RS_STATE_DELETED || !services_find(r.services, service))
        return err_set(err, ERR_NOT_FOUND, "replica set '%s' has no service named '%.40s'", set,
                       service);
    char url[512];
    if (replicaset_service_url(&a->cfg, set, service, url, sizeof(url)) < 0)
        return err_set(err, ERR_PROXY_OFF,
                       "the service proxy is off; start gpuboxd with --proxy-listen ADDR:PORT");
    caller anyone = {.name = USER_ANONYMOUS, .role = USER_ROLE_ADMIN};
    char object[NAME_MAX_LEN + RS_SERVICE_NAME_MAX + 2];
    snprintf(object, sizeof(object), "%s/%s", set, service);
    char ticket[TICKET_SIZE];
    if (tickets_issue(c ? c : &anyone, "service", object, TICKET_TTL_S, ticket, err) < 0)
        return -1;
    char with[640];
    snprintf(with, sizeof(with), "%s?gpubox-ticket=%s", url, ticket);
    *out = json_pack("{s:s, s:s, s:i}", "ticket", ticket, "url", with, "expiresIn", TICKET_TTL_S);
    token_wipe(ticket, sizeof(ticket));
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}
