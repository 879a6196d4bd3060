/*
 * fuzz_router.c - gpubox's real route table (api_router_new) against any
 * method and path, as libmicrohttpd hands them over (decoded, so any byte
 * but NUL).
 *
 * Input: the method up to the first space (or one of the usual methods
 * picked by the first byte), the rest the path. Properties: no crash; a
 * found route has every parameter of its pattern, each non-empty and
 * without '/', and its line says who may call it and how a fleet answers
 * it; a 405 lists at least one method.
 */
#include "fuzz_util.h"

#include "api/api.h"
#include "http/router.h"

static http_router *router;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    gb_err err;
    router = api_router_new(&err);
    FUZZ_CHECK(router, "no route table: %s", err.msg);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "HEAD",   "POST",   "PATCH",
                                          "PUT", "DELETE", "OPTIONS"};
    char *text = fuzz_cstring(data, size);
    char *space = strchr(text, ' ');
    const char *method, *path;
    if (space) {
        *space = '\0';
        method = text;
        path = space + 1;
    } else {
        method = methods[size ? data[0] % 7 : 0];
        path = size ? text + 1 : text;
    }
    router_match m;
    switch (router_match_request(router, method, path, &m)) {
    case ROUTER_FOUND:
        FUZZ_CHECK(m.route && m.route->handler, "found without a handler");
        FUZZ_CHECK(m.route->access != HTTP_ACCESS_BY_METHOD && m.route->fleet != 0,
                   "%s %s: its line leaves who may call it or its fleet scope unset", method,
                   m.route->pattern);
        for (size_t i = 0; i < m.nparams; i++)
            FUZZ_CHECK(m.params[i].value[0] && !strchr(m.params[i].value, '/'),
                       "%s %s: bad parameter '%s'", method, path, m.params[i].value);
        size_t braces = 0;
        for (const char *p = m.route->pattern; *p; p++)
            braces += *p == '{';
        FUZZ_CHECK(m.nparams == braces, "%s %s: %zu parameters for %s", method, path, m.nparams,
                   m.route->pattern);
        break;
    case ROUTER_METHOD_NOT_ALLOWED:
        FUZZ_CHECK(m.allow[0], "405 without methods for %s %s", method, path);
        break;
    case ROUTER_NOT_FOUND:
        break;
    }
    router_match_free(&m);
    free(text);
    return 0;
}
