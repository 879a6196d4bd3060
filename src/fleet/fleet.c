/*
 * fleet.c - joining the fleet, the heartbeat, the node list and cordons
 * (the key layout is in fleet.h).
 *
 * The heartbeat thread publishes members/<node> and capacity/<node> in one
 * transaction with the lease of the node's claim, every FLEET_HEARTBEAT_MS
 * or at once after fleet_poke. Without a held claim it publishes nothing:
 * the keys then expire with the lease, which is what the other nodes must
 * see of a node that may not change anything.
 */
#include "util/xalloc.h"
#include "fleet/fleet_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/time.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool label_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '/';
}

static int label_part_check(const char *s, size_t len, const char *what, gb_err *err)
{
    if (len > 63)
        return err_set(err, ERR_INVALID_PARAMS, "node label %s '%.*s' is longer than 63", what,
                       (int)len, s);
    for (size_t i = 0; i < len; i++)
        if (!label_char_ok(s[i]))
            return err_set(err, ERR_INVALID_PARAMS,
                           "node label %s '%.*s' has '%c'; use letters, digits and _ . - /", what,
                           (int)len, s, s[i]);
    return 0;
}

int fleet_labels_parse(const char *text, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *labels = json_object();
    const char *p = text ? text : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (!eq || eq == p)
            return err_set(err, ERR_INVALID_PARAMS,
                           "node label '%.*s' is not KEY=VALUE (e.g. zone=a,gpu=a100)", (int)len,
                           p);
        size_t klen = (size_t)(eq - p), vlen = len - klen - 1;
        if (label_part_check(p, klen, "key", err) < 0 ||
            label_part_check(eq + 1, vlen, "value", err) < 0)
            return -1;
        _cleanup_free_ char *key = xstrndup(p, klen);
        json_object_set_new(labels, key, json_stringn(eq + 1, vlen));
        p += len;
        if (*p == ',')
            p++;
    }
    *out = json_incref(labels);
    return 0;
}

int fleet_node_name_check(const char *name, gb_err *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= FLEET_NODE_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "node name '%s' must be 1-%d characters",
                       name ? name : "", FLEET_NODE_MAX - 1);
    if (!isalnum((unsigned char)name[0]))
        return err_set(err, ERR_INVALID_NAME, "node name '%s' must start with a letter or digit",
                       name);
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
            return err_set(err, ERR_INVALID_NAME,
                           "node name '%s' has '%c'; use letters, digits and _ . -", name, name[i]);
    return 0;
}

const char *fleet_node(const fleet *f)
{
    return f->node;
}

const char *fleet_root_url(const fleet *f)
{
    return f->root_url;
}

const char *fleet_node_state_name(enum fleet_node_state s)
{
    switch (s) {
    case FLEET_NODE_READY:
        return "ready";
    case FLEET_NODE_CORDONED:
        return "cordoned";
    case FLEET_NODE_UNREACHABLE:
        break;
    }
    return "unreachable";
}

char *fleet_key(const char *dir, const char *name)
{
    return xasprintf("%s/%s", dir, name);
}

/* ---- registry ---------------------------------------------------------------- */

/* Read registry/<node>, let edit change it (entry is NULL when absent:
 * edit returns the new entry, or NULL to refuse with *err), write it back
 * if nobody wrote it meanwhile (compare-and-swap on its revision). */
typedef json_t *(*registry_edit_fn)(json_t *entry, void *ctx, gb_err *err);

