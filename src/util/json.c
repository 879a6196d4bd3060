/*
 * json.c - typed field access on jansson objects with errors a client can
 * act on (see json.h).
 */
#include "util/json.h"

#include <stdlib.h>

#include "util/cleanup.h"

const char *json_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

/* Find obj[field]: 1 present, 0 absent (or null) and optional, -1 when a
 * required field is missing. `expected` is for the message. */
static int field_lookup(const json_t *obj, const char *where, const char *field,
                        const char *expected, bool required, json_t **value, gb_err *err)
{
    json_t *v = json_object_get(obj, field);
    if (v && !json_is_null(v)) {
        *value = v;
        return 1;
    }
    if (!required)
        return 0;
    return err_set(err, ERR_INVALID_PARAMS, "field '%s%s%s' is required (%s)", where ? where : "",
                   where ? "." : "", field, expected);
}

static int field_wrong_type(const json_t *v, const char *where, const char *field,
                            const char *expected, gb_err *err)
{
    return err_set(err, ERR_WRONG_TYPE, "field '%s%s%s' must be %s, got %s", where ? where : "",
                   where ? "." : "", field, expected, json_type_name(v));
}

int json_field_string(const json_t *obj, const char *where, const char *field, const char **out,
                      bool required, gb_err *err)
{
    json_t *v = NULL;
    int found = field_lookup(obj, where, field, "a string", required, &v, err);
    if (found <= 0)
        return found;
    if (!json_is_string(v))
        return field_wrong_type(v, where, field, "a string", err);
    *out = json_string_value(v);
    return 1;
}

int json_field_int(const json_t *obj, const char *where, const char *field, long long *out,
                   bool required, gb_err *err)
{
    json_t *v = NULL;
    int found = field_lookup(obj, where, field, "an integer", required, &v, err);
    if (found <= 0)
        return found;
    if (!json_is_integer(v))
        return field_wrong_type(v, where, field, "an integer", err);
    *out = (long long)json_integer_value(v);
    return 1;
}

int json_field_bool(const json_t *obj, const char *where, const char *field, bool *out,
                    bool required, gb_err *err)
{
    json_t *v = NULL;
    int found = field_lookup(obj, where, field, "a boolean", required, &v, err);
    if (found <= 0)
        return found;
    if (!json_is_boolean(v))
        return field_wrong_type(v, where, field, "a boolean (true or false)", err);
    *out = json_is_true(v);
    return 1;
}

int json_field_object(const json_t *obj, const char *where, const char *field, json_t **out,
                      bool required, gb_err *err)
{
    json_t *v = NULL;
    int found = field_lookup(obj, where, field, "an object", required, &v, err);
    if (found <= 0)
        return found;
    if (!json_is_object(v))
        return field_wrong_type(v, where, field, "an object", err);
    *out = v;
    return 1;
}

int json_field_string_array(const json_t *obj, const char *where, const char *field,
                            const char ***out, size_t *n, bool required, gb_err *err)
{
    json_t *v = NULL;
    int found = field_lookup(obj, where, field, "an array of strings", required, &v, err);
    if (found <= 0)
        return found;
    if (!json_is_array(v))
        return field_wrong_type(v, where, field, "an array of strings", err);
    size_t count = json_array_size(v);
    _cleanup_free_ const char **items = calloc(count ? count : 1, sizeof(*items));
    if (!items)
        return err_set(err, ERR_INTERNAL, "out of memory reading field '%s'", field);
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(v, i);
        if (!json_is_string(item))
            return err_set(err, ERR_WRONG_TYPE,
                           "field '%s%s%s' must be an array of strings; element %zu is %s",
                           where ? where : "", where ? "." : "", field, i, json_type_name(item));
        items[i] = json_string_value(item);
    }
    *out = steal_ptr(&items);
    *n = count;
    return 1;
}

