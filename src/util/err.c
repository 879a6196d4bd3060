/*
 * err.c - filling error values and mapping envelope codes to HTTP classes.
 */
#include "util/err.h"

#include <stdio.h>
#include <string.h>

int err_setv(gb_err *e, int code, const char *fmt, va_list ap)
{
    if (!e)
        return -1;
    e->code = code;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    e->data[0] = '\0';
    return -1;
}

int err_set(gb_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_setv(e, code, fmt, ap);
    va_end(ap);
    return -1;
}

int err_prefix(gb_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    /* "prefix: old message", cut to the buffer if too long. Built by hand
     * rather than with one snprintf so -Wformat-truncation has nothing to
     * warn about at any optimisation level. */
    char joined[sizeof(e->msg)];
    size_t used = strnlen(prefix, sizeof(prefix) - 1);
    memcpy(joined, prefix, used);
    memcpy(joined + used, ": ", 2);
    used += 2;
    size_t old_len = strnlen(e->msg, sizeof(e->msg) - 1);
    if (old_len > sizeof(joined) - 1 - used)
        old_len = sizeof(joined) - 1 - used;
    memcpy(joined + used, e->msg, old_len);
    joined[used + old_len] = '\0';
    memcpy(e->msg, joined, used + old_len + 1);
    return -1;
}

void err_clear(gb_err *e)
{
    if (!e)
        return;
    e->code = ERR_OK;
    e->msg[0] = '\0';
    e->data[0] = '\0';
}

int err_set_data(gb_err *e, const char *json_text)
{
    if (!e)
        return -1;
    size_t n = json_text ? strlen(json_text) : 0;
    if (n >= sizeof(e->data))
        n = 0;
    memcpy(e->data, json_text ? json_text : "", n);
    e->data[n] = '\0';
    return -1;
}

static const struct {
    int code;
    int http;
    const char *name;
} err_table[] = {
    {ERR_OK, 200, "OK"},
    {ERR_INVALID_PARAMS, 400, "INVALID_PARAMS"},
    {ERR_IMAGE_EMPTY, 400, "IMAGE_EMPTY"},
    {ERR_NAME_EMPTY, 400, "NAME_EMPTY"},
    {ERR_NAME_HAS_DASH, 400, "NAME_HAS_DASH"},
    {ERR_RUN_FAILED, 500, "RUN_FAILED"},
    {ERR_DELETE_FAILED, 500, "DELETE_FAILED"},
    {ERR_EXECUTE_FAILED, 500, "EXECUTE_FAILED"},
    {ERR_PATCH_FAILED, 500, "PATCH_FAILED"},
    {ERR_EXISTS, 409, "EXISTS"},
    {ERR_STOP_FAILED, 500, "STOP_FAILED"},
    {ERR_RESTART_FAILED, 500, "RESTART_FAILED"},
    {ERR_GPU_COUNT_NEGATIVE, 400, "GPU_COUNT_NEGATIVE"},
    {ERR_GPU_NOT_ENOUGH, 409, "GPU_NOT_ENOUGH"},
    {ERR_PORT_NOT_ENOUGH, 409, "PORT_NOT_ENOUGH"},
    {ERR_COMMIT_FAILED, 500, "COMMIT_FAILED"},
    {ERR_INFO_FAILED, 500, "INFO_FAILED"},
    {ERR_HISTORY_FAILED, 500, "HISTORY_FAILED"},
    {ERR_PAUSE_FAILED, 500, "PAUSE_FAILED"},
    {ERR_CONTINUE_FAILED, 500, "CONTINUE_FAILED"},
    {ERR_VERSION_NEGATIVE, 400, "VERSION_NEGATIVE"},
    {ERR_ROLLBACK_FAILED, 500, "ROLLBACK_FAILED"},
    {ERR_NO_NEED_ROLLBACK, 409, "NO_NEED_ROLLBACK"},
    {ERR_VOLUME_CREATE_FAILED, 500, "VOLUME_CREATE_FAILED"},
    {ERR_VOLUME_NAME_EMPTY, 400, "VOLUME_NAME_EMPTY"},
    {ERR_VOLUME_DELETE_FAILED, 500, "VOLUME_DELETE_FAILED"},
    {ERR_VOLUME_EXISTS, 409, "VOLUME_EXISTS"},
    {ERR_VOLUME_SIZE_UNCHANGED, 409, "VOLUME_SIZE_UNCHANGED"},
    {ERR_VOLUME_SIZE_UNIT, 400, "VOLUME_SIZE_UNIT"},
    {ERR_VOLUME_USED_TOO_LARGE, 409, "VOLUME_USED_TOO_LARGE"},
    {ERR_VOLUME_NAME_HAS_DASH, 400, "VOLUME_NAME_HAS_DASH"},
    {ERR_VOLUME_NAME_SLASH, 400, "VOLUME_NAME_SLASH"},
    {ERR_VOLUME_INFO_FAILED, 500, "VOLUME_INFO_FAILED"},
    {ERR_VOLUME_HISTORY_FAILED, 500, "VOLUME_HISTORY_FAILED"},
    {ERR_VOLUME_PATCH_FAILED, 500, "VOLUME_PATCH_FAILED"},
    {ERR_NOT_FOUND, 404, "NOT_FOUND"},
    {ERR_ROUTE_NOT_FOUND, 404, "ROUTE_NOT_FOUND"},
    {ERR_METHOD_NOT_ALLOWED, 405, "METHOD_NOT_ALLOWED"},
    {ERR_BODY_TOO_LARGE, 413, "BODY_TOO_LARGE"},
    {ERR_INVALID_NAME, 400, "INVALID_NAME"},
    {ERR_STATE_CONFLICT, 409, "STATE_CONFLICT"},
    {ERR_UNAUTHORIZED, 401, "UNAUTHORIZED"},
    {ERR_FORBIDDEN, 403, "FORBIDDEN"},
    {ERR_IMAGE_NOT_FOUND, 422, "IMAGE_NOT_FOUND"},
    {ERR_STORE_UNAVAILABLE, 503, "STORE_UNAVAILABLE"},
    {ERR_DOCKER_UNAVAILABLE, 503, "DOCKER_UNAVAILABLE"},
    {ERR_CONFLICT, 409, "CONFLICT"},
    {ERR_NODE_UNAVAILABLE, 503, "NODE_UNAVAILABLE"},
    {ERR_QUOTA_EXCEEDED, 403, "QUOTA_EXCEEDED"},
    {ERR_USER_EXISTS, 409, "USER_EXISTS"},
    {ERR_USER_NOT_FOUND, 404, "USER_NOT_FOUND"},
    {ERR_CPU_NOT_ENOUGH, 409, "CPU_NOT_ENOUGH"},
    {ERR_REGISTRY_AUTH, 403, "REGISTRY_AUTH"},
    {ERR_PULL_FAILED, 502, "PULL_FAILED"},
    {ERR_HOST_NOT_ALLOWED, 421, "HOST_NOT_ALLOWED"},
    {ERR_TERMINAL_LIMIT, 429, "TERMINAL_LIMIT"},
    {ERR_PROXY_OFF, 409, "PROXY_OFF"},
    {ERR_PRIORITY_NOT_ALLOWED, 403, "PRIORITY_NOT_ALLOWED"},
    {ERR_MOVE_NO_DISK, 507, "MOVE_NO_DISK"},
    {ERR_INTERNAL, 500, "INTERNAL"},
};

int err_http_status(int code)
{
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].code == code)
            return err_table[i].http;
    return 500;
}

const char *err_name(int code)
{
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].code == code)
            return err_table[i].name;
    return "UNKNOWN";
}