static int registry_update(fleet *f, const char *node, registry_edit_fn edit, void *ctx,
                           gb_err *err)
{
    _cleanup_free_ char *key = fleet_key(FLEET_KEY_REGISTRY, node);
    for (int attempt = 0; attempt < 10; attempt++) {
        store_kv kv = {0};
        int found = store_get(f->store, key, &kv, err);
        if (found < 0)
            return err_prefix(err, "reading the fleet's registry");
        _cleanup_json_ json_t *old = found ? json_loads(kv.value, 0, NULL) : NULL;
        int64_t rev = found ? kv.mod_revision : 0;
        store_kv_free(&kv);
        if (found && !json_is_object(old))
            return err_set(err, ERR_INTERNAL, "the fleet registry entry of node %s is not JSON",
                           node);
        _cleanup_json_ json_t *entry = edit(old, ctx, err);
        if (!entry)
            return -1;
        _cleanup_free_ char *value = json_dumps(entry, JSON_COMPACT);
        store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
        store_op op = {.kind = STORE_OP_PUT, .key = key, .value = value};
        bool ok = false;
        if (store_txn(f->store, &cmp, 1, &op, 1, &ok, NULL, err) < 0)
            return err_prefix(err, "writing the fleet's registry");
        if (ok)
            return 0;
    }
    return err_set(err, ERR_CONFLICT, "the fleet registry entry of node %s keeps changing; retry",
                   node);
}

/* This start's advertise URL and labels, keeping a cordon set earlier (by
 * anyone) and the time it first joined. */
static json_t *registry_join(json_t *old, void *ctx, gb_err *err)
{
    (void)err;
    fleet *f = ctx;
    f->cordoned_at_join = json_is_true(json_object_get(old, "cordoned"));
    json_t *joined = json_object_get(old, "joined");
    return json_pack(
        "{s:s, s:s, s:O, s:b, s:I}", "node", f->node, "advertise", f->advertise, "labels",
        f->labels, "cordoned", f->cordoned_at_join, "joined",
        (json_int_t)(json_is_integer(joined) ? json_integer_value(joined) : now_ms() / 1000));
}

struct cordon_ctx {
    const char *node;
    bool cordoned;
};

static json_t *registry_cordon(json_t *old, void *ctx, gb_err *err)
{
    struct cordon_ctx *c = ctx;
    if (!old) {
        err_set(err, ERR_NOT_FOUND, "no node named '%s' in the fleet", c->node);
        return NULL;
    }
    json_t *entry = json_deep_copy(old);
    json_object_set_new(entry, "cordoned", json_boolean(c->cordoned));
    return entry;
}

static int fleet_register(fleet *f, gb_err *err)
{
    return registry_update(f, f->node, registry_join, f, err);
}

int fleet_cordon(fleet *f, const char *node, bool cordoned, gb_err *err)
{
    if (fleet_node_name_check(node, err) < 0)
        return -1;
    struct cordon_ctx c = {node, cordoned};
    if (registry_update(f, node, registry_cordon, &c, err) < 0)
        return -1;
    log_info("fleet: node %s %s", node, cordoned ? "cordoned" : "uncordoned");
    return 0;
}

int fleet_cordoned(fleet *f, const char *node, gb_err *err)
{
    _cleanup_free_ char *key = fleet_key(FLEET_KEY_REGISTRY, node);
    store_kv kv = {0};
    int found = store_get(f->store, key, &kv, err);
    if (found < 0)
        return err_prefix(err, "reading the fleet's registry");
    _cleanup_json_ json_t *entry = found ? json_loads(kv.value, 0, NULL) : NULL;
    store_kv_free(&kv);
    return json_is_true(json_object_get(entry, "cordoned")) ? 1 : 0;
}

/* ---- heartbeat ----------------------------------------------------------------- */

/* members/<node> and capacity/<node> on the claim's lease, in one
 * transaction. 0 when there is no lease to publish on (the claim is not
 * held): nothing is written. */
