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
