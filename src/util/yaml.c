/*
 * yaml.c - the YAML subset reader (see yaml.h).
 *
 * The text is first cut into lines, each with its indentation and its
 * content; blank and comment-only lines are marked so the block parser
 * skips them (a block scalar reads the raw lines instead, since a '#' is
 * text there). Then a recursive descent over the lines: a node at a given
 * indentation is a mapping, a sequence or a scalar; nested nodes are
 * deeper. A `- key: v` line is handled by moving the line's start past the
 * dash, so the mapping it opens is parsed as any other mapping at that
 * column. Flow collections and scalars within a line are parsed by a
 * small character-level parser.
 */
#include "util/yaml.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

typedef struct yaml_line {
    size_t indent;    /* leading spaces (moved right past "- " for sequence items) */
    const char *text; /* content after the indentation */
    size_t len;       /* without trailing spaces and the newline */
    const char *raw;  /* the whole line, for block scalars */
    size_t raw_len;
    bool blank; /* empty or a comment */
} yaml_line;

typedef struct yaml_parser {
    yaml_line *lines;
    size_t n, pos;
    gb_err *err;
} yaml_parser;

static json_t *yaml_fail(yaml_parser *p, size_t line, const char *what)
{
    err_set(p->err, ERR_INVALID_PARAMS, "YAML line %zu: %s", line + 1, what);
    return NULL;
}

static int yaml_split(yaml_parser *p, const char *text, size_t len)
{
    size_t cap = 64;
    p->lines = malloc(cap * sizeof(*p->lines));
    if (!p->lines)
        return err_set(p->err, ERR_INTERNAL, "out of memory reading YAML");
    for (size_t start = 0; start < len;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (p->n == cap) {
            cap *= 2;
            yaml_line *grown = realloc(p->lines, cap * sizeof(*grown));
            if (!grown)
                return err_set(p->err, ERR_INTERNAL, "out of memory reading YAML");
            p->lines = grown;
        }
        yaml_line *l = &p->lines[p->n];
        *l = (yaml_line){.raw = text + start, .raw_len = end - start};
        if (l->raw_len && l->raw[l->raw_len - 1] == '\r')
            l->raw_len--;
        while (l->indent < l->raw_len && l->raw[l->indent] == ' ')
            l->indent++;
        if (l->indent < l->raw_len && l->raw[l->indent] == '\t')
            return err_set(p->err, ERR_INVALID_PARAMS,
                           "YAML line %zu: a tab in the indentation; indent with spaces", p->n + 1);
        l->text = l->raw + l->indent;
        l->len = l->raw_len - l->indent;
        while (l->len && (l->text[l->len - 1] == ' ' || l->text[l->len - 1] == '\t'))
            l->len--;
        l->blank = l->len == 0 || l->text[0] == '#';
        if (l->len == 3 && (strncmp(l->text, "---", 3) == 0 || strncmp(l->text, "...", 3) == 0) &&
            l->indent == 0)
            l->blank = true; /* document markers: one document only */
        p->n++;
        start = end + 1;
    }
    return 0;
}

static void yaml_skip_blank(yaml_parser *p)
{
    while (p->pos < p->n && p->lines[p->pos].blank)
        p->pos++;
}

/* ---- scalars and flow collections within one line ---- */

typedef struct yaml_cursor {
    const char *s;
    size_t len, i;
    bool flow; /* inside [] or {}: , ] } end a plain scalar */
} yaml_cursor;

static void cur_spaces(yaml_cursor *c)
{
    while (c->i < c->len && c->s[c->i] == ' ')
        c->i++;
}

