/*
 * rs_internal.h - what the replica-set service's files share: taking and
 * giving back allocations, and making a version's container.
 * Not for use outside src/service/replicaset*.c.
 */
#ifndef GPUBOX_SERVICE_RS_INTERNAL_H
#define GPUBOX_SERVICE_RS_INTERNAL_H

#include "service/app.h"
#include "service/binds.h"
#include "service/rs_record.h"
#include "util/err.h"

/* Take GPUs and host ports for r->spec into r (all or nothing), owned by
 * r->name. Only sched/ decides which; this only asks. */
int rs_alloc_take(app *a, rs_record *r, gb_err *err);
/* Give back to the pools what r lists as held (the caller has already
 * committed to the store that r no longer holds them). */
void rs_alloc_give_back(app *a, const rs_record *r);

/* Writes the store did not confirm (rs_settle.c). A write that failed with
 * ERR_STORE_UNAVAILABLE may have landed all the same; instead of giving back
 * what r holds, the caller hands it here, and it is given back once the
 * store says what became of the write:
 *   CREATE       the record transaction of a create (r as written,
 *                r->mod_revision what the key had before; previous the
 *                record before the create, NULL if none);
 *   CREATE_UNDO  the undo of a create whose record had landed
 *                (r->mod_revision the created record's);
 *   RELEASE      a stop or delete (r as it was, holding its GPUs and ports). */
enum rs_doubt_kind { RS_DOUBT_CREATE, RS_DOUBT_CREATE_UNDO, RS_DOUBT_RELEASE };
void rs_settle_hold(app *a, enum rs_doubt_kind kind, const rs_record *r, const char *previous);
/* Settle what is in doubt for name; call with its name lock held, before
 * reading its record. -1 (ERR_STORE_UNAVAILABLE) while the store is down. */
int rs_settle_name(app *a, const char *name, gb_err *err);
/* The background thread that settles entries every second. */
int rs_settle_start(app *a, gb_err *err);
void rs_settle_stop(app *a);

/* Create and start r's container (r->container_name) from r->spec and its
 * holdings; *id gets its id (malloc'd). On failure nothing is left behind:
 * a container that was created is removed. */
int rs_container_run(app *a, const rs_record *r, const binds_resolved *binds, char **id,
                     gb_err *err);

/* Docker's live status of r's container: "running", "exited", ...,
 * "missing" when Docker has no such container, "unknown" when Docker did not
 * answer. */
const char *rs_container_status(app *a, const rs_record *r, char *buf, size_t size);

/* The replica-set label gpubox puts on every container it makes. */
#define RS_LABEL_NAME "gpubox.replicaset"
#define RS_LABEL_VERSION "gpubox.version"
#define RS_STOP_TIMEOUT_S 10

#endif
