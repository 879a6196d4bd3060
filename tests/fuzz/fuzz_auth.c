/*
 * fuzz_auth.c - the token file parser, the Authorization header and the
 * --cors-origins list, all of which read text an operator or a client
 * wrote.
 *
 * Input: the token file text. Properties: no crash or leak; every token
 * of a parsed table is found again by its own text with its role; a
 * bearer header built from each line finds the same entry.
 */
#include "fuzz_util.h"

#include "http/auth.h"
#include "http/cors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    http_auth *a = NULL;
    gb_err err;
    if (http_auth_parse(text, "fuzz", &a, &err) == 0) {
        /* Re-read the lines the parser accepted and look each token up. */
        char *copy = strdup(text);
        for (char *rest = copy, *line; (line = strsep(&rest, "\n"));) {
            while (*line == ' ' || *line == '\t' || *line == '\r')
                line++;
            char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2 || line[0] == '#')
                continue;
            char *token = c2 + 1;
            size_t len = strcspn(token, " \t\r");
            const char *name = NULL;
            enum http_role role = http_auth_lookup(a, token, len, &name);
            FUZZ_CHECK(role != HTTP_ROLE_NONE && name, "an accepted token is not found");
            FUZZ_CHECK(strncmp(name, line, (size_t)(c1 - line)) == 0, "found under another name");
            char header[AUTH_TOKEN_MAX + 16];
            snprintf(header, sizeof(header), "Bearer %.*s", (int)len, token);
            const char *t;
            size_t n;
            FUZZ_CHECK(http_auth_bearer(header, &t, &n) && n == len, "bearer header lost it");
        }
        free(copy);
        http_auth_free(a);
    }
    const char *t;
    size_t n;
    if (http_auth_bearer(text, &t, &n))
        FUZZ_CHECK(n > 0 && t >= text && t + n <= text + strlen(text), "token outside header");
    http_cors *c = NULL;
    if (http_cors_parse(text, &c, &err) == 0) {
        FUZZ_CHECK(!http_cors_match(c, "*"), "a wildcard origin was accepted");
        http_cors_free(c);
    }
    free(text);
    return 0;
}
