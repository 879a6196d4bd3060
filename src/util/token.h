/*
 * token.h - API users' bearer tokens: making one, and the digest the store
 * keeps instead of it.
 *
 * A token is TOKEN_PREFIX and TOKEN_RANDOM_BYTES random bytes from the
 * kernel (getrandom) in lower-case hex. Such a token has 192 bits of
 * entropy, so an unsalted SHA-256 is enough to keep it: nobody can guess a
 * token from its digest, and a table of digests can be looked up directly.
 */
#ifndef GPUBOX_UTIL_TOKEN_H
#define GPUBOX_UTIL_TOKEN_H

#include <stddef.h>

#include "util/err.h"

#define TOKEN_PREFIX "gpbx_"
#define TOKEN_RANDOM_BYTES 24
#define TOKEN_LEN (sizeof(TOKEN_PREFIX) - 1 + 2 * TOKEN_RANDOM_BYTES)
#define TOKEN_DIGEST_HEX 65 /* 64 hex digits and the NUL */

/* A new token in out (at least TOKEN_LEN + 1 bytes). ERR_INTERNAL when the
 * kernel has no randomness to give. */
int token_new(char *out, size_t size, gb_err *err);

/* The SHA-256 of token[0..len) in lower-case hex. */
void token_digest(const char *token, size_t len, char out[TOKEN_DIGEST_HEX]);

/* Zero n bytes in a way the compiler keeps. */
void token_wipe(void *p, size_t n);

#endif
