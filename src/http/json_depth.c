/*
 * json_depth.c - the nesting scanner (see json_depth.h): one pass over the
 * bytes, a counter, and the string state.
 */
#include "http/json_depth.h"

#include <stdbool.h>

size_t http_json_depth(const char *buf, size_t len, size_t limit)
{
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        switch (c) {
        case '"':
            in_string = true;
            break;
        case '[':
        case '{':
            if (++depth > deepest) {
                deepest = depth;
                if (deepest > limit)
                    return limit + 1;
            }
            break;
        case ']':
        case '}':
            if (depth) /* a stray closer is the parser's business */
                depth--;
            break;
        default:
            break;
        }
    }
    return deepest;
}
