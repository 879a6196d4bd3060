/*
 * proxy_head.c - request heads, routes, query parameters and body framing
 * for the service proxy (proxy_head.h).
 */
#include "proxy/proxy_head.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t proxy_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (buf[i + 1] == '\n')
            return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

static bool token_char(unsigned char c)
{
    return c > 32 && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* The next line of buf[*pos..end) made a string (its CR LF or LF NULs):
 * NULL at the end. */
static char *next_line(char *buf, size_t end, size_t *pos)
{
    if (*pos >= end)
        return NULL;
    char *line = buf + *pos;
    char *nl = memchr(line, '\n', end - *pos);
    if (!nl)
        return NULL;
    *pos = (size_t)(nl - buf) + 1;
    *nl = '\0';
    if (nl > line && nl[-1] == '\r')
        nl[-1] = '\0';
    return line;
}

static bool has_ctl(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 32 && *s != '\t') || *s == 127)
            return true;
    return false;
}

static int parse_request_line(char *line, proxy_head *out)
{
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ') || sp1 == line || has_ctl(line))
        return -1;
    *sp1 = *sp2 = '\0';
    for (const char *m = line; *m; m++)
        if (!token_char((unsigned char)*m))
            return -1;
    const char *v = sp2 + 1;
    if (sp1[1] != '/' || (strcmp(v, "HTTP/1.1") != 0 && strcmp(v, "HTTP/1.0") != 0))
        return -1;
    out->method = line;
    out->target = sp1 + 1;
    out->version = sp2 + 1;
    return 0;
}

int proxy_head_parse(char *buf, size_t end, proxy_head *out)
{
    memset(out, 0, sizeof(*out));
    size_t pos = 0;
    char *line = next_line(buf, end, &pos);
    if (!line || parse_request_line(line, out) < 0)
        return -1;
    while ((line = next_line(buf, end, &pos)) && *line) {
        if (*line == ' ' || *line == '\t' || out->nheaders == PROXY_MAX_HEADERS || has_ctl(line))
            return -1;
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return -1;
        for (const char *c = line; c < colon; c++)
            if (!token_char((unsigned char)*c))
                return -1;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            v[--n] = '\0';
        out->headers[out->nheaders++] = (proxy_header){line, v};
    }
    if (!line)
        return -1;
    out->length = end;
    return 0;
}

const char *proxy_head_get(const proxy_head *h, const char *name)
{
    for (size_t i = 0; i < h->nheaders; i++)
        if (strcasecmp(h->headers[i].name, name) == 0)
            return h->headers[i].value;
    return NULL;
}

bool proxy_header_has_token(const char *value, const char *token)
{
    size_t tl = strlen(token);
    for (const char *p = value; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        if (m == tl && strncasecmp(p, token, tl) == 0)
            return true;
        p += n;
    }
    return false;
}

