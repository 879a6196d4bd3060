/*
 * proxy_cookie.c - the service proxy's cookie (proxy_cookie.h).
 */
#include "proxy/proxy_cookie.h"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static unsigned char cookie_key[32];
static pthread_once_t cookie_key_once = PTHREAD_ONCE_INIT;

static void cookie_key_draw(void)
{
    size_t got = 0;
    while (got < sizeof(cookie_key)) {
        ssize_t n = getrandom(cookie_key + got, sizeof(cookie_key) - got, 0);
        if (n <= 0)
            abort(); /* no randomness: no cookie may be trusted */
        got += (size_t)n;
    }
}

static void hex(const unsigned char *raw, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The MAC of a user's cookie, in hex (65 bytes). */
static void cookie_mac(long long expiry, int role, const char *name_hex, const char *set,
                       const char *service, char out[2 * SHA256_DIGEST_SIZE + 1])
{
    pthread_once(&cookie_key_once, cookie_key_draw);
    char text[512];
    snprintf(text, sizeof(text), "gpubox-service-cookie\n%lld\n%d\n%s\n%s\n%s\n", expiry, role,
             name_hex, set, service);
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, sizeof(cookie_key), cookie_key);
    hmac_sha256_update(&ctx, strlen(text), (const uint8_t *)text);
    unsigned char mac[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&ctx, sizeof(mac), mac);
    hex(mac, sizeof(mac), out);
}

int proxy_cookie_user(const caller *who, const char *set, const char *service, char *out,
                      size_t size)
{
    char name_hex[2 * USER_NAME_MAX + 1];
    hex((const unsigned char *)who->name, strlen(who->name), name_hex);
    long long expiry = (long long)time(NULL) + PROXY_COOKIE_TTL_S;
    char mac[2 * SHA256_DIGEST_SIZE + 1];
    cookie_mac(expiry, (int)who->role, name_hex, set, service, mac);
    int n = snprintf(out, size, "u.%lld.%d.%s.%s", expiry, (int)who->role, name_hex, mac);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int unhex(const char *s, size_t n, char *out, size_t size)
{
    if (n % 2 || n / 2 >= size)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v = 0;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (char)v;
    }
    out[n / 2] = '\0';
    return strlen(out) == n / 2 ? 0 : -1;
}

/* One cookie value: 1 user, 2 link, 0 not good. */
static int cookie_value_read(const char *v, size_t len, const char *set, const char *service,
                             caller *who, char *link, size_t link_size)
{
    char value[PROXY_COOKIE_MAX];
    if (len >= sizeof(value))
        return 0;
    memcpy(value, v, len);
    value[len] = '\0';
    if (strncmp(value, "l.", 2) == 0) {
        if (len - 2 >= link_size || len == 2)
            return 0;
        memcpy(link, value + 2, len - 2);
        link[len - 2] = '\0';
        return 2;
    }
    long long expiry = 0;
    int role = 0, used = 0;
    if (sscanf(value, "u.%lld.%d.%n", &expiry, &role, &used) != 2 || used == 0)
        return 0;
    const char *name_hex = value + used;
    const char *dot = strchr(name_hex, '.');
    if (!dot || expiry < (long long)time(NULL) || role <= USER_ROLE_NONE || role > USER_ROLE_ADMIN)
        return 0;
    char names[2 * USER_NAME_MAX + 1];
    snprintf(names, sizeof(names), "%.*s", (int)(dot - name_hex), name_hex);
    char mac[2 * SHA256_DIGEST_SIZE + 1];
    cookie_mac(expiry, role, names, set, service, mac);
    if (strlen(dot + 1) != strlen(mac) || !memeql_sec(dot + 1, mac, strlen(mac)) ||
        unhex(names, strlen(names), who->name, sizeof(who->name)) < 0)
        return 0;
    who->role = (enum users_role)role;
    return 1;
}

/* Calls fn for each "name=value" pair of a Cookie header. */
static int cookie_each(const char *header, const char *set, const char *service, caller *who,
                       char *link, size_t link_size)
{
    static const char name[] = PROXY_COOKIE_NAME "=";
    int best = 0;
    for (const char *p = header; p && *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        size_t n = strcspn(p, ";");
        if (n > sizeof(name) - 1 && strncmp(p, name, sizeof(name) - 1) == 0) {
            caller c = {0};
            char l[128] = "";
            int got = cookie_value_read(p + sizeof(name) - 1, n - (sizeof(name) - 1), set, service,
                                        &c, l, sizeof(l));
            if (got == 1) {
                *who = c;
                return 1;
            }
            if (got == 2 && !best) {
                snprintf(link, link_size, "%s", l);
                best = 2;
            }
        }
        p += n;
    }
    return best;
}

int proxy_cookie_read(const char *header, const char *set, const char *service, caller *who,
                      char *link, size_t link_size)
{
    if (!header)
        return 0;
    return cookie_each(header, set, service, who, link, link_size);
}

bool proxy_cookie_strip(const char *header, char *out, size_t size)
{
    static const char name[] = PROXY_COOKIE_NAME "=";
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = header; *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        size_t n = strcspn(p, ";");
        while (n && p[n - 1] == ' ')
            n--;
        if (n && strncmp(p, name, sizeof(name) - 1) != 0 && used + n + 3 < size) {
            used +=
                (size_t)snprintf(out + used, size - used, "%s%.*s", used ? "; " : "", (int)n, p);
        }
        p += strcspn(p, ";");
    }
    return used > 0;
}
