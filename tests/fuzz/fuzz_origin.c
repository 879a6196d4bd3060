/*
 * fuzz_origin.c - Host and Origin values (http/origin.h), and the checks
 * made on them before any handler runs.
 *
 * The input is split at its first two newlines into a Host value, an
 * Origin value and a Sec-Fetch-Site value. Properties: no crash; an
 * accepted host[:port] is lowercase, has a port of 1-65535 or none, only
 * the characters of its kind, and prints back to a value that parses to
 * the same; an accepted Origin is http or https with such a host; the
 * checks never accept a Host that does not parse (with the built-in guard)
 * and never accept an Origin that is neither parseable and equal to the
 * Host's nor absent.
 */
#include "fuzz_util.h"

#include <ctype.h>
#include <stdbool.h>

#include "http/origin.h"

static void check_hostport(const http_hostport *hp, const char *input)
{
    size_t len = strlen(hp->host);
    FUZZ_CHECK(len > 0 && len <= HTTP_HOST_NAME_MAX, "'%s': host of length %zu", input, len);
    FUZZ_CHECK(hp->port <= 65535, "'%s': port %u", input, hp->port);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)hp->host[i];
        FUZZ_CHECK(!isupper(c), "'%s': host '%s' not lowercased", input, hp->host);
        bool ok = hp->kind == HTTP_HOST_NAME   ? isalnum(c) || c == '-' || c == '_' || c == '.'
                  : hp->kind == HTTP_HOST_IPV4 ? isdigit(c) || c == '.'
                                               : isxdigit(c) || c == ':' || c == '.';
        FUZZ_CHECK(ok, "'%s': host '%s' has 0x%02x", input, hp->host, c);
    }
    char again[HTTP_HOST_NAME_MAX + 16];
    bool v6 = hp->kind == HTTP_HOST_IPV6;
    int n = hp->port
                ? snprintf(again, sizeof(again), "%s%s%s:%u", v6 ? "[" : "", hp->host,
                           v6 ? "]" : "", hp->port)
                : snprintf(again, sizeof(again), "%s%s%s", v6 ? "[" : "", hp->host, v6 ? "]" : "");
    http_hostport back;
    FUZZ_CHECK(http_hostport_parse(again, (size_t)n, &back) == 0, "'%s' prints as '%s', refused",
               input, again);
    FUZZ_CHECK(back.kind == hp->kind && back.port == hp->port && !strcmp(back.host, hp->host),
               "'%s' prints as '%s', which parses differently", input, again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstring(data, size);
    char *origin = strchr(s, '\n');
    char *site = NULL;
    if (origin) {
        *origin++ = '\0';
        if ((site = strchr(origin, '\n')))
            *site++ = '\0';
    }
    const char *host = s;

    http_hostport hp;
    bool host_ok = http_hostport_parse(host, strlen(host), &hp) == 0;
    if (host_ok)
        check_hostport(&hp, host);
    http_origin o;
    bool origin_ok = origin && http_origin_parse(origin, &o) == 0;
    if (origin_ok)
        check_hostport(&o.hp, origin);

    gb_err err = GB_ERR_INIT;
    if (http_guard_check_host(NULL, host, &err) == 0)
        FUZZ_CHECK(host_ok, "Host '%s' answered but does not parse", host);
    else
        FUZZ_CHECK(err.code == ERR_HOST_NOT_ALLOWED, "Host '%s' refused with %d", host, err.code);

    http_fetch_info f = {.method = "POST", .host = host, .origin = origin, .site = site};
    err = (gb_err)GB_ERR_INIT;
    if (http_guard_check_origin(&f, false, NULL, &err) == 0) {
        FUZZ_CHECK(!origin || (origin_ok && host_ok && !o.https && !strcmp(o.hp.host, hp.host)),
                   "Origin '%s' accepted for Host '%s'", origin, host);
    } else {
        FUZZ_CHECK(err.code == ERR_FORBIDDEN, "refused with %d", err.code);
    }
    free(s);
    return 0;
}