static int fleet_publish(fleet *f, gb_err *err)
{
    int64_t lease = store_claim_lease(f->node_store);
    if (!lease)
        return 0;
    int64_t now = now_ms();
    _cleanup_json_ json_t *member =
        json_pack("{s:s, s:s, s:O, s:s, s:I, s:I}", "node", f->node, "advertise", f->advertise,
                  "labels", f->labels, "version", f->version, "started", (json_int_t)f->started,
                  "heartbeat", (json_int_t)now);
    _cleanup_json_ json_t *capacity = f->capacity ? f->capacity(f->capacity_ctx) : NULL;
    if (!capacity)
        capacity = json_object();
    json_object_set_new(capacity, "node", json_string(f->node));
    json_object_set_new(capacity, "updated", json_integer(now));
    _cleanup_free_ char *mv = json_dumps(member, JSON_COMPACT);
    _cleanup_free_ char *cv = json_dumps(capacity, JSON_COMPACT);
    _cleanup_free_ char *mk = fleet_key(FLEET_KEY_MEMBERS, f->node);
    _cleanup_free_ char *ck = fleet_key(FLEET_KEY_CAPACITY, f->node);
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = mk, .value = mv, .lease = lease},
        {.kind = STORE_OP_PUT, .key = ck, .value = cv, .lease = lease},
    };
    bool ok = false;
    if (store_txn(f->store, NULL, 0, ops, 2, &ok, NULL, err) < 0)
        return err_prefix(err, "publishing this node's membership");
    return 0;
}

