/*
 * json.h - typed fields of JSON objects, for request bodies and stored
 * records alike.
 *
 * Each helper turns a bad value into the error a client can act on: a field
 * of the wrong JSON type is ERR_WRONG_TYPE naming the field and the expected
 * type; a required field that is missing is ERR_INVALID_PARAMS naming it.
 * They return 1 when the field was present (and *out is set), 0 when it was
 * absent or null and not required (*out untouched), -1 on error.
 */
#ifndef GPUBOX_UTIL_JSON_H
#define GPUBOX_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

/* The same checks on any JSON object, for nested fields: `where` names the
 * enclosing object in messages ("gpuPatch" -> "gpuPatch.gpuCount"), NULL
 * for the body itself. */
int json_field_string(const json_t *obj, const char *where, const char *field, const char **out,
                      bool required, gb_err *err);
int json_field_int(const json_t *obj, const char *where, const char *field, long long *out,
                   bool required, gb_err *err);
int json_field_bool(const json_t *obj, const char *where, const char *field, bool *out,
                    bool required, gb_err *err);
int json_field_string_array(const json_t *obj, const char *where, const char *field,
                            const char ***out, size_t *n, bool required, gb_err *err);
int json_field_object(const json_t *obj, const char *where, const char *field, json_t **out,
                      bool required, gb_err *err);

/* "string", "number", "object", ... - the JSON type name of a value. */
const char *json_type_name(const json_t *v);

/* Whether list (a JSON array; NULL: none) holds the string s. */
bool json_array_has_string(const json_t *list, const char *s);

/* A JSON string from bytes that may not be UTF-8 (command output): invalid
 * sequences become U+FFFD and NUL bytes '?', so the answer is always valid
 * JSON. Never NULL. */
json_t *json_string_lossy(const char *s, size_t len);

/* JSON text written piece by piece into one growing buffer, for answers
 * too large to hold as a tree (a log's lines): a json_t per line costs
 * ~100 bytes of overhead beside its text, and many of them fragment the
 * heap for good. */
typedef struct json_out {
    char *data; /* NUL-terminated; NULL until something is written */
    size_t len, cap;
} json_out;

void json_out_raw(json_out *o, const char *s, size_t n);
void json_out_printf(json_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string literal, quotes included: the same text
 * json_string_lossy(s, n) dumps as with JSON_COMPACT. */
void json_out_string_lossy(json_out *o, const char *s, size_t n);
/* Start again, keeping the memory. */
void json_out_reset(json_out *o);
void json_out_free(json_out *o);

#endif
