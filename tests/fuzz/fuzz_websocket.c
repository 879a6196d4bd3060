/*
 * fuzz_websocket.c - the WebSocket reader (http/websocket.h) on bytes from
 * a peer, as the terminal's pump feeds it.
 *
 * The first input byte picks the side (client's frames or server's) and
 * how the rest is cut into reads; the rest is the wire. Properties: no
 * crash, no read past the input; a message handed out is never longer
 * than the limit (data) or 125 bytes (control); a text message is UTF-8;
 * after a refusal the reader stays refused with a close code of the RFC;
 * and cutting the same bytes into other reads gives the same messages.
 */
#include "fuzz_util.h"

#include "http/websocket.h"

#define FUZZ_WS_LIMIT 4096

/* Feed data in reads of `step` bytes (0: all at once); a digest of what
 * came out, the count of messages, and the final verdict. */
static void run(const uint8_t *data, size_t size, bool from_client, size_t step, uint64_t *digest,
                size_t *count, int *verdict)
{
    ws_reader r;
    ws_reader_init(&r, from_client, FUZZ_WS_LIMIT);
    uint64_t h = 1469598103934665603ull;
    size_t msgs = 0;
    int last = 0;
    size_t off = 0;
    while (off < size && last >= 0) {
        size_t n = step ? (size - off < step ? size - off : step) : size - off;
        ws_reader_feed(&r, data + off, n);
        off += n;
        ws_message m;
        while ((last = ws_reader_next(&r, &m)) == 1) {
            bool control = m.op & 0x08;
            FUZZ_CHECK(control ? m.len <= WS_CONTROL_MAX : m.len <= FUZZ_WS_LIMIT,
                       "message of %zu bytes (op %d)", m.len, (int)m.op);
            if (m.op == WS_OP_TEXT)
                FUZZ_CHECK(ws_utf8_valid(m.data, m.len), "text message not UTF-8");
            h = (h ^ (uint64_t)m.op) * 1099511628211ull;
            for (size_t i = 0; i < m.len; i++)
                h = (h ^ m.data[i]) * 1099511628211ull;
            msgs++;
        }
    }
    if (last < 0) {
        FUZZ_CHECK(r.fail_code == WS_CLOSE_PROTOCOL || r.fail_code == WS_CLOSE_INVALID_DATA ||
                       r.fail_code == WS_CLOSE_TOO_BIG,
                   "refused with close code %u", r.fail_code);
        ws_message m;
        FUZZ_CHECK(ws_reader_next(&r, &m) == -1, "a refused reader went on");
    }
    ws_reader_free(&r);
    *digest = h;
    *count = msgs;
    *verdict = last < 0 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool from_client = data[0] & 1;
    size_t step = (size_t)(data[0] >> 1) % 17 + 1;
    uint8_t *copy = malloc(size - 1 ? size - 1 : 1); /* exact size: ASan sees overreads */
    if (!copy)
        abort();
    memcpy(copy, data + 1, size - 1);
    uint64_t d1, d2;
    size_t c1, c2;
    int v1, v2;
    run(copy, size - 1, from_client, 0, &d1, &c1, &v1);
    run(copy, size - 1, from_client, step, &d2, &c2, &v2);
    /* A refusal may come at a different read, after a different number of
     * messages; a stream taken whole must give the same messages. */
    if (v1 == 0 && v2 == 0)
        FUZZ_CHECK(d1 == d2 && c1 == c2, "reads of %zu bytes gave other messages", step);
    FUZZ_CHECK(v1 == v2, "the verdict depends on how reads cut the bytes");
    free(copy);
    return 0;
}
