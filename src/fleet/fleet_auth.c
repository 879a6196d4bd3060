/*
 * fleet_auth.c - signing and checking the proof a request between nodes
 * carries (fleet_auth.h has the layout). HMAC-SHA256 and the constant-time
 * compare are nettle's.
 */
#include "fleet/fleet_auth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#define FLEET_AUTH_DOMAIN "gpubox-fleet-v1"
/* What every refusal starts with: a client that sent the headers learns
 * what they are for. */
#define FLEET_AUTH_REFUSED                                                                         \
    FLEET_FORWARDED_HEADER " and " FLEET_AUTH_HEADER " are for requests between the nodes of a "   \
                           "fleet, and a client sends neither: "

static void hex_of(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void hmac_line(struct hmac_sha256_ctx *ctx, const char *text)
{
    hmac_sha256_update(ctx, strlen(text), (const uint8_t *)text);
    hmac_sha256_update(ctx, 1, (const uint8_t *)"\n");
}

static void fleet_auth_mac(const unsigned char *key, size_t key_len, const char *node, int64_t ts,
                           const fleet_request *req, unsigned char mac[SHA256_DIGEST_SIZE])
{
    unsigned char digest[SHA256_DIGEST_SIZE];
    struct sha256_ctx body;
    sha256_init(&body);
    sha256_update(&body, req->body_len, (const uint8_t *)(req->body ? req->body : ""));
    sha256_digest(&body, sizeof(digest), digest);
    char body_hex[2 * SHA256_DIGEST_SIZE + 1];
    hex_of(digest, sizeof(digest), body_hex);
    char ts_text[24];
    snprintf(ts_text, sizeof(ts_text), "%" PRId64, ts);

    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, key_len, key);
    hmac_line(&ctx, FLEET_AUTH_DOMAIN);
    hmac_line(&ctx, node);
    hmac_line(&ctx, ts_text);
    hmac_line(&ctx, req->method);
    hmac_line(&ctx, req->path_query);
    hmac_line(&ctx, body_hex);
    hmac_line(&ctx, req->authorization ? req->authorization : "");
    hmac_sha256_digest(&ctx, SHA256_DIGEST_SIZE, mac);
    memset(&ctx, 0, sizeof(ctx)); /* it holds the key, padded */
}

void fleet_auth_sign(const unsigned char *key, size_t key_len, const char *node, int64_t ts,
                     const fleet_request *req, char out[FLEET_AUTH_VALUE_MAX])
{
    unsigned char mac[SHA256_DIGEST_SIZE];
    fleet_auth_mac(key, key_len, node, ts, req, mac);
    char sig[2 * SHA256_DIGEST_SIZE + 1];
    hex_of(mac, sizeof(mac), sig);
    snprintf(out, FLEET_AUTH_VALUE_MAX, "v1 node=%s ts=%" PRId64 " sig=%s", node, ts, sig);
}

int fleet_auth_parse(const char *value, char *node, int64_t *ts, unsigned char sig[32], gb_err *err)
{
    static const char form[] = "its form is 'v1 node=NAME ts=UNIX-SECONDS sig=64-HEX-DIGITS'";
    const char *p = value;
    if (strncmp(p, "v1 node=", 8) != 0)
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (version v1)", form);
    p += 8;
    const char *end = strchr(p, ' ');
    if (!end || end == p || (size_t)(end - p) >= FLEET_NODE_MAX)
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (the node)", form);
    char name[FLEET_NODE_MAX];
    memcpy(name, p, (size_t)(end - p));
    name[end - p] = '\0';
    gb_err bad = GB_ERR_INIT;
    if (fleet_node_name_check(name, &bad) < 0)
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (the node)", form);
    p = end;
    if (strncmp(p, " ts=", 4) != 0)
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (ts)", form);
    p += 4;
    int64_t t = 0;
    int digits = 0;
    if (p[0] == '0' && p[1] >= '0' && p[1] <= '9') /* one way to write a time */
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (ts)", form);
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 18) /* more than any time gpubox sees */
            return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (ts)", form);
        t = t * 10 + (*p - '0');
    }
    if (digits == 0 || strncmp(p, " sig=", 5) != 0)
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (ts)", form);
    p += 5;
    for (size_t i = 0; i < 32; i++) {
        int hi = hex_digit(p[2 * i]), lo = hi < 0 ? -1 : hex_digit(p[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (sig)", form);
        sig[i] = (unsigned char)(hi << 4 | lo);
    }
    if (p[64] != '\0')
        return err_set(err, ERR_FORBIDDEN, FLEET_AUTH_REFUSED "%s (sig)", form);
    memcpy(node, name, strlen(name) + 1);
    *ts = t;
    return 0;
}

int fleet_auth_check(const unsigned char *key, size_t key_len, const char *value,
                     const char *forwarded_by, int64_t now, const fleet_request *req, char *node,
                     gb_err *err)
{
    if (!value)
        return err_set(err, ERR_FORBIDDEN,
                       FLEET_AUTH_REFUSED "this request has " FLEET_FORWARDED_HEADER
                                          " without the proof that a node sent it");
    char name[FLEET_NODE_MAX];
    int64_t ts = 0;
    unsigned char sig[SHA256_DIGEST_SIZE];
    if (fleet_auth_parse(value, name, &ts, sig, err) < 0)
        return -1;
    if (!forwarded_by || strcmp(forwarded_by, name) != 0)
        return err_set(err, ERR_FORBIDDEN,
                       FLEET_AUTH_REFUSED "the proof is node %s's, but " FLEET_FORWARDED_HEADER
                                          " %s",
                       name, forwarded_by ? "names another node" : "is missing");
    if (ts < now - FLEET_AUTH_SKEW_S || ts > now + FLEET_AUTH_SKEW_S)
        return err_set(err, ERR_FORBIDDEN,
                       FLEET_AUTH_REFUSED "the proof's time is %" PRId64
                                          " s from this node's clock, more than the %d s "
                                          "allowed (keep the nodes' clocks in sync, e.g. with NTP)",
                       ts > now ? ts - now : now - ts, FLEET_AUTH_SKEW_S);
    unsigned char mac[SHA256_DIGEST_SIZE];
    fleet_auth_mac(key, key_len, name, ts, req, mac);
    if (!memeql_sec(mac, sig, sizeof(mac)))
        return err_set(err, ERR_FORBIDDEN,
                       FLEET_AUTH_REFUSED "the proof does not match this request (signed with "
                                          "another secret, or for another method, path, body or "
                                          "caller)");
    if (node)
        memcpy(node, name, strlen(name) + 1);
    return 0;
}
