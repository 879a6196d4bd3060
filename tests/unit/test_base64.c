/*
 * test_base64.c - base64 as etcd's JSON gateway speaks it: RFC 4648's test
 * vectors, every byte value surviving a round trip, and strict refusal of
 * text that is not the one canonical encoding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/cleanup.h"

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    static const char *const vectors[][2] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(vectors); i++) {
        const char *plain = vectors[i][0], *coded = vectors[i][1];
        _cleanup_free_ char *enc = base64_encode(plain, strlen(plain));
        assert_non_null(enc);
        assert_string_equal(enc, coded);
        assert_int_equal(base64_encoded_len(strlen(plain)), strlen(coded));

        _cleanup_free_ char *dec = NULL;
        size_t n = 99;
        assert_int_equal(base64_decode(coded, strlen(coded), &dec, &n), 0);
        assert_int_equal(n, strlen(plain));
        assert_string_equal(dec, plain); /* NUL-terminated */
    }
}

static void test_every_byte_round_trips(void **state)
{
    (void)state;
    unsigned char all[256 * 3];
    for (size_t i = 0; i < sizeof(all); i++)
        all[i] = (unsigned char)(i * 7 + i / 256);
    /* Every length mod 3, so each padding case carries every byte value. */
    for (size_t len = sizeof(all) - 3; len <= sizeof(all); len++) {
        _cleanup_free_ char *enc = base64_encode(all, len);
        assert_non_null(enc);
        assert_int_equal(strlen(enc), base64_encoded_len(len));
        _cleanup_free_ char *dec = NULL;
        size_t n = 0;
        assert_int_equal(base64_decode(enc, strlen(enc), &dec, &n), 0);
        assert_int_equal(n, len);
        assert_memory_equal(dec, all, len);
    }
    /* 0xff 0xfe and a NUL inside: the keys gpubox's store tests use. */
    static const char key[] = "a\xff\xfe\0z";
    _cleanup_free_ char *enc = base64_encode(key, sizeof(key) - 1);
    assert_string_equal(enc, "Yf/+AHo=");
}

static void test_refuses_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "Zg",       /* padding missing */
        "Zg=",      /* length not a multiple of 4 */
        "Z===",     /* one character cannot make a byte */
        "====",     /* padding only */
        "Zg==Zg==", /* padding in the middle */
        "Zm9v\n",   /* whitespace */
        "Zm 9",     /* space */
        "Zm-v",     /* URL-safe alphabet is another encoding */
        "Zh==",     /* unused bits set: not the canonical encoding of "f" */
        "Zm9=",     /* same for two bytes */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *dec = NULL;
        size_t n = 0;
        errno = 0;
        if (base64_decode(bad[i], strlen(bad[i]), &dec, &n) != -1)
            fail_msg("'%s' decoded, expected a refusal", bad[i]);
        assert_int_equal(errno, EINVAL);
        assert_null(dec);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_every_byte_round_trips),
        cmocka_unit_test(test_refuses_malformed),
    };
    return cmocka_run_group_tests_name("base64", tests, NULL, NULL);
}
