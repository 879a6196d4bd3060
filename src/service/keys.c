/*
 * keys.c - building store keys; the layout is described in keys.h.
 */
#include "service/keys.h"

#include <stdio.h>
#include <string.h>

static char *keys_format(char *buf, size_t size, int n)
{
    return n >= 0 && (size_t)n < size ? buf : NULL;
}

char *keys_replicaset(char *buf, size_t size, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_REPLICASETS "%s", name));
}

char *keys_replicaset_history(char *buf, size_t size, const char *name, long version)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_HISTORY "%s/%010ld", name, version));
}

char *keys_replicaset_history_prefix(char *buf, size_t size, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_HISTORY "%s/", name));
}

char *keys_volume(char *buf, size_t size, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_VOLUMES "%s", name));
}

char *keys_volume_history(char *buf, size_t size, const char *name, long version)
{
    return keys_format(buf, size,
                       snprintf(buf, size, KEYS_VOLUME_HISTORY "%s/%010ld", name, version));
}

char *keys_volume_history_prefix(char *buf, size_t size, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_VOLUME_HISTORY "%s/", name));
}

char *keys_operation(char *buf, size_t size, const char *id)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_OPERATIONS "%s", id));
}

char *keys_health(char *buf, size_t size, const char *uuid)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_HEALTH "%s", uuid));
}

char *keys_idle(char *buf, size_t size, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_IDLE "%s", name));
}

char *keys_image(char *buf, size_t size, const char *ref)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_IMAGES "%s", ref));
}

const char *keys_image_ref(const char *key)
{
    size_t n = strlen(KEYS_IMAGES);
    return strncmp(key, KEYS_IMAGES, n) == 0 && key[n] ? key + n : NULL;
}

char *keys_event(char *buf, size_t size, long long ms, unsigned seq)
{
    return keys_format(buf, size, snprintf(buf, size, KEYS_EVENTS "%015lld-%06u", ms, seq));
}

bool keys_is_replicaset_record(const char *key)
{
    size_t plen = strlen(KEYS_REPLICASETS);
    return strncmp(key, KEYS_REPLICASETS, plen) == 0 && key[plen] && !strchr(key + plen, '/');
}

char *keys_user(char *buf, size_t size, const char *up, const char *name)
{
    return keys_format(buf, size, snprintf(buf, size, "%s" KEYS_ACCOUNTS_USERS "%s", up, name));
}

char *keys_quota_defaults(char *buf, size_t size, const char *up)
{
    return keys_format(buf, size, snprintf(buf, size, "%s" KEYS_ACCOUNTS_DEFAULTS, up));
}

char *keys_ledger(char *buf, size_t size, const char *up, const char *owner)
{
    return keys_format(buf, size, snprintf(buf, size, "%s" KEYS_ACCOUNTS_LEDGER "%s", up, owner));
}

char *keys_acct(char *buf, size_t size, const char *up, const char *owner, long long to_ms,
                const char *set)
{
    return keys_format(
        buf, size,
        snprintf(buf, size, "%s" KEYS_ACCOUNTS_ACCT "%s/%013lld-%s", up, owner, to_ms, set));
}

char *keys_acct_prefix(char *buf, size_t size, const char *up, const char *owner)
{
    return keys_format(buf, size,
                       snprintf(buf, size, "%s" KEYS_ACCOUNTS_ACCT "%s%s", up, owner ? owner : "",
                                owner ? "/" : ""));
}

char *keys_acct_sum(char *buf, size_t size, const char *up, const char *owner)
{
    return keys_format(buf, size, snprintf(buf, size, "%s" KEYS_ACCOUNTS_SUM "%s", up, owner));
}

char *keys_acct_day(char *buf, size_t size, const char *up, const char *owner, long long day_ms)
{
    if (day_ms < 0)
        return keys_format(buf, size, snprintf(buf, size, "%s" KEYS_ACCOUNTS_DAY "%s/", up, owner));
    return keys_format(buf, size,
                       snprintf(buf, size, "%s" KEYS_ACCOUNTS_DAY "%s/%013lld", up, owner, day_ms));
}

bool keys_account_owner(const char *key, char *owner, size_t size)
{
    const char *roots[] = {KEYS_ACCOUNTS_LEDGER, KEYS_ACCOUNTS_ACCT, KEYS_ACCOUNTS_SUM,
                           KEYS_ACCOUNTS_DAY};
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
        const char *at = strstr(key, roots[i]);
        if (!at)
            continue;
        const char *o = at + strlen(roots[i]);
        size_t n = strcspn(o, "/");
        snprintf(owner, size, "%.*s", (int)n, o);
        return n > 0;
    }
    return false;
}
