/*
 * input.c - the request checks every handler shares: bodies whose fields
 * are all known, boolean query flags, the {name} path parameter, and image
 * references as Docker accepts them.
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
    if (req_json_body(req, &body, err) < 0 || api_check_fields(body, allowed, err) < 0)
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

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A repository path component: [a-z0-9]+ joined by ".", "_", "__" or a run
 * of "-" (Docker's reference grammar). */
static bool path_component_ok(const char *s, size_t len)
{
    if (len == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len;) {
        if (is_lower_alnum(s[i])) {
            i++;
            continue;
        }
        size_t run = 0;
        while (i + run < len && !is_lower_alnum(s[i + run]))
            run++;
        bool dashes = true;
        for (size_t k = 0; k < run; k++)
            dashes &= s[i + k] == '-';
        bool ok = dashes || (run == 1 && (s[i] == '.' || s[i] == '_')) ||
                  (run == 2 && s[i] == '_' && s[i + 1] == '_');
        if (!ok)
            return false;
        i += run;
    }
    return true;
}

/* A registry host: labels of [a-zA-Z0-9-] (not starting or ending in '-')
 * joined by '.', then an optional :port. */
static bool domain_ok(const char *s, size_t len)
{
    const char *colon = memchr(s, ':', len);
    size_t host_len = colon ? (size_t)(colon - s) : len;
    if (colon) {
        size_t plen = len - host_len - 1;
        if (plen == 0 || plen > 5)
            return false;
        for (size_t i = 0; i < plen; i++)
            if (!isdigit((unsigned char)colon[1 + i]))
                return false;
    }
    size_t label = 0;
    for (size_t i = 0; i <= host_len; i++) {
        if (i == host_len || s[i] == '.') {
            if (label == 0 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)s[i]) && s[i] != '-')
            return false;
        if (label == 0 && s[i] == '-')
            return false;
        label++;
    }
    return true;
}

static bool tag_ok(const char *tag)
{
    size_t len = strlen(tag);
    if (len == 0 || len > 128)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = tag[i];
        bool word = isalnum((unsigned char)c) || c == '_';
        if (!(word || (i > 0 && (c == '.' || c == '-'))))
            return false;
    }
    return true;
}

int api_check_image_ref(const char *field, const char *ref, gb_err *err)
{
    static const char hint[] = "use lowercase letters, digits and '.', '_', '-' in the name and "
                               "an optional :tag, e.g. \"myimage:v1\" or \"registry:5000/team/"
                               "myimage:v1\"";
    if (!ref || !*ref)
        return err_set(err, ERR_INVALID_PARAMS, "%s is empty; %s", field, hint);
    size_t len = strlen(ref);
    if (len > 255)
        return err_set(err, ERR_INVALID_PARAMS, "%s is %zu characters long; at most 255", field,
                       len);
    if (strchr(ref, '@'))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%.64s' has a digest; a new image gets a name and a tag, not a digest",
                       field, ref);
    const char *last_slash = strrchr(ref, '/');
    const char *tag = strrchr(last_slash ? last_slash : ref, ':');
    size_t name_len = tag ? (size_t)(tag - ref) : len;
    if (tag && !tag_ok(tag + 1))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s '%.64s' has a bad tag; a tag is 1-128 of [A-Za-z0-9_.-] and does not "
                       "start with '.' or '-'",
                       field, ref);
    size_t start = 0;
    bool first = true;
    while (start <= name_len) {
        const char *slash = memchr(ref + start, '/', name_len - start);
        size_t end = slash ? (size_t)(slash - ref) : name_len;
        const char *comp = ref + start;
        size_t clen = end - start;
        /* The first of several components is a registry host when it looks
         * like one (a '.', a ':port', "localhost" or capitals). */
        bool host = false;
        if (first && slash) {
            host = memchr(comp, '.', clen) || memchr(comp, ':', clen) ||
                   (clen == 9 && strncmp(comp, "localhost", 9) == 0);
            for (size_t i = 0; i < clen && !host; i++)
                host = isupper((unsigned char)comp[i]);
        }
        if (host ? !domain_ok(comp, clen) : !path_component_ok(comp, clen))
            return err_set(err, ERR_INVALID_PARAMS, "%s '%.64s' is not a valid image name; %s",
                           field, ref, hint);
        first = false;
        start = end + 1;
        if (!slash)
            break;
    }
    return 0;
}
