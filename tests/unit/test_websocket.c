/*
 * test_websocket.c - RFC 6455 framing (http/websocket.h): the accept key of
 * the RFC's own example, the handshake check, frame headers of every
 * length class, and the reader: masking, fragmentation with control
 * frames between the pieces, bytes arriving one at a time, and each
 * refusal the RFC asks for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "http/websocket.h"

static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A masked client frame of payload into out; its length. */
static size_t client_frame(uint8_t *out, enum ws_opcode op, bool fin, const void *payload, size_t n)
{
    size_t h = ws_frame_header(out, op, fin, n, mask);
    memcpy(out + h, payload, n);
    ws_mask(out + h, n, mask, 0);
    return h + n;
}

static void test_accept_key_of_the_rfc_example(void **state)
{
    (void)state;
    char out[WS_ACCEPT_SIZE];
    assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_int_equal(ws_accept_key("short", out), -1);
    assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ", out), -1); /* no padding */
    assert_int_equal(ws_accept_key(NULL, out), -1);
}

static void test_handshake_check(void **state)
{
    (void)state;
    gb_err err = GB_ERR_INIT;
    const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
    assert_int_equal(ws_handshake_check("WebSocket", "keep-alive, Upgrade", "13", key, &err), 0);
    assert_int_equal(ws_handshake_check(NULL, "Upgrade", "13", key, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(err.msg, "Upgrade: websocket"));
    assert_int_equal(ws_handshake_check("websocket", "close", "13", key, &err), -1);
    assert_int_equal(ws_handshake_check("websocket", "Upgrade", "8", key, &err), -1);
    assert_non_null(strstr(err.msg, "13"));
    assert_int_equal(ws_handshake_check("websocket", "Upgrade", "13", "x", &err), -1);
    /* "websocketx" is not the token */
    assert_int_equal(ws_handshake_check("websocketx", "Upgrade", "13", key, &err), -1);
}

static void test_frame_header_length_classes(void **state)
{
    (void)state;
    uint8_t h[WS_HEADER_MAX];
    assert_int_equal(ws_frame_header(h, WS_OP_BINARY, true, 125, NULL), 2);
    assert_int_equal(h[0], 0x82);
    assert_int_equal(h[1], 125);
    assert_int_equal(ws_frame_header(h, WS_OP_TEXT, false, 126, NULL), 4);
    assert_int_equal(h[0], 0x01);
    assert_int_equal(h[1], 126);
    assert_int_equal(h[2], 0);
    assert_int_equal(h[3], 126);
    assert_int_equal(ws_frame_header(h, WS_OP_BINARY, true, 65536, mask), 14);
    assert_int_equal(h[1], 0x80 | 127);
    assert_int_equal(h[7], 1); /* 0x00 00 00 00 00 01 00 00 */
    assert_memory_equal(h + 10, mask, 4);
}

static void test_reader_unmasks_and_joins_fragments(void **state)
{
    (void)state;
    uint8_t wire[512];
    size_t n = 0;
    n += client_frame(wire + n, WS_OP_TEXT, false, "hel", 3);
    n += client_frame(wire + n, WS_OP_PING, true, "p", 1); /* between the pieces */
    n += client_frame(wire + n, WS_OP_CONTINUATION, false, "lo ", 3);
    n += client_frame(wire + n, WS_OP_CONTINUATION, true, "w\xc3\xb6rld", 6);
    n += client_frame(wire + n, WS_OP_BINARY, true, "\x00\xff", 2);
    uint8_t close_body[] = {0x03, 0xe8, 'b', 'y', 'e'};
    n += client_frame(wire + n, WS_OP_CLOSE, true, close_body, sizeof(close_body));

    /* One byte at a time: no boundary may confuse it. */
    ws_reader r;
    ws_reader_init(&r, true, 1024);
    ws_message m;
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        ws_reader_feed(&r, wire + i, 1);
        int rc;
        while ((rc = ws_reader_next(&r, &m)) == 1) {
            switch (seen++) {
            case 0:
                assert_int_equal(m.op, WS_OP_PING);
                assert_memory_equal(m.data, "p", 1);
                break;
            case 1:
                assert_int_equal(m.op, WS_OP_TEXT);
                assert_int_equal(m.len, 12);
                assert_memory_equal(m.data, "hello w\xc3\xb6rld", 12);
                break;
            case 2:
                assert_int_equal(m.op, WS_OP_BINARY);
                assert_int_equal(m.len, 2);
                assert_memory_equal(m.data, "\x00\xff", 2);
                break;
            case 3:
                assert_int_equal(m.op, WS_OP_CLOSE);
                assert_int_equal(m.close_code, 1000);
                break;
            default:
                fail();
            }
        }
        assert_int_equal(rc, 0);
    }
    assert_int_equal(seen, 4);
    assert_int_equal(ws_reader_pending(&r), 0);
    ws_reader_free(&r);
}

