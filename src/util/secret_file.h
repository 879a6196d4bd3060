/*
 * secret_file.h - reading a file that holds secrets (tokens, registry
 * passwords, private keys) whole, refusing one other users could read or
 * change, as ssh does for its keys.
 */
#ifndef GPUBOX_UTIL_SECRET_FILE_H
#define GPUBOX_UTIL_SECRET_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* path whole into *out (NUL-terminated; free it with secret_text_free).
 * Refused, ERR_INVALID_PARAMS with a message naming the file as `what`
 * ("token file x"): a path that cannot be read, not a regular file,
 * with permission bits for others or group write when private (the message
 * says "other users may read or change <guards>; run chmod 600 <path>"),
 * larger than max bytes, or holding a NUL byte. */
int secret_file_read(const char *path, const char *what, const char *guards, bool private_,
                     size_t max, char **out, gb_err *err);
/* Wipe and free a text secret_file_read gave (for _cleanup_). */
void secret_text_free(char **text);

#endif
