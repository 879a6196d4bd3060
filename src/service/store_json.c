/*
 * store_json.c - one store record as JSON (see store_json.h).
 */
#include "service/store_json.h"

#include "util/cleanup.h"

int store_get_json(store *s, const char *key, const char *what, json_t **out, int64_t *mod_revision,
                   gb_err *err)
{
    *out = NULL;
    _cleanup_(store_kv_free) store_kv kv = {0};
    int found = store_get(s, key, &kv, err);
    if (found <= 0)
        return found;
    json_error_t jerr;
    *out = json_loads(kv.value, 0, &jerr);
    if (!*out)
        return err_set(err, ERR_INTERNAL, "%s is not JSON: %s", what, jerr.text);
    if (mod_revision)
        *mod_revision = kv.mod_revision;
    return 1;
}