/* The reader's verdict on wire: the close code it fails with (0: none). */
static uint16_t verdict(bool from_client, size_t max, const uint8_t *wire, size_t n)
{
    ws_reader r;
    ws_reader_init(&r, from_client, max);
    ws_reader_feed(&r, wire, n);
    ws_message m;
    int rc;
    while ((rc = ws_reader_next(&r, &m)) == 1)
        ;
    uint16_t code = rc < 0 ? r.fail_code : 0;
    ws_reader_free(&r);
    return code;
}

static void test_reader_refuses_what_the_rfc_refuses(void **state)
{
    (void)state;
    uint8_t w[300];
    size_t n;
    /* unmasked from a client */
    n = ws_frame_header(w, WS_OP_BINARY, true, 1, NULL);
    w[n++] = 'x';
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* masked from a server */
    n = client_frame(w, WS_OP_BINARY, true, "x", 1);
    assert_int_equal(verdict(false, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* reserved bit, reserved opcode */
    n = client_frame(w, WS_OP_BINARY, true, "x", 1);
    w[0] |= 0x40;
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    n = client_frame(w, (enum ws_opcode)0x3, true, "x", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* a fragmented control frame, and one of 126 bytes */
    n = client_frame(w, WS_OP_PING, false, "x", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    uint8_t big[126] = {0};
    n = client_frame(w, WS_OP_PING, true, big, sizeof(big));
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* a continuation of nothing; a new message inside one */
    n = client_frame(w, WS_OP_CONTINUATION, true, "x", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    n = client_frame(w, WS_OP_TEXT, false, "x", 1);
    n += client_frame(w + n, WS_OP_TEXT, true, "y", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* a close frame with a 1-byte body */
    n = client_frame(w, WS_OP_CLOSE, true, "x", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_PROTOCOL);
    /* text that is not UTF-8: a lone continuation byte, an overlong, a surrogate */
    n = client_frame(w, WS_OP_TEXT, true, "\x80", 1);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_INVALID_DATA);
    n = client_frame(w, WS_OP_TEXT, true, "\xc0\xaf", 2);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_INVALID_DATA);
    n = client_frame(w, WS_OP_TEXT, true, "\xed\xa0\x80", 3);
    assert_int_equal(verdict(true, 1024, w, n), WS_CLOSE_INVALID_DATA);
    /* a 64-bit length with its top bit set */
    uint8_t huge[] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    assert_int_equal(verdict(true, 1024, huge, sizeof(huge)), WS_CLOSE_PROTOCOL);
}

static void test_reader_refuses_a_message_over_its_limit_before_buffering(void **state)
{
    (void)state;
    /* A header announcing 1 GiB is refused as soon as it is read. */
    uint8_t w[WS_HEADER_MAX];
    size_t n = ws_frame_header(w, WS_OP_BINARY, true, 1u << 30, mask);
    assert_int_equal(verdict(true, 4096, w, n), WS_CLOSE_TOO_BIG);
    /* Fragments that add up past the limit, each one small. */
    uint8_t frag[3000], wire[10000];
    memset(frag, 'a', sizeof(frag));
    n = client_frame(wire, WS_OP_BINARY, false, frag, sizeof(frag));
    n += client_frame(wire + n, WS_OP_CONTINUATION, true, frag, sizeof(frag));
    assert_int_equal(verdict(true, 4096, wire, n), WS_CLOSE_TOO_BIG);
    /* Exactly the limit is fine; and the next message starts from zero. */
    n = client_frame(wire, WS_OP_BINARY, false, frag, 2048);
    n += client_frame(wire + n, WS_OP_CONTINUATION, true, frag, 2048);
    n += client_frame(wire + n, WS_OP_BINARY, true, frag, 3000);
    assert_int_equal(verdict(true, 4096, wire, n), 0);
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(ws_utf8_valid((const uint8_t *)"", 0));
    assert_true(ws_utf8_valid((const uint8_t *)"\xf0\x9f\x98\x80", 4));
    assert_false(ws_utf8_valid((const uint8_t *)"\xf0\x9f\x98", 3));     /* cut */
    assert_false(ws_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(ws_utf8_valid((const uint8_t *)"\xe0\x80\x80", 3));     /* overlong */
    assert_false(ws_utf8_valid((const uint8_t *)"\xff", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key_of_the_rfc_example),
        cmocka_unit_test(test_handshake_check),
        cmocka_unit_test(test_frame_header_length_classes),
        cmocka_unit_test(test_reader_unmasks_and_joins_fragments),
        cmocka_unit_test(test_reader_refuses_what_the_rfc_refuses),
        cmocka_unit_test(test_reader_refuses_a_message_over_its_limit_before_buffering),
        cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
