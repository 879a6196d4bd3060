/*
 * router.c - route table and matching; see router.h for the rules.
 *
 * Each entry keeps its pattern split into segments (pointers into one copy
 * of the pattern, with the braces of "{name}" stripped). A request path is
 * split the same way into a scratch copy that the match owns, so path
 * parameters are plain pointers into it and need no allocation of their own.
 */
#include "util/xalloc.h"
#include "http/router.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

typedef struct router_entry {
    http_route route;
    char *copy; /* owns the segment strings */
    const char *seg[ROUTER_MAX_SEGMENTS];
    bool is_param[ROUTER_MAX_SEGMENTS];
    size_t nseg;
    unsigned specificity; /* one bit per literal segment, first segment highest */
} router_entry;

struct http_router {
    router_entry *entries;
    size_t n, cap;
};

http_router *router_new(void)
{
    return xcalloc(1, sizeof(http_router));
}

void router_free(http_router *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free(r->entries[i].copy);
    free(r->entries);
    free(r);
}

/* Split s in place on '/', skipping empty segments (so "//" and a trailing
 * slash are tolerated). Returns the count, or -1 if there are too many. */
static int router_split(char *s, const char **seg)
{
    int n = 0;
    for (char *tok = strtok_r(s, "/", &s); tok; tok = strtok_r(NULL, "/", &s)) {
        if (n == ROUTER_MAX_SEGMENTS)
            return -1;
        seg[n++] = tok;
    }
    return n;
}

static int router_entry_init(router_entry *e, const http_route *route, gb_err *err)
{
    const char *p = route->pattern;
    *e = (router_entry){.route = *route};
    if (!p || p[0] != '/' || !route->method || !route->handler) {
        err_set(err, ERR_INTERNAL,
                "route '%s': pattern must start with '/' and have a method "
                "and handler",
                p ? p : "(null)");
        return -1;
    }
    e->copy = xstrdup(p);
    int n = router_split(e->copy, e->seg);
    if (n < 0) {
        err_set(err, ERR_INTERNAL, "route %s has more than %d segments", p, ROUTER_MAX_SEGMENTS);
        free(e->copy);
        return -1;
    }
    e->nseg = (size_t)n;
    size_t nparams = 0;
    for (size_t i = 0; i < e->nseg; i++) {
        char *s = (char *)e->seg[i];
        size_t len = strlen(s);
        if (s[0] == '{') {
            if (len < 3 || s[len - 1] != '}' || ++nparams > ROUTER_MAX_PARAMS) {
                err_set(err, ERR_INTERNAL, "route %s: bad parameter segment '%s'", p, s);
                free(e->copy);
                return -1;
            }
            s[len - 1] = '\0';
            e->seg[i] = s + 1;
            e->is_param[i] = true;
        } else {
            e->specificity |= 1u << (ROUTER_MAX_SEGMENTS - 1 - i);
        }
    }
    return 0;
}

static bool router_same_pattern(const router_entry *a, const router_entry *b)
{
    if (a->nseg != b->nseg)
        return false;
    for (size_t i = 0; i < a->nseg; i++)
        if (a->is_param[i] != b->is_param[i] || (!a->is_param[i] && strcmp(a->seg[i], b->seg[i])))
            return false;
    return true;
}

int router_add(http_router *r, const http_route *route, gb_err *err)
{
    router_entry e = {0};
    if (router_entry_init(&e, route, err) < 0)
        return -1;
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->entries[i].route.method, route->method) == 0 &&
            router_same_pattern(&r->entries[i], &e)) {
            free(e.copy);
            return err_set(err, ERR_INTERNAL, "route %s %s is registered twice", route->method,
                           route->pattern);
        }
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        router_entry *grown = xrealloc(r->entries, cap * sizeof(*grown));
        r->entries = grown;
        r->cap = cap;
    }
    r->entries[r->n++] = e;
    return 0;
}

static bool router_entry_matches(const router_entry *e, const char **seg, size_t nseg)
{
    if (e->nseg != nseg)
        return false;
    for (size_t i = 0; i < nseg; i++)
        if (!e->is_param[i] && strcmp(e->seg[i], seg[i]) != 0)
            return false;
    return true;
}

/* Append method to the comma-separated Allow list unless already there. */
static void router_allow_add(char *allow, size_t size, const char *method)
{
    size_t mlen = strlen(method);
    for (const char *p = allow; (p = strstr(p, method)); p += mlen)
        if ((p == allow || p[-1] == ' ') && (p[mlen] == ',' || p[mlen] == '\0'))
            return;
    size_t used = strlen(allow);
    snprintf(allow + used, size - used, "%s%s", used ? ", " : "", method);
}

enum router_result router_match_request(const http_router *r, const char *method, const char *path,
                                        router_match *m)
{
    *m = (router_match){0};
    m->scratch = xstrdup(path ? path : "");
    const char *seg[ROUTER_MAX_SEGMENTS];
    int nseg = router_split(m->scratch, seg);
    if (nseg < 0)
        return ROUTER_NOT_FOUND;

    /* HEAD asks what GET would answer, without the body. */
    const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
    const router_entry *best = NULL;
    for (size_t i = 0; i < r->n; i++) {
        const router_entry *e = &r->entries[i];
        if (!router_entry_matches(e, seg, (size_t)nseg))
            continue;
        if (strcmp(e->route.method, want) != 0)
            router_allow_add(m->allow, sizeof(m->allow), e->route.method);
        else if (!best || e->specificity > best->specificity)
            best = e;
    }
    if (!best)
        return m->allow[0] ? ROUTER_METHOD_NOT_ALLOWED : ROUTER_NOT_FOUND;

    m->route = &best->route;
    for (size_t i = 0; i < best->nseg; i++)
        if (best->is_param[i])
            m->params[m->nparams++] = (http_kv){.key = best->seg[i], .value = seg[i]};
    return ROUTER_FOUND;
}

void router_match_free(router_match *m)
{
    free(m->scratch);
    m->scratch = NULL;
}

size_t router_count(const http_router *r)
{
    return r->n;
}

const http_route *router_route(const http_router *r, size_t i)
{
    return i < r->n ? &r->entries[i].route : NULL;
}
