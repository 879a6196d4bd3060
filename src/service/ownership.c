/*
 * ownership.c - at start-up, after the pools are derived: records made
 * before users existed get their owner (--owner-of-unowned, else the
 * token file's first admin, else "anonymous"), and this node's entries in
 * the owners' ledgers are made to agree with what its records hold
 * (users/users.h, docs/users.md).
 *
 * Giving an owner is a record save like any other (replicaset_record_save,
 * volumes_record_save), so the owner's ledger entry is written with it. The
 * ledger sync then covers what no save wrote: entries of records a store
 * outage left undecided, or records removed by hand.
 *
 * Before a user is removed: what they still have, on every node (each
 * node's records, read from the store, as an offline node's list is).
 * Things belong to a name, so whatever is left passes to the next user of
 * that name; a removal is refused until nothing is (docs/users.md). Images
 * count too (service/images/owners.c): those committed under the user's
 * namespace and those pulled with their own credentials, on this node
 * (Docker's images of other nodes are not read from here). Once nothing
 * is left, the records of their pulls of images no longer here go with
 * the user, so the next user of the name starts with none.
 */
#include "util/xalloc.h"
#include "service/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "service/images/images.h"
#include "service/replicaset/record.h"
#include "service/users/users.h"
#include "service/volumes/record.h"
#include "util/cleanup.h"
#include "util/log.h"

typedef struct ownership_ctx {
    app *a;
    const char *adopter;
    users_ledger_hold *holds;
    size_t n, cap;
    size_t adopted;
} ownership_ctx;

static void ownership_keep(ownership_ctx *o, const users_ledger_hold *h)
{
    if (!h->exists || !h->owner[0])
        return;
    if (o->n == o->cap)
        o->holds = xreallocarray(o->holds, o->cap = o->cap ? 2 * o->cap : 16, sizeof(*o->holds));
    o->holds[o->n++] = *h;
}

/* Made before users: no owner, or the anonymous admin of a gpuboxd that
 * had no token file then and has one now. */
static bool ownership_unowned(const ownership_ctx *o, const char *owner)
{
    return !owner[0] || (o->a->cfg.auth_on && strcmp(owner, USER_ANONYMOUS) == 0 &&
                         strcmp(o->adopter, USER_ANONYMOUS) != 0);
}

static int ownership_set(void *ctx, replicaset_record *r, gb_err *err)
{
    ownership_ctx *o = ctx;
    if (ownership_unowned(o, r->owner) && !replicaset_record_is_tombstone(r)) {
        snprintf(r->owner, sizeof(r->owner), "%s", o->adopter);
        if (replicaset_record_save(o->a, r, NULL, 0, err) < 0)
            return err_prefix(err, "giving replica set %s an owner", r->name);
        o->adopted++;
    }
    users_ledger_hold h;
    replicaset_record_hold(r, &o->a->gpus, &h);
    ownership_keep(o, &h);
    return 0;
}

static int ownership_volumes(ownership_ctx *o, gb_err *err)
{
    volumes_record *recs = NULL;
    size_t n = 0;
    if (volumes_records_load_all(o->a->store, &recs, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ownership_unowned(o, recs[i].owner)) {
            snprintf(recs[i].owner, sizeof(recs[i].owner), "%s", o->adopter);
            rc = volumes_record_save(o->a->store, o->a, &recs[i], NULL, 0, err);
            o->adopted++;
        }
        users_ledger_hold h;
        volumes_record_hold(&recs[i], &h);
        ownership_keep(o, &h);
    }
    volumes_records_free(recs, n);
    return rc < 0 ? err_prefix(err, "giving the volumes an owner") : 0;
}

int ownership_settle(app *a, gb_err *err)
{
    const char *adopter = a->cfg.owner_of_unowned;
    if (!adopter)
        adopter = users_first_file_admin(a->users);
    ownership_ctx o = {.a = a, .adopter = adopter ? adopter : USER_ANONYMOUS};
    int rc = replicaset_records_each(a->store, ownership_set, &o, err) < 0 ? -1
             : ownership_volumes(&o, err) < 0                              ? -1
                                              : users_ledger_sync(a, o.holds, o.n, err);
    free(o.holds);
    if (rc < 0)
        return err_prefix(err, "users");
    if (o.adopted)
        log_info("users: %zu replica set(s) and volume(s) made before users now belong to %s",
                 o.adopted, o.adopter);
    return 0;
}

/* What one user has left: names, "name" or "name@node" in a fleet. */
typedef struct ownership_left {
    const char *owner;
    const char *node; /* the node whose records are read; NULL on a single server */
    json_t *sets, *deleted, *volumes, *images;
} ownership_left;

