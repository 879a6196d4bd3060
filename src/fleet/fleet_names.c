/*
 * fleet_names.c - the fleet-wide name index: names/{replicasets,volumes}/
 * <name> says which node owns a name (fleet.h). Every change is a
 * compare-and-swap, so two nodes racing for one name cannot both win.
 */
#include "util/xalloc.h"
#include "fleet/fleet_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"

static char *name_key(enum fleet_name_kind kind, const char *name)
{
    return xasprintf(FLEET_KEY_NAMES "/%s/%s",
                     kind == FLEET_NAME_VOLUME ? "volumes" : "replicasets", name);
}

/* The entry of name: 1 with its node, since and revision, 0 absent. */
static int name_read(fleet *f, const char *key, char *node, size_t size, int64_t *since,
                     int64_t *rev, gb_err *err)
{
    store_kv kv = {0};
    int found = store_get(f->store, key, &kv, err);
    if (found <= 0)
        return found < 0 ? err_prefix(err, "reading the fleet's name index") : 0;
    _cleanup_json_ json_t *v = json_loads(kv.value, 0, NULL);
    *rev = kv.mod_revision;
    store_kv_free(&kv);
    const char *n = json_string_value(json_object_get(v, "node"));
    snprintf(node, size, "%s", n ? n : "");
    *since = json_integer_value(json_object_get(v, "since"));
    return 1;
}

/* Put key -> node if its revision is still rev (0: absent). */
static int name_write(fleet *f, const char *key, const char *node, int64_t rev, bool *ok,
                      gb_err *err)
{
    _cleanup_json_ json_t *v =
        json_pack("{s:s, s:I}", "node", node, "since", (json_int_t)time(NULL));
    _cleanup_free_ char *value = json_dumps(v, JSON_COMPACT);
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
    store_op op = {.kind = STORE_OP_PUT, .key = key, .value = value};
    if (store_txn(f->store, &cmp, 1, &op, 1, ok, NULL, err) < 0)
        return err_prefix(err, "writing the fleet's name index");
    return 0;
}

int fleet_name_owner(fleet *f, enum fleet_name_kind kind, const char *name, char *node, size_t size,
                     gb_err *err)
{
    _cleanup_free_ char *key = name_key(kind, name);
    int64_t since = 0, rev = 0;
    return name_read(f, key, node, size, &since, &rev, err);
}

/* A stale entry: old enough, and its node keeps no record of the name. */
static int name_is_stale(fleet *f, const char *owner, int64_t since, const char *record_key,
                         gb_err *err)
{
    if (!record_key || time(NULL) - since < FLEET_NAME_GRACE_S)
        return 0;
    store *s = fleet_node_store(f, owner, err);
    if (!s)
        return -1;
    store_kv kv = {0};
    int found = store_get(s, record_key, &kv, err);
    store_kv_free(&kv);
    return found < 0 ? -1 : !found;
}

int fleet_name_claim(fleet *f, enum fleet_name_kind kind, const char *name, const char *node,
                     const char *record_key, char *owner, size_t owner_size, gb_err *err)
{
    _cleanup_free_ char *key = name_key(kind, name);
    for (int attempt = 0; attempt < 10; attempt++) {
        char holder[FLEET_NODE_MAX] = "";
        int64_t since = 0, rev = 0;
        int found = name_read(f, key, holder, sizeof(holder), &since, &rev, err);
        if (found < 0)
            return -1;
        if (found && strcmp(holder, node) == 0)
            return 1;
        if (found) {
            int stale = name_is_stale(f, holder, since, record_key, err);
            if (stale < 0)
                return -1;
            if (!stale) {
                if (owner)
                    snprintf(owner, owner_size, "%s", holder);
                return 0;
            }
        }
        bool ok = false;
        if (name_write(f, key, node, found ? rev : 0, &ok, err) < 0)
            return -1;
        if (ok)
            return 1;
    }
    return err_set(err, ERR_CONFLICT, "the name '%s' keeps changing hands in the fleet; retry",
                   name);
}

