/*
 * fuzz_size.c - human sizes ("20GB", "1.5tb") as volume and memory fields
 * carry them.
 *
 * Properties: no crash; an accepted size is within SIZE_MAX_BYTES; its
 * printed form parses again to a size within 1% (size_format rounds to the
 * largest unit that keeps the value "exact-ish").
 */
#include "fuzz_util.h"

#include "util/size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    uint64_t bytes = 0;
    gb_err err;
    if (size_parse(text, &bytes, &err) == 0) {
        FUZZ_CHECK(bytes <= SIZE_MAX_BYTES, "'%s' gave %llu bytes", text,
                   (unsigned long long)bytes);
        char printed[64];
        size_format(bytes, printed, sizeof(printed));
        uint64_t again = 0;
        FUZZ_CHECK(size_parse(printed, &again, &err) == 0, "'%s' printed as '%s': %s", text,
                   printed, err.msg);
        uint64_t diff = again > bytes ? again - bytes : bytes - again;
        FUZZ_CHECK(diff <= bytes / 100 + 1, "'%s' = %llu printed as '%s' = %llu", text,
                   (unsigned long long)bytes, printed, (unsigned long long)again);
    }
    free(text);
    return 0;
}
