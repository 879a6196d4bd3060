/*
 * token.c - making tokens and their digests (token.h); SHA-256 is nettle's.
 */
#include "util/token.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <nettle/sha2.h>

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int token_new(char *out, size_t size, gb_err *err)
{
    unsigned char raw[TOKEN_RANDOM_BYTES];
    if (size < TOKEN_LEN + 1)
        return err_set(err, ERR_INTERNAL, "token buffer too small");
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "making a token: getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    memcpy(out, TOKEN_PREFIX, sizeof(TOKEN_PREFIX) - 1);
    hex(raw, sizeof(raw), out + sizeof(TOKEN_PREFIX) - 1);
    token_wipe(raw, sizeof(raw));
    return 0;
}

void token_digest(const char *token, size_t len, char out[TOKEN_DIGEST_HEX])
{
    struct sha256_ctx ctx;
    unsigned char d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)token);
    sha256_digest(&ctx, sizeof(d), d);
    hex(d, sizeof(d), out);
}

void token_wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}
