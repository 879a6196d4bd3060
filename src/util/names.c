/*
 * names.c - validation of replica-set and volume names (see names.h).
 */
#include "util/names.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool name_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* name with every '-' made '_': the name the refusal suggests. */
static void name_dashes_to_underscores(const char *name, char *out, size_t outsz)
{
    size_t i = 0;
    for (; name[i] && i + 1 < outsz; i++)
        out[i] = name[i] == '-' ? '_' : name[i];
    out[i] = '\0';
}

/* The shared rules; the codes differ between replica sets and volumes.
 * why_dash says, in a user's words, why a '-' is refused: people coming
 * from Docker type one first, so the refusal names the same name with '_'. */
static int name_check(const char *what, const char *name, const char *why_dash, int code_empty,
                      int code_dash, gb_err *err)
{
    if (!name || !*name)
        return err_set(err, code_empty, "%s name is empty", what);
    size_t len = strlen(name);
    if (strchr(name, '-')) {
        char suggested[NAME_MAX_LEN + 2];
        name_dashes_to_underscores(name, suggested, sizeof(suggested));
        return err_set(err, code_dash, "%s name '%.64s' cannot contain '-': %s; use '%s' instead",
                       what, name, why_dash, suggested);
    }
    if (len > NAME_MAX_LEN)
        return err_set(err, ERR_INVALID_NAME, "%s name is %zu characters long; at most %d allowed",
                       what, len, NAME_MAX_LEN);
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return err_set(err, ERR_INVALID_NAME, "%s name '%s' is not allowed", what, name);
    for (size_t i = 0; i < len; i++) {
        if (!name_char_ok(name[i])) {
            unsigned char c = (unsigned char)name[i];
            if (c >= 0x20 && c < 0x7f)
                return err_set(err, ERR_INVALID_NAME,
                               "%s name '%s' contains '%c'; use only letters, digits, '_' and '.'",
                               what, name, c);
            return err_set(err, ERR_INVALID_NAME,
                           "%s name contains the byte 0x%02x at position %zu; use only letters, "
                           "digits, '_' and '.'",
                           what, c, i);
        }
    }
    return 0;
}

int name_check_replicaset(const char *name, gb_err *err)
{
    return name_check("replica set", name,
                      "gpubox names each version's container NAME-VERSION (train-1, train-2) and "
                      "finds the version after the '-'",
                      ERR_NAME_EMPTY, ERR_NAME_HAS_DASH, err);
}

int name_check_volume(const char *name, gb_err *err)
{
    if (name && name[0] == '/')
        return err_set(err, ERR_VOLUME_NAME_SLASH,
                       "volume name '%.64s' begins with '/'; a volume name is a name, not a path",
                       name);
    return name_check("volume", name,
                      "gpubox keeps a volume's working files under the name followed by '-', and "
                      "gpu-docker-api's clients expect names without it",
                      ERR_VOLUME_NAME_EMPTY, ERR_VOLUME_NAME_HAS_DASH, err);
}

int name_split_versioned(const char *container_name, char *base, int *version)
{
    const char *dash = container_name ? strrchr(container_name, '-') : NULL;
    if (!dash || dash == container_name || dash[1] == '\0')
        return -1;
    size_t base_len = (size_t)(dash - container_name);
    if (base_len > NAME_MAX_LEN)
        return -1;
    long v = 0;
    for (const char *p = dash + 1; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || dash[1] == '0')
        return -1;
    memcpy(base, container_name, base_len);
    base[base_len] = '\0';
    if (name_check_replicaset(base, NULL) != 0)
        return -1;
    *version = (int)v;
    return 0;
}
