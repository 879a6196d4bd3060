/*
 * yaml.h - read the subset of YAML that gpubox's own documents use
 * (docs/openapi.yaml) into jansson values, so the daemon can serve the
 * OpenAPI document as JSON too without a YAML library.
 *
 * The subset:
 *   - block mappings `key: value` and block sequences `- item`, nested by
 *     indentation (spaces only), a sequence allowed at its key's indent;
 *     `- key: value` starts a mapping inside a sequence;
 *   - flow collections `[a, "b", {c: 1}]` and `{a: 1}`, as a value after
 *     "key:" or "- " (they may go on over more deeply indented lines);
 *   - scalars: plain, 'single' and "double" quoted (with \" \\ \/ \n \t
 *     \uXXXX), and block scalars `|` / `>` (with `-` or `+` chomping);
 *     plain ones typed as YAML 1.2's core schema does: null, ~, true,
 *     false, integers, decimals; anything else a string;
 *   - comments: a line starting with '#', or " #" after a plain value.
 * Not in it (and refused with the line number): anchors and aliases,
 * tags, multi-line plain or quoted scalars, several documents, tabs for
 * indentation, complex keys. A document outside the subset is an error,
 * never a silent misreading; the tests compare the result with a full
 * YAML parser's.
 */
#ifndef GPUBOX_UTIL_YAML_H
#define GPUBOX_UTIL_YAML_H

#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

/* Parse text (len bytes) into a new value (the caller decrefs). On error
 * NULL, and err (ERR_INVALID_PARAMS) says which line and why. */
json_t *yaml_parse(const char *text, size_t len, gb_err *err);

#endif
