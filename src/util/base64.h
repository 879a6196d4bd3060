/*
 * base64.h - standard base64 (RFC 4648 section 4: the '+' '/' alphabet with
 * '=' padding), as etcd's JSON gateway writes keys and values and as
 * protobuf's JSON mapping of `bytes` fields requires.
 *
 * Encoded text is a NUL-terminated string of 4 * ceil(n / 3) characters.
 * Decoding is strict: no whitespace, no missing padding, no bytes outside
 * the alphabet, and unused bits of the last group must be zero, so every
 * byte string has exactly one encoding that decodes.
 */
#ifndef GPUBOX_UTIL_BASE64_H
#define GPUBOX_UTIL_BASE64_H

#include <stddef.h>

/* Length of the encoding of n bytes, without the NUL. */
size_t base64_encoded_len(size_t n);

/* Encode n bytes of data into a new NUL-terminated string (free it). */
char *base64_encode(const void *data, size_t n);

/* Decode len characters of text into a new buffer of *n bytes with a NUL
 * after them (so decoded text can be used as a C string); free it.
 * Returns 0, or -1 (errno EINVAL) for malformed text. */
int base64_decode(const char *text, size_t len, char **out, size_t *n);

#endif
