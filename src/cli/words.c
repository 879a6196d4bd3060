/*
 * words.c - the server's messages in the CLI's words.
 *
 * gpuboxd phrases its messages for every client ("pull it first", "create
 * the volume first", "the list of GPUs"): it cannot know whether a person
 * reads them in a terminal or in the console. The CLI turns those neutral
 * phrases into the command that does it (`gpubox pull IMAGE`), and any API
 * path a message still carries ("POST /api/v1/replicaSet needs role user",
 * from the role check, which speaks of routes) into "this request". The
 * console does the same with its pages (web/src/api.ts, userMessage).
 */
#include "cli/cli.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The name in quotes after `after` in msg ("image 'x'" gives x), into buf;
 * "NAME" when there is none. */
static const char *words_quoted(const char *msg, const char *after, char *buf, size_t len)
{
    const char *at = after ? strstr(msg, after) : NULL;
    const char *q = at ? strchr(at, '\'') : NULL;
    const char *end = q ? strchr(q + 1, '\'') : NULL;
    if (!end || end == q + 1 || (size_t)(end - q - 1) >= len) {
        snprintf(buf, len, "NAME");
        return buf;
    }
    memcpy(buf, q + 1, (size_t)(end - q - 1));
    buf[end - q - 1] = '\0';
    return buf;
}

/* Append to out[*used..len) what fmt gives, cut at the end. */
static void words_add(char *out, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void words_add(char *out, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
}

/* An API path written as "METHOD /api/v1/..." at p: its length, else 0. */
static size_t words_route_at(const char *p)
{
    static const char *const methods[] = {"GET ", "POST ", "PUT ", "PATCH ", "DELETE "};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        size_t m = strlen(methods[i]);
        if (strncmp(p, methods[i], m) == 0 && strncmp(p + m, "/api/", 5) == 0) {
            size_t n = m;
            while (p[n] && !isspace((unsigned char)p[n]) && p[n] != ',' && p[n] != ';' &&
                   p[n] != ')')
                n++;
            return n;
        }
    }
    return 0;
}

const char *cli_words(const char *msg, char *out, size_t len)
{
    if (!msg || !out || len < 2)
        return msg ? msg : "";
    char name[128];
    /* Neutral phrase -> CLI words; %s (when there) is the quoted name after
     * the entry's anchor. */
    static const struct {
        const char *phrase, *anchor, *cli;
    } table[] = {
        {"pull it first", "image '", "pull it with `gpubox pull %s`"},
        {"create the volume first", "bind source '",
         "create it with `gpubox volume create %s SIZE`"},
        {"uncordon the node", "node ", "`gpubox node uncordon`"},
        {"the list of GPUs", NULL, "`gpubox gpus`"},
        {"the list of nodes", NULL, "`gpubox nodes`"},
        {"inspect the replica set to see them", NULL, "`gpubox inspect` shows them"},
        {"see its history", NULL, "`gpubox history` lists them"},
        {"scale it instead", NULL, "`gpubox scale` it instead"},
        {"pause it instead", NULL, "`gpubox pause` it instead"},
    };
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = msg; *p;) {
        size_t route = words_route_at(p);
        if (route) {
            words_add(out, len, &used, "this request");
            p += route;
            continue;
        }
        bool replaced = false;
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
            size_t n = strlen(table[i].phrase);
            if (strncmp(p, table[i].phrase, n) != 0)
                continue;
            /* The entry's %s is the quoted name; no format from a table. */
            const char *slot = strstr(table[i].cli, "%s");
            if (slot)
                words_add(out, len, &used, "%.*s%s%s", (int)(slot - table[i].cli), table[i].cli,
                          words_quoted(msg, table[i].anchor, name, sizeof(name)), slot + 2);
            else
                words_add(out, len, &used, "%s", table[i].cli);
            p += n;
            replaced = true;
            break;
        }
        if (!replaced) {
            words_add(out, len, &used, "%c", *p);
            p++;
        }
    }
    return out;
}
