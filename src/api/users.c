/*
 * users.c - the users routes (docs/users.md): parse, one call to
 * service/users, respond; plus who the caller is, for the services
 * (api_caller_enter) and for the token check (api_users_directory).
 */
#include "util/xalloc.h"
#include "api/api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/service.h"
#include "service/users/users.h"
#include "util/time.h"

int api_user_role(enum http_role role)
{
    switch (role) {
    case HTTP_ROLE_ADMIN:
        return USER_ROLE_ADMIN;
    case HTTP_ROLE_USER:
        return USER_ROLE_USER;
    case HTTP_ROLE_VIEWER:
        return USER_ROLE_VIEWER;
    case HTTP_ROLE_NONE:
        break;
    }
    return USER_ROLE_NONE;
}

static enum http_role http_role_of(enum users_role role)
{
    switch (role) {
    case USER_ROLE_ADMIN:
        return HTTP_ROLE_ADMIN;
    case USER_ROLE_USER:
        return HTTP_ROLE_USER;
    case USER_ROLE_VIEWER:
        return HTTP_ROLE_VIEWER;
    case USER_ROLE_NONE:
        break;
    }
    return HTTP_ROLE_NONE;
}

enum http_role api_users_directory(void *ctx, const char *token, size_t len, char *name,
                                   size_t name_size)
{
    app *a = ctx;
    if (!a->users)
        return HTTP_ROLE_NONE;
    return http_role_of(users_token_role(a->users, token, len, name, name_size));
}

void api_caller_enter(const http_request *req)
{
    caller c = {.role = USER_ROLE_ADMIN};
    snprintf(c.name, sizeof(c.name), "%s", USER_ANONYMOUS);
    if (req->who && req->who->role != HTTP_ROLE_NONE) {
        snprintf(c.name, sizeof(c.name), "%s", req->who->name);
        c.role = (enum users_role)api_user_role(req->who->role);
    }
    users_caller_enter(&c);
}

/* Answer with *data once rc (the service's result) says it is there. */
static int answer(http_response *resp, int rc, json_t **data, gb_err *err)
{
    if (rc < 0)
        return -1;
    return http_response_data(resp, *data, err);
}

int api_whoami(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    return answer(resp, users_api_whoami(req->ctx, &data, err), &data, err);
}

int api_users_list(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    return answer(resp, users_api_list(req->ctx, &data, err), &data, err);
}

int api_users_create(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const allowed[] = {"name", "role", "quota", NULL};
    json_t *body = NULL, *data = NULL;
    if (api_body(req, allowed, true, &body, err) < 0)
        return -1;
    return answer(resp, users_api_create(req->ctx, body, &data, err), &data, err);
}

int api_user_get(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    const char *name = http_request_param(req, "name");
    return answer(resp, users_api_get(req->ctx, name, &data, err), &data, err);
}

int api_user_patch(http_request *req, http_response *resp, gb_err *err)
{
    static const char *const allowed[] = {"role", "quota", NULL};
    json_t *body = NULL, *data = NULL;
    const char *name = http_request_param(req, "name");
    if (api_body(req, allowed, true, &body, err) < 0)
        return -1;
    return answer(resp, users_api_patch(req->ctx, name, body, &data, err), &data, err);
}

int api_user_delete(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    const char *name = http_request_param(req, "name");
    return answer(resp, ownership_user_delete(req->ctx, name, &data, err), &data, err);
}

int api_user_token_rotate(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    const char *name = http_request_param(req, "name");
    return answer(resp, users_api_token_rotate(req->ctx, name, &data, err), &data, err);
}

int api_user_token_revoke(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    const char *name = http_request_param(req, "name");
    return answer(resp, users_api_token_revoke(req->ctx, name, &data, err), &data, err);
}

int api_quota_defaults_get(http_request *req, http_response *resp, gb_err *err)
{
    json_t *data = NULL;
    return answer(resp, users_api_defaults_get(req->ctx, &data, err), &data, err);
}

int api_quota_defaults_put(http_request *req, http_response *resp, gb_err *err)
{
    json_t *body = NULL, *data = NULL;
    if (req_json_body(req, &body, err) < 0)
        return -1;
    return answer(resp, users_api_defaults_put(req->ctx, body, &data, err), &data, err);
}

/* A time query parameter: RFC 3339 UTC ("2026-11-24T10:00:00Z"), Unix
 * seconds, or a date ("2026-11-24", a day in UTC: its start for from, its
 * end for to, so from=D&to=D is the whole day); *ms stays as it is when
 * absent. */
static int query_time(const http_request *req, const char *name, int64_t *ms, gb_err *err)
{
    const char *v = http_request_query(req, name);
    if (!v || !*v)
        return 0;
    bool digits = true;
    for (const char *p = v; *p; p++)
        digits = digits && isdigit((unsigned char)*p);
    if (digits && strlen(v) <= 12) {
        *ms = strtoll(v, NULL, 10) * 1000;
        return 0;
    }
    time_t t = 0;
    if (strlen(v) == 10) {
        char midnight[TIME_ISO_MAX];
        snprintf(midnight, sizeof(midnight), "%.10sT00:00:00Z", v);
        if ((t = time_iso_parse(midnight)) > 0 && strcmp(name, "to") == 0)
            t += 24 * 3600;
    } else {
        t = time_iso_parse(v);
    }
    if (t <= 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "query parameter %s is '%.40s'; give a date (2026-11-24), a time "
                       "(2026-11-24T10:00:00Z) or Unix seconds",
                       name, v);
    *ms = (int64_t)t * 1000;
    return 0;
}

int api_usage(http_request *req, http_response *resp, gb_err *err)
{
    int64_t from = 0, to = 0;
    json_t *data = NULL;
    if (query_time(req, "from", &from, err) < 0 || query_time(req, "to", &to, err) < 0)
        return -1;
    const char *user = http_request_query(req, "user");
    const char *set = http_request_query(req, "set");
    return answer(resp,
                  users_api_usage(req->ctx, user && *user ? user : NULL, set && *set ? set : NULL,
                                  from, to, &data, err),
                  &data, err);
}
