/*
 * yaml2json.c - gpubox-yaml2json: convert a YAML document to JSON at build
 * time, so gpuboxd embeds docs/openapi.yaml in both forms and reads no
 * YAML at run time (CMakeLists.txt runs it; see docs/architecture.md).
 *
 *   gpubox-yaml2json INPUT.yaml OUTPUT.json     ("-" for stdin or stdout)
 *
 * libyaml parses; this file only builds jansson values from its events and
 * types plain scalars as YAML 1.2's core schema does (libyaml leaves that
 * to its caller): null, ~, true, false, integers (decimal, 0o, 0x),
 * decimals and exponents; anything else, and every quoted or block scalar,
 * is a string. That is what js-yaml, the parser the e2e tests compare
 * with, reads too (PyYAML would read YAML 1.1: "no" a boolean). A mapping
 * key is its scalar's text ("200:" gives "200"). Anchors and aliases
 * work. Refused, with the line: several documents, a key given twice, a
 * key that is not a scalar, a tag other than !!str, .inf and .nan (JSON
 * has neither). Exit status: 0 converted, 1 failed, 2 usage.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#include "util/xalloc.h"

/* Deeper nesting than this is refused rather than recursed into. */
#define Y2J_MAX_DEPTH 256

enum y2j_kind { Y2J_NULL, Y2J_TRUE, Y2J_FALSE, Y2J_INT, Y2J_FLOAT, Y2J_INF_NAN };

/* YAML 1.2.2, 10.3.2 "Tag Resolution"; 0o and 0x integers are told apart
 * by their prefix. */
static const struct {
    enum y2j_kind kind;
    const char *pattern;
} y2j_core_kinds[] = {
    {Y2J_NULL, "^(null|Null|NULL|~|)$"},
    {Y2J_TRUE, "^(true|True|TRUE)$"},
    {Y2J_FALSE, "^(false|False|FALSE)$"},
    {Y2J_INT, "^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"},
    {Y2J_FLOAT, "^[-+]?([.][0-9]+|[0-9]+([.][0-9]*)?)([eE][-+]?[0-9]+)?$"},
    {Y2J_INF_NAN, "^([-+]?[.](inf|Inf|INF)|[.](nan|NaN|NAN))$"},
};
#define Y2J_NKINDS (sizeof(y2j_core_kinds) / sizeof(y2j_core_kinds[0]))

typedef struct y2j {
    yaml_parser_t parser;
    const char *input;        /* its name, for messages */
    json_t *anchors;          /* anchor name -> the value it names */
    regex_t core[Y2J_NKINDS]; /* y2j_core_kinds' patterns, compiled */
} y2j;

static json_t *y2j_fail(y2j *c, const yaml_mark_t *mark, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpubox-yaml2json: %s:%zu:%zu: ", c->input, mark->line + 1, mark->column + 1);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return NULL;
}

/* The next event; 0 when libyaml cannot read on (it said why). */
static int y2j_next(y2j *c, yaml_event_t *ev)
{
    if (yaml_parser_parse(&c->parser, ev))
        return 1;
    y2j_fail(c, &c->parser.problem_mark, "%s", c->parser.problem ? c->parser.problem : "error");
    return 0;
}

static json_t *y2j_plain(y2j *c, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t i = 0;
    for (; i < Y2J_NKINDS; i++)
        if (regexec(&c->core[i], s, 0, NULL, 0) == 0)
            break;
    if (i == Y2J_NKINDS)
        return json_stringn(s, ev->data.scalar.length);
    switch (y2j_core_kinds[i].kind) {
    case Y2J_NULL:
        return json_null();
    case Y2J_TRUE:
        return json_true();
    case Y2J_FALSE:
        return json_false();
    case Y2J_INT: {
        int base = s[0] == '0' && s[1] == 'o' ? 8 : s[0] == '0' && s[1] == 'x' ? 16 : 10;
        errno = 0;
        long long v = strtoll(base == 10 ? s : s + 2, NULL, base);
        if (errno)
            return y2j_fail(c, &ev->start_mark, "the integer %s is out of range", s);
        return json_integer(v);
    }
    case Y2J_FLOAT:
        return json_real(strtod(s, NULL));
    case Y2J_INF_NAN:
        break;
    }
    return y2j_fail(c, &ev->start_mark, "%s: JSON has no infinity or NaN", s);
}

