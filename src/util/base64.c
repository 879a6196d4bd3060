/*
 * base64.c - standard padded base64, both ways (see base64.h).
 *
 * Encoding maps each 3-byte group to 4 characters of the alphabet; a final
 * group of 1 or 2 bytes ends in "==" or "=". Decoding runs through a
 * 256-entry table in which every byte outside the alphabet is -1.
 */
#include "util/xalloc.h"
#include "util/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static const char base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

char *base64_encode(const void *data, size_t n)
{
    const unsigned char *in = data;
    char *out = xmalloc(base64_encoded_len(n) + 1);
    char *p = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t g = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *p++ = base64_alphabet[g >> 18];
        *p++ = base64_alphabet[(g >> 12) & 63];
        *p++ = base64_alphabet[(g >> 6) & 63];
        *p++ = base64_alphabet[g & 63];
    }
    if (i < n) {
        uint32_t g = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        *p++ = base64_alphabet[g >> 18];
        *p++ = base64_alphabet[(g >> 12) & 63];
        *p++ = i + 1 < n ? base64_alphabet[(g >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = '\0';
    return out;
}

/* The value of each alphabet character, -1 for every other byte. */
static int base64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int base64_decode(const char *text, size_t len, char **out, size_t *n)
{
    if (len % 4 != 0) {
        errno = EINVAL;
        return -1;
    }
    size_t pad = 0;
    if (len > 0 && text[len - 1] == '=')
        pad = len > 1 && text[len - 2] == '=' ? 2 : 1;
    unsigned char *buf = xmalloc(len / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        size_t chars = last ? 4 - pad : 4;
        uint32_t g = 0;
        for (size_t j = 0; j < 4; j++) {
            int v = j < chars ? base64_value((unsigned char)text[i + j]) : 0;
            if (v < 0 || (j >= chars && text[i + j] != '=')) {
                free(buf);
                errno = EINVAL;
                return -1;
            }
            g = g << 6 | (uint32_t)v;
        }
        /* Bits past the last whole byte must be zero: one encoding per input. */
        if ((chars == 2 && (g & 0xffff)) || (chars == 3 && (g & 0xff))) {
            free(buf);
            errno = EINVAL;
            return -1;
        }
        buf[o++] = (unsigned char)(g >> 16);
        if (chars > 2)
            buf[o++] = (unsigned char)(g >> 8);
        if (chars > 3)
            buf[o++] = (unsigned char)g;
    }
    buf[o] = '\0';
    *out = (char *)buf;
    *n = o;
    return 0;
}
