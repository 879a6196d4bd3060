/*
 * json.c - typed field access on jansson objects with errors a client can
 * act on (see json.h).
 */
#include "util/xalloc.h"
#include "util/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    _cleanup_free_ const char **items = xcalloc(count ? count : 1, sizeof(*items));
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

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one. */
static size_t utf8_sequence(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    size_t len;
    unsigned min;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        len = 2, min = 0x80, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        len = 3, min = 0x800, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        len = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (len > left)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

json_t *json_string_lossy(const char *s, size_t len)
{
    char *buf = xmalloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence((const unsigned char *)s + i, len - i);
        if (n == 0 || (n == 1 && s[i] == '\0')) {
            if (s[i] == '\0') {
                buf[o++] = '?';
            } else {
                memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+FFFD */
                o += 3;
            }
            i++;
            continue;
        }
        memcpy(buf + o, s + i, n);
        o += n;
        i += n;
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j;
}

/* ---- JSON text piece by piece ---------------------------------------------------- */

static void json_out_room(json_out *o, size_t n)
{
    if (o->len + n + 1 <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + n + 1)
        cap *= 2;
    o->data = xrealloc(o->data, cap);
    o->cap = cap;
}

void json_out_raw(json_out *o, const char *s, size_t n)
{
    json_out_room(o, n);
    memcpy(o->data + o->len, s, n);
    o->len += n;
    o->data[o->len] = '\0';
}

void json_out_printf(json_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    json_out_room(o, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(o->data + o->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

void json_out_string_lossy(json_out *o, const char *s, size_t n)
{
    /* At most 6 bytes out for each byte in (\u00XX), and the quotes. */
    json_out_room(o, 6 * n + 2);
    char *p = o->data + o->len;
    *p++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_sequence((const unsigned char *)s + i, n - i);
        if (k == 0) {
            memcpy(p, "\xef\xbf\xbd", 3); /* U+FFFD, as json_string_lossy */
            p += 3;
            i++;
            continue;
        }
        if (k > 1) {
            memcpy(p, s + i, k);
            p += k;
            i += k;
            continue;
        }
        i++;
        /* jansson's escapes with its default flags */
        switch (c) {
        case '\0':
            *p++ = '?'; /* as json_string_lossy */
            break;
        case '"':
        case '\\':
            *p++ = '\\';
            *p++ = (char)c;
            break;
        case '\b':
            memcpy(p, "\\b", 2), p += 2;
            break;
        case '\f':
            memcpy(p, "\\f", 2), p += 2;
            break;
        case '\n':
            memcpy(p, "\\n", 2), p += 2;
            break;
        case '\r':
            memcpy(p, "\\r", 2), p += 2;
            break;
        case '\t':
            memcpy(p, "\\t", 2), p += 2;
            break;
        default:
            if (c < 0x20) {
                snprintf(p, 7, "\\u%04X", c);
                p += 6;
            } else {
                *p++ = (char)c;
            }
        }
    }
    *p++ = '"';
    *p = '\0';
    o->len = (size_t)(p - o->data);
}

void json_out_reset(json_out *o)
{
    o->len = 0;
    if (o->data)
        o->data[0] = '\0';
}

void json_out_free(json_out *o)
{
    free(o->data);
    *o = (json_out){0};
}

bool json_array_has_string(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}
