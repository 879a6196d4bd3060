/*
 * input.c - the request checks every handler shares: bodies whose fields
 * are all known, boolean query flags and the {name} path parameter.
 *
 * They answer with the envelope codes of docs/api.md, so a client learns
 * from the first reply what to change: an unknown field is ERR_INVALID_PARAMS
 * naming it and the fields the route takes, a bad flag value names the
 * values allowed.
 */
#include "api/api.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util/names.h"

/* "a, b, c" into buf, for messages. */
static void fields_list(const char *const *allowed, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; allowed && allowed[i] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", allowed[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static bool field_allowed(const char *key, const char *const *allowed)
{
    for (size_t i = 0; allowed && allowed[i]; i++)
        if (strcmp(key, allowed[i]) == 0)
            return true;
    return false;
}

int api_check_fields(const json_t *obj, const char *const *allowed, gb_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (field_allowed(key, allowed))
            continue;
        char list[256];
        fields_list(allowed, list, sizeof(list));
        if (!list[0])
            return err_set(err, ERR_INVALID_PARAMS,
                           "unknown field '%.64s'; this route takes no fields (send no body or {})",
                           key);
        return err_set(err, ERR_INVALID_PARAMS, "unknown field '%.64s'; this route takes: %s", key,
                       list);
    }
    return 0;
}

/* A body of nothing but whitespace counts as no body. */
static bool body_blank(const http_request *req)
{
    for (size_t i = 0; i < req->body_len; i++)
        if (!isspace((unsigned char)req->body[i]))
            return false;
    return true;
}

int api_body(http_request *req, const char *const *allowed, bool required, json_t **out,
             gb_err *err)
{
    *out = NULL;
    if (!required && body_blank(req))
        return 0;
    json_t *body = NULL;
    if (req_json_body(req, &body, err) < 0 || (allowed && api_check_fields(body, allowed, err) < 0))
        return -1;
    *out = body;
    return 0;
}

int api_query_flag(const http_request *req, const char *name, bool *out, gb_err *err)
{
    const char *v = http_request_query(req, name);
    *out = false;
    if (!v)
        return 0;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "query parameter %s is '%.32s'; use %s=true or %s=false", name, v, name,
                       name);
    return 0;
}

int api_path_name(const http_request *req, const char **out, gb_err *err)
{
    const char *name = http_request_param(req, "name");
    if (name_check_replicaset(name, err) < 0)
        return -1;
    *out = name;
    return 0;
}
