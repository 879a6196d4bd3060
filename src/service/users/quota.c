/*
 * quota.c - quota and user values as JSON (users.h).
 */
#include "util/xalloc.h"
#include "service/users/users_internal.h"

#include <stdio.h>
#include <string.h>

#include "util/json.h"
#include "util/size.h"

static const struct {
    const char *field;
    size_t offset;
} quota_fields[] = {
    {"cards", offsetof(users_quota, cards)},
    {"shareMiB", offsetof(users_quota, share_mib)},
    {"instances", offsetof(users_quota, instances)},
    {"volumeBytes", offsetof(users_quota, volume_bytes)},
    {"cores", offsetof(users_quota, cores)},
    {"maxPriority", offsetof(users_quota, max_priority)},
};

#define QUOTA_FIELD(q, i) ((int64_t *)((char *)(q) + quota_fields[i].offset))
#define QUOTA_MAX ((int64_t)1 << 53) /* beyond any host; JSON numbers stay exact */

json_t *users_quota_to_json(const users_quota *q)
{
    json_t *j = json_object();
    for (size_t i = 0; i < sizeof(quota_fields) / sizeof(quota_fields[0]); i++) {
        int64_t v = *QUOTA_FIELD((users_quota *)q, i);
        json_object_set_new(j, quota_fields[i].field,
                            v == QUOTA_UNLIMITED ? json_null() : json_integer(v));
    }
    return j;
}

int users_quota_from_json(const json_t *j, users_quota *q, gb_err *err)
{
    if (!json_is_object(j))
        return err_set(err, ERR_WRONG_TYPE, "quota must be an object, not %s", json_type_name(j));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v)
    {
        size_t i = 0, n = sizeof(quota_fields) / sizeof(quota_fields[0]);
        while (i < n && strcmp(quota_fields[i].field, key) != 0)
            i++;
        if (i == n)
            return err_set(err, ERR_INVALID_PARAMS,
                           "quota has no field '%.64s'; its fields are cards, shareMiB, instances, "
                           "volumeBytes, cores and maxPriority",
                           key);
        int64_t *dst = QUOTA_FIELD(q, i);
        if (json_is_null(v)) {
            *dst = QUOTA_UNLIMITED;
        } else if (json_is_integer(v)) {
            json_int_t x = json_integer_value(v);
            if (strcmp(key, "maxPriority") == 0 && x > 100)
                return err_set(err, ERR_INVALID_PARAMS,
                               "quota.maxPriority must be 0-100 (the highest queue priority the "
                               "user may ask), or null for 100, not %lld",
                               (long long)x);
            if (x < 0 || x > QUOTA_MAX)
                return err_set(
                    err, ERR_INVALID_PARAMS,
                    "quota.%s must be between 0 and %lld, or null for no limit, not %lld", key,
                    (long long)QUOTA_MAX, (long long)x);
            *dst = x;
        } else if (json_is_string(v) && strcmp(key, "volumeBytes") == 0) {
            uint64_t bytes = 0;
            if (size_parse(json_string_value(v), &bytes, err) < 0)
                return err_prefix(err, "quota.volumeBytes");
            if (bytes > (uint64_t)QUOTA_MAX)
                return err_set(err, ERR_INVALID_PARAMS, "quota.volumeBytes is too large");
            *dst = (int64_t)bytes;
        } else {
            return err_set(err, ERR_WRONG_TYPE, "quota.%s must be %s or null, not %s", key,
                           strcmp(key, "volumeBytes") == 0 ? "a number of bytes or a size"
                                                           : "a whole number",
                           json_type_name(v));
        }
    }
    return 0;
}

int users_from_json(const json_t *j, users_info *out, const users_quota *defaults)
{
    memset(out, 0, sizeof(*out));
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *role = json_string_value(json_object_get(j, "role"));
    const char *source = json_string_value(json_object_get(j, "source"));
    const char *hash = json_string_value(json_object_get(j, "tokenHash"));
    if (!name || strlen(name) > USER_NAME_MAX)
        return -1;
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->from_file = source && strcmp(source, "file") == 0;
    out->role = users_role_parse(role);
    if (!out->from_file && out->role == USER_ROLE_NONE)
        return -1;
    if (hash && strlen(hash) == TOKEN_DIGEST_HEX - 1) {
        snprintf(out->digest, sizeof(out->digest), "%s", hash);
        out->has_token = true;
    }
    out->quota = *defaults;
    json_t *q = json_object_get(j, "quota");
    gb_err e = GB_ERR_INIT;
    if (q && users_quota_from_json(q, &out->quota, &e) < 0)
        return -1;
    const char *ct = json_string_value(json_object_get(j, "createTime"));
    const char *tt = json_string_value(json_object_get(j, "tokenTime"));
    snprintf(out->create_time, sizeof(out->create_time), "%s", ct ? ct : "");
    snprintf(out->token_time, sizeof(out->token_time), "%s", tt ? tt : "");
    out->create_ms = json_integer_value(json_object_get(j, "createMs"));
    return 0;
}

json_t *users_to_json(const users_info *u, bool stored)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:o, s:s}", "name", u->name, "role",
                          users_role_name(u->role), "source", u->from_file ? "file" : "api",
                          "quota", users_quota_to_json(&u->quota), "createTime", u->create_time);
    if (stored && u->has_token)
        json_object_set_new(j, "tokenHash", json_string(u->digest));
    if (stored && u->create_ms)
        json_object_set_new(j, "createMs", json_integer(u->create_ms));
    if (!stored)
        json_object_set_new(j, "hasToken", json_boolean(u->from_file || u->has_token));
    if (u->token_time[0])
        json_object_set_new(j, "tokenTime", json_string(u->token_time));
    if (stored && u->from_file)
        json_object_del(j, "role"); /* the file's, not the store's */
    return j;
}
