/*
 * fuzz_rs_spec.c - a replica-set create body as the server and the
 * handlers read it: the nesting check, the body parse (duplicate keys
 * refused), the typed field helpers, replicaset_spec_from_json, and the one
 * create parser (replicaset_create_request_parse) of both route families,
 * and the body as a patch (replicaset_patch_request_parse, each family)
 * applied to a fixed spec (replicaset_spec_patch).
 *
 * Properties: nothing crashes or leaks; a spec that parses prints to JSON
 * that parses again into a spec that prints the same (the store keeps the
 * printed form and reads it back for history and rollback).
 */
#include "fuzz_util.h"

#include <jansson.h>

#include "http/json_depth.h"
#include "http/request.h"
#include "service/replicaset/patch_request.h"
#include "service/replicaset/request.h"
#include "service/replicaset/spec.h"
#include "util/json.h"

static void fuzz_fields(const json_t *body)
{
    gb_err err;
    const char *s = NULL;
    long long n = 0;
    bool b = false;
    const char **list = NULL;
    size_t count = 0;
    json_t *obj = NULL;
    json_field_string(body, NULL, "replicaSetName", &s, true, &err);
    json_field_int(body, NULL, "gpuCount", &n, false, &err);
    json_field_bool(body, NULL, "overwrite", &b, false, &err);
    if (json_field_string_array(body, NULL, "cmd", &list, &count, false, &err) == 1)
        free(list);
    json_field_object(body, NULL, "labels", &obj, false, &err);
}

/* The body as a patch of each family, applied to a small spec: a patch
 * that applies gives a spec that prints. */
static void fuzz_patch(const json_t *body)
{
    gb_err err;
    json_t *base_json = json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "imageName", "img:1", "env",
                                  "A=1", "binds", "src", "data", "dest", "/d");
    replicaset_spec base = {0};
    FUZZ_CHECK(replicaset_spec_from_json(base_json, NULL, &base, &err) == 0, "the base spec: %s",
               err.msg);
    for (int family = RS_PATCH_REPLICASET; family <= RS_PATCH_CONTAINERS_VOLUME; family++) {
        replicaset_patch_request pr;
        if (replicaset_patch_request_parse(body, (enum replicaset_patch_family)family, &pr, &err) <
            0)
            continue;
        FUZZ_CHECK(json_is_object(pr.body), "a parsed patch is not an object");
        replicaset_spec out = {0};
        bool changed = false;
        if (replicaset_spec_patch(&base, &pr, &out, &changed, &err) == 0) {
            json_t *printed = replicaset_spec_to_json(&out);
            FUZZ_CHECK(printed, "a patched spec did not print");
            json_decref(printed);
            replicaset_spec_free(&out);
        }
        replicaset_patch_request_free(&pr);
    }
    replicaset_spec_free(&base);
    json_decref(base_json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (http_json_depth((const char *)data, size, HTTP_JSON_DEPTH_MAX) > HTTP_JSON_DEPTH_MAX)
        return 0;                          /* the server refuses these before any handler */
    char *text = fuzz_cstring(data, size); /* the server NUL-terminates bodies */
    http_request req = {.body = text, .body_len = size};
    json_t *body = NULL;
    if (req_json_body(&req, &body, NULL) == 0) {
        fuzz_fields(body);
        static const char *const also[] = {"replicaSetName", NULL};
        replicaset_spec spec = {0};
        gb_err err;
        if (replicaset_spec_from_json(body, also, &spec, &err) == 0) {
            json_t *printed = replicaset_spec_to_json(&spec);
            FUZZ_CHECK(printed, "a valid spec did not print");
            replicaset_spec again = {0};
            int rc = replicaset_spec_from_json(printed, NULL, &again, &err);
            FUZZ_CHECK(rc == 0, "the printed spec does not parse: %s", err.msg);
            json_t *printed2 = replicaset_spec_to_json(&again);
            FUZZ_CHECK(json_equal(printed, printed2), "printing is not stable");
            json_decref(printed2);
            json_decref(printed);
            replicaset_spec_free(&again);
            replicaset_spec_free(&spec);
        }
        for (int family = RS_CREATE_REPLICASET; family <= RS_CREATE_CONTAINERS; family++) {
            replicaset_create_request cr;
            if (replicaset_create_request_parse(body, (enum replicaset_create_family)family, true,
                                                &cr, &err) == 0)
                FUZZ_CHECK(cr.name && cr.spec.image, "a parsed request lacks its name or image");
            replicaset_create_request_free(&cr);
        }
        fuzz_patch(body);
    }
    http_request_clear(&req);
    free(text);
    return 0;
}
