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

bool keys_is_replicaset_record(const char *key)
{
    size_t plen = strlen(KEYS_REPLICASETS);
    return strncmp(key, KEYS_REPLICASETS, plen) == 0 && key[plen] && !strchr(key + plen, '/');
}