/* A segment of a name: letters, digits, '_' and '.'; not empty. */
static bool copy_segment(const char *s, size_t n, char *out, size_t size)
{
    if (n == 0 || n >= size)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.')
            return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

static int route_of_host(const char *host, const char *domain, proxy_route *out)
{
    size_t hl = strcspn(host, ":"), dl = strlen(domain);
    if (host[0] == '[' || hl <= dl + 1 || host[hl - dl - 1] != '.' ||
        strncasecmp(host + hl - dl, domain, dl) != 0)
        return -1;
    size_t label = hl - dl - 1;
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < label; i++)
        if (host[i] == '-' && host[i + 1] == '-') {
            sep = host + i;
            break;
        }
    if (!sep || memchr(host, '.', label))
        return -1;
    if (!copy_segment(host, (size_t)(sep - host), out->service, sizeof(out->service)) ||
        !copy_segment(sep + 2, label - (size_t)(sep - host) - 2, out->set, sizeof(out->set)))
        return -1;
    for (char *c = out->service; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    for (char *c = out->set; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return 0;
}

int proxy_route_of(const char *target, const char *host, const char *domain, proxy_route *out)
{
    memset(out, 0, sizeof(*out));
    if (domain && host && route_of_host(host, domain, out) == 0)
        return 0;
    if (strncmp(target, "/s/", 3) != 0)
        return -1;
    const char *set = target + 3;
    size_t sl = strcspn(set, "/?#");
    if (set[sl] != '/')
        return -1;
    const char *svc = set + sl + 1;
    size_t vl = strcspn(svc, "/?#");
    if (!copy_segment(set, sl, out->set, sizeof(out->set)) ||
        !copy_segment(svc, vl, out->service, sizeof(out->service)))
        return -1;
    snprintf(out->prefix, sizeof(out->prefix), "/s/%s/%s", out->set, out->service);
    out->add_slash = svc[vl] != '/';
    return 0;
}

int proxy_query_take(const char *target, const char *name, char *out, size_t size, char *rest,
                     size_t rest_size)
{
    const char *q = strchr(target, '?');
    size_t nl = strlen(name);
    if (!q)
        return 0;
    for (const char *p = q + 1; *p;) {
        size_t n = strcspn(p, "&#");
        if (n > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t vl = n - nl - 1;
            if (vl >= size)
                return 0;
            memcpy(out, p + nl + 1, vl);
            out[vl] = '\0';
            /* target without "name=value": with the '&' after it, or
             * (last of the query) with the '?' or '&' before it */
            const char *after = p + n;
            size_t head = (size_t)(p - target);
            if (*after == '&')
                after++;
            else
                head--;
            snprintf(rest, rest_size, "%.*s%s", (int)head, target, after);
            return 1;
        }
        p += n;
        if (*p != '&')
            break;
        p++;
    }
    return 0;
}

int proxy_body_init(const proxy_head *h, proxy_body *b)
{
    memset(b, 0, sizeof(*b));
    const char *te = proxy_head_get(h, "Transfer-Encoding");
    const char *cl = proxy_head_get(h, "Content-Length");
    for (size_t i = 0, seen = 0; i < h->nheaders; i++)
        if (strcasecmp(h->headers[i].name, "Content-Length") == 0 && seen++)
            return -1;
    if (te && cl)
        return -1;
    if (te) {
        if (strcasecmp(te, "chunked") != 0)
            return -1;
        b->kind = PROXY_BODY_CHUNKED;
        return 0;
    }
    if (cl) {
        if (!*cl || strspn(cl, "0123456789") != strlen(cl) || strlen(cl) > 18)
            return -1;
        unsigned long long n = 0;
        sscanf(cl, "%llu", &n);
        b->kind = PROXY_BODY_LENGTH;
        b->left = n;
        b->done = n == 0;
        return 0;
    }
    b->done = true;
    return 0;
}

enum {
    CH_SIZE_FIRST,
    CH_SIZE,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START,
    CH_TRAILER_LINE,
    CH_FINAL_LF,
};

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static long chunked_feed(proxy_body *b, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && !b->done) {
        char c = buf[i];
        switch (b->state) {
        case CH_SIZE_FIRST:
        case CH_SIZE: {
            int v = hex_value(c);
            if (v >= 0) {
                if (b->left >> 56)
                    return -1;
                b->left = b->left * 16 + (uint64_t)v;
                b->state = CH_SIZE;
            } else if (b->state == CH_SIZE && (c == ';' || c == ' ' || c == '\t')) {
                b->state = CH_EXT;
            } else if (b->state == CH_SIZE && c == '\r') {
                b->state = CH_SIZE_LF;
            } else {
                return -1;
            }
            i++;
            break;
        }
        case CH_EXT:
            if (c == '\r')
                b->state = CH_SIZE_LF;
            else if (c == '\n')
                return -1;
            i++;
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return -1;
            b->state = b->left ? CH_DATA : CH_TRAILER_START;
            i++;
            break;
        case CH_DATA: {
            size_t n = len - i < b->left ? len - i : (size_t)b->left;
            b->left -= n;
            i += n;
            if (!b->left)
                b->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (c != '\r')
                return -1;
            b->state = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return -1;
            b->state = CH_SIZE_FIRST;
            i++;
            break;
        case CH_TRAILER_START:
            b->state = c == '\r' ? CH_FINAL_LF : CH_TRAILER_LINE;
            i++;
            break;
        case CH_TRAILER_LINE:
            if (c == '\n')
                b->state = CH_TRAILER_START;
            i++;
            break;
        case CH_FINAL_LF:
            if (c != '\n')
                return -1;
            b->done = true;
            i++;
            break;
        default:
            return -1;
        }
    }
    return (long)i;
}

long proxy_body_feed(proxy_body *b, const char *buf, size_t len)
{
    if (b->done)
        return 0;
    if (b->kind == PROXY_BODY_CLOSE)
        return (long)len;
    if (b->kind == PROXY_BODY_CHUNKED)
        return chunked_feed(b, buf, len);
    size_t n = len < b->left ? len : (size_t)b->left;
    b->left -= n;
    b->done = b->left == 0;
    return (long)n;
}

/* The last coding of a Transfer-Encoding value ("gzip, chunked": chunked). */
static bool last_coding_is_chunked(const char *v, size_t n)
{
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    size_t start = n;
    while (start && v[start - 1] != ',')
        start--;
    while (start < n && (v[start] == ' ' || v[start] == '\t'))
        start++;
    return n - start == 7 && strncasecmp(v + start, "chunked", 7) == 0;
}

int proxy_response_parse(const char *buf, size_t end, const char *method, proxy_response *out)
{
    memset(out, 0, sizeof(*out));
    int minor = -1, status = 0;
    if (end < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) ||
        !isdigit((unsigned char)buf[11]) || (end > 12 && !strchr(" \r\n", buf[12])))
        return -1;
    minor = buf[7] - '0';
    status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (status < 100)
        return -1;
    out->status = status;
    bool close = minor == 0, chunked = false, te = false, cl = false;
    uint64_t length = 0;
    for (size_t pos = 0; pos < end;) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', end - pos);
        size_t n = nl ? (size_t)(nl - line) : end - pos;
        pos += n + 1;
        if (line == buf)
            continue;
        if (n && line[n - 1] == '\r')
            n--;
        const char *colon = memchr(line, ':', n);
        if (!colon)
            continue;
        size_t name = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vn = n - name - 1;
        while (vn && (*v == ' ' || *v == '\t'))
            v++, vn--;
        while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        if (name == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            uint64_t x = 0;
            if (vn == 0 || vn > 18)
                return -1;
            for (size_t i = 0; i < vn; i++) {
                if (!isdigit((unsigned char)v[i]))
                    return -1;
                x = x * 10 + (uint64_t)(v[i] - '0');
            }
            if (cl && x != length)
                return -1;
            cl = true;
            length = x;
        } else if (name == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
            te = true;
            chunked = last_coding_is_chunked(v, vn);
        } else if (name == 10 && strncasecmp(line, "Connection", 10) == 0) {
            char value[256];
            snprintf(value, sizeof(value), "%.*s", (int)(vn < 255 ? vn : 255), v);
            if (proxy_header_has_token(value, "close"))
                close = true;
        }
    }
    bool no_body =
        (method && strcmp(method, "HEAD") == 0) || status < 200 || status == 204 || status == 304;
    if (no_body) {
        out->body.kind = PROXY_BODY_NONE;
        out->body.done = true;
    } else if (te) {
        /* Transfer-Encoding wins over Content-Length; both is a smell: the
         * connection is not used again */
        out->body.kind = chunked ? PROXY_BODY_CHUNKED : PROXY_BODY_CLOSE;
        close = close || cl || !chunked;
    } else if (cl) {
        out->body.kind = PROXY_BODY_LENGTH;
        out->body.left = length;
        out->body.done = length == 0;
    } else {
        out->body.kind = PROXY_BODY_CLOSE;
        close = true;
    }
    out->keep_alive = !close;
    return 0;
}