/* A plain scalar's text typed as the core schema does. */
static json_t *yaml_plain(const char *s, size_t n)
{
    _cleanup_free_ char *t = strndup(s, n);
    if (!t)
        return NULL;
    if (n == 0 || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL"))
        return json_null();
    if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE"))
        return json_true();
    if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE"))
        return json_false();
    size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
    size_t digits = 0, dots = 0, exp = 0;
    bool ok = i < n;
    for (size_t k = i; k < n && ok; k++) {
        if (isdigit((unsigned char)t[k]))
            digits++;
        else if (t[k] == '.' && !dots && !exp)
            dots++;
        else if ((t[k] == 'e' || t[k] == 'E') && digits && !exp) {
            exp++;
            if (k + 1 < n && (t[k + 1] == '-' || t[k + 1] == '+'))
                k++;
            if (k + 1 >= n)
                ok = false;
        } else
            ok = false;
    }
    if (ok && digits && !dots && !exp) {
        errno = 0;
        long long v = strtoll(t, NULL, 10);
        if (!errno)
            return json_integer(v);
    }
    if (ok && digits && (dots || exp)) {
        double d = strtod(t, NULL);
        if (isfinite(d))
            return json_real(d);
    }
    return json_stringn(t, n);
}

/* Append the UTF-8 form of code point cp. */
static size_t yaml_utf8(unsigned cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* A quoted scalar at c->i (on the quote); NULL with *why on error. */
static json_t *yaml_quoted(yaml_cursor *c, const char **why)
{
    char q = c->s[c->i++];
    _cleanup_free_ char *buf = malloc(c->len + 1);
    size_t n = 0;
    if (!buf)
        return NULL;
    while (c->i < c->len) {
        char ch = c->s[c->i++];
        if (ch == q) {
            if (q == '\'' && c->i < c->len && c->s[c->i] == '\'') {
                buf[n++] = '\'';
                c->i++;
                continue;
            }
            return json_stringn(buf, n);
        }
        if (q == '"' && ch == '\\') {
            if (c->i >= c->len)
                break;
            char e = c->s[c->i++];
            const char *from = "\"\\/nt0", *to = "\"\\/\n\t";
            const char *hit = strchr(from, e);
            if (hit && e != '0') {
                buf[n++] = to[hit - from];
            } else if (e == 'u' && c->i + 4 <= c->len) {
                char hex[5] = {0};
                memcpy(hex, c->s + c->i, 4);
                char *end;
                unsigned cp = (unsigned)strtoul(hex, &end, 16);
                if (*end) {
                    *why = "a bad \\u escape";
                    return NULL;
                }
                c->i += 4;
                n += yaml_utf8(cp, buf + n);
            } else {
                *why = "an escape outside the subset (\\\" \\\\ \\/ \\n \\t \\uXXXX)";
                return NULL;
            }
            continue;
        }
        buf[n++] = ch;
    }
    *why = "a quoted string that does not end on its line";
    return NULL;
}

static json_t *yaml_flow_value(yaml_cursor *c, const char **why);

/* [a, b] or {k: v} at c->i. */
static json_t *yaml_flow_collection(yaml_cursor *c, const char **why)
{
    bool is_map = c->s[c->i++] == '{';
    char close = is_map ? '}' : ']';
    _cleanup_json_ json_t *v = is_map ? json_object() : json_array();
    bool saved = c->flow;
    c->flow = true;
    cur_spaces(c);
    if (c->i < c->len && c->s[c->i] == close) {
        c->i++;
        c->flow = saved;
        return steal_ptr(&v);
    }
    for (;;) {
        cur_spaces(c);
        _cleanup_json_ json_t *key = NULL;
        if (is_map) {
            key = yaml_flow_value(c, why);
            if (!key)
                return NULL;
            cur_spaces(c);
            if (c->i >= c->len || c->s[c->i] != ':' || !json_is_string(key)) {
                *why = "a flow mapping entry without \"key: value\"";
                return NULL;
            }
            c->i++;
        }
        json_t *item = yaml_flow_value(c, why);
        if (!item)
            return NULL;
        if (is_map)
            json_object_set_new(v, json_string_value(key), item);
        else
            json_array_append_new(v, item);
        cur_spaces(c);
        if (c->i < c->len && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->len && c->s[c->i] == close) {
            c->i++;
            c->flow = saved;
            return steal_ptr(&v);
        }
        *why = is_map ? "a flow mapping that does not close on its line"
                      : "a flow sequence that does not close on its line";
        return NULL;
    }
}

static json_t *yaml_flow_value(yaml_cursor *c, const char **why)
{
    cur_spaces(c);
    if (c->i < c->len && (c->s[c->i] == '[' || c->s[c->i] == '{'))
        return yaml_flow_collection(c, why);
    if (c->i < c->len && (c->s[c->i] == '"' || c->s[c->i] == '\''))
        return yaml_quoted(c, why);
    if (c->i < c->len && strchr("&*!|>%@`", c->s[c->i])) {
        *why = "an anchor, alias, tag or reserved character outside the subset";
        return NULL;
    }
    size_t start = c->i;
    while (c->i < c->len) {
        char ch = c->s[c->i];
        if (c->flow && (ch == ',' || ch == ']' || ch == '}'))
            break;
        if (c->flow && ch == ':' && (c->i + 1 == c->len || c->s[c->i + 1] == ' '))
            break;
        if (ch == '#' && c->i > start && c->s[c->i - 1] == ' ')
            break;
        c->i++;
    }
    size_t end = c->i;
    while (end > start && c->s[end - 1] == ' ')
        end--;
    return yaml_plain(c->s + start, end - start);
}

/* A whole inline value: flow or scalar, then only a comment may follow. */
static json_t *yaml_inline(yaml_parser *p, size_t line, const char *s, size_t len)
{
    yaml_cursor c = {.s = s, .len = len};
    const char *why = "a value outside the subset";
    _cleanup_json_ json_t *v = yaml_flow_value(&c, &why);
    if (!v)
        return yaml_fail(p, line, why);
    cur_spaces(&c);
    if (c.i < c.len && c.s[c.i] != '#')
        return yaml_fail(p, line, "text after a value (quote it, or put it on one line)");
    return steal_ptr(&v);
}

/* ---- blocks ---- */

static json_t *yaml_node(yaml_parser *p, size_t indent);

/* Where the key of a mapping entry ends (at its ':'), or 0 when the line is
 * no mapping entry. */
static size_t yaml_key_end(const yaml_line *l)
{
    const char *s = l->text;
    size_t n = l->len, i = 0;
    if (n && (s[0] == '"' || s[0] == '\'')) {
        yaml_cursor c = {.s = s, .len = n};
        const char *why;
        json_t *key = yaml_quoted(&c, &why);
        if (!key)
            return 0;
        json_decref(key);
        cur_spaces(&c);
        i = c.i;
        return i < n && s[i] == ':' && (i + 1 == n || s[i + 1] == ' ') ? i : 0;
    }
    if (n == 0 || strchr("[{-#", s[0]))
        return 0;
    for (i = 0; i < n; i++) {
        if (s[i] == '#' && i > 0 && s[i - 1] == ' ')
            return 0;
        if (s[i] == ':' && (i + 1 == n || s[i + 1] == ' '))
            return i;
    }
    return 0;
}

static bool yaml_is_item(const yaml_line *l)
{
    return l->len && l->text[0] == '-' && (l->len == 1 || l->text[1] == ' ');
}

/* A block scalar (| or >) whose header is at line `line`, content deeper
 * than `indent`. */
static json_t *yaml_block_scalar(yaml_parser *p, size_t line, size_t indent, const char *hdr,
                                 size_t hlen)
{
    bool folded = hdr[0] == '>';
    char chomp = hlen > 1 ? hdr[1] : 0;
    if (hlen > 2 || (hlen == 2 && chomp != '-' && chomp != '+'))
        return yaml_fail(p, line, "a block scalar header other than |, |-, |+, >, >-, >+");
    size_t content_indent = 0;
    size_t first = p->pos, last = p->pos; /* [first, last): the scalar's lines */
    for (size_t k = p->pos; k < p->n; k++) {
        const yaml_line *l = &p->lines[k];
        if (l->len == 0) /* blank: part of the scalar if more follows */
            continue;
        if (l->indent <= indent)
            break;
        if (!content_indent)
            content_indent = l->indent;
        if (l->indent < content_indent)
            return yaml_fail(p, k, "a block scalar line less indented than its first line");
        last = k + 1;
    }
    _cleanup_free_ char *buf = malloc(1);
    size_t n = 0;
    bool prev_blank = true;
    for (size_t k = first; k < last; k++) {
        const yaml_line *l = &p->lines[k];
        const char *s = l->len ? l->raw + content_indent : "";
        size_t len = l->len ? l->raw_len - content_indent : 0;
        char *grown = realloc(buf, n + len + 2);
        if (!grown)
            return NULL;
        buf = grown;
        bool more_indented = len && s[0] == ' ';
        /* Folding: a break between two plain lines is a space; before
         * blank lines it is dropped (the blank lines are the breaks). */
        if (folded && n && !prev_blank && buf[n - 1] == '\n') {
            if (len && !more_indented)
                buf[n - 1] = ' ';
            else if (!len)
                n--;
        }
        memcpy(buf + n, s, len);
        n += len;
        buf[n++] = '\n';
        prev_blank = len == 0 || more_indented;
    }
    p->pos = last;
    if (chomp != '+')
        while (n && buf[n - 1] == '\n')
            n--;
    if (chomp == 0 && n)
        buf[n++] = '\n';
    return json_stringn(buf ? buf : "", n);
}

/* How deep text leaves [ and { open (quotes skipped); < 0 when it closes
 * more than it opens. */
static int yaml_flow_depth(const char *s, size_t n, int depth)
{
    char quote = 0, prev = ','; /* prev: the last character outside strings, not a space */
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (quote) {
            if (ch == quote)
                quote = 0;
            else if (quote == '"' && ch == '\\')
                i++;
            continue;
        }
        /* A quote opens a string only where a scalar starts; in "Docker's"
         * it is text. */
        if ((ch == '"' || ch == '\'') && strchr("[{,:", prev))
            quote = ch;
        else if (ch == '[' || ch == '{')
            depth++;
        else if (ch == ']' || ch == '}')
            depth--;
        else if (ch == '#' && i > 0 && s[i - 1] == ' ')
            break;
        if (ch != ' ')
            prev = ch;
    }
    return depth;
}

/* A flow collection that goes on over the next lines (each deeper than
 * indent): the lines joined with spaces, malloc'd; *len its length. */
static char *yaml_flow_join(yaml_parser *p, size_t line, size_t indent, const char *rest,
                            size_t rlen, size_t *len)
{
    int depth = yaml_flow_depth(rest, rlen, 0);
    _cleanup_free_ char *buf = strndup(rest, rlen);
    size_t n = rlen;
    while (buf && depth > 0) {
        yaml_skip_blank(p);
        if (p->pos >= p->n || p->lines[p->pos].indent <= indent) {
            yaml_fail(p, line, "a flow collection that never closes");
            return NULL;
        }
        const yaml_line *l = &p->lines[p->pos++];
        char *grown = realloc(buf, n + l->len + 2);
        if (!grown)
            return NULL;
        buf = grown;
        buf[n++] = ' ';
        memcpy(buf + n, l->text, l->len);
        n += l->len;
        buf[n] = '\0';
        depth = yaml_flow_depth(l->text, l->len, depth);
    }
    *len = n;
    return steal_ptr(&buf);
}

/* The value after "key:" or "- " on line `line` whose own indent is
 * `indent`: inline text, a block scalar, or the block on the next lines. */
static json_t *yaml_value(yaml_parser *p, size_t line, size_t indent, const char *rest, size_t rlen,
                          bool in_map)
{
    while (rlen && *rest == ' ') {
        rest++;
        rlen--;
    }
    if (rlen && (rest[0] == '|' || rest[0] == '>'))
        return yaml_block_scalar(p, line, indent, rest, rlen);
    if (rlen && (rest[0] == '[' || rest[0] == '{') && yaml_flow_depth(rest, rlen, 0) > 0) {
        size_t len = 0;
        _cleanup_free_ char *joined = yaml_flow_join(p, line, indent, rest, rlen, &len);
        return joined ? yaml_inline(p, line, joined, len) : NULL;
    }
    if (rlen && rest[0] != '#')
        return yaml_inline(p, line, rest, rlen);
    yaml_skip_blank(p);
    if (p->pos < p->n) {
        const yaml_line *next = &p->lines[p->pos];
        if (next->indent > indent)
            return yaml_node(p, next->indent);
        if (in_map && next->indent == indent && yaml_is_item(next))
            return yaml_node(p, indent);
    }
    return json_null();
}

static json_t *yaml_mapping(yaml_parser *p, size_t indent)
{
    _cleanup_json_ json_t *map = json_object();
    for (;;) {
        yaml_skip_blank(p);
        if (p->pos >= p->n)
            break;
        yaml_line *l = &p->lines[p->pos];
        if (l->indent < indent || (l->indent == indent && yaml_is_item(l)))
            break;
        size_t line = p->pos;
        if (l->indent > indent)
            return yaml_fail(p, line, "unexpected indentation");
        size_t kend = yaml_key_end(l);
        if (!kend)
            return yaml_fail(p, line, "expected \"key: value\"");
        /* A quoted key is its string; a plain one its text as written
         * (so 200: and true: give "200" and "true", as JSON keys must be
         * strings). */
        size_t klen = kend;
        while (klen && l->text[klen - 1] == ' ')
            klen--;
        _cleanup_json_ json_t *key = l->text[0] == '"' || l->text[0] == '\''
                                         ? yaml_inline(p, line, l->text, klen)
                                         : json_stringn(l->text, klen);
        if (!key)
            return NULL;
        if (json_object_get(map, json_string_value(key)))
            return yaml_fail(p, line, "a key given twice in one mapping");
        p->pos++;
        json_t *v = yaml_value(p, line, indent, l->text + kend + 1, l->len - kend - 1, true);
        if (!v)
            return NULL;
        json_object_set_new(map, json_string_value(key), v);
    }
    return steal_ptr(&map);
}

static json_t *yaml_sequence(yaml_parser *p, size_t indent)
{
    _cleanup_json_ json_t *seq = json_array();
    for (;;) {
        yaml_skip_blank(p);
        if (p->pos >= p->n)
            break;
        yaml_line *l = &p->lines[p->pos];
        if (l->indent < indent || !yaml_is_item(l))
            break;
        size_t line = p->pos;
        if (l->indent > indent)
            return yaml_fail(p, line, "unexpected indentation");
        size_t skip = 1;
        while (skip < l->len && l->text[skip] == ' ')
            skip++;
        json_t *v;
        yaml_line item = {.indent = l->indent + skip, .text = l->text + skip, .len = l->len - skip};
        if (item.len && (yaml_key_end(&item) || yaml_is_item(&item))) {
            /* "- key: v" or "- - x": a nested block starting at that column */
            l->indent = item.indent;
            l->text = item.text;
            l->len = item.len;
            v = yaml_node(p, item.indent);
        } else {
            p->pos++;
            v = yaml_value(p, line, indent, item.text, item.len, false);
        }
        if (!v)
            return NULL;
        json_array_append_new(seq, v);
    }
    return steal_ptr(&seq);
}

static json_t *yaml_node(yaml_parser *p, size_t indent)
{
    yaml_skip_blank(p);
    if (p->pos >= p->n)
        return json_null();
    const yaml_line *l = &p->lines[p->pos];
    if (yaml_is_item(l))
        return yaml_sequence(p, indent);
    if (yaml_key_end(l))
        return yaml_mapping(p, indent);
    size_t line = p->pos++;
    return yaml_inline(p, line, l->text, l->len);
}

json_t *yaml_parse(const char *text, size_t len, gb_err *err)
{
    yaml_parser p = {.err = err};
    if (yaml_split(&p, text, len) < 0) {
        free(p.lines);
        return NULL;
    }
    yaml_skip_blank(&p);
    json_t *doc = p.pos < p.n ? yaml_node(&p, p.lines[p.pos].indent) : json_null();
    if (doc) {
        yaml_skip_blank(&p);
        if (p.pos < p.n) {
            json_decref(doc);
            doc = yaml_fail(&p, p.pos, "unexpected indentation or text after the document");
        }
    }
    free(p.lines);
    return doc;
}
