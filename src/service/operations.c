/*
 * operations.c - GET /api/v1/operations/{id}: an id is either a pull's
 * (kept in memory by service/images/) or a journalled operation's (the
 * store, service/replicaset/recover.c). Pull ids are looked up first: they
 * cost no store read.
 */
#include "service/images/images.h"
#include "service/replicaset/replicaset.h"
#include "service/service.h"

int operation_get(app *a, const char *id, json_t **out, gb_err *err)
{
    if (images_pull_record(a, id, out))
        return 0;
    return replicaset_operation(a, id, out, err);
}