static void *fleet_heartbeat_main(void *arg)
{
    fleet *f = arg;
    bool failing = false;
    pthread_mutex_lock(&f->lock);
    while (!f->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t ns = until.tv_nsec + (int64_t)FLEET_HEARTBEAT_MS * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        while (!f->stopping && !f->poked)
            if (pthread_cond_timedwait(&f->wake, &f->lock, &until) != 0)
                break;
        if (f->stopping)
            break;
        f->poked = false;
        pthread_mutex_unlock(&f->lock);
        gb_err err = GB_ERR_INIT;
        if (fleet_publish(f, &err) < 0) {
            if (!failing)
                log_warn("fleet: %s; trying again every %d ms", err.msg, FLEET_HEARTBEAT_MS);
            failing = true;
        } else if (failing) {
            log_info("fleet: publishing this node's membership again");
            failing = false;
        }
        pthread_mutex_lock(&f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int fleet_publish_now(fleet *f, gb_err *err)
{
    return f ? fleet_publish(f, err) : 0;
}

void fleet_poke(fleet *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->poked = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
}

int fleet_open(const fleet_config *cfg, fleet **out, gb_err *err)
{
    if (fleet_node_name_check(cfg->node, err) < 0)
        return err_prefix(err, "--node");
    _cleanup_json_ json_t *labels = NULL;
    if (fleet_labels_parse(cfg->labels, &labels, err) < 0)
        return err_prefix(err, "--node-labels");
    _cleanup_free_ char *url = store_url_child(cfg->root_url, "fleet");
    if (!url)
        return err_set(err, ERR_INVALID_PARAMS, "--node needs an etcd store (--store etcd://...)");
    fleet *f = xcalloc(1, sizeof(*f));
    f->node = xstrdup(cfg->node);
    f->advertise = xstrdup(cfg->advertise);
    f->version = xstrdup(cfg->version ? cfg->version : "");
    f->root_url = xstrdup(cfg->root_url);
    f->labels = json_incref(labels);
    f->node_store = cfg->node_store;
    f->capacity = cfg->capacity;
    f->capacity_ctx = cfg->capacity_ctx;
    f->started = now_ms() / 1000;
    pthread_mutex_init(&f->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (store_open(url, &f->store, err) < 0 || fleet_secret_load(f, cfg->secret_file, err) < 0 ||
        fleet_register(f, err) < 0 || fleet_publish(f, err) < 0) {
        fleet_close(f);
        return err_prefix(err, "joining the fleet as node %s", cfg->node);
    }
    if (pthread_create(&f->thread, NULL, fleet_heartbeat_main, f) != 0) {
        fleet_close(f);
        return err_set(err, ERR_INTERNAL, "cannot start the fleet heartbeat thread");
    }
    f->thread_started = true;
    log_info("fleet: joined as node %s (advertise %s%s)", f->node, f->advertise,
             f->cordoned_at_join ? ", cordoned" : "");
    *out = f;
    return 0;
}

void fleet_close(fleet *f)
{
    if (!f)
        return;
    if (f->thread_started) {
        pthread_mutex_lock(&f->lock);
        f->stopping = true;
        pthread_cond_signal(&f->wake);
        pthread_mutex_unlock(&f->lock);
        pthread_join(f->thread, NULL);
        gb_err err = GB_ERR_INIT;
        _cleanup_free_ char *mk = fleet_key(FLEET_KEY_MEMBERS, f->node);
        _cleanup_free_ char *ck = fleet_key(FLEET_KEY_CAPACITY, f->node);
        store_op ops[] = {{.kind = STORE_OP_DELETE, .key = mk},
                          {.kind = STORE_OP_DELETE, .key = ck}};
        bool ok = false;
        if (store_txn(f->store, NULL, 0, ops, 2, &ok, NULL, &err) < 0)
            log_warn("fleet: leaving: %s (the keys go with the lease)", err.msg);
        else
            log_info("fleet: left (node %s)", f->node);
    }
    for (size_t i = 0; i < f->n_peer_stores; i++) {
        free(f->peer_stores[i].node);
        store_close(f->peer_stores[i].store);
    }
    free(f->peer_stores);
    fleet_http_free(f);
    fleet_secret_free(f);
    if (f->store)
        store_close(f->store);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->wake);
    json_decref(f->labels);
    free(f->node);
    free(f->advertise);
    free(f->version);
    free(f->root_url);
    free(f);
}

/* ---- the node list ------------------------------------------------------------- */

void fleet_member_clear(fleet_member *m)
{
    json_decref(m->labels);
    json_decref(m->capacity);
    *m = (fleet_member){0};
}

void fleet_members_free(fleet_member *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fleet_member_clear(&m[i]);
    free(m);
}

static json_t *kvs_find_json(const store_kvs *kvs, const char *dir, const char *node)
{
    _cleanup_free_ char *key = fleet_key(dir, node);
    for (size_t i = 0; i < kvs->n; i++)
        if (strcmp(kvs->items[i].key, key) == 0)
            return json_loads(kvs->items[i].value, 0, NULL);
    return NULL;
}

static void copy_str(char *dst, size_t size, json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    snprintf(dst, size, "%s", s ? s : "");
}

/* The registry, then the members and capacity records: three ranges (not
 * one over the fleet's prefix, which holds every name of the fleet too). */
int fleet_members(fleet *f, bool with_capacity, fleet_member **out, size_t *n, gb_err *err)
{
    *out = NULL;
    *n = 0;
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    _cleanup_(store_kvs_free) store_kvs members = {0};
    _cleanup_(store_kvs_free) store_kvs capacity = {0};
    if (store_range(f->store, FLEET_KEY_REGISTRY "/", &kvs, err) < 0 ||
        store_range(f->store, FLEET_KEY_MEMBERS "/", &members, err) < 0 ||
        (with_capacity && store_range(f->store, FLEET_KEY_CAPACITY "/", &capacity, err) < 0))
        return err_prefix(err, "reading the fleet's members");
    size_t plen = strlen(FLEET_KEY_REGISTRY) + 1;
    fleet_member *list = NULL;
    size_t count = 0;
    for (size_t i = 0; i < kvs.n; i++) {
        const char *key = kvs.items[i].key;
        if (strncmp(key, FLEET_KEY_REGISTRY "/", plen) != 0)
            continue;
        _cleanup_json_ json_t *reg = json_loads(kvs.items[i].value, 0, NULL);
        if (!json_is_object(reg))
            continue;
        list = xrealloc(list, (count + 1) * sizeof(*list));
        fleet_member *m = &list[count++];
        *m = (fleet_member){0};
        snprintf(m->name, sizeof(m->name), "%s", key + plen);
        _cleanup_json_ json_t *member = kvs_find_json(&members, FLEET_KEY_MEMBERS, m->name);
        json_t *src = member ? member : reg;
        copy_str(m->advertise, sizeof(m->advertise), src, "advertise");
        copy_str(m->version, sizeof(m->version), member, "version");
        json_t *labels = json_object_get(src, "labels");
        m->labels = json_is_object(labels) ? json_incref(labels) : json_object();
        m->cordoned = json_is_true(json_object_get(reg, "cordoned"));
        m->alive = member != NULL;
        m->heartbeat = json_integer_value(json_object_get(member, "heartbeat"));
        m->capacity = member ? kvs_find_json(&capacity, FLEET_KEY_CAPACITY, m->name) : NULL;
        m->state = !m->alive     ? FLEET_NODE_UNREACHABLE
                   : m->cordoned ? FLEET_NODE_CORDONED
                                 : FLEET_NODE_READY;
    }
    *out = list;
    *n = count;
    return 0;
}

int fleet_member_reach(fleet *f, const char *node, char *advertise, size_t size, gb_err *err)
{
    _cleanup_free_ char *key = fleet_key(FLEET_KEY_MEMBERS, node);
    store_kv kv = {0};
    int found = store_get(f->store, key, &kv, err);
    if (found < 0)
        return err_prefix(err, "reading the fleet's members");
    if (found) {
        _cleanup_json_ json_t *member = json_loads(kv.value, 0, NULL);
        store_kv_free(&kv);
        copy_str(advertise, size, member, "advertise");
        if (advertise[0])
            return 1;
    }
    _cleanup_free_ char *reg = fleet_key(FLEET_KEY_REGISTRY, node);
    found = store_get(f->store, reg, &kv, err);
    store_kv_free(&kv);
    if (found < 0)
        return err_prefix(err, "reading the fleet's registry");
    if (!found)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node %s is not in the fleet", node);
    return 0;
}

int fleet_member_get(fleet *f, const char *node, fleet_member *out, gb_err *err)
{
    fleet_member *list = NULL;
    size_t n = 0;
    if (fleet_members(f, true, &list, &n, err) < 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (!found && strcmp(list[i].name, node) == 0) {
            *out = list[i];
            list[i] = (fleet_member){0};
            found = 1;
        }
    }
    fleet_members_free(list, n);
    return found;
}

json_t *fleet_member_json(const fleet_member *m)
{
    json_t *devices = json_object_get(m->capacity, "devices");
    long total = 0, free_whole = 0;
    _cleanup_json_ json_t *models = json_array();
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d)
    {
        total++;
        const char *mode = json_string_value(json_object_get(d, "mode"));
        if (mode && strcmp(mode, "free") == 0 && json_is_true(json_object_get(d, "healthy")) &&
            !json_is_true(json_object_get(d, "excluded")))
            free_whole++;
        const char *model = json_string_value(json_object_get(d, "model"));
        bool seen = false;
        size_t j;
        json_t *x;
        json_array_foreach(models, j, x) seen =
            seen || (model && strcmp(json_string_value(x), model) == 0);
        if (model && !seen)
            json_array_append_new(models, json_string(model));
    }
    char hb[40] = "";
    if (m->heartbeat > 0)
        time_iso_format((time_t)(m->heartbeat / 1000), hb, sizeof(hb));
    json_t *ports = json_object_get(json_object_get(m->capacity, "ports"), "availableCount");
    json_t *vol = json_object_get(json_object_get(m->capacity, "volumes"), "freeBytes");
    return json_pack("{s:s, s:s, s:s, s:O, s:s, s:s?, s:b, s:{s:I, s:I, s:O}, s:O?, s:O?, s:O?}",
                     "name", m->name, "state", fleet_node_state_name(m->state), "advertise",
                     m->advertise, "labels", m->labels, "version", m->version, "lastHeartbeat",
                     hb[0] ? hb : NULL, "cordoned", m->cordoned, "gpus", "total", (json_int_t)total,
                     "free", (json_int_t)free_whole, "models", models, "freePorts", ports,
                     "volumeFreeBytes", vol, "devices", devices);
}
