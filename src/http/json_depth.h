/*
 * json_depth.h - how deeply a JSON text nests, read from its raw bytes.
 *
 * jansson parses recursively and has no depth option short of its built-in
 * ceiling (2048), and handlers walk what it returns recursively too. The
 * server therefore measures every request body before anything parses it
 * and refuses one that nests deeper than HTTP_JSON_DEPTH_MAX: no field of
 * gpubox's API is more than a few levels deep.
 *
 * The scanner keeps only two states (inside a string or not, and whether
 * the previous byte was a backslash inside one), counts '[' and '{' outside
 * strings as one level deeper and ']' and '}' as one level up. It is not a
 * validator: malformed text is measured as best it can be and left to the
 * parser to refuse.
 */
#ifndef GPUBOX_HTTP_JSON_DEPTH_H
#define GPUBOX_HTTP_JSON_DEPTH_H

#include <stddef.h>

#define HTTP_JSON_DEPTH_MAX 32

/* The deepest nesting in buf[0..len); stops reading once it passes limit
 * and returns limit + 1 then, so a hostile body costs no more than needed. */
size_t http_json_depth(const char *buf, size_t len, size_t limit);

#endif
