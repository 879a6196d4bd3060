/*
 * store_json.h - the service's records in the store, as JSON: reading one,
 * scanning every record under a prefix, and the compare-and-swap save.
 *
 * The store treats values as opaque strings; every record gpubox writes
 * (replica sets, volumes, operations) is a JSON object. The record modules
 * (replicaset/record.c, volume/record.c, journal.c) turn that JSON into
 * their structs; this module owns what they share, so that a damaged value
 * reads the same everywhere and every record is saved under the same
 * compare on its mod_revision.
 *
 * Errors when reading records: the store's own as they are
 * (ERR_STORE_UNAVAILABLE, ...); a value that is not JSON, ERR_INTERNAL
 * "reading <what> from the store: not JSON: <reason>"; a record its module
 * could not take, "reading <what> from the store: <its message>" with its
 * code. <what> is the key in a scan, "<noun> <name>" in a load by name.
 */
#ifndef GPUBOX_SERVICE_RECORDS_H
#define GPUBOX_SERVICE_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "store/store.h"
#include "util/err.h"

/* Get key and parse its value: 1 found (*out owned by the caller,
 * *mod_revision filled when not NULL), 0 absent, -1 on a store error or a
 * value that is not JSON (the errors at the top of this file). */
int records_get_json(store *s, const char *key, const char *what, json_t **out,
                     int64_t *mod_revision, gb_err *err);

/* Takes one record of a scan: its key, its value (borrowed for the call)
 * and the key's mod_revision. -1 with *err filled stops the scan; 0 goes
 * on (records_load_all: leaves the record out, nothing kept to free), 1
 * too (records_load_all: keeps it). */
typedef int (*records_fn)(void *ctx, const char *key, json_t *value, int64_t mod_revision,
                          gb_err *err);

/* Hand each record under prefix to each, in key order, skipping keys for
 * which is_record (NULL: none) is false. The first error stops it. */
int records_scan(store *s, const char *prefix, bool (*is_record)(const char *key), records_fn each,
                 void *ctx, gb_err *err);

/* The records under prefix as an array of size-byte elements, in key
 * order: take is handed a zeroed element as ctx and fills it (returning 1)
 * or leaves it out (0). Returns the array with *n elements (malloc'd, never
 * NULL on success), or NULL on an error, with what was kept freed by
 * drop. */
void *records_load_all(store *s, const char *prefix, bool (*is_record)(const char *key),
                       size_t size, records_fn take, void (*drop)(void *elem), size_t *n,
                       gb_err *err);

/* A kind of record kept one per name (replica sets, volumes): what loading
 * and saving one by name needs to know of it. */
typedef struct records_kind {
    const char *noun;                                       /* "replica set": for messages */
    char *(*key)(char *buf, size_t size, const char *name); /* keys.h; NULL: name too long */
    /* value into *out, a struct of the kind, carrying mod_revision; -1 on
     * an error, with nothing left in *out to free. */
    int (*parse)(void *out, const json_t *value, int64_t mod_revision, gb_err *err);
    /* When a save of a new record (mod_revision 0) finds one there: what
     * it says after "<noun> <name> ", and its code. NULL: as any conflict,
     * ERR_CONFLICT "... was changed by someone else meanwhile; try again". */
    const char *exists;
    int exists_code;
} records_kind;

/* Load name's record into *out: 1 found, 0 absent (*out untouched), -1 on
 * an error ("<noun> name is too long", ERR_INVALID_NAME, or as above). */
int records_load(store *s, const records_kind *k, const char *name, void *out, gb_err *err);

/* Define `static const records_kind type##_kind` for records held
 * in a struct `type` that has an int64_t mod_revision, parsed by
 * `int from_json(const json_t *, type *, gb_err *)` (which leaves nothing
 * to free when it fails); the rest of the kind's fields follow
 * (.noun = ..., .key = ...). As systemd's DEFINE_TRIVIAL_CLEANUP_FUNC, it
 * writes the typed parse, type##_parse, once for every kind. */
#define STORE_RECORD_KIND(type, from_json, ...)                                                    \
    static int type##_parse(void *out, const json_t *value, int64_t mod_revision, gb_err *err)     \
    {                                                                                              \
        type *r = out;                                                                             \
        int rc = from_json(value, r, err);                                                         \
        r->mod_revision = mod_revision;                                                            \
        return rc;                                                                                 \
    }                                                                                              \
    static const records_kind type##_kind = {.parse = type##_parse, __VA_ARGS__}

/* Stamp a record about to be saved: update_time now, create_time too when
 * it has none yet (both of size bytes). */
void records_stamp(char *create_time, char *update_time, size_t size);

/* Put value, name's record, if its key's mod_revision is still
 * *mod_revision (0: the key must not exist yet), with extra ops (may be
 * NULL/0) in the same transaction; on success *mod_revision is the new
 * revision. When the compare fails nothing is written: ERR_CONFLICT "<noun>
 * <name> was changed by someone else meanwhile; try again" (or the kind's
 * exists). A store error is prefixed "saving <noun> <name>"; a NULL value
 * (the record could not be written as JSON) is ERR_INTERNAL. */
int records_save_plain(store *s, const records_kind *k, const char *name, const json_t *value,
                       int64_t *mod_revision, const store_op *extra, size_t nextra, gb_err *err);
/* The same through txn instead of store_txn (ctx is txn's): the
 * transaction's compare and puts, written with whatever else txn adds
 * (users/ledger.c: users_ledger_record_save writes the owner's ledger entry in
 * the same transaction). An ERR_QUOTA_EXCEEDED from txn comes back as it
 * is. */
typedef int (*records_txn_fn)(void *ctx, const store_cmp *cmps, size_t ncmps, const store_op *ops,
                              size_t nops, bool *landed, int64_t *revision, gb_err *err);
int records_save_via(store *s, const records_kind *k, const char *name, const json_t *value,
                     int64_t *mod_revision, const store_op *extra, size_t nextra,
                     records_txn_fn txn, void *ctx, gb_err *err);

#endif
