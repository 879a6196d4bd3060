/*
 * fuzz_log_escape.c - log_escape (util/log.h), which keeps every log
 * message on one line.
 *
 * Properties: no crash; the output fits its buffer and is NUL-terminated
 * at the length returned; it holds no control character (C0, DEL, C1) and
 * only well-formed UTF-8; with room enough, nothing is cut.
 */
#include "fuzz_util.h"

#include <stdbool.h>

#include "util/log.h"

/* Well-formed UTF-8 without C1 controls? */
static bool utf8_clean(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        unsigned c = s[i], n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2, cp = 0;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return false;
            i++;
            continue;
        }
        if (c < 0xc2 || c > 0xf4 || i + n > len)
            return false;
        cp = c & (0x7f >> n);
        for (unsigned k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp <= 0x9f || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ||
            (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000))
            return false;
        i += n;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cap = size ? data[0] : 0; /* a small buffer, to cut */
    char *small = malloc(cap + 1), *big = malloc(size * 4 + 1);
    if (!small || !big)
        abort();
    size_t n = log_escape(small, cap, (const char *)data, size);
    FUZZ_CHECK(cap == 0 ? n == 0 : n < cap && small[n] == '\0', "length %zu, cap %zu", n, cap);
    if (cap)
        FUZZ_CHECK(utf8_clean((const unsigned char *)small, n), "cut output is not clean");
    n = log_escape(big, size * 4 + 1, (const char *)data, size);
    FUZZ_CHECK(n < size * 4 + 1 && big[n] == '\0', "length %zu", n);
    FUZZ_CHECK(utf8_clean((const unsigned char *)big, n), "output is not clean");
    FUZZ_CHECK(n >= size, "%zu bytes in, %zu out: something was dropped", size, n);
    free(small);
    free(big);
    return 0;
}