static json_t *y2j_scalar(y2j *c, const yaml_event_t *ev)
{
    const char *tag = (const char *)ev->data.scalar.tag;
    if (tag && strcmp(tag, "!") != 0 && strcmp(tag, YAML_STR_TAG) != 0)
        return y2j_fail(c, &ev->start_mark, "the tag %s (only !!str is read)", tag);
    if (!tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return y2j_plain(c, ev);
    return json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
}

static json_t *y2j_node(y2j *c, yaml_event_t *ev, int depth);

/* The entries of a sequence or mapping whose start event was just read. */
static json_t *y2j_collection(y2j *c, const yaml_event_t *start, int depth)
{
    int is_map = start->type == YAML_MAPPING_START_EVENT;
    yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    if (depth >= Y2J_MAX_DEPTH)
        return y2j_fail(c, &start->start_mark, "nested deeper than %d", Y2J_MAX_DEPTH);
    json_t *v = is_map ? json_object() : json_array();
    for (;;) {
        yaml_event_t ev;
        if (!y2j_next(c, &ev))
            goto fail;
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return v;
        }
        if (!is_map) {
            json_t *item = y2j_node(c, &ev, depth + 1);
            yaml_event_delete(&ev);
            if (!item || json_array_append_new(v, item) < 0)
                goto fail;
            continue;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            y2j_fail(c, &ev.start_mark, "a mapping key that is not a scalar");
            yaml_event_delete(&ev);
            goto fail;
        }
        char *key = xstrdup((const char *)ev.data.scalar.value);
        yaml_mark_t at = ev.start_mark;
        yaml_event_delete(&ev);
        json_t *item = NULL;
        if (json_object_get(v, key))
            y2j_fail(c, &at, "the key \"%s\" given twice", key);
        else if (y2j_next(c, &ev)) {
            item = y2j_node(c, &ev, depth + 1);
            yaml_event_delete(&ev);
        }
        int rc = item ? json_object_set_new(v, key, item) : -1;
        free(key);
        if (rc < 0)
            goto fail;
    }
fail:
    json_decref(v);
    return NULL;
}

/* The value that starts with event ev (a scalar, an alias or a
 * collection's start), remembered under its anchor if it has one. */
static json_t *y2j_node(y2j *c, yaml_event_t *ev, int depth)
{
    const char *anchor = NULL;
    json_t *v = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        v = json_object_get(c->anchors, (const char *)ev->data.alias.anchor);
        if (!v)
            return y2j_fail(c, &ev->start_mark, "the alias *%s names nothing before it",
                            (const char *)ev->data.alias.anchor);
        return json_incref(v);
    case YAML_SCALAR_EVENT:
        anchor = (const char *)ev->data.scalar.anchor;
        v = y2j_scalar(c, ev);
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = (const char *)ev->data.sequence_start.anchor;
        v = y2j_collection(c, ev, depth);
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = (const char *)ev->data.mapping_start.anchor;
        v = y2j_collection(c, ev, depth);
        break;
    default:
        return y2j_fail(c, &ev->start_mark, "unexpected YAML event %d", (int)ev->type);
    }
    if (v && anchor && json_object_set(c->anchors, anchor, v) < 0) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* The one document of the stream: stream start, document start, the
 * node, document end, stream end. */
static json_t *y2j_document(y2j *c)
{
    yaml_event_t ev;
    json_t *doc = NULL;
    int ok = y2j_next(c, &ev) && ev.type == YAML_STREAM_START_EVENT;
    yaml_event_delete(&ev);
    if (!ok || !y2j_next(c, &ev))
        return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) { /* an empty file */
        yaml_event_delete(&ev);
        return json_null();
    }
    yaml_event_delete(&ev); /* the document start */
    if (!y2j_next(c, &ev))
        return NULL;
    doc = y2j_node(c, &ev, 0);
    yaml_event_delete(&ev);
    if (!doc || !y2j_next(c, &ev)) /* the document end */
        goto fail;
    yaml_event_delete(&ev);
    if (!y2j_next(c, &ev))
        goto fail;
    ok = ev.type == YAML_STREAM_END_EVENT;
    if (!ok)
        y2j_fail(c, &ev.start_mark, "a second document (one is read)");
    yaml_event_delete(&ev);
    if (ok)
        return doc;
fail:
    json_decref(doc);
    return NULL;
}

int main(int argc, char **argv)
{
    xalloc_init("gpubox-yaml2json");
    if (argc != 3) {
        fprintf(stderr,
                "usage: gpubox-yaml2json INPUT.yaml OUTPUT.json   (\"-\": stdin, stdout)\n");
        return 2;
    }
    y2j c = {.input = argv[1], .anchors = json_object()};
    for (size_t i = 0; i < Y2J_NKINDS; i++)
        if (regcomp(&c.core[i], y2j_core_kinds[i].pattern, REG_EXTENDED | REG_NOSUB) != 0)
            abort(); /* the patterns are constants */
    FILE *in = strcmp(argv[1], "-") == 0 ? stdin : fopen(argv[1], "rb");
    if (!in) {
        fprintf(stderr, "gpubox-yaml2json: cannot read %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (!yaml_parser_initialize(&c.parser)) {
        fprintf(stderr, "gpubox-yaml2json: out of memory\n");
        return 1;
    }
    yaml_parser_set_input_file(&c.parser, in);
    json_t *doc = y2j_document(&c);
    yaml_parser_delete(&c.parser);
    json_decref(c.anchors);
    for (size_t i = 0; i < Y2J_NKINDS; i++)
        regfree(&c.core[i]);
    if (in != stdin)
        fclose(in);
    if (!doc)
        return 1;
    /* Written whole or not at all: a failed build leaves no half file. */
    int to_stdout = strcmp(argv[2], "-") == 0;
    char *tmp = to_stdout ? NULL : xasprintf("%s.tmp", argv[2]);
    int rc = to_stdout ? json_dumpf(doc, stdout, JSON_COMPACT | JSON_ENCODE_ANY)
                       : json_dump_file(doc, tmp, JSON_COMPACT | JSON_ENCODE_ANY);
    if (rc == 0 && tmp && rename(tmp, argv[2]) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, "gpubox-yaml2json: cannot write %s: %s\n", argv[2], strerror(errno));
        if (tmp)
            unlink(tmp);
    }
    free(tmp);
    json_decref(doc);
    return rc == 0 ? 0 : 1;
}