int fleet_name_release(fleet *f, enum fleet_name_kind kind, const char *name, const char *node,
                       gb_err *err)
{
    _cleanup_free_ char *key = name_key(kind, name);
    char holder[FLEET_NODE_MAX] = "";
    int64_t since = 0, rev = 0;
    int found = name_read(f, key, holder, sizeof(holder), &since, &rev, err);
    if (found <= 0 || strcmp(holder, node) != 0)
        return found < 0 ? -1 : 0;
    store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
    store_op op = {.kind = STORE_OP_DELETE, .key = key};
    bool ok = false;
    if (store_txn(f->store, &cmp, 1, &op, 1, &ok, NULL, err) < 0)
        return err_prefix(err, "writing the fleet's name index");
    return 0;
}

int fleet_names_move(fleet *f, const enum fleet_name_kind *kinds, const char *const *names,
                     size_t n, const char *from, const char *to, gb_err *err)
{
    char **keys = xcalloc(n ? n : 1, sizeof(*keys));
    char **values = xcalloc(n ? n : 1, sizeof(*values));
    store_cmp *cmps = xcalloc(n ? n : 1, sizeof(*cmps));
    store_op *ops = xcalloc(n ? n : 1, sizeof(*ops));
    size_t nops = 0;
    int rc = 1;
    _cleanup_json_ json_t *v = json_pack("{s:s, s:I}", "node", to, "since", (json_int_t)time(NULL));
    for (size_t i = 0; i < n && rc == 1; i++) {
        keys[i] = name_key(kinds[i], names[i]);
        char holder[FLEET_NODE_MAX] = "";
        int64_t since = 0, rev = 0;
        int found = name_read(f, keys[i], holder, sizeof(holder), &since, &rev, err);
        if (found < 0)
            rc = -1;
        else if (found && strcmp(holder, to) == 0)
            continue;
        else if (!found || strcmp(holder, from) != 0)
            rc = 0;
        else {
            values[i] = json_dumps(v, JSON_COMPACT);
            cmps[nops] =
                (store_cmp){.kind = STORE_CMP_MOD_REVISION, .key = keys[i], .mod_revision = rev};
            ops[nops++] = (store_op){.kind = STORE_OP_PUT, .key = keys[i], .value = values[i]};
        }
    }
    if (rc == 1 && nops) {
        bool ok = false;
        if (store_txn(f->store, cmps, nops, ops, nops, &ok, NULL, err) < 0)
            rc = err_prefix(err, "writing the fleet's name index");
        else if (!ok)
            rc = 0;
    }
    for (size_t i = 0; i < n; i++) {
        free(keys[i]);
        free(values[i]);
    }
    free(keys);
    free(values);
    free(cmps);
    free(ops);
    return rc;
}

store *fleet_node_store(fleet *f, const char *node, gb_err *err)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_peer_stores; i++) {
        if (strcmp(f->peer_stores[i].node, node) == 0) {
            store *s = f->peer_stores[i].store;
            pthread_mutex_unlock(&f->lock);
            return s;
        }
    }
    pthread_mutex_unlock(&f->lock);
    _cleanup_free_ char *child = xasprintf("nodes/%s", node);
    _cleanup_free_ char *url = store_url_child(f->root_url, child);
    store *s = NULL;
    if (!url || store_open(url, &s, err) < 0) {
        if (!url)
            err_set(err, ERR_INTERNAL, "the fleet's store is not an etcd URL");
        return NULL;
    }
    pthread_mutex_lock(&f->lock);
    f->peer_stores = xrealloc(f->peer_stores, (f->n_peer_stores + 1) * sizeof(*f->peer_stores));
    f->peer_stores[f->n_peer_stores++] = (struct fleet_peer_store){xstrdup(node), s};
    pthread_mutex_unlock(&f->lock);
    return s;
}

/* ---- a queued set moving between nodes ------------------------------------------ */

