/*
 * fuzz_names.c - replica-set and volume names, and container names "foo-N".
 *
 * Properties: no crash; an accepted name follows DESIGN.md section 4
 * (1-63 characters of [a-zA-Z0-9_.], not "." or ".."); a versioned name
 * splits into a valid base and a version of at least 1 that print back to
 * the same container name.
 */
#include "fuzz_util.h"

#include <ctype.h>

#include "util/names.h"

static void check_rules(const char *name)
{
    size_t len = strlen(name);
    FUZZ_CHECK(len >= 1 && len <= NAME_MAX_LEN, "'%s' accepted with length %zu", name, len);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(isalnum((unsigned char)name[i]) || name[i] == '_' || name[i] == '.',
                   "'%s' accepted with character 0x%02x", name, (unsigned char)name[i]);
    FUZZ_CHECK(strcmp(name, ".") && strcmp(name, ".."), "'%s' accepted", name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *name = fuzz_cstring(data, size);
    gb_err err;
    if (name_check_replicaset(name, &err) == 0)
        check_rules(name);
    if (name_check_volume(name, &err) == 0)
        check_rules(name);
    char base[NAME_MAX_LEN + 1];
    int version = 0;
    if (name_split_versioned(name, base, &version) == 0) {
        FUZZ_CHECK(version >= 1, "'%s' split with version %d", name, version);
        FUZZ_CHECK(name_check_replicaset(base, &err) == 0, "'%s' split into bad base '%s'", name,
                   base);
        char joined[NAME_MAX_LEN + 16];
        snprintf(joined, sizeof(joined), "%s-%d", base, version);
        FUZZ_CHECK(strcmp(joined, name) == 0, "'%s' split into '%s' and %d", name, base, version);
    }
    free(name);
    return 0;
}