static void left_add(json_t *list, const char *name, const char *node)
{
    char item[2 * NAME_MAX_LEN + 2];
    snprintf(item, sizeof(item), "%s%s%s", name, node ? "@" : "", node ? node : "");
    json_array_append_new(list, json_string(item));
}

static int left_set(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    ownership_left *l = ctx;
    if (strcmp(r->owner, l->owner) != 0 || replicaset_record_is_tombstone(r))
        return 0;
    left_add(r->state == RS_STATE_DELETED ? l->deleted : l->sets, r->name, l->node);
    return 0;
}

/* What l->owner has left in s's records (l->node's). */
static int left_read(store *s, ownership_left *l, gb_err *err)
{
    if (replicaset_records_each(s, left_set, l, err) < 0)
        return -1;
    volumes_record *recs = NULL;
    size_t n = 0;
    if (volumes_records_load_all(s, &recs, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(recs[i].owner, l->owner) == 0)
            left_add(l->volumes, recs[i].name, l->node);
    volumes_records_free(recs, n);
    return 0;
}

/* Every node's records: this node's store, the others' read-only handles. */
static int left_gather(app *a, ownership_left *l, gb_err *err)
{
    if (!a->fleet)
        return left_read(a->store, l, err);
    fleet_member *ms = NULL;
    size_t n = 0;
    if (fleet_members(a->fleet, false, &ms, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        l->node = ms[i].name;
        bool me = strcmp(ms[i].name, fleet_node(a->fleet)) == 0;
        store *s = me ? a->store : fleet_node_store(a->fleet, ms[i].name, err);
        rc = s ? left_read(s, l, err) : -1;
        if (rc < 0)
            err_prefix(err, "reading the records of node %s", ms[i].name);
    }
    l->node = NULL;
    fleet_members_free(ms, n);
    return rc;
}

/* ", 2 replica sets (a, b)" at buf's end: the first names that fit. */
static void left_phrase(char *buf, size_t size, const json_t *list, const char *what)
{
    size_t n = json_array_size(list), used = strlen(buf);
    if (!n || used >= size)
        return;
    used += (size_t)snprintf(buf + used, size - used, "%s%zu %s%s (", used ? ", " : "", n, what,
                             n == 1 ? "" : "s");
    for (size_t i = 0; i < n && used < size; i++) {
        const char *name = json_string_value(json_array_get(list, i));
        bool room = used + strlen(name) + 8 < size && i < 8;
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", room ? name : "...");
        if (!room)
            break;
    }
    if (used < size)
        snprintf(buf + used, size - used, ")");
}

static int left_refuse(const ownership_left *l, gb_err *err)
{
    char what[200] = "";
    left_phrase(what, sizeof(what), l->sets, "replica set");
    left_phrase(what, sizeof(what), l->volumes, "volume");
    left_phrase(what, sizeof(what), l->deleted, "deleted replica set");
    left_phrase(what, sizeof(what), l->images, "image");
    bool live = json_array_size(l->sets) || json_array_size(l->volumes);
    bool deleted = json_array_size(l->deleted);
    bool images = json_array_size(l->images);
    return err_set(err, ERR_STATE_CONFLICT,
                   "user %s still has %s, which the next user named %s would get%s: %s%s%s%s%s, "
                   "then remove the user",
                   l->owner, what, l->owner,
                   deleted ? " (a deleted set keeps its history, specs and kept logs)" : "",
                   live ? "delete the replica sets and volumes" : "", live && deleted ? ", " : "",
                   deleted ? "purge the deleted sets (gpubox rm --purge NAME)" : "",
                   (live || deleted) && images ? ", " : "",
                   images ? "remove the images on this node (gpubox images rm NAME) or let a "
                            "running pull end"
                          : "");
}

int ownership_user_delete(app *a, const char *name, json_t **out, gb_err *err)
{
    _cleanup_json_ json_t *user = NULL;
    if (users_api_get(a, name, &user, err) < 0) /* no users, a bad name, nobody by that name */
        return -1;
    _cleanup_json_ json_t *sets = json_array(), *deleted = json_array(), *volumes = json_array(),
                          *images = json_array();
    ownership_left l = {
        .owner = name, .sets = sets, .deleted = deleted, .volumes = volumes, .images = images};
    if (left_gather(a, &l, err) < 0 || images_user_left(a, name, images, err) < 0)
        return err_prefix(err, "removing user %s", name);
    if (json_array_size(sets) || json_array_size(deleted) || json_array_size(volumes) ||
        json_array_size(images))
        return left_refuse(&l, err);
    if (images_user_forget(a, name, err) < 0)
        return err_prefix(err, "removing user %s", name);
    return users_api_delete(a, name, out, err);
}