int fleet_name_move(fleet *f, const char *name, const char *from, const char *to,
                    const char *record_key, int64_t from_rev, const char *value, gb_err *err)
{
    /* One transaction on this node's handle, through keys relative to its
     * prefix (<root>/nodes/<self>/): the name entry, the record where it is
     * and where it goes. */
    _cleanup_free_ char *key = name_key(FLEET_NAME_REPLICASET, name);
    char holder[FLEET_NODE_MAX] = "";
    int64_t since = 0, rev = 0;
    int found = name_read(f, key, holder, sizeof(holder), &since, &rev, err);
    if (found < 0)
        return -1;
    if (!found || strcmp(holder, from) != 0)
        return 0;
    _cleanup_free_ char *entry_rel = xasprintf("../../fleet/%s", key);
    _cleanup_free_ char *from_rel = xasprintf("../%s/%s", from, record_key);
    _cleanup_free_ char *to_rel = xasprintf("../%s/%s", to, record_key);
    _cleanup_json_ json_t *v = json_pack("{s:s, s:I}", "node", to, "since", (json_int_t)time(NULL));
    _cleanup_free_ char *entry_value = json_dumps(v, JSON_COMPACT);
    store_cmp cmps[] = {
        {.kind = STORE_CMP_MOD_REVISION, .key = entry_rel, .mod_revision = rev},
        {.kind = STORE_CMP_MOD_REVISION, .key = from_rel, .mod_revision = from_rev},
    };
    store_op ops[] = {
        {.kind = STORE_OP_PUT, .key = to_rel, .value = value},
        {.kind = STORE_OP_PUT, .key = entry_rel, .value = entry_value},
        {.kind = STORE_OP_DELETE, .key = from_rel},
    };
    bool same = strcmp(from, to) == 0;
    bool ok = false;
    if (store_txn(f->node_store, cmps, 2, ops, same ? 1 : 3, &ok, NULL, err) < 0)
        return err_prefix(err, "moving queued replica set '%s' from node %s to %s", name, from, to);
    return ok ? 1 : 0;
}

/* ---- roles held on the claim's lease ------------------------------------------------ */

int fleet_lead(fleet *f, const char *role, char *holder, size_t size, gb_err *err)
{
    if (holder && size)
        holder[0] = '\0';
    int64_t lease = store_claim_lease(f->node_store);
    if (!lease)
        return 0;
    _cleanup_free_ char *key = xasprintf("leaders/%s", role);
    for (int attempt = 0; attempt < 3; attempt++) {
        store_kv kv = {0};
        int found = store_get(f->store, key, &kv, err);
        if (found < 0)
            return err_prefix(err, "reading who leads %s", role);
        int64_t rev = found ? kv.mod_revision : 0;
        if (found) {
            _cleanup_json_ json_t *v = json_loads(kv.value, 0, NULL);
            store_kv_free(&kv);
            const char *n = json_string_value(json_object_get(v, "node"));
            json_int_t l = json_integer_value(json_object_get(v, "lease"));
            if (n && strcmp(n, f->node) == 0 && l == (json_int_t)lease)
                return 1;
            /* Ours from an earlier lease (the claim was taken again) goes
             * with that lease: taken over now. Another node's: it leads. */
            if (!n || strcmp(n, f->node) != 0) {
                if (holder)
                    snprintf(holder, size, "%s", n ? n : "");
                return 0;
            }
        }
        _cleanup_json_ json_t *v = json_pack("{s:s, s:I, s:I}", "node", f->node, "lease",
                                             (json_int_t)lease, "since", (json_int_t)time(NULL));
        _cleanup_free_ char *value = json_dumps(v, JSON_COMPACT);
        store_cmp cmp = {.kind = STORE_CMP_MOD_REVISION, .key = key, .mod_revision = rev};
        store_op op = {.kind = STORE_OP_PUT, .key = key, .value = value, .lease = lease};
        bool ok = false;
        if (store_txn(f->store, &cmp, 1, &op, 1, &ok, NULL, err) < 0)
            return err_prefix(err, "taking the lead of %s", role);
        if (ok) {
            log_info("fleet: this node now leads %s", role);
            return 1;
        }
    }
    return 0;
}
