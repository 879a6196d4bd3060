/*
 * fuzz_json_depth.c - the nesting scanner against jansson itself.
 *
 * Properties: no crash; the scanner never reads past the input; for every
 * text jansson accepts, the scanner's depth equals the depth of the parsed
 * tree (so the server's limit means what it says), and a limit stops the
 * count at limit + 1.
 */
#include "fuzz_util.h"

#include <jansson.h>

#include "http/json_depth.h"

static size_t tree_depth(const json_t *j)
{
    size_t deepest = 0;
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v)
        {
            size_t d = tree_depth(v);
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v)
        {
            size_t d = tree_depth(v);
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so ASan catches any read past the end. */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    size_t unlimited = http_json_depth(copy, size, (size_t)-2);
    size_t limited = http_json_depth(copy, size, 4);
    FUZZ_CHECK(limited == (unlimited > 4 ? 5 : unlimited), "limit 4 gave %zu of %zu", limited,
               unlimited);
    /* Duplicate keys refused, as the server does: with "last one wins" the
     * tree would lose a deeper first value the scanner rightly counted. */
    json_t *j =
        json_loadb(copy, size, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, NULL);
    if (j) {
        size_t tree = tree_depth(j);
        FUZZ_CHECK(tree == unlimited, "scanner says %zu, jansson's tree is %zu deep", unlimited,
                   tree);
        json_decref(j);
    }
    free(copy);
    return 0;
}
