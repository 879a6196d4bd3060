/*
 * err.h - errors as values: an envelope code plus a message a user can act on.
 *
 * Every layer below the HTTP handlers reports failure by filling a gb_err and
 * returning -1. The code is one of the envelope codes below (DESIGN.md section
 * 3 for 1000-1035, docs/api.md for gpubox's own); the HTTP layer maps the code
 * to an HTTP status through err_http_status(). Lower layers that have no
 * better code use ERR_INTERNAL and say in the message what failed.
 */
#ifndef GPUBOX_UTIL_ERR_H
#define GPUBOX_UTIL_ERR_H

#include <stdarg.h>

enum err_code {
    ERR_OK = 200,

    /* gpu-docker-api's numbers, same meaning */
    ERR_INVALID_PARAMS = 1000,
    ERR_IMAGE_EMPTY = 1001,
    ERR_NAME_EMPTY = 1002,
    ERR_NAME_HAS_DASH = 1003,
    ERR_RUN_FAILED = 1004,
    ERR_DELETE_FAILED = 1005,
    ERR_EXECUTE_FAILED = 1006,
    ERR_PATCH_FAILED = 1007,
    ERR_EXISTS = 1008,
    ERR_STOP_FAILED = 1010,
    ERR_RESTART_FAILED = 1011,
    ERR_GPU_COUNT_NEGATIVE = 1012,
    ERR_GPU_NOT_ENOUGH = 1013,
    ERR_PORT_NOT_ENOUGH = 1014,
    ERR_COMMIT_FAILED = 1015,
    ERR_INFO_FAILED = 1016,
    ERR_HISTORY_FAILED = 1017,
    ERR_PAUSE_FAILED = 1018,
    ERR_CONTINUE_FAILED = 1019,
    ERR_VERSION_NEGATIVE = 1020,
    ERR_ROLLBACK_FAILED = 1021,
    ERR_NO_NEED_ROLLBACK = 1022,
    ERR_VOLUME_CREATE_FAILED = 1023,
    ERR_VOLUME_NAME_EMPTY = 1024,
    ERR_VOLUME_DELETE_FAILED = 1025,
    ERR_VOLUME_EXISTS = 1026,
    ERR_VOLUME_SIZE_UNCHANGED = 1028,
    ERR_VOLUME_SIZE_UNIT = 1029,
    ERR_VOLUME_USED_TOO_LARGE = 1030,
    ERR_VOLUME_NAME_HAS_DASH = 1031,
    ERR_VOLUME_NAME_SLASH = 1032,
    ERR_VOLUME_INFO_FAILED = 1033,
    ERR_VOLUME_HISTORY_FAILED = 1034,
    ERR_VOLUME_PATCH_FAILED = 1035,

    /* A body gpubox cannot read answers gpu-docker-api's 1000 ("Failed to
     * parse body"), as gin's binding does there for bad syntax and for a
     * field of the wrong type alike. The names stay so the code says which
     * it found; the message names the line, column or field. (1104 and 1105
     * were these before; they are not used again.) */
    ERR_MALFORMED_JSON = ERR_INVALID_PARAMS, /* 400: not JSON, a repeated key, too deep */
    ERR_WRONG_TYPE = ERR_INVALID_PARAMS,     /* 400: the body or a field has the wrong type */

    /* gpubox's own (docs/api.md) */
    ERR_NOT_FOUND = 1100,          /* 404: no such replica set, volume, operation */
    ERR_ROUTE_NOT_FOUND = 1101,    /* 404: unknown route */
    ERR_METHOD_NOT_ALLOWED = 1102, /* 405 */
    ERR_BODY_TOO_LARGE = 1103,     /* 413 */
    ERR_INVALID_NAME = 1106,       /* 400: a name breaks the naming rules */
    ERR_STATE_CONFLICT = 1107,     /* 409: the lifecycle state forbids this */
    ERR_UNAUTHORIZED = 1108,       /* 401 */
    ERR_FORBIDDEN = 1109,          /* 403 */
    ERR_IMAGE_NOT_FOUND = 1110,    /* 422: image not present locally */
    ERR_STORE_UNAVAILABLE = 1111,  /* 503 */
    ERR_DOCKER_UNAVAILABLE = 1112, /* 503 */
    ERR_CONFLICT = 1113,           /* 409: lost a compare-and-swap race */
    ERR_NODE_UNAVAILABLE = 1114,   /* 503: the fleet node that owns it does not answer */
    ERR_QUOTA_EXCEEDED = 1115,     /* 403: the owner's quota does not allow it */
    ERR_USER_EXISTS = 1116,        /* 409: a user of that name exists */
    ERR_USER_NOT_FOUND = 1117,     /* 404: no such user */
    ERR_CPU_NOT_ENOUGH = 1118,     /* 409: not enough free CPU cores (docs/cpus.md) */
    ERR_REGISTRY_AUTH = 1130,      /* 403: the registry refused the pull's credentials (or none) */
    ERR_PULL_FAILED = 1131,        /* 502: the registry could not give the image */
    ERR_HOST_NOT_ALLOWED = 1140,   /* 421: a Host name gpuboxd does not answer to */
    ERR_TERMINAL_LIMIT = 1160,     /* 429: the caller has as many terminals open as allowed */
    ERR_PROXY_OFF = 1165,          /* 409: the service proxy is off (--proxy-listen) */
    ERR_PRIORITY_NOT_ALLOWED = 1170, /* 403: a queue priority above the user's maxPriority */
    ERR_MOVE_NO_DISK = 1185, /* 507: a move's target cannot hold the disks (docs/fleet.md) */
    ERR_INTERNAL = 1199,     /* 500 */
};

typedef struct gb_err {
    int code;      /* enum err_code; ERR_OK when nothing went wrong */
    char msg[512]; /* for a user: what went wrong and what to do */
    /* Optional JSON text for the envelope's data, for clients that want the
     * particulars a short message leaves out (a 1013's free card ids); ""
     * for none. err_set clears it; err_prefix keeps it. */
    char data[1024];
} gb_err;

#define GB_ERR_INIT                                                                                \
    {                                                                                              \
        .code = ERR_OK, .msg = ""                                                                  \
    }

/* Fill *e (if not NULL) and return -1, so callers can write
 * `return err_set(e, ERR_..., "...")`. */
int err_set(gb_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int err_setv(gb_err *e, int code, const char *fmt, va_list ap);

/* Prefix an existing message with context: "creating foo: <old msg>". Keeps the code. */
int err_prefix(gb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void err_clear(gb_err *e);

/* Attach JSON text (an object) as the error's data; cut text is dropped
 * whole, so the envelope never carries half an object. Returns -1. */
int err_set_data(gb_err *e, const char *json_text);

/* HTTP status that tells the class of an envelope code (200, 400, 401, 403, 404,
 * 405, 409, 413, 422, 500, 503). */
int err_http_status(int code);

/* Short symbolic name of a code, for docs and logs ("GPU_NOT_ENOUGH"). */
const char *err_name(int code);

#endif
