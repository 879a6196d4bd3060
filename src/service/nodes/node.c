/*
 * node.c - this gpuboxd as a node of a fleet (docs/fleet.md): moving
 * a single server's records under its node when it first joins, joining
 * (fleet/fleet.h), claiming the names of its records in the fleet's name
 * index, and the capacity record the other nodes place creates by.
 *
 * The move is crash-safe without a journal: each transaction moves a batch
 * of keys (put under nodes/<node>/, delete at the root) at once, so after a
 * crash every key is in exactly one of the two places and the next start
 * moves the rest. Nothing reads the records before the move is complete:
 * it runs right after the node's claim, before the pools are derived. The
 * root's own claim is held while it runs, so a gpuboxd still serving the
 * root prefix as a single server makes the join fail instead of losing
 * writes.
 */
#include "util/xalloc.h"
#include "service/nodes/nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "service/nodes/internal.h"
#include "service/service.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/time.h"

/* Keys per move transaction: a put and a delete each, plus a comparison. */
#define MOVE_BATCH_KEYS 8
#define MOVE_BATCH_BYTES (STORE_TXN_BYTES_MAX / 3)

static int claim_root(app *a, store *root, gb_err *err)
{
    store_owner me;
    if (store_owner_self("gpuboxd", &me, err) < 0)
        return -1;
    int64_t start = time_mono_ns();
    for (;;) {
        gb_err e = GB_ERR_INIT;
        if (store_claim(root, &me, STORE_CLAIM_TTL_S, NULL, &e) == 0)
            return 0;
        *err = e;
        if (e.code != ERR_CONFLICT && e.code != ERR_STORE_UNAVAILABLE)
            return -1;
        if (time_since_s(start) >= a->cfg.store_wait_s)
            return err_prefix(err, "a gpuboxd without --node may still serve this store's records "
                                   "(stop it before it joins the fleet)");
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

/* Move the batch kvs[from, to) under nodes/<node>/ in one transaction. */
static int move_batch(store *root, const char *node, const store_kvs *kvs, size_t from, size_t to,
                      gb_err *err)
{
    size_t n = to - from;
    store_cmp *cmps = xcalloc(n, sizeof(*cmps));
    store_op *ops = xcalloc(2 * n, sizeof(*ops));
    char **keys = xcalloc(n, sizeof(*keys));
    for (size_t i = 0; i < n; i++) {
        const store_kv *kv = &kvs->items[from + i];
        keys[i] = xasprintf("nodes/%s/%s", node, kv->key);
        cmps[i] = (store_cmp){.kind = STORE_CMP_ABSENT, .key = keys[i]};
        ops[2 * i] = (store_op){.kind = STORE_OP_PUT, .key = keys[i], .value = kv->value};
        ops[2 * i + 1] = (store_op){.kind = STORE_OP_DELETE, .key = kv->key};
    }
    bool ok = false;
    int rc = store_txn(root, cmps, n, ops, 2 * n, &ok, NULL, err);
    if (rc == 0 && !ok)
        rc = err_set(err, ERR_CONFLICT,
                     "node %s already has records of the same names as the single server's "
                     "(from '%s' on); move or delete one of them by hand",
                     node, kvs->items[from].key);
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(cmps);
    free(ops);
    return rc;
}

int nodes_migrate(app *a, gb_err *err)
{
    if (!a->cfg.node)
        return 0;
    store *root = NULL;
    if (store_open(a->cfg.fleet_url, &root, err) < 0)
        return err_prefix(err, "opening the fleet's store");
    store_kvs kvs = {0};
    int rc = store_range(root, KEYS_ROOT, &kvs, err);
    if (rc == 0 && kvs.n > 0) {
        log_info("fleet: moving %zu key(s) of the single server under node %s", kvs.n, a->cfg.node);
        store_kvs_free(&kvs);
        /* read again once the root is ours: nothing changes it after */
        rc = claim_root(a, root, err);
        if (rc == 0)
            rc = store_range(root, KEYS_ROOT, &kvs, err);
        size_t moved = 0;
        for (size_t i = 0; rc == 0 && i < kvs.n;) {
            size_t j = i, bytes = 0;
            while (
                j < kvs.n && j - i < MOVE_BATCH_KEYS &&
                (j == i || bytes + 2 * strlen(kvs.items[j].key) + strlen(kvs.items[j].value) + 64 <
                               MOVE_BATCH_BYTES)) {
                bytes += 2 * strlen(kvs.items[j].key) + strlen(kvs.items[j].value) + 64;
                j++;
            }
            rc = move_batch(root, a->cfg.node, &kvs, i, j, err);
            moved += rc == 0 ? j - i : 0;
            if (rc == 0)
                fault_point("fleet.join.batch-moved");
            i = j;
        }
        if (rc == 0)
            log_info("fleet: moved %zu key(s) under node %s", moved, a->cfg.node);
        store_release(root);
    }
    store_kvs_free(&kvs);
    store_close(root);
    return rc < 0 ? err_prefix(err, "moving the single server's records under node %s", a->cfg.node)
                  : 0;
}

/* ---- capacity ------------------------------------------------------------------ */

json_t *nodes_capacity(void *ctx)
{
    app *a = ctx;
    gb_err err = GB_ERR_INIT;
    _cleanup_json_ json_t *gpus = NULL;
    _cleanup_json_ json_t *ports = NULL;
    json_t *devices = json_array();
    if (resources_gpus(a, &gpus, &err) == 0) {
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(gpus, "devices"), i, d)
        {
            json_t *c = json_deep_copy(d);
            json_object_set_new(
                c, "tenants",
                json_integer((json_int_t)json_array_size(json_object_get(d, "tenants"))));
            json_object_del(c, "allocations");
            json_array_append_new(devices, c);
        }
    }
    json_int_t free_ports = 0;
    if (resources_ports(a, &ports, &err) == 0)
        free_ports =
            json_integer_value(json_object_get(json_object_get(ports, "ports"), "availableCount"));
    struct statvfs vfs;
    json_int_t free_bytes = 0;
    if (statvfs(a->cfg.data_dir, &vfs) == 0)
        free_bytes = (json_int_t)vfs.f_bavail * (json_int_t)vfs.f_frsize;
    json_t *out = json_pack("{s:o, s:{s:I}, s:{s:I}}", "devices", devices, "ports",
                            "availableCount", free_ports, "volumes", "freeBytes", free_bytes);
    /* where the other nodes' service proxies reach this one's (nodes_proxy_of) */
    const char *proxy = a->cfg.proxy_address;
    if (out && proxy)
        json_object_set_new(out, "proxy", json_string(proxy));
    return out;
}

/* ---- joining ------------------------------------------------------------------- */

/* The names of the records under dir (one level: not history keys). */
static int claim_names(app *a, const char *dir, enum fleet_name_kind kind, gb_err *err)
{
    _cleanup_(store_kvs_free) store_kvs kvs = {0};
    if (store_range(a->store, dir, &kvs, err) < 0)
        return -1;
    size_t plen = strlen(dir);
    for (size_t i = 0; i < kvs.n; i++) {
        const char *name = kvs.items[i].key + plen;
        if (strchr(name, '/') || !*name)
            continue;
        char owner[FLEET_NODE_MAX] = "";
        int rc = fleet_name_claim(a->fleet, kind, name, a->cfg.node, kvs.items[i].key, owner,
                                  sizeof(owner), err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            log_warn("fleet: %s '%s' is kept here but node %s owns the name in the fleet; the "
                     "fleet's API reaches only that node's",
                     kind == FLEET_NAME_VOLUME ? "volume" : "replica set", name, owner);
    }
    return 0;
}

int nodes_join(app *a, gb_err *err)
{
    if (!a->cfg.node)
        return 0;
    fleet_config fc = {
        .node = a->cfg.node,
        .advertise = a->cfg.advertise,
        .labels = a->cfg.node_labels,
        .version = GPUBOX_VERSION,
        .root_url = a->cfg.fleet_url,
        .node_store = a->store,
        .secret_file = a->cfg.fleet_secret_file,
        .capacity = nodes_capacity,
        .capacity_ctx = a,
    };
    if (fleet_open(&fc, &a->fleet, err) < 0)
        return -1;
    if (claim_names(a, KEYS_REPLICASETS, FLEET_NAME_REPLICASET, err) < 0 ||
        claim_names(a, KEYS_VOLUMES, FLEET_NAME_VOLUME, err) < 0)
        return err_prefix(err, "claiming this node's names in the fleet");
    return 0;
}

const char *nodes_self(const app *a)
{
    return a->fleet ? fleet_node(a->fleet) : NULL;
}

int nodes_holds(app *a, enum nodes_kind kind, const char *name, gb_err *err)
{
    char key[STORE_KEY_MAX];
    if (!nodes_record_key(kind, name, key, sizeof(key)))
        return 0;
    store_kv kv = {0};
    int found = store_get(a->store, key, &kv, err);
    store_kv_free(&kv);
    return found;
}

/* ---- the names of creates and deletes answered here ------------------------------- */

void nodes_release_unheld(app *a, enum nodes_kind kind, const char *name)
{
    if (!a->fleet || !name)
        return;
    /* the name stays this node's while it keeps a record of it */
    gb_err e = GB_ERR_INIT;
    if (nodes_holds(a, kind, name, &e) == 0)
        fleet_name_release(a->fleet, nodes_fleet_kind(kind), name, fleet_node(a->fleet), &e);
}

void nodes_poke(app *a)
{
    if (a->fleet)
        fleet_poke(a->fleet);
}

/* A create here needs the name in the fleet first: the node that placed
 * it took it for this one, or nobody holds it. Another node's name is
 * refused as taken, however the request came (a client may send the
 * forwarded header too). */
int nodes_claim_here(app *a, enum nodes_kind kind, const char *name, gb_err *err)
{
    if (!a->fleet)
        return 0;
    char key[STORE_KEY_MAX];
    if (!nodes_record_key(kind, name, key, sizeof(key)))
        return 0; /* the handler refuses the name */
    char owner[FLEET_NODE_MAX] = "";
    int claimed = fleet_name_claim(a->fleet, nodes_fleet_kind(kind), name, fleet_node(a->fleet),
                                   key, owner, sizeof(owner), err);
    if (claimed != 0)
        return claimed < 0 ? -1 : 0;
    bool vol = kind == NODES_VOLUME;
    return err_set(err, vol ? ERR_VOLUME_EXISTS : ERR_EXISTS,
                   "%s '%s' already exists in the fleet, on node %s",
                   vol ? "volume" : "replica set", name, owner);
}

int nodes_check_uncordoned(app *a, enum nodes_kind kind, const char *name, gb_err *err)
{
    if (!a->fleet)
        return 0;
    const char *node = fleet_node(a->fleet);
    int cordoned = fleet_cordoned(a->fleet, node, err);
    if (cordoned == 0)
        return 0;
    /* a name placement claimed for this node is given up, as after a
     * create that failed */
    nodes_release_unheld(a, kind, name);
    if (cordoned < 0)
        return -1;
    if (kind == NODES_VOLUME)
        return err_set(err, ERR_VOLUME_CREATE_FAILED,
                       "node %s is cordoned; a volume cannot be made there (uncordon the node "
                       "to place on it again)",
                       node);
    return err_set(err, ERR_GPU_NOT_ENOUGH,
                   "node %s takes no new replica sets: cordoned: %s (uncordon the node to place "
                   "on it again)",
                   node, node);
}
