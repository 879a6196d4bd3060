/*
 * store_json.h - reading one record of the store as JSON, for the service's
 * record modules (replicaset/record.c, volume/record.c, journal.c): the store treats
 * values as opaque strings, and every record gpubox writes is a JSON
 * object.
 */
#ifndef GPUBOX_SERVICE_STORE_JSON_H
#define GPUBOX_SERVICE_STORE_JSON_H

#include <stdint.h>

#include <jansson.h>

#include "store/store.h"
#include "util/err.h"

/* Get key and parse its value: 1 found (*out owned by the caller,
 * *mod_revision filled when not NULL), 0 absent, -1 on a store error or a
 * value that is not JSON ("<what> is not JSON: ...", ERR_INTERNAL). */
int store_get_json(store *s, const char *key, const char *what, json_t **out, int64_t *mod_revision,
                   gb_err *err);

#endif
