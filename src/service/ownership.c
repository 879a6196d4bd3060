/*
 * ownership.c - at start-up, after the pools are derived: records made
 * before users existed get their owner (--owner-of-unowned, else the
 * token file's first admin, else "anonymous"), and this node's entries in
 * the owners' ledgers are made to agree with what its records hold
 * (users/users.h, docs/users.md).
 *
 * Giving an owner is a record save like any other (rs_record_save,
 * vol_record_save), so the owner's ledger entry is written with it. The
 * ledger sync then covers what no save wrote: entries of records a store
 * outage left undecided, or records removed by hand.
 */
#include "util/xalloc.h"
#include "service/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/replicaset/record.h"
#include "service/users/users.h"
#include "service/volume/record.h"
#include "util/cleanup.h"
#include "util/log.h"

typedef struct ownership_ctx {
    app *a;
    const char *adopter;
    ledger_hold *holds;
    size_t n, cap;
    size_t adopted;
} ownership_ctx;

static void ownership_keep(ownership_ctx *o, const ledger_hold *h)
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

static int ownership_set(void *ctx, rs_record *r, gb_err *err)
{
    ownership_ctx *o = ctx;
    if (ownership_unowned(o, r->owner) && !rs_record_is_tombstone(r)) {
        snprintf(r->owner, sizeof(r->owner), "%s", o->adopter);
        if (rs_record_save(o->a, r, NULL, 0, err) < 0)
            return err_prefix(err, "giving replica set %s an owner", r->name);
        o->adopted++;
    }
    ledger_hold h;
    rs_record_hold(r, &h);
    ownership_keep(o, &h);
    return 0;
}

static int ownership_volumes(ownership_ctx *o, gb_err *err)
{
    vol_record *recs = NULL;
    size_t n = 0;
    if (vol_records_load_all(o->a->store, &recs, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ownership_unowned(o, recs[i].owner)) {
            snprintf(recs[i].owner, sizeof(recs[i].owner), "%s", o->adopter);
            rc = vol_record_save(o->a->store, o->a, &recs[i], NULL, 0, err);
            o->adopted++;
        }
        ledger_hold h;
        vol_record_hold(&recs[i], &h);
        ownership_keep(o, &h);
    }
    vol_records_free(recs, n);
    return rc < 0 ? err_prefix(err, "giving the volumes an owner") : 0;
}

int ownership_settle(app *a, gb_err *err)
{
    const char *adopter = a->cfg.owner_of_unowned;
    if (!adopter)
        adopter = users_first_file_admin(a->users);
    ownership_ctx o = {.a = a, .adopter = adopter ? adopter : USER_ANONYMOUS};
    int rc = rs_records_each(a->store, ownership_set, &o, err) < 0 ? -1
             : ownership_volumes(&o, err) < 0                      ? -1
                                              : ledger_sync(a, o.holds, o.n, err);
    free(o.holds);
    if (rc < 0)
        return err_prefix(err, "users");
    if (o.adopted)
        log_info("users: %zu replica set(s) and volume(s) made before users now belong to %s",
                 o.adopted, o.adopter);
    return 0;
}
